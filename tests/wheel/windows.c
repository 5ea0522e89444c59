/* SPDX-License-Identifier: MIT */
/*
 * A window (tw_wheel_add_range) fires inside its edges: narrow windows
 * share their aligned tick, a reschedule to a window that holds the
 * timer's tick stays put, a window pushed inside a draining bucket fires
 * at that pop and leaves the drain no wake that fires nothing, bad
 * windows are refused; and drain and destroy hand back what is pending.
 */

#include "wheel_recs.h"

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
				CHECK(tw_timer_due(&r[i].timer) >= earliest[i] &&
				      tw_timer_due(&r[i].timer) <= latest[i]);
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

/* The tick in [e, l] that is a multiple of the largest power of two,
 * found by trying the powers from the top (the wheel finds it by bit
 * arithmetic). */
static int64_t most_aligned(int64_t e, int64_t l)
{
	for (int64_t p = (int64_t)1 << 62; p > 1; p >>= 1)
		if (l / p * p >= e)
			return l / p * p;
	return l;
}

/* Windows that no coarse bucket fits (300 ms at 30 s: the level that
 * reaches 30 s has buckets of 1024 ms, and most such windows hold no
 * multiple of it) fire at their most aligned tick, so a thousand
 * overlapping ones fire at the handful of multiples of 256 ms they
 * share, not at several hundred earliests; each inside its window. */
static void test_narrow_windows_share_their_aligned_tick(void)
{
	enum { N = 1000 };
	static struct rec r[N];
	struct tw_wheel w;
	int64_t when, at[N];
	int distinct = 0, wakeups = 0, in_a_bucket = 0;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	for (int i = 0; i < N; i++) {
		rec_init(&r[i], i);
		CHECK_EQ(tw_wheel_add_range(&w, &r[i].timer, 30000 + i, 30300 + i), TW_OK);
		/* Windowed in a 1024 ms bucket when the window holds its
		 * pop (due says earliest), exact at the aligned tick if not. */
		if (tw_timer_due(&r[i].timer) != 30000 + i)
			CHECK_EQ(tw_timer_due(&r[i].timer), most_aligned(30000 + i, 30300 + i));
		else
			in_a_bucket++;
	}
	while (tw_wheel_next_expiry(&w, &when)) {
		int64_t fired = tw_wheel_advance(&w, when);

		CHECK(fired >= 0);
		wakeups += fired > 0;
	}
	for (int i = 0; i < N; i++) {
		bool seen = false;

		CHECK_EQ(r[i].fires, 1);
		CHECK(r[i].fired_at >= 30000 + i && r[i].fired_at <= 30300 + i);
		for (int j = 0; j < distinct; j++)
			seen |= at[j] == r[i].fired_at;
		if (!seen)
			at[distinct++] = r[i].fired_at;
	}
	CHECK(distinct <= 5);
	CHECK_EQ(wakeups, distinct);
	CHECK(in_a_bucket > 0 && in_a_bucket < N); /* both kinds met */
	tw_wheel_destroy(&w);
}

/* An exact timer reset to a sliding window on every packet, its bucket
 * expiring before the window: it never moves, and is due at the window's
 * aligned tick, where it fires. */
