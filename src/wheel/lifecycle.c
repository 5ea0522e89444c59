/* SPDX-License-Identifier: MIT */
/*
 * wheel/lifecycle.c — a wheel's and a timer's life outside the hot paths:
 * tw_timer_init, tw_wheel_init, tw_wheel_drain, tw_wheel_destroy.
 *
 * What it owns. The layout of a wheel in memory: tw_wheel_init() computes
 * the geometry (exact mode rounds wheel_size up to a power of two between
 * 4 and 256 and makes a level's tick half the interval of the level below,
 * for early cascades; kafka mode keeps Kafka's wheel_size and factor) and
 * allocates, once, every level's buckets, the two ready lists, the list
 * drain hands back from, and kafka mode's queue. Nothing is allocated
 * after it: adding a timer never fails for memory. A level is still
 * "created" lazily in Kafka's sense (its clock is fixed when first needed).
 *
 * Guarantees. tw_wheel_drain() hands back every pending timer exactly
 * once, even when the hand-back function adds, cancels or reschedules
 * timers; a timer whose memory was overwritten while pending stops the
 * drain with TW_ECORRUPT instead of looping or crashing. Costs: init and
 * destroy O(levels * size); drain O(buckets + timers).
 */
#include "own.h"

static void bucket_init(struct tw_wheel *w, struct tw_bucket *b)
{
	size_t index = (size_t)(b - w->buckets);
	bool in_level = index < (size_t)w->max_levels * w->size;

	list_init(&b->head);
	b->level = in_level ? (uint8_t)(index / w->size + 1) : TW_LEVEL_READY;
	b->slot = in_level ? (uint32_t)(index % w->size) : 0;
	b->min_key = INT64_MAX; /* empty: see bucket_first_key */
	b->expiration = 0;
	b->pop_at = 0;
	b->count = 0;
	b->wheel = w;
	b->has_expiration = false;
	b->draining = false;
	b->no_window_stay = !in_level || w->mode != TW_MODE_EXACT || w->tick != 1;
}

void tw_timer_init(struct tw_timer *timer, tw_timer_fn *fn)
{
#ifdef TW_DEBUG
	uint64_t wheel;
#endif

	if (!timer)
		return;
#ifdef TW_DEBUG
	/* The table says pending; the timer's own bucket link (the caller's
	 * memory, initialised since it was added) confirms it. */
	if (tw__debug_get(TW_DBG_WHEEL_TIMER, timer, &wheel) && timer->bucket)
		tw__debug_fail("tw_timer_init", timer,
			       "this timer is pending in wheel %p. Initialising "
			       "it now breaks that wheel's bucket list, and a later "
			       "tw_wheel_advance() crashes on it. Cancel it first "
			       "(tw_wheel_cancel()), or move it with "
			       "tw_wheel_reschedule(); its callback may also "
			       "re-initialise it (it is no longer pending there).",
			       (void *)(uintptr_t)wheel);
#endif
	memset(timer, 0, sizeof(*timer));
	timer->fn = fn;
}

static bool early_cascade(enum tw_mode mode, uint32_t size)
{
	return mode == TW_MODE_EXACT && size >= 4;
}

/* Exact mode's buckets per level: wheel_size rounded up to a power of two
 * (a slot is then a mask), at least 4 (so a level spans two ticks of the
 * one above: early cascades) and at most TW_EXACT_SIZE_MAX (the occupancy
 * words a level keeps). */
static uint32_t exact_size(uint32_t wheel_size)
{
	uint32_t size = 4;

	while (size < wheel_size && size < TW_EXACT_SIZE_MAX)
		size *= 2;
	return size;
}

