/* SPDX-License-Identifier: MIT */
/*
 * Buckets big enough to drain (more than 32 timers) and one-jump
 * advances that end inside a bucket: every timer fires once, never before
 * its tick, and in the first advance that reaches it (an exact timer) or
 * its window's end (a windowed one), while callbacks cancel, reschedule
 * and add timers of the same buckets, with an observer told of every
 * event or none; the wheel's invariants hold after every advance; a drain of
 * level 3 files a timer due at a level-2 pop in the bucket popping then,
 * where it fires without another move; a one-jump advance fires the
 * due timers of the bucket it ends inside where they are; and an event
 * loop sleeping until next_expiry wakes for every 2048 timers a big
 * bucket's drain moves, whatever level 1 holds. The first of these also
 * with the drains' shares left owed after each advance, as a service's
 * wheel with executors has them.
 */

#include "wheel_recs.h"
#include "wheel/for_service.h"

enum { N = 3000 };

struct btimer {
	struct tw_timer timer;
	int id;
	bool pending;      /* the test's view */
	int64_t key;       /* exact: its tick; windowed: earliest's */
	int64_t last_key;  /* the latest tick it may fire at */
	int action;        /* its callback: 0 none, 1 cancel, 2 reschedule,
			      3 add another */
	int fires;
};

static struct btimer bt[N];
static uint64_t rng;
static int64_t prev_limit; /* the last advance's tick before this one */
static int64_t cur_limit;
static int observer_events;
static bool deferring;  /* the wheel leaves the drains' shares owed */
static int owed;        /* advances that left them owed */

static int64_t pick(int64_t bound)
{
	return test_rand_below(&rng, bound);
}

/* Due times clustered so that level 2 and 3 buckets hold hundreds: a
 * few centres, each timer within a second of one; every fourth due at a
 * multiple of 32 (a level-2 pop). */
static int64_t clustered_due(const struct tw_wheel *w)
{
	static const int64_t centres[] = { 3000, 30000, 31000, 70000, 400000 };
	int64_t due = tw_wheel_now(w) + centres[pick(5)] + pick(1000);

	return pick(4) == 0 ? due & ~(int64_t)31 : due;
}

static void file_timer(struct tw_wheel *w, struct btimer *b, bool reschedule)
{
	int64_t due = clustered_due(w);
	int rc;

	if (due <= tw_wheel_now(w))
		due = tw_wheel_now(w) + 1;
	if (pick(3) == 0) {
		int64_t latest = due + 1 + pick(600);

		rc = reschedule ? tw_wheel_reschedule_range(w, &b->timer, due, latest)
				: tw_wheel_add_range(w, &b->timer, due, latest);
		b->last_key = latest;
	} else {
		rc = reschedule ? tw_wheel_reschedule(w, &b->timer, due)
				: tw_wheel_add(w, &b->timer, due);
		b->last_key = due;
	}
	CHECK(rc >= 0);
	b->key = due;
	b->pending = true;
}

static void on_btimer(struct tw_wheel *w, struct tw_timer *t)
{
	struct btimer *b = tw_container_of(t, struct btimer, timer);
	struct btimer *other = &bt[pick(N)];

	b->fires++;
	/* Never early (a window may fire anywhere in it), never after the
	 * first advance that reached its last tick. */
	CHECK(b->pending);
	CHECK(b->key <= cur_limit);
	CHECK(b->last_key > prev_limit);
	b->pending = false;
	switch (b->action) {
	case 1:
		if (other->pending) {
			CHECK_EQ(tw_wheel_cancel(w, &other->timer), 1);
			other->pending = false;
		}
		break;
	case 2:
		if (other != b)
			file_timer(w, other, true);
		break;
	case 3:
		if (!other->pending)
			file_timer(w, other, false);
		break;
	default:
		break;
	}
}

static void count_event(void *arg, const struct tw_wheel *w,
			const struct tw_event *ev)
{
	(void)arg;
	(void)w;
	(void)ev;
	observer_events++;
}

static const struct tw_observer counter = { count_event, NULL };

static void advance(struct tw_wheel *w, int64_t now, bool unordered)
{
	cur_limit = now;
	if (unordered)
		tw_wheel_advance_unordered(w, now);
	else
		tw_wheel_advance(w, now);
	if (tw__wheel_drains_owed(w)) {
		/* As a service with executors leaves them: other threads'
		 * calls come on the whole wheel, next_expiry is never after
		 * a pending timer's last tick, and then the shares move,
		 * their fires checked as the advance's. */
		int64_t when = 0;

		owed++;
		CHECK_WHEEL(w);
		for (int k = pick(4) ? 0 : 3; k > 0; k--) {
			struct btimer *b = &bt[pick(N)];

			/* Pending ones only: the scenario ends when none is. */
			if (!b->pending)
				continue;
			if (pick(3)) {
				CHECK_EQ(tw_wheel_cancel(w, &b->timer), 1);
				b->pending = false;
			} else {
				file_timer(w, b, true);
			}
			CHECK_WHEEL(w);
		}
		if (tw_wheel_next_expiry(w, &when))
			for (int i = 0; i < N; i++)
				CHECK(!bt[i].pending || when <= bt[i].last_key);
		tw__wheel_run_drains(w);
		CHECK(!tw__wheel_drains_owed(w));
	}
	prev_limit = now;
	CHECK_WHEEL(w);
}

