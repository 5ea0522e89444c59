/* SPDX-License-Identifier: MIT */
/*
 * The purgatory: the behaviours of Kafka's DelayedOperationTest (see
 * ../shared/KAFKA_TESTS.md), exactly-once completion under threads, bounded
 * memory through lazy purging, shutdown and bad input.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "virtual_clock.h"

#define MS 1000000LL /* the service clock is in nanoseconds */

struct mock {
	struct tw_delayed_op op;
	struct tw_watch watches[3];
	atomic_bool completable;
	atomic_int attempts_left; /* > 0: complete after that many tries */
	atomic_int completes, expirations, releases, tries;
	bool lock_was_held;
	int64_t added_at, completed_at;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static bool mock_try(struct tw_delayed_op *op)
{
	struct mock *m = tw_container_of(op, struct mock, op);

	atomic_fetch_add(&m->tries, 1);
	/* Runs under the op's lock: a shared one's trylock from the holder
	 * fails; the own lock's word says held. */
	if (op->shared_lock) {
		m->lock_was_held = pthread_mutex_trylock(op->shared_lock) == EBUSY;
		if (!m->lock_was_held)
			pthread_mutex_unlock(op->shared_lock);
	} else {
		m->lock_was_held =
			__atomic_load_n(&op->own_lock, __ATOMIC_RELAXED) != 0;
	}
	if (atomic_load(&m->attempts_left) > 0 &&
	    atomic_fetch_sub(&m->attempts_left, 1) == 1)
		atomic_store(&m->completable, true);
	if (!atomic_load(&m->completable))
		return false;
	return tw_op_force_complete(op);
}

static void mock_complete(struct tw_delayed_op *op)
{
	struct mock *m = tw_container_of(op, struct mock, op);

	m->completed_at = now_ns();
	atomic_fetch_add(&m->completes, 1);
}

static void mock_expire(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct mock, op)->expirations, 1);
}

static void mock_release(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct mock, op)->releases, 1);
}

static const struct tw_op_ops mock_ops = { mock_try, mock_complete, mock_expire,
					   mock_release };

static void mock_init(struct mock *m, int64_t timeout)
{
	memset(m, 0, sizeof(*m));
	CHECK_EQ(tw_op_init(&m->op, timeout, &mock_ops, NULL), TW_OK);
}

static struct tw_purgatory *new_purgatory(size_t purge_interval)
{
	struct tw_purgatory_config cfg = { 0 };
	struct tw_purgatory *p = NULL;

	cfg.purge_interval = purge_interval;
	cfg.service.executors = 1;
	CHECK_EQ(tw_purgatory_create(&p, &cfg), TW_OK);
	return p;
}

/* Watch m on the named keys ("k1", "k2", ...). */
static int watch_on(struct tw_purgatory *p, struct mock *m, int nkeys,
		    const char *k0, const char *k1, const char *k2)
{
	const void *keys[3] = { k0, k1, k2 };
	size_t lens[3] = { strlen(k0), k1 ? strlen(k1) : 0, k2 ? strlen(k2) : 0 };

	m->added_at = now_ns();
	return tw_purgatory_try_complete_else_watch(p, &m->op, keys, lens,
						    (size_t)nkeys, m->watches);
}

static int64_t check(struct tw_purgatory *p, const char *key)
{
	return tw_purgatory_check_and_complete(p, key, strlen(key));
}

static void test_request_satisfaction(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	struct mock r1, r2;

	mock_init(&r1, 100000 * MS);
	mock_init(&r2, 100000 * MS);
	CHECK_EQ(check(p, "test1"), 0);          /* nothing watched */
	CHECK_EQ(watch_on(p, &r1, 1, "test1", NULL, NULL), 0);
	CHECK_EQ(check(p, "test1"), 0);          /* not yet completable */
	atomic_store(&r1.completable, true);
	CHECK_EQ(check(p, "test1"), 1);          /* now it is */
	CHECK_EQ(check(p, "test1"), 0);          /* and only once */
	CHECK_EQ(atomic_load(&r1.completes), 1);
	CHECK_EQ(atomic_load(&r1.expirations), 0);
	CHECK(r1.lock_was_held);
	/* Completable at once: completed now, never watched. */
	atomic_store(&r2.completable, true);
	CHECK_EQ(watch_on(p, &r2, 1, "test2", NULL, NULL), 1);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&r1.releases), 1);
	CHECK_EQ(atomic_load(&r2.releases), 1);
	tw_op_destroy(&r1.op);
	tw_op_destroy(&r2.op);
}

