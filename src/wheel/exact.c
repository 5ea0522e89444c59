/* SPDX-License-Identifier: MIT */
/*
 * wheel/exact.c — exact mode (TW_MODE_EXACT, the default): its queue of
 * buckets, early cascades, the next expiry that wakes only to fire, and
 * the unordered jump.
 *
 * What it owns. Filing a timer that the inlined fast path (insert_exact
 * in own.h) leaves out of line -- a bucket that turns non-empty, a
 * level still to be created, a size other than the inlined one (64, 128
 * and 256 get the same path here) -- and everything an
 * advance does in exact mode: which bucket pops next, draining a big one
 * in shares, the jump that fires whole buckets where they are, and
 * tw_wheel_next_expiry()'s answer when it is not level 1's next bucket.
 *
 * Exact mode replaces the heap with one 64-bit occupancy word per level
 * (bit s set iff slot s holds a queued bucket; four words at 256 buckets
 * a level, the most it takes) and makes every level's
 * size a power of two, so that filing a timer is a shift and a mask and
 * finding a level's next bucket is a shift and a count of trailing zeros
 * from the slot after its clock (wahern/timeout's idea). Advance looks at
 * level 1's next bucket on every step but at the levels above only when
 * upper_pop, a lower bound on their next pop, says one of them may come
 * first: once per bucket that pops, not once per timer.
 *
 * Cascades without bursts (exact mode). Flushing a higher bucket moves
 * every timer in it at once: 200k timers in a 400 ms bucket is a stall of
 * tens of milliseconds during which nothing fires (Kafka's structure: 11 ms
 * worst advance with 1e6 timers due over 2 s, measured by wheel_bench). So
 * in exact mode a level's tick is half the interval of the level below
 * instead of all of it (64 buckets per level, factor 32); the level below
 * then spans two of the upper ticks, a bucket [E, E + T) fits there from
 * E - T on, and it leaves the queue at E - T and drains down in shares
 * while the clock moves to E, before any of its timers is due (a bucket
 * of at most SMALL_BUCKET timers moves at once: no stall to avoid). The share
 * is proportional to the ticks each advance covers, so an event loop that
 * wakes every tick moves 1/left of the rest each time and one that wakes
 * rarely moves more per wake (the stall test: 0.3 ms worst advance, where
 * Kafka's structure takes 11 ms). Same fire times.
 *
 * Waking only to fire. Cascades happen on the way of advances that fire
 * something; next_expiry does not name a time only to cascade a small
 * bucket. Each bucket keeps min_key, the smallest tick it has held since
 * it last emptied (a lower bound: a cancel leaves it), and next_expiry is
 * the smallest of level 1's next bucket and the min_key of each level's
 * next bucket and of each drain. An event loop that sleeps until
 * next_expiry and advances there wakes for nothing only when the timer
 * that set a bucket's min_key was cancelled, or to move a big bucket:
 * one wake per DRAIN_CHUNK (2048) timers of a bucket bigger than that,
 * so that no advance is left with all of it (in the benchmark's stepped
 * loops 81 % of advances fired nothing before this rule, 0 % after).
 *
 * Guarantees. A timer never fires before its due time and less than a
 * tick after it (it is filed under ceil(due / tick)); the clocks move to
 * the caller's now. Costs: filing is a compare per level walked, a shift,
 * a mask, a list link and a bit set; an advance is O(buckets popped *
 * levels / 64 + timers moved or fired), each timer moving down at most
 * once per level, spread over the tick before it is needed; next_expiry
 * is O(levels) bit scans, one in the common case.
 */
#include "own.h"

/* ---- filing, out of the inlined path ---- */

/* Any level, any size: the first level whose range holds the key,
 * creating levels as needed. The wide sizes first try the inlined path
 * with their own bits (a division by a constant, not by a size read at
 * run time). */
void tw__insert_exact_slow(struct tw_wheel *w, struct tw_timer *t, int64_t key)
{
	uint64_t distance = (uint64_t)key - (uint64_t)w->levels[0].clock;

	if (w->size != 1u << TW_EXACT_INLINE_BITS &&
	    ((w->size == 64 && file_exact(w->levels, w->nlevels, w, t, key, 6)) ||
	     (w->size == 128 && file_exact(w->levels, w->nlevels, w, t, key, 7)) ||
	     (w->size == 256 && file_exact(w->levels, w->nlevels, w, t, key, 8)))) {
		if (w->observer)
			notify_placed(w, t);
		return;
	}
	for (uint32_t i = 0;; i++) {
		struct tw_level *lv;
		struct tw_bucket *b;
		int64_t number;

		lv = i < w->nlevels ? &w->levels[i] : tw__add_level(w);
		if (!lv->unbounded && distance >= lv->too_far)
			continue;
		number = shift_floor(key, lv->shift);
		if (!lv->unbounded &&
		    (uint64_t)number - (uint64_t)lv->clock >= w->size)
			continue;
		b = &lv->slots[(uint64_t)number & (w->size - 1)];
		if (b->count == 0)
			bucket_fill(w, lv, b, number, key);
		else if (key < b->min_key)
			b->min_key = key;
		bucket_append(b, t);
		if (w->observer)
			notify_placed(w, t);
		return;
	}
}

/* ---- moving a popped bucket down ----
 *
 * Where an expiry's instructions go: every timer that fires passes here
 * once for each level it comes down and once more to fire (an idle
 * timeout 30 s out: twice, then once). So this is tw__move_down for exact
 * mode with what one call's timers share read once -- the clock, which no
 * callback can move, and the tick -- and a filing that tells an empty
 * bucket by its count or its list, not by the add's test key <= min_key
 * (a timer moved into level 1 has its bucket's key, which that test takes
 * for a bucket to fill: a call per timer). A fired timer keeps its stale
 * links: only t->bucket says whether a timer is pending.
 *
 * A drain of level 3 also puts a timer due at a level-2 pop (a multiple
 * of level 2's span: a window's aligned tick usually is) first in the
 * bucket that pops then, where it fires at its own tick without coming
 * down to level 1, as a windowed timer does. Only level 3's: a level
 * holding such a timer makes next_expiry look one bucket further on every
 * call (lv->windowed), which costs a stepped expiry of exact timers, where
 * they are rare, more than the moves it saves. Only a drain's: a bucket
 * moved at once files each timer by its key alone. */

/* file_exact() at 64 buckets a level for a timer the caller has counted
 * already. false: nothing done (a level to create, or a key one bucket
 * past the level found). */
hot_inline bool refile64(struct tw_level *levels, uint32_t nlevels, struct tw_wheel *w,
			 struct tw_timer *t, int64_t key)
{
	uint64_t distance = (uint64_t)key - (uint64_t)levels[0].clock;
	unsigned i = level64(distance | 1);
	struct tw_level *lv;
	struct tw_bucket *b;
	int64_t number;
	size_t count;

	if (__builtin_expect(i >= nlevels, 0))
		return false;
	lv = &levels[i];
	number = shift_floor(key, lv->shift);
	if (__builtin_expect((uint64_t)number - (uint64_t)lv->clock >= 64, 0))
		return false;
	b = &lv->slots[(uint64_t)number & 63];
	count = b->count;
	list_append(&b->head, &t->link);
	b->count = count + 1;
	t->bucket = b;
	if (__builtin_expect(count == 0, 0))
		bucket_fill(w, lv, b, number, key);
	else if (key < b->min_key)
		b->min_key = key;
	return true;
}

/* t (counted already) filed by its key from a mover: the level its
 * distance says (refile64), else the general filing. */
hot_inline void refile_by_key(struct tw_wheel *w, struct tw_timer *t, int64_t key)
{
	if (!refile64(w->levels, w->levels->fast_levels, w, t, key))
		insert_exact(w, t, key);
}

/* The timer's key is a pop of level lv (above level 1, below the level
 * draining): first in the bucket that pops then, if that bucket is one of
 * the level's live ones and is not draining itself. */
static inline bool file_at_pop(struct tw_wheel *w, struct tw_level *lv,
			       struct tw_timer *t, int64_t key)
{
	int64_t number;
	struct tw_bucket *b;

