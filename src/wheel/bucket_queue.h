/* SPDX-License-Identifier: MIT */
/*
 * The bucket queue: Kafka's DelayQueue[TimerTaskList]. A binary min-heap of
 * the buckets that have an expiration, keyed by (pop time, queue order) —
 * the pop time is the expiration except for early cascades (wheel/exact.c) —
 * with each bucket's heap index kept beside the heap (tw__queue_place) so
 * any bucket can leave the queue in O(log B). B is at most levels *
 * wheel_size, a few hundred in practice, independent of the number of
 * timers.
 */
#ifndef TW_WHEEL_BUCKET_QUEUE_H
#define TW_WHEEL_BUCKET_QUEUE_H

#include "bucket.h"

void tw__bq_push(struct tw_wheel *w, struct tw_bucket *b);
struct tw_bucket *tw__bq_pop(struct tw_wheel *w);
void tw__bq_remove(struct tw_wheel *w, struct tw_bucket *b);

static inline struct tw_bucket *tw__bq_top(const struct tw_wheel *w)
{
	return w->queue_len ? w->queue[0] : NULL;
}

/* The heap order: earlier pop time first, then earlier queued first. */
static inline bool bq_before(const struct tw_wheel *w, const struct tw_bucket *a,
			     const struct tw_bucket *b)
{
	if (a->pop_at != b->pop_at)
		return a->pop_at < b->pop_at;
	return tw__queue_place(w, a)->seq < tw__queue_place(w, b)->seq;
}

#endif