static void test_request_expiry(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	struct mock r1, r2;
	int64_t deadline = now_ns() + 5000 * MS;

	mock_init(&r1, 20 * MS);
	mock_init(&r2, 200000 * MS);
	CHECK_EQ(watch_on(p, &r1, 1, "test1", NULL, NULL), 0);
	CHECK_EQ(watch_on(p, &r2, 1, "test2", NULL, NULL), 0);
	while (!atomic_load(&r1.completes) && now_ns() < deadline)
		sleep_us(1000);
	CHECK_EQ(atomic_load(&r1.completes), 1);
	CHECK_EQ(atomic_load(&r1.expirations), 1);
	CHECK(!tw_op_is_completed(&r2.op));
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	tw_purgatory_destroy(p);
	/* Read after destroy joined the executor that wrote it. */
	CHECK(r1.completed_at - r1.added_at >= 20 * MS); /* not before 20 ms */
	CHECK_EQ(atomic_load(&r2.completes), 0); /* handed back, not completed */
	tw_op_destroy(&r1.op);
	tw_op_destroy(&r2.op);
}

static void test_request_purge(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	struct mock r1, r2, r3;

	mock_init(&r1, 100000 * MS);
	mock_init(&r2, 100000 * MS);
	mock_init(&r3, 100000 * MS);
	watch_on(p, &r1, 1, "test1", NULL, NULL);
	watch_on(p, &r2, 2, "test1", "test2", NULL);
	watch_on(p, &r3, 3, "test1", "test2", "test3");
	CHECK_EQ(tw_purgatory_delayed(p), 3);
	CHECK_EQ(tw_purgatory_watched(p), 6);
	/* Completing drops the delayed count at once... */
	atomic_store(&r2.completable, true);
	CHECK(tw_op_safe_try_complete(&r2.op));
	CHECK_EQ(tw_purgatory_delayed(p), 2);
	atomic_store(&r3.completable, true);
	CHECK(tw_op_safe_try_complete(&r3.op));
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	/* ...the watch lists shrink only as keys are checked. */
	CHECK_EQ(tw_purgatory_watched(p), 6);
	CHECK_EQ(check(p, "test1"), 0);
	CHECK_EQ(tw_purgatory_watched(p), 4);
	CHECK_EQ(check(p, "test2"), 0);
	CHECK_EQ(tw_purgatory_watched(p), 2);
	CHECK_EQ(check(p, "test3"), 0);
	CHECK_EQ(tw_purgatory_watched(p), 1);
	/* r2 and r3 are no longer referenced: released. */
	CHECK_EQ(atomic_load(&r2.releases), 1);
	CHECK_EQ(atomic_load(&r3.releases), 1);
	CHECK_EQ(atomic_load(&r1.releases), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&r1.releases), 1);
	tw_op_destroy(&r1.op);
	tw_op_destroy(&r2.op);
	tw_op_destroy(&r3.op);
}

static struct tw_delayed_op *handed[8];
static int nhanded;

static void collect(struct tw_delayed_op *op)
{
	if (nhanded < 8)
		handed[nhanded++] = op;
}

static void test_cancel_for_key(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	struct mock r1, r2, r3;

	mock_init(&r1, 100000 * MS);
	mock_init(&r2, 100000 * MS);
	mock_init(&r3, 100000 * MS);
	watch_on(p, &r1, 1, "key", NULL, NULL);
	watch_on(p, &r2, 1, "key", NULL, NULL);
	watch_on(p, &r3, 1, "key2", NULL, NULL);
	nhanded = 0;
	CHECK_EQ(tw_purgatory_cancel_for_key(p, "key", 3, collect), 2);
	CHECK_EQ(nhanded, 2);
	CHECK((handed[0] == &r1.op && handed[1] == &r2.op) ||
	      (handed[0] == &r2.op && handed[1] == &r1.op));
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	CHECK_EQ(tw_purgatory_watched(p), 1);
	CHECK_EQ(tw_purgatory_cancel_for_key(p, "unknown", 7, collect), 0);
	/* Cancelled ops neither complete nor expire. */
	CHECK_EQ(atomic_load(&r1.completes) + atomic_load(&r1.expirations), 0);
	CHECK(!tw_op_force_complete(&r1.op));
	tw_purgatory_destroy(p);
	tw_op_destroy(&r1.op);
	tw_op_destroy(&r2.op);
	tw_op_destroy(&r3.op);
}

static void test_shared_caller_lock(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
	struct mock a, b;

	mock_init(&a, 100000 * MS);
	mock_init(&b, 100000 * MS);
	tw_op_init(&a.op, 100000 * MS, &mock_ops, &shared);
	tw_op_init(&b.op, 100000 * MS, &mock_ops, &shared);
	CHECK(a.op.shared_lock == &shared && b.op.shared_lock == &shared);
	watch_on(p, &a, 1, "k", NULL, NULL);
	watch_on(p, &b, 1, "k", NULL, NULL);
	atomic_store(&a.completable, true);
	atomic_store(&b.completable, true);
	CHECK_EQ(check(p, "k"), 2);
	CHECK(a.lock_was_held && b.lock_was_held); /* the shared one */
	tw_purgatory_destroy(p);
	tw_op_destroy(&a.op);
	tw_op_destroy(&b.op);
}

