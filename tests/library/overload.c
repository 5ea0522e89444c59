/* SPDX-License-Identifier: MIT */
/*
 * Nothing is lost, and nothing leaks, when memory or the executor queue
 * runs out (overload):
 *
 *  - The caller's memory runs out (a child process under RLIMIT_AS adds
 *    timers until its own malloc fails): add never allocates, so it never
 *    fails, and every timer added fires exactly once.
 *  - The library's own allocations fail (malloc is interposed here and made
 *    to fail from its k-th call on, for every k): init, create and watching
 *    a new key return TW_ENOMEM, leave nothing half-built and leak nothing.
 *  - The executor queue is full: the reaper runs the callback itself
 *    (back-pressure); every timer runs exactly once.
 *
 * The first two need the real allocator, so they are skipped (and say so)
 * under AddressSanitizer, ThreadSanitizer and valgrind.
 */
#define _GNU_SOURCE /* __libc_malloc and friends, RTLD_NEXT */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "virtual_clock.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TW_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TW_SANITIZED 1
#endif
#endif
#ifndef TW_SANITIZED
#define TW_SANITIZED 0
#endif

static bool under_valgrind(void)
{
	const char *preload = getenv("LD_PRELOAD");

	return preload && strstr(preload, "vgpreload");
}

/* ---- an allocator that fails on request ---- */

#if !TW_SANITIZED
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void __libc_free(void *p);

static atomic_long alloc_calls;     /* while armed */
static atomic_long fail_from = -1;  /* fail calls numbered >= this; -1: never */
static atomic_long live;            /* allocations minus frees while counting */
static atomic_bool counting;

static bool should_fail(void)
{
	long from = atomic_load(&fail_from);

	if (from < 0 || atomic_fetch_add(&alloc_calls, 1) < from)
		return false;
	errno = ENOMEM; /* as malloc does (glibc's thread start checks it) */
	return true;
}

static void *counted(void *p)
{
	if (p && atomic_load(&counting))
		atomic_fetch_add(&live, 1);
	return p;
}

void *malloc(size_t size)
{
	return should_fail() ? NULL : counted(__libc_malloc(size));
}

void *calloc(size_t n, size_t size)
{
	return should_fail() ? NULL : counted(__libc_calloc(n, size));
}

void *realloc(void *p, size_t size)
{
	if (should_fail())
		return NULL;
	if (!p)
		return counted(__libc_malloc(size));
	return __libc_realloc(p, size);
}

