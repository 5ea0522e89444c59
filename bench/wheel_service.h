/* SPDX-License-Identifier: MIT */
/*
 * The second baseline the timer service is measured against: this
 * project's own wheel (exact, 64 buckets, tick 1 ms) under one mutex, with
 * a reaper thread that sleeps on a CLOCK_MONOTONIC condition variable until
 * tw_wheel_next_expiry() and runs the callbacks itself, under the lock. An
 * add signals the reaper only when it is due before the reaper's sleep
 * ends. What a user could write in an afternoon instead of the service:
 * the service has to beat it to earn its machinery. Benchmark use only.
 */
#ifndef TW_BENCH_WHEEL_SERVICE_H
#define TW_BENCH_WHEEL_SERVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "timingwheel/timingwheel.h"

struct wheel_service {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct tw_wheel wheel;
	int64_t sleeping_until; /* the reaper's deadline; INT64_MAX: none */
	bool stop, threaded;
	pthread_t reaper;
};

int wheel_service_init(struct wheel_service *ws, bool threaded);
void wheel_service_destroy(struct wheel_service *ws);
/* As tw_wheel_add / _cancel / _reschedule, under the lock; due in ns of
 * CLOCK_MONOTONIC. */
int wheel_service_add(struct wheel_service *ws, struct tw_timer *t, int64_t due);
int wheel_service_cancel(struct wheel_service *ws, struct tw_timer *t);
int wheel_service_reschedule(struct wheel_service *ws, struct tw_timer *t,
			     int64_t due);
/* Pending timers (under the lock). */
size_t wheel_service_count(struct wheel_service *ws);

#endif