/* The own lock is a word that a second thread sleeps on. One thread holds
 * it (inside try_complete) until the other has marked it and gone to
 * sleep; then the release must wake it, and each try_complete ran alone. */
struct contended {
	struct tw_delayed_op op;
	atomic_int inside, entries, turn;
	int not_atomic; /* written only under the op's lock */
};

static bool contended_try(struct tw_delayed_op *op)
{
	struct contended *c = tw_container_of(op, struct contended, op);

	CHECK_EQ(atomic_fetch_add(&c->inside, 1), 0);
	c->not_atomic++;
	if (atomic_fetch_add(&c->entries, 1) == 0) {
		/* The first: wait until the second sleeps on the word. */
		while (__atomic_load_n(&op->own_lock, __ATOMIC_ACQUIRE) != 2)
			sleep_us(100);
	}
	atomic_fetch_sub(&c->inside, 1);
	return false;
}

static void contended_complete(struct tw_delayed_op *op)
{
	(void)op;
}

static void *contended_second(void *arg)
{
	struct contended *c = arg;

	while (atomic_load(&c->entries) == 0)
		sleep_us(100);
	tw_op_safe_try_complete(&c->op);
	return NULL;
}

static void test_own_lock_sleeps_and_wakes(void)
{
	struct contended c;
	pthread_t second;

	memset(&c, 0, sizeof(c));
	static const struct tw_op_ops contended_ops = { contended_try,
							  contended_complete,
							  NULL, NULL };

	CHECK_EQ(tw_op_init(&c.op, 1000 * MS, &contended_ops, NULL), TW_OK);
	CHECK(!c.op.shared_lock);
	pthread_create(&second, NULL, contended_second, &c);
	tw_op_safe_try_complete(&c.op);
	pthread_join(second, NULL);
	CHECK_EQ(atomic_load(&c.entries), 2);
	CHECK_EQ(c.not_atomic, 2);
	CHECK_EQ(__atomic_load_n(&c.op.own_lock, __ATOMIC_RELAXED), 0);
	/* Uncontended again: taken and given back without a sleep. */
	tw_op_safe_try_complete(&c.op);
	CHECK_EQ(c.not_atomic, 3);
	tw_op_destroy(&c.op);
}

static void test_shutdown_hands_back_pending(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	struct mock r[5];
	const char *k[2] = { "x", "y" };

	for (int i = 0; i < 5; i++) {
		mock_init(&r[i], 100000 * MS);
		watch_on(p, &r[i], 2, k[i % 2], "z", NULL);
	}
	atomic_store(&r[0].completable, true);
	CHECK_EQ(check(p, "x"), 1);
	nhanded = 0;
	CHECK_EQ(tw_purgatory_shutdown(p, collect), 4);
	CHECK_EQ(nhanded, 4);
	CHECK_EQ(tw_purgatory_shutdown(p, collect), 0);
	CHECK_EQ(watch_on(p, &r[0], 1, "x", NULL, NULL), TW_ESHUTDOWN);
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(atomic_load(&r[i].completes), i == 0);
		CHECK_EQ(atomic_load(&r[i].releases), 1);
	}
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	tw_purgatory_destroy(p);
	for (int i = 0; i < 5; i++)
		tw_op_destroy(&r[i].op);
}

static void test_bad_input(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	struct mock m;
	char big[TW_KEY_MAX + 1];
	const void *keys[1] = { big };
	size_t lens[1] = { sizeof(big) };

	memset(big, 'k', sizeof(big));
	mock_init(&m, 1000 * MS);
	static const struct tw_op_ops no_try = { NULL, mock_complete, NULL, NULL };

	CHECK_EQ(tw_op_init(&m.op, 0, &mock_ops, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&m.op, 5, &no_try, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&m.op, 5, NULL, NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_create(NULL, NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &m.op, keys, lens, 0,
						      m.watches), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &m.op, keys, lens, 1,
						      m.watches), TW_EINVAL);
	lens[0] = 0;
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &m.op, keys, lens, 1,
						      m.watches), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(p, big, 0), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(p, big, TW_KEY_MAX + 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_cancel_for_key(p, NULL, 3, NULL), TW_EINVAL);
	/* A key of TW_KEY_MAX bytes is fine. */
	lens[0] = TW_KEY_MAX;
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &m.op, keys, lens, 1,
						      m.watches), 0);
	CHECK_EQ(tw_purgatory_watched(p), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	tw_purgatory_destroy(p);
	tw_op_destroy(&m.op);
}

