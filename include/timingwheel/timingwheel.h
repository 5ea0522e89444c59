/* SPDX-License-Identifier: MIT */
/**
 * @file
 * timingwheel — Apache Kafka's hierarchical timing wheel in C11.
 *
 * This umbrella header is all most programs need:
 *
 *     #include <timingwheel/timingwheel.h>
 *
 * It brings in the single-threaded wheel (wheel.h), the read-only views and
 * invariant checker used by tools and tests (inspect.h), and the
 * thread-safe timer service with its reaper and executors (service.h),
 * and the purgatory of delayed operations (purgatory.h).
 */
#ifndef TIMINGWHEEL_TIMINGWHEEL_H
#define TIMINGWHEEL_TIMINGWHEEL_H

#include "timingwheel/version.h"
#include "timingwheel/error.h"
#include "timingwheel/wheel.h"
#include "timingwheel/inspect.h"
#include "timingwheel/service.h"
#include "timingwheel/purgatory.h"

#endif