	if ((uint64_t)key & (lv->span - 1))
		return false;
	/* key > level 1's clock >= clock * span, so number > clock + 1;
	 * the bucket must start at an int64 tick. */
	number = shift_floor(key, lv->shift) + 1;
	if ((uint64_t)number - (uint64_t)lv->clock >= w->size ||
	    number > (INT64_MAX >> lv->shift))
		return false;
	b = &lv->slots[(uint64_t)number & (w->size - 1)];
	if (b->draining)
		return false;
	bucket_put_first(w, lv, b, t, number);
	return true;
}

/* Timer t into level 1's bucket for key (within the level's size of the
 * clock), where every timer has the bucket's own key: its min_key from
 * the fill on. The bucket's emptiness is told by its list, which the
 * append reads anyway. fill_inline: the bucket is empty nearly always
 * (a sparse expiry's lone timer), so the fill's code is here and not
 * marked unlikely, rather than a call out of line. */
hot_inline void file_level1(struct tw_wheel *w, struct tw_level *levels,
			    struct tw_bucket *nb, struct tw_timer *t, int64_t key,
			    bool fill_inline)
{
	if (fill_inline) {
		if (append_moved(nb, t) == &nb->head)
			fill_bucket(w, levels, nb, key, key);
	} else if (__builtin_expect(append_moved(nb, t) == &nb->head, 0)) {
		bucket_fill(w, levels, nb, key, key);
	}
	if (__builtin_expect(w->observer != NULL, 0))
		notify_placed(w, t);
}

/* A popped bucket whose one timer is taken out: empty (its list, count
 * and min_key as an empty bucket's). */
hot_inline void bucket_empty_of_lone(struct tw_bucket *b)
{
	list_init(&b->head);
	b->count = 0;
	b->min_key = INT64_MAX;
}

/* A drain's filing of timer t first in nb, the bucket of level lv that
 * pops at t's key (number: nb's), where it fires without coming down
 * further; the bucket was empty if its list was. Only a drain of level 3
 * files so, into level 2, whose windowed flag the drain's start set (a
 * store once a drain, not once a timer). */
hot_inline void put_first_moved(struct tw_wheel *w, struct tw_level *lv,
				struct tw_bucket *nb, struct tw_timer *t,
				int64_t number, int64_t key)
{
	struct tw_link *first = nb->head.next;

	t->link.next = first;
	t->link.prev = &nb->head;
	first->prev = &t->link;
	nb->head.next = &t->link;
	nb->count++;
	t->bucket = nb;
	if (__builtin_expect(first == &nb->head, 0))
		bucket_fill(w, lv, nb, number, key);
	else if (key < nb->min_key)
		nb->min_key = key;
}

/* move_exact()'s clock below which its fast paths do not apply: clock
 * where nothing is to be told (no observer) and levels are of 64 buckets
 * (what its fast paths' bucket numbers assume), else INT64_MAX. With a
 * tick of 1 that is fast_levels; the paths use the key computed from the
 * tick, so any tick has them (a service's 1 ms tick on nanoseconds). Read
 * again after each timer that took the long way: its callback may have
 * set an observer. */
hot_inline int64_t quiet_clock_of(const struct tw_wheel *w, int64_t clock,
				  bool tick1)
{
	if (tick1)
		return w->levels->fast_levels ? clock : INT64_MAX;
	return w->size == 64 && !w->observer ? clock : INT64_MAX;
}

/* Up to n timers of b, from its front: each fires (its tick has come) or
 * is filed again by its key. below: for a drain of level 3 or up, the
 * level under it, where most of its timers go (at_pops: whose pops take
 * the timers due at them); NULL for none. A run of timers filed into
 * level 1 or below's level, with no observer to tell, leaves b at once
 * (bucket_cut), not one by one; anything else -- a timer that fires, a
 * filing that may tell an observer or create a level -- first leaves b
 * as the wheel must be seen: so a callback may cancel the timers still
 * waiting here. Returns how many fired. tick1: the wheel's tick is 1 (a
 * constant where inlined). */
hot_inline int64_t move_exact(struct tw_wheel *w, struct tw_bucket *b, size_t n,
			      struct tw_level *below, bool at_pops, bool tick1,
			      unsigned below_shift)
{
	struct tw_level *levels = w->levels;
	struct tw_bucket *slots0 = levels[0].slots;
	const int64_t clock = levels[0].clock;
	const uint64_t mask0 = w->size - 1;
	/* below's shift, a constant where the caller knows it. At 64
	 * buckets file_exact() takes a distance from the clock to below's
	 * level from twice its span (lo) on, while the bucket number is
	 * one of the level's (which bounds it from above). */
	const unsigned shift = below_shift ? below_shift : below ? below->shift : 0;
	const uint64_t lo = (uint64_t)2 << shift, pop_mask = ((uint64_t)1 << shift) - 1;
	const int64_t bclock = below ? below->clock : 0;
	struct tw_bucket *bslots = below ? below->slots : NULL;
	struct tw_link *l = b->head.next;
	size_t taken = 0;
	int64_t fired = 0;
	/* The clock where nothing is to be told (an observer) and the
	 * fast paths apply, else INT64_MAX: one compare for both. */
	int64_t quiet_clock = quiet_clock_of(w, clock, tick1);

	for (; n && l != &b->head; n--) {
		struct tw_timer *t = list_timer(l);
		struct tw_bucket *nb;
		uint64_t distance;
		int64_t key, number;

		/* The list is a chain of cache misses: start on the next one
		 * while this one moves. */
		l = l->next;
		prefetch(l);
		taken++;
		key = tick1 ? t->due : tw__ceil_div(t->due, w->tick);
		distance = (uint64_t)key - (uint64_t)clock;
		if (key > quiet_clock) {
			if (distance <= mask0) {
				nb = &slots0[(uint64_t)key & mask0];
				/* Every timer of a level 1 bucket has its
				 * key, which is its min_key from the fill
				 * on; the bucket was empty if its list was. */
				if (__builtin_expect(append_moved(nb, t) == &nb->head, 0))
					bucket_fill(w, levels, nb, key, key);
				continue;
			}
			/* file_at_pop() at 64 buckets, on values read once. */
			if (at_pops && !((uint64_t)key & pop_mask) &&
			    (uint64_t)(number = shift_floor(key, shift) + 1) -
					    (uint64_t)bclock < 64 &&
			    number <= (INT64_MAX >> shift) &&
			    !(nb = &bslots[(uint64_t)number & 63])->draining) {
				put_first_moved(w, below, nb, t, number, key);
				continue;
			}
			/* refile64() on below's level, its tests on values
			 * read once. */
			if ((at_pops || below) && distance >= lo &&
			    (uint64_t)(number = shift_floor(key, shift)) - (uint64_t)bclock < 64) {
				nb = &bslots[(uint64_t)number & 63];
				if (__builtin_expect(append_moved(nb, t) == &nb->head, 0))
					bucket_fill(w, below, nb, number, key);
				else if (key < nb->min_key)
					nb->min_key = key;
				continue;
			}
		}
		bucket_cut(b, l, taken);
		taken = 0;
		if (key <= clock) {
			t->bucket = NULL;
			fire(w, t);
			fired++;
			/* The callback may have cancelled the next ones. */
			l = b->head.next;
		} else if (distance - 1 < mask0) {
			nb = &slots0[(uint64_t)key & mask0];
			list_append(&nb->head, &t->link);
			t->bucket = nb;
			if (nb->count++ == 0)
				bucket_fill(w, levels, nb, key, key);
			if (w->observer)
				notify_placed(w, t);
		} else if (!at_pops || !file_at_pop(w, below, t, key)) {
			uint32_t fast = levels->fast_levels;

			if (!fast || !refile64(levels, fast, w, t, key))
				insert_exact(w, t, key);
		}
		quiet_clock = quiet_clock_of(w, clock, tick1);
	}
	if (taken)
		bucket_cut(b, l, taken);
	return fired;
}

/* b's front link l out of b, its successor (prefetched) first now, and
 * counted out; move_each() leaves b's min_key to its end. */
hot_inline void unlink_front(struct tw_bucket *b, struct tw_link *l)
{
	struct tw_link *next = l->next;

	prefetch(next);
	b->head.next = next;
	next->prev = &b->head;
	b->count--;
}

