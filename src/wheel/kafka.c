/* SPDX-License-Identifier: MIT */
/*
 * wheel/kafka.c — kafka mode (TW_MODE_KAFKA): Kafka's TimingWheel.add and
 * its advance loop over a queue of buckets, bit for bit, to reproduce
 * Kafka's traces.
 *
 * What it owns. Filing a timer the way Kafka does -- floor(due / tick),
 * the first level whose range holds it, any wheel_size (a level's slot is
 * a division, not a mask) -- and the loop that pops buckets off the queue
 * (src/bucket_queue.c, a binary heap on the pop time that sifts as Java's
 * PriorityQueue does, so that ties pop in Kafka's order).
 *
 * The bucket queue. Nothing ticks. In kafka mode every bucket that holds
 * timers is in a priority queue keyed by its expiration (Kafka's DelayQueue
 * of buckets), so tw_wheel_advance() pops the buckets whose time has come,
 * moves the clocks straight to each one's expiration and flushes it; empty
 * stretches of time cost nothing, and tw_wheel_next_expiry() is the queue's
 * head. The queue holds buckets, not timers: at most levels * wheel_size
 * entries however many timers there are.
 *
 * Guarantees. What Kafka's SystemTimer does: a bucket fires at its start,
 * so a timer can run up to a tick early; the clocks move only to the
 * expirations of the buckets popped. A bucket emptied by cancels stays in
 * the queue until it expires, as Kafka's does. Costs: a division per level
 * walked and a heap push when a bucket turns non-empty (O(log B), B the
 * buckets queued, at most levels * wheel_size); an advance O(buckets
 * popped * log B + timers moved or fired).
 *
 *
 * Worked example (seed 001): tick 1000, wheel_size 3, start 1675752020558,
 * seven tasks due 1..7 s later, in kafka mode.
 *   level 1: tick 1000, currentTime ...020000, range [...020000, ...023000).
 *   task1 (due ...021558): virtualId 1675752021, bucket 0, expiration
 *     ...021000. task2: bucket 1, expiration ...022000.
 *   task3 (...023558) is out of level 1's range, so level 2 is created:
 *     tick 3000, startMs = level 1's ...020000, rounded down to ...018000;
 *     range [...018000, ...027000). virtualId 558584007, bucket 0,
 *     expiration ...021000. task4..6 share level 2 bucket 1 (...024000).
 *   task7 (...027558) needs level 3: tick 9000, currentTime ...012000,
 *     bucket 2, expiration ...021000.
 *   The queue now holds ...021000 three times, ...022000 and ...024000.
 *   Advancing to ...021000 pops all three, in the heap's order (L1#0, L3#2,
 *   L2#0): task1 fires (at ...021000, 558 ms before its due time — Kafka's
 *   buckets fire at their start), task7 drops to level 2 bucket 2
 *   (...027000) and task3 to level 1 bucket 2 (...023000). Then one bucket
 *   a second: ...022000 ... ...027000.
 */
#include "own.h"

static uint32_t slot_of(const struct tw_wheel *w, int64_t bucket_number)
{
	int64_t m = bucket_number % (int64_t)w->size;

	return (uint32_t)(m < 0 ? m + (int64_t)w->size : m);
}

/* Kafka's TimerTaskList.setExpiration + queue.offer: a bucket enters the
 * queue when it gets a new expiration. */
static void bucket_set_expiration(struct tw_wheel *w, struct tw_bucket *b,
				  int64_t expiration, int64_t pop_at)
{
	if (b->has_expiration && b->expiration == expiration)
		return;
	if (tw__queue_place(w, b)->index != TW_NOT_QUEUED)
		tw__bq_remove(w, b);
	b->expiration = expiration;
	b->pop_at = pop_at;
	b->has_expiration = true;
	tw__bq_push(w, b);
}

/* Kafka's TimingWheel.add for a timer that is not due: the first level
 * whose range holds it, creating levels as needed. key > level 1's clock.
 * Level L's clock is level 1's / span (I5), so its bucket number for key
 * is at least distance / span - 1 ahead of it: a level whose too_far the
 * distance reaches cannot hold the timer, and is passed without dividing. */
void tw__insert_kafka(struct tw_wheel *w, struct tw_timer *t, int64_t key)
{
	uint64_t distance = (uint64_t)key - (uint64_t)w->levels[0].clock;

	for (uint32_t i = 0;; i++) {
		struct tw_level *lv;
		int64_t number;

		lv = i < w->nlevels ? &w->levels[i] : tw__add_level(w);
		if (!lv->unbounded && distance >= lv->too_far)
			continue;
		number = tw__span_div(key, lv->span);
		/* number > lv->clock here (I2), so the unsigned distance is
		 * exact even when it exceeds INT64_MAX. */
		if (lv->unbounded ||
		    (uint64_t)number - (uint64_t)lv->clock < w->size) {
			uint32_t slot = slot_of(w, number);
			struct tw_bucket *b = &lv->slots[slot];

			bucket_append(b, t);
			bucket_set_expiration(
				w, b, (int64_t)((uint64_t)number * lv->span),
				lv->lead ? tw__mul_sat(number - 1, lv->lead)
					 : (int64_t)((uint64_t)number * lv->span));
			notify(w, TW_EV_PLACED, i + 1, slot,
			       tw__ticks_to_time(w, b->expiration), t);
			return;
		}
	}
}

/* Kafka's advance loop: pop every bucket whose time has come, move the
 * clocks to it, and flush it (each timer fires or drops a level). */
int64_t tw__advance_kafka(struct tw_wheel *w, int64_t limit)
{
	struct tw_bucket *b;
	int64_t fired = 0;

	for (;;) {
		b = tw__bq_top(w);
		if (!b || b->pop_at > limit)
			break;
		tw__bq_pop(w);
		notify(w, TW_EV_POPPED, b->level, b->slot,
		       tw__ticks_to_time(w, b->pop_at), NULL);
		tw__advance_clocks(w, b->pop_at);
		b->has_expiration = false;
		fired += tw__move_down(w, b, SIZE_MAX);
	}
	return fired;
}