static void test_window_reset_of_an_exact_timer_stays_at_the_aligned_tick(void)
{
	struct tw_wheel w;
	struct rec a;
	unsigned level, slot, level2, slot2;
	int64_t now = 0, due = 30500, realigned = 0;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	tw_wheel_set_observer(&w, &placed_counter);
	memset(placed_of, 0, sizeof(placed_of));
	rec_init(&a, 1);
	CHECK_EQ(tw_wheel_add(&w, &a.timer, due), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level, &slot), TW_OK);
	for (now = 0; now < 1000; now += 7) {
		CHECK_EQ(tw_wheel_advance(&w, now), 0);
		CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, now + 30000,
						   now + 30300), 1);
		/* Re-aligned at each push (its bucket expires at 29696,
		 * before every window), whether or not its last due time is
		 * still inside. */
		if (most_aligned(now + 30000, now + 30300) != due)
			realigned++;
		due = most_aligned(now + 30000, now + 30300);
		CHECK_EQ(tw_timer_due(&a.timer), due);
		CHECK_EQ(tw_timer_where(&w, &a.timer, &level2, &slot2), TW_OK);
		CHECK(level2 == level && slot2 == slot);
		CHECK_WHEEL(&w);
	}
	CHECK_EQ(placed_of[1], 1);
	CHECK(realigned > 1); /* the aligned tick changed as the window slid */
	while (!a.fires) {
		int64_t when;

		CHECK(tw_wheel_next_expiry(&w, &when));
		CHECK(tw_wheel_advance(&w, when) >= 0);
	}
	CHECK_EQ(a.fired_at, due);
	tw_wheel_destroy(&w);
}

/* A window call on a timer that is not pending files it as
 * tw_wheel_add_range() does, in the coarsest bucket popping inside the
 * window; only a pending timer moves exact to the aligned tick (wheel.h,
 * tw_wheel_reschedule_range). [1, 100] at clock 0: level 2's bucket
 * popping at 96, against the aligned tick 64. */
static void test_window_reschedule_of_an_idle_timer_files_as_add_range(void)
{
	struct tw_wheel w;
	struct rec added, idle, pending;
	unsigned level, slot, level2, slot2;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	rec_init(&added, 1);
	rec_init(&idle, 2);
	rec_init(&pending, 3);
	CHECK_EQ(tw_wheel_add(&w, &pending.timer, 1000), TW_OK);
	CHECK_EQ(tw_wheel_add_range(&w, &added.timer, 1, 100), TW_OK);
	CHECK_EQ(tw_wheel_reschedule_range(&w, &idle.timer, 1, 100), 0);
	CHECK_EQ(tw_wheel_reschedule_range(&w, &pending.timer, 1, 100), 1);
	CHECK_EQ(tw_timer_where(&w, &added.timer, &level, &slot), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &idle.timer, &level2, &slot2), TW_OK);
	CHECK(level == 2 && level2 == 2 && slot2 == slot);
	CHECK_EQ(tw_timer_due(&idle.timer), 1);
	CHECK_EQ(tw_timer_due(&pending.timer), 64);
	CHECK_WHEEL(&w);
	for (int64_t now = 1; now <= 200; now++)
		CHECK(tw_wheel_advance(&w, now) >= 0);
	CHECK_EQ(added.fired_at, 96);
	CHECK_EQ(idle.fired_at, 96);
	CHECK_EQ(pending.fired_at, 64);
	tw_wheel_destroy(&w);
}

/* Two timers with one window, [32768, 33800] (tick 1, 64 buckets), one
 * added at 0, the other at 32767: the first goes into level 4's bucket
 * popping at 32768, which is still pending when the second is added
 * close to it, and the second goes there too (the coarsest bucket that
 * pops inside the window, not the first level whose range reaches its
 * end, level 3, popping at 33792): one wake for both. */
static void test_window_near_the_clock_shares_a_coarser_bucket(void)
{
	struct tw_wheel w;
	struct rec far, near;
	unsigned level, slot, level2, slot2;
	int64_t when;
	int wakes = 0;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	rec_init(&far, 1);
	rec_init(&near, 2);
	CHECK_EQ(tw_wheel_add_range(&w, &far.timer, 32768, 33800), TW_OK);
	CHECK_EQ(tw_wheel_advance(&w, 32767), 0);
	CHECK_EQ(tw_wheel_add_range(&w, &near.timer, 32768, 33800), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &far.timer, &level, &slot), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &near.timer, &level2, &slot2), TW_OK);
	CHECK_EQ(level, 4);
	CHECK(level2 == level && slot2 == slot);
	CHECK_WHEEL(&w);
	while (tw_wheel_next_expiry(&w, &when)) {
		CHECK(tw_wheel_advance(&w, when) >= 0);
		wakes++;
	}
	CHECK_EQ(wakes, 1);
	CHECK_EQ(far.fired_at, 32768);
	CHECK_EQ(near.fired_at, 32768);
	tw_wheel_destroy(&w);
}

