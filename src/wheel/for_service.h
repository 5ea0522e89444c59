/* SPDX-License-Identifier: MIT */
/*
 * What the timer service (src/service/) uses of the wheel beyond its
 * public API: a drain that names the timer whose links it found broken,
 * and the event loop's timeout both layers compute. Private to the
 * library.
 */
#ifndef TW_WHEEL_FOR_SERVICE_H
#define TW_WHEEL_FOR_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "timingwheel/wheel.h"

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