static void test_memory_bounded_by_purge(void)
{
	/* Each op watches a key nobody checks and one that completes it:
	 * without purging, the first lists would grow without end. */
	enum { N = 20000, INTERVAL = 100 };
	static struct mock m[N];
	struct tw_purgatory *p = new_purgatory(INTERVAL);
	size_t most = 0;
	char idle[32], hot[32];
	long released = 0;

	for (int i = 0; i < N; i++) {
		mock_init(&m[i], 100000 * MS);
		snprintf(idle, sizeof(idle), "idle-%d", i % 1000);
		snprintf(hot, sizeof(hot), "hot-%d", i);
		CHECK_EQ(watch_on(p, &m[i], 2, idle, hot, NULL), 0);
		atomic_store(&m[i].completable, true);
		CHECK_EQ(check(p, hot), 1);
		if (tw_purgatory_watched(p) > most)
			most = tw_purgatory_watched(p);
	}
	/* At most INTERVAL completed ops linger before a purge runs. */
	CHECK(most <= 2 * (INTERVAL + 2));
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	for (int i = 0; i < N; i++)
		released += atomic_load(&m[i].releases);
	CHECK(released >= N - INTERVAL - 2);
	tw_purgatory_destroy(p);
	for (int i = 0; i < N; i++) {
		CHECK_EQ(atomic_load(&m[i].releases), 1);
		CHECK_EQ(atomic_load(&m[i].completes), 1);
		tw_op_destroy(&m[i].op);
	}
}

/* ---- threads ---- */

enum { OPS = 100, CHECKERS = 20, KEYS = 10 };
static struct mock ops[OPS];
static struct tw_purgatory *shared_p;
static atomic_int remaining;

static void *checker(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 2654435761u + 1;
	char key[16];

	while (atomic_load(&remaining) > 0) {
		int64_t n;

		snprintf(key, sizeof(key), "key%d", (int)(test_rand(&s) % KEYS));
		n = check(shared_p, key);
		CHECK(n >= 0);
		atomic_fetch_sub(&remaining, (int)n);
		sleep_us((long)(s % 100));
	}
	return NULL;
}

static void test_many_threads_complete_every_op(void)
{
	/* Kafka's 100 ops and 20 threads checking keys with random sleeps:
	 * every op completes, once (no lost wake-up). */
	pthread_t th[CHECKERS];
	char k1[16], k2[16];

	shared_p = new_purgatory(10);
	atomic_store(&remaining, OPS);
	for (int i = 0; i < OPS; i++) {
		mock_init(&ops[i], 100000 * MS);
		atomic_store(&ops[i].attempts_left, 1 + i % 5);
	}
	for (int i = 0; i < CHECKERS; i++)
		pthread_create(&th[i], NULL, checker, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < OPS; i++) {
		int rc;

		snprintf(k1, sizeof(k1), "key%d", i % KEYS);
		snprintf(k2, sizeof(k2), "key%d", (i * 7 + 3) % KEYS);
		rc = watch_on(shared_p, &ops[i], 2, k1, k2, NULL);
		CHECK(rc == 0 || rc == 1);
		if (rc == 1)
			atomic_fetch_sub(&remaining, 1);
	}
	for (int i = 0; i < CHECKERS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < OPS; i++) {
		CHECK_EQ(atomic_load(&ops[i].completes), 1);
		CHECK_EQ(atomic_load(&ops[i].expirations), 0);
	}
	tw_purgatory_destroy(shared_p);
	for (int i = 0; i < OPS; i++) {
		CHECK_EQ(atomic_load(&ops[i].releases), 1);
		tw_op_destroy(&ops[i].op);
	}
}

static atomic_int stop_racers;

static void *racer(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 2654435761u + 7;
	char key[16];

	while (!atomic_load(&stop_racers)) {
		snprintf(key, sizeof(key), "key%d", (int)(test_rand(&s) % KEYS));
		CHECK(check(shared_p, key) >= 0);
	}
	return NULL;
}