void *aligned_alloc(size_t align, size_t size)
{
	return should_fail() ? NULL : counted(__libc_memalign(align, size));
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p = should_fail() ? NULL : counted(__libc_memalign(align, size));

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void free(void *p)
{
	if (p && atomic_load(&counting))
		atomic_fetch_sub(&live, 1);
	__libc_free(p);
}

static void arm(long k)
{
	atomic_store(&live, 0);
	atomic_store(&counting, true);
	atomic_store(&alloc_calls, 0);
	atomic_store(&fail_from, k);
}

static void disarm(void)
{
	atomic_store(&fail_from, -1);
}

static long stop_counting(void)
{
	atomic_store(&counting, false);
	return atomic_load(&live);
}
#endif

/* ---- the caller's memory runs out ---- */

struct conn {
	struct tw_timer idle;
	char state[88]; /* a small connection object */
};

static long fired_in_child;

static void conn_idle(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	fired_in_child++;
	__builtin_memset(tw_container_of(t, struct conn, idle)->state, 0, 1);
	free(tw_container_of(t, struct conn, idle));
}

static long vm_bytes(void)
{
	long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages * sysconf(_SC_PAGESIZE);
}

static int child_fill_memory(void)
{
	struct tw_wheel w;
	struct rlimit lim;
	long added = 0;
	uint64_t seed = 12345;

	if (tw_wheel_init(&w, 1, 20, 0, TW_MODE_EXACT))
		return 2;
	/* 192 MB more than now: room for about 1.5 million connections. */
	lim.rlim_cur = lim.rlim_max = (rlim_t)(vm_bytes() + (192L << 20));
	if (setrlimit(RLIMIT_AS, &lim))
		return 3;
	for (;;) {
		struct conn *c = malloc(sizeof(*c));

		if (!c)
			break;
		tw_timer_init(&c->idle, conn_idle);
		if (tw_wheel_add(&w, &c->idle, 1 + test_rand_below(&seed, 600000)) != 0)
			return 4;
		added++;
	}
	if ((long)tw_wheel_count(&w) != added || added < 100000)
		return 5;
	if (tw_wheel_advance(&w, 600000) != added || fired_in_child != added)
		return 6;
	if (tw_wheel_count(&w) != 0 || tw_wheel_check(&w, NULL, 0) != TW_OK)
		return 7;
	tw_wheel_destroy(&w);
	printf("  %ld timers added until malloc failed; %ld fired\n", added,
	       fired_in_child);
	fflush(stdout);
	return 0;
}

static void test_adds_until_callers_memory_runs_out(void)
{
	pid_t pid;
	int status = 0;

	if (TW_SANITIZED || under_valgrind()) {
		printf("  skipped: needs the real allocator and address space\n");
		return;
	}
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(child_fill_memory());
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
}

/* ---- the library's allocations fail ---- */

#if !TW_SANITIZED
struct op {
	struct tw_delayed_op base;
	struct tw_watch watch[2];
};

static bool never_ready(struct tw_delayed_op *op)
{
	(void)op;
	return false;
}

static void op_done(struct tw_delayed_op *op)
{
	(void)op;
}

/* What is built, one of each kind, behind one signature. */
static struct tw_wheel built_wheel;
static struct tw_service *built_service;
static struct tw_purgatory *built_purgatory;

static int create_wheel(void)
{
	return tw_wheel_init(&built_wheel, 1, 64, 0, TW_MODE_EXACT);
}

static void destroy_wheel(void)
{
	tw_wheel_destroy(&built_wheel);
}

static int create_service(void)
{
	struct tw_service_config cfg = { .executors = 2, .shards = 3 };
	int rc;

	built_service = (struct tw_service *)&cfg; /* must come back NULL */
	rc = tw_service_create(&built_service, &cfg);
	CHECK(rc == 0 || built_service == NULL);
	return rc;
}

static void destroy_service(void)
{
	tw_service_destroy(built_service);
}

static int create_purgatory(void)
{
	struct tw_purgatory_config cfg = { .shards = 4 };
	int rc;

	built_purgatory = (struct tw_purgatory *)&cfg;
	rc = tw_purgatory_create(&built_purgatory, &cfg);
	CHECK(rc == 0 || built_purgatory == NULL);
	return rc;
}

static void destroy_purgatory(void)
{
	tw_purgatory_destroy(built_purgatory);
}

/* Fail the k-th allocation of create() and every later one, for k = 0, 1,
 * ... until create() no longer allocates that much: each failure must be
 * TW_ENOMEM (or TW_EAGAIN for a thread) with nothing left allocated, the
 * success too once destroyed. Returns how many k failed. */
static int fail_each_allocation(int (*create)(void), void (*destroy)(void))
{
	int failures = 0;

	for (long k = 0;; k++) {
		int rc;

		arm(k);
		rc = create();
		disarm();
		if (rc == 0)
			destroy();
		CHECK_EQ(stop_counting(), 0);
		if (rc == 0)
			return failures;
		CHECK(rc == TW_ENOMEM || rc == TW_EAGAIN);
		failures++;
	}
}

/* A service's owner id is recorded in a registry whose pages (512 ids
 * each) are allocated as ids reach them and freed when the last service
 * goes, so with no other service alive a create's last allocation is its
 * id's page. A create that cannot have it fails for memory, TW_ENOMEM,
 * with nothing left allocated (it was TW_EAGAIN, the answer for a thread
 * that would not start). A manual service, which starts no thread. */
static int create_manual_service(void)
{
	struct tw_service_config cfg = { .manual = true, .executors = 0, .shards = 1 };

	built_service = (struct tw_service *)&cfg; /* must come back NULL */
	return tw_service_create(&built_service, &cfg);
}

static void test_an_owner_id_without_memory_for_its_page_is_enomem(void)
{
	long plain;

	if (under_valgrind()) {
		printf("  skipped under valgrind\n");
		return;
	}
	arm(LONG_MAX);
	CHECK_EQ(create_manual_service(), 0);
	plain = atomic_load(&alloc_calls);
	disarm();
	destroy_service();
	CHECK_EQ(stop_counting(), 0);
	arm(plain - 1); /* the last one fails: the page */
	CHECK_EQ(create_manual_service(), TW_ENOMEM);
	disarm();
	CHECK(built_service == NULL);
	CHECK_EQ(stop_counting(), 0);
	CHECK_EQ(create_manual_service(), 0);
	destroy_service();
}

/* A poll while every allocation fails: the batch of expiries cannot grow,
 * yet each scan has the room create made, so the poll runs every due timer
 * and returns (it retried the same deferred timer for ever, 18 million
 * failed allocations in 3 s). In a child, with an alarm for the hang. */
static atomic_int oom_ran;

static void oom_run(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	atomic_fetch_add(&oom_ran, 1);
}

static int child_poll_without_memory(void)
{
	enum { N = 1000 };
	static struct tw_service_timer t[N];
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	int64_t n;

	cfg.manual = true;
	cfg.tick = 1;
	cfg.clock.now = virtual_clock;
	set_clock(0);
	if (tw_service_create(&svc, &cfg) != TW_OK)
		return 2;
	for (int i = 0; i < N; i++) {
		tw_service_timer_init(&t[i], oom_run);
		if (tw_service_add(svc, &t[i], 5) != TW_OK)
			return 3;
	}
	set_clock(10);
	alarm(10);
	arm(0);
	n = tw_service_poll(svc);
	disarm();
	stop_counting();
	alarm(0);
	tw_service_destroy(svc);
	return n == N && atomic_load(&oom_ran) == N ? 0 : 4;
}

static void test_poll_without_memory_runs_everything_due(void)
{
	pid_t pid;
	int status = 0;

	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(child_poll_without_memory());
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status)); /* not killed by the alarm: it returned */
	CHECK_EQ(WEXITSTATUS(status), 0);
}

