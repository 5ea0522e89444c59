/* SPDX-License-Identifier: MIT */
/*
 * The wheel's contract, as a user relies on it: bad input, O(1) add /
 * cancel / reschedule bookkeeping, never early in exact mode, the event-loop
 * helpers, callbacks that change the wheel, and the int64 edges.
 */
#include <limits.h>
#include <string.h>

#include "check.h"

struct rec {
	struct tw_timer timer;
	int id;
	int fires;
	int64_t fired_at;
	void (*action)(struct tw_wheel *w, struct rec *self);
	struct rec *other;
};

static int log_ids[4096];
static int64_t log_at[4096];
static int nlog;

static void on_fire(struct tw_wheel *w, struct tw_timer *t)
{
	struct rec *r = tw_container_of(t, struct rec, timer);

	r->fires++;
	r->fired_at = tw_wheel_now(w);
	if (nlog < 4096) {
		log_ids[nlog] = r->id;
		log_at[nlog++] = r->fired_at;
	}
	if (r->action)
		r->action(w, r);
}

static void rec_init(struct rec *r, int id)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	tw_timer_init(&r->timer, on_fire);
}

static void reset_log(void)
{
	nlog = 0;
}

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

static void test_timer_is_five_words(void)
{
	/* The advertised memory per pending timer: 40 bytes on LP64, and
	 * the wheel allocates nothing per timer. */
	CHECK_EQ(sizeof(struct tw_timer), 5 * sizeof(void *));
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
 * only to fire, the loop slept until 1000 and moved nearly all of them in
 * that one advance (the service's p99 lateness went to 20-30 ms); the big
 * buckets now ask for a wake per 2048 timers to move. */
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

/* ---- callbacks that change the wheel ---- */

static void act_cancel_other(struct tw_wheel *w, struct rec *self)
{
	CHECK_EQ(tw_wheel_cancel(w, &self->other->timer), 1);
}

static void test_callback_cancels_timer_in_same_batch(void)
{
	struct tw_wheel w;
	struct rec a, b, c;

	/* a and b share a bucket; c is in a later bucket, same advance. */
	tw_wheel_init(&w, 10, 8, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	rec_init(&b, 2);
	rec_init(&c, 3);
	a.action = act_cancel_other;
	a.other = &b;
	tw_wheel_add(&w, &a.timer, 15);
	tw_wheel_add(&w, &b.timer, 18);
	tw_wheel_add(&w, &c.timer, 25);
	CHECK_EQ(tw_wheel_advance(&w, 100), 2);
	CHECK_EQ(b.fires, 0);
	CHECK_EQ(c.fires, 1);
	CHECK_WHEEL(&w);

	/* And across buckets: a (bucket 20) cancels c (bucket 30). */
	rec_init(&a, 1);
	rec_init(&c, 3);
	a.action = act_cancel_other;
	a.other = &c;
	tw_wheel_add(&w, &a.timer, 110);
	tw_wheel_add(&w, &c.timer, 125);
	CHECK_EQ(tw_wheel_advance(&w, 200), 1);
	CHECK_EQ(c.fires, 0);
	CHECK_EQ(tw_wheel_count(&w), 0);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void act_periodic(struct tw_wheel *w, struct rec *self)
{
	/* From the due time, not from now, so it does not drift. */
	if (self->fires < 5)
		CHECK_EQ(tw_wheel_add(w, &self->timer,
				      tw_timer_due(&self->timer) + 100), TW_OK);
}

static void test_callback_readds_itself(void)
{
	struct tw_wheel w;
	struct rec a;

	tw_wheel_init(&w, 10, 4, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	a.action = act_periodic;
	tw_wheel_add(&w, &a.timer, 100);
	reset_log();
	for (int64_t now = 0; now <= 1000; now += 10)
		tw_wheel_advance(&w, now);
	CHECK_EQ(a.fires, 5);
	for (int i = 0; i < nlog; i++)
		CHECK_EQ(log_at[i], 100 * (i + 1));
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void act_readd_now(struct tw_wheel *w, struct rec *self)
{
	/* Already due: must wait for the next advance, not loop here. */
	CHECK_EQ(tw_wheel_add(w, &self->timer, tw_wheel_now(w)), TW_OK);
}

static void test_callback_readding_due_timer_does_not_loop(void)
{
	struct tw_wheel w;
	struct rec a;

	tw_wheel_init(&w, 1, 8, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	a.action = act_readd_now;
	tw_wheel_add(&w, &a.timer, 5);
	CHECK_EQ(tw_wheel_advance(&w, 5), 1);
	CHECK_EQ(tw_wheel_advance(&w, 5), 1);
	CHECK_EQ(tw_wheel_advance(&w, 6), 1);
	CHECK_EQ(a.fires, 3);
	CHECK_EQ(tw_wheel_cancel(&w, &a.timer), 1);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void act_readd_now_bounded(struct tw_wheel *w, struct rec *self)
{
	if (self->fires < 5) /* the bug looped: bound it so the test ends */
		CHECK_EQ(tw_wheel_add(w, &self->timer, tw_wheel_now(w)), TW_OK);
}

/*
 * Kafka mode's clock lags the caller's (it only moves to the buckets it
 * pops), so a timer re-added "now" by a callback was filed in a bucket
 * behind the advance's limit and popped, and run, by the same advance.
 * The promise is the same in both modes: the next advance runs it.
 */
static void test_kafka_mode_readd_from_callback_waits_for_next_advance(void)
{
	struct tw_wheel w;
	struct rec a;

	tw_wheel_init(&w, 10, 8, 0, TW_MODE_KAFKA);
	rec_init(&a, 1);
	a.action = act_readd_now_bounded;
	tw_wheel_add(&w, &a.timer, 25);
	CHECK_EQ(tw_wheel_advance(&w, 37), 1);
	CHECK_EQ(a.fires, 1);
	CHECK(tw_timer_pending(&a.timer));
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 37), 1);
	CHECK_EQ(a.fires, 2);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static int handed_back_count;

static void hand_back_and_readd(struct tw_wheel *w, struct tw_timer *t)
{
	if (++handed_back_count < 100) /* the bug never ended: bound it */
		CHECK_EQ(tw_wheel_add(w, t, t->due), TW_OK);
}

/*
 * tw_wheel_drain took timers bucket by bucket; one that hand_back added
 * again landed in a later bucket and was drained again, for ever. Now the
 * drain takes everything first: what hand_back re-adds stays pending.
 */
static void test_drain_with_hand_back_that_readds_ends(void)
{
	enum tw_mode modes[2] = { TW_MODE_EXACT, TW_MODE_KAFKA };

	for (int m = 0; m < 2; m++) {
		struct tw_wheel w;
		struct rec r[3];

		tw_wheel_init(&w, 10, 8, 0, modes[m]);
		for (int i = 0; i < 3; i++) {
			rec_init(&r[i], i);
			tw_wheel_add(&w, &r[i].timer, i == 0 ? 0 : 100 * i);
		}
		handed_back_count = 0;
		CHECK_EQ(tw_wheel_drain(&w, hand_back_and_readd), 3);
		CHECK_EQ(handed_back_count, 3);
		CHECK_EQ(tw_wheel_count(&w), 3);
		CHECK_WHEEL(&w);
		CHECK_EQ(tw_wheel_advance(&w, 1000), 3);
		tw_wheel_destroy(&w);
	}
}

static void act_reschedule_other(struct tw_wheel *w, struct rec *self)
{
	CHECK_EQ(tw_wheel_reschedule(w, &self->other->timer, tw_wheel_now(w) + 50),
		 1);
}

static void test_callback_reschedules_other_due_in_same_batch(void)
{
	struct tw_wheel w;
	struct rec a, b;

	tw_wheel_init(&w, 10, 8, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	rec_init(&b, 2);
	a.action = act_reschedule_other;
	a.other = &b;
	tw_wheel_add(&w, &a.timer, 10);
	tw_wheel_add(&w, &b.timer, 10);
	CHECK_EQ(tw_wheel_advance(&w, 10), 1);
	CHECK_EQ(b.fires, 0);
	CHECK_EQ(tw_timer_due(&b.timer), 60);
	CHECK_EQ(tw_wheel_advance(&w, 60), 1);
	CHECK_EQ(b.fired_at, 60);
	tw_wheel_destroy(&w);
}

static void act_cancel_self(struct tw_wheel *w, struct rec *self)
{
	CHECK_EQ(tw_wheel_cancel(w, &self->timer), 0); /* no longer pending */
	CHECK(!tw_timer_pending(&self->timer));
}

static void act_reenter(struct tw_wheel *w, struct rec *self)
{
	(void)self;
	CHECK_EQ(tw_wheel_advance(w, tw_wheel_now(w) + 1000), TW_EREENTER);
	CHECK_EQ(tw_wheel_destroy(w), TW_EREENTER);
	CHECK_EQ(tw_wheel_drain(w, NULL), TW_EREENTER);
}

static void act_free_self(struct tw_wheel *w, struct rec *self)
{
	(void)w;
	free(self);
}

static void test_callback_cancels_frees_and_reenters(void)
{
	struct tw_wheel w;
	struct rec a, b, *heap = malloc(sizeof(*heap));

	tw_wheel_init(&w, 10, 8, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	rec_init(&b, 2);
	rec_init(heap, 3);
	a.action = act_cancel_self;
	b.action = act_reenter;
	heap->action = act_free_self;
	tw_wheel_add(&w, &a.timer, 10);
	tw_wheel_add(&w, &b.timer, 20);
	tw_wheel_add(&w, &heap->timer, 30); /* ASan catches any later touch */
	CHECK_EQ(tw_wheel_advance(&w, 30), 3);
	CHECK_EQ(tw_wheel_now(&w), 30);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void test_equal_due_times_fire_in_add_order(void)
{
	struct tw_wheel w;
	struct rec r[10];

	tw_wheel_init(&w, 10, 8, 0, TW_MODE_EXACT);
	for (int i = 0; i < 10; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer, 55);
	}
	reset_log();
	CHECK_EQ(tw_wheel_advance(&w, 60), 10);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(log_ids[i], i);
	tw_wheel_destroy(&w);
}

static void test_fires_in_tick_order_across_buckets_and_levels(void)
{
	struct tw_wheel w;
	struct rec r[200];

	tw_wheel_init(&w, 1, 4, 0, TW_MODE_EXACT);
	for (int i = 0; i < 200; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer, 1 + (i * 7919) % 1000);
	}
	reset_log();
	CHECK_EQ(tw_wheel_advance(&w, 1000), 200);
	for (int i = 1; i < nlog; i++)
		CHECK(tw_timer_due(&r[log_ids[i - 1]].timer) <=
		      tw_timer_due(&r[log_ids[i]].timer));
	tw_wheel_destroy(&w);
}

/* tw_wheel_advance_unordered: a jump over 3 h fires every due timer once,
 * never early and nothing that is not due -- including a timer a stays-put
 * reschedule left, with a later due time, in a bucket the jump passes
 * whole, and a timer a callback cancels before its bucket reaches it. The
 * wheel is checked after each jump; kafka mode keeps the tick order. */
static void test_unordered_advance_runs_each_due_timer_once(void)
{
	enum { N = 3000 };
	static struct rec r[N];
	const int64_t span = 3LL * 3600 * 1000, half = span / 2;
	uint64_t x = 12345;

	for (int mode = 0; mode < 2; mode++) {
		struct tw_wheel w;
		int64_t due_by_half = 0;

		tw_wheel_init(&w, 1, 64, 0, mode ? TW_MODE_KAFKA : TW_MODE_EXACT);
		for (int i = 0; i < N; i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			rec_init(&r[i], i);
			tw_wheel_add(&w, &r[i].timer, 1 + (int64_t)((x >> 11) % (uint64_t)span));
		}
		/* Timer 0 stays in its early bucket with a due time after the
		 * first jump (exact mode files it again when the bucket goes). */
		tw_wheel_reschedule(&w, &r[0].timer, 10);
		tw_wheel_reschedule(&w, &r[0].timer, half + 5);
		/* Timer 1 fires first in its bucket and cancels timer 2. */
		tw_wheel_reschedule(&w, &r[1].timer, 1000);
		tw_wheel_reschedule(&w, &r[2].timer, 1000);
		r[1].action = act_cancel_other;
		r[1].other = &r[2];
		for (int i = 0; i < N; i++)
			due_by_half += i != 2 && tw_timer_due(&r[i].timer) <= half;
		reset_log();
		CHECK_EQ(tw_wheel_advance_unordered(&w, half), due_by_half);
		CHECK_WHEEL(&w);
		for (int i = 0; i < N; i++) {
			int64_t due = tw_timer_due(&r[i].timer);

			CHECK_EQ(r[i].fires, i != 2 && due <= half);
			if (r[i].fires)
				CHECK(r[i].fired_at >= due); /* never early */
		}
		CHECK(tw_timer_pending(&r[0].timer));
		CHECK_EQ(tw_wheel_advance_unordered(&w, span + 1), N - 1 - due_by_half);
		CHECK_WHEEL(&w);
		for (int i = 0; i < N; i++)
			CHECK_EQ(r[i].fires, i != 2);
		CHECK_EQ(tw_wheel_count(&w), 0);
		if (mode) /* kafka mode: the ordered advance */
			for (int i = 1; i < nlog; i++)
				CHECK(tw_timer_due(&r[log_ids[i - 1]].timer) <=
				      tw_timer_due(&r[log_ids[i]].timer));
		tw_wheel_destroy(&w);
	}
}

/* ---- windows: tw_wheel_add_range ---- */

static int placed_of[4096]; /* PLACED events per rec id */
static void count_placed(void *arg, const struct tw_wheel *w,
			 const struct tw_event *ev)
{
	(void)arg;
	(void)w;
	if (ev->kind == TW_EV_PLACED)
		placed_of[tw_container_of(ev->timer, struct rec, timer)->id]++;
}

static const struct tw_observer placed_counter = { count_placed, NULL };

/* Every window fires inside its edges -- never before earliest, and by
 * latest plus under one tick -- in an event loop that wakes at next_expiry
 * and in one-jump advances; a window wide enough for the level that
 * reaches it (here 3e6 ticks, level 5's span is 2^20) is placed once and
 * never moved, and those windows share a few buckets. */
static void test_window_fires_inside_its_edges(void)
{
	enum { N = 400 };
	static struct rec r[N];
	static int64_t earliest[N], latest[N];
	static const int64_t widths[] = { 0, 1, 7, 300, 1024, 2000, 40000, 3000000 };

	for (int jump = 0; jump < 2; jump++) {
		for (int64_t tick = 1; tick <= 10; tick += 9) {
			struct tw_wheel w;
			uint64_t x = 99;
			unsigned where[N][2];
			int distinct = 0;

			tw_wheel_init(&w, tick, 64, 0, TW_MODE_EXACT);
			tw_wheel_set_observer(&w, &placed_counter);
			memset(placed_of, 0, sizeof(placed_of));
			for (int i = 0; i < N; i++) {
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				rec_init(&r[i], i);
				earliest[i] = 1 + (int64_t)((x >> 20) % (5000000 * tick));
				latest[i] = earliest[i] + widths[i % 8] * tick;
				CHECK_EQ(tw_wheel_add_range(&w, &r[i].timer, earliest[i],
							    latest[i]), TW_OK);
				CHECK_EQ(tw_timer_due(&r[i].timer), earliest[i]);
				CHECK_EQ(tw_timer_where(&w, &r[i].timer, &where[i][0],
							&where[i][1]), TW_OK);
			}
			CHECK_WHEEL(&w);
			/* The widest windows: a handful of buckets. */
			for (int i = 7; i < N; i += 8) {
				bool seen = false;

				for (int j = 7; j < i; j += 8)
					seen |= where[j][0] == where[i][0] &&
						where[j][1] == where[i][1];
				distinct += !seen;
			}
			CHECK(distinct <= 6);
			if (!jump) {
				int64_t when;

				while (tw_wheel_next_expiry(&w, &when)) {
					CHECK_EQ(tw_wheel_advance(&w, when) >= 0, 1);
					CHECK_WHEEL(&w);
				}
			} else {
				for (int64_t now = 0; tw_wheel_count(&w);) {
					now += (int64_t)(x % 400000 + 1) * tick;
					x = x * 6364136223846793005ULL + 1442695040888963407ULL;
					CHECK_EQ(tw_wheel_advance(&w, now) >= 0, 1);
					CHECK_WHEEL(&w);
					for (int i = 0; i < N; i++)
						if (latest[i] <= now)
							CHECK_EQ(r[i].fires, 1);
				}
			}
			for (int i = 0; i < N; i++) {
				CHECK_EQ(r[i].fires, 1);
				CHECK(r[i].fired_at >= earliest[i]);
				if (!jump)
					CHECK(r[i].fired_at < latest[i] + tick);
				if (widths[i % 8] == 3000000)
					CHECK_EQ(placed_of[i], 1);
			}
			tw_wheel_destroy(&w);
		}
	}
}

/* A window pushed along while its bucket still fires inside it does
 * not move the timer; one that leaves the bucket behind does. */
static void test_window_reschedule_inside_stays_put(void)
{
	struct tw_wheel w;
	struct rec a;
	unsigned level, slot, level2, slot2;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	tw_wheel_set_observer(&w, &placed_counter);
	memset(placed_of, 0, sizeof(placed_of));
	rec_init(&a, 1);
	CHECK_EQ(tw_wheel_add_range(&w, &a.timer, 30000, 33000), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level, &slot), TW_OK);
	CHECK(level > 1);
	CHECK_EQ(placed_of[1], 1);
	for (int64_t now = 0; now < 800; now += 100) {
		CHECK_EQ(tw_wheel_advance(&w, now), 0);
		CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, now + 30000,
						   now + 33000), 1);
		CHECK_EQ(tw_timer_where(&w, &a.timer, &level2, &slot2), TW_OK);
		CHECK(level2 == level && slot2 == slot);
	}
	CHECK_EQ(placed_of[1], 1);
	CHECK_EQ(tw_timer_due(&a.timer), 700 + 30000);
	/* Later, out of its bucket's reach: a move (still windowed: level 3
	 * reaches 64 s, and its spans of 1024 ms fit in 3 s). */
	CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, 50000, 53000), 1);
	CHECK_EQ(placed_of[1], 2);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level2, NULL), TW_OK);
	CHECK_EQ(level2, 3);
	CHECK_WHEEL(&w);
	/* Made exact by a plain reschedule, it leaves its place too, even
	 * to a time its bucket would re-file it at (a windowed timer does
	 * not stay among the exact ones). */
	CHECK_EQ(tw_wheel_reschedule(&w, &a.timer, 60000), 1);
	CHECK_EQ(placed_of[1], 3);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 59999), 0);
	CHECK_EQ(tw_wheel_advance(&w, 60000), 1);
	CHECK_EQ(a.fired_at, 60000);
	tw_wheel_destroy(&w);
}

