/* SPDX-License-Identifier: MIT */
/*
 * The seeds' worked examples, state by state, through the public API:
 *   seed 001 — tick 1000, size 3, start 1675752020558, tasks 1..7 s (kafka);
 *   seed 004 — tick 1, size 20: 350 ms and 450 ms;
 *   seed 003 — tick 20, size 10: 5, 23 and 230 ms;
 * and the same scenarios in exact mode, where nothing fires early.
 */
#include <string.h>

#include "check.h"

#define B 1675752000000LL /* seed 001's times are B + milliseconds */

struct task {
	struct tw_timer timer;
	int id;
	int fires;
	int64_t fired_at;
};

static void on_fire(struct tw_wheel *w, struct tw_timer *t)
{
	struct task *task = tw_container_of(t, struct task, timer);

	task->fires++;
	task->fired_at = tw_wheel_now(w);
}

static void task_init(struct task *t, int id)
{
	memset(t, 0, sizeof(*t));
	t->id = id;
	tw_timer_init(&t->timer, on_fire);
}

static void check_where(const struct tw_wheel *w, const struct task *t,
			unsigned level, unsigned slot, int64_t expiration)
{
	unsigned l = 99, s = 99;
	struct tw_bucket_info b;

	CHECK_EQ(tw_timer_where(w, &t->timer, &l, &s), TW_OK);
	CHECK_EQ(l, level);
	CHECK_EQ(s, slot);
	if (level != TW_LEVEL_READY) {
		tw_wheel_bucket_info(w, level, slot, &b);
		CHECK_EQ(b.expiration, expiration);
	}
}

struct qe {
	int64_t expiration;
	unsigned level, slot;
};

static void check_queue(const struct tw_wheel *w, const struct qe *want, size_t n)
{
	struct tw_queue_entry q[16];
	size_t len = tw_wheel_queue_snapshot(w, q, 16);

	CHECK_EQ(len, n);
	for (size_t i = 0; i < n && i < len; i++) {
		CHECK_EQ(q[i].expiration, want[i].expiration);
		CHECK_EQ(q[i].level, want[i].level);
		CHECK_EQ(q[i].slot, want[i].slot);
	}
}

static void check_level(const struct tw_wheel *w, unsigned level, int64_t tick,
			int64_t current_time)
{
	struct tw_level_info li;

	CHECK_EQ(tw_wheel_level_info(w, level, &li), TW_OK);
	CHECK_EQ(li.tick, tick);
	CHECK_EQ(li.current_time, current_time);
}

#define QUEUE(w, ...)                                                        \
	do {                                                                 \
		const struct qe want_[] = { __VA_ARGS__ };                   \
		check_queue((w), want_, sizeof(want_) / sizeof(want_[0]));   \
	} while (0)