static void test_allocation_failures(void)
{
	int rc;

	if (under_valgrind()) {
		printf("  skipped under valgrind\n");
		return;
	}
	CHECK(fail_each_allocation(create_wheel, destroy_wheel) >= 2);
	/* glibc keeps the stacks (and thread-local blocks) of joined threads
	 * for reuse: start and stop threads once so that this cache is not
	 * counted as ours. */
	CHECK_EQ(create_service(), 0);
	destroy_service();
	CHECK(fail_each_allocation(create_service, destroy_service) >= 5);
	CHECK(fail_each_allocation(create_purgatory, destroy_purgatory) >= 5);

	/* Watching a key no one watches yet allocates its list, unless the
	 * key is short and its shard's own list is free: keys longer than
	 * any shard's own list always allocate. */
	{
		struct tw_purgatory_config cfg = { .shards = 4 };
		struct tw_purgatory *p = NULL;
		struct op a = { 0 };
		static const char first[] = "first key, longer than a shard's own list holds";
		static const char second[] = "second key, longer than a shard's own list holds";
		const void *keys[2] = { first, second };
		size_t lens[2] = { sizeof first - 1, sizeof second - 1 };

		CHECK_EQ(tw_purgatory_create(&p, &cfg), 0);
		static const struct tw_op_ops never_ops = { never_ready, op_done,
							     NULL, NULL, NULL };

		for (long k = 0; k < 2; k++) {
			/* a failed watch let go of the op: a new init each
			 * time (one watch per tw_op_init) */
			CHECK_EQ(tw_op_init(&a.base, 1000000000, &never_ops, NULL), 0);
			arm(k);
			rc = tw_purgatory_try_complete_else_watch(p, &a.base, keys, lens, 2,
								  a.watch);
			disarm();
			stop_counting();
			CHECK_EQ(rc, TW_ENOMEM);
			CHECK_EQ(tw_purgatory_watched(p), 0);
			CHECK_EQ(tw_purgatory_delayed(p), 0);
		}
		/* Memory is back: the same op, made again, watches both
		 * keys; without a new init it is refused. */
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &a.base, keys, lens, 2, a.watch),
			 TW_EBUSY);
		CHECK_EQ(tw_op_init(&a.base, 1000000000, &never_ops, NULL), 0);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &a.base, keys, lens, 2, a.watch), 0);
		CHECK_EQ(tw_purgatory_watched(p), 2);
		CHECK_EQ(tw_purgatory_cancel_for_key(p, first, lens[0], NULL), 1);
		tw_purgatory_destroy(p);
		tw_op_destroy(&a.base);
	}
	/* A short key on a shard whose own list is free needs no memory: it
	 * watches with every allocation failing, and a second short key on
	 * the same shard, which needs a list of its own, fails cleanly. */
	{
		struct tw_purgatory_config cfg = { .shards = 1 };
		struct tw_purgatory *p = NULL;
		struct op a = { 0 }, b = { 0 };
		const void *key_a[1] = { "short" };
		const void *key_b[1] = { "other" };
		size_t len[1] = { 5 };
		static const struct tw_op_ops never_ops = { never_ready, op_done,
							     NULL, NULL, NULL };

		CHECK_EQ(tw_purgatory_create(&p, &cfg), 0);
		CHECK_EQ(tw_op_init(&a.base, 1000000000, &never_ops, NULL), 0);
		CHECK_EQ(tw_op_init(&b.base, 1000000000, &never_ops, NULL), 0);
		arm(0);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &a.base, key_a, len, 1, a.watch), 0);
		rc = tw_purgatory_try_complete_else_watch(p, &b.base, key_b, len, 1, b.watch);
		disarm();
		stop_counting();
		CHECK_EQ(rc, TW_ENOMEM);
		CHECK_EQ(tw_purgatory_watched(p), 1);
		CHECK_EQ(tw_purgatory_delayed(p), 1);
		CHECK_EQ(tw_purgatory_check_and_complete(p, "other", 5), 0);
		CHECK_EQ(tw_purgatory_cancel_for_key(p, "short", 5, NULL), 1);
		CHECK_EQ(tw_purgatory_watched(p), 0);
		tw_purgatory_destroy(p);
		tw_op_destroy(&a.base);
		tw_op_destroy(&b.base);
	}
}