/* Issue 26's second review: two timers whose bucket still fired inside
 * the new window were moved. An exact one (due 10, fires at 10) pushed to
 * [5, 100] stays and keeps its due time; a windowed one whose window's
 * start has passed but whose bucket pops inside the new window stays and
 * fires at that pop. */
static void test_window_reschedule_stays_for_exact_and_passed_earliest(void)
{
	struct tw_wheel w;
	struct rec a, b;
	unsigned level, slot, level2, slot2;
	int64_t pop;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	tw_wheel_set_observer(&w, &placed_counter);
	memset(placed_of, 0, sizeof(placed_of));
	rec_init(&a, 1);
	rec_init(&b, 2);
	CHECK_EQ(tw_wheel_add(&w, &a.timer, 10), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level, &slot), TW_OK);
	CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, 5, 100), 1);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level2, &slot2), TW_OK);
	CHECK(level2 == level && slot2 == slot);
	CHECK_EQ(placed_of[1], 1);
	CHECK_EQ(tw_timer_due(&a.timer), 10);
	CHECK_WHEEL(&w);

	CHECK_EQ(tw_wheel_add_range(&w, &b.timer, 30000, 33000), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &b.timer, &level, &slot), TW_OK);
	CHECK(level > 1);
	CHECK_EQ(tw_wheel_advance(&w, 9), 0);
	CHECK_EQ(tw_wheel_advance(&w, 10), 1); /* a, where it was */
	CHECK_EQ(a.fired_at, 10);
	CHECK_EQ(tw_wheel_advance(&w, 30500), 0);
	CHECK_EQ(b.fires, 0); /* its bucket pops later, inside its window */
	CHECK_EQ(tw_wheel_reschedule_range(&w, &b.timer, 30200, 33000), 1);
	CHECK_EQ(tw_timer_where(&w, &b.timer, &level2, &slot2), TW_OK);
	CHECK(level2 == level && slot2 == slot);
	CHECK_EQ(placed_of[2], 1);
	CHECK_WHEEL(&w);
	CHECK(tw_wheel_next_expiry(&w, &pop));
	for (int64_t now = 30501; now <= 33000 && !b.fires; now++)
		CHECK(tw_wheel_advance(&w, now) >= 0);
	CHECK_EQ(b.fires, 1);
	CHECK_EQ(b.fired_at, pop);
	CHECK(b.fired_at >= 30200 && b.fired_at <= 33000);
	tw_wheel_destroy(&w);
}

