/* SPDX-License-Identifier: MIT */
/*
 * Helpers the wheel (src/wheel/) shares with inspect.c (the invariant checker recomputes
 * what the wheel computed, the same way). Private to the library.
 */
#ifndef TW_WHEEL_INTERNAL_H
#define TW_WHEEL_INTERNAL_H

#include "timingwheel/inspect.h"
#include "bucket.h"

int64_t tw__floor_div(int64_t x, int64_t d);
int64_t tw__ceil_div(int64_t x, int64_t d);
int64_t tw__span_div(int64_t x, uint64_t span);
int64_t tw__mul_sat(int64_t a, uint64_t b);
int64_t tw__due_limit(const struct tw_wheel *w, int64_t now);
int64_t tw__ticks_to_time(const struct tw_wheel *w, int64_t key);
int64_t tw__timer_key(const struct tw_wheel *w, int64_t due);
int64_t tw__level_clock_time(const struct tw_wheel *w,
			     const struct tw_level *lv);
/* After a change to what the add's short path depends on (the observer):
 * src/wheel/wheel.c. */
void tw__wheel_fast_levels(struct tw_wheel *w);
struct tw_bucket *tw__ready_list(const struct tw_wheel *w, unsigned which);
struct tw_bucket *tw__hand_back_list(const struct tw_wheel *w);
unsigned tw__bucket_level(const struct tw_wheel *w, const struct tw_bucket *b);
bool tw__bucket_queued(const struct tw_wheel *w, const struct tw_bucket *b);
unsigned tw__bucket_slot(const struct tw_wheel *w, const struct tw_bucket *b);
/* tw_wheel_drain(), telling which timer's links were broken (*broken,
 * with TW_ECORRUPT), for the service to name it. */
int64_t tw__wheel_drain_checked(struct tw_wheel *w, tw_timer_fn *hand_back,
				struct tw_timer **broken);

/* An event loop's timeout from a next expiry: -1 if nothing is queued
 * (any false), else max(0, when - now), clamped to INT64_MAX (when - now
 * need not fit). tw_wheel_timeout() and tw_service_timeout() both. */
static inline int64_t tw__timeout_until(bool any, int64_t when, int64_t now)
{
	if (!any)
		return -1;
	if (when <= now)
		return 0;
	if (now < 0 && when > INT64_MAX + now)
		return INT64_MAX;
	return when - now;
}

#endif
