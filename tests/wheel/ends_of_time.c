/* SPDX-License-Identifier: MIT */
/*
 * The wheel at the int64 edges works as near the middle: negative times
 * are described, due times and windows at either end of time fire once
 * and on time, an add_in past either end is refused (TW_EOVERFLOW) and
 * files nothing, and the timeout clamps instead of wrapping.
 */

#include "wheel_recs.h"

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

/* A sum past either end is refused, as tw_service_add_in() refuses it,
 * not clamped: a clamp would file a due time nobody asked for. */
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
 * added), not filed at earliest and moved down 19 levels. */
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

/* Near the end of time a due time of INT64_MAX is filed a few levels up,
 * through the add's short path (exact mode, tick 1, 64 buckets), into a
 * bucket that is empty: whose min_key, INT64_MAX while empty, equals the
 * key. The bucket must still be filled and queued; a second timer at the
 * same key joins it, and a cancel empties it. */
static void test_int64_max_into_an_empty_bucket(void)
{
	struct tw_wheel w;
	struct rec a, b, c;

	CHECK_EQ(tw_wheel_init(&w, 1, 64, INT64_MAX - 5000, TW_MODE_EXACT), TW_OK);
	rec_init(&a, 1);
	rec_init(&b, 2);
	rec_init(&c, 3);
	/* Creates level 2 (5000 ticks: past level 1's 64). */
	CHECK_EQ(tw_wheel_add(&w, &c.timer, INT64_MAX - 1), TW_OK);
	CHECK_EQ(tw_wheel_cancel(&w, &c.timer), 1);
	CHECK_EQ(tw_wheel_add(&w, &a.timer, INT64_MAX), TW_OK);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_add(&w, &b.timer, INT64_MAX), TW_OK);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_cancel(&w, &b.timer), 1);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, INT64_MAX - 1), 0);
	CHECK_EQ(tw_wheel_advance(&w, INT64_MAX), 1);
	CHECK_EQ(a.fires, 1);
	CHECK_EQ(tw_wheel_count(&w), 0);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

int main(void)
{
	RUN(test_due_times_at_int64_edges);
	RUN(test_int64_max_into_an_empty_bucket);
	RUN(test_negative_times_are_described);
	RUN(test_add_in_refuses_an_overflow);
	RUN(test_timeout_clamps);
	RUN(test_window_reaching_int64_max);
	RUN(test_window_takes_the_last_bucket_within_reach);
	RUN(test_window_tries_the_level_above_the_first_that_reaches);
	return check_report();
}
