/* SPDX-License-Identifier: MIT */
/*
 * A purgatory's timeouts expire on time, no earlier than asked and no
 * later than their tolerance allows: the default configuration, timeouts
 * with a tolerance expiring together (stepped and in one jump, at the
 * ends of time), a loop sleeping the purgatory's timeout, refused
 * watches and late or bad tolerances, a completion that unlinks its
 * timeout at once.
 */
#define _POSIX_C_SOURCE 200809L

#include "purgatory_mocks.h"

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
	struct tw_purgatory *p = NULL;
	struct mock m;

	mock_init(&m, 100);
	CHECK_EQ(tw_op_set_tolerance(NULL, 10), TW_EINVAL);
	CHECK_EQ(tw_op_set_tolerance(&m.op, -1), TW_EINVAL);
	CHECK_EQ(tw_op_set_tolerance(&m.op, 50), TW_OK);
	p = manual_purgatory_in(TW_MODE_KAFKA);
	CHECK_EQ(watch_on(p, &m, 1, "k", NULL, NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(tw_op_set_tolerance(&m.op, 0), TW_OK);
	CHECK_EQ(watch_on(p, &m, 1, "k", NULL, NULL), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	/* Watched: a second watch is TW_EBUSY here as in exact mode, though
	 * the armed timeout's due time sits where the tolerance waited. */
	CHECK_EQ(watch_on(p, &m, 1, "k", NULL, NULL), TW_EBUSY);
	CHECK_EQ(tw_purgatory_watched(p), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	atomic_store(&virtual_now, 1100);
	CHECK_EQ(tw_purgatory_poll(p), 1);
	CHECK_EQ(atomic_load(&m.expirations), 1);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&m.releases), 1);
}

/* A loop asking after the only timeout was stopped (its op completed by
 * a key check): in exact mode nothing is armed at once; in kafka mode the
 * stopped timeout's bucket may still be named, no later than the timeout
 * was due, and a poll then expires nothing and leaves nothing to name. */
static void test_next_expiry_after_the_only_timeout_stopped(void)
{
	for (int kafka = 0; kafka < 2; kafka++) {
		struct tw_purgatory *p = NULL;
		struct mock m;
		int64_t when = -1;
		int polls = 0;

		p = manual_purgatory_in(kafka ? TW_MODE_KAFKA : TW_MODE_EXACT);
		mock_init(&m, 100);
		CHECK_EQ(watch_on(p, &m, 1, "k", NULL, NULL), 0);
		atomic_store(&m.completable, true);
		CHECK_EQ(check(p, "k"), 1);
		CHECK_EQ(tw_purgatory_delayed(p), 0);
		if (!kafka)
			CHECK(!tw_purgatory_next_expiry(p, &when));
		while (tw_purgatory_next_expiry(p, &when) && polls < 10) {
			CHECK(when <= 1100);
			CHECK_EQ(tw_purgatory_timeout(p, 1000), when - 1000);
			atomic_store(&virtual_now, when);
			CHECK_EQ(tw_purgatory_poll(p), 0);
			polls++;
		}
		/* Kafka's queue keeps the emptied bucket until it expires. */
		CHECK_EQ(polls > 0, kafka);
		CHECK(polls < 10);
		CHECK_EQ(tw_purgatory_timeout(p, 1000), -1);
		CHECK_EQ(atomic_load(&m.expirations), 0);
		tw_purgatory_destroy(p);
		CHECK_EQ(atomic_load(&m.completes), 1);
		CHECK_EQ(atomic_load(&m.releases), 1);
	}
}

/* purgatory.h: "a second watch, racing the first or after it, ... gets
 * TW_EBUSY". In kafka mode a watch also looks at the op's tolerance,
 * which waits in the timer's due time that the first watch's arming
 * overwrites: only the watch that claimed the op reads it, so a racing
 * second watch never reads what the first writes (ThreadSanitizer sees
 * any such read) and answers TW_EBUSY, never TW_EINVAL. Two threads
 * released together watch each of many fresh ops. */
enum { RACING_OPS = 20000 };

struct racing_watcher {
	struct tw_purgatory *p;
	struct mock *m;          /* RACING_OPS of them, watched in turn */
	struct tw_watch *w;      /* this thread's entry for each: the
				  * winner's lives as long as its op */
	pthread_barrier_t *go;
	int *rc;                 /* this thread's answer for each */
};

static void *racing_watcher_run(void *arg)
{
	struct racing_watcher *r = arg;
	const void *keys[1] = { "k" };
	size_t lens[1] = { 1 };

	for (int i = 0; i < RACING_OPS; i++) {
		pthread_barrier_wait(r->go);
		r->rc[i] = tw_purgatory_try_complete_else_watch(r->p, &r->m[i].op,
								keys, lens, 1,
								&r->w[i]);
	}
	return NULL;
}

static void test_two_racing_watches_of_one_op_in_kafka_mode(void)
{
	static struct mock m[RACING_OPS];
	static struct tw_watch w[2][RACING_OPS];
	static int rc[2][RACING_OPS];
	struct tw_purgatory *p = NULL;
	pthread_barrier_t go;
	struct racing_watcher r[2];
	pthread_t th[2];

	p = manual_purgatory_in(TW_MODE_KAFKA);
	for (int i = 0; i < RACING_OPS; i++)
		mock_init(&m[i], 100000 * MS);
	CHECK_EQ(pthread_barrier_init(&go, NULL, 2), 0);
	for (int k = 0; k < 2; k++) {
		r[k] = (struct racing_watcher){ p, m, w[k], &go, rc[k] };
		CHECK_EQ(pthread_create(&th[k], NULL, racing_watcher_run, &r[k]), 0);
	}
	for (int k = 0; k < 2; k++)
		CHECK_EQ(pthread_join(th[k], NULL), 0);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < RACING_OPS; i++)
		CHECK((rc[0][i] == 0 && rc[1][i] == TW_EBUSY) ||
		      (rc[0][i] == TW_EBUSY && rc[1][i] == 0));
	CHECK_EQ(tw_purgatory_watched(p), RACING_OPS);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), RACING_OPS);
	tw_purgatory_destroy(p);
	for (int i = 0; i < RACING_OPS; i++) {
		CHECK_EQ(atomic_load(&m[i].releases), 1);
		tw_op_destroy(&m[i].op);
	}
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
 * A completion stops its op's timeout under the timeout's shard mutex
 * before it returns (on_release may free the op): the timeout leaves the
 * wheel at once, with nothing left for the reaper to meet later, and
 * another op's timeout stays where it is. Both are still accounted.
 */