/* A windowed timer in a bucket big enough to drain fires at the pop, not
 * when the drain reaches it a level tick later (after its latest). */
static void test_window_in_a_draining_bucket_fires_at_the_pop(void)
{
	enum { N = 500 };
	static struct rec r[N + 1];
	struct tw_wheel w;
	/* Level 3 (span 1024 ticks) bucket 40: [40960, 41984), pops at 39936. */
	const int64_t pop = 39936;
	int64_t when;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	for (int i = 0; i < N; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer, 40960 + i % 1024);
	}
	rec_init(&r[N], N);
	CHECK_EQ(tw_wheel_add_range(&w, &r[N].timer, pop - 20, pop + 20), TW_OK);
	CHECK_WHEEL(&w);
	while (tw_wheel_next_expiry(&w, &when) && !r[N].fires) {
		tw_wheel_advance(&w, when);
		CHECK_WHEEL(&w);
	}
	CHECK_EQ(r[N].fires, 1);
	CHECK(r[N].fired_at >= pop - 20 && r[N].fired_at <= pop + 20);
	CHECK(tw_wheel_count(&w) > N / 2); /* the drain had barely begun */
	tw_wheel_destroy(&w);
}

/* Bad windows change nothing; earliest == latest is an add. */
static void test_window_bad_input_and_the_one_time_window(void)
{
	struct tw_wheel w, other, kafka;
	struct rec a, b;
	unsigned l1, s1, l2, s2;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	tw_wheel_init(&other, 1, 64, 0, TW_MODE_EXACT);
	tw_wheel_init(&kafka, 1, 20, 0, TW_MODE_KAFKA);
	rec_init(&a, 1);
	rec_init(&b, 2);
	CHECK_EQ(tw_wheel_add_range(&w, &a.timer, 100, 99), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_range(NULL, &a.timer, 1, 2), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_range(&w, NULL, 1, 2), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_range(&kafka, &a.timer, 100, 200), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule_range(&kafka, &a.timer, 100, 200), TW_EINVAL);
	CHECK(!tw_timer_pending(&a.timer));
	CHECK_EQ(tw_wheel_count(&w), 0);
	CHECK_EQ(tw_wheel_add_range(&w, &a.timer, 5000, 9000), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &l1, &s1), TW_OK);
	CHECK_EQ(tw_wheel_add_range(&w, &a.timer, 5000, 9000), TW_EBUSY);
	CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, 9000, 5000), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule_range(&other, &a.timer, 1, 2), TW_EOWNER);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &l2, &s2), TW_OK);
	CHECK(l1 == l2 && s1 == s2);
	CHECK_EQ(tw_timer_due(&a.timer), 5000);
	CHECK_EQ(tw_wheel_count(&w), 1);
	CHECK_WHEEL(&w);
	/* One time: the bucket tw_wheel_add picks. */
	CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, 7777, 7777), 1);
	CHECK_EQ(tw_wheel_add(&w, &b.timer, 7777), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &l1, &s1), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &b.timer, &l2, &s2), TW_OK);
	CHECK(l1 == l2 && s1 == s2);
	/* Already due: the next advance, as an add. */
	CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, -5, 3), 1);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &l1, NULL), TW_OK);
	CHECK_EQ(l1, TW_LEVEL_READY);
	tw_wheel_destroy(&w);
	tw_wheel_destroy(&other);
	tw_wheel_destroy(&kafka);
}

