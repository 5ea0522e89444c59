/* SPDX-License-Identifier: MIT */
/*
 * A wheel timer fires once, in the advance that reaches its tick, and
 * the wheel's books stay right through add, cancel and reschedule: init
 * refuses bad parameters, a bad call changes nothing, a timer is five
 * words, the counts follow every call, exact mode never fires early and
 * at most one tick late, a timer due at or before now fires on the next
 * advance, a reschedule within its bucket stays put, the clock jumps over
 * empty time, exact mode spreads its cascades over time, the event-loop
 * helpers (next expiry, timeout) wake a loop only to fire, and an
 * observer installed between adds sees them. Callbacks that change the
 * wheel are in callbacks_and_order.c, windows in windows.c, the ends of
 * time in ends_of_time.c.
 */

#include "wheel_recs.h"

static void test_init_rejects_bad_parameters(void)
{
	struct tw_wheel w;

	CHECK_EQ(tw_wheel_init(NULL, 1, 20, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 0, 20, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, -5, 20, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, 1, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, TW_WHEEL_SIZE_MAX + 1, 0, TW_MODE_EXACT),
		 TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, 20, 0, (enum tw_mode)7), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, TW_WHEEL_SIZE_MIN, INT64_MIN, TW_MODE_EXACT),
		 TW_OK);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_levels(&w), 1);
	CHECK_EQ(tw_wheel_count(&w), 0);
	CHECK_EQ(tw_wheel_now(&w), INT64_MIN);
	tw_wheel_destroy(&w);
	CHECK_EQ(tw_wheel_destroy(NULL), TW_EINVAL);
	CHECK(strcmp(tw_strerror(TW_EBUSY), "unknown error") != 0);
	CHECK(strcmp(tw_strerror(-12345), "unknown error") == 0);
}

static void test_timer_is_four_pointers_and_a_due(void)
{
	/* The advertised memory per pending timer: 40 bytes on LP64 (five
	 * words), 24 on a 32-bit build, and the wheel allocates nothing per
	 * timer. */
	CHECK_EQ(sizeof(struct tw_timer), 4 * sizeof(void *) + sizeof(int64_t));
}