/* At one tick exact mode runs the buckets in the order they pop, a
 * higher level's first (wheel.h, tw_wheel_advance): an exact timer due at
 * 96 (level 1), added first, runs after a window [90, 100] filed in the
 * level-2 bucket that pops at 96 (it expires at 128). */
static void test_window_at_one_tick_a_higher_level_runs_first(void)
{
	struct tw_wheel w;
	struct rec exact, window;
	unsigned level;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	rec_init(&exact, 1);
	rec_init(&window, 2);
	reset_log();
	CHECK_EQ(tw_wheel_add(&w, &exact.timer, 96), TW_OK);
	CHECK_EQ(tw_wheel_add_range(&w, &window.timer, 90, 100), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &window.timer, &level, NULL), TW_OK);
	CHECK_EQ(level, 2);
	CHECK_EQ(tw_wheel_advance(&w, 95), 0);
	CHECK_EQ(tw_wheel_advance(&w, 96), 2);
	CHECK_EQ(nlog, 2);
	CHECK_EQ(log_ids[0], 2);
	CHECK_EQ(log_ids[1], 1);
	tw_wheel_destroy(&w);
}

/* A window pushed along while its bucket still fires inside it does
 * not move the timer; one that leaves the bucket behind does. */
static void test_window_reschedule_inside_stays_put(void)
{
	struct tw_wheel w;
	struct rec a, b;
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
	/* Later, out of its bucket's reach: a move, exact at the window's
	 * aligned tick (a reschedule seeks no coarse bucket), at level 3
	 * (which reaches 64 s). */
	CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, 50000, 53000), 1);
	CHECK_EQ(placed_of[1], 2);
	CHECK_EQ(tw_timer_due(&a.timer), 51200); /* 50 x 1024 */
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level2, &slot2), TW_OK);
	CHECK_EQ(level2, 3);
	CHECK_WHEEL(&w);
	/* Pushed on from there it stays in that bucket, whose expiration
	 * is before every later window, and is re-filed when it expires. */
	for (int64_t now = 800; now < 4000; now += 100) {
		CHECK_EQ(tw_wheel_advance(&w, now), 0);
		CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, now + 50000,
						   now + 53000), 1);
		CHECK_EQ(tw_timer_where(&w, &a.timer, &level, &slot), TW_OK);
		CHECK(level == level2 && slot == slot2);
	}
	CHECK_EQ(placed_of[1], 2);
	/* A windowed one made exact by a plain reschedule leaves its
	 * place, even to a time its bucket would re-file it at (a windowed
	 * timer does not stay among the exact ones). */
	rec_init(&b, 2);
	CHECK_EQ(tw_wheel_add_range(&w, &b.timer, 50000, 53000), TW_OK);
	CHECK_EQ(tw_timer_due(&b.timer), 50000); /* windowed: in a bucket */
	CHECK_EQ(tw_wheel_reschedule(&w, &b.timer, 60000), 1);
	CHECK_EQ(placed_of[2], 2);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 59999), 1); /* a, at its aligned tick */
	CHECK_EQ(tw_wheel_advance(&w, 60000), 1);
	CHECK_EQ(b.fired_at, 60000);
	tw_wheel_destroy(&w);
}

/* Timers whose bucket still fires inside the new window are not moved.
 * An exact one (due 10) pushed to [5, 100] stays, re-aligned to 64; one
 * pushed to a window already open that holds its tick stays at its tick;
 * a windowed one whose window's start has passed but whose bucket pops
 * inside the new window stays and fires at that pop. */