int tw_wheel_init(struct tw_wheel *w, int64_t tick, uint32_t wheel_size,
		  int64_t start, enum tw_mode mode)
{
	uint32_t max_levels = 0, factor, size;
	size_t nbuckets, bucket_bytes;
	uint64_t span = 1;
	unsigned shift = 0, factor_bits = 0;

	if (!w)
		return TW_EINVAL_BECAUSE("tw_wheel_init", "the wheel is NULL");
	if (tick < 1)
		return TW_EINVAL_BECAUSE("tw_wheel_init",
					 "tick must be at least 1, not %lld",
					 (long long)tick);
	if (wheel_size < TW_WHEEL_SIZE_MIN || wheel_size > TW_WHEEL_SIZE_MAX)
		return TW_EINVAL_BECAUSE("tw_wheel_init",
					 "wheel_size must be in [%d, %d], not %u",
					 TW_WHEEL_SIZE_MIN, TW_WHEEL_SIZE_MAX,
					 wheel_size);
	if (mode != TW_MODE_EXACT && mode != TW_MODE_KAFKA)
		return TW_EINVAL_BECAUSE("tw_wheel_init",
					 "mode must be TW_MODE_EXACT or "
					 "TW_MODE_KAFKA, not %d", (int)mode);

	/* Levels until one's interval (span * size ticks) no longer fits in
	 * 64 bits: that one covers every int64 due time (I2). */
	size = mode == TW_MODE_EXACT ? exact_size(wheel_size) : wheel_size;
	factor = early_cascade(mode, size) ? size / 2 : size;
	while (((uint32_t)1 << factor_bits) < factor)
		factor_bits++;
	for (;;) {
		max_levels++;
		if (span > UINT64_MAX / size)
			break;
		span *= factor;
	}

	memset(w, 0, sizeof(*w));
	nbuckets = (size_t)max_levels * size;
	w->levels = calloc(max_levels, sizeof(*w->levels));
	/* After the levels' buckets: the two ready lists and the list that
	 * tw_wheel_drain() hands back from. */
	/* Aligned to a cache line: a bucket is one (bucket.h). Its fields
	 * are all set by bucket_init below. */
	bucket_bytes = (nbuckets + 3) * sizeof(*w->buckets);
	w->buckets = aligned_alloc(64, (bucket_bytes + 63) / 64 * 64);
	/* Only kafka mode keeps Kafka's bucket queue (exact mode: bitmaps):
	 * the heap, then each level bucket's place in it, then the room
	 * tw_wheel_queue_snapshot() copies the heap into. */
	w->queue = mode == TW_MODE_KAFKA
			   ? calloc(1, tw__queue_heap_bytes(nbuckets) +
					       nbuckets * (sizeof(struct tw_queue_place) +
							   sizeof(struct tw_bucket *)))
			   : NULL;
	if (!w->levels || !w->buckets || (mode == TW_MODE_KAFKA && !w->queue)) {
		free(w->levels);
		free(w->buckets);
		free(w->queue);
		memset(w, 0, sizeof(*w));
		return TW_ENOMEM;
	}
	w->tick = tick;
	w->size = size;
	w->factor = factor;
	w->mode = (uint8_t)mode;
	w->now = start;
	w->max_levels = max_levels;
	w->upper_pop = INT64_MAX;
	for (size_t i = 0; i < nbuckets + 3; i++)
		bucket_init(w, &w->buckets[i]);
	for (size_t i = 0; mode == TW_MODE_KAFKA && i < nbuckets; i++)
		tw__queue_place(w, &w->buckets[i])->index = TW_NOT_QUEUED;

	span = 1;
	for (uint32_t i = 0; i < max_levels; i++) {
		struct tw_level *lv = &w->levels[i];

		lv->span = span;
		lv->shift = (uint8_t)shift;
		lv->slots = &w->buckets[(size_t)i * size];
		lv->unbounded = i == max_levels - 1;
		lv->lead = i > 0 && factor != size ? span : 0;
		lv->draining = NULL;
		lv->too_far = span > UINT64_MAX / (size + 1ULL)
				      ? UINT64_MAX
				      : span * (size + 1ULL);
		if (!lv->unbounded) {
			span *= factor;
			shift += factor_bits;
		}
	}
	w->levels[0].ready = &w->buckets[nbuckets];
	w->nlevels = 1;
	/* I6: a wheel started at the end of time has reached its last tick. */
	w->levels[0].clock = tw__due_limit(w, start);
	tw__wheel_fast_levels(w);
	return TW_OK;
}

/* Everything moves to the hand-back list first, and only then is handed
 * back: a timer that hand_back adds again goes into the emptied wheel and
 * stays there, instead of being found by a later bucket of the same walk
 * and handed back again, for ever. A timer still on the
 * list is pending (its bucket is the list), so hand_back may also cancel
 * or reschedule the ones not yet handed back; those are not handed back. */
/* Whether t, met first in bucket b, is linked there as the wheel links
 * it. A pending timer whose memory was overwritten (tw_timer_init() or a
 * memset on it, a re-add of it after that) leaves links no walk can
 * trust: the drain then stops instead of looping for ever, following a
 * NULL, or handing back part of the wheel as all of it. (Such a timer
 * added again into its own bucket is its list's last, still reached from
 * the timer before it, with the timers after it skipped: its prev, the
 * list's old last, does not lead back to that timer, where the drain
 * stops.) */
static bool linked_in(const struct tw_bucket *b, const struct tw_timer *t)
{
	return t->bucket == b && t->link.next && t->link.prev == &b->head &&
	       t->link.next->prev == &t->link;
}

/* *broken: the first timer whose links were broken (the drain stopped
 * there and returned TW_ECORRUPT), or NULL. */