/*
 * A key check with no memory at all tries every op watched on the key
 * (purgatory.h: "Try every op watched on the key"). Its
 * snapshot held 128 ops without memory and grew for more; with every
 * allocation failing it tried the first 128 of 300, left 172 to their
 * timeouts and returned 128, saying nothing.
 */
static atomic_bool all_ready;

struct counted_op {
	struct tw_delayed_op base;
	struct tw_watch watch;
	atomic_int completes, releases;
};

static bool ready_when_told(struct tw_delayed_op *op)
{
	return atomic_load(&all_ready) && tw_op_force_complete(op);
}

static void count_complete(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct counted_op, base)->completes, 1);
}

static void count_release(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct counted_op, base)->releases, 1);
}

static void test_a_key_check_without_memory_tries_every_op(void)
{
	enum { N = 300 };
	static const struct tw_op_ops ops = { ready_when_told, count_complete,
					      count_complete, count_release, NULL };
	static struct counted_op o[N];
	const void *keys[1] = { "partition-0" };
	size_t lens[1] = { 11 };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	int64_t completed;

	if (under_valgrind()) {
		printf("  skipped under valgrind\n");
		tw_purgatory_destroy(p);
		return;
	}
	atomic_store(&all_ready, false);
	for (int i = 0; i < N; i++) {
		memset(&o[i], 0, sizeof(o[i]));
		CHECK_EQ(tw_op_init(&o[i].base, 1000, &ops, NULL), 0);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o[i].base, keys, lens, 1,
							      &o[i].watch),
			 0);
	}
	atomic_store(&all_ready, true);
	arm(0); /* every allocation fails */
	completed = tw_purgatory_check_and_complete(p, "partition-0", 11);
	disarm();
	stop_counting();
	CHECK_EQ(completed, N);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	tw_purgatory_destroy(p);
	for (int i = 0; i < N; i++) {
		CHECK_EQ(atomic_load(&o[i].completes), 1); /* none expired */
		CHECK_EQ(atomic_load(&o[i].releases), 1);
		tw_op_destroy(&o[i].base);
	}
}

static void noop_timer(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
}

/* Inspecting a wheel allocates nothing (only tw_wheel_init does): the
 * queue's snapshot, with every allocation failing, still fills the
 * caller's array, in both modes (it used to take an array of its own and,
 * without memory, return the queue's length with nothing written). */
static void test_a_queue_snapshot_allocates_nothing(void)
{
	for (int kafka = 0; kafka < 2; kafka++) {
		struct tw_wheel w;
		static struct tw_timer t[40];
		struct tw_queue_entry q[8];
		size_t n;

		CHECK_EQ(tw_wheel_init(&w, 1, kafka ? 20 : 64, 0,
				       kafka ? TW_MODE_KAFKA : TW_MODE_EXACT), 0);
		for (int i = 0; i < 40; i++) {
			tw_timer_init(&t[i], noop_timer);
			CHECK_EQ(tw_wheel_add(&w, &t[i], 1 + 97 * i), 0);
		}
		memset(q, 0, sizeof q);
		arm(0);
		n = tw_wheel_queue_snapshot(&w, q, 8);
		disarm();
		CHECK_EQ(stop_counting(), 0);
		CHECK_EQ(atomic_load(&alloc_calls), 0);
		CHECK(n >= 8);
		for (int i = 0; i < 8; i++) {
			CHECK(q[i].level >= 1 && q[i].count >= 1);
			if (i)
				CHECK(q[i - 1].pops_at <= q[i].pops_at);
		}
		CHECK_EQ(tw_wheel_destroy(&w), 0);
	}
}
#endif

