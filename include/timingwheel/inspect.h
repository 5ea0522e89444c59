/* SPDX-License-Identifier: MIT */
/**
 * @file
 * Read-only views of a wheel's inside, an observer hook, and the invariant
 * checker. tw-trace draws the wheel with these; tests assert the seeds'
 * intermediate states with them. None of it is needed to use the wheel.
 *
 * Levels are numbered from 1 (the innermost wheel, tick = the wheel's tick)
 * as in Kafka's documentation and the seeds; slots from 0.
 *
 * Times that do not fit an int64_t (a top level's interval, say) are
 * reported as INT64_MAX (or INT64_MIN below).
 */
#ifndef TIMINGWHEEL_INSPECT_H
#define TIMINGWHEEL_INSPECT_H

#include "timingwheel/wheel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what this header declares
 * is its exported API. */
#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility push(default)
#endif

/** The level tw_timer_where() reports for a timer that is due and waits for
 *  the next advance (from a callback: or for the advance under way to run
 *  it). */
#define TW_LEVEL_READY 0u

/** One level of the wheel (Kafka's TimingWheel). */
struct tw_level_info {
	int64_t tick;         /**< time covered by one bucket */
	int64_t current_time; /**< the level's clock, a multiple of tick;
				   INT64_MAX once an exact-mode wheel has
				   reached its end of time (advanced to
				   INT64_MAX) */
	int64_t interval;     /**< tick * wheel_size: range is [current_time,
				   current_time + interval) */
	bool unbounded;       /**< the top level: covers everything beyond */
};

/** One bucket (Kafka's TimerTaskList). */
struct tw_bucket_info {
	bool has_expiration;  /**< Kafka's expiration != -1 */
	bool queued;          /**< in the bucket queue */
	bool draining;        /**< exact mode: popped a tick early, its timers
				   moving down a share at each advance */
	int64_t expiration;   /**< the bucket's start (Kafka's expiration) */
	int64_t end;          /**< expiration + level tick */
	size_t count;         /**< timers in the bucket */
	const struct tw_timer *first; /**< walk with tw_bucket_next() */
	int64_t pops_at;      /**< when it leaves the queue: its expiration,
				   or, on an early-cascade level (exact mode),
				   one tick of that level before, so that its
				   timers move down before any is due (for a
				   bucket that left it, draining: its
				   expiration, queued false) */
};

/** One entry of the bucket queue (Kafka's DelayQueue). */
struct tw_queue_entry {
	unsigned level;       /**< the bucket's level, from 1 */
	unsigned slot;        /**< the bucket's slot, from 0 */
	int64_t expiration;   /**< the bucket's start (Kafka's expiration) */
	size_t count;         /**< timers in it */
	int64_t pops_at;      /**< when it is popped (see tw_bucket_info) */
};

/**
 * Describe a level.
 * @param wheel an initialised wheel
 * @param level 1..tw_wheel_levels()
 * @param[out] out the description
 * @retval 0 success
 * @retval TW_EINVAL NULL pointer or no such level
 * @par Thread safety
 *      The wheel's thread.
 */
int tw_wheel_level_info(const struct tw_wheel *wheel, unsigned level,
			struct tw_level_info *out);

/**
 * Describe a bucket.
 * @param wheel an initialised wheel
 * @param level 1..tw_wheel_levels()
 * @param slot 0..wheel_size-1, the size in use (exact mode's power of
 *        two: tw_wheel_init())
 * @param[out] out the description; out->first stays valid until the wheel
 *                 next changes
 * @retval 0 success
 * @retval TW_EINVAL NULL pointer, no such level or slot
 * @par Thread safety
 *      The wheel's thread. From a callback of
 *      tw_wheel_advance_unordered(), the bucket that call is
 *      firing has the timers it has not reached yet set aside:
 *      its count includes them, its walk does not (they are back
 *      when the call returns; tw_wheel_advance() sets none aside).
 */
int tw_wheel_bucket_info(const struct tw_wheel *wheel, unsigned level,
			 unsigned slot, struct tw_bucket_info *out);

/**
 * Describe the timers due now, waiting for the next advance (level
 * TW_LEVEL_READY).
 * @param wheel an initialised wheel
 * @param[out] out the description, as for a bucket
 * @retval 0 success
 * @retval TW_EINVAL NULL pointer
 * @par Thread safety
 *      The wheel's thread. From a callback of an advance, the timers
 *      that advance found due and has not run yet are set aside: they
 *      run in it, and tw_wheel_count() and tw_timer_where()
 *      (TW_LEVEL_READY) count them, but this call describes only
 *      those due for the next advance (filed by the callbacks).
 */
int tw_wheel_ready_info(const struct tw_wheel *wheel,
			struct tw_bucket_info *out);