static int64_t drain_checked(struct tw_wheel *w, tw_timer_fn *hand_back,
			     struct tw_timer **broken)
{
	struct tw_bucket *held;
	size_t nbuckets, taken = 0, expected;
	int64_t n = 0;

	*broken = NULL;
	if (!w || !w->buckets)
		return TW_EINVAL;
	if (w->advancing)
		return TW_EREENTER;
	nbuckets = (size_t)w->max_levels * w->size + 2; /* levels and ready */
	held = tw__hand_back_list(w);
	expected = tw__pending_sum(w);
	w->queue_len = 0;
	for (size_t i = 0; i < nbuckets && !*broken; i++) {
		struct tw_bucket *b = &w->buckets[i];

		b->has_expiration = false;
		if (b->draining)
			set_draining(w, b, false);
		if (w->mode == TW_MODE_KAFKA && b->level != TW_LEVEL_READY)
			tw__queue_place(w, b)->index = TW_NOT_QUEUED;
		while (!list_empty(&b->head)) {
			struct tw_timer *t = list_timer(b->head.next);

			/* More timers than the wheel holds: a cycle. */
			if (taken == expected || !linked_in(b, t)) {
				*broken = t;
				break;
			}
			bucket_take(b, t);
			bucket_append(held, t);
			taken++;
		}
	}
	for (uint32_t i = 0; i < w->max_levels; i++) {
		w->levels[i].draining = NULL;
		memset(w->levels[i].occupied, 0, sizeof(w->levels[i].occupied));
	}
	w->ndraining = 0;
	w->levels[0].draining_levels = 0;
	w->upper_pop = INT64_MAX;
	/* An advance stopped part way: its firing bucket was walked with
	 * the others (one emptied by its last fire kept its tick as
	 * min_key, which the advance going on would have reset), and the
	 * clocks, behind now, go there (nothing is left to file against
	 * them). */
	if (w->stopping & TW_STOPPED) {
		tw__firing_bucket(w)->min_key = INT64_MAX;
		tw__advance_clocks(w, tw__due_limit(w, w->now));
	}
	w->stopping = 0;
	/* The held list is the drain's own: sound even when a bucket was
	 * not (what was taken before the break is handed back). hand_back
	 * is a callback: an advance, a drain or a destroy from it is
	 * refused, as from a timer's (a destroy would free the list walked
	 * here). */
	w->advancing = TW_IN_HAND_BACK;
	while (taken-- && !list_empty(&held->head)) {
		struct tw_timer *t = list_timer(held->head.next);

		bucket_take(held, t);
		debug_pending(w, t, false);
		n++;
		if (hand_back)
			hand_back(w, t);
	}
	w->advancing = 0;
	if (*broken) {
		/* What is left cannot be walked: counted as nothing, so that
		 * the destroy's drain stops at the first timer it meets
		 * without reading it, and tw_wheel_count() says 0. */
		for (size_t i = 0; i < nbuckets + 1; i++)
			w->buckets[i].count = 0;
#ifdef TW_DEBUG
		w->count = 0;
#endif
		return TW_ECORRUPT;
	}
	return n;
}

int64_t tw__wheel_drain_checked(struct tw_wheel *w, tw_timer_fn *hand_back,
				struct tw_timer **broken)
{
	return drain_checked(w, hand_back, broken);
}

static int64_t wheel_drain(struct tw_wheel *w, tw_timer_fn *hand_back)
{
	struct tw_timer *broken;

	return drain_checked(w, hand_back, &broken);
}

static int wheel_destroy(struct tw_wheel *w)
{
	int64_t rc;

	if (!w)
		return TW_EINVAL;
	if (!w->buckets)
		return TW_OK;
	rc = wheel_drain(w, NULL);
	if (rc < 0 && rc != TW_ECORRUPT)
		return (int)rc;
	/* Broken lists are not walked again: the memory is freed all the
	 * same, and the caller told. */
	free(w->levels);
	free(w->buckets);
	free(w->queue);
	memset(w, 0, sizeof(*w));
	return rc < 0 ? (int)rc : TW_OK;
}

int64_t tw_wheel_drain(struct tw_wheel *w, tw_timer_fn *hand_back)
{
	int64_t rc;

	WHEEL_ENTER(w, "tw_wheel_drain");
	rc = wheel_drain(w, hand_back);
	WHEEL_LEAVE(w);
	return rc;
}

int tw_wheel_destroy(struct tw_wheel *w)
{
	int rc;

	WHEEL_ENTER(w, "tw_wheel_destroy");
	rc = wheel_destroy(w);
	WHEEL_LEAVE(w);
	return rc;
}
