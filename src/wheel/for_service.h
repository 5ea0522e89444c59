/* SPDX-License-Identifier: MIT */
/*
 * What the timer service (src/service/) uses of the wheel beyond its
 * public API: a drain that names the timer whose links it found broken,
 * advances that stop part way and hand due runs to the service whole,
 * and the event loop's timeout both layers compute. Private to the
 * library.
 */
#ifndef TW_WHEEL_FOR_SERVICE_H
#define TW_WHEEL_FOR_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "timingwheel/wheel.h"

#include "bucket.h"
#include "../debug.h"

/* tw_wheel_drain(), telling which timer's links were broken (*broken,
 * with TW_ECORRUPT), for the service to name it. */
int64_t tw__wheel_drain_checked(struct tw_wheel *w, tw_timer_fn *hand_back,
				struct tw_timer **broken);

/*
 * An advance that stops part way, so that the service runs a full batch
 * of expired timers while their lines are still in the cache, before the
 * wheel fires the rest (a million timers due in one tick would otherwise
 * go onto the expired list and be walked a second time, cold). A callback
 * asks with tw__wheel_ask_stop(); exact mode stops after that fire if it
 * came from a level-1 bucket, else after the next fire from one (or not
 * at all, if none fires before the advance ends) -- on a wheel that
 * allows stops (tw__wheel_allow_stops, which a taker implies); a plain
 * wheel's level-1 fires do not test for one, and it stops at the end of
 * that bucket instead. The asker calls
 * tw__wheel_stop_end() after the advance, which says whether it stopped;
 * tw__wheel_stopped() says so until an advance finishes what is left
 * (the caller advances again to the same time). Between the two the
 * wheel is whole -- every call works on it, tw_wheel_check() passes --
 * with level 1's clock behind the time given to advance: the level-1
 * bucket that was firing holds the rest of its timers, out of the queue,
 * and next_expiry answers now. Kafka mode never stops.
 */
enum { TW_STOP_ASKED = 1, TW_STOPPED = 2 }; /* struct tw_wheel's stopping */

static inline void tw__wheel_allow_stops(struct tw_wheel *w)
{
	w->levels[0].stoppable = true;
}

/*
 * Drains' shares run apart from the advance. An exact-mode advance ends
 * with each drain's share for the time it covers: timers moved down a
 * level, each a cache miss with a million pending (about 165 us a tick
 * with 500 due a tick, under the service's shard mutex). A service with
 * executors wants the fired run in an executor's hands first: where
 * tw__wheel_defer_drains() asked it, the advance leaves the shares owed
 * (tw__wheel_drains_owed), and tw__wheel_run_drains() moves them later,
 * as the advance would have (what fires then is counted there). Between
 * the two the wheel is whole and every call works on it; next_expiry may
 * name an earlier time than it will after the shares, never a later one
 * (a drain's deadline is never owed: the advance meets it). An advance
 * that comes first takes the owed shares into its own (a share is in
 * proportion to the time since the last). Exact mode only (kafka mode
 * has no drains). tests/wheel/big_buckets.c checks both.
 */
int64_t tw__wheel_run_drains(struct tw_wheel *w);

static inline void tw__wheel_defer_drains(struct tw_wheel *w, bool defer)
{
	w->levels[0].defer_drains = defer;
}

static inline bool tw__wheel_drains_owed(const struct tw_wheel *w)
{
	return w->levels[0].drains_owed;
}

static inline void tw__wheel_ask_stop(struct tw_wheel *w)
{
	w->stopping |= TW_STOP_ASKED;
}

static inline bool tw__wheel_stopped(const struct tw_wheel *w)
{
	return (w->stopping & TW_STOPPED) != 0;
}

/* After an advance whose callbacks may have asked for a stop: a stop
 * asked but not made (nothing was left to fire, or kafka mode) is
 * forgotten; whether the advance stopped. */
static inline bool tw__wheel_stop_end(struct tw_wheel *w)
{
	w->stopping &= TW_STOPPED;
	return w->stopping != 0;
}

/*
 * Due runs taken whole. Every timer of a service's wheel has the same
 * callback (tw__svc_fire), which does nothing but the service's own
 * bookkeeping, under the shard's mutex. So where a level-1 bucket fires
 * (exact mode, no observer set: each fire would have to be told), the
 * wheel hands the bucket to the service's taker instead of unlinking
 * and calling for each timer. The taker walks the bucket's front while
 * its timers are due by due_by (a later one: a reschedule to a later
 * tick left it there, which the wheel files again by its key), takes
 * each (tw__wheel_taken, then its own work), stops after the one that
 * asked the advance to stop (a full batch), and cuts the run it took off
 * the bucket at once (tw__wheel_cut_run). It returns how many it took:
 * at least one when the front timer is due. What the service sees is
 * what the calls would have shown, in the same order: nothing else runs
 * between the takes.
 */
static inline void tw__wheel_set_taker(struct tw_wheel *w, tw__wheel_take_fn *take)
{
	w->levels[0].take_run = take;
	tw__wheel_allow_stops(w);
}

/* t, the front of the run being taken, is no longer the wheel's. */
static inline void tw__wheel_taken(struct tw_wheel *w, struct tw_timer *t)
{
	t->bucket = NULL;
#ifdef TW_DEBUG
	w->count--;
	tw__debug_set(TW_DBG_WHEEL_TIMER, t, false, (uintptr_t)w);
#else
	(void)w;
#endif
}

/* The n timers taken off b's front, rest the first one left (b's head if
 * none is): out of b, and so of tw_wheel_count(). */
static inline void tw__wheel_cut_run(struct tw_bucket *b, struct tw_link *rest,
				     size_t n)
{
	b->head.next = rest;
	rest->prev = &b->head;
	b->count -= n;
	if (b->count == 0)
		b->min_key = INT64_MAX;
}

/* Whether filing t just made its bucket one of DRAIN_CHUNK + 1 timers:
 * from then on exact mode's next_expiry may name the bucket's pop, where
 * its drain in shares begins (exact.c's next_key_scan), a time that can
 * come before t's own tick. A reaper that sleeps until the next expiry it
 * last saw must be told, or it moves the whole bucket in one scan while
 * its first timers wait. Once a bucket grows past the threshold, not on
 * every add. A timer filed has a bucket (a due one's is the ready list);
 * one the wheel refused (its memory wiped by the caller: the service
 * names that mistake later) has none. The wheel never files into a
 * draining bucket, whose wake would move with every timer. */
static inline bool tw__wheel_filing_asks_wake(const struct tw_timer *t)
{
	const struct tw_bucket *b = t->bucket;

	return __builtin_expect(b != NULL, 1) && b->count == DRAIN_CHUNK + 1;
}

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
