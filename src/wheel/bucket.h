/* SPDX-License-Identifier: MIT */
/*
 * What the wheel, the bucket queue and the inspector share: the bucket and
 * level layouts. Private to the library.
 */
#ifndef TW_WHEEL_BUCKET_H
#define TW_WHEEL_BUCKET_H

#include "timingwheel/wheel.h"

#define TW_NOT_QUEUED SIZE_MAX

/* Exact mode's most buckets a level (four occupancy words). */
#define TW_EXACT_SIZE_MAX 256

/*
 * One bucket (Kafka's TimerTaskList): the timers whose due times fall in
 * [expiration, expiration + level tick). expiration is in ticks, not time
 * units, so that no level's arithmetic can overflow (see wheel/wheel.c).
 */
struct tw_bucket {
	struct tw_link head;
	size_t count;
	int64_t min_key;          /* exact mode: no timer here has a smaller
				     key (a bound: a cancel leaves it);
				     INT64_MAX while the bucket is empty */
	int64_t expiration;       /* in ticks; meaningful if has_expiration */
	int64_t pop_at;           /* when it leaves the queue, in ticks:
				     expiration, or one level tick earlier
				     for an early cascade (see wheel/exact.c);
				     while draining: drained up to here */
	struct tw_wheel *wheel;
	uint32_t slot;            /* its index in its level */
	uint8_t level;            /* 1-based, or TW_LEVEL_READY for the lists */
	bool has_expiration;      /* queued (kafka: in the heap; exact: its
				     level's occupancy bit is set) */
	bool draining;            /* popped early, moving down in chunks */
	/* A window call's short path does not keep a timer here: a ready
	 * list, every bucket of a wheel in kafka mode or with a tick other
	 * than 1 (all set for good at init), or a bucket while it drains.
	 * One byte tested instead of four fields on every windowed reset;
	 * set_draining() keeps it in step with draining. */
	bool no_window_stay;
};

/* 64 bytes on LP64: a level's bucket for a number is a shift away from
 * the level's array, and one cache line where the array is aligned
 * (lifecycle.c). Kafka mode's queue bookkeeping is kept beside the heap,
 * not here (tw__queue_place). */
_Static_assert(sizeof(void *) != 8 || sizeof(struct tw_bucket) == 64,
	       "a bucket is 64 bytes on LP64");

/* Kafka mode: where a level's bucket is in the queue (bucket_queue.c).
 * Kept after the heap's array, in its block, one per level bucket, so
 * that the mode that has no queue does not carry 16 bytes of it in every
 * bucket. */
struct tw_queue_place {
	uint64_t seq;  /* when it entered the queue (the checker's bound; no
			  order: ties pop as Java's heap pops them) */
	size_t index;  /* its position in the heap, or TW_NOT_QUEUED */
};

/* The heap's array of nbuckets pointers, rounded up so that the places
 * after it are aligned. */
static inline size_t tw__queue_heap_bytes(size_t nbuckets)
{
	const size_t align = _Alignof(struct tw_queue_place);

	return (nbuckets * sizeof(struct tw_bucket *) + align - 1) / align * align;
}

/* Kafka mode only: level bucket b's place. */
static inline struct tw_queue_place *tw__queue_place(const struct tw_wheel *w,
						     const struct tw_bucket *b)
{
	char *places = (char *)w->queue +
		       tw__queue_heap_bytes((size_t)w->max_levels * w->size);

	return (struct tw_queue_place *)(void *)places + (b - w->buckets);
}

/* Kafka mode only: room for a copy of the heap after the places, which
 * tw_wheel_queue_snapshot() polls to list the queue in the order it pops
 * (no allocation when inspecting). */
static inline struct tw_bucket **tw__queue_scratch(const struct tw_wheel *w)
{
	size_t nbuckets = (size_t)w->max_levels * w->size;
	char *places = (char *)w->queue + tw__queue_heap_bytes(nbuckets);

	return (struct tw_bucket **)(void *)(places +
					      nbuckets * sizeof(struct tw_queue_place));
}

/* A timer service's taker of due runs (for_service.h). */
typedef size_t tw__wheel_take_fn(struct tw_wheel *w, struct tw_bucket *b,
				 int64_t due_by);

/*
 * One level (Kafka's TimingWheel). The clock is kept as a bucket number
 * ("virtual id" in Kafka): current_time = clock * span * wheel tick.
 */
