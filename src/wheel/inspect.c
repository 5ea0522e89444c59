/* SPDX-License-Identifier: MIT */
/*
 * inspect.c — read-only views of the wheel and its invariant checker.
 *
 * The checker does not trust any cached value: it walks every bucket, recomputes
 * where each timer belongs from its due time and the level clocks (the same
 * arithmetic as src/wheel/), and compares.
 */
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <string.h>

#include "bucket_queue.h"
#include "../list.h"
#include "for_inspect.h"
#include "for_service.h"

static const struct tw_level *level_of(const struct tw_wheel *w, unsigned level)
{
	if (!w || !w->buckets || level < 1 || level > w->nlevels)
		return NULL;
	return &w->levels[level - 1];
}

int tw_wheel_level_info(const struct tw_wheel *w, unsigned level,
			struct tw_level_info *out)
{
	const struct tw_level *lv = level_of(w, level);

	if (!lv || !out)
		return TW_EINVAL;
	out->tick = tw__ticks_to_time(w, tw__mul_sat(1, lv->span));
	out->current_time = tw__level_clock_time(w, lv);
	out->unbounded = lv->unbounded;
	out->interval = lv->unbounded
				? INT64_MAX
				: tw__ticks_to_time(w, tw__mul_sat(w->size, lv->span));
	return TW_OK;
}

static void describe(const struct tw_wheel *w, const struct tw_bucket *b,
		     uint64_t span, struct tw_bucket_info *out)
{
	int64_t width;

	out->has_expiration = b->has_expiration || b->draining;
	out->queued = tw__bucket_queued(w, b);
	out->draining = b->draining;
	out->expiration = tw__ticks_to_time(w, b->expiration);
	/* width >= 1: only a positive expiration can overflow the sum
	 * (a negative one is a clock that started below zero). */
	width = tw__mul_sat(1, span);
	out->end = tw__ticks_to_time(
		w, b->expiration > 0 && width > INT64_MAX - b->expiration
			   ? INT64_MAX
			   : b->expiration + width);
	out->count = b->count;
	out->first = list_empty(&b->head) ? NULL : list_timer(b->head.next);
	out->pops_at = b->has_expiration ? tw__ticks_to_time(w, b->pop_at)
					 : out->expiration;
}

int tw_wheel_bucket_info(const struct tw_wheel *w, unsigned level,
			 unsigned slot, struct tw_bucket_info *out)
{
	const struct tw_level *lv = level_of(w, level);

	if (!lv || !out || slot >= w->size)
		return TW_EINVAL;
	describe(w, &lv->slots[slot], lv->span, out);
	return TW_OK;
}

int tw_wheel_ready_info(const struct tw_wheel *w, struct tw_bucket_info *out)
{
	if (!w || !w->buckets || !out)
		return TW_EINVAL;
	describe(w, tw__ready_list(w, w->ready_cur), 1, out);
	out->has_expiration = true;
	out->expiration = w->now;
	out->end = w->now;
	out->pops_at = w->now;
	return TW_OK;
}

const struct tw_timer *tw_bucket_next(const struct tw_timer *t)
{
	const struct tw_link *next;

	if (!t || !t->bucket)
		return NULL;
	next = t->link.next;
	return next == &t->bucket->head ? NULL
					: list_timer((struct tw_link *)next);
}

/* Whether bucket a pops before bucket b in exact mode, which keeps no
 * heap: by the order advance pops its occupancy bits (pop time; at equal
 * times the levels above level 1 first, lowest first, as advance_exact's
 * tie rules say). A strict order: no two queued buckets tie. (Kafka mode's
 * ties pop as its heap pops them, which no order of two buckets says:
 * the snapshot polls a copy of the heap.) */
static bool pops_before(const struct tw_bucket *a, const struct tw_bucket *b)
{
	unsigned al, bl;

	if (a->pop_at != b->pop_at)
		return a->pop_at < b->pop_at;
	al = a->level == 1 ? UINT_MAX : a->level;
	bl = b->level == 1 ? UINT_MAX : b->level;
	return al < bl;
}