/* The drop hook: a cascade asks it of every timer it takes out. */
static int asked[200];
static bool drop_odd_ids(struct tw_wheel *w, struct tw_timer *t)
{
	struct rec *r = tw_container_of(t, struct rec, timer);

	(void)w;
	CHECK(!tw_timer_pending(t)); /* already unlinked when asked */
	asked[r->id]++;
	return r->id % 2;
}

static void test_drop_hook_removes_timers_at_their_first_cascade(void)
{
	for (int mode = 0; mode < 2; mode++) {
		struct tw_wheel w;
		struct rec r[200];
		int fired = 0;

		tw_wheel_init(&w, 1, 4, 0, mode ? TW_MODE_KAFKA : TW_MODE_EXACT);
		w.drop = drop_odd_ids;
		memset(asked, 0, sizeof(asked));
		for (int i = 0; i < 200; i++) {
			rec_init(&r[i], i);
			tw_wheel_add(&w, &r[i].timer, 100 + i * 50); /* above level 1 */
		}
		CHECK_EQ(tw_wheel_count(&w), 200);
		CHECK_EQ(tw_wheel_advance(&w, 20000), 100);
		for (int i = 0; i < 200; i++) {
			CHECK_EQ(r[i].fires, i % 2 ? 0 : 1);
			CHECK(!tw_timer_pending(&r[i].timer));
			/* a dropped one was asked once: at its first cascade */
			if (i % 2)
				CHECK_EQ(asked[i], 1);
			fired += r[i].fires;
		}
		CHECK_EQ(fired, 100);
		CHECK_EQ(tw_wheel_count(&w), 0);
		tw_wheel_destroy(&w);
	}
}

