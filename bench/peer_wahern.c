/* SPDX-License-Identifier: MIT */
/*
 * wheel_bench's driver for wahern/timeout (github.com/wahern/timeout),
 * built only when TW_BENCH_WAHERN names a checkout of it. It includes only
 * timeout.h; timeout.c is compiled from the checkout into an object file
 * of its own, as wahern/timeout's Makefile builds it (bench/CMakeLists.txt:
 * -O3 -DNDEBUG), so each call here is a call into that object, as in a
 * program that uses the library. Nothing of it is in this repository.
 *
 * Built twice: the default configuration (peer_wahern) and the lean one
 * (WAHERN_LEAN=1, with TIMEOUT_DISABLE_INTERVALS, _RELATIVE_ACCESS and
 * _CALLBACKS: peer_wahern_lean). The lean driver and the lean timeout.c
 * object are both compiled with bench/wahern_lean_names.h force-included,
 * which renames timeout.h's functions (lean_timeouts_add, ...), so the two
 * configurations of one timeout.c link into one executable.
 */
#include <stdlib.h>

#include "peer.h"
#include "timeout.h"

#if WAHERN_LEAN
#define PEER peer_wahern_lean
#define PEER_NAME "wahern-lean"
#else
#define PEER peer_wahern
#define PEER_NAME "wahern"
#endif

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
static void churn(const size_t *pick, const int64_t *due, size_t c)
{
	for (size_t j = 0; j < c; j++)
		timeouts_add(tos, &timers[pick[j]], (timeout_t)due[j]);
}

/* An advance as its users write it: update the clock, take every expired
 * timeout. */
static inline void advance(timeout_t now)
{
	now_ticks = now;
	timeouts_update(tos, now_ticks);
	while (timeouts_get(tos))
		nfired++;
}

static void advance_to(int64_t now)
{
	advance((timeout_t)now);
}

static void expire_step(long *advances, long *idle)
{
	long a = 0, z = 0;

	while (timeouts_pending(tos) || timeouts_expired(tos)) {
		long before = nfired;

		advance(now_ticks + timeouts_timeout(tos));
		a++;
		z += nfired == before;
	}
	*advances = a;
	*idle = z;
}

static void expire_jump(int64_t now)
{
	advance((timeout_t)now);
}

static void idle_reset(const size_t *pick, size_t n, size_t every, int64_t delay)
{
	size_t k = every;

	for (size_t i = 0; i < n; i++) {
		timeouts_add(tos, &timers[pick[i]], now_ticks + (timeout_t)delay);
		if (--k == 0) {
			k = every;
			advance(now_ticks + 1);
		}
	}
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
	PEER_NAME, setup, insert, cancel, churn, expire_step, NULL, expire_jump,
	idle_reset, advance_to, fired, teardown, NULL, NULL
};
