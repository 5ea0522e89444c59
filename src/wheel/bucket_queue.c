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

		if (!bq_before(w, b, w->queue[parent]))
			break;
		heap_set(w, i, w->queue[parent]);
		i = parent;
	}
	heap_set(w, i, b);
}

static void sift_down(struct tw_wheel *w, size_t i)
{
	struct tw_bucket *b = w->queue[i];
	size_t n = w->queue_len;

	for (;;) {
		size_t child = 2 * i + 1;

		if (child >= n)
			break;
		if (child + 1 < n && bq_before(w, w->queue[child + 1], w->queue[child]))
			child++;
		if (!bq_before(w, w->queue[child], b))
			break;
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
	if (i > 0 && bq_before(w, last, w->queue[(i - 1) / 2]))
		sift_up(w, i);
	else
		sift_down(w, i);
}