/* A popped bucket moved at once (a level 1 bucket firing, or one above
 * small enough to move in one step): move_exact() one timer at a time,
 * each out of b before it fires or is filed, as most of them fire.
 * stoppable: a wheel whose callbacks may ask the advance to stop
 * (for_service.h: a timer service's); only such a wheel pays the test
 * after each fire. */
hot_inline int64_t move_each(struct tw_wheel *w, struct tw_bucket *b, bool tick1,
			     bool stoppable)
{
	struct tw_level *levels = w->levels;
	struct tw_bucket *slots0 = levels[0].slots;
	const int64_t clock = levels[0].clock;
	const int64_t due_by = tick1 ? clock : exact_due_by(w, clock);
	const uint64_t mask0 = w->size - 1;
	int64_t fired = 0;

	for (;;) {
		struct tw_link *l = b->head.next;
		struct tw_timer *t;
		int64_t key;
		uint32_t fast;

		if (l == &b->head)
			break;
		t = list_timer(l);
		/* A run of due timers, each out of b and fired; the list's
		 * first timer read again after each (a callback may have
		 * cancelled the next ones) and tested at the run's foot, so
		 * that a fire jumps back to no shared test. */
		while (t->due <= due_by) {
			unlink_front(b, l);
			t->bucket = NULL;
			fire(w, t);
			fired++;
			/* A stop asked (for_service.h): the rest of a level-1
			 * bucket waits where it is for the next advance. */
			if (stoppable && __builtin_expect(w->stopping != 0, 0) &&
			    b->level == 1) {
				w->stopping = TW_STOPPED;
				return fired;
			}
			l = b->head.next;
			if (l == &b->head)
				goto empty;
			t = list_timer(l);
		}
		unlink_front(b, l);
		key = tick1 ? t->due : tw__ceil_div(t->due, w->tick);
		if ((uint64_t)key - (uint64_t)clock - 1 < mask0) {
			file_level1(w, levels, &slots0[(uint64_t)key & mask0], t, key, false);
			continue;
		}
		fast = levels->fast_levels;
		if (__builtin_expect(fast != 0, 1) && refile64(levels, fast, w, t, key))
			continue;
		insert_exact(w, t, key);
	}
empty:
	/* Empty now (nothing is filed into a popped bucket: its keys are
	 * for the levels below), so no key is below INT64_MAX. */
	b->min_key = INT64_MAX;
	return fired;
}

/* A timer out of a popped level-1 bucket, not yet due (a reschedule to
 * a later tick left it there): filed again by its key. Out of line: it is
 * rare where move_taking() meets it. */
static __attribute__((noinline)) void file_not_due(struct tw_wheel *w, struct tw_timer *t)
{
	struct tw_level *levels = w->levels;
	const uint64_t mask0 = w->size - 1;
	int64_t key = w->tick == 1 ? t->due : tw__ceil_div(t->due, w->tick);

	if ((uint64_t)key - (uint64_t)levels[0].clock - 1 < mask0)
		file_level1(w, levels, &levels[0].slots[(uint64_t)key & mask0], t, key, false);
	else
		refile_by_key(w, t, key);
}

/* move_each() of a service wheel's level-1 bucket (for_service.h): its
 * due runs to the service's taker, each whole; a timer between them not
 * yet due filed again by its key. A stop asked (a full batch) is made
 * as move_each() makes it. */
hot_inline int64_t move_taking(struct tw_wheel *w, struct tw_bucket *b,
			       tw__wheel_take_fn *take, bool tick1)
{
	const int64_t clock = w->levels[0].clock;
	const int64_t due_by = tick1 ? clock : exact_due_by(w, clock);
	int64_t fired = 0;

	while (b->head.next != &b->head) {
		size_t taken = take(w, b, due_by);

		if (taken) {
			fired += (int64_t)taken;
			if (__builtin_expect(w->stopping != 0, 0)) {
				w->stopping = TW_STOPPED;
				return fired;
			}
			continue;
		}
		/* Its front timer is not due: one a reschedule to a later
		 * tick left here. */
		struct tw_timer *t = list_timer(b->head.next);

		bucket_take(b, t);
		file_not_due(w, t);
	}
	b->min_key = INT64_MAX;
	return fired;
}

static __attribute__((noinline)) int64_t move_all(struct tw_wheel *w, struct tw_bucket *b)
{
	return w->tick == 1 ? move_each(w, b, true, false)
			    : move_each(w, b, false, false);
}

/* move_all() of a level-1 bucket of a wheel that allows stops, where no
 * taker takes its runs (there is none, or an observer is to be told of
 * each fire). */
static __attribute__((noinline)) int64_t move_all_stoppable(struct tw_wheel *w,
							    struct tw_bucket *b)
{
	return w->tick == 1 ? move_each(w, b, true, true)
			    : move_each(w, b, false, true);
}

static __attribute__((noinline)) int64_t move_all_taking(struct tw_wheel *w,
							 struct tw_bucket *b,
							 tw__wheel_take_fn *take)
{
	return w->tick == 1 ? move_taking(w, b, take, true)
			    : move_taking(w, b, take, false);
}

/* A level-1 bucket firing: move_all(); on a wheel that allows stops (a
 * service's), move_taking() where a taker takes its due runs and no
 * observer is to be told of each fire, else move_all_stoppable(). The
 * test is made where level-1 buckets pop, not in move_all(), which
 * buckets above level 1 pass too, so that a plain wheel's fires pay no
 * test of a stop only a service asks for. */
hot_inline int64_t fire_level1(struct tw_wheel *w, struct tw_bucket *b)
{
	const struct tw_level *level1 = w->levels;

	if (__builtin_expect(level1->stoppable, 0)) {
		tw__wheel_take_fn *take = level1->take_run;

		if (take && !w->observer)
			return move_all_taking(w, b, take);
		return move_all_stoppable(w, b);
	}
	return move_all(w, b);
}

/* ---- early cascades (exact mode) ----
 *
 * Kafka pops a higher-level bucket at its start and re-inserts everything
 * in it at once: with 200k timers in a bucket that is a 30 ms stall during
 * which nothing fires. In exact mode with wheel_size >= 4 a level's tick is
 * half the interval of the level below (factor = size / 2), so the level
 * below spans two of its ticks, and a bucket [E, E + T) fits there from
 * E - T on. It leaves the queue then (pop_at = E - T), a whole tick before
 * anything in it is due, and drains down in chunks, proportionally to the
 * time left, on every advance until E; next_expiry asks for an advance each
 * tick while a drain is under way. What fires when does not change.
 */

/* lv's drain (of bucket b) is over once b is empty. */
hot_inline void drain_end_if_empty(struct tw_wheel *w, struct tw_level *lv,
				   struct tw_bucket *b)
{
	if (list_empty(&b->head)) {
		set_draining(w, b, false);
		lv->draining = NULL;
		w->ndraining--;
		w->levels[0].draining_levels &= ~((uint64_t)1 << (lv - w->levels));
	}
}

/* A far drain of level 3 met a timer level 2 cannot take (its level-2
 * bucket a lap or more ahead of level 2's clock): one a reschedule left
 * in b due later (stays_put), most often. It is filed by its key, as
 * move_exact() would file it -- out of b after the `moved` timers before
 * it (cut off with it) -- and its successor returned. Out of line, and
 * not through move_exact(), whose call for one timer cost more than the
 * filing. */
static __attribute__((noinline)) struct tw_link *
refile_first(struct tw_wheel *w, struct tw_bucket *b, struct tw_link *l, size_t moved)
{
	struct tw_link *next = l->next;
	struct tw_timer *t = list_timer(l);
	int64_t key = t->due; /* a tick of 1 */

	bucket_cut(b, next, moved + 1);
	refile_by_key(w, t, key);
	return next;
}

/* bucket_fill() of lv's bucket b for a mover that has just filled it
 * with t, the bucket's number t's key >> shift; not marked cold, unlike
 * bucket_fill(): gcc lays the code after a cold call out as cold too,
 * which put the second timer of each round of drain_run_level1() and
 * drain_run() out of the function's hot code. */
static __attribute__((noinline)) void fill_moved(struct tw_wheel *w, struct tw_level *lv,
						 struct tw_bucket *b,
						 const struct tw_timer *t, unsigned shift)
{
	fill_bucket(w, lv, b, shift_floor(t->due, shift), t->due);
}

