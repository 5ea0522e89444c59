/* SPDX-License-Identifier: MIT */
/*
 * Binary heap of buckets (see bucket_queue.h). The heap array is allocated
 * by tw_wheel_init() with room for every bucket the wheel can ever have, so
 * pushing never allocates.
 */
#include "bucket_queue.h"

static void heap_set(struct tw_wheel *w, size_t i, struct tw_bucket *b)
{
	w->queue[i] = b;
	tw__queue_place(w, b)->index = i;
}

static void sift_up(struct tw_wheel *w, size_t i)
{
	struct tw_bucket *b = w->queue[i];

	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!bq_before(b, w->queue[parent]))
			break;
		heap_set(w, i, w->queue[parent]);
		i = parent;
	}
	heap_set(w, i, b);
}

/* One step of a sift down of b, at i of heap[0..n): the child that moves
 * up into i, or 0 where b comes to rest. Java's siftDown: the right child
 * only when strictly earlier than the left, and it only when strictly
 * earlier than b -- the rule that makes ties pop in Kafka's order, here
 * once for the queue and its snapshot's copy. */
static size_t sift_down_step(struct tw_bucket *const *heap, size_t n, size_t i,
			     const struct tw_bucket *b)
{
	size_t child = 2 * i + 1;

	if (child >= n)
		return 0;
	if (child + 1 < n && bq_before(heap[child + 1], heap[child]))
		child++;
	return bq_before(heap[child], b) ? child : 0;
}

static void sift_down(struct tw_wheel *w, size_t i)
{
	struct tw_bucket *b = w->queue[i];
	size_t child;

	while ((child = sift_down_step(w->queue, w->queue_len, i, b))) {
		heap_set(w, i, w->queue[child]);
		i = child;
	}
	heap_set(w, i, b);
}

void tw__bq_push(struct tw_wheel *w, struct tw_bucket *b)
{
	size_t i = w->queue_len++;

	tw__queue_place(w, b)->seq = w->queue_seq++;
	heap_set(w, i, b);
	sift_up(w, i);
}

struct tw_bucket *tw__bq_pop(struct tw_wheel *w)
{
	struct tw_bucket *top = tw__bq_top(w);

	if (top)
		tw__bq_remove(w, top);
	return top;
}

/* A poll of heap[0..*n), a copy of the queue's heap (inspect.c's
 * snapshot): what tw__bq_pop() would pop, the copy left as the queue would
 * be (its last bucket moved to the root and sifted down, a step at a time
 * as sift_down() takes them), so that polls of the copy pop in the queue's own order. The
 * queue and its places are not touched. */
struct tw_bucket *tw__bq_poll_copy(struct tw_bucket **heap, size_t *n)
{
	struct tw_bucket *top, *last;
	size_t i = 0, child;

	if (!*n)
		return NULL;
	top = heap[0];
	last = heap[--*n];
	while ((child = sift_down_step(heap, *n, i, last))) {
		heap[i] = heap[child];
		i = child;
	}
	if (*n)
		heap[i] = last;
	return top;
}

void tw__bq_remove(struct tw_wheel *w, struct tw_bucket *b)
{
	struct tw_queue_place *p = tw__queue_place(w, b);
	size_t i = p->index;
	struct tw_bucket *last = w->queue[--w->queue_len];

	p->index = TW_NOT_QUEUED;
	if (last == b)
		return;
	heap_set(w, i, last);
	/* The moved bucket may belong above or below its new position. */
	if (i > 0 && bq_before(last, w->queue[(i - 1) / 2]))
		sift_up(w, i);
	else
		sift_down(w, i);
}
