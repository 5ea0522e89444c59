/* SPDX-License-Identifier: MIT */
/*
 * The bucket queue: Kafka's DelayQueue[TimerTaskList], kafka mode's alone.
 * A binary min-heap of the buckets that have an expiration, keyed by their
 * pop time (kafka mode's is the expiration) and nothing else, sifted as
 * java.util.PriorityQueue sifts (an offer stops below a parent that is not
 * later, a poll moves the last bucket to the root and stops above children
 * that are not earlier, taking the right child only when it is earlier
 * than the left): buckets of equal expiration then pop in the order
 * Kafka's DelayQueue pops them for the same offers and polls, which is not
 * first in, first out. Each bucket's heap index is kept beside the heap
 * (tw__queue_place) so any bucket can leave the queue in O(log B). B is at
 * most levels * wheel_size, independent of the number of timers.
 */
#ifndef TW_WHEEL_BUCKET_QUEUE_H
#define TW_WHEEL_BUCKET_QUEUE_H

#include "bucket.h"

void tw__bq_push(struct tw_wheel *w, struct tw_bucket *b);
struct tw_bucket *tw__bq_pop(struct tw_wheel *w);
void tw__bq_remove(struct tw_wheel *w, struct tw_bucket *b);
struct tw_bucket *tw__bq_poll_copy(struct tw_bucket **heap, size_t *n);

static inline struct tw_bucket *tw__bq_top(const struct tw_wheel *w)
{
	return w->queue_len ? w->queue[0] : NULL;
}

/* The heap order: an earlier pop time (Kafka's compareTo of two buckets,
 * their expirations; no tie is broken). */
static inline bool bq_before(const struct tw_bucket *a, const struct tw_bucket *b)
{
	return a->pop_at < b->pop_at;
}

#endif