/* One timer of drain_run_level1()'s run: *l's into level 1's bucket for
 * its key, *l then its successor; false, with nothing done, for one
 * level 1 cannot take. */
hot_inline bool level1_take(struct tw_wheel *w, struct tw_level *levels,
			    struct tw_bucket *slots, uint64_t minus_first,
			    struct tw_link **l)
{
	struct tw_timer *t = list_timer(*l);
	uint64_t key = (uint64_t)t->due;
	struct tw_bucket *nb;

	if (__builtin_expect(key + minus_first >= 63, 0))
		return false;
	*l = (*l)->next;
	prefetch(*l);
	nb = &slots[key & 63];
	if (__builtin_expect(append_moved(nb, t) == &nb->head, 0))
		fill_moved(w, levels, nb, t, 0);
	return true;
}

/* The front of a drain of level 2 into level 1 at 64 buckets, a tick of
 * 1 and no observer (fast_levels): the run of timers due 1 to 63 ticks
 * ahead, each into level 1's bucket for its key, with nothing else to
 * decide. Stops at the first timer that needs more (move_exact() takes
 * it), after n timers, or at the end; cuts the run off b at once.
 * Returns how many it moved. It compares each key with the first tick
 * level 1 takes, set up once, and reads a key again only where a bucket
 * fills (rare), so that no register keeps it; it moves two timers a
 * round (level1_take() twice), so that one count down serves both and
 * the link read for the next timer needs no copy into the register the
 * loop began with. */
hot_inline size_t drain_run_level1(struct tw_wheel *w, struct tw_bucket *b, size_t n)
{
	struct tw_level *levels = w->levels;
	struct tw_bucket *slots = levels->slots;
	/* -(clock + 1): a key's distance past the first tick level 1
	 * takes is one add (a lea), not a copy and a subtraction. */
	uint64_t minus_first = -((uint64_t)levels->clock + 1);
	struct tw_link *l = b->head.next;
	size_t pairs, moved;

	hide_from_folding(minus_first);
	/* The list holds b->count timers: n of them, or all. */
	if (n > b->count)
		n = b->count;
	for (pairs = n / 2; pairs; pairs--) {
		if (!level1_take(w, levels, slots, minus_first, &l)) {
			moved = 0;
			goto stop;
		}
		if (!level1_take(w, levels, slots, minus_first, &l)) {
			moved = 1;
			goto stop;
		}
	}
	moved = (n & 1) && level1_take(w, levels, slots, minus_first, &l);
stop:
	moved += 2 * (n / 2 - pairs);
	if (moved)
		bucket_cut(b, l, moved);
	return moved;
}

/* Level 2's bucket (of 64 buckets of 32 ticks) for tick key: its slot
 * is bits 5 to 10 of the key, and a bucket is 64 bytes, so the compiler
 * makes its offset in the array those bits shifted up once (a lea), with
 * no bucket number computed. */
hot_inline struct tw_bucket *bucket_of_tick(struct tw_bucket *slots, uint64_t key)
{
	return &slots[(key & (63u << 5)) >> 5];
}

/* One timer of drain_run()'s run: *l's into level 2's bucket for its key,
 * or, due at a level-2 pop, first in the bucket popping then, as
 * move_exact() files it; *l then its successor. False, with nothing
 * done, for one that needs more: out of level 2's buckets, near the end
 * of the int64 range or, not far, for level 1. */
hot_inline bool level2_take(struct tw_wheel *w, struct tw_level *below,
			    struct tw_bucket *slots, uint64_t clock,
			    uint64_t minus_bstart, uint64_t pops, bool far,
			    struct tw_link **l)
{
	struct tw_timer *t = list_timer(*l);
	uint64_t key = (uint64_t)t->due;
	struct tw_bucket *nb;

	/* Level 2 takes distances from 64 on (below it, level 1) in its
	 * buckets ahead of its clock. */
	if (!far && key - clock - 64 >= (uint64_t)1 << 62)
		return false;
	if (__builtin_expect(!(key & 31), 0)) {
		/* Due at a level-2 pop: first in the bucket popping then;
		 * else (that bucket a lap ahead, or draining), by its key
		 * as any other. */
		if (key + 32 + minus_bstart < pops << 5 &&
		    !(nb = bucket_of_tick(slots, key + 32))->draining) {
			*l = (*l)->next;
			prefetch(*l);
			put_first_moved(w, below, nb, t, shift_floor((int64_t)key, 5) + 1,
					(int64_t)key);
			return true;
		}
		/* Near the end of the int64 range: move_exact() knows. */
		if (pops < 64)
			return false;
	}
	if (__builtin_expect(key + minus_bstart >= 64 << 5, 0))
		return false;
	*l = (*l)->next;
	prefetch(*l);
	nb = bucket_of_tick(slots, key);
	if (__builtin_expect(append_moved(nb, t) == &nb->head, 0))
		fill_moved(w, below, nb, t, 5);
	else if ((int64_t)key < nb->min_key)
		nb->min_key = (int64_t)key;
	return true;
}

/* The front of a drain of level 3 into level 2, as drain_run_level1() is
 * of level 2: the run of timers that each go into level 2's bucket for
 * their key (level2_take(), two a round), or, one due at a level-2 pop,
 * first in the bucket popping then, as move_exact() files it. far:
 * every timer of b is 64 ticks or more ahead (the caller knows it from
 * b's expiration), so none is for level 1, and one level 2 cannot take
 * is filed by its key here (refile_first), not by a call of
 * move_exact(). Idle timeouts 30 s out come down this way, then through
 * drain_run_level1() (make bench-instr's idle-expire). */
hot_inline size_t drain_run(struct tw_wheel *w, struct tw_bucket *b, size_t n,
			    bool far)
{
	struct tw_level *levels = w->levels;
	struct tw_level *below = &levels[1];
	struct tw_bucket *slots = below->slots;
	const uint64_t clock = (uint64_t)levels[0].clock;
	const uint64_t bclock = (uint64_t)below->clock;
	/* Minus the first tick of level 2's bucket at its clock (bstart):
	 * a key's bucket is one of the level's 64 if the key is fewer than
	 * 64 << 5 ticks past bstart, the test on the key itself (no bucket
	 * number), its distance one add (a lea). */
	uint64_t minus_bstart = -(bclock << 5);
	/* The bucket of a level-2 pop is one of the level's 64 from its
	 * clock on whose start ((number - 1) << 5) is an int64 tick: its
	 * number less than pops past bclock, one compare for both, made on
	 * the key's distance from bstart (a multiple of 32 there). */
	const uint64_t max_number = (uint64_t)(INT64_MAX >> 5);
	const uint64_t pops = max_number - bclock < 63 ? max_number - bclock + 1 : 64;
	struct tw_link *l = b->head.next;
	/* taken: the timers moved since the last cut off b's front (the
	 * end's, or refile_first's); done: those before it. */
	size_t taken = 0, done = 0;

	hide_from_folding(minus_bstart);

	/* The list holds b->count timers: n of them, or all (one that
	 * refile_first() puts back in b goes behind them: none is met
	 * twice). */
	if (n > b->count)
		n = b->count;
	while (taken < n) {
		const size_t rounds = (n - taken) / 2;
		size_t left, odd;
		struct tw_timer *t;

		/* Two a round: as in drain_run_level1(). */
		for (left = rounds; left; left--) {
			if (!level2_take(w, below, slots, clock, minus_bstart, pops, far, &l)) {
				odd = 0;
				goto stopped;
			}
			if (!level2_take(w, below, slots, clock, minus_bstart, pops, far, &l)) {
				odd = 1;
				goto stopped;
			}
		}
		/* The last of an odd number. */
		if (taken + 2 * rounds < n &&
		    level2_take(w, below, slots, clock, minus_bstart, pops, far, &l))
			taken++;
		taken += 2 * rounds;
		break;
	stopped:
		taken += 2 * (rounds - left) + odd;
		/* One level 2 cannot take, met by a far drain: filed by its
		 * key, and the run goes on past it (not one due at a pop near
		 * the end of the int64 range: move_exact() knows). */
		t = list_timer(l);
		if (!far || (uint64_t)t->due + minus_bstart < 64 << 5 ||
		    (!(t->due & 31) && pops < 64))
			break;
		l = refile_first(w, b, l, taken);
		done += taken + 1;
		n -= taken + 1;
		taken = 0;
	}
	if (taken)
		bucket_cut(b, l, taken);
	return done + taken;
}

