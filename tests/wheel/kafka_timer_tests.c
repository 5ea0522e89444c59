/* SPDX-License-Identifier: MIT */
/*
 * The behaviours Kafka's own timer tests check (../shared/KAFKA_TESTS.md):
 * TimingWheelTest, TimerTest and TimerTaskListTest, ported to this API.
 * Kafka's tests run in kafka mode; where a behaviour matters to users it is
 * checked in exact mode too. (SystemTimerReaperTest belongs to the timer
 * service.)
 */
#include <string.h>

#include "check.h"

struct task {
	struct tw_timer timer;
	int id;
	int fires;
	int64_t fired_at;
};

static int order[1024];
static int norder;

static void on_fire(struct tw_wheel *w, struct tw_timer *t)
{
	struct task *task = tw_container_of(t, struct task, timer);

	task->fires++;
	task->fired_at = tw_wheel_now(w);
	if (norder < 1024)
		order[norder++] = task->id;
}

static void task_init(struct task *t, int id)
{
	memset(t, 0, sizeof(*t));
	t->id = id;
	tw_timer_init(&t->timer, on_fire);
}

static size_t queue_len(const struct tw_wheel *w)
{
	return tw_wheel_queue_snapshot(w, NULL, 0);
}

static int64_t level_time(const struct tw_wheel *w, unsigned level)
{
	struct tw_level_info li;

	CHECK_EQ(tw_wheel_level_info(w, level, &li), TW_OK);
	return li.current_time;
}

/* TimingWheelTest: tick 10, size 5, start 1000. */