static void test_bad_calls_change_nothing(void)
{
	struct tw_wheel w, other;
	struct rec a, b;
	struct tw_timer no_fn;

	tw_wheel_init(&w, 10, 8, 0, TW_MODE_EXACT);
	tw_wheel_init(&other, 10, 8, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	rec_init(&b, 2);
	tw_timer_init(&no_fn, NULL);

	CHECK_EQ(tw_wheel_add(NULL, &a.timer, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_add(&w, NULL, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_add(&w, &no_fn, 5), TW_EINVAL);
	CHECK(!tw_timer_pending(&no_fn));
	CHECK_EQ(tw_wheel_add(&w, &a.timer, 100), TW_OK);
	CHECK_EQ(tw_wheel_add(&w, &a.timer, 300), TW_EBUSY);
	CHECK_EQ(tw_timer_due(&a.timer), 100);
	CHECK_EQ(tw_wheel_cancel(&other, &a.timer), TW_EOWNER);
	CHECK_EQ(tw_wheel_reschedule(&other, &a.timer, 50), TW_EOWNER);
	CHECK_EQ(tw_wheel_add(&other, &a.timer, 50), TW_EBUSY);
	CHECK_EQ(tw_wheel_cancel(&w, NULL), TW_EINVAL);
	CHECK_EQ(tw_wheel_cancel(NULL, &a.timer), TW_EINVAL);
	CHECK_EQ(tw_wheel_cancel(&w, &b.timer), 0); /* never added */
	CHECK_EQ(tw_wheel_advance(NULL, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_advance(&w, 50), 0);
	CHECK_EQ(tw_wheel_advance(&w, 49), TW_ERANGE); /* backwards */
	CHECK_EQ(tw_wheel_now(&w), 50);
	CHECK_EQ(tw_wheel_count(&w), 1);
	CHECK_EQ(tw_wheel_count(&other), 0);
	CHECK_WHEEL(&w);
	CHECK_WHEEL(&other);
	CHECK_EQ(tw_wheel_advance(&w, 100), 1);
	CHECK_EQ(a.fires, 1);
	tw_wheel_destroy(&w);
	tw_wheel_destroy(&other);
}

static void test_add_cancel_pending_counts(void)
{
	struct tw_wheel w;
	struct rec r[100];
	int64_t when;

	tw_wheel_init(&w, 1, 20, 0, TW_MODE_EXACT);
	CHECK(!tw_wheel_next_expiry(&w, &when));
	CHECK_EQ(tw_wheel_timeout(&w, 0), -1);
	for (int i = 0; i < 100; i++) {
		rec_init(&r[i], i);
		CHECK(!tw_timer_pending(&r[i].timer));
		CHECK_EQ(tw_wheel_add(&w, &r[i].timer, 1 + i * 37), TW_OK);
		CHECK(tw_timer_pending(&r[i].timer));
	}
	CHECK_EQ(tw_wheel_count(&w), 100);
	CHECK_WHEEL(&w);
	for (int i = 0; i < 100; i += 2)
		CHECK_EQ(tw_wheel_cancel(&w, &r[i].timer), 1);
	for (int i = 0; i < 100; i += 2) {
		CHECK_EQ(tw_wheel_cancel(&w, &r[i].timer), 0);
		CHECK(!tw_timer_pending(&r[i].timer));
	}
	CHECK_EQ(tw_wheel_count(&w), 50);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 100 * 37), 50);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(r[i].fires, i % 2);
	CHECK_EQ(tw_wheel_count(&w), 0);
	/* Exact mode drops buckets emptied by cancel: nothing left queued. */
	CHECK(!tw_wheel_next_expiry(&w, &when));
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void test_exact_never_early_less_than_a_tick_late(void)
{
	const int64_t tick = 7;
	struct tw_wheel w;
	struct rec r[300];

	tw_wheel_init(&w, tick, 4, 3, TW_MODE_EXACT);
	for (int i = 0; i < 300; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer, 4 + (i * 13) % 500);
	}
	/* Advance one time unit at a time: each timer must fire at the first
	 * tick boundary at or after its due time. */
	for (int64_t now = 3; now <= 600; now++) {
		CHECK(tw_wheel_advance(&w, now) >= 0);
		CHECK_WHEEL(&w);
	}
	for (int i = 0; i < 300; i++) {
		int64_t due = tw_timer_due(&r[i].timer);
		int64_t boundary = (due + tick - 1) / tick * tick;

		CHECK_EQ(r[i].fires, 1);
		CHECK_EQ(r[i].fired_at, boundary);
		CHECK(r[i].fired_at >= due && r[i].fired_at < due + tick);
	}
	tw_wheel_destroy(&w);
}

static void test_due_at_or_before_now_fires_on_next_advance(void)
{
	struct tw_wheel w;
	struct rec a, b, c;
	int64_t when;
	unsigned level;

	tw_wheel_init(&w, 1000, 3, 1500, TW_MODE_EXACT);
	rec_init(&a, 1);
	rec_init(&b, 2);
	rec_init(&c, 3);
	CHECK_EQ(tw_wheel_add(&w, &a.timer, 1500), TW_OK);    /* == now */
	CHECK_EQ(tw_wheel_add(&w, &b.timer, -99999), TW_OK);  /* long past */
	CHECK_EQ(tw_wheel_add(&w, &c.timer, 1501), TW_OK);    /* future */
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level, NULL), TW_OK);
	CHECK_EQ(level, TW_LEVEL_READY);
	CHECK_EQ(tw_timer_where(&w, &c.timer, &level, NULL), TW_OK);
	CHECK_EQ(level, 1);
	CHECK(tw_wheel_next_expiry(&w, &when));
	CHECK_EQ(when, 1500);
	CHECK_EQ(tw_wheel_timeout(&w, 1500), 0);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 1500), 2);
	CHECK_EQ(a.fired_at, 1500);
	CHECK_EQ(b.fired_at, 1500);
	CHECK_EQ(c.fires, 0);
	CHECK(tw_wheel_next_expiry(&w, &when));
	CHECK_EQ(when, 2000);
	CHECK_EQ(tw_wheel_timeout(&w, 1700), 300);
	CHECK_EQ(tw_wheel_advance(&w, 1999), 0);
	CHECK_EQ(tw_wheel_advance(&w, 2000), 1);
	CHECK_EQ(c.fired_at, 2000);
	tw_wheel_destroy(&w);
}