static void run_scenario(uint64_t seed, bool observed)
{
	struct tw_wheel w;
	int64_t when;
	int pending = 0;

	rng = test_rand_seed(seed);
	prev_limit = -1;
	observer_events = 0;
	CHECK_EQ(tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT), TW_OK);
	if (observed)
		tw_wheel_set_observer(&w, &counter);
	tw__wheel_defer_drains(&w, deferring);
	for (int i = 0; i < N; i++) {
		memset(&bt[i], 0, sizeof(bt[i]));
		bt[i].id = i;
		bt[i].action = (int)pick(8) < 4 ? (int)pick(4) : 0;
		tw_timer_init(&bt[i].timer, on_btimer);
		file_timer(&w, &bt[i], false);
	}
	/* Stepped as an event loop steps, with small steps and one-jump
	 * unordered advances between, until nothing is left. */
	for (int round = 0; tw_wheel_next_expiry(&w, &when); round++) {
		int64_t now = tw_wheel_now(&w);

		switch (pick(4)) {
		case 0:
			advance(&w, now + 1 + pick(40), false);
			break;
		case 1:
			if (pick(8) == 0) {
				advance(&w, now + pick(3000), true);
				break;
			}
			/* fall through */
		default:
			/* next_expiry is never after a pending timer's last
			 * tick. */
			for (int i = 0; i < N; i++)
				CHECK(!bt[i].pending || when <= bt[i].last_key);
			advance(&w, when > now ? when : now, false);
			break;
		}
		/* Now and then more timers, into the buckets already big. */
		if (round % 64 == 0)
			for (int k = 0; k < 20; k++) {
				struct btimer *b = &bt[pick(N)];

				if (!b->pending)
					file_timer(&w, b, false);
			}
	}
	for (int i = 0; i < N; i++) {
		CHECK(!bt[i].pending);
		pending += tw_timer_pending(&bt[i].timer);
	}
	CHECK_EQ(pending, 0);
	CHECK_EQ(tw_wheel_count(&w), 0);
	CHECK(!observed || observer_events > 0);
	tw_wheel_destroy(&w);
}

/* Every timer of big buckets fires once, in time, under callbacks that
 * change those buckets; the invariants hold after every advance. */
static void test_big_buckets_fire_in_time(void)
{
	for (uint64_t seed = 1; seed <= 6; seed++)
		run_scenario(seed, false);
}

/* The same with an observer, which the wheel tells of every move (its
 * short paths are for a wheel without one): the same times. */
static void test_big_buckets_fire_in_time_observed(void)
{
	run_scenario(7, true);
}

/* The same where each advance leaves the drains' shares owed, as a
 * timer service's wheel with executors does (wheel/for_service.h), with
 * calls between it and the shares: the same times, and the invariants
 * hold in between. */
static void test_big_buckets_fire_in_time_drains_deferred(void)
{
	deferring = true;
	owed = 0;
	for (uint64_t seed = 8; seed <= 10; seed++)
		run_scenario(seed, seed == 10);
	deferring = false;
	CHECK(owed > 100);
}

static int placed[2];
static const struct tw_timer *watched[2];

static void count_placed(void *arg, const struct tw_wheel *w,
			 const struct tw_event *ev)
{
	(void)arg;
	(void)w;
	for (int k = 0; k < 2; k++)
		placed[k] += ev->kind == TW_EV_PLACED && ev->timer == watched[k];
}

static const struct tw_observer placed_counter = { count_placed, NULL };

/* 200 timers in one level-3 bucket, big enough to drain: r[0] due at
 * 30016 (a level-2 pop: 938 x 32), r[1] a tick later, the rest at
 * 29800 + i. */
static void add_pop_timers(struct tw_wheel *w, struct rec *r)
{
	unsigned level = 0;

	reset_log();
	CHECK_EQ(tw_wheel_init(w, 1, 64, 0, TW_MODE_EXACT), TW_OK);
	for (int i = 0; i < 200; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(w, &r[i].timer, i == 0 ? 30016 : i == 1 ? 30017 : 29800 + i);
	}
	CHECK_EQ(tw_timer_where(w, &r[0].timer, &level, NULL), TW_OK);
	CHECK_EQ(level, 3);
}