static void test_valid_task_is_added_and_queued(void)
{
	struct tw_wheel w;
	struct task t;
	unsigned level = 0;

	tw_wheel_init(&w, 10, 5, 1000, TW_MODE_KAFKA);
	task_init(&t, 1);
	CHECK_EQ(tw_wheel_add(&w, &t.timer, 1020), TW_OK);
	CHECK_EQ(tw_timer_where(&w, &t.timer, &level, NULL), TW_OK);
	CHECK_EQ(level, 1); /* "added", not handed back to run */
	CHECK_EQ(queue_len(&w), 1);
	CHECK_EQ(tw_wheel_count(&w), 1);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void test_expired_or_current_tick_task_runs_now(void)
{
	struct tw_wheel w;
	struct task past, same_tick, cancelled;
	unsigned level = 0;

	for (int mode = 0; mode < 2; mode++) {
		tw_wheel_init(&w, 10, 5, 1000, (enum tw_mode)mode);
		task_init(&past, 1);
		task_init(&same_tick, 2);
		task_init(&cancelled, 3);
		tw_wheel_add(&w, &past.timer, 999);
		tw_wheel_add(&w, &same_tick.timer, 1005);
		tw_wheel_add(&w, &cancelled.timer, 1000);
		CHECK_EQ(tw_wheel_cancel(&w, &cancelled.timer), 1);
		tw_timer_where(&w, &past.timer, &level, NULL);
		CHECK_EQ(level, TW_LEVEL_READY);
		tw_timer_where(&w, &same_tick.timer, &level, NULL);
		/* Kafka runs a task due inside the current tick at once (5
		 * early); exact mode waits for the tick boundary. */
		CHECK_EQ(level, mode == TW_MODE_KAFKA ? TW_LEVEL_READY : 1u);
		CHECK_EQ(queue_len(&w), mode == TW_MODE_KAFKA ? 0 : 1);
		CHECK_EQ(tw_wheel_advance(&w, 1000), mode == TW_MODE_KAFKA ? 2 : 1);
		CHECK_EQ(past.fired_at, 1000);
		CHECK_EQ(cancelled.fires, 0);
		CHECK_EQ(tw_wheel_advance(&w, 1010), mode == TW_MODE_KAFKA ? 0 : 1);
		CHECK_EQ(same_tick.fires, 1);
		CHECK(mode == TW_MODE_KAFKA || same_tick.fired_at >= 1005);
		CHECK_WHEEL(&w);
		tw_wheel_destroy(&w);
	}
}

static void test_clock_moves_by_whole_ticks(void)
{
	struct tw_wheel w;
	struct task t;

	for (int mode = 0; mode < 2; mode++) {
		tw_wheel_init(&w, 10, 5, 1000, (enum tw_mode)mode);
		task_init(&t, 1);
		tw_wheel_add(&w, &t.timer, 1015);
		CHECK_EQ(tw_wheel_advance(&w, 1005), 0);
		CHECK_EQ(level_time(&w, 1), 1000); /* within one tick: stays */
		CHECK_EQ(tw_wheel_advance(&w, 1010), mode == TW_MODE_KAFKA);
		CHECK_EQ(level_time(&w, 1), 1010); /* next tick: one tick on */
		CHECK_EQ(tw_wheel_advance(&w, 1020), mode == TW_MODE_EXACT);
		CHECK_EQ(t.fires, 1);
		CHECK_EQ(t.fired_at, mode == TW_MODE_KAFKA ? 1010 : 1020);
		CHECK_WHEEL(&w);
		tw_wheel_destroy(&w);
	}
}

static void test_overflow_wheel_created_once_and_reused(void)
{
	struct tw_wheel w;
	struct task a, b;

	tw_wheel_init(&w, 10, 5, 1000, TW_MODE_KAFKA);
	task_init(&a, 1);
	task_init(&b, 2);
	CHECK_EQ(tw_wheel_levels(&w), 1);
	tw_wheel_add(&w, &a.timer, 1049); /* level 1: [1000, 1050) */
	CHECK_EQ(tw_wheel_levels(&w), 1);
	tw_wheel_add(&w, &b.timer, 1050);
	CHECK_EQ(tw_wheel_levels(&w), 2);
	CHECK_EQ(level_time(&w, 2), 1000);
	tw_wheel_cancel(&w, &b.timer);
	tw_wheel_add(&w, &b.timer, 1249); /* level 2 covers [1000, 1250) */
	CHECK_EQ(tw_wheel_levels(&w), 2);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void test_advancing_to_1060_moves_overflow_clock_to_1050(void)
{
	struct tw_wheel w;
	struct task t;

	for (int mode = 0; mode < 2; mode++) {
		/* Exact mode rounds 5 buckets up to 8, so level 1 reaches
		 * 1070 and 1090 is what needs level 2; its tick is half level
		 * 1's interval (40), so its clock reads 1080 there. */
		int64_t due = mode == TW_MODE_KAFKA ? 1060 : 1090;

		tw_wheel_init(&w, 10, 5, 1000, (enum tw_mode)mode);
		task_init(&t, 1);
		tw_wheel_add(&w, &t.timer, due);
		CHECK_EQ(tw_wheel_levels(&w), 2);
		CHECK_EQ(tw_wheel_advance(&w, due), 1);
		CHECK_EQ(level_time(&w, 1), due);
		CHECK_EQ(level_time(&w, 2), mode == TW_MODE_KAFKA ? 1050 : 1080);
		CHECK_WHEEL(&w);
		tw_wheel_destroy(&w);
	}
}

/* TimerTest: tick 1, size 3. */

static void test_negative_delays_run_after_one_advance(void)
{
	struct tw_wheel w;
	struct task t[5];

	for (int mode = 0; mode < 2; mode++) {
		tw_wheel_init(&w, 1, 3, 5000, (enum tw_mode)mode);
		for (int i = 0; i < 5; i++) {
			task_init(&t[i], i);
			CHECK_EQ(tw_wheel_add_in(&w, &t[i].timer, -5 + i), TW_OK);
		}
		CHECK_EQ(tw_wheel_advance(&w, 5000), 5);
		for (int i = 0; i < 5; i++)
			CHECK_EQ(t[i].fires, 1);
		tw_wheel_destroy(&w);
	}
}

static void test_all_tasks_expire_once_never_early(void)
{
	enum { N = 5 + 2 * 90 + 400 };
	static struct task t[N];
	struct tw_wheel w;
	int64_t when;

	for (int mode = 0; mode < 2; mode++) {
		int n = 0;

		tw_wheel_init(&w, 1, 3, 0, (enum tw_mode)mode);
		for (int i = 0; i < 5; i++, n++) {
			task_init(&t[n], n);
			tw_wheel_add(&w, &t[n].timer, i);
		}
		for (int i = 10; i < 100; i++) {
			for (int j = 0; j < 2; j++, n++) {
				task_init(&t[n], n);
				tw_wheel_add(&w, &t[n].timer, i);
			}
		}
		for (int i = 100; i < 500; i++, n++) {
			task_init(&t[n], n);
			tw_wheel_add(&w, &t[n].timer, i);
		}
		CHECK_WHEEL(&w);
		while (tw_wheel_next_expiry(&w, &when)) {
			CHECK(tw_wheel_advance(&w, when) >= 0);
			CHECK_WHEEL(&w);
		}
		for (int i = 0; i < N; i++) {
			CHECK_EQ(t[i].fires, 1);
			/* With a 1 ms tick even Kafka is never early. */
			CHECK(t[i].fired_at >= tw_timer_due(&t[i].timer));
			CHECK(t[i].fired_at < tw_timer_due(&t[i].timer) + 1 ||
			      tw_timer_due(&t[i].timer) <= 0);
		}
		CHECK_EQ(tw_wheel_count(&w), 0);
		tw_wheel_destroy(&w);
	}
}

/* TimerTaskListTest. */

static void test_moving_between_lists_keeps_the_count(void)
{
	struct tw_wheel w;
	struct task t[30];
	struct tw_bucket_info b;

	/* Three lists: three buckets of level 1 (tick 10 s), one counter. */
	tw_wheel_init(&w, 10000, 5, 0, TW_MODE_KAFKA);
	for (int i = 0; i < 10; i++) {
		task_init(&t[i], i);
		tw_wheel_add(&w, &t[i].timer, 10000 + i);
	}
	CHECK_EQ(tw_wheel_count(&w), 10);
	/* Move them all to the second list, then to the third. */
	for (int i = 0; i < 10; i++)
		CHECK_EQ(tw_wheel_reschedule(&w, &t[i].timer, 20000 + i), 1);
	CHECK_EQ(tw_wheel_count(&w), 10);
	tw_wheel_bucket_info(&w, 1, 1, &b);
	CHECK_EQ(b.count, 0);
	tw_wheel_bucket_info(&w, 1, 2, &b);
	CHECK_EQ(b.count, 10);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(tw_wheel_reschedule(&w, &t[i].timer, 30000 + i), 1);
	CHECK_EQ(tw_wheel_count(&w), 10);
	tw_wheel_bucket_info(&w, 1, 3, &b);
	CHECK_EQ(b.count, 10);
	/* Cancel removes. */
	for (int i = 0; i < 4; i++)
		tw_wheel_cancel(&w, &t[i].timer);
	CHECK_EQ(tw_wheel_count(&w), 6);
	tw_wheel_bucket_info(&w, 1, 3, &b);
	CHECK_EQ(b.count, 6);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void test_bucket_remaining_delay(void)
{
	struct tw_wheel w;
	struct task t;

	for (int mode = 0; mode < 2; mode++) {
		/* A 10 s bucket, looked at 5 s later: 5 s to go. */
		tw_wheel_init(&w, 10000, 5, 0, (enum tw_mode)mode);
		task_init(&t, 1);
		tw_wheel_add(&w, &t.timer, 10000);
		CHECK_EQ(tw_wheel_timeout(&w, 0), 10000);
		CHECK_EQ(tw_wheel_advance(&w, 5000), 0);
		CHECK_EQ(tw_wheel_timeout(&w, 5000), 5000);
		tw_wheel_destroy(&w);
	}
}

/* Buckets of equal expiration pop as Kafka's DelayQueue, a Java
 * PriorityQueue, pops them for the same offers and polls: not first in,
 * first out. Tick 1, size 2, from 0, the heap by hand:
 *   t1 due 4: a level-3 bucket at 4 (A)         heap [A]
 *   t2 due 2: a level-2 bucket at 2 (D)         heap [D, A]
 *   advance 2: D pops, t2 runs                  heap [A]
 *   t3 due 3: a level-1 bucket at 3 (F)         heap [F, A]
 *   t4 due 4: a level-2 bucket at 4 (B)         heap [F, A, B]
 *   advance 3: F pops, t3 runs; B, moved to the root, stays there (a tie
 *   with A sifts nothing)                       heap [B, A]
 *   t5 due 4: a level-1 bucket at 4 (C)         heap [B, A, C]
 *   advance 4: B pops (t4), C moves to the root and stays, C pops (t5),
 *   then A (t1). First in, first out would run t1, t4, t5. */
static void test_equal_expirations_pop_as_javas_heap(void)
{
	static const int want[] = { 2, 3, 4, 5, 1 };
	struct tw_wheel w;
	struct task t[6];
	struct tw_queue_entry q[4];

	tw_wheel_init(&w, 1, 2, 0, TW_MODE_KAFKA);
	for (int i = 1; i <= 5; i++)
		task_init(&t[i], i);
	norder = 0;
	tw_wheel_add(&w, &t[1].timer, 4);
	tw_wheel_add(&w, &t[2].timer, 2);
	CHECK_EQ(tw_wheel_advance(&w, 2), 1);
	tw_wheel_add(&w, &t[3].timer, 3);
	tw_wheel_add(&w, &t[4].timer, 4);
	CHECK_EQ(tw_wheel_advance(&w, 3), 1);
	tw_wheel_add(&w, &t[5].timer, 4);
	/* The snapshot lists them in that order too. */
	CHECK_EQ(tw_wheel_queue_snapshot(&w, q, 4), 3);
	CHECK_EQ(q[0].level, 2);
	CHECK_EQ(q[1].level, 1);
	CHECK_EQ(q[2].level, 3);
	CHECK_EQ(tw_wheel_advance(&w, 4), 3);
	CHECK_EQ(norder, 5);
	for (int i = 0; i < 5 && i < norder; i++)
		CHECK_EQ(order[i], want[i]);
	tw_wheel_destroy(&w);
}

struct pops {
	unsigned level[64], slot[64];
	size_t n;
};

static void note_pop(void *arg, const struct tw_wheel *w, const struct tw_event *e)
{
	struct pops *p = arg;

	(void)w;
	if (e->kind == TW_EV_POPPED && p->n < 64) {
		p->level[p->n] = e->level;
		p->slot[p->n] = e->slot;
		p->n++;
	}
}

/* The queue's snapshot lists its buckets in the order they pop, ties
 * included, when the advance files nothing between its pops (a timer
 * that moves a level down is offered to the heap there, which can reorder
 * the ties left, in Kafka as here). Tick 1, size 2: each step adds up
 * to three timers, each due at the next multiple of m (m one of 8, 16, 32
 * and 64), at whatever level that distance gives (each files at its due
 * time: the level that takes the next multiple of m from its own clock
 * has a span that divides m), and one due next tick; the advance to the
 * earliest expiration fires every timer it pops, and
 * pops the snapshot's buckets of that expiration in the snapshot's
 * order. */
static void test_the_snapshot_lists_ties_in_the_order_they_pop(void)
{
	static struct task t[400];
	uint64_t rng = 7;
	int ties = 0;

	for (int round = 0; round < 40; round++) {
		struct tw_wheel w;
		struct tw_queue_entry q[64];
		struct pops p = { { 0 }, { 0 }, 0 };
		struct tw_observer obs = { note_pop, &p };
		int added = 0;
		int64_t now = 0;

		CHECK_EQ(tw_wheel_init(&w, 1, 2, 0, TW_MODE_KAFKA), TW_OK);
		tw_wheel_set_observer(&w, &obs);
		while (added < 400 - 4) {
			size_t len, k = 0;

			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			for (int a = 0; a < (int)((rng >> 40) % 4); a++) {
				int64_t m = (int64_t)8 << ((rng >> (44 + 2 * a)) & 3);

				task_init(&t[added], added);
				CHECK_EQ(tw_wheel_add(&w, &t[added++].timer,
						      (now / m + 1) * m),
					 TW_OK);
			}
			task_init(&t[added], added);
			CHECK_EQ(tw_wheel_add(&w, &t[added++].timer, now + 1), TW_OK);
			len = tw_wheel_queue_snapshot(&w, q, 64);
			CHECK(len > 0 && len <= 64);
			while (k < len && q[k].expiration == q[0].expiration)
				k++;
			ties += k > 1;
			p.n = 0;
			now = q[0].expiration;
			CHECK(tw_wheel_advance(&w, now) > 0);
			CHECK_EQ(p.n, k);
			for (size_t i = 0; i < k && i < p.n; i++) {
				CHECK_EQ(p.level[i], q[i].level);
				CHECK_EQ(p.slot[i], q[i].slot);
			}
		}
		tw_wheel_destroy(&w);
	}
	CHECK(ties > 20); /* the test met ties */
}

int main(void)
{
	RUN(test_valid_task_is_added_and_queued);
	RUN(test_expired_or_current_tick_task_runs_now);
	RUN(test_clock_moves_by_whole_ticks);
	RUN(test_overflow_wheel_created_once_and_reused);
	RUN(test_advancing_to_1060_moves_overflow_clock_to_1050);
	RUN(test_negative_delays_run_after_one_advance);
	RUN(test_all_tasks_expire_once_never_early);
	RUN(test_moving_between_lists_keeps_the_count);
	RUN(test_bucket_remaining_delay);
	RUN(test_equal_expirations_pop_as_javas_heap);
	RUN(test_the_snapshot_lists_ties_in_the_order_they_pop);
	return check_report();
}
