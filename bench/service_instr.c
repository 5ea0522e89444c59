/* SPDX-License-Identifier: MIT */
/*
 * service_instr — what the service's promises cost in instructions, beside
 * this project's wheel under one mutex (wheel_service.c, the baseline
 * service_bench times it against), on one thread and a deterministic
 * driver, so that the count does not move with the machine's noise.
 *
 * Run by bench/instr.sh under valgrind --tool=callgrind
 * --collect-atstart=no (make bench-instr-service): each cell switches
 * collection on around exactly its calls, dumps the count as
 * "LIBRARY/CELL" and prints "instr LIBRARY CELL OPS". The cells, N timers
 * each:
 *   add         a timer's first add (the service claims it)
 *   add-bound   the service only: the first add of a timer bound before
 *               it (tw_service_timer_bind(), not counted): no claim
 *   cancel      a pending timer cancelled
 *   reschedule  a pending timer moved 1 ms later
 *   expire      N timers due at once, run where they expire: the
 *               service's scanner (a manual poll, no executors), the
 *               wheel's advance under the mutex
 *   expire-exec the service only: the poll queues them, one executor runs
 *               them (both threads counted; the queue holds all N, so
 *               that no back-pressure moves them to the poll)
 * The service is manual, of one shard, on a virtual clock; the wheel under
 * a mutex is the baseline's own (tick 1 ms, 64 buckets, exact), driven
 * through its calls, its advance made as its reaper makes it.
 *
 * usage: service_instr [--instr] [--n N]   (default N = 100000)
 */
#define _GNU_SOURCE

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "wheel_service.h"
#include "timingwheel/timingwheel.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TW_BENCH_CALLGRIND 1
#endif

static void begin(void)
{
#ifdef TW_BENCH_CALLGRIND
	CALLGRIND_TOGGLE_COLLECT;
#endif
}

static void end(const char *lib, const char *cell, size_t ops)
{
#ifdef TW_BENCH_CALLGRIND
	char what[64];

	CALLGRIND_TOGGLE_COLLECT;
	snprintf(what, sizeof(what), "%s/%s", lib, cell);
	CALLGRIND_DUMP_STATS_AT(what);
#endif
	printf("instr %s %s %zu\n", lib, cell, ops);
}

/* ---- the service ---- */

static _Atomic int64_t virtual_now;
static size_t n_timers;
static atomic_size_t ran;
static sem_t all_ran;

static int64_t virtual_clock(void *arg)
{
	(void)arg;
	return atomic_load_explicit(&virtual_now, memory_order_relaxed);
}

/* Callgrind's collection is switched on and off for each thread apart:
 * in expire-exec the executor switches its own, on in a warm-up
 * callback before the cell and off in the cell's last callback (what
 * it does after that one, the end of that run, goes uncounted). */
static atomic_bool executor_counts;
static sem_t warmed;

static void toggle_this_thread(void)
{
#ifdef TW_BENCH_CALLGRIND
	CALLGRIND_TOGGLE_COLLECT;
#endif
}

/* Every callback of both libraries counts its run and tells whether it
 * was the cell's last, so that an expired timer's count holds the same
 * callback on both sides. */
static inline bool count_run(void)
{
	return atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed) + 1 == n_timers;
}

static void on_run(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	if (count_run()) {
		if (atomic_load(&executor_counts))
			toggle_this_thread();
		sem_post(&all_ran);
	}
}

static void on_warm_up(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	toggle_this_thread();
	sem_post(&warmed);
}

static struct tw_service *manual_service(unsigned executors, size_t queue)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;

	cfg.manual = true;
	cfg.shards = 1;
	cfg.executors = executors;
	cfg.queue_capacity = queue;
	cfg.clock.now = virtual_clock;
	atomic_store(&virtual_now, 0);
	if (tw_service_create(&svc, &cfg)) {
		fprintf(stderr, "service_instr: tw_service_create failed\n");
		exit(1);
	}
	return svc;
}

static int64_t due_of(size_t i)
{
	return TW_S(1) + (int64_t)(i % 1000) * TW_US(1);
}