/* drain_some() of level 2 or 3 with fast_levels: drain_run(), and each
 * timer it stops at through move_exact() alone. Out of drain_some()'s
 * code, which the other drains keep as it was. */
static __attribute__((noinline)) int64_t drain_fast(struct tw_wheel *w, struct tw_level *lv,
						    size_t n)
{
	struct tw_bucket *b = lv->draining;
	bool into_level1 = lv == &w->levels[1];
	int64_t fired = 0;

	while (n && !list_empty(&b->head)) {
		/* Every timer a drain of level 3 moves is due at its
		 * bucket's expiration or later (a drain's bucket holds no
		 * windowed timer: its pop fired them, and none is filed
		 * into a draining bucket), so while that is 64 ticks or
		 * more ahead (far) level 2 takes each by its bucket number
		 * alone. */
		n -= into_level1 ? drain_run_level1(w, b, n)
		     : b->expiration > w->levels[0].clock &&
				     (uint64_t)b->expiration - (uint64_t)w->levels[0].clock >= 64
			     ? drain_run(w, b, n, true)
			     : drain_run(w, b, n, false);
		if (!n || list_empty(&b->head))
			break;
		fired += into_level1 ? move_exact(w, b, 1, NULL, false, true, 0)
				     : move_exact(w, b, 1, &w->levels[1], true, true, 5);
		n--;
	}
	drain_end_if_empty(w, lv, b);
	return fired;
}

/* One timer's move in a drain of level 4 or up with fast_levels (its
 * bucket cut off after, by the caller, which has read its successor:
 * the move rewrites t's links): into the level below's bucket for its
 * key, or nearer through refile64; false, with nothing done, for a timer
 * that needs more (move_exact() takes it). */
hot_inline bool upper_step(struct tw_wheel *w, struct tw_level *below,
			   struct tw_timer *t)
{
	const unsigned shift = below->shift;
	const uint64_t clock = (uint64_t)w->levels[0].clock;
	uint64_t key = (uint64_t)t->due, number;
	struct tw_bucket *nb;

	/* Due twice below's span or more ahead, in one of the level's
	 * buckets ahead of its clock: below's bucket for its key. */
	number = (uint64_t)shift_floor((int64_t)key, shift);
	if (__builtin_expect(key - clock - ((uint64_t)2 << shift) >= (uint64_t)1 << 62 ||
				     number - (uint64_t)below->clock >= 64, 0)) {
		/* Not yet due (none is, normally): the level its
		 * distance says, unless that is to be created. */
		if (key - clock - 1 >= (uint64_t)1 << 62)
			return false;
		return refile64(w->levels, w->levels->fast_levels, w, t, (int64_t)key);
	}
	nb = &below->slots[number & 63];
	if (__builtin_expect(append_moved(nb, t) == &nb->head, 0))
		bucket_fill(w, below, nb, (int64_t)number, (int64_t)key);
	else if ((int64_t)key < nb->min_key)
		nb->min_key = (int64_t)key;
	return true;
}

/* The front of a drain of level 4 or up with fast_levels, as drain_run()
 * is of levels 2 and 3: each timer into the level below's bucket for its
 * key (below files distances from twice its span on), or, nearer, into
 * the level its distance says (refile64). Stops at the first timer that
 * needs more -- one due, or a level to create -- (move_exact() takes
 * it), after n timers, or at the end; cuts the run off b at once.
 * Returns how many it moved. The timers of a stepped expiry over hours
 * come down this way twice each (make bench-instr's expire-step), most
 * of them as a share of one, which drain_some() moves itself. */
static __attribute__((noinline)) size_t drain_run_upper(struct tw_wheel *w,
							struct tw_bucket *b,
							size_t n,
							struct tw_level *below)
{
	struct tw_link *l = b->head.next;
	size_t taken = 0;

	for (; taken < n && l != &b->head; taken++) {
		struct tw_link *next = l->next;

		if (!upper_step(w, below, list_timer(l)))
			break;
		l = next;
		prefetch(l);
	}
	if (taken)
		bucket_cut(b, l, taken);
	return taken;
}

/* drain_some() the long way: move_exact() on every timer. */
static __attribute__((noinline)) int64_t drain_each(struct tw_wheel *w,
						    struct tw_level *lv, size_t n)
{
	struct tw_bucket *b = lv->draining;
	struct tw_level *below = lv - 1;
	bool at_pops = below == &w->levels[1]; /* a drain of level 3 */
	int64_t fired;

	if (!below->lead)
		below = NULL;
	/* Level 2's shift is 5 at 64 buckets (32 ticks a bucket). */
	fired = w->tick != 1 ? move_exact(w, b, n, below, at_pops, false, 0)
		: !at_pops	     ? move_exact(w, b, n, below, false, true, 0)
		: w->size == 64	     ? move_exact(w, b, n, below, true, true, 5)
				     : move_exact(w, b, n, below, true, true, 0);

	drain_end_if_empty(w, lv, b);
	return fired;
}

/* Move up to n timers of a draining bucket down (none fire normally: a
 * draining bucket's timers are due from its expiration on). With
 * fast_levels (exact mode, a tick of 1, 64 buckets, no observer) a drain
 * of level 2 or 3 has drain_fast(), and one above them its one timer
 * moved here (upper_step) or a run of drain_run_upper() first: a stepped
 * expiry asks a drain for a timer or two each advance, so a call would
 * be most of the cost. */
hot_inline int64_t drain_some(struct tw_wheel *w, struct tw_level *lv, size_t n)
{
	struct tw_bucket *b = lv->draining;

	if (w->levels->fast_levels) {
		size_t moved;

		if (lv - w->levels <= 2)
			return drain_fast(w, lv, n);
		/* A share of one (a stepped expiry's, nearly always):
		 * its step here, not a call. (A cancel may have emptied
		 * the bucket.) */
		if (n == 1 && b->head.next != &b->head) {
			struct tw_link *l = b->head.next, *next = l->next;

			if (upper_step(w, lv - 1, list_timer(l))) {
				prefetch(next);
				bucket_cut(b, next, 1);
				drain_end_if_empty(w, lv, b);
				return 0;
			}
		}
		moved = drain_run_upper(w, b, n, lv - 1);
		if (moved == n || list_empty(&b->head)) {
			drain_end_if_empty(w, lv, b);
			return 0;
		}
		n -= moved;
	}
	return drain_each(w, lv, n);
}

/* Spread each drain over the ticks before its deadline (its bucket's
 * expiration), in proportion to the ticks this advance covers: an event
 * loop that wakes every tick moves 1/left of the rest each time; one that
 * wakes less often moves more per wake, never all at once unless the
 * deadline has come. pop_at remembers how far the drain has got. */
/* Also leaves in levels[0].drain_wake the earliest drain_wake() of the
 * drains left, which only a drain's own shares can bring forward (a
 * cancel or a drain's end only delays them): next_key_exact()'s short
 * path while something drains. A share of a timer or two is moved on
 * the advance it falls to, not saved up: moving 32 at once from a big
 * bucket costs 200 fewer instructions per stepped timer, but each
 * timer's cache miss then waits in line, where a share per advance has
 * its next timer prefetched an advance ahead (1e6 timers stepped over
 * 3 h: 496 against 358 ns a timer, 2026-12-03). Inlined into both its
 * callers (the advance, tw__wheel_run_drains): as a call, make
 * bench-instr's expire-step took 1000.8 instructions a timer, 977.4
 * inlined (2026-12-06). */