/* ---- the executor queue is full ---- */

#define QUEUED_JOBS 3000

struct job {
	struct tw_service_timer timer;
	atomic_int runs;
	int64_t due;
	atomic_bool early;
};

static struct job jobs[QUEUED_JOBS];
static atomic_bool release_executor;
static atomic_long total_runs;

static void job_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, timer);

	if (tw_service_now(svc) < j->due)
		atomic_store(&j->early, true);
	atomic_fetch_add(&j->runs, 1);
	/* The first job holds the only executor until the queue has
	 * overflowed, so the reaper must take over. */
	if (j == &jobs[0]) {
		struct timespec ms = { 0, 1000000 };

		for (int i = 0; i < 60000 && !atomic_load(&release_executor); i++)
			nanosleep(&ms, NULL);
	}
	atomic_fetch_add(&total_runs, 1);
}

static void test_full_executor_queue(void)
{
	struct tw_service_config cfg = { .executors = 1, .queue_capacity = 4 };
	struct tw_service *svc = NULL;
	struct tw_service_stats st;
	struct timespec ms = { 0, 1000000 };
	int64_t now;

	CHECK_EQ(tw_service_create(&svc, &cfg), 0);
	/* The first job alone, and the rest once it holds the executor: were
	 * they all due in one scan (a slow machine, valgrind), the scanner
	 * could take the first among the excess it runs itself, and block. */
	now = tw_service_now(svc);
	tw_service_timer_init(&jobs[0].timer, job_run);
	jobs[0].due = now + 1000000; /* 1 ms */
	CHECK_EQ(tw_service_add(svc, &jobs[0].timer, jobs[0].due), 0);
	for (int i = 0; i < 60000 && !atomic_load(&jobs[0].runs); i++)
		nanosleep(&ms, NULL);
	CHECK_EQ(atomic_load(&jobs[0].runs), 1);
	now = tw_service_now(svc);
	for (int i = 1; i < QUEUED_JOBS; i++) {
		tw_service_timer_init(&jobs[i].timer, job_run);
		jobs[i].due = now + 20000000; /* 20 ms */
		CHECK_EQ(tw_service_add(svc, &jobs[i].timer, jobs[i].due), 0);
	}
	for (int i = 0; i < 60000; i++) { /* 60 s: guards, not bounds */
		tw_service_stats(svc, &st);
		if (st.caller_ran > 0)
			break;
		nanosleep(&ms, NULL);
	}
	atomic_store(&release_executor, true);
	for (int i = 0; i < 60000 && atomic_load(&total_runs) < QUEUED_JOBS; i++)
		nanosleep(&ms, NULL);
	/* Read after shutdown, which waits for the executors: a run is
	 * counted after its callback returns, so the last callback's own
	 * count (total_runs) may come before the service's. */
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_stats(svc, &st);
	tw_service_destroy(svc);
	CHECK_EQ(atomic_load(&total_runs), QUEUED_JOBS);
	CHECK(st.caller_ran > 0);
	CHECK_EQ(st.ran, QUEUED_JOBS);
	for (int i = 0; i < QUEUED_JOBS; i++) {
		CHECK_EQ(atomic_load(&jobs[i].runs), 1);
		CHECK(!atomic_load(&jobs[i].early));
	}
	printf("  queue of 4 full: %llu of %d callbacks ran on the reaper\n",
	       (unsigned long long)st.caller_ran, QUEUED_JOBS);
}

int main(void)
{
	RUN(test_adds_until_callers_memory_runs_out);
#if !TW_SANITIZED
	RUN(test_allocation_failures);
	RUN(test_an_owner_id_without_memory_for_its_page_is_enomem);
	RUN(test_poll_without_memory_runs_everything_due);
	RUN(test_a_key_check_without_memory_tries_every_op);
	RUN(test_a_queue_snapshot_allocates_nothing);
#endif
	RUN(test_full_executor_queue);
	return check_report();
}