static void entry_of(const struct tw_wheel *w, const struct tw_bucket *b,
		     struct tw_queue_entry *e)
{
	e->level = tw__bucket_level(w, b);
	e->slot = tw__bucket_slot(w, b);
	e->expiration = tw__ticks_to_time(w, b->expiration);
	e->count = b->count;
	e->pops_at = tw__ticks_to_time(w, b->pop_at);
}

static const struct tw_bucket *bucket_of(const struct tw_wheel *w,
					 const struct tw_queue_entry *e)
{
	return &w->levels[e->level - 1].slots[e->slot];
}

static void swap_entries(struct tw_queue_entry *a, struct tw_queue_entry *b)
{
	struct tw_queue_entry tmp = *a;

	*a = *b;
	*b = tmp;
}

/* out[0..n) as a heap whose root pops last, its root sifted down. */
static void snapshot_sift_down(const struct tw_wheel *w,
			       struct tw_queue_entry *out, size_t n)
{
	size_t i = 0;

	for (;;) {
		size_t last = i, child = 2 * i + 1;

		for (size_t c = child; c < child + 2 && c < n; c++)
			if (pops_before(bucket_of(w, &out[last]), bucket_of(w, &out[c])))
				last = c;
		if (last == i)
			return;
		swap_entries(&out[i], &out[last]);
		i = last;
	}
}

/* Queued bucket b offered to the snapshot's heap of the *kept (at most
 * max) buckets that pop first: it joins while there is room, else it
 * takes the root's place if it pops before it. */
static void snapshot_offer(const struct tw_wheel *w, const struct tw_bucket *b,
			   struct tw_queue_entry *out, size_t max, size_t *kept)
{
	if (*kept < max) {
		size_t c = (*kept)++;

		entry_of(w, b, &out[c]);
		while (c > 0 && pops_before(bucket_of(w, &out[(c - 1) / 2]),
					    bucket_of(w, &out[c]))) {
			swap_entries(&out[c], &out[(c - 1) / 2]);
			c = (c - 1) / 2;
		}
	} else if (pops_before(b, bucket_of(w, &out[0]))) {
		entry_of(w, b, &out[0]);
		snapshot_sift_down(w, out, *kept);
	}
}

/* The first max buckets of the queue in the order they pop. Kafka mode:
 * polls of a copy of its heap, in the room tw_wheel_init() set aside for
 * it (O(queue length + max x log queue length)). Exact mode: found and
 * sorted in the caller's out (a heap of the max that pop first, whose root
 * is the one of them that pops last; O(buckets x log max)). Inspecting a
 * wheel allocates nothing. */
size_t tw_wheel_queue_snapshot(const struct tw_wheel *w,
			       struct tw_queue_entry *out, size_t max)
{
	size_t n = 0, kept = 0;

	if (!w || !w->buckets)
		return 0;
	if (!out)
		max = 0;
	if (w->mode == TW_MODE_KAFKA) {
		struct tw_bucket **copy = tw__queue_scratch(w);
		size_t left = w->queue_len;

		n = left;
		if (max) {
			memcpy(copy, w->queue, left * sizeof(*copy));
			for (size_t i = 0; i < max && left; i++)
				entry_of(w, tw__bq_poll_copy(copy, &left), &out[i]);
		}
		return n;
	} else {
		size_t nbuckets = (size_t)w->max_levels * w->size;

		for (size_t i = 0; i < nbuckets; i++) {
			if (!w->buckets[i].has_expiration)
				continue;
			n++;
			if (max)
				snapshot_offer(w, &w->buckets[i], out, max, &kept);
		}
	}
	/* The heap sorted: its root, the last to pop, to the end each time. */
	for (size_t end = kept; end > 1; end--) {
		swap_entries(&out[0], &out[end - 1]);
		snapshot_sift_down(w, out, end - 1);
	}
	return n;
}

int tw_timer_where(const struct tw_wheel *w, const struct tw_timer *t,
		   unsigned *level, unsigned *slot)
{
	if (!w || !t || !t->bucket || t->bucket->wheel != w)
		return TW_EINVAL;
	if (level)
		*level = tw__bucket_level(w, t->bucket);
	if (slot)
		*slot = tw__bucket_slot(w, t->bucket);
	return TW_OK;
}

void tw_wheel_set_observer(struct tw_wheel *w, const struct tw_observer *obs)
{
	if (w) {
		w->observer = obs;
		tw__wheel_fast_levels(w);
	}
}