static void test_seed001_adds(void)
{
	struct tw_wheel w;
	struct task t[8];

	tw_wheel_init(&w, 1000, 3, B + 20558, TW_MODE_KAFKA);
	check_level(&w, 1, 1000, B + 20000);
	for (int i = 1; i <= 7; i++)
		task_init(&t[i], i);

	tw_wheel_add_in(&w, &t[1].timer, 1000);
	check_where(&w, &t[1], 1, 0, B + 21000);
	QUEUE(&w, { B + 21000, 1, 0 });

	tw_wheel_add_in(&w, &t[2].timer, 2000);
	check_where(&w, &t[2], 1, 1, B + 22000);
	QUEUE(&w, { B + 21000, 1, 0 }, { B + 22000, 1, 1 });

	tw_wheel_add_in(&w, &t[3].timer, 3000);
	CHECK_EQ(tw_wheel_levels(&w), 2);
	check_level(&w, 2, 3000, B + 18000); /* rounded back to 14:40:18 */
	check_where(&w, &t[3], 2, 0, B + 21000);
	QUEUE(&w, { B + 21000, 1, 0 }, { B + 21000, 2, 0 }, { B + 22000, 1, 1 });

	tw_wheel_add_in(&w, &t[4].timer, 4000);
	check_where(&w, &t[4], 2, 1, B + 24000);
	tw_wheel_add_in(&w, &t[5].timer, 5000);
	check_where(&w, &t[5], 2, 1, B + 24000);
	tw_wheel_add_in(&w, &t[6].timer, 6000);
	check_where(&w, &t[6], 2, 1, B + 24000);
	QUEUE(&w, { B + 21000, 1, 0 }, { B + 21000, 2, 0 }, { B + 22000, 1, 1 },
	      { B + 24000, 2, 1 });

	tw_wheel_add_in(&w, &t[7].timer, 7000);
	CHECK_EQ(tw_wheel_levels(&w), 3);
	check_level(&w, 3, 9000, B + 12000); /* 14:40:12 */
	check_where(&w, &t[7], 3, 2, B + 21000);
	/* The three buckets at 21 s pop as Kafka's DelayQueue (a Java
	 * PriorityQueue) pops them: L1#0; then L3#2, queued last, which
	 * rose above L1#1 (22 s) when it was offered and takes the root
	 * when L1#0 pops (the left child wins a tie); then L2#0. The seed
	 * re-files task7 before task3; its table lists the ties by level. */
	QUEUE(&w, { B + 21000, 1, 0 }, { B + 21000, 3, 2 }, { B + 21000, 2, 0 },
	      { B + 22000, 1, 1 }, { B + 24000, 2, 1 });
	CHECK_EQ(tw_wheel_count(&w), 7);
	CHECK_WHEEL(&w);

	/* First advance: three buckets at 21 s; task1 fires, task3 and
	 * task7 cascade one level down. */
	CHECK_EQ(tw_wheel_advance(&w, B + 21000), 1);
	CHECK_EQ(t[1].fired_at, B + 21000);
	check_level(&w, 1, 1000, B + 21000);
	check_level(&w, 2, 3000, B + 21000);
	check_level(&w, 3, 9000, B + 21000);
	check_where(&w, &t[3], 1, 2, B + 23000);
	check_where(&w, &t[7], 2, 2, B + 27000);
	QUEUE(&w, { B + 22000, 1, 1 }, { B + 23000, 1, 2 }, { B + 24000, 2, 1 },
	      { B + 27000, 2, 2 });
	CHECK_WHEEL(&w);

	CHECK_EQ(tw_wheel_advance(&w, B + 22000), 1);
	CHECK_EQ(t[2].fired_at, B + 22000);
	check_level(&w, 1, 1000, B + 22000);
	check_level(&w, 2, 3000, B + 21000); /* 22 < 21 + 3: level 2 stays */
	QUEUE(&w, { B + 23000, 1, 2 }, { B + 24000, 2, 1 }, { B + 27000, 2, 2 });

	CHECK_EQ(tw_wheel_advance(&w, B + 23000), 1);
	CHECK_EQ(t[3].fired_at, B + 23000);
	QUEUE(&w, { B + 24000, 2, 1 }, { B + 27000, 2, 2 });

	/* 24 s: level 2 bucket 1 flushes; task4 fires, 5 and 6 drop down. */
	CHECK_EQ(tw_wheel_advance(&w, B + 24000), 1);
	CHECK_EQ(t[4].fired_at, B + 24000);
	check_level(&w, 1, 1000, B + 24000);
	check_level(&w, 2, 3000, B + 24000);
	check_level(&w, 3, 9000, B + 21000);
	check_where(&w, &t[5], 1, 1, B + 25000);
	check_where(&w, &t[6], 1, 2, B + 26000);
	QUEUE(&w, { B + 25000, 1, 1 }, { B + 26000, 1, 2 }, { B + 27000, 2, 2 });
	CHECK_WHEEL(&w);

	for (int i = 5; i <= 7; i++) {
		CHECK_EQ(tw_wheel_advance(&w, B + 20000 + i * 1000), 1);
		CHECK_EQ(t[i].fired_at, B + 20000 + i * 1000);
		CHECK_WHEEL(&w);
	}
	check_level(&w, 2, 3000, B + 27000);
	check_level(&w, 3, 9000, B + 21000);
	CHECK_EQ(tw_wheel_queue_snapshot(&w, NULL, 0), 0);
	CHECK_EQ(tw_wheel_count(&w), 0);
	for (int i = 1; i <= 7; i++) {
		CHECK_EQ(t[i].fires, 1);
		/* Kafka's early firing, 558 ms each time. */
		CHECK_EQ(tw_timer_due(&t[i].timer) - t[i].fired_at, 558);
	}
	tw_wheel_destroy(&w);
}

static void test_seed001_exact_never_early(void)
{
	struct tw_wheel w;
	struct task t[8];
	int64_t when;

	tw_wheel_init(&w, 1000, 3, B + 20558, TW_MODE_EXACT);
	for (int i = 1; i <= 7; i++) {
		task_init(&t[i], i);
		tw_wheel_add_in(&w, &t[i].timer, i * 1000);
	}
	CHECK_EQ(tw_wheel_levels(&w), 3);
	while (tw_wheel_next_expiry(&w, &when)) {
		tw_wheel_advance(&w, when);
		CHECK_WHEEL(&w);
	}
	for (int i = 1; i <= 7; i++) {
		CHECK_EQ(t[i].fires, 1);
		/* due ...2i.558 fires at the next whole second */
		CHECK_EQ(t[i].fired_at, B + 21000 + i * 1000);
		CHECK(t[i].fired_at >= tw_timer_due(&t[i].timer));
	}
	tw_wheel_destroy(&w);
}

/* Seed 004: follow the 450 ms task down the levels. */
static struct tw_event placed[8];
static int nplaced;
static const struct tw_timer *followed;

static void follow(void *arg, const struct tw_wheel *w, const struct tw_event *ev)
{
	(void)arg;
	(void)w;
	if (ev->timer == followed && ev->kind == TW_EV_PLACED && nplaced < 8)
		placed[nplaced++] = *ev;
}

