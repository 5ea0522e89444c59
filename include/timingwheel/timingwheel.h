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

#define TW_VERSION_MAJOR 0          /**< incompatible API changes */
#define TW_VERSION_MINOR 1          /**< compatible additions */
#define TW_VERSION_PATCH 0          /**< fixes */
#define TW_VERSION_STRING "0.1.0"   /**< the three, as a string */

#include "timingwheel/error.h"
#include "timingwheel/wheel.h"
#include "timingwheel/inspect.h"
#include "timingwheel/service.h"
#include "timingwheel/purgatory.h"

#endif