/* ---- the checker ---- */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int broken(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return TW_ECORRUPT;
}

/* Report the first broken invariant (in why, if given) and stop. */
#define BROKEN(...) return broken(why, why_len, __VA_ARGS__)

/* The list walks both ways and every timer points back at its bucket. */
static int check_list(const struct tw_bucket *b, char *why, size_t why_len)
{
	size_t n = 0;

	if (!b->head.next || !b->head.prev)
		BROKEN("bucket list links broken");
	for (const struct tw_link *l = b->head.next; l != &b->head; l = l->next) {
		const struct tw_timer *t = list_timer((struct tw_link *)l);

		/* NULL first: a pending timer whose memory was zeroed (reused,
		 * or initialised again) is the commonest damage, and following
		 * its links crashed the checker meant to report it. */
		if (!l->next || !l->prev || l->next->prev != l || l->prev->next != l)
			BROKEN("bucket list links broken");
		if (t->bucket != b)
			BROKEN("timer due %lld points at another bucket",
			       (long long)t->due);
		if (++n > b->count)
			break;
	}
	if (n != b->count)
		BROKEN("bucket count %zu but %zu timers linked", b->count, n);
	return TW_OK;
}

/* I2: a live bucket number of level lv. */
static bool live_number(const struct tw_wheel *w, const struct tw_level *lv,
			int64_t number)
{
	uint64_t ahead = (uint64_t)number - (uint64_t)lv->clock;

	return number > lv->clock &&
	       (lv->unbounded ? ahead <= w->size : ahead < w->size);
}

/* I1: bucket number `number` has this expiration and lives in this slot. */
static bool number_of_slot(const struct tw_wheel *w, const struct tw_level *lv,
			   int64_t number, int64_t expiration, uint32_t slot)
{
	return (int64_t)((uint64_t)number * lv->span) == expiration &&
	       (uint32_t)(((number % (int64_t)w->size) + (int64_t)w->size) %
			  (int64_t)w->size) == slot;
}

/* A bucket's own fields against the wheel's: its place, its list, how it
 * is queued (kafka mode's queue, exact mode's occupancy bit), its pop
 * against the upper levels' next pop. Holds for every bucket, of a level
 * that exists or not. */
static int check_bucket_place(const struct tw_wheel *w, uint32_t li,
			      uint32_t slot, char *why, size_t why_len)
{
	const struct tw_level *lv = &w->levels[li];
	const struct tw_bucket *b = &lv->slots[slot];
	bool queued = tw__bucket_queued(w, b);
	bool bit = tw__occupied(lv, slot);

	if (b->wheel != w || b->level != li + 1 || b->slot != slot)
		BROKEN("L%u#%u belongs to another wheel or place", li + 1, slot);
	if (check_list(b, why, why_len))
		return TW_ECORRUPT;
	if (b->has_expiration != queued)
		BROKEN("L%u#%u: has expiration %d but queued %d", li + 1, slot,
		       b->has_expiration, queued);
	if (w->mode == TW_MODE_KAFKA && queued &&
	    (tw__queue_place(w, b)->index >= w->queue_len ||
	     w->queue[tw__queue_place(w, b)->index] != b))
		BROKEN("L%u#%u: wrong queue index", li + 1, slot);
	if (w->mode == TW_MODE_KAFKA ? bit || tw__queue_place(w, b)->seq > w->queue_seq
				     : bit != queued)
		BROKEN("L%u#%u: occupancy bit %d but queued %d", li + 1, slot,
		       bit, queued);
	/* next_expiry looks past a level's next bucket at the one after it
	 * only: a later one cannot pop before it (exact.c's level_adjacent). */
	if (w->mode == TW_MODE_EXACT && li > 0 && queued && b->min_key < b->pop_at)
		BROKEN("L%u#%u: min_key %lld before its pop %lld", li + 1, slot,
		       (long long)b->min_key, (long long)b->pop_at);
	if (w->mode == TW_MODE_EXACT && li > 0 && queued &&
	    b->pop_at < w->upper_pop)
		BROKEN("L%u#%u pops at %lld, before upper_pop %lld", li + 1, slot,
		       (long long)b->pop_at, (long long)w->upper_pop);
	if (w->mode == TW_MODE_EXACT && b->draining &&
	    b->expiration < w->upper_pop)
		BROKEN("L%u#%u drains by %lld, before upper_pop %lld", li + 1,
		       slot, (long long)b->expiration, (long long)w->upper_pop);
	/* next_expiry's short path trusts it while something drains. */
	if (w->mode == TW_MODE_EXACT && b->draining && b->count &&
	    drain_wake(b) < w->levels[0].drain_wake)
		BROKEN("L%u#%u's drain has work at %lld, before level 1's "
		       "drain_wake %lld", li + 1, slot, (long long)drain_wake(b),
		       (long long)w->levels[0].drain_wake);
	return TW_OK;
}

