/*
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

/* Where tw_timer_where() finds a timer that is due and waits for advance. */
#define TW_LEVEL_READY 0u

struct tw_level_info {
	int64_t tick;         /* time covered by one bucket */
	int64_t current_time; /* the level's clock, a multiple of tick */
	int64_t interval;     /* tick * wheel_size: range is [current_time,
				 current_time + interval) */
	bool unbounded;       /* the top level: covers everything beyond */
};

struct tw_bucket_info {
	bool has_expiration;  /* Kafka's expiration != -1 */
	bool queued;          /* in the bucket queue */
	bool draining;        /* exact mode: popped a tick early, its timers
				 moving down a share at each advance */
	int64_t expiration;   /* bucket start = when it is popped */
	int64_t end;          /* expiration + level tick */
	size_t count;         /* timers in the bucket */
	const struct tw_timer *first; /* walk with tw_bucket_next() */
};

struct tw_queue_entry {
	unsigned level;
	unsigned slot;
	int64_t expiration;
	size_t count;
};

/* Level 1..tw_wheel_levels(). Returns 0 or TW_EINVAL. */
int tw_wheel_level_info(const struct tw_wheel *wheel, unsigned level,
			struct tw_level_info *out);

/* Bucket slot of a level. Returns 0 or TW_EINVAL. */
int tw_wheel_bucket_info(const struct tw_wheel *wheel, unsigned level,
			 unsigned slot, struct tw_bucket_info *out);

/* The timers due now, waiting for the next advance (level TW_LEVEL_READY). */
int tw_wheel_ready_info(const struct tw_wheel *wheel,
			struct tw_bucket_info *out);

/* The next timer in the same bucket, in firing order, or NULL. */
const struct tw_timer *tw_bucket_next(const struct tw_timer *timer);

/*
 * Copy the bucket queue, in the order it will be popped, into out[0..max).
 * Returns the queue's length (which may exceed max).
 */
size_t tw_wheel_queue_snapshot(const struct tw_wheel *wheel,
			       struct tw_queue_entry *out, size_t max);

/*
 * Where a pending timer is: its level (TW_LEVEL_READY if it is due and
 * waits for the next advance) and slot. Returns 0, or TW_EINVAL if the
 * timer is not pending in this wheel.
 */
int tw_timer_where(const struct tw_wheel *wheel, const struct tw_timer *timer,
		   unsigned *level, unsigned *slot);

/* ---- observer: called synchronously on every structural event ---- */

enum tw_event_kind {
	TW_EV_LEVEL_ADDED, /* level, time = its current_time */
	TW_EV_PLACED,      /* timer put in level/slot (add or cascade),
			      time = the bucket's expiration */
	TW_EV_READY,       /* timer due when added: waits for next advance */
	TW_EV_POPPED,      /* bucket level/slot left the queue, time = its
			      expiration */
	TW_EV_CLOCK,       /* level's clock moved to time */
	TW_EV_FIRED        /* timer's callback is about to run; time = now */
};

struct tw_event {
	enum tw_event_kind kind;
	unsigned level;
	unsigned slot;
	int64_t time;
	const struct tw_timer *timer;
};

struct tw_observer {
	void (*on_event)(void *arg, const struct tw_wheel *wheel,
			 const struct tw_event *event);
	void *arg;
};

/* Install (or with NULL remove) an observer. It must outlive its use. */
void tw_wheel_set_observer(struct tw_wheel *wheel,
			   const struct tw_observer *observer);

/*
 * Check every invariant of the wheel against a plain walk of all its
 * buckets (wahern/timeout's timeouts_check): each pending timer is in the
 * bucket its due time and the level clocks select, each bucket's expiration
 * matches its contents, every bucket with an expiration is in the queue
 * under it (and, in exact mode, only non-empty ones), the queue is a valid
 * heap, the level clocks agree, and the counts add up. O(buckets + timers).
 * Returns 0 or TW_ECORRUPT, with a description in why (if not NULL).
 * Call it between operations, not from a callback.
 */
int tw_wheel_check(const struct tw_wheel *wheel, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