static void test_reschedule(void)
{
	struct tw_wheel w;
	struct rec a;

	tw_wheel_init(&w, 10, 8, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	CHECK_EQ(tw_wheel_reschedule(&w, &a.timer, 500), 0); /* was idle */
	CHECK(tw_timer_pending(&a.timer));
	CHECK_EQ(tw_wheel_reschedule(&w, &a.timer, 20), 1);
	CHECK_EQ(tw_wheel_reschedule(&w, &a.timer, 100000), 1);
	CHECK_EQ(tw_wheel_count(&w), 1);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 99990), 0);
	CHECK_EQ(tw_wheel_advance(&w, 100000), 1);
	CHECK_EQ(a.fired_at, 100000);
	tw_wheel_destroy(&w);
}

static void test_reschedule_within_its_bucket_stays_put(void)
{
	/* An idle timeout reset a little later, at a coarse level, keeps its
	 * bucket; it still fires at its new due time exactly. */
	struct tw_wheel w;
	struct rec a, b;
	unsigned level, slot, level2, slot2;

	tw_wheel_init(&w, 1, 20, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	rec_init(&b, 2);
	tw_wheel_add(&w, &a.timer, 30000);
	tw_wheel_add(&w, &b.timer, 30001);
	tw_timer_where(&w, &a.timer, &level, &slot);
	CHECK(level > 1);
	CHECK_EQ(tw_wheel_reschedule(&w, &a.timer, 30005), 1);
	tw_timer_where(&w, &a.timer, &level2, &slot2);
	CHECK_EQ(level2, level);
	CHECK_EQ(slot2, slot);
	CHECK_EQ(tw_timer_due(&a.timer), 30005);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 30004), 1); /* only b */
	CHECK_EQ(a.fires, 0);
	CHECK_EQ(tw_wheel_advance(&w, 30005), 1);
	CHECK_EQ(a.fired_at, 30005);
	/* Rescheduled to now or the past: it fires on the next advance. */
	tw_wheel_add(&w, &a.timer, 90000);
	CHECK_EQ(tw_wheel_reschedule(&w, &a.timer, 30005), 1);
	CHECK_EQ(tw_wheel_advance(&w, 30005), 1);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void test_reset_later_stays_put_and_fires_on_time(void)
{
	/* An idle timeout reset later and later, past its bucket, never
	 * moves (exact mode): its bucket re-files it when it expires. It
	 * fires once, at its last due time exactly. An earlier reset does
	 * move it, or it would fire late. */
	struct tw_wheel w;
	struct rec a;
	unsigned level, slot, level2, slot2;
	int64_t due = 1000;

	tw_wheel_init(&w, 1, 20, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	tw_wheel_add(&w, &a.timer, due);
	tw_timer_where(&w, &a.timer, &level, &slot);
	for (int i = 0; i < 1000; i++) {
		due += 997; /* crosses many buckets and several levels */
		CHECK_EQ(tw_wheel_reschedule(&w, &a.timer, due), 1);
		tw_timer_where(&w, &a.timer, &level2, &slot2);
		CHECK_EQ(level2, level);
		CHECK_EQ(slot2, slot);
	}
	CHECK_WHEEL(&w);
	for (int64_t now = 0; now < due; now += 613) {
		CHECK(tw_wheel_advance(&w, now) == 0);
		CHECK_WHEEL(&w);
	}
	CHECK_EQ(a.fires, 0);
	CHECK_EQ(tw_wheel_advance(&w, due), 1);
	CHECK_EQ(a.fired_at, due);
	/* Earlier than its bucket: it moves. */
	tw_wheel_add(&w, &a.timer, due + 5000);
	tw_timer_where(&w, &a.timer, &level, &slot);
	CHECK_EQ(tw_wheel_reschedule(&w, &a.timer, due + 3), 1);
	tw_timer_where(&w, &a.timer, &level2, &slot2);
	CHECK(level2 != level || slot2 != slot);
	CHECK_EQ(tw_wheel_advance(&w, due + 3), 1);
	CHECK_EQ(a.fired_at, due + 3);
	tw_wheel_destroy(&w);
}

/* Counts buckets popped: the clock must jump, not tick. */
static int popped;
static void count_pops(void *arg, const struct tw_wheel *w,
		       const struct tw_event *ev)
{
	(void)arg;
	(void)w;
	if (ev->kind == TW_EV_POPPED)
		popped++;
}

static void test_clock_jumps_over_empty_time(void)
{
	static const struct tw_observer obs = { count_pops, NULL };
	struct tw_wheel w;
	struct rec a;

	tw_wheel_init(&w, 1, 20, 0, TW_MODE_EXACT);
	tw_wheel_set_observer(&w, &obs);
	rec_init(&a, 1);
	popped = 0;
	tw_wheel_add(&w, &a.timer, 1000000000000LL); /* 1e12 ticks away */
	CHECK_EQ(tw_wheel_advance(&w, 2000000000000LL), 1);
	CHECK_EQ(a.fired_at, 2000000000000LL);
	/* One bucket per level on the way down, not 1e12 ticks. */
	CHECK(popped <= (int)tw_wheel_levels(&w));
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

/* The last TW_EV_READY event seen. */
static struct tw_event ready_seen;
static int nready;
static void keep_ready(void *arg, const struct tw_wheel *w,
		       const struct tw_event *ev)
{
	(void)arg;
	(void)w;
	if (ev->kind == TW_EV_READY) {
		ready_seen = *ev;
		nready++;
	}
}

/* A timer due when added is told as ready with its level
 * (TW_LEVEL_READY) and itself, and the fields the kind does not name 0
 * (inspect.h), in both modes. */
static void test_ready_event_names_the_timer_alone(void)
{
	static const struct tw_observer obs = { keep_ready, NULL };

	for (int mode = 0; mode < 2; mode++) {
		struct tw_wheel w;
		struct rec a;

		tw_wheel_init(&w, 1, 16, 12345, (enum tw_mode)mode);
		tw_wheel_set_observer(&w, &obs);
		rec_init(&a, 1);
		nready = 0;
		CHECK_EQ(tw_wheel_add(&w, &a.timer, 12000), TW_OK);
		CHECK_EQ(nready, 1);
		CHECK_EQ(ready_seen.level, TW_LEVEL_READY);
		CHECK_EQ(ready_seen.slot, 0);
		CHECK_EQ(ready_seen.time, 0);
		CHECK(ready_seen.timer == &a.timer);
		CHECK_EQ(tw_wheel_advance(&w, 12345), 1);
		tw_wheel_destroy(&w);
	}
}

/* Counts timers moved or placed per advance. */
static long moves;
static void count_moves(void *arg, const struct tw_wheel *w,
			const struct tw_event *ev)
{
	(void)arg;
	(void)w;
	if (ev->kind == TW_EV_PLACED)
		moves++;
}

static void test_exact_mode_spreads_cascades_over_time(void)
{
	/* 100000 timers due in [1000, 1100): one higher-level bucket. Kafka
	 * moves them all in one advance; exact mode moves them down in
	 * shares over the tick before they are due, so no single 1 ms step
	 * does more than a small part of the work. Same fire times. */
	enum { N = 100000 };
	static const struct tw_observer obs = { count_moves, NULL };
	static struct rec r[N];

	for (int mode = 0; mode < 2; mode++) {
		struct tw_wheel w;
		long worst = 0, fired = 0;

		tw_wheel_init(&w, 1, 20, 0, (enum tw_mode)mode);
		for (int i = 0; i < N; i++) {
			rec_init(&r[i], i);
			tw_wheel_add(&w, &r[i].timer, 1000 + (i * 7919) % 100);
		}
		tw_wheel_set_observer(&w, &obs);
		for (int64_t now = 1; now <= 1100; now++) {
			moves = 0;
			fired += tw_wheel_advance(&w, now);
			if (moves > worst)
				worst = moves;
			if (now % 50 == 0)
				CHECK_WHEEL(&w);
		}
		CHECK_EQ(fired, N);
		for (int i = 0; i < N; i += 997) /* tick 1: both modes exact */
			CHECK_EQ(r[i].fired_at, tw_timer_due(&r[i].timer));
		if (mode == TW_MODE_KAFKA)
			CHECK(worst >= N); /* the burst this avoids */
		else
			CHECK(worst <= N / 20);
		tw_wheel_destroy(&w);
	}
}

static void test_exact_drain_shares_follow_the_ticks_an_advance_covers(void)
{
	/* The same 100000 timers, advanced every 8 ticks as an event loop
	 * that sleeps between wakes would: each advance moves the share of
	 * the ticks it covers, so the drain keeps pace and no single advance
	 * is left with most of a bucket at its deadline (a share of 1/left
	 * per advance, whatever it covered, fell behind and did). */
	enum { N = 100000, STEP = 8 };
	static const struct tw_observer obs = { count_moves, NULL };
	static struct rec r[N];
	struct tw_wheel w;
	long worst = 0, fired = 0;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	for (int i = 0; i < N; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer, 1000 + (i * 7919) % 100);
	}
	tw_wheel_set_observer(&w, &obs);
	for (int64_t now = STEP; now <= 1104; now += STEP) {
		int64_t when;

		moves = 0;
		fired += tw_wheel_advance(&w, now);
		if (moves > worst)
			worst = moves;
		CHECK_WHEEL(&w);
		/* It may ask for a wake before 1000 (to drain), never one
		 * in the past. */
		if (tw_wheel_next_expiry(&w, &when))
			CHECK(when >= now);
	}
	CHECK_EQ(fired, N);
	for (int i = 0; i < N; i += 997)
		CHECK(r[i].fired_at >= tw_timer_due(&r[i].timer) &&
		      r[i].fired_at < tw_timer_due(&r[i].timer) + STEP);
	CHECK(worst <= N / 10);
	tw_wheel_destroy(&w);
}

/* An event loop that only wakes when next_expiry says: 100000 timers due
 * in [1000, 1100) sit in big buckets that must drain before 1000. Waking
 * only to fire, the loop would sleep until 1000 and move nearly all of
 * them in that one advance (the service's p99 lateness 20-30 ms); the
 * big buckets ask for a wake per 2048 timers to move. */
static void test_exact_big_buckets_drain_in_an_event_loop(void)
{
	enum { N = 100000 };
	static const struct tw_observer obs = { count_moves, NULL };
	static struct rec r[N];
	struct tw_wheel w;
	long worst = 0, fired = 0, advances = 0, idle = 0;
	int64_t when;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	for (int i = 0; i < N; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer, 1000 + (i * 7919) % 100);
	}
	tw_wheel_set_observer(&w, &obs);
	while (tw_wheel_next_expiry(&w, &when)) {
		int64_t n;

		moves = 0;
		n = tw_wheel_advance(&w, when);
		fired += n;
		advances++;
		idle += n == 0;
		if (moves > worst)
			worst = moves;
	}
	CHECK_WHEEL(&w);
	CHECK_EQ(fired, N);
	for (int i = 0; i < N; i += 997)
		CHECK_EQ(r[i].fired_at, tw_timer_due(&r[i].timer));
	/* A share is at most 2048 timers plus what a bucket below the
	 * threshold moves at once; the wakes for nothing are the drains'. */
	CHECK(worst <= 3 * 2048);
	CHECK(idle <= N / 2048 * 2 + 8);
	CHECK(advances - idle == 100); /* one per due tick */
	tw_wheel_destroy(&w);
}