/* A bucket of a level that exists: its expiration, draining state and
 * queue time agree with its timers and its level, and (exact mode) its
 * expiration is a live number of its own slot. */
static int check_bucket_expiration(const struct tw_wheel *w, uint32_t li,
				   uint32_t slot, char *why, size_t why_len)
{
	const struct tw_level *lv = &w->levels[li];
	const struct tw_bucket *b = &lv->slots[slot];
	bool queued = tw__bucket_queued(w, b);

	if (w->mode == TW_MODE_EXACT && queued && b->count == 0)
		BROKEN("L%u#%u: empty bucket queued in exact mode", li + 1, slot);
	if (b->count && !b->has_expiration && !b->draining)
		BROKEN("L%u#%u: timers but no expiration", li + 1, slot);
	/* The add's short path tells an empty bucket by it. */
	if (!b->count && b->min_key != INT64_MAX)
		BROKEN("L%u#%u: empty, min_key %lld, not INT64_MAX", li + 1, slot,
		       (long long)b->min_key);
	if (b->draining != (lv->draining == b) || (b->draining && queued))
		BROKEN("L%u#%u: draining state inconsistent", li + 1, slot);
	if (b->no_window_stay != (b->draining || w->mode != TW_MODE_EXACT ||
				  w->tick != 1))
		BROKEN("L%u#%u: no_window_stay %d disagrees with its drain, mode "
		       "and tick", li + 1, slot, b->no_window_stay);
	if (queued && b->pop_at != (lv->lead ? tw__mul_sat(tw__span_div(b->expiration,
									 lv->span) - 1,
							    lv->lead)
					      : b->expiration))
		BROKEN("L%u#%u: queued under the wrong time", li + 1, slot);
	/* Exact mode lets a timer moved later stay in its bucket (I1), so
	 * there the bucket's own number must be a live one of its slot; in
	 * kafka mode every timer's number must be. */
	if (w->mode == TW_MODE_EXACT && b->count) {
		int64_t number = tw__span_div(b->expiration, lv->span);

		if (!live_number(w, lv, number))
			BROKEN("L%u#%u: bucket outside L%u's range", li + 1, slot,
			       li + 1);
		if (!number_of_slot(w, lv, number, b->expiration, slot))
			BROKEN("L%u#%u: expiration is not its slot's", li + 1, slot);
	}
	return TW_OK;
}

/* Each timer of a bucket is where it may be: a windowed one (exact
 * mode, above level 1) before the exact ones and no later than the
 * bucket's pop; an exact one not overdue, at or after the bucket's
 * smallest key and its tick (exact mode), or in the live bucket its key
 * names (kafka mode). */
