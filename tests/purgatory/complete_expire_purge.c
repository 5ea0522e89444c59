/* SPDX-License-Identifier: MIT */
/*
 * A delayed operation ends exactly once -- completed by its condition,
 * expired, or handed back -- as Kafka's DelayedOperationTest has it (see
 * ../shared/KAFKA_TESTS.md: satisfaction, expiry, purge, cancel for a
 * key, a shared caller lock); shutdown hands back what is pending, bad
 * input is refused, and the purge bounds the memory. Many threads are in
 * many_threads.c, the configuration and the tolerances in
 * timeouts_and_tolerance.c.
 */
#define _POSIX_C_SOURCE 200809L

#include "purgatory_mocks.h"

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

/*
 * may_complete (struct tw_op_ops): a key check looks at it first and,
 * when it says no, neither takes the op's lock nor calls try_complete;
 * when it says yes, the op is tried as before. A watch and
 * safe_try_complete always try. Seen failing with the look left out of
 * the check (tries counted 2, not 0).
 */
static atomic_int looks;

static bool mock_may(struct tw_delayed_op *op)
{
	atomic_fetch_add(&looks, 1);
	return atomic_load(&tw_container_of(op, struct mock, op)->completable);
}

static const struct tw_op_ops mock_ops_looking = { mock_try, mock_complete,
						   mock_expire, mock_release,
						   mock_may };

static void test_a_check_skips_an_op_its_look_says_is_not_ready(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	struct mock r;

	mock_init(&r, 100000 * MS);
	CHECK_EQ(tw_op_init(&r.op, 100000 * MS, &mock_ops_looking, NULL), TW_OK);
	atomic_store(&looks, 0);
	CHECK_EQ(watch_on(p, &r, 1, "test1", NULL, NULL), 0);
	CHECK_EQ(atomic_load(&looks), 0);      /* a watch tries, looking at nothing */
	CHECK_EQ(atomic_load(&r.tries), 2);    /* before and after its entry */
	CHECK_EQ(check(p, "test1"), 0);
	CHECK_EQ(check(p, "test1"), 0);
	CHECK_EQ(atomic_load(&looks), 2);
	CHECK_EQ(atomic_load(&r.tries), 2);    /* skipped: no lock, no try */
	CHECK(!tw_op_safe_try_complete(&r.op)); /* tries, not looks */
	CHECK_EQ(atomic_load(&r.tries), 3);
	CHECK_EQ(atomic_load(&looks), 2);
	atomic_store(&r.completable, true);
	CHECK_EQ(check(p, "test1"), 1);
	CHECK_EQ(atomic_load(&looks), 3);
	CHECK_EQ(atomic_load(&r.tries), 4);
	CHECK_EQ(atomic_load(&r.completes), 1);
	CHECK(r.lock_was_held);
	CHECK_EQ(check(p, "test1"), 0);        /* completed: its list is gone */
	CHECK_EQ(atomic_load(&looks), 3);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&r.releases), 1);
	tw_op_destroy(&r.op);
}

static void test_request_expiry(void)
{
	struct tw_purgatory *p = new_purgatory(0);
	struct mock r1, r2;
	/* Only a guard against a hang: the wait ends when the expiry has run. */
	int64_t deadline = now_ns() + 60000 * MS;

	mock_init(&r1, 20 * MS);
	mock_init(&r2, 200000 * MS);
	CHECK_EQ(watch_on(p, &r1, 1, "test1", NULL, NULL), 0);
	CHECK_EQ(watch_on(p, &r2, 1, "test2", NULL, NULL), 0);
	/* An expiry runs on_complete, then on_expiration: wait for the
	 * second, or a preempted executor is read between the two. */
	while (!atomic_load(&r1.expirations) && now_ns() < deadline)
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
 * it (inside try_complete) until the other has counted itself a waiter
 * (it sleeps, or is about to); then the release must wake it, and each
 * try_complete ran alone. */
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
		while (!tw__lock_waiting(&op->own_lock))
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
							  NULL, NULL, NULL };

	CHECK_EQ(tw_op_init(&c.op, 1000 * MS, &contended_ops, NULL), TW_OK);
	CHECK(!c.op.shared_lock);
	pthread_create(&second, NULL, contended_second, &c);
	tw_op_safe_try_complete(&c.op);
	pthread_join(second, NULL);
	CHECK_EQ(atomic_load(&c.entries), 2);
	CHECK_EQ(c.not_atomic, 2);
	CHECK(!tw__lock_is_held(&c.op.own_lock));
	CHECK_EQ(tw__lock_waiting(&c.op.own_lock), 0);
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
	static const struct tw_op_ops no_try = { NULL, mock_complete, NULL, NULL, NULL };

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