static int handed_back;
static void hand_back(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	CHECK(!tw_timer_pending(t));
	handed_back++;
}

static void test_drain_and_destroy_hand_back_pending(void)
{
	struct tw_wheel w;
	struct rec r[50];

	tw_wheel_init(&w, 1, 8, 0, TW_MODE_KAFKA);
	for (int i = 0; i < 50; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer, i * 1000 - 5);
	}
	handed_back = 0;
	CHECK_EQ(tw_wheel_drain(&w, hand_back), 50);
	CHECK_EQ(handed_back, 50);
	CHECK_EQ(tw_wheel_count(&w), 0);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 1000000), 0);
	for (int i = 0; i < 50; i++)
		CHECK_EQ(r[i].fires, 0);
	/* The wheel is still usable; destroy unlinks what is left. */
	tw_wheel_add(&w, &r[0].timer, 2000000);
	tw_wheel_destroy(&w);
	CHECK(!tw_timer_pending(&r[0].timer));
}

/* ---- the int64 edges ---- */

/* A clock that starts below zero: buckets with negative expirations are
 * described correctly (found by fuzz_scenario: the bucket's end overflowed
 * in the computation, undefined behaviour caught by UBSan). */
static void test_negative_times_are_described(void)
{
	struct tw_wheel w;
	struct rec a, b;
	struct tw_bucket_info bi;
	unsigned level, slot;

	CHECK_EQ(tw_wheel_init(&w, 96, 4, -1000, TW_MODE_KAFKA), 0);
	rec_init(&a, 1);
	rec_init(&b, 2);
	CHECK_EQ(tw_wheel_add(&w, &a.timer, -900), 0);
	CHECK_EQ(tw_wheel_add(&w, &b.timer, -700), 0);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level, &slot), 0);
	CHECK_EQ(tw_wheel_bucket_info(&w, level, slot, &bi), 0);
	CHECK_EQ(level, 1);
	CHECK_EQ(bi.expiration, -960); /* floor(-900 / 96) * 96 */
	CHECK_EQ(bi.end, -864);
	CHECK_EQ(bi.count, 1);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 0), 2);
	CHECK_EQ(a.fires + b.fires, 2);
	tw_wheel_destroy(&w);
}