static int check_bucket_timers(const struct tw_wheel *w, uint32_t li,
			       uint32_t slot, char *why, size_t why_len)
{
	const struct tw_level *lv = &w->levels[li];
	const struct tw_bucket *b = &lv->slots[slot];
	bool exact_seen = false;

	for (const struct tw_link *l = b->head.next; l != &b->head; l = l->next) {
		const struct tw_timer *t = list_timer((struct tw_link *)l);
		int64_t key = tw__timer_key(w, t->due);
		int64_t number;

		/* A windowed timer (tw_wheel_add_range), above level 1 only:
		 * its key is before its bucket's, at or before the bucket's
		 * pop, when it fires; the windowed ones come first, and a
		 * drain has none left. */
		if (w->mode == TW_MODE_EXACT && li > 0 && key < b->expiration) {
			int64_t pop = lv->lead ? tw__mul_sat(tw__span_div(b->expiration,
									  lv->span) - 1,
							    lv->lead)
					       : b->expiration;

			if (b->draining || exact_seen)
				BROKEN("windowed timer due %lld %s in L%u#%u",
				       (long long)t->due,
				       b->draining ? "left in a drain" : "after an exact one",
				       li + 1, slot);
			if (key > pop)
				BROKEN("windowed timer due %lld after L%u#%u's pop",
				       (long long)t->due, li + 1, slot);
			if (b->min_key > pop)
				BROKEN("L%u#%u: min_key after its windowed timers' pop",
				       li + 1, slot);
			continue;
		}
		exact_seen = true;
		if (key <= w->levels[0].clock)
			BROKEN("timer due %lld overdue in L%u#%u", (long long)t->due,
			       li + 1, slot);
		if (w->mode == TW_MODE_EXACT) {
			/* next_expiry wakes at min_key: above it, never early. */
			if (key < b->min_key)
				BROKEN("timer due %lld below L%u#%u's smallest key",
				       (long long)t->due, li + 1, slot);
			/* The bucket re-files a timer moved later when it
			 * expires; one after the timer's tick fires it late. */
			if (key < b->expiration)
				BROKEN("timer due %lld in the wrong bucket L%u#%u "
				       "(after its tick)", (long long)t->due, li + 1,
				       slot);
			continue;
		}
		number = tw__span_div(key, lv->span);
		if (!live_number(w, lv, number))
			BROKEN("timer due %lld outside L%u's range", (long long)t->due,
			       li + 1);
		if (!number_of_slot(w, lv, number, b->expiration, slot))
			BROKEN("timer due %lld in the wrong bucket L%u#%u",
			       (long long)t->due, li + 1, slot);
	}
	return TW_OK;
}

/* One bucket, every rule: its place, then (its level existing) its
 * expiration and its timers. The first rule broken is reported. */
static int check_bucket(const struct tw_wheel *w, uint32_t li, uint32_t slot,
			char *why, size_t why_len)
{
	const struct tw_bucket *b = &w->levels[li].slots[slot];

	if (check_bucket_place(w, li, slot, why, why_len))
		return TW_ECORRUPT;
	/* The level-1 bucket an advance stopped in the middle of firing:
	 * out of the queue (the place rules said so), its timers the rest
	 * of those it held when it popped, due or (moved later where they
	 * were) not, every one fired or filed when the advance goes on. */
	if (li == 0 && tw__wheel_stopped(w) && b == tw__firing_bucket(w)) {
		if (b->draining)
			BROKEN("L1#%u: firing and draining", slot);
		return TW_OK;
	}
	if (li >= w->nlevels) {
		if (b->count || tw__bucket_queued(w, b))
			BROKEN("L%u#%u used before its level exists", li + 1, slot);
		return TW_OK;
	}
	if (check_bucket_expiration(w, li, slot, why, why_len))
		return TW_ECORRUPT;
	return check_bucket_timers(w, li, slot, why, why_len);
}

static int check_ready(const struct tw_wheel *w, char *why, size_t why_len)
{
	const struct tw_bucket *waiting = tw__ready_list(w, w->ready_cur);
	const struct tw_bucket *other = tw__ready_list(w, w->ready_cur ^ 1u);

	if (check_list(waiting, why, why_len) || check_list(other, why, why_len))
		return TW_ECORRUPT;
	if (other->count)
		BROKEN("timers left in the ready list being run");
	if (waiting->has_expiration)
		BROKEN("ready list is queued");
	if (!waiting->no_window_stay || !other->no_window_stay)
		BROKEN("a window call's short path would keep a ready timer");
	for (const struct tw_link *l = waiting->head.next; l != &waiting->head;
	     l = l->next) {
		const struct tw_timer *t = list_timer((struct tw_link *)l);
		/* Kafka mode: its tick reached by level 1's clock, or by the
		 * caller's (a callback's add during an advance). */
		bool due = w->mode == TW_MODE_KAFKA
				   ? tw__timer_key(w, t->due) <= w->levels[0].clock ||
					     tw__timer_key(w, t->due) <=
						     tw__due_limit(w, w->now)
				   : t->due <= w->now;

		if (!due)
			BROKEN("timer due %lld is ready too soon", (long long)t->due);
	}
	return TW_OK;
}