static void service_cells(struct tw_service_timer *t, size_t n)
{
	struct tw_service *svc = manual_service(0, 0);
	struct tw_service_stats st;
	struct tw_service_timer warm_up;

	for (size_t i = 0; i < n; i++)
		tw_service_timer_init(&t[i], on_run);
	begin();
	for (size_t i = 0; i < n; i++)
		tw_service_add(svc, &t[i], due_of(i));
	end("service", "add", n);
	begin();
	for (size_t i = 0; i < n; i++)
		tw_service_cancel(svc, &t[i]);
	end("service", "cancel", n);
	for (size_t i = 0; i < n; i++)
		tw_service_add(svc, &t[i], due_of(i));
	begin();
	for (size_t i = 0; i < n; i++)
		tw_service_reschedule(svc, &t[i], due_of(i) + TW_MS(1));
	end("service", "reschedule", n);
	atomic_store(&ran, 0);
	atomic_store(&virtual_now, TW_S(3));
	begin();
	tw_service_poll(svc);
	end("service", "expire", n);
	if (atomic_load(&ran) != n)
		fprintf(stderr, "service_instr: expire ran %zu of %zu\n",
			atomic_load(&ran), n);
	else
		sem_wait(&all_ran); /* its post, so that expire-exec waits */
	tw_service_shutdown(svc, NULL, NULL);
	tw_service_destroy(svc);

	svc = manual_service(0, 0);
	for (size_t i = 0; i < n; i++) {
		tw_service_timer_init(&t[i], on_run);
		tw_service_timer_bind(svc, &t[i]);
	}
	begin();
	for (size_t i = 0; i < n; i++)
		tw_service_add(svc, &t[i], due_of(i));
	end("service", "add-bound", n);
	tw_service_shutdown(svc, NULL, NULL);
	tw_service_destroy(svc);

	svc = manual_service(1, n);
	for (size_t i = 0; i < n; i++) {
		tw_service_timer_init(&t[i], on_run);
		tw_service_add(svc, &t[i], due_of(i));
	}
	/* The executor's collection on: a timer due before the others, run
	 * by a poll before the cell. */
	tw_service_timer_init(&warm_up, on_warm_up);
	tw_service_add(svc, &warm_up, TW_MS(500));
	atomic_store(&virtual_now, TW_MS(500));
	tw_service_poll(svc);
	sem_wait(&warmed);
	atomic_store(&executor_counts, true);
	atomic_store(&ran, 0);
	atomic_store(&virtual_now, TW_S(3));
	begin();
	tw_service_poll(svc);
	sem_wait(&all_ran); /* the executor ran the last one */
	end("service", "expire-exec", n);
	atomic_store(&executor_counts, false);
	tw_service_stats(svc, &st);
	if (st.caller_ran)
		fprintf(stderr, "service_instr: the poll ran %llu of the %zu "
			"itself\n", (unsigned long long)st.caller_ran, n);
	tw_service_shutdown(svc, NULL, NULL);
	tw_service_destroy(svc);
}

/* ---- the wheel under one mutex ---- */

static void on_fire(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
	if (count_run())
		sem_post(&all_ran);
}

static void mutex_cells(struct tw_timer *t, size_t n)
{
	struct wheel_service ws;
	int64_t start;

	if (wheel_service_init(&ws, false)) {
		fprintf(stderr, "service_instr: wheel_service_init failed\n");
		exit(1);
	}
	/* Its wheel started at the machine's clock, which moves where the
	 * due times fall against its ticks, and so the count, from run to
	 * run: it starts at 0 instead, as the service's virtual clock does,
	 * with the same tick, size and mode. */
	tw_wheel_destroy(&ws.wheel);
	if (tw_wheel_init(&ws.wheel, TW_MS(1), 64, 0, TW_MODE_EXACT)) {
		fprintf(stderr, "service_instr: tw_wheel_init failed\n");
		exit(1);
	}
	start = tw_wheel_now(&ws.wheel);
	for (size_t i = 0; i < n; i++)
		tw_timer_init(&t[i], on_fire);
	begin();
	for (size_t i = 0; i < n; i++)
		wheel_service_add(&ws, &t[i], start + due_of(i));
	end("wheel+mutex", "add", n);
	begin();
	for (size_t i = 0; i < n; i++)
		wheel_service_cancel(&ws, &t[i]);
	end("wheel+mutex", "cancel", n);
	for (size_t i = 0; i < n; i++)
		wheel_service_add(&ws, &t[i], start + due_of(i));
	begin();
	for (size_t i = 0; i < n; i++)
		wheel_service_reschedule(&ws, &t[i], start + due_of(i) + TW_MS(1));
	end("wheel+mutex", "reschedule", n);
	atomic_store(&ran, 0);
	begin();
	pthread_mutex_lock(&ws.mu); /* as its reaper advances */
	tw_wheel_advance(&ws.wheel, start + TW_S(3));
	pthread_mutex_unlock(&ws.mu);
	end("wheel+mutex", "expire", n);
	if (atomic_load(&ran) != n)
		fprintf(stderr, "service_instr: the wheel's expire ran %zu of %zu\n",
			atomic_load(&ran), n);
	else
		sem_wait(&all_ran); /* its last callback's post */
	wheel_service_destroy(&ws);
}

int main(int argc, char **argv)
{
	size_t n = 100000;
	struct tw_service_timer *st;
	struct tw_timer *wt;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--n") && i + 1 < argc)
			n = (size_t)atol(argv[++i]);
	if (n == 0)
		n = 100000;
	n_timers = n;
	sem_init(&all_ran, 0, 0);
	sem_init(&warmed, 0, 0);
	st = calloc(n, sizeof(*st));
	wt = calloc(n, sizeof(*wt));
	if (!st || !wt)
		return 1;
	service_cells(st, n);
	mutex_cells(wt, n);
	free(st);
	free(wt);
	return 0;
}