/* next_expiry names a time at which something fires: an event loop that
 * sleeps until it and advances there wakes for nothing only for a bucket
 * whose earliest timer was cancelled (at most once per such timer), never
 * merely to cascade (81 % of such wakes fired nothing when next_expiry
 * named cascade times). */
static void test_exact_next_expiry_wakes_only_to_fire(void)
{
	enum { N = 20000 };
	static struct rec r[N];
	uint64_t x = 12345;

	for (int cancel_some = 0; cancel_some < 2; cancel_some++) {
		struct tw_wheel w;
		long advances = 0, idle = 0, fired = 0, cancelled = 0;
		int64_t when;

		tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
		for (int i = 0; i < N; i++) {
			rec_init(&r[i], i);
			tw_wheel_add(&w, &r[i].timer,
				     1 + test_rand_below(&x, 10800000));
		}
		for (int i = 0; cancel_some && i < N; i += 7)
			cancelled += tw_wheel_cancel(&w, &r[i].timer);
		while (tw_wheel_next_expiry(&w, &when)) {
			int64_t n = tw_wheel_advance(&w, when);

			CHECK(n >= 0);
			advances++;
			fired += n;
			idle += n == 0;
			if (advances % 1000 == 0)
				CHECK_WHEEL(&w);
		}
		CHECK_EQ(fired, N - cancelled);
		for (int i = 0; i < N; i++)
			if (r[i].fires)
				CHECK_EQ(r[i].fired_at, tw_timer_due(&r[i].timer));
		if (!cancel_some)
			CHECK_EQ(idle, 0);
		else
			CHECK(idle <= cancelled);
		tw_wheel_destroy(&w);
	}
}