/**
 * Walk a bucket.
 * @param timer a timer from tw_bucket_info::first or this function
 * @return the next timer in the same bucket, in firing order, or NULL
 * @par Thread safety
 *      The wheel's thread.
 */
const struct tw_timer *tw_bucket_next(const struct tw_timer *timer);

/**
 * Copy the bucket queue, in the order it will be popped: its first max
 * buckets, with no allocation (exact mode: O(buckets x log max); kafka
 * mode, which polls a copy of its heap kept for this: O(queue length + max
 * x log queue length)). In kafka mode buckets of equal expiration are
 * listed as the heap as it stands pops them; an advance that moves a
 * timer down a level between two of those pops offers a bucket to the
 * heap, which can change the order of the ties left, as in Kafka's
 * DelayQueue.
 * @param wheel an initialised wheel
 * @param[out] out room for max entries, or NULL: nothing is written
 * @param max entries out can take
 * @return the queue's length (which may exceed max: call again with more)
 * @par Thread safety
 *      The wheel's thread.
 */
size_t tw_wheel_queue_snapshot(const struct tw_wheel *wheel,
			       struct tw_queue_entry *out, size_t max);

/**
 * Where a pending timer is.
 * @param wheel an initialised wheel
 * @param timer a timer
 * @param[out] level its level, or TW_LEVEL_READY if it is due and waits for
 *                   the next advance; NULL: not wanted
 * @param[out] slot its slot; NULL: not wanted
 * @retval 0 success
 * @retval TW_EINVAL NULL wheel or timer, or the timer is not pending in
 *         this wheel
 * @par Thread safety
 *      The wheel's thread.
 */
int tw_timer_where(const struct tw_wheel *wheel, const struct tw_timer *timer,
		   unsigned *level, unsigned *slot);

/* ---- observer: called synchronously on every structural event ---- */

/** What an observer is told about. */
enum tw_event_kind {
	TW_EV_LEVEL_ADDED, /**< level, time = its current_time */
	TW_EV_PLACED,      /**< timer put in level/slot (add or cascade),
			        time = the bucket's expiration */
	TW_EV_READY,       /**< timer due when added: waits for next advance */
	TW_EV_POPPED,      /**< bucket level/slot left the queue, time =
			        when it popped: its expiration, or in exact
			        mode, for a bucket above level 1, one tick of
			        its level earlier (tw_bucket_info::pops_at) */
	TW_EV_CLOCK,       /**< level's clock moved to time */
	TW_EV_FIRED        /**< timer's callback is about to run; time = now */
};

/** One structural event. Fields not named by the kind are 0 / NULL. */
struct tw_event {
	enum tw_event_kind kind;      /**< what happened */
	unsigned level;               /**< the level concerned */
	unsigned slot;                /**< the bucket concerned */
	int64_t time;                 /**< see enum tw_event_kind */
	const struct tw_timer *timer; /**< the timer concerned */
};

/** An observer: on_event(arg, wheel, event) runs synchronously. */
struct tw_observer {
	/** Called on every event; must not change the wheel (it may read it:
	 *  next expiry, counts, the inspect calls). The wheel is in the
	 *  middle of the call that tells the event: a change made from here
	 *  can leave it broken, and the checked build (TW_DEBUG) aborts
	 *  naming the changing call. Note the event here and make the
	 *  change after that call returns. */
	void (*on_event)(void *arg, const struct tw_wheel *wheel,
			 const struct tw_event *event);
	void *arg; /**< passed to on_event */
};

/**
 * Install or remove an observer.
 * @param wheel an initialised wheel
 * @param observer the observer (it must outlive its use), or NULL to remove
 * @par Thread safety
 *      The wheel's thread.
 */
void tw_wheel_set_observer(struct tw_wheel *wheel,
			   const struct tw_observer *observer);

/**
 * Check every invariant of the wheel against a plain walk of all its
 * buckets (wahern/timeout's timeouts_check): each pending timer is in the
 * bucket its due time and the level clocks select, each bucket's expiration
 * matches its contents, every bucket with an expiration is in the queue
 * under it (and, in exact mode, only non-empty ones), the queue is a valid
 * heap, the level clocks agree, and the counts add up. O(buckets + timers).
 * @param wheel an initialised wheel
 * @param[out] why a description of the first broken invariant (may be NULL)
 * @param why_len the size of why
 * @retval 0 every invariant holds
 * @retval TW_ECORRUPT one does not, or the wheel is NULL or not initialised
 *         (why says which)
 * @par Thread safety
 *      The wheel's thread, between operations (not from a callback).
 */
int tw_wheel_check(const struct tw_wheel *wheel, char *why, size_t why_len);

#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