/* Each of add_pop_timers()' timers fired once, at its own tick. */
static void check_pop_timers_fired(const struct rec *r)
{
	for (int i = 0; i < 200; i++) {
		CHECK_EQ(r[i].fires, 1);
		CHECK_EQ(r[i].fired_at, i == 0 ? 30016 : i == 1 ? 30017 : 29800 + i);
	}
}

/* A level-3 bucket of 200 timers drains down; the one due at 30016 (a
 * level-2 pop: 938 x 32) goes from level 3 into the level-2 bucket that
 * pops then and fires there, placed once after its add; the one due a
 * tick later goes down twice, to level 2 and to level 1. */
static void test_drain_files_a_timer_due_at_a_pop_there(void)
{
	static struct rec r[200];
	struct tw_wheel w;
	int64_t when;
	unsigned level = 0;

	add_pop_timers(&w, r);
	watched[0] = &r[0].timer;
	watched[1] = &r[1].timer;
	tw_wheel_set_observer(&w, &placed_counter);
	while (tw_wheel_next_expiry(&w, &when)) {
		tw_wheel_advance(&w, when);
		CHECK_WHEEL(&w);
		if (r[0].fires == 0 && placed[0] == 1) {
			CHECK_EQ(tw_timer_where(&w, &r[0].timer, &level, NULL), TW_OK);
			CHECK_EQ(level, 2);
		}
	}
	CHECK_EQ(placed[0], 1);
	CHECK_EQ(placed[1], 2);
	check_pop_timers_fired(r);
	tw_wheel_destroy(&w);
}

/* The same without an observer (the drains' short path): stepped one
 * tick at a time, the timer due at 30016 is never in level 1 -- it comes
 * from level 3 into the level-2 bucket popping at 30016 and fires there
 * -- and every timer fires at its own tick. */
static void test_drain_files_a_timer_due_at_a_pop_there_quietly(void)
{
	static struct rec r[200];
	struct tw_wheel w;
	unsigned level = 0;
	bool seen_in_level2 = false;

	add_pop_timers(&w, r);
	for (int64_t now = 28000; now <= 30100; now++) {
		tw_wheel_advance(&w, now);
		if (r[0].fires == 0) {
			CHECK_EQ(tw_timer_where(&w, &r[0].timer, &level, NULL), TW_OK);
			CHECK(level != 1);
			seen_in_level2 |= level == 2;
		}
	}
	CHECK_WHEEL(&w);
	CHECK(seen_in_level2);
	check_pop_timers_fired(r);
	tw_wheel_destroy(&w);
}

/* A one-jump advance to 40000 ends inside level 3's bucket [39936,
 * 40960): its timers due by 40000 fire where they are, without a move;
 * the ones after 40000 come down as the bucket pops and fire at their
 * own ticks. */
static void test_unordered_jump_fires_inside_the_bucket_it_ends_in(void)
{
	static struct rec r[100];
	struct tw_wheel w;
	int64_t when;

	reset_log();
	placed[0] = placed[1] = 0;
	CHECK_EQ(tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT), TW_OK);
	for (int i = 0; i < 100; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer, 39950 + i);
	}
	watched[0] = &r[0].timer;   /* due 39950: fires in the jump */
	watched[1] = &r[50].timer;  /* due 40000: the last to */
	tw_wheel_set_observer(&w, &placed_counter);
	CHECK_EQ(tw_wheel_advance_unordered(&w, 40000), 51);
	CHECK_WHEEL(&w);
	CHECK_EQ(placed[0], 0);
	CHECK_EQ(placed[1], 0);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(r[i].fires, i <= 50 ? 1 : 0);
	while (tw_wheel_next_expiry(&w, &when)) {
		tw_wheel_advance(&w, when);
		CHECK_WHEEL(&w);
	}
	for (int i = 0; i < 100; i++) {
		CHECK_EQ(r[i].fires, 1);
		CHECK_EQ(r[i].fired_at, i <= 50 ? 40000 : 39950 + i);
	}
	tw_wheel_destroy(&w);
}

/* A level-3 bucket ([8192, 9216)) of 400 timers drains down while the
 * clock steps one tick at a time, with no observer (the drains' short
 * path). 100 of them a reschedule to a later time left there (such a
 * reschedule does not move a timer): 60 due in a later level-3 bucket
 * and 40 due on level 4 or 5, which level 2 cannot take and the drain
 * files by their keys on its way. One is due at 9184, a level-2 pop
 * whose bucket is a lap ahead of level 2's clock when the drain begins:
 * it goes into level 2 by its key instead. Every timer fires once, at
 * its own tick, and the invariants hold at every tick of the drain. */