static void test_condition_and_timeout_race_exactly_once(void)
{
	/* Ops with 1..3 ms timeouts while 4 threads check their keys: each
	 * completes once, by its condition or by its timeout, never both. */
	enum { N = 3000 };
	static struct mock m[N];
	pthread_t th[4];
	char k1[16];
	int64_t deadline;
	long by_timeout = 0;

	shared_p = new_purgatory(50);
	atomic_store(&stop_racers, 0);
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, racer, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < N; i++) {
		mock_init(&m[i], (1 + i % 3) * MS);
		/* A quarter never satisfied (they expire); the rest need up
		 * to ~2000 checks, which takes about as long as a timeout. */
		atomic_store(&m[i].attempts_left, i % 4 ? 1 + (i * 37) % 2000 : 0);
		snprintf(k1, sizeof(k1), "key%d", i % KEYS);
		CHECK(watch_on(shared_p, &m[i], 1, k1, NULL, NULL) >= 0);
	}
	deadline = now_ns() + 10000 * MS;
	for (int i = 0; i < N; i++)
		while (!tw_op_is_completed(&m[i].op) && now_ns() < deadline)
			sleep_us(100);
	atomic_store(&stop_racers, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	tw_purgatory_destroy(shared_p);
	for (int i = 0; i < N; i++) {
		CHECK_EQ(atomic_load(&m[i].completes), 1);
		CHECK(atomic_load(&m[i].expirations) <= 1);
		CHECK_EQ(atomic_load(&m[i].releases), 1);
		by_timeout += atomic_load(&m[i].expirations);
		tw_op_destroy(&m[i].op);
	}
	/* Both paths were exercised. */
	CHECK(by_timeout > 0 && by_timeout < N);
}

/* Hundreds of keys in one shard (its table grows, keys collide) and a hot
 * key with many watchers: every op completes exactly once, and the lists
 * are gone afterwards. */
static void test_many_keys_and_a_hot_key(void)
{
	struct tw_purgatory_config cfg = { .shards = 1 };
	struct tw_purgatory *p = NULL;
	enum { NKEYS = 300, NHOT = 100 };
	static struct mock cold[NKEYS], hot[NHOT];
	char key[32];

	cfg.service.executors = 1;
	CHECK_EQ(tw_purgatory_create(&p, &cfg), TW_OK);
	for (int i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		mock_init(&cold[i], 100000 * MS);
		CHECK_EQ(watch_on(p, &cold[i], 1, key, NULL, NULL), 0);
	}
	for (int i = 0; i < NHOT; i++) {
		mock_init(&hot[i], 100000 * MS);
		CHECK_EQ(watch_on(p, &hot[i], 2, "hot", "key-0", NULL), 0);
	}
	CHECK_EQ(tw_purgatory_watched(p), NKEYS + 2 * NHOT);
	CHECK_EQ(tw_purgatory_delayed(p), NKEYS + NHOT);
	for (int i = 0; i < NHOT; i++)
		atomic_store(&hot[i].completable, true);
	CHECK_EQ(check(p, "hot"), NHOT); /* one check completes all */
	for (int i = NKEYS - 1; i >= 0; i--) {
		snprintf(key, sizeof(key), "key-%d", i);
		atomic_store(&cold[i].completable, true);
		CHECK_EQ(check(p, key), 1);
	}
	tw_purgatory_purge(p);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	for (int i = 0; i < NKEYS; i++)
		CHECK_EQ(atomic_load(&cold[i].completes), 1);
	for (int i = 0; i < NHOT; i++)
		CHECK_EQ(atomic_load(&hot[i].completes), 1);
	tw_purgatory_destroy(p);
	for (int i = 0; i < NKEYS; i++) {
		CHECK_EQ(atomic_load(&cold[i].releases), 1);
		tw_op_destroy(&cold[i].op);
	}
	for (int i = 0; i < NHOT; i++) {
		CHECK_EQ(atomic_load(&hot[i].releases), 1);
		tw_op_destroy(&hot[i].op);
	}
}

/* A NULL configuration gives Kafka's defaults. */
static void test_default_configuration(void)
{
	struct tw_purgatory *p = NULL;
	struct mock m;

	CHECK_EQ(tw_purgatory_create(&p, NULL), TW_OK);
	mock_init(&m, 100000 * MS);
	atomic_store(&m.completable, true);
	CHECK_EQ(watch_on(p, &m, 1, "k", NULL, NULL), 1);
	CHECK_EQ(atomic_load(&m.completes), 1);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&m.releases), 1);
	tw_op_destroy(&m.op);
}

/* Poll a manual purgatory at each clock unit from `from` to `to`; the
 * time each op first expired at goes in at[] (-1: not yet); returns how
 * many polls expired something. */
static int poll_and_note(struct tw_purgatory *p, struct mock *m, int n,
			 int64_t *at, int64_t from, int64_t to)
{
	int polls = 0;

	for (int64_t now = from; now <= to; now++) {
		atomic_store(&virtual_now, now);
		polls += tw_purgatory_poll(p) > 0;
		for (int i = 0; i < n; i++)
			if (at[i] < 0 && atomic_load(&m[i].expirations))
				at[i] = now;
	}
	return polls;
}

/* Timeouts with a tolerance (tw_op_set_tolerance): 30 ops watched at 1000
 * with timeouts of 100 + i units and a tolerance to 1700 expire together,
 * each no earlier than its timeout and no later than its tolerance allows
 * (plus under a tick); exact, the same ops take four polls. */