static void check_placed(int i, unsigned level, unsigned slot, int64_t time)
{
	CHECK_EQ(placed[i].level, level);
	CHECK_EQ(placed[i].slot, slot);
	CHECK_EQ(placed[i].time, time);
}

static void test_seed004_cascade(void)
{
	static const struct tw_observer obs = { follow, NULL };
	struct tw_wheel w;
	struct task a, b;

	for (int mode = 0; mode < 2; mode++) {
		tw_wheel_init(&w, 1, 20, 0, (enum tw_mode)mode);
		tw_wheel_set_observer(&w, &obs);
		task_init(&a, 350);
		task_init(&b, 450);
		followed = &b.timer;
		nplaced = 0;
		tw_wheel_add(&w, &a.timer, 350);
		tw_wheel_add(&w, &b.timer, 450);
		CHECK_EQ(tw_wheel_levels(&w), mode == TW_MODE_KAFKA ? 3 : 2);
		if (mode == TW_MODE_KAFKA) {
			check_where(&w, &a, 2, 17, 340); /* level 2 slot 17 */
			check_level(&w, 2, 20, 0);
			check_level(&w, 3, 400, 0);
		} else {
			/* Exact mode: 20 buckets round up to 32, and each
			 * level ticks at half the interval below (1, 16 ms),
			 * see src/wheel/lifecycle.c. */
			check_where(&w, &a, 2, 21, 336);
			check_level(&w, 2, 16, 0);
		}
		while (tw_wheel_count(&w)) {
			int64_t when;

			tw_wheel_next_expiry(&w, &when);
			tw_wheel_advance(&w, when);
			CHECK_WHEEL(&w);
		}
		CHECK_EQ(nplaced, mode == TW_MODE_KAFKA ? 3 : 2);
		if (mode == TW_MODE_KAFKA) {
			/* level 3 slot 1 [400, 800) -> level 2 [440, 460) ->
			 * level 1 [450, 451) -> fires at 450. */
			check_placed(0, 3, 1, 400);
			check_placed(1, 2, 2, 440);
			check_placed(2, 1, 10, 450);
		} else {
			/* level 2 [448, 464), moved down from 432 on ->
			 * level 1 [450, 451) (450 mod 32 = 2). */
			check_placed(0, 2, 28, 448);
			check_placed(1, 1, 2, 450);
		}
		CHECK_EQ(b.fired_at, 450);
		CHECK_EQ(a.fired_at, 350);
		tw_wheel_destroy(&w);
	}
}

/* Seed 004's first paragraph: 2 ms in slot 2, then 8 ms later in slot 10,
 * and a 19 ms timer reusing slot 1 once the pointer has moved on. */
static void test_seed004_slots_are_reused(void)
{
	struct tw_wheel w;
	struct task a, b, c;

	tw_wheel_init(&w, 1, 20, 0, TW_MODE_KAFKA);
	task_init(&a, 1);
	task_init(&b, 2);
	task_init(&c, 3);
	tw_wheel_add(&w, &a.timer, 2);
	check_where(&w, &a, 1, 2, 2);
	tw_wheel_advance(&w, 2);
	CHECK_EQ(a.fired_at, 2);
	tw_wheel_add_in(&w, &b.timer, 8);
	check_where(&w, &b, 1, 10, 10);
	tw_wheel_add_in(&w, &c.timer, 19); /* due 21: slot 1, already passed */
	check_where(&w, &c, 1, 1, 21);
	CHECK_EQ(tw_wheel_levels(&w), 1);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void test_seed003_examples(void)
{
	/* tick 20, 10 slots, start 0: due 5, 23, 230. */
	static const int64_t due[3] = { 5, 23, 230 };
	static const int64_t kafka_fire[3] = { 0, 20, 220 };
	static const int64_t exact_fire[3] = { 20, 40, 240 };
	struct tw_wheel w;
	struct task t[3];

	for (int mode = 0; mode < 2; mode++) {
		tw_wheel_init(&w, 20, 10, 0, (enum tw_mode)mode);
		for (int i = 0; i < 3; i++) {
			task_init(&t[i], i);
			tw_wheel_add(&w, &t[i].timer, due[i]);
		}
		if (mode == TW_MODE_KAFKA) {
			check_where(&w, &t[0], TW_LEVEL_READY, 0, 0);
			check_where(&w, &t[1], 1, 1, 20);
			check_where(&w, &t[2], 2, 1, 200);
		}
		for (int64_t now = 0; now <= 300; now++)
			tw_wheel_advance(&w, now);
		for (int i = 0; i < 3; i++) {
			CHECK_EQ(t[i].fires, 1);
			CHECK_EQ(t[i].fired_at,
				 mode == TW_MODE_KAFKA ? kafka_fire[i] : exact_fire[i]);
		}
		CHECK_WHEEL(&w);
		tw_wheel_destroy(&w);
	}
}

int main(void)
{
	RUN(test_seed001_adds);
	RUN(test_seed001_exact_never_early);
	RUN(test_seed004_cascade);
	RUN(test_seed004_slots_are_reused);
	RUN(test_seed003_examples);
	return check_report();
}
