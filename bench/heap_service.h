/* SPDX-License-Identifier: MIT */
/*
 * The baseline the timer service is measured against: a plain binary
 * min-heap of timers (with an index per timer, so cancel is O(log n)) under
 * one mutex, with a reaper thread that sleeps until the earliest due time.
 * What a careful programmer writes without a wheel. Benchmark use only.
 */
#ifndef TW_BENCH_HEAP_SERVICE_H
#define TW_BENCH_HEAP_SERVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct heap_timer {
	int64_t due;
	size_t index; /* SIZE_MAX when not pending */
	void (*fn)(struct heap_timer *t);
};

struct heap_service {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct heap_timer **heap;
	size_t len, cap;
	bool stop;
	pthread_t reaper;
	bool threaded;
};

int heap_service_init(struct heap_service *hs, size_t capacity, bool threaded);
void heap_service_destroy(struct heap_service *hs);
void heap_timer_init(struct heap_timer *t, void (*fn)(struct heap_timer *t));
int heap_service_add(struct heap_service *hs, struct heap_timer *t, int64_t due);
int heap_service_cancel(struct heap_service *hs, struct heap_timer *t);
/* Run everything due at now on this thread; returns how many. */
size_t heap_service_poll(struct heap_service *hs, int64_t now);

#endif
