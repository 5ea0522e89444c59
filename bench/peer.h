/* SPDX-License-Identifier: MIT */
/*
 * One implementation under test in wheel_bench: the wheel, the binary heap
 * and the event loops libuv, libev and libevent (their drivers are in
 * wheel_bench.c). Each function runs one whole phase's loop itself, calling
 * the library directly, so no per-operation indirect call is charged to
 * anyone. Times are in ticks (1 ms) on a virtual clock starting at 0.
 */
#ifndef TW_BENCH_PEER_H
#define TW_BENCH_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct peer_ops {
	const char *name;
	/* n timers in one array, initialised, none pending; clock at 0 */
	void (*setup)(size_t n);
	void (*insert)(const int64_t *due, size_t n); /* timer i at due[i] */
	void (*cancel)(const size_t *order, size_t n);
	/* c times: reschedule timer pick[j] to due[j], as the library's
	 * users do (pending or not) */
	void (*churn)(const size_t *pick, const int64_t *due, size_t c);
	/* An event loop on the virtual clock: loop { next expiry; advance to
	 * it } until nothing is pending; *advances and how many fired
	 * nothing. NULL: the library has no virtual clock. */
	void (*expire_step)(long *advances, long *idle);
	/* Untimed, before expire_jump, for a library without a virtual
	 * clock: make every pending timer due now. NULL for the others. */
	void (*make_due)(void);
	/* One advance to now (no virtual clock: one non-blocking loop
	 * iteration) */
	void (*expire_jump)(int64_t now);
	/* n resets: timer pick[i] to now + delay; after every `every`
	 * resets the clock moves forward one tick (an advance that fires
	 * nothing). No virtual clock: relative to the loop's own time,
	 * which does not move. */
	void (*idle_reset)(const size_t *pick, size_t n, size_t every,
			   int64_t delay);
	/* Move the clock to now and fire what is due (the stall test);
	 * NULL without a virtual clock. */
	void (*advance_to)(int64_t now);
	long (*fired)(void); /* since setup */
	void (*teardown)(void);
	/* expire_jump with no order promised (ours: advance_unordered);
	 * NULL for a library with one kind of advance */
	void (*expire_jump_unordered)(int64_t now);
	/* idle_reset with a window: timer pick[i] to fire anywhere in
	 * [now + delay, now + delay + width]; NULL: the library has none */
	void (*idle_reset_window)(const size_t *pick, size_t n, size_t every,
				  int64_t delay, int64_t width);
	/* insert with windows: timer i to fire anywhere in [due[i],
	 * due[i] + width] (the windowed idle cells' first state); NULL
	 * where idle_reset_window is */
	void (*insert_window)(const int64_t *due, size_t n, int64_t width);
};

#endif
