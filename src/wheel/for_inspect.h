/* SPDX-License-Identifier: MIT */
/*
 * What the inspector (inspect.c: the read-only views and the invariant
 * checker) uses of the wheel: the arithmetic that files a timer and the
 * wheel's lists, so that the checker recomputes where each timer belongs
 * the way the wheel computed it. The invariant-checker test includes it
 * for the same reason. Private to the library.
 */
#ifndef TW_WHEEL_FOR_INSPECT_H
#define TW_WHEEL_FOR_INSPECT_H

#include "timingwheel/inspect.h"
#include "bucket.h"

/* struct tw_wheel's advancing: which callbacks run now (0: none). Every
 * call that is refused from a callback (TW_EREENTER) is refused from
 * both; the checker takes any other value for bytes that are no wheel. */
enum {
	TW_IN_ADVANCE = 1,   /* an advance's timer callbacks */
	TW_IN_HAND_BACK = 2, /* a drain's hand_back */
};

/* Floor and ceiling division (C's / truncates toward zero). Inline:
 * every timer filed or moved on a wheel whose tick is not 1 (a service's
 * 1 ms tick on its ns clock) takes its key from one, and a call costs as
 * many instructions again as the division (make bench-instr-service: an
 * expired timer 155.3 instructions inline, 171.3 through a call). */
static inline int64_t tw__floor_div(int64_t x, int64_t d)
{
	int64_t q = x / d;

	if (x < 0 && x % d != 0)
		q--;
	return q;
}

static inline int64_t tw__ceil_div(int64_t x, int64_t d)
{
	int64_t q = x / d;

	if (x > 0 && x % d != 0)
		q++;
	return q;
}

/* The same out of line, for loops whose tick-1 path an inline division
 * beside it slowed by an instruction a timer (exact.c: the unordered
 * expiry and the drain; window.c: a windowed bucket's fire). */
int64_t tw__ceil_div_call(int64_t x, int64_t d);

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
size_t tw__pending_sum(const struct tw_wheel *w);
unsigned tw__bucket_level(const struct tw_wheel *w, const struct tw_bucket *b);
bool tw__bucket_queued(const struct tw_wheel *w, const struct tw_bucket *b);
unsigned tw__bucket_slot(const struct tw_wheel *w, const struct tw_bucket *b);

#endif
