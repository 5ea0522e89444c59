/* SPDX-License-Identifier: MIT */
/*
 * A wheel callback may change the wheel it runs in -- cancel another
 * timer of its batch, re-add or reschedule itself or another, free its
 * own timer, try to re-enter -- and every timer still fires exactly once
 * (a re-add of a due timer does not loop; a drain's hand_back that
 * re-adds ends); the timers of one bucket fire in the order they were
 * filed there, the rest in tick order across buckets and levels (no
 * order within a tick is promised beyond that); the unordered advance
 * runs each due timer once.
 */

#include "wheel_recs.h"

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
	if (self->fires < 5) /* a re-add run by the same advance loops: bound it */
		CHECK_EQ(tw_wheel_add(w, &self->timer, tw_wheel_now(w)), TW_OK);
}

/*
 * Kafka mode's clock lags the caller's (it only moves to the buckets it
 * pops), so a timer re-added "now" by a callback could be filed in a
 * bucket behind the advance's limit and popped, and run, by the same
 * advance. The promise is the same in both modes: the next advance runs
 * it.
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
	if (++handed_back_count < 100) /* a drain that never ends: bound it */
		CHECK_EQ(tw_wheel_add(w, t, t->due), TW_OK);
}

/*
 * A drain that took timers bucket by bucket would drain again, for ever,
 * a timer that hand_back adds again to a later bucket. The drain takes
 * everything first: what hand_back re-adds stays pending.
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

static void test_a_buckets_timers_fire_in_the_order_filed(void)
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

/* tw_wheel_count() from inside the wheel's callbacks: a fired timer is
 * no longer counted, the rest are, wherever an advance has them (a bucket
 * being fired, a level's timers moving down, a drain's hand-back list). */
#define COUNTED 300
static struct tw_timer counted[COUNTED];
static int64_t pending_now; /* what the test knows is pending */
static uint64_t count_rng;
static int count_fires;

static void check_count_then_act(struct tw_wheel *w, struct tw_timer *t)
{
	int64_t other = test_rand_below(&count_rng, COUNTED);

	(void)t;
	pending_now--;
	count_fires++;
	CHECK_EQ((int64_t)tw_wheel_count(w), pending_now);
	/* Now and then a cancel of another timer, or an add of one. */
	if (count_fires % 5 == 0 && tw_timer_pending(&counted[other])) {
		CHECK_EQ(tw_wheel_cancel(w, &counted[other]), 1);
		pending_now--;
	} else if (count_fires % 7 == 0 && !tw_timer_pending(&counted[other])) {
		CHECK_EQ(tw_wheel_add(w, &counted[other],
				      tw_wheel_now(w) + 1 +
					      test_rand_below(&count_rng, 3000)), 0);
		pending_now++;
	}
	CHECK_EQ((int64_t)tw_wheel_count(w), pending_now);
}

static void hand_back_counted(struct tw_wheel *w, struct tw_timer *t)
{
	(void)t;
	pending_now--;
	CHECK_EQ((int64_t)tw_wheel_count(w), pending_now);
}

static void test_count_inside_callbacks(void)
{
	for (int mode = TW_MODE_EXACT; mode <= TW_MODE_KAFKA; mode++) {
		struct tw_wheel w;
		int64_t now = 0;

		count_rng = test_rand_seed(7 + (uint64_t)mode);
		count_fires = 0;
		CHECK_EQ(tw_wheel_init(&w, 1, 8, 0, (enum tw_mode)mode), 0);
		for (int i = 0; i < COUNTED; i++) {
			tw_timer_init(&counted[i], check_count_then_act);
			/* Clustered, so that buckets hold several and drain. */
			CHECK_EQ(tw_wheel_add(&w, &counted[i],
					      1 + test_rand_below(&count_rng, 40) * 97),
				 0);
		}
		pending_now = COUNTED;
		CHECK_EQ((int64_t)tw_wheel_count(&w), pending_now);
		while (now < 2500) {
			now += 1 + test_rand_below(&count_rng, 60);
			if (mode == TW_MODE_EXACT && now % 3 == 0)
				CHECK(tw_wheel_advance_unordered(&w, now) >= 0);
			else
				CHECK(tw_wheel_advance(&w, now) >= 0);
			CHECK_EQ((int64_t)tw_wheel_count(&w), pending_now);
			CHECK_WHEEL(&w);
		}
		CHECK(count_fires > 100);
		CHECK(pending_now > 0);
		{
			int64_t before = pending_now;

			CHECK_EQ(tw_wheel_drain(&w, hand_back_counted), before);
		}
		CHECK_EQ(pending_now, 0);
		CHECK_EQ(tw_wheel_count(&w), 0);
		tw_wheel_destroy(&w);
	}
}

int main(void)
{
	RUN(test_callback_cancels_timer_in_same_batch);
	RUN(test_callback_readds_itself);
	RUN(test_callback_readding_due_timer_does_not_loop);
	RUN(test_kafka_mode_readd_from_callback_waits_for_next_advance);
	RUN(test_drain_with_hand_back_that_readds_ends);
	RUN(test_callback_reschedules_other_due_in_same_batch);
	RUN(test_callback_cancels_frees_and_reenters);
	RUN(test_a_buckets_timers_fire_in_the_order_filed);
	RUN(test_fires_in_tick_order_across_buckets_and_levels);
	RUN(test_unordered_advance_runs_each_due_timer_once);
	RUN(test_count_inside_callbacks);
	return check_report();
}