hot_inline int64_t drain_share(struct tw_wheel *w, int64_t limit)
{
	int64_t fired = 0, wake = INT64_MAX;

	/* The drains there were on entry, and only those levels (a share
	 * only ends a drain, never starts one). */
	for (uint64_t drains = w->levels[0].draining_levels; drains; drains &= drains - 1) {
		struct tw_level *lv = &w->levels[__builtin_ctzll(drains)];
		struct tw_bucket *b = lv->draining;
		size_t share;

		if (limit > b->pop_at) {
			uint64_t elapsed = (uint64_t)limit - (uint64_t)b->pop_at;
			uint64_t total = (uint64_t)b->expiration - (uint64_t)b->pop_at;
			uint64_t product;

			/* In integers where the product fits (every advance
			 * computes it for every drain). */
			share = !__builtin_mul_overflow((uint64_t)b->count, elapsed, &product)
					? (size_t)(product / total) + 1
					: (size_t)((double)b->count * (double)elapsed /
						   (double)total) + 1;
			b->pop_at = limit;
			fired += drain_some(w, lv, share);
		}
		if ((b = lv->draining) != NULL && b->count && drain_wake(b) < wake)
			wake = drain_wake(b);
	}
	w->levels[0].drain_wake = wake;
	return fired;
}

/* drain_share() left owed (for_service.h). levels[0].drain_wake becomes
 * the earliest drain_wake() of the drains as they are, which a drain this
 * advance began has not been in yet: next_expiry's short path trusts it,
 * and an owed share makes it no later than the shares would. */
static __attribute__((noinline)) void defer_drain_share(struct tw_wheel *w)
{
	int64_t wake = INT64_MAX;

	for (uint64_t drains = w->levels[0].draining_levels; drains; drains &= drains - 1) {
		const struct tw_bucket *b = w->levels[__builtin_ctzll(drains)].draining;

		if (b && b->count && drain_wake(b) < wake)
			wake = drain_wake(b);
	}
	w->levels[0].drain_wake = wake;
	w->levels[0].drains_owed = true;
}

/* ---- the occupancy bitmaps ----
 *
 * level_next() (own.h) finds a level's next queued bucket with one
 * shift and one count of trailing zeros; the rest of the queue's
 * questions are here. */

/* A level of more than 64 buckets: its first queued slot from start on,
 * wrapping, or NULL. The start word's bits below start are looked at last,
 * when the scan comes round to that word again. */
struct tw_bucket *tw__level_scan(const struct tw_wheel *w,
				 const struct tw_level *lv, unsigned start)
{
	unsigned nwords = w->size / 64, wi = start / 64;
	uint64_t bits = lv->occupied[wi] & (~(uint64_t)0 << (start % 64));

	for (unsigned k = 0; k <= nwords; k++) {
		if (bits)
			return &lv->slots[wi * 64 + (unsigned)__builtin_ctzll(bits)];
		wi = (wi + 1) & (nwords - 1);
		bits = lv->occupied[wi];
	}
	return NULL;
}

/* The level's queued bucket right after b (b's number + 1), or NULL: of
 * the queued buckets after b, the only one that can pop before b's last
 * key. A later one pops (at its expiration less the level's span) at
 * least a span after b's expiration, past every key b holds, and no
 * queued bucket has a min_key before its pop (its windowed timers' key is
 * the pop; tw_wheel_check checks it). b is its level's next bucket, so a
 * queued slot after it is a later number, not a wrapped earlier one. */
static const struct tw_bucket *level_adjacent(const struct tw_wheel *w,
					      const struct tw_level *lv,
					      const struct tw_bucket *b)
{
	uint32_t slot = (b->slot + 1) & (w->size - 1);

	return tw__occupied(lv, slot) ? &lv->slots[slot] : NULL;
}

/* The next event above level 1: a bucket that pops (starts draining) or
 * a drain that must end (its deadline has come). A tie goes to the drain:
 * a drain's timers must be down before anything at its deadline pops.
 * Refreshes upper_pop. */
hot_inline bool upper_next(struct tw_wheel *w, struct tw_level **level,
			   struct tw_bucket **pop, int64_t *when, int64_t *after,
			   bool wide)
{
	bool found = false, best_drains = false;
	int64_t second = INT64_MAX;

	for (uint32_t i = 1; i < w->nlevels; i++) {
		struct tw_level *lv = &w->levels[i];
		struct tw_bucket *b = level_next_at(w, lv, wide, true);

		if (b) {
			if (!found || b->pop_at < *when) {
				if (found && *when < second)
					second = *when;
				found = true;
				*when = b->pop_at;
				*level = lv;
				*pop = b;
			} else if (b->pop_at < second) {
				second = b->pop_at;
			}
		}
	}
	/* The drains' ends, by their levels' bits, after the buckets: a
	 * drain's end wins a tie with a bucket's pop (so that a level
	 * drains one bucket at a time: I3), the lower level's a tie between
	 * two drains, as when each level's drain came before its bucket;
	 * second is the next smallest in any order. */
	for (uint64_t drains = w->levels[0].draining_levels; drains; drains &= drains - 1) {
		struct tw_level *lv = &w->levels[__builtin_ctzll(drains)];
		int64_t t = lv->draining->expiration;

		if (!found || t < *when || (t == *when && !best_drains)) {
			if (found && *when < second)
				second = *when;
			found = best_drains = true;
			*when = t;
			*level = lv;
			*pop = NULL;
		} else if (t < second) {
			second = t;
		}
	}
	w->upper_pop = found ? *when : INT64_MAX;
	*after = second;
	return found;
}

/* tw__advance_clocks() in exact mode, where a level's bucket number is a
 * shift: inlined into the advance, which moves the clocks once per
 * bucket it pops. The observer's events out of line. */
static __attribute__((noinline)) void clocks_told(struct tw_wheel *w, int64_t key)
{
	tw__advance_clocks(w, key);
}

hot_inline void advance_clocks(struct tw_wheel *w, int64_t key)
{
	struct tw_level *lv = w->levels, *end = lv + w->nlevels;

	if (__builtin_expect(w->observer != NULL, 0)) {
		clocks_told(w, key);
		return;
	}
	for (; lv < end; lv++) {
		int64_t number = shift_floor(key, lv->shift);

		if (number <= lv->clock)
			break;
		lv->clock = number;
	}
}

hot_inline void pop_bucket(struct tw_wheel *w, struct tw_bucket *b)
{
	mark_empty(w, b);
	b->has_expiration = false;
	notify(w, TW_EV_POPPED, b->level, b->slot,
	       tw__ticks_to_time(w, b->pop_at), NULL);
	advance_clocks(w, b->pop_at);
}

/* The most timers a popped bucket moves down at once rather than in
 * shares: about a microsecond of work, well under one tick. */
#define SMALL_BUCKET 32

/* A popped bucket that is to drain, its windowed timers fired
 * (tw__fire_windowed, which leaves min_key at its expiration, a bound):
 * min_key made its exact timers' first key again, so that next_expiry
 * wakes to fire them, not at the expiration to move them (a bucket under
 * DRAIN_CHUNK asks for no wake of its own). Up to DRAIN_CHUNK timers, a
 * walk of the list the drain is about to move; a bigger bucket keeps the
 * bound, where the walk would be the stall its drain avoids, and asks
 * for wakes anyway. Out of line: only a bucket that held a window
 * comes here. */
static __attribute__((noinline)) void drain_min_key(const struct tw_wheel *w,
						    struct tw_bucket *b)
{
	int64_t min = INT64_MAX;

	for (struct tw_link *l = b->head.next; l != &b->head; l = l->next) {
		int64_t key = exact_key(w, list_timer(l)->due);

		if (key < min)
			min = key;
	}
	b->min_key = min;
}

/* A popped bucket above level 1 whose one timer is due by limit, before
 * level 1's next bucket (b0; a tie would fire after b0's timers) and
 * before the next upper event (upper_pop; ties go up first): moved down,
 * it would be the only timer of the level 1 bucket that pops next, so it
 * fires here, with the clocks moved to its tick as that pop would move
 * them -- no filing into level 1, no second pop. Sparse timers stepped
 * by next_expiry (make bench-instr's expire-step: one timer per 108 ms)
 * come down this way. Not with an observer, which is told of each
 * placement and pop. Not when the popped level's next bucket pops before
 * that tick either (upper_pop says so), though its timers are all due
 * after it: the clocks would pass that bucket's pop, and its timers,
 * filed against them when it pops, could land in a bucket numbered at a
 * level's clock, which the level's scan reaches last (a service test
 * found a timer held 2 s so). false: nothing done. */
static bool fire_alone(struct tw_wheel *w, struct tw_bucket *up,
		       const struct tw_bucket *b0, int64_t limit)
{
	struct tw_link *l = up->head.next;
	struct tw_timer *t = list_timer(l);
	int64_t key = exact_key(w, t->due);

	if (key > limit || key >= w->upper_pop || (b0 && key >= b0->expiration) ||
	    w->observer)
		return false;
	bucket_empty_of_lone(up);
	advance_clocks(w, key);
	t->bucket = NULL;
	fire(w, t);
	return true;
}