/* Each op watches a key nobody checks and one that ends it: a check that
 * completes it or, with cancel, a cancel_for_key (a cancelled op is
 * completed too: tw_op_is_completed). Without purging, the first lists
 * would grow without end; each ending counts towards the purge that takes
 * the op's entry off the unchecked key's list and lets it be released. */
static void memory_bounded_by_purge(bool cancel)
{
	enum { N = 20000, INTERVAL = 100 };
	static struct mock m[N];
	struct tw_purgatory *p = new_purgatory(INTERVAL);
	size_t most = 0;
	char idle[32], ending[32];
	long released = 0;

	for (int i = 0; i < N; i++) {
		mock_init(&m[i], 100000 * MS);
		snprintf(idle, sizeof(idle), "idle-%d", i % 1000);
		snprintf(ending, sizeof(ending), "%s-%d", cancel ? "gone" : "hot", i);
		CHECK_EQ(watch_on(p, &m[i], 2, idle, ending, NULL), 0);
		if (cancel) {
			CHECK_EQ(tw_purgatory_cancel_for_key(p, ending, strlen(ending),
							     NULL), 1);
		} else {
			atomic_store(&m[i].completable, true);
			CHECK_EQ(check(p, ending), 1);
		}
		if (tw_purgatory_watched(p) > most)
			most = tw_purgatory_watched(p);
	}
	/* At most INTERVAL ended ops linger before a purge runs. */
	CHECK(most <= 2 * (INTERVAL + 2));
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	for (int i = 0; i < N; i++)
		released += atomic_load(&m[i].releases);
	CHECK(released >= N - INTERVAL - 2);
	tw_purgatory_destroy(p);
	for (int i = 0; i < N; i++) {
		CHECK_EQ(atomic_load(&m[i].releases), 1);
		if (cancel)
			CHECK_EQ(atomic_load(&m[i].completes) +
					 atomic_load(&m[i].expirations), 0);
		else
			CHECK_EQ(atomic_load(&m[i].completes), 1);
		tw_op_destroy(&m[i].op);
	}
}

static void test_memory_bounded_by_purge(void)
{
	memory_bounded_by_purge(false);
}

static void test_memory_bounded_by_purge_after_cancels(void)
{
	memory_bounded_by_purge(true);
}

/* Ops completed only by tw_op_force_complete() from outside (which never
 * purges: it may run under the caller's lock) are purged by the next of
 * the purgatory's own calls that purge, whatever that call does itself:
 * a check of an unrelated key that completes nothing, a cancel_for_key of
 * a key nobody watches, a key check of several keys. */
static void test_forced_completions_are_purged_by_the_next_call(void)
{
	enum { N = 100, INTERVAL = 10 };
	static struct mock m[N];
	const void *keys[2] = { "E", "F" };
	size_t lens[2] = { 1, 1 };

	for (int call = 0; call < 3; call++) {
		struct tw_purgatory *p = new_purgatory(INTERVAL);
		long released = 0;

		for (int i = 0; i < N; i++) {
			mock_init(&m[i], 100000 * MS);
			CHECK_EQ(watch_on(p, &m[i], 2, "A", "B", NULL), 0);
		}
		for (int i = 0; i < N; i++)
			CHECK(tw_op_force_complete(&m[i].op));
		CHECK_EQ(tw_purgatory_watched(p), 2 * N);
		if (call == 0)
			CHECK_EQ(check(p, "C"), 0);
		else if (call == 1)
			CHECK_EQ(tw_purgatory_cancel_for_key(p, "D", 1, NULL), 0);
		else
			CHECK_EQ(tw_purgatory_check_and_complete_keys(p, keys, lens, 2), 0);
		CHECK_EQ(tw_purgatory_watched(p), 0);
		for (int i = 0; i < N; i++)
			released += atomic_load(&m[i].releases);
		CHECK_EQ(released, N);
		tw_purgatory_destroy(p);
		for (int i = 0; i < N; i++)
			tw_op_destroy(&m[i].op);
	}
}

int main(void)
{
	RUN(test_request_satisfaction);
	RUN(test_a_check_skips_an_op_its_look_says_is_not_ready);
	RUN(test_request_expiry);
	RUN(test_request_purge);
	RUN(test_cancel_for_key);
	RUN(test_shared_caller_lock);
	RUN(test_own_lock_sleeps_and_wakes);
	RUN(test_shutdown_hands_back_pending);
	RUN(test_bad_input);
	RUN(test_memory_bounded_by_purge);
	RUN(test_memory_bounded_by_purge_after_cancels);
	RUN(test_forced_completions_are_purged_by_the_next_call);
	return check_report();
}