static void test_timeouts_with_a_tolerance_expire_together(void)
{
	for (int tolerant = 0; tolerant < 2; tolerant++) {
		struct tw_purgatory *p = manual_purgatory_purging(0);
		static struct mock m[30];
		int64_t at[30];
		char key[8];

		for (int i = 0; i < 30; i++) {
			mock_init(&m[i], 100 + i);
			if (tolerant)
				CHECK_EQ(tw_op_set_tolerance(&m[i].op, 600 - i), TW_OK);
			snprintf(key, sizeof(key), "k%d", i);
			CHECK_EQ(watch_on(p, &m[i], 1, key, NULL, NULL), 0);
			at[i] = -1;
		}
		if (tolerant)
			CHECK_EQ(tw_op_set_tolerance(&m[0].op, 5), TW_EBUSY);
		CHECK_EQ(poll_and_note(p, m, 30, at, 1000, 1800), tolerant ? 1 : 4);
		for (int i = 0; i < 30; i++) {
			CHECK_EQ(atomic_load(&m[i].expirations), 1);
			CHECK(at[i] >= 1100 + i);
			CHECK(at[i] < (tolerant ? 1700 : 1100 + i) + 10);
		}
		tw_purgatory_destroy(p);
		for (int i = 0; i < 30; i++)
			CHECK_EQ(atomic_load(&m[i].releases), 1);
	}
}

/* A timeout past INT64_MAX is INT64_MAX: an injected clock that reads it
 * expires the op then, and not a unit before (purgatory.h, tw_op_init). */
static void test_a_timeout_past_the_end_of_time(void)
{
	static const int64_t timeouts[] = { 11, 20, INT64_MAX };

	for (size_t i = 0; i < sizeof(timeouts) / sizeof(timeouts[0]); i++) {
		struct tw_purgatory *p = manual_purgatory_purging(0);
		struct mock m;

		atomic_store(&virtual_now, INT64_MAX - 10);
		mock_init(&m, timeouts[i]);
		CHECK_EQ(watch_on(p, &m, 1, "end", NULL, NULL), 0);
		atomic_store(&virtual_now, INT64_MAX - 1);
		CHECK(tw_purgatory_poll(p) >= 0);
		CHECK_EQ(atomic_load(&m.expirations), 0);
		atomic_store(&virtual_now, INT64_MAX);
		CHECK_EQ(tw_purgatory_poll(p), 1);
		CHECK_EQ(atomic_load(&m.expirations), 1);
		CHECK_EQ(atomic_load(&m.completes), 1);
		tw_purgatory_destroy(p);
		tw_op_destroy(&m.op);
	}
}

/* One jump over the windows: polled once at 1400, an op whose window
 * [1000 + timeout, + tolerance] ended before has expired, one whose window
 * starts after has not; the rest expire by the next jump, each once. */
static void test_tolerances_in_one_jump(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	static struct mock m[40];
	int64_t e[40], l[40];
	char key[8];
	int expired = 0;

	for (int i = 0; i < 40; i++) {
		e[i] = 1000 + 50 + 17 * i;         /* 1050 .. 1713 */
		l[i] = e[i] + (i % 4) * 150;       /* windows of 0 .. 450 */
		mock_init(&m[i], e[i] - 1000);
		CHECK_EQ(tw_op_set_tolerance(&m[i].op, l[i] - e[i]), TW_OK);
		snprintf(key, sizeof(key), "j%d", i);
		CHECK_EQ(watch_on(p, &m[i], 1, key, NULL, NULL), 0);
	}
	atomic_store(&virtual_now, 1400);
	CHECK(tw_purgatory_poll(p) > 0);
	for (int i = 0; i < 40; i++) {
		int n = atomic_load(&m[i].expirations);

		if (l[i] < 1400)
			CHECK_EQ(n, 1);
		if (e[i] > 1400)
			CHECK_EQ(n, 0);
		expired += n;
	}
	CHECK(expired > 0 && expired < 40);
	atomic_store(&virtual_now, 5000);
	tw_purgatory_poll(p);
	for (int i = 0; i < 40; i++)
		CHECK_EQ(atomic_load(&m[i].expirations), 1);
	tw_purgatory_destroy(p);
}

/* An event loop driving a manual purgatory sleeps exactly
 * tw_purgatory_timeout() between polls: each timeout runs at its due
 * time rounded up to the tick (with a tolerance: inside it), none is
 * missed or early, and the loop wakes no more often than there are
 * ticks with work in them. */