/* A popped bucket above level 1 whose one timer is not due (fire_alone
 * did not take it): moved down here, as move_each() would move it, not
 * through a call -- into level 1 or, with fast_levels, the level its
 * distance says. false: nothing done (move_all() takes it). */
hot_inline bool move_alone(struct tw_wheel *w, struct tw_bucket *up)
{
	struct tw_level *levels = w->levels;
	struct tw_timer *t = list_timer(up->head.next);
	const int64_t clock = levels[0].clock;
	const uint64_t mask0 = w->size - 1;
	int64_t key = exact_key(w, t->due);

	if (key <= clock || (!levels->fast_levels && (uint64_t)key - (uint64_t)clock - 1 >= mask0))
		return false;
	bucket_empty_of_lone(up);
	if ((uint64_t)key - (uint64_t)clock - 1 < mask0)
		file_level1(w, levels, &levels[0].slots[(uint64_t)key & mask0], t, key, true);
	else
		refile_by_key(w, t, key);
	return true;
}

/* Kafka's advance loop with the heap replaced by the bitmaps: level 1's
 * next bucket is one bit scan away; the levels above are looked at only
 * when upper_pop says something up there may be due first, which is once
 * per bucket that pops, not once per tick or per timer. Compiled twice,
 * for levels of one occupancy word and of several (wide), so that the
 * loop's many bit scans do not each ask which. */
hot_inline int64_t advance_exact(struct tw_wheel *w, int64_t limit, bool wide)
{
	struct tw_level *lv = NULL;
	struct tw_bucket *b0, *up = NULL, *next;
	int64_t fired = 0, when = 0, after = INT64_MAX;

	for (;;) {
		b0 = level_next_at(w, &w->levels[0], wide, false);
		if (w->upper_pop <= limit &&
		    (!b0 || w->upper_pop <= b0->expiration) &&
		    upper_next(w, &lv, &up, &when, &after, wide) && when <= limit &&
		    (!b0 || when <= b0->expiration)) {
			/* upper_pop: what is left of the upper events once
			 * this one is done, so that the next round looks at
			 * every level again only if one of them may come
			 * first -- the other levels' (after), and the popped
			 * level's next bucket and the drain the pop may
			 * start. What this event files meanwhile lowers it
			 * (fill_bucket). */
			if (!up) {
				w->upper_pop = after;
				fired += drain_some(w, lv, SIZE_MAX);
				continue;
			}
			pop_bucket(w, up);
			next = level_next_at(w, lv, wide, true);
			if (next && next->pop_at < after)
				after = next->pop_at;
			if (up->count > SMALL_BUCKET && up->expiration < after)
				after = up->expiration;
			w->upper_pop = after;
			/* Only a bucket with a windowed timer has a min_key
			 * before its expiration. */
			if (up->min_key < up->expiration) {
				fired += tw__fire_windowed(w, up);
				if (up->count > SMALL_BUCKET && up->count <= DRAIN_CHUNK)
					drain_min_key(w, up);
			} else if (up->count == 1 && fire_alone(w, up, b0, limit)) {
				/* (Only where no windowed callback has run
				 * since b0 was read: simpler to reason
				 * about.) */
				fired++;
				continue;
			}
			/* A bucket small enough to move in one step is moved
			 * now: draining only pays for itself when moving
			 * everything at once would be a stall. */
			if (up->count == 1 && move_alone(w, up))
				continue;
			if (up->count <= SMALL_BUCKET) {
				fired += move_all(w, up);
				continue;
			}
			/* The level's previous drain ended at this bucket's
			 * pop time at the latest (its deadline is this pop
			 * time or earlier, and ties go to the drain), so a
			 * level drains one bucket at a time (I3). */
			lv->draining = up;
			set_draining(w, up, true);
			/* A drain of level 3 files timers due at a level-2
			 * pop first in its bucket (put_first_moved), as a
			 * window is filed: next_expiry looks one bucket
			 * further on level 2 from then on. */
			if (lv == &w->levels[2])
				w->levels[1].windowed = true;
			w->ndraining++;
			w->levels[0].draining_levels |= (uint64_t)1 << (lv - w->levels);
			continue;
		}
		if (!b0 || b0->expiration > limit)
			break;
		pop_bucket(w, b0);
		if (b0->count == 1 &&
		    exact_key(w, list_timer(b0->head.next)->due) <= w->levels[0].clock) {
			/* Its one timer, due (a sparse stepped expiry's
			 * level 1 bucket): fired here, not through a call. */
			struct tw_timer *t = list_timer(b0->head.next);

			bucket_empty_of_lone(b0);
			t->bucket = NULL;
			fire(w, t);
			fired++;
		} else {
			fired += fire_level1(w, b0);
		}
		/* A stop asked (for_service.h), made inside fire_level1() or
		 * here: the clocks stay at this pop, the rest waits for the
		 * next advance. Only here, where the timers of a level-1
		 * bucket fire: a stop asked elsewhere waits for it. */
		if (__builtin_expect(w->stopping != 0, 0)) {
			w->stopping = TW_STOPPED;
			return fired;
		}
	}
	advance_clocks(w, limit);
	/* A service with executors runs the shares after they took what
	 * fired (for_service.h). A drain's deadline is not a share: it was
	 * met in the loop above. */
	if (w->levels[0].defer_drains && w->ndraining) {
		defer_drain_share(w);
		return fired;
	}
	return fired + drain_share(w, limit);
}

int64_t tw__wheel_run_drains(struct tw_wheel *w)
{
	int64_t fired;

	if (!w->levels[0].drains_owed)
		return 0;
	w->levels[0].drains_owed = false;
	/* As inside the advance they were left by: what a callback makes
	 * due waits for the next one. */
	w->advancing = TW_IN_ADVANCE;
	fired = drain_share(w, tw__due_limit(w, w->now)); /* the advance's */
	w->advancing = 0;
	return fired;
}

/* The rest of an advance that stopped part way (for_service.h), first:
 * the rest of the level-1 bucket it was firing (popping it moved level
 * 1's clock there: tw__firing_bucket). May stop again. */
int64_t tw__advance_resume(struct tw_wheel *w)
{
	int64_t fired;

	w->stopping = 0;
	fired = fire_level1(w, tw__firing_bucket(w));
	/* Asked at its last timer: stopped all the same, with nothing left
	 * in it (the next advance goes on from there). */
	if (w->stopping)
		w->stopping = TW_STOPPED;
	return fired;
}

int64_t tw__advance_exact(struct tw_wheel *w, int64_t limit)
{
	return w->size > 64 ? advance_exact(w, limit, true)
			     : advance_exact(w, limit, false);
}

/* ---- one jump without order (tw_wheel_advance_unordered) ----
 *
 * An advance that passes a bucket's whole range fires everything in it,
 * but the ordered advance still files those timers down level by level
 * (a timer 3 h out moves four times before it fires) so that they run in
 * tick order: about 1,000 instructions per timer in a one-jump expiry of
 * 1e5 timers. When the caller does not need that order, such a
 * bucket is emptied where it is: each timer fires straight from it (or,
 * if a stays-put reschedule left a later key in it, is filed again). The
 * one bucket per level that straddles the limit fires its due timers
 * where it is too and keeps the rest (whose keys are after the limit, so
 * that filing them again could put them back in it). What is left --
 * those, and level 1 -- then goes through the ordered advance. In that
 * expiry (make bench-instr's jump-unordered) 24 instructions per timer,
 * 43 when the straddling buckets' due timers went down level by level:
 * level 5's holds the last 5 of the 180 minutes, 3 % of the timers. */

/* The highest bucket number of a level whose range [n * span, (n + 1) *
 * span) ends at or before limit: floor((limit + 1) / span) - 1, without
 * overflowing at INT64_MAX. */
static int64_t last_whole_bucket(const struct tw_level *lv, int64_t limit)
{
	int64_t n = shift_floor(limit, lv->shift);

	return ((uint64_t)limit & (lv->span - 1)) == lv->span - 1 ? n : n - 1;
}