static void test_due_times_at_int64_edges(void)
{
	static const int64_t ticks[] = { 1, 3, 1000, INT64_MAX / 2, INT64_MAX };
	static const uint32_t sizes[] = { 2, 3, 20, 64 };

	for (size_t ti = 0; ti < sizeof(ticks) / sizeof(ticks[0]); ti++) {
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
			for (int mode = 0; mode < 2; mode++) {
				struct tw_wheel w;
				struct rec hi, lo, mid, far;

				CHECK_EQ(tw_wheel_init(&w, ticks[ti], sizes[si],
						       INT64_MIN + 1, (enum tw_mode)mode),
					 TW_OK);
				rec_init(&hi, 1);
				rec_init(&lo, 2);
				rec_init(&mid, 3);
				rec_init(&far, 4);
				CHECK_EQ(tw_wheel_add(&w, &hi.timer, INT64_MAX), TW_OK);
				CHECK_EQ(tw_wheel_add(&w, &lo.timer, INT64_MIN), TW_OK);
				CHECK_EQ(tw_wheel_add(&w, &mid.timer, 0), TW_OK);
				CHECK_EQ(tw_wheel_add(&w, &far.timer, INT64_MAX - 1), TW_OK);
				CHECK_WHEEL(&w);
				CHECK(tw_wheel_levels(&w) <= 64);
				CHECK_EQ(tw_wheel_advance(&w, INT64_MIN + 1), 1);
				CHECK_EQ(lo.fires, 1);
				CHECK_WHEEL(&w);
				CHECK_EQ(tw_wheel_advance(&w, -1), 0);
				CHECK(tw_wheel_advance(&w, 0) >= 1);
				CHECK_EQ(mid.fires, 1);
				CHECK_WHEEL(&w);
				if (mode == TW_MODE_EXACT) {
					/* Never early, even at the end of time. */
					CHECK_EQ(tw_wheel_advance(&w, INT64_MAX - 2), 0);
					CHECK_EQ(far.fires + hi.fires, 0);
				} else {
					/* Kafka fires at the start of the tick:
					 * with a tick of INT64_MAX, INT64_MAX - 1
					 * is in the tick that starts at 0. */
					CHECK_EQ(far.fires, ticks[ti] == INT64_MAX);
				}
				tw_wheel_advance(&w, INT64_MAX);
				CHECK_EQ(hi.fires, 1);
				CHECK_EQ(far.fires, 1);
				CHECK_WHEEL(&w);
				CHECK_EQ(tw_wheel_count(&w), 0);
				tw_wheel_destroy(&w);
			}
		}
	}
}