static void test_a_completion_unlinks_its_timeout_at_once(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct mock a, b;

	mock_init(&a, 500);
	mock_init(&b, 500);
	CHECK_EQ(watch_on(p, &a, 1, "a", NULL, NULL), 0);
	CHECK_EQ(watch_on(p, &b, 1, "b", NULL, NULL), 0);
	/* Armed: each in its shard's wheel as its watch returns. */
	CHECK(tw_timer_pending(&a.op.timer.wheel_timer));
	CHECK(tw_timer_pending(&b.op.timer.wheel_timer));
	atomic_store(&a.completable, true);
	CHECK_EQ(check(p, "a"), 1);
	CHECK_EQ(atomic_load(&a.completes), 1);
	CHECK_EQ(atomic_load(&a.releases), 1); /* its timeout's reference went */
	CHECK(!tw_timer_pending(&a.op.timer.wheel_timer));
	CHECK(tw_timer_pending(&b.op.timer.wheel_timer));
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	atomic_store(&virtual_now, 1000 + 600);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(atomic_load(&a.expirations), 0);
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
	RUN(test_next_expiry_after_the_only_timeout_stopped);
	RUN(test_two_racing_watches_of_one_op_in_kafka_mode);
	RUN(test_refused_watches_and_late_tolerances);
	RUN(test_tolerances_at_the_ends_of_time);
	RUN(test_default_configuration);
	RUN(test_a_completion_unlinks_its_timeout_at_once);
	return check_report();
}
