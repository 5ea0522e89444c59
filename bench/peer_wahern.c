/* SPDX-License-Identifier: MIT */
/*
 * wheel_bench's driver for wahern/timeout (github.com/wahern/timeout),
 * built only when TW_BENCH_WAHERN names a checkout of it. Its timeout.c is
 * compiled from there into this file with every function static, so the
 * default and the lean configuration (WAHERN_LEAN, set by CMake) can share
 * one executable. Nothing of it is in this repository.
 */
#include <stdlib.h>

#include "peer.h"

#define TIMEOUT_PUBLIC static
#if WAHERN_LEAN
#define TIMEOUT_DISABLE_INTERVALS
#define TIMEOUT_DISABLE_RELATIVE_ACCESS
#define TIMEOUT_DISABLE_CALLBACKS
#define PEER peer_wahern_lean
#define PEER_NAME "wahern-lean"
#else
#define PEER peer_wahern
#define PEER_NAME "wahern"
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#include "timeout.c"
#pragma GCC diagnostic pop

static struct timeouts *tos;
static struct timeout *timers;
static timeout_t now_ticks;
static long nfired;

static void setup(size_t n)
{
	int err;

	tos = timeouts_open(TIMEOUT_mHZ, &err);
	timers = malloc(n * sizeof(*timers));
	for (size_t i = 0; i < n; i++)
		timeout_init(&timers[i], TIMEOUT_ABS);
	now_ticks = 0;
	nfired = 0;
}

static void insert(const int64_t *due, size_t n)
{
	for (size_t i = 0; i < n; i++)
		timeouts_add(tos, &timers[i], (timeout_t)due[i]);
}

static void cancel(const size_t *order, size_t n)
{
	for (size_t i = 0; i < n; i++)
		timeouts_del(tos, &timers[order[i]]);
}

/* timeouts_add on a pending timeout moves it. */
static void churn(const size_t *pick, const int64_t *due, size_t n)
{
	for (size_t i = 0; i < n; i++)
		timeouts_add(tos, &timers[pick[i]], (timeout_t)due[i]);
}

static void advance_to(int64_t now)
{
	now_ticks = (timeout_t)now;
	timeouts_update(tos, now_ticks);
	while (timeouts_get(tos))
		nfired++;
}

static bool next(int64_t *when)
{
	if (!timeouts_pending(tos) && !timeouts_expired(tos))
		return false;
	*when = (int64_t)(now_ticks + timeouts_timeout(tos));
	return true;
}

static long fired(void)
{
	return nfired;
}

static void teardown(void)
{
	timeouts_close(tos);
	free(timers);
}

const struct peer_ops PEER = {
	PEER_NAME, setup, insert, cancel, churn, advance_to, next, fired, teardown
};