static void test_a_loop_sleeping_the_purgatory_timeout(void)
{
	for (int tolerant = 0; tolerant < 2; tolerant++) {
		struct tw_purgatory *p = manual_purgatory_purging(0);
		static struct mock m[30];
		int64_t at[30], now = 1000, to;
		int polls = 0;
		char key[8];

		for (int i = 0; i < 30; i++) {
			mock_init(&m[i], 100 + 7 * i);
			if (tolerant)
				CHECK_EQ(tw_op_set_tolerance(&m[i].op, 300), TW_OK);
			snprintf(key, sizeof(key), "k%d", i);
			CHECK_EQ(watch_on(p, &m[i], 1, key, NULL, NULL), 0);
			at[i] = -1;
		}
		{
			int64_t when = 0;

			/* No later than the first timeout (1100), or the
			 * end of its tolerance. */
			CHECK(tw_purgatory_next_expiry(p, &when));
			CHECK(when > now && when <= (tolerant ? 1400 : 1100));
		}
		while ((to = tw_purgatory_timeout(p, now)) >= 0 && polls < 1000) {
			now += to;
			atomic_store(&virtual_now, now);
			CHECK(tw_purgatory_poll(p) >= 0);
			polls++;
			for (int i = 0; i < 30; i++)
				if (at[i] < 0 && atomic_load(&m[i].expirations))
					at[i] = now;
		}
		CHECK_EQ(tw_purgatory_delayed(p), 0);
		for (int i = 0; i < 30; i++) {
			int64_t due = 1100 + 7 * i;

			CHECK_EQ(atomic_load(&m[i].expirations), 1);
			CHECK(at[i] >= due);
			if (tolerant)
				CHECK(at[i] < due + 300 + 10);
			else
				CHECK_EQ(at[i], (due + 9) / 10 * 10);
		}
		/* 203 units of timeouts, 10 a tick: at most 21 wake-ups
		 * with work, plus the early ones of cascades. */
		CHECK(polls <= 40);
		tw_purgatory_destroy(p);
	}
	CHECK_EQ(tw_purgatory_timeout(NULL, 0), -1);
	{
		int64_t when = 7;

		CHECK(!tw_purgatory_next_expiry(NULL, &when));
		CHECK_EQ(when, 7);
	}
}

/* A tolerance: bad values change nothing; a kafka-mode purgatory refuses
 * to watch an op that has one (its timeout could not be armed) and
 * watches it once the tolerance is back to 0. */
/* What purgatory.h says of a second watch and of a late tolerance: a
 * watch refused for its arguments (TW_EINVAL before the op is taken in:
 * a bad key, a tolerance on a kafka-mode purgatory) counts for nothing,
 * and the op can be watched after it (the tolerance set again first); a
 * watch that took the op in, even one that failed, leaves every later
 * watch TW_EBUSY; tw_op_set_tolerance says TW_EBUSY once the op was
 * watched or completed (a force_complete) since its tw_op_init. */
static void test_refused_watches_and_late_tolerances(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	struct mock m, forced;
	const void *bad[1] = { "" };
	size_t bad_len[1] = { 0 };

	mock_init(&m, 100000 * MS);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &m.op, bad, bad_len, 1,
						      m.watches),
		 TW_EINVAL);
	CHECK_EQ(tw_op_set_tolerance(&m.op, 5), TW_OK); /* not watched yet */
	CHECK_EQ(watch_on(p, &m, 1, "k", NULL, NULL), 0);
	CHECK_EQ(tw_op_set_tolerance(&m.op, 5), TW_EBUSY);
	CHECK_EQ(watch_on(p, &m, 1, "k", NULL, NULL), TW_EBUSY);
	CHECK_EQ(tw_purgatory_watched(p), 1);

	mock_init(&forced, 100000 * MS);
	CHECK(tw_op_force_complete(&forced.op)); /* never watched */
	CHECK_EQ(tw_op_set_tolerance(&forced.op, 5), TW_EBUSY);
	CHECK_EQ(watch_on(p, &forced, 1, "k", NULL, NULL), TW_EINVAL);
	CHECK_EQ(atomic_load(&forced.completes), 1);

	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 1);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&m.releases), 1);
	CHECK_EQ(atomic_load(&forced.releases), 0); /* the purgatory never saw it */
	tw_op_destroy(&m.op);
	tw_op_destroy(&forced.op);
}