/* The add's short path leaves the observer out: installing one (or
 * removing it) between adds must take it out of (or back to) that path,
 * so that every add made while one is installed is told. */
static void test_observer_installed_between_adds_sees_them(void)
{
	static const struct tw_observer obs = { count_moves, NULL };
	struct tw_wheel w;
	struct rec a, b, c;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	rec_init(&b, 2);
	rec_init(&c, 3);
	moves = 0;
	CHECK_EQ(tw_wheel_add(&w, &a.timer, 5000), TW_OK);
	CHECK_EQ(moves, 0);
	tw_wheel_set_observer(&w, &obs);
	CHECK_EQ(tw_wheel_add(&w, &b.timer, 6000), TW_OK);
	CHECK_EQ(moves, 1);
	tw_wheel_set_observer(&w, NULL);
	CHECK_EQ(tw_wheel_add(&w, &c.timer, 7000), TW_OK);
	CHECK_EQ(moves, 1);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 7000), 3);
	tw_wheel_destroy(&w);
}

int main(void)
{
	RUN(test_init_rejects_bad_parameters);
	RUN(test_timer_is_four_pointers_and_a_due);
	RUN(test_bad_calls_change_nothing);
	RUN(test_add_cancel_pending_counts);
	RUN(test_exact_never_early_less_than_a_tick_late);
	RUN(test_due_at_or_before_now_fires_on_next_advance);
	RUN(test_reschedule);
	RUN(test_reschedule_within_its_bucket_stays_put);
	RUN(test_reset_later_stays_put_and_fires_on_time);
	RUN(test_clock_jumps_over_empty_time);
	RUN(test_ready_event_names_the_timer_alone);
	RUN(test_exact_mode_spreads_cascades_over_time);
	RUN(test_exact_drain_shares_follow_the_ticks_an_advance_covers);
	RUN(test_exact_next_expiry_wakes_only_to_fire);
	RUN(test_exact_big_buckets_drain_in_an_event_loop);
	RUN(test_observer_installed_between_adds_sees_them);
	return check_report();
}
