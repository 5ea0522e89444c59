/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L

#include "heap_service.h"
#include "bench_util.h"

#include <stdlib.h>
#include <time.h>

static void set(struct heap_service *hs, size_t i, struct heap_timer *t)
{
	hs->heap[i] = t;
	t->index = i;
}

static void up(struct heap_service *hs, size_t i)
{
	struct heap_timer *t = hs->heap[i];

	while (i > 0 && t->due < hs->heap[(i - 1) / 2]->due) {
		set(hs, i, hs->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	set(hs, i, t);
}

static void down(struct heap_service *hs, size_t i)
{
	struct heap_timer *t = hs->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= hs->len)
			break;
		if (c + 1 < hs->len && hs->heap[c + 1]->due < hs->heap[c]->due)
			c++;
		if (hs->heap[c]->due >= t->due)
			break;
		set(hs, i, hs->heap[c]);
		i = c;
	}
	set(hs, i, t);
}

static void remove_at(struct heap_service *hs, size_t i)
{
	struct heap_timer *last = hs->heap[--hs->len];

	hs->heap[i]->index = SIZE_MAX;
	if (i == hs->len)
		return;
	set(hs, i, last);
	if (i > 0 && last->due < hs->heap[(i - 1) / 2]->due)
		up(hs, i);
	else
		down(hs, i);
}

static void *reaper(void *arg)
{
	struct heap_service *hs = arg;

	pthread_mutex_lock(&hs->mu);
	while (!hs->stop) {
		int64_t now = bench_now_ns();

		while (hs->len && hs->heap[0]->due <= now) {
			struct heap_timer *t = hs->heap[0];

			remove_at(hs, 0);
			pthread_mutex_unlock(&hs->mu);
			t->fn(t);
			pthread_mutex_lock(&hs->mu);
		}
		if (hs->len) {
			int64_t due = hs->heap[0]->due;
			struct timespec ts = { (time_t)(due / 1000000000),
					       (long)(due % 1000000000) };

			pthread_cond_timedwait(&hs->cv, &hs->mu, &ts);
		} else if (!hs->stop) {
			pthread_cond_wait(&hs->cv, &hs->mu);
		}
	}
	pthread_mutex_unlock(&hs->mu);
	return NULL;
}

int heap_service_init(struct heap_service *hs, size_t capacity, bool threaded)
{
	pthread_condattr_t attr;

	hs->heap = malloc(capacity * sizeof(*hs->heap));
	if (!hs->heap)
		return -1;
	hs->cap = capacity;
	hs->len = 0;
	hs->stop = false;
	hs->threaded = threaded;
	pthread_mutex_init(&hs->mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&hs->cv, &attr);
	pthread_condattr_destroy(&attr);
	if (threaded)
		pthread_create(&hs->reaper, NULL, reaper, hs);
	return 0;
}

void heap_service_destroy(struct heap_service *hs)
{
	if (hs->threaded) {
		pthread_mutex_lock(&hs->mu);
		hs->stop = true;
		pthread_cond_signal(&hs->cv);
		pthread_mutex_unlock(&hs->mu);
		pthread_join(hs->reaper, NULL);
	}
	pthread_mutex_destroy(&hs->mu);
	pthread_cond_destroy(&hs->cv);
	free(hs->heap);
}

void heap_timer_init(struct heap_timer *t, void (*fn)(struct heap_timer *t))
{
	t->due = 0;
	t->index = SIZE_MAX;
	t->fn = fn;
}

int heap_service_add(struct heap_service *hs, struct heap_timer *t, int64_t due)
{
	pthread_mutex_lock(&hs->mu);
	if (t->index != SIZE_MAX || hs->len == hs->cap) {
		pthread_mutex_unlock(&hs->mu);
		return -1;
	}
	t->due = due;
	hs->heap[hs->len] = t;
	t->index = hs->len++;
	up(hs, t->index);
	/* A new earliest timer: wake the reaper. */
	if (hs->threaded && t->index == 0)
		pthread_cond_signal(&hs->cv);
	pthread_mutex_unlock(&hs->mu);
	return 0;
}

int heap_service_cancel(struct heap_service *hs, struct heap_timer *t)
{
	int was;

	pthread_mutex_lock(&hs->mu);
	was = t->index != SIZE_MAX;
	if (was)
		remove_at(hs, t->index);
	pthread_mutex_unlock(&hs->mu);
	return was;
}

size_t heap_service_poll(struct heap_service *hs, int64_t now)
{
	size_t n = 0;

	pthread_mutex_lock(&hs->mu);
	while (hs->len && hs->heap[0]->due <= now) {
		struct heap_timer *t = hs->heap[0];

		remove_at(hs, 0);
		pthread_mutex_unlock(&hs->mu);
		t->fn(t);
		n++;
		pthread_mutex_lock(&hs->mu);
	}
	pthread_mutex_unlock(&hs->mu);
	return n;
}