/* A sum past either end is refused, as tw_service_add_in() refuses it:
 * the wheel used to clamp it, filing a due time nobody asked for. */
static void test_add_in_refuses_an_overflow(void)
{
	struct tw_wheel w;
	struct rec a, b;

	tw_wheel_init(&w, 1, 8, INT64_MAX - 10, TW_MODE_EXACT);
	rec_init(&a, 1);
	rec_init(&b, 2);
	CHECK_EQ(tw_wheel_add_in(&w, &a.timer, INT64_MAX), TW_EOVERFLOW);
	CHECK_EQ(tw_wheel_add_in(&w, &a.timer, 11), TW_EOVERFLOW);
	CHECK(!tw_timer_pending(&a.timer));
	CHECK_EQ(tw_wheel_count(&w), 0);
	CHECK_EQ(tw_wheel_add_in(&w, &a.timer, 10), TW_OK); /* the last that fits */
	CHECK_EQ(tw_timer_due(&a.timer), INT64_MAX);
	tw_wheel_destroy(&w);
	tw_wheel_init(&w, 1, 8, INT64_MIN + 10, TW_MODE_EXACT);
	CHECK_EQ(tw_wheel_add_in(&w, &b.timer, INT64_MIN), TW_EOVERFLOW);
	CHECK_EQ(tw_wheel_add_in(&w, &b.timer, -11), TW_EOVERFLOW);
	CHECK_EQ(tw_wheel_count(&w), 0);
	CHECK_EQ(tw_wheel_add_in(&w, &b.timer, -10), TW_OK);
	CHECK_EQ(tw_timer_due(&b.timer), INT64_MIN);
	CHECK_EQ(tw_wheel_timeout(&w, INT64_MIN + 10), 0);
	tw_wheel_destroy(&w);
}

/* A window reaching the end of int64 time: the bucket that pops at the
 * last multiple of a level's span before INT64_MAX would start at 2^63,
 * past the end, so it is never filed there. With its start wrapped to
 * INT64_MIN, a reschedule kept the timer in that bucket (it looked like
 * one starting long ago), which never popped: the timer ran 1.6e9 ticks
 * late, and the check found the bucket outside its level's range. */
/* A window whose last pop of a level lies one bucket past the level's
 * reach still fits that level: [43548, 65322] at clock 0 (tick 1, 64
 * buckets) holds pops of the 1,024-tick level at 44032 .. 63488 inside its
 * buckets (64512 would be bucket 64, past them). It is filed at the last
 * of those, 63488, not at earliest as a window that no bucket fits (it
 * fired at 43548). */
static void test_window_takes_the_last_bucket_within_reach(void)
{
	struct tw_wheel w;
	struct rec r;
	int64_t when;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	rec_init(&r, 1);
	CHECK_EQ(tw_wheel_add_range(&w, &r.timer, 43548, 65322), TW_OK);
	CHECK_WHEEL(&w);
	CHECK(tw_wheel_next_expiry(&w, &when));
	CHECK_EQ(when, 63488);
	tw_wheel_advance(&w, 63487);
	CHECK_EQ(r.fires, 0);
	tw_wheel_advance(&w, 63488);
	CHECK_EQ(r.fires, 1);
	CHECK_EQ(r.fired_at, 63488);
	tw_wheel_destroy(&w);
}

/* On a wheel of 4 buckets the first level whose range may reach a window
 * can hold no pop inside it while the level above does: [2016391,
 * 3301075] at 977253 (tick 1) is filed once, in the 2^20-tick level's
 * bucket that pops at 2097152 (a level not made yet when the window was
 * added). It was filed at earliest and moved down 19 levels. */
static void test_window_tries_the_level_above_the_first_that_reaches(void)
{
	struct tw_wheel w;
	struct rec r;
	int64_t when;

	tw_wheel_init(&w, 1, 4, 977253, TW_MODE_EXACT);
	rec_init(&r, 1);
	CHECK_EQ(tw_wheel_add_range(&w, &r.timer, 2016391, 3301075), TW_OK);
	CHECK_WHEEL(&w);
	CHECK(tw_wheel_next_expiry(&w, &when));
	CHECK_EQ(when, 2097152);
	tw_wheel_advance(&w, 2097151);
	CHECK_EQ(r.fires, 0);
	CHECK_WHEEL(&w);
	tw_wheel_advance(&w, 2097152);
	CHECK_EQ(r.fires, 1);
	CHECK_EQ(r.fired_at, 2097152);
	tw_wheel_destroy(&w);
}