static void test_bad_tolerances(void)
{
	struct tw_purgatory_config cfg = { 0 };
	struct tw_purgatory *p = NULL;
	struct mock m;

	mock_init(&m, 100);
	CHECK_EQ(tw_op_set_tolerance(NULL, 10), TW_EINVAL);
	CHECK_EQ(tw_op_set_tolerance(&m.op, -1), TW_EINVAL);
	CHECK_EQ(tw_op_set_tolerance(&m.op, 50), TW_OK);
	cfg.service.tick = 10;
	cfg.service.wheel_size = 8;
	cfg.service.manual = true;
	cfg.service.mode = TW_MODE_KAFKA;
	cfg.service.clock.now = virtual_clock;
	atomic_store(&virtual_now, 1000);
	CHECK_EQ(tw_purgatory_create(&p, &cfg), TW_OK);
	CHECK_EQ(watch_on(p, &m, 1, "k", NULL, NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(tw_op_set_tolerance(&m.op, 0), TW_OK);
	CHECK_EQ(watch_on(p, &m, 1, "k", NULL, NULL), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	atomic_store(&virtual_now, 1100);
	CHECK_EQ(tw_purgatory_poll(p), 1);
	CHECK_EQ(atomic_load(&m.expirations), 1);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&m.releases), 1);
}

/* The ends of time: a timeout the clock cannot reach is the end of time
 * with a tolerance too (no window past INT64_MAX), and a tolerance that
 * reaches past it ends there. Both wait; neither expires early. */
static void test_tolerances_at_the_ends_of_time(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct mock far, wide;

	mock_init(&far, INT64_MAX);
	mock_init(&wide, 100);
	CHECK_EQ(tw_op_set_tolerance(&far.op, 10), TW_OK);
	CHECK_EQ(tw_op_set_tolerance(&wide.op, INT64_MAX), TW_OK);
	CHECK_EQ(watch_on(p, &far, 1, "a", NULL, NULL), 0);
	CHECK_EQ(watch_on(p, &wide, 1, "b", NULL, NULL), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 2);
	atomic_store(&virtual_now, 1099);
	CHECK_EQ(tw_purgatory_poll(p), 0);
	CHECK_EQ(atomic_load(&wide.expirations), 0);
	tw_purgatory_destroy(p); /* hands both back */
	CHECK_EQ(atomic_load(&far.releases), 1);
	CHECK_EQ(atomic_load(&wide.releases), 1);
	CHECK_EQ(atomic_load(&far.expirations), 0);
}

/*
 * A completion stops its op's timeout and unlinks it before it returns
 * (on_release may free the op), but waits for no other timer: a timeout
 * that was applied long ago (the usual case) is unlinked without a drain
 * of the inboxes. B's timeout, armed after the last poll, is still in its
 * inbox after A completes: the completion did not drain it (it did before,
 * visiting every inbox on each completion). Both are still accounted.
 */
static void test_a_completion_unlinks_its_timeout_without_a_drain(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct mock a, b;

	mock_init(&a, 500);
	mock_init(&b, 500);
	CHECK_EQ(watch_on(p, &a, 1, "a", NULL, NULL), 0);
	CHECK(tw_purgatory_poll(p) >= 0); /* A's timeout is in the wheel */
	CHECK(tw_timer_pending(&a.op.timer.wheel_timer));
	CHECK_EQ(watch_on(p, &b, 1, "b", NULL, NULL), 0); /* B's in an inbox */
	CHECK(!tw_timer_pending(&b.op.timer.wheel_timer));
	atomic_store(&a.completable, true);
	CHECK_EQ(check(p, "a"), 1);
	CHECK_EQ(atomic_load(&a.completes), 1);
	CHECK_EQ(atomic_load(&a.releases), 1); /* its timeout's reference went */
	CHECK(!tw_timer_pending(&a.op.timer.wheel_timer));
	CHECK(!tw_timer_pending(&b.op.timer.wheel_timer)); /* not drained */
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK(tw_timer_pending(&b.op.timer.wheel_timer));
	atomic_store(&virtual_now, 1000 + 600);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(atomic_load(&b.expirations), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(check(p, "b"), 0); /* its lingering entry goes */
	CHECK_EQ(atomic_load(&b.releases), 1);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	tw_purgatory_destroy(p);
}

int main(void)
{
	RUN(test_timeouts_with_a_tolerance_expire_together);
	RUN(test_a_loop_sleeping_the_purgatory_timeout);
	RUN(test_tolerances_in_one_jump);
	RUN(test_a_timeout_past_the_end_of_time);
	RUN(test_bad_tolerances);
	RUN(test_refused_watches_and_late_tolerances);
	RUN(test_tolerances_at_the_ends_of_time);
	RUN(test_request_satisfaction);
	RUN(test_request_expiry);
	RUN(test_request_purge);
	RUN(test_cancel_for_key);
	RUN(test_shared_caller_lock);
	RUN(test_own_lock_sleeps_and_wakes);
	RUN(test_shutdown_hands_back_pending);
	RUN(test_bad_input);
	RUN(test_many_keys_and_a_hot_key);
	RUN(test_default_configuration);
	RUN(test_memory_bounded_by_purge);
	RUN(test_many_threads_complete_every_op);
	RUN(test_condition_and_timeout_race_exactly_once);
	RUN(test_a_completion_unlinks_its_timeout_without_a_drain);
	return check_report();
}