/* The level's next queued bucket whose whole range is due by limit. The
 * live bucket numbers of a level run from its clock on (level 1) or from
 * the one after (above), one per slot, so a slot's number is found from
 * the clock. */
static struct tw_bucket *whole_due_bucket(const struct tw_wheel *w,
					  const struct tw_level *lv, int64_t limit)
{
	int64_t last = last_whole_bucket(lv, limit);
	int64_t base = lv == w->levels ? lv->clock : lv->clock + 1;
	unsigned nwords = w->size > 64 ? w->size / 64 : 1;

	for (unsigned wi = 0; wi < nwords; wi++) {
		uint64_t occupied = lv->occupied[wi];

		while (occupied) {
			unsigned s = wi * 64 + (unsigned)__builtin_ctzll(occupied);
			int64_t number = base + (int64_t)(((uint64_t)s - (uint64_t)base) &
							  (w->size - 1));

			if (number <= last)
				return &lv->slots[s];
			occupied &= occupied - 1;
		}
	}
	return NULL;
}

/* Fire (or file again) every timer of a bucket taken out of the queue,
 * one at a time, so a callback may cancel the ones still waiting. */
static int64_t empty_bucket(struct tw_wheel *w, struct tw_bucket *b, int64_t limit)
{
	const int64_t tick = w->tick;
	int64_t fired = 0;

	for (;;) {
		struct tw_link *l = b->head.next, *next;
		struct tw_timer *t = list_timer(l);
		int64_t key;

		if (l == &b->head)
			break;
		key = tick == 1 ? t->due : tw__ceil_div_call(t->due, tick); /* exact mode only */
		next = l->next;
		prefetch(next);
		take_first(b, t, next);
		if (key <= limit) {
			fire(w, t);
			fired++;
		} else {
			insert_exact(w, t, key);
		}
	}
	return fired;
}

/* The queued bucket of a level above 1 whose range holds limit but ends
 * after it, or NULL: its live number is limit's, if that is one. */
static struct tw_bucket *straddling_bucket(const struct tw_wheel *w,
					   const struct tw_level *lv, int64_t limit)
{
	int64_t number = shift_floor(limit, lv->shift);
	uint32_t slot;

	if (lv->unbounded || number == last_whole_bucket(lv, limit) ||
	    (uint64_t)number - (uint64_t)lv->clock - 1 >= w->size - 1)
		return NULL;
	slot = (uint32_t)((uint64_t)number & (w->size - 1));
	if (!tw__occupied(lv, slot))
		return NULL;
	return &lv->slots[slot];
}

/* The timers of a queued bucket that are due by limit fire where they
 * are, the others stay (their keys are after limit: the bucket holds
 * them until it pops, as before). The bucket's list is taken aside
 * first, so that each timer is looked at once while callbacks add,
 * cancel or reschedule (a timer still aside is pending in b: a cancel
 * unlinks it there, a reschedule that stays keeps it, one that moves
 * takes it out); the ones kept go back one by one. min_key is then the
 * smallest key left (INT64_MAX meanwhile, so that what callbacks file
 * here sets it as for an empty bucket). */
static int64_t fire_due_in(struct tw_wheel *w, struct tw_bucket *b, int64_t limit)
{
	const int64_t tick = w->tick;
	struct tw_link aside;
	int64_t fired = 0, min_kept = INT64_MAX;

	aside.next = b->head.next;
	aside.prev = b->head.prev;
	aside.next->prev = &aside;
	aside.prev->next = &aside;
	list_init(&b->head);
	b->min_key = INT64_MAX;
	while (aside.next != &aside) {
		struct tw_link *l = aside.next;
		struct tw_timer *t = list_timer(l);
		int64_t key = tick == 1 ? t->due : tw__ceil_div_call(t->due, tick);

		aside.next = l->next;
		l->next->prev = &aside;
		if (key <= limit) {
			t->bucket = NULL;
			if (--b->count == 0)
				bucket_emptied(w, b);
			fire(w, t);
			fired++;
		} else {
			list_append(&b->head, l);
			if (key < min_kept)
				min_kept = key;
		}
	}
	if (b->count && min_kept < b->min_key)
		b->min_key = min_kept;
	return fired;
}

int64_t tw__advance_whole_buckets(struct tw_wheel *w, int64_t limit)
{
	int64_t fired = 0;

	for (uint32_t i = w->nlevels; i-- > 0;) {
		struct tw_level *lv = &w->levels[i];
		struct tw_bucket *b;

		if (lv->draining && shift_floor(lv->draining->expiration, lv->shift) <=
					    last_whole_bucket(lv, limit)) {
			b = lv->draining;
			set_draining(w, b, false);
			lv->draining = NULL;
			w->ndraining--;
			w->levels[0].draining_levels &= ~((uint64_t)1 << i);
			fired += empty_bucket(w, b, limit);
		}
		/* Callbacks may fill buckets again (never whole-due ones:
		 * what they add for a tick up to limit waits in the ready
		 * list), so each round looks at the bits afresh. */
		while ((b = whole_due_bucket(w, lv, limit)) != NULL) {
			mark_empty(w, b);
			b->has_expiration = false;
			notify(w, TW_EV_POPPED, b->level, b->slot,
			       tw__ticks_to_time(w, b->pop_at), NULL);
			fired += empty_bucket(w, b, limit);
		}
		/* The bucket that limit falls inside: the ordered advance
		 * would move each of its due timers down level by level;
		 * they fire here. */
		if (i > 0 && (b = straddling_bucket(w, lv, limit)) != NULL &&
		    b->min_key <= limit)
			fired += fire_due_in(w, b, limit);
	}
	return fired;
}

/* One level's part of next_key_scan (above: not level 1, a constant in
 * each call so that the scan of the levels above pays no test for it). */
hot_inline void next_key_level(const struct tw_wheel *w, const struct tw_level *lv,
			       bool wide, bool above, int64_t *key, bool *found)
{
	const struct tw_bucket *b = level_next_at(w, lv, wide, above);
	/* Level 1 never drains. */
	const struct tw_bucket *d = above ? lv->draining : NULL;
	int64_t k;

	/* On level 1 min_key is the bucket's own tick (a stays-put
	 * reschedule only moves later). */
	if (b) {
		const struct tw_bucket *b2;

		k = b->min_key;
		if (b->count > DRAIN_CHUNK && b->pop_at < k)
			k = b->pop_at;
		/* The bucket after it pops at this one's expiration, and its
		 * windowed timers fire then: possibly before this one's
		 * first timer (no later bucket's can). */
		if (above && lv->windowed && (b2 = level_adjacent(w, lv, b)) != NULL &&
		    b2->min_key < k)
			k = b2->min_key;
		if (k < *key)
			*key = k;
		*found = true;
	}
	if (d && d->count) {
		k = drain_wake(d);
		if (k < *key)
			*key = k;
		*found = true;
	}
}

/* The tick at which exact mode next has work: level 1's next bucket, or
 * the smallest key of the next bucket of each level above and of each
 * drain -- a tick at which a timer fires, never one at which a bucket only
 * cascades, so that an event loop is not woken for cascades. Except where
 * waking only to fire would leave one advance a stall: a bucket of more
 * than DRAIN_CHUNK timers also asks for its pop tick, and while it drains,
 * for the tick by which its share reaches DRAIN_CHUNK -- one wake per
 * DRAIN_CHUNK timers moved, none for a bucket that small. (A loop that
 * only woke to fire would sleep through a 500,000-timer bucket's whole
 * drain and move it in one 20-40 ms advance: the service's timers late by
 * that much.) */
hot_inline bool next_key_scan(const struct tw_wheel *w, int64_t *key, bool wide)
{
	bool found = false;
	int64_t best = INT64_MAX; /* the smallest so far, when found */

	next_key_level(w, w->levels, wide, false, &best, &found);
	for (uint32_t i = 1; i < w->nlevels; i++)
		next_key_level(w, &w->levels[i], wide, true, &best, &found);
	if (found)
		*key = best;
	return found;
}

/* Compiled twice, as the advance is. */
bool tw__next_key_exact_scan(const struct tw_wheel *w, int64_t *key)
{
	return w->size > 64 ? next_key_scan(w, key, true)
			    : next_key_scan(w, key, false);
}