static void test_window_reschedule_stays_for_exact_and_passed_earliest(void)
{
	struct tw_wheel w;
	struct rec a, b, c;
	unsigned level, slot, level2, slot2;
	int64_t pop;

	tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
	tw_wheel_set_observer(&w, &placed_counter);
	memset(placed_of, 0, sizeof(placed_of));
	rec_init(&a, 1);
	rec_init(&b, 2);
	rec_init(&c, 3);
	CHECK_EQ(tw_wheel_add(&w, &a.timer, 10), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level, &slot), TW_OK);
	CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, 5, 100), 1);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level2, &slot2), TW_OK);
	CHECK(level2 == level && slot2 == slot);
	CHECK_EQ(placed_of[1], 1);
	/* Re-aligned where it is: the window's most aligned tick from its
	 * bucket's expiration (10) on. */
	CHECK_EQ(tw_timer_due(&a.timer), 64);
	CHECK_WHEEL(&w);
	/* An exact one pushed to a window already open that holds its
	 * tick stays, due at its own tick. */
	CHECK_EQ(tw_wheel_add(&w, &c.timer, 50), TW_OK);
	CHECK_EQ(tw_wheel_advance(&w, 20), 0);
	CHECK_EQ(tw_wheel_reschedule_range(&w, &c.timer, 15, 80), 1);
	CHECK_EQ(tw_timer_due(&c.timer), 50);
	CHECK_EQ(placed_of[3], 1);

	CHECK_EQ(tw_wheel_add_range(&w, &b.timer, 30000, 33000), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &b.timer, &level, &slot), TW_OK);
	CHECK(level > 1);
	CHECK_EQ(tw_wheel_advance(&w, 50), 1); /* c, at its tick */
	CHECK_EQ(c.fired_at, 50);
	CHECK_EQ(tw_wheel_advance(&w, 63), 0);
	CHECK_EQ(tw_wheel_advance(&w, 64), 1); /* a, where it was */
	CHECK_EQ(a.fired_at, 64);
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

/* With a tick above 1 an exact timer's due time may lie after a window's
 * latest in latest's own tick: pushed to a window already open that
 * holds that tick, it stays, and its due time says the window's latest
 * (it said 111 for [50, 110]); it still fires at the tick, 112. */
static void test_window_reschedule_stays_with_a_due_time_inside(void)
{
	struct tw_wheel w;
	struct rec a;
	unsigned level, slot, level2, slot2;

	tw_wheel_init(&w, 8, 64, 0, TW_MODE_EXACT);
	rec_init(&a, 1);
	CHECK_EQ(tw_wheel_add(&w, &a.timer, 111), TW_OK); /* tick 14 */
	CHECK_EQ(tw_wheel_advance(&w, 60), 0);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level, &slot), TW_OK);
	CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, 50, 110), 1);
	CHECK_EQ(tw_timer_where(&w, &a.timer, &level2, &slot2), TW_OK);
	CHECK(level2 == level && slot2 == slot);
	CHECK_EQ(tw_timer_due(&a.timer), 110);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 111), 0);
	CHECK_EQ(tw_wheel_advance(&w, 112), 1);
	CHECK_EQ(a.fired_at, 112);
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

/* A window fired at a bucket's pop leaves the rest of the bucket, if it
 * drains, with next_expiry at its exact timers' first tick, not at the
 * bucket's expiration: an event loop that sleeps until next_expiry wakes
 * only to fire, as it does without the window (a bucket of 40, under
 * DRAIN_CHUNK, needs no wake to move). Level 4 (span 32768 ticks)
 * bucket 2: [65536, 98304), which pops at 32768, the window's tick. */