static int check_queue(const struct tw_wheel *w, char *why, size_t why_len)
{
	if (w->mode == TW_MODE_EXACT && (w->queue || w->queue_len))
		BROKEN("exact mode with a bucket heap");
	for (size_t i = 0; i < w->queue_len; i++) {
		const struct tw_bucket *b = w->queue[i];

		if (tw__queue_place(w, b)->index != i || !b->has_expiration)
			BROKEN("queue entry %zu inconsistent", i);
		if (i > 0 && bq_before(b, w->queue[(i - 1) / 2]))
			BROKEN("queue is not a heap at %zu", i);
	}
	return TW_OK;
}

static int check_clocks(const struct tw_wheel *w, char *why, size_t why_len)
{
	uint32_t draining = 0;
	uint64_t mask = 0;

	for (uint32_t i = 0; i < w->max_levels; i++) {
		draining += w->levels[i].draining != NULL;
		if (w->levels[i].draining)
			mask |= (uint64_t)1 << (i % 64);
	}
	if (draining != w->ndraining)
		BROKEN("%u levels draining, counted %u", draining, w->ndraining);
	if (mask != w->levels[0].draining_levels)
		BROKEN("levels draining %#llx, marked %#llx", (unsigned long long)mask,
		       (unsigned long long)w->levels[0].draining_levels);
	for (uint32_t i = 1; i < w->nlevels; i++)
		if (w->levels[i].clock !=
		    tw__floor_div(w->levels[i - 1].clock, (int64_t)w->factor))
			BROKEN("L%u clock disagrees with L%u", i + 1, i);
	/* Behind only while an advance is stopped part way. */
	if (w->mode == TW_MODE_EXACT &&
	    (tw__wheel_stopped(w) ? w->levels[0].clock > tw__due_limit(w, w->now)
				  : w->levels[0].clock != tw__due_limit(w, w->now)))
		BROKEN("L1 clock %lld behind now %lld",
		       (long long)w->levels[0].clock, (long long)w->now);
	if (w->stopping & ~TW_STOPPED)
		BROKEN("a stop asked outside an advance (stopping %u)",
		       (unsigned)w->stopping);
	return TW_OK;
}

int tw_wheel_check(const struct tw_wheel *w, char *why, size_t why_len)
{
	size_t total;

	if (!w || !w->buckets)
		BROKEN("wheel not initialised");
	/* Fields only tw_wheel_init() sets, out of their range: bytes that
	 * never were a wheel (or were written over), not a wheel mid-call.
	 * Read before advancing, whose non-zero value would otherwise be
	 * taken for a check made from a callback. */
	if (w->mode > TW_MODE_KAFKA || w->advancing > TW_IN_HAND_BACK ||
	    w->size < TW_WHEEL_SIZE_MIN || w->size > TW_WHEEL_SIZE_MAX)
		BROKEN("wheel not initialised or written over (mode %u, size %u, "
		       "advancing %u)",
		       (unsigned)w->mode, (unsigned)w->size, (unsigned)w->advancing);
	if (w->nlevels < 1 || w->nlevels > w->max_levels)
		BROKEN("%u levels of at most %u", w->nlevels, w->max_levels);
	if (w->advancing)
		BROKEN("checked from inside a callback");
	if (check_clocks(w, why, why_len) || check_queue(w, why, why_len) ||
	    check_ready(w, why, why_len))
		return TW_ECORRUPT;
	total = tw__ready_list(w, w->ready_cur)->count +
		tw__hand_back_list(w)->count;
	for (uint32_t li = 0; li < w->max_levels; li++) {
		for (uint32_t slot = 0; slot < w->size; slot++) {
			if (check_bucket(w, li, slot, why, why_len))
				return TW_ECORRUPT;
			total += w->levels[li].slots[slot].count;
		}
	}
	/* Levels not in use hold nothing: tw_wheel_count() does not look
	 * there. */
	if (total != tw__pending_sum(w))
		BROKEN("%zu timers in buckets but %zu in the levels in use and "
		       "the lists", total, tw__pending_sum(w));
#ifdef TW_DEBUG
	if (total != w->count)
		BROKEN("count %zu but %zu timers in buckets", w->count, total);
#endif
	if (why && why_len)
		why[0] = '\0';
	return TW_OK;
}