static void test_drain_refiles_what_level2_cannot_take(void)
{
	enum { M = 400 };
	static struct rec r[M];
	struct tw_wheel w;
	uint64_t x = test_rand_seed(11);
	int64_t when;
	unsigned level = 0;

	reset_log();
	CHECK_EQ(tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT), TW_OK);
	for (int i = 0; i < M; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer,
			     i == 0 ? 9184 : 8192 + test_rand_below(&x, 1024));
	}
	for (int i = 1; i <= 100; i++) {
		int64_t later = tw_timer_due(&r[i].timer) +
				(i <= 60 ? 2048 + test_rand_below(&x, 4096)
					 : 100000 + test_rand_below(&x, 5000000));

		CHECK_EQ(tw_wheel_reschedule(&w, &r[i].timer, later), 1);
	}
	for (int i = 0; i < M; i++) {
		CHECK_EQ(tw_timer_where(&w, &r[i].timer, &level, NULL), TW_OK);
		CHECK_EQ(level, 3);
	}
	/* Tick by tick through the drain and the later level-3 buckets,
	 * then as an event loop steps (level 4's and 5's). */
	for (int64_t now = 1; now <= 16384; now++) {
		CHECK(tw_wheel_advance(&w, now) >= 0);
		if ((now >= 7168 && now <= 9216) || now % 1024 == 0)
			CHECK_WHEEL(&w);
	}
	while (tw_wheel_next_expiry(&w, &when)) {
		CHECK(tw_wheel_advance(&w, when) >= 0);
		CHECK_WHEEL(&w);
	}
	CHECK_EQ(tw_wheel_count(&w), 0);
	for (int i = 0; i < M; i++) {
		CHECK_EQ(r[i].fires, 1);
		CHECK_EQ(r[i].fired_at, tw_timer_due(&r[i].timer));
	}
	tw_wheel_destroy(&w);
}

static int moved, most_moved;

static void count_moves(void *arg, const struct tw_wheel *w,
			const struct tw_event *ev)
{
	(void)arg;
	(void)w;
	moved += ev->kind == TW_EV_PLACED;
}

static const struct tw_observer move_counter = { count_moves, NULL };

static void beacon_fn(struct tw_wheel *w, struct tw_timer *t)
{
	if (tw_wheel_now(w) < 2000)
		tw_wheel_add(w, t, tw_wheel_now(w) + 42);
}

/* 3000 timers in one level-2 bucket ([1056, 1088)) drain down from its
 * pop at 1024 while an event loop sleeps until next_expiry and a timer
 * that re-adds itself 42 ticks ahead keeps a level 1 bucket queued (at
 * 1050, between the drain's first wake for 2048 timers and its end): the
 * loop still wakes for every 2048 timers moved (no advance moves many
 * more), and each fires at its own tick. */
static void test_big_drain_wakes_per_chunk(void)
{
	enum { M = 3000 };
	static struct rec r[M];
	struct tw_timer beacon;
	struct tw_wheel w;
	int64_t when;
	unsigned level = 0;
	uint64_t x = test_rand_seed(5);

	reset_log();
	CHECK_EQ(tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT), TW_OK);
	for (int i = 0; i < M; i++) {
		rec_init(&r[i], i);
		tw_wheel_add(&w, &r[i].timer, 1056 + test_rand_below(&x, 32));
	}
	CHECK_EQ(tw_timer_where(&w, &r[0].timer, &level, NULL), TW_OK);
	CHECK_EQ(level, 2);
	tw_timer_init(&beacon, beacon_fn);
	tw_wheel_add(&w, &beacon, 42);
	tw_wheel_set_observer(&w, &move_counter);
	most_moved = 0;
	while (tw_wheel_next_expiry(&w, &when)) {
		moved = 0;
		tw_wheel_advance(&w, when);
		if (moved > most_moved)
			most_moved = moved;
		CHECK_WHEEL(&w);
	}
	CHECK(most_moved > 0 && most_moved <= 2048 + 64);
	for (int i = 0; i < M; i++) {
		CHECK_EQ(r[i].fires, 1);
		CHECK_EQ(r[i].fired_at, tw_timer_due(&r[i].timer));
	}
	tw_wheel_destroy(&w);
}

int main(void)
{
	RUN(test_big_buckets_fire_in_time);
	RUN(test_big_buckets_fire_in_time_observed);
	RUN(test_big_buckets_fire_in_time_drains_deferred);
	RUN(test_drain_files_a_timer_due_at_a_pop_there);
	RUN(test_drain_files_a_timer_due_at_a_pop_there_quietly);
	RUN(test_unordered_jump_fires_inside_the_bucket_it_ends_in);
	RUN(test_big_drain_wakes_per_chunk);
	RUN(test_drain_refiles_what_level2_cannot_take);
	return check_report();
}