static void test_window_fired_at_a_pop_leaves_no_wake_for_nothing(void)
{
	enum { N = 40 };
	static struct rec r[N + 1];
	static const int64_t dues[] = { 90000, 65536 + 700 };

	for (unsigned d = 0; d < sizeof dues / sizeof dues[0]; d++) {
		struct tw_wheel w;
		int64_t when, wakes = 0, fired = 0;

		tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
		for (int i = 0; i < N; i++) {
			rec_init(&r[i], i);
			tw_wheel_add(&w, &r[i].timer, dues[d] + i % 3);
		}
		rec_init(&r[N], N);
		CHECK_EQ(tw_wheel_add_range(&w, &r[N].timer, 30720, 33000), TW_OK);
		while (tw_wheel_next_expiry(&w, &when)) {
			int64_t n = tw_wheel_advance(&w, when);

			CHECK_WHEEL(&w);
			CHECK(n > 0); /* a wake that fired nothing */
			fired += n;
			wakes++;
		}
		CHECK_EQ(fired, N + 1);
		CHECK_EQ(wakes, 4); /* the window, then each of the three ticks */
		CHECK_EQ(r[N].fired_at, 32768);
		for (int i = 0; i < N; i++)
			CHECK_EQ(r[i].fired_at, dues[d] + i % 3);
		tw_wheel_destroy(&w);
	}
}

/* A pending timer pushed to a window it cannot stay in moves to the next
 * advance when the window's earliest has come, as add_range files such a
 * window (due at earliest), and to the window's most aligned tick when it
 * has not. */
static void test_window_reschedule_to_an_open_window_fires_at_the_next_advance(void)
{
	static const int64_t earliest[] = { 99, 100, 101 };

	for (int i = 0; i < 3; i++) {
		struct tw_wheel w;
		struct rec a;

		tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT);
		rec_init(&a, 1);
		CHECK_EQ(tw_wheel_add(&w, &a.timer, 5000), 0);
		CHECK_EQ(tw_wheel_advance(&w, 100), 0);
		CHECK_EQ(tw_wheel_reschedule_range(&w, &a.timer, earliest[i], 4500), 1);
		CHECK_EQ(tw_timer_due(&a.timer), i < 2 ? earliest[i] : 4096);
		CHECK_WHEEL(&w);
		CHECK_EQ(tw_wheel_advance(&w, 101), i < 2 ? 1 : 0);
		CHECK_EQ(tw_wheel_advance(&w, 4096), i < 2 ? 0 : 1);
		CHECK_EQ(a.fires, 1);
		CHECK_EQ(a.fired_at, i < 2 ? 101 : 4096);
		tw_wheel_destroy(&w);
	}
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
	/* Pending in kafka mode, it is refused too, and stays where it was
	 * (the windowed reset's short path must not take it). */
	CHECK_EQ(tw_wheel_add(&kafka, &b.timer, 150), TW_OK);
	CHECK_EQ(tw_wheel_reschedule_range(&kafka, &b.timer, 100, 200), TW_EINVAL);
	CHECK_EQ(tw_timer_due(&b.timer), 150);
	CHECK_EQ(tw_wheel_cancel(&kafka, &b.timer), 1);
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

int main(void)
{
	RUN(test_window_fires_inside_its_edges);
	RUN(test_narrow_windows_share_their_aligned_tick);
	RUN(test_window_reset_of_an_exact_timer_stays_at_the_aligned_tick);
	RUN(test_window_reschedule_of_an_idle_timer_files_as_add_range);
	RUN(test_window_near_the_clock_shares_a_coarser_bucket);
	RUN(test_window_at_one_tick_a_higher_level_runs_first);
	RUN(test_window_reschedule_inside_stays_put);
	RUN(test_window_reschedule_stays_for_exact_and_passed_earliest);
	RUN(test_window_reschedule_stays_with_a_due_time_inside);
	RUN(test_window_in_a_draining_bucket_fires_at_the_pop);
	RUN(test_window_fired_at_a_pop_leaves_no_wake_for_nothing);
	RUN(test_window_reschedule_to_an_open_window_fires_at_the_next_advance);
	RUN(test_window_bad_input_and_the_one_time_window);
	RUN(test_drain_and_destroy_hand_back_pending);
	return check_report();
}
