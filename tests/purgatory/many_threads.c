/* SPDX-License-Identifier: MIT */
/*
 * Under many threads every op completes exactly once: a condition and a
 * timeout race to one completion, many keys and a hot key (long walks,
 * several at once) lose nothing.
 */
#define _POSIX_C_SOURCE 200809L

#include "purgatory_mocks.h"

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
	deadline = now_ns() + 60000 * MS; /* a guard against a hang */
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

/*
 * One hot key watched by far more ops than a check notes for its way out
 * (8): its checks walk long lists, their places kept by pointers into
 * the key's list, while other threads check the same key (their walks
 * interleaved) and purge, new ops are watched on it, and a second key a
 * tenth of them share is cancelled. Every op ends exactly once
 * (completed, or handed back by the cancel), none is left to its
 * timeout, and every op is released once.
 */
enum { HOT_N = 2000, HOT_CHECKERS = 3 };
static struct mock hot_ops[HOT_N];
static atomic_int hot_ended, hot_handed;
static int64_t hot_deadline; /* a guard against a hang: the check fails */

static void *hot_checker(void *arg)
{
	(void)arg;
	while (atomic_load(&hot_ended) < HOT_N && now_ns() < hot_deadline) {
		int64_t n = check(shared_p, "hot");

		CHECK(n >= 0);
		atomic_fetch_add(&hot_ended, (int)n);
		tw_purgatory_purge(shared_p);
	}
	return NULL;
}

static void hot_hand_back(struct tw_delayed_op *op)
{
	(void)op;
	atomic_fetch_add(&hot_handed, 1);
	atomic_fetch_add(&hot_ended, 1);
}

/* Watch ops [from, to) on "hot" and "warm", a tenth of them on
 * "cancelled" instead of "warm", which is cancelled every 100 watches. */
static void hot_watch(int from, int to)
{
	for (int i = from; i < to; i++) {
		int rc;

		mock_init(&hot_ops[i], 100000 * MS);
		/* tried 1 to 7 times before its condition holds */
		atomic_store(&hot_ops[i].attempts_left, 1 + i % 7);
		rc = watch_on(shared_p, &hot_ops[i], 2, "hot",
			      i % 10 ? "warm" : "cancelled", NULL);
		CHECK(rc == 0 || rc == 1);
		if (rc == 1)
			atomic_fetch_add(&hot_ended, 1);
		if (i % 100 == 99)
			(void)tw_purgatory_cancel_for_key(shared_p, "cancelled", 9,
							  hot_hand_back);
	}
}

static void *hot_watcher(void *arg)
{
	(void)arg;
	hot_watch(HOT_N / 2, HOT_N);
	return NULL;
}

static void test_long_checks_of_a_hot_key_under_many_threads(void)
{
	pthread_t checkers[HOT_CHECKERS], watcher;
	int completes = 0;

	shared_p = new_purgatory(100);
	atomic_store(&hot_ended, 0);
	atomic_store(&hot_handed, 0);
	hot_deadline = now_ns() + 60000 * MS;
	/* 1000 on the key before the first check: its checks begin with
	 * long walks; the rest are watched while they run */
	hot_watch(0, HOT_N / 2);
	pthread_create(&watcher, NULL, hot_watcher, NULL);
	for (int i = 0; i < HOT_CHECKERS; i++)
		pthread_create(&checkers[i], NULL, hot_checker, NULL);
	pthread_join(watcher, NULL);
	for (int i = 0; i < HOT_CHECKERS; i++)
		pthread_join(checkers[i], NULL);
	CHECK_EQ(atomic_load(&hot_ended), HOT_N);
	CHECK_EQ(tw_purgatory_delayed(shared_p), 0);
	tw_purgatory_destroy(shared_p);
	for (int i = 0; i < HOT_N; i++) {
		CHECK(atomic_load(&hot_ops[i].completes) <= 1);
		completes += atomic_load(&hot_ops[i].completes);
		CHECK_EQ(atomic_load(&hot_ops[i].expirations), 0);
		CHECK_EQ(atomic_load(&hot_ops[i].releases), 1);
		tw_op_destroy(&hot_ops[i].op);
	}
	CHECK_EQ(completes + atomic_load(&hot_handed), HOT_N);
	CHECK(atomic_load(&hot_handed) <= HOT_N / 10);
}

int main(void)
{
	RUN(test_many_keys_and_a_hot_key);
	RUN(test_many_threads_complete_every_op);
	RUN(test_condition_and_timeout_race_exactly_once);
	RUN(test_long_checks_of_a_hot_key_under_many_threads);
	return check_report();
}