struct tw_level {
	uint64_t span;            /* ticks per bucket: factor^(level-1) */
	int64_t clock;            /* floor(current time in ticks / span) */
	struct tw_bucket *slots;  /* size buckets */
	uint64_t lead;            /* ticks a bucket pops before its expiration */
	uint64_t too_far;         /* (size + 1) * span, saturated: a distance
				     from level 1's clock this large cannot
				     fit this level */
	struct tw_bucket *draining; /* this level's bucket moving down */
	bool unbounded;           /* span * size does not fit: top level */
	uint8_t shift;            /* exact mode: span == 1 << shift */
	bool windowed;            /* a windowed timer was ever filed here,
				     or (level 2) a drain of level 3 began,
				     which files a timer due at a level-2
				     pop as a window is filed (next_expiry
				     then looks one bucket further: see
				     wheel/window.c) */
	bool stoppable;           /* level 1's only: a callback may ask an
				     advance to stop after its fire
				     (for_service.h), so a level-1 bucket's
				     fires test for it */
	uint32_t fast_levels;     /* level 1's only: the levels in use
				     (nlevels) where the add's short path
				     applies -- exact mode, a tick of 1, 64
				     buckets, no observer -- else 0 (see
				     own.h's place_new) */
	/* Exact mode: bit s % 64 of word s / 64 set iff slots[s] is queued
	 * (non-empty and not draining); words past size / 64 stay 0, and
	 * kafka mode's are all 0. Word 0, all a level of up to 64 buckets
	 * uses, ends the first 64 bytes with every field above; the
	 * padding makes a level 128 bytes (on 64-bit targets), so that an
	 * index into the levels stays a shift. */
	uint64_t occupied[TW_EXACT_SIZE_MAX / 64];
	/* Level 1's only, while something drains: no drain has work before
	 * this tick (a bound; see wheel/exact.c's drain_share). */
	int64_t drain_wake;
	/* Level 1's only: the wheel's two ready lists (after the levels'
	 * buckets), asked for on every advance and next_expiry. */
	struct tw_bucket *ready;
	/* Level 1's only: bit i set iff levels[i] has a bucket draining
	 * (exact mode's early cascades make at most 63 levels), so that an
	 * advance's drain_share visits those levels alone. */
	uint64_t draining_levels;
	/* Level 1's only: a timer service's wheel's taker of the due runs
	 * of its level-1 buckets (for_service.h), else NULL. */
	tw__wheel_take_fn *take_run;
	/* Level 1's only: an advance leaves the drains' shares to
	 * tw__wheel_run_drains() (for_service.h), and it left them. */
	bool defer_drains, drains_owed;
	uint8_t padding_[6];
};

_Static_assert(sizeof(void *) != 8 || sizeof(struct tw_level) == 128,
	       "a level is 128 bytes on LP64");

/* Whether slot's occupancy bit is set (kafka mode's levels may hold more
 * buckets than there are bits: none past them). */
static inline bool tw__occupied(const struct tw_level *lv, uint32_t slot)
{
	return slot < TW_EXACT_SIZE_MAX &&
	       ((lv->occupied[slot / 64] >> (slot % 64)) & 1);
}

/* The level-1 bucket at level 1's clock: the one an advance stopped in
 * the middle of firing holds the rest of its timers (for_service.h;
 * level 1 files nothing else in that slot). */
static inline struct tw_bucket *tw__firing_bucket(const struct tw_wheel *w)
{
	return &w->levels[0].slots[(uint64_t)w->levels[0].clock & (w->size - 1)];
}

/* The most timers one advance should have to move down: about 0.1-0.2 ms
 * of work. A bigger bucket asks for wake-ups of its own (exact.c's
 * next_key_scan). */
#define DRAIN_CHUNK 2048

/* The tick a draining bucket d (not empty) next has work at, for
 * next_expiry: its smallest key, or for more than DRAIN_CHUNK timers
 * the tick by which its share reaches DRAIN_CHUNK, if that is sooner. */
static inline int64_t drain_wake(const struct tw_bucket *d)
{
	int64_t k = d->min_key;

	if (d->count > DRAIN_CHUNK) {
		/* d->pop_at: drained up to; shares are
		 * count * elapsed / (expiration - pop_at). In integers
		 * where the product fits (a level's span below 2^52 ticks:
		 * all but the top levels), as next_expiry asks it of every
		 * drain on every call. */
		uint64_t total = (uint64_t)d->expiration - (uint64_t)d->pop_at;
		uint64_t step = total < ((uint64_t)1 << 52)
					? total * DRAIN_CHUNK / d->count + 1
					: (uint64_t)((double)total * DRAIN_CHUNK /
						     (double)d->count) + 1;

		if ((uint64_t)k - (uint64_t)d->pop_at > step)
			k = (int64_t)((uint64_t)d->pop_at + step);
	}
	return k;
}

#endif