static void test_window_reaching_int64_max(void)
{
	static const uint32_t sizes[] = { 20, 64 };

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		struct tw_wheel w;
		struct rec t0, t1;
		int64_t now = INT64_MAX - ((int64_t)1 << 31);

		CHECK_EQ(tw_wheel_init(&w, 1, sizes[si], now, TW_MODE_EXACT), TW_OK);
		rec_init(&t0, 1);
		rec_init(&t1, 2);
		CHECK_EQ(tw_wheel_add(&w, &t0.timer, INT64_MAX), TW_OK);
		CHECK_EQ(tw_wheel_add_range(&w, &t1.timer, now + 5164948, INT64_MAX),
			 TW_OK);
		CHECK_WHEEL(&w);
		CHECK_EQ(tw_wheel_reschedule(&w, &t1.timer, now + 5188768), 1);
		CHECK_WHEEL(&w);
		CHECK(tw_wheel_advance(&w, now + 5281945) >= 1);
		CHECK_EQ(t1.fires, 1);
		CHECK_EQ(t0.fires, 0);
		CHECK_WHEEL(&w);
		tw_wheel_advance(&w, INT64_MAX);
		CHECK_EQ(t0.fires, 1);
		CHECK_EQ(tw_wheel_count(&w), 0);
		tw_wheel_destroy(&w);
	}
	/* Started at the end of time with a tick that does not divide it:
	 * the clock is at the last tick (the one a timer due at INT64_MAX
	 * is filed under), as an advance to INT64_MAX leaves it. */
	for (int64_t tick = 1; tick <= 22; tick += 7) {
		struct tw_wheel w;
		struct rec t0;

		CHECK_EQ(tw_wheel_init(&w, tick, 2, INT64_MAX, TW_MODE_EXACT), TW_OK);
		CHECK_WHEEL(&w);
		rec_init(&t0, 1);
		CHECK_EQ(tw_wheel_add_range(&w, &t0.timer, INT64_MAX - 1, INT64_MAX), TW_OK);
		CHECK_WHEEL(&w);
		CHECK_EQ(tw_wheel_advance(&w, INT64_MAX), 1);
		CHECK_EQ(t0.fires, 1);
		tw_wheel_destroy(&w);
	}
}

static void test_timeout_clamps(void)
{
	struct tw_wheel w;
	struct rec a;

	tw_wheel_init(&w, 1, 8, INT64_MIN, TW_MODE_EXACT);
	rec_init(&a, 1);
	tw_wheel_add(&w, &a.timer, INT64_MAX);
	CHECK_EQ(tw_wheel_timeout(&w, INT64_MIN), INT64_MAX);
	tw_wheel_destroy(&w);
}

int main(void)
{
	RUN(test_init_rejects_bad_parameters);
	RUN(test_timer_is_five_words);
	RUN(test_bad_calls_change_nothing);
	RUN(test_add_cancel_pending_counts);
	RUN(test_exact_never_early_less_than_a_tick_late);
	RUN(test_due_at_or_before_now_fires_on_next_advance);
	RUN(test_reschedule);
	RUN(test_reschedule_within_its_bucket_stays_put);
	RUN(test_reset_later_stays_put_and_fires_on_time);
	RUN(test_clock_jumps_over_empty_time);
	RUN(test_exact_mode_spreads_cascades_over_time);
	RUN(test_exact_drain_shares_follow_the_ticks_an_advance_covers);
	RUN(test_exact_next_expiry_wakes_only_to_fire);
	RUN(test_exact_big_buckets_drain_in_an_event_loop);
	RUN(test_callback_cancels_timer_in_same_batch);
	RUN(test_drop_hook_removes_timers_at_their_first_cascade);
	RUN(test_callback_readds_itself);
	RUN(test_callback_readding_due_timer_does_not_loop);
	RUN(test_kafka_mode_readd_from_callback_waits_for_next_advance);
	RUN(test_drain_with_hand_back_that_readds_ends);
	RUN(test_callback_reschedules_other_due_in_same_batch);
	RUN(test_callback_cancels_frees_and_reenters);
	RUN(test_equal_due_times_fire_in_add_order);
	RUN(test_fires_in_tick_order_across_buckets_and_levels);
	RUN(test_unordered_advance_runs_each_due_timer_once);
	RUN(test_window_fires_inside_its_edges);
	RUN(test_window_reschedule_inside_stays_put);
	RUN(test_window_reschedule_stays_for_exact_and_passed_earliest);
	RUN(test_window_in_a_draining_bucket_fires_at_the_pop);
	RUN(test_window_bad_input_and_the_one_time_window);
	RUN(test_drain_and_destroy_hand_back_pending);
	RUN(test_due_times_at_int64_edges);
	RUN(test_negative_times_are_described);
	RUN(test_add_in_refuses_an_overflow);
	RUN(test_timeout_clamps);
	RUN(test_window_reaching_int64_max);
	RUN(test_window_takes_the_last_bucket_within_reach);
	RUN(test_window_tries_the_level_above_the_first_that_reaches);
	return check_report();
}
