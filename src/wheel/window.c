/* SPDX-License-Identifier: MIT */
/*
 * wheel/window.c — timers that may fire anywhere in a window [earliest,
 * latest]: tw_wheel_add_range and tw_wheel_reschedule_range (exact mode).
 *
 * What it owns. Choosing the bucket a window is filed in, filing it there
 * (first in the bucket), pushing a pending timer's window later without
 * moving it when its bucket still fires inside the new window, and firing
 * a popped bucket's windowed timers before the rest of it drains.
 *
 * Structure. A timer that may fire anywhere in [earliest, latest] is filed once, in
 * the coarsest bucket that pops inside its window, and fires when that
 * bucket pops: it is never moved down a level. A bucket above level 1
 * pops one level tick before its expiration (early cascades), at a
 * multiple of its level's span, so the coarsest level whose span has a
 * multiple in [ek, lk] (the window's ticks) is the one, and the bucket is
 * the one popping at the last such multiple: windows that overlap there
 * share it, and an event loop wakes once for all of them. Its key is
 * earliest's, which is before its bucket's expiration: that is what marks
 * it windowed. Windowed timers go first in their bucket (a drain, which
 * moves the rest over a whole level tick, fires them at the pop, before
 * it starts: tw__fire_windowed) and lower the bucket's min_key to the
 * pop, so that next_expiry wakes for them. A window that no such bucket fits
 * (shorter than the spans of the levels that reach it) is an exact timer
 * at its most aligned tick (aligned_key): overlapping windows share it,
 * so they still fire together, at level 1. A reschedule (a window pushed
 * on every packet) seeks no coarse bucket: an exact timer stays in its
 * bucket while that expires by the window's end, due at the aligned tick,
 * and one that must move goes exact to the aligned tick, so a window
 * pushed along moves about once per bucket span, not each time it slides
 * past a pop. Kafka mode has no windows (Kafka has none to reproduce).
 *
 * Costs. Choosing the bucket is arithmetic on the window's ticks for at
 * most two levels and a shift per level below them; the aligned tick is
 * a count of leading zeros and two shifts; a push that stays put (the
 * common case of an idle window pushed on every packet) reads the timer
 * and its bucket and writes the due time; a move is a cancel and an add.
 * A windowed timer costs nothing at the pop beyond firing it; one filed
 * exact moves down the levels as any timer, except that its aligned
 * tick (a multiple of 64 where the part of the window it was aligned in
 * spans 64 ticks or more) is a level-2 pop: a level 3 bucket big enough
 * to drain puts it in the level-2 bucket popping then (exact.c), where
 * it fires after one move, not two.
 *
 * Worked example (tick 1 ms, 64 buckets, clock 0; levels of 1, 32, 1024
 * and 32768 ms buckets). add_range [30000, 30300]: the level that
 * reaches 30 s has 1024 ms buckets, and no multiple of 1024 lies in the
 * window, so it is exact at 30208 (59 x 512), in level 3's bucket
 * [29696, 30720). Pushed to [30100, 30400] it stays (30208 is inside).
 * Pushed to [30500, 30800] its bucket still expires before the window
 * ends: it stays, due at 30720 (15 x 2048), and fires there. A window
 * [30720, 33000] holds 32768, where a level-4 bucket pops: add_range
 * files it there, windowed (its due time says 30720), and it fires at
 * 32768 without moving down.
 */
#include "own.h"

/* place_new() for the window calls, which run in exact mode only, with
 * the key of t->due given: the common move (window_refile, a tick of 1)
 * inlines it with the key it already has; every other window call shares
 * one copy out of line, place_new_exact (not one more inlined copy of the
 * add per call site, with a kafka half that could never run there). */
hot_inline void file_new_exact(struct tw_wheel *w, struct tw_timer *t, int64_t key)
{
	debug_pending(w, t, true);
	if (t->due <= w->now)
		place_ready(w, t);
	else
		insert_exact(w, t, key);
}

static void place_new_exact(struct tw_wheel *w, struct tw_timer *t)
{
	file_new_exact(w, t, exact_key(w, t->due));
}

/* A popped bucket's windowed timers are its first ones,
 * each with a key at or before the pop: they fire now, whatever becomes
 * of the rest -- a bucket that drains moves its timers over a whole
 * level tick, which a window may not allow. What is left are exact
 * timers, none due before the bucket's expiration: min_key says so, so
 * that next_expiry does not name a tick the drain has passed. */
hot_inline int64_t fire_windowed(struct tw_wheel *w, struct tw_bucket *b, int64_t tick)
{
	/* Read once, into a register (two instructions fewer a fired
	 * timer): no callback changes it, as a timer a callback files
	 * into b's slot has b's number, the only one of its level's reach
	 * there. */
	const int64_t expiration = b->expiration;
	int64_t fired = 0;

	for (;;) {
		struct tw_link *l = b->head.next, *next;
		struct tw_timer *t = list_timer(l);

		if (l == &b->head ||
		    (tick == 1 ? t->due : tw__ceil_div_call(t->due, tick)) >= expiration)
			break;
		next = l->next;
		prefetch(next);
		take_first(b, t, next);
		fire(w, t);
		fired++;
	}
	if (b->min_key < expiration)
		b->min_key = expiration;
	return fired;
}

/* Compiled for a tick of 1, where a key is its due time, and for any. */
int64_t tw__fire_windowed(struct tw_wheel *w, struct tw_bucket *b)
{
	return w->tick == 1 ? fire_windowed(w, b, 1) : fire_windowed(w, b, w->tick);
}

/* The bucket a window [ek, lk] (ticks, clock0 < ek <= lk) is filed in
 * (its number in *number_out; it may be empty), or NULL. Inlined into
 * the window calls: an idle window pushed on every packet runs it each
 * time, and most levels are ruled out by arithmetic alone. */
hot_inline struct tw_bucket *window_bucket(struct tw_wheel *w, int64_t ek, int64_t lk,
					   int64_t *number_out)
{
	/* The window holds a multiple of 2^s for each s up to the highest
	 * bit in which ek - 1 and lk differ, and for no larger s: a level
	 * whose shift is above that has no pop inside the window (no
	 * overflow: ek > clock0). */
	unsigned fits = (unsigned)(63 - __builtin_clzll((uint64_t)(ek - 1) ^ (uint64_t)lk));
	uint32_t top = 0;

	/* The coarsest level that may pop inside the window, down: no level
	 * above the one whose shift is fits / 5 (5 bits a level at 64
	 * buckets) has a pop in the window; the loop passes such levels of
	 * other sizes by their shift. Not only the levels up to one above
	 * the level lk's distance names: a window near the clock that holds
	 * the pop of a bucket of a much coarser level (one already holding
	 * a timer whose window is the same) is filed there, with it. A level
	 * not made yet is weighed from the clock it would have, and made
	 * only if the window is filed there. */
	top = w->size == 64 ? fits / 5 : w->max_levels - 1;
	if (top > w->max_levels - 1)
		top = w->max_levels - 1;
	for (uint32_t i = top; i > 0; i--) {
		struct tw_level *lv = &w->levels[i];
		int64_t clock, last, pop, number;
		struct tw_bucket *b;

		if (lv->unbounded || !lv->lead || lv->shift > fits)
			continue;
		clock = i < w->nlevels ? lv->clock
				       : shift_floor(w->levels[0].clock, lv->shift);
		/* The last pop at or before lk that the level can hold: a
		 * multiple of the span. The bucket popping there is the next
		 * one, which starts a span later, so it must be one of the
		 * level's buckets (number < clock + size: a window reaching
		 * past the level takes its last bucket, not none, when that
		 * pops inside the window), and its start must be an int64 (a
		 * window reaching the last span before INT64_MAX would name
		 * a bucket starting at 2^63), so the pop is at most two spans
		 * before 2^63. */
		last = shift_floor(lk, lv->shift);
		if (last > clock + (int64_t)w->size - 2)
			last = clock + (int64_t)w->size - 2;
		if (last > (INT64_MAX >> lv->shift) - 1)
			last = (INT64_MAX >> lv->shift) - 1;
		pop = (int64_t)((uint64_t)last << lv->shift);
		if (pop < ek)
			continue;
		/* pop >= ek > clock0 >= clock * span: number > clock + 1. */
		number = last + 1;
		b = &lv->slots[(uint64_t)number & (w->size - 1)];
		if (i < w->nlevels && b->draining)
			continue;
		while (i >= w->nlevels)
			tw__add_level(w);
		*number_out = number;
		return b;
	}
	return NULL;
}

/* The bucket for a window from earliest (ticks ek to lk), if that is not
 * due yet and some bucket fits. */
hot_inline struct tw_bucket *window_bucket_for(struct tw_wheel *w, int64_t earliest,
					       int64_t ek, int64_t lk, int64_t *number)
{
	if (earliest <= w->now || lk <= w->levels[0].clock + 1)
		return NULL;
	return window_bucket(w, ek, lk, number);
}

/* Into bucket b (number `number`, above level 1), which pops inside the
 * window: first in it, and min_key no later than the pop. */
static void file_windowed(struct tw_wheel *w, struct tw_timer *t, struct tw_bucket *b,
			  int64_t number)
{
	debug_pending(w, t, true);
	bucket_put_first(w, &w->levels[b->level - 1], b, t, number);
}

/* The tick in [ek, lk] with the most trailing zero bits: lk with every
 * bit below the highest one in which ek - 1 and lk differ cleared (ek - 1
 * has that bit clear and lk has it set, so the result is above ek - 1 and
 * at most lk). Windows that overlap mostly share it: two windows of width
 * d overlapping by half pick the same multiple of the largest power of two
 * below d, so a thousand 300 ms windows started a millisecond apart land
 * on four or five ticks, not on a thousand. The same bit arithmetic
 * ("slack" rounding) is how a kernel timer with a tolerance used to be
 * given one; here it is the fallback when no coarse bucket pops inside the
 * window. */
hot_inline int64_t aligned_key(int64_t ek, int64_t lk)
{
	unsigned bit = (unsigned)(63 - __builtin_clzll(((uint64_t)ek - 1) ^ (uint64_t)lk));

	return (int64_t)(((uint64_t)lk >> bit) << bit);
}

/* A due time in the window [earliest, latest] (ticks ek..lk of tick
 * time units) whose key is a: earliest or latest themselves when the tick
 * is theirs (so that no multiplication can pass INT64_MAX), a tick's
 * start between them. A caller that knows the tick is 1 passes the
 * constant, and all of it folds to a. */
hot_inline int64_t due_at_key(int64_t tick, int64_t a, int64_t earliest,
			      int64_t latest, int64_t ek, int64_t lk)
{
	if (a == ek)
		return earliest;
	if (a == lk)
		return latest;
	return tick == 1 ? a : a * tick;
}

/* The due time of a window [earliest, latest] (ticks ek <= lk) that is
 * filed as an exact timer: earliest when it is due already or spans one
 * tick; otherwise its aligned tick's. */
hot_inline int64_t exact_window_due(const struct tw_wheel *w, int64_t tick,
				    int64_t earliest, int64_t latest, int64_t ek,
				    int64_t lk)
{
	if (earliest <= w->now || ek >= lk)
		return earliest;
	return due_at_key(tick, aligned_key(ek, lk), earliest, latest, ek, lk);
}

/* A window that is not one time: in a bucket popping inside it, or at
 * its aligned tick. t->due is earliest on entry. */
static void place_window(struct tw_wheel *w, struct tw_timer *t, int64_t latest)
{
	int64_t number = 0, ek = exact_key(w, t->due), lk = exact_key(w, latest);
	struct tw_bucket *b = window_bucket_for(w, t->due, ek, lk, &number);

	if (b) {
		file_windowed(w, t, b, number);
	} else {
		t->due = exact_window_due(w, w->tick, t->due, latest, ek, lk);
		place_new_exact(w, t);
	}
}

/* TW_EINVAL (and, in the debug build, why) for a window call's bad
 * arguments; TW_OK for good ones. */
static int check_window_call(const char *call, const struct tw_wheel *w,
			     const struct tw_timer *t, int64_t earliest, int64_t latest)
{
	(void)call; /* named by the debug build */
	if (!w || !w->buckets || !t || no_callback(w, t))
		return TW_EINVAL_BECAUSE(call, "%s", bad_wheel_call(w, t));
	if (latest < earliest)
		return TW_EINVAL_BECAUSE(call, "latest is before earliest");
	if (w->mode != TW_MODE_EXACT)
		return TW_EINVAL_BECAUSE(call, "kafka mode has no windows "
					       "(TW_MODE_EXACT has)");
	return TW_OK;
}

hot_inline int wheel_add_range(struct tw_wheel *w, struct tw_timer *t,
			       int64_t earliest, int64_t latest)
{
	int rc = check_window_call("tw_wheel_add_range", w, t, earliest, latest);

	if (rc)
		return rc;
	if (t->bucket)
		return TW_EBUSY;
	t->due = earliest;
	if (earliest == latest)
		place_new_exact(w, t);
	else
		place_window(w, t, latest);
	return TW_OK;
}

public_hot int tw_wheel_add_range(struct tw_wheel *w, struct tw_timer *t,
				  int64_t earliest, int64_t latest)
{
	int rc;

	WHEEL_ENTER(w, "tw_wheel_add_range");
	rc = wheel_add_range(w, t, earliest, latest);
	WHEEL_LEAVE(w);
	return rc;
}

/* A window call that moves the timer: out of its bucket (if pending)
 * into the coarsest bucket that pops inside the window, or exact at the
 * window's aligned tick (at earliest for a one-time window or one whose
 * earliest has passed). Out of line and never inlined, so that the
 * reschedule's common end (the timer stays) is a leaf that saves no
 * registers: the bucket search and the move are what need them. */
static __attribute__((noinline)) int window_move(struct tw_wheel *w, struct tw_timer *t,
						 int64_t earliest, int64_t latest)
{
	int was_pending = t->bucket != NULL;
	int64_t ek = exact_key(w, earliest), lk = exact_key(w, latest), number = 0;
	struct tw_bucket *fit = NULL;

	if (earliest != latest && !was_pending)
		fit = window_bucket_for(w, earliest, ek, lk, &number);
	if (was_pending)
		unlink_pending(w, t);
	if (fit) {
		t->due = earliest;
		file_windowed(w, t, fit, number);
	} else {
		t->due = exact_window_due(w, w->tick, earliest, latest, ek, lk);
		place_new_exact(w, t);
	}
	return was_pending;
}

/* A window call pushing a pending timer stays put when the bucket it is
 * in still fires inside the new window (a connection's idle window
 * pushed on every packet). A timer does not change sides in its list: a
 * windowed one (first in its bucket, fires at the pop) stays if the pop
 * is inside the window, and takes earliest as its due time; an exact one
 * (fires at its own key's tick) stays while its bucket expires by the
 * window's end, due at the window's aligned tick from that expiration on,
 * as under a plain reschedule (stays_put): the bucket re-files it when it
 * expires. Re-aligning it even when its own tick is inside the window is
 * what makes the timers pushed along beside it fire together; a window
 * whose earliest has passed leaves it at its own tick if that is inside. No
 * coarse bucket is sought for it: that search is what a reset on every
 * packet cannot afford, and the aligned tick coalesces wake-ups as well
 * (a bucket expires at a multiple of its span, so the tick after it is as
 * aligned as the window allows). Otherwise it moves (window_refile;
 * window_move off the common path); its later pushes then stay put while
 * the window still holds where it fires. All of it is decided from one
 * look at the timer and its bucket, with each key computed once (the tick
 * is read once, by the caller, which passes the constant 1 on the common
 * path: a store to a timer's due time could otherwise be taken to change
 * it). */
hot_inline bool window_stays(struct tw_wheel *w, struct tw_timer *t, struct tw_bucket *b,
			     int64_t earliest, int64_t latest, int64_t tick, int64_t ek,
			     int64_t lk, int64_t key)
{
	int64_t expiration = b->expiration;

	if (key >= expiration) {
		/* Its bucket expires inside the window or before it: it
		 * stays, due at the window's aligned tick from that
		 * expiration on (where the windows pushed beside it land
		 * too), and the bucket re-files it when it expires (as a
		 * plain reschedule leaves it, stays_put). Only a window
		 * that ends before the bucket expires moves it. */
		if (earliest > w->now && expiration <= lk) {
			int64_t a = aligned_key(ek > expiration ? ek : expiration, lk);

			if (a < b->min_key)
				b->min_key = a;
			t->due = due_at_key(tick, a, earliest, latest, ek, lk);
			return true;
		}
		/* A window already open that holds its tick: it fires
		 * there, never before earliest (an earlier due time in the
		 * same tick becomes earliest, a later one latest -- with a
		 * tick above 1 both can share the window's edge ticks --
		 * and the key is kept), so its due time says the window. */
		if (ek <= key && key <= lk) {
			if (t->due < earliest)
				t->due = earliest;
			else if (t->due > latest)
				t->due = latest;
			return true;
		}
	} else {
		/* Windowed: it stays while its bucket pops inside the
		 * window, even when earliest has passed (it fires at that
		 * pop as it would have). Otherwise it moves, even where it
		 * could stay as an exact timer: the windowed ones stay
		 * first in their bucket. */
		int64_t pop = b->level == 1 ? expiration : b->pop_at;

		if (ek < expiration && pop >= ek && pop <= lk) {
			t->due = earliest;
			return true;
		}
	}
	return false;
}

/* The end of wheel_reschedule_range() for a tick other than 1, with its
 * divisions: out of line (and ending in the move itself), so that the
 * common tick of 1 saves no registers and only jumps. */
static __attribute__((noinline)) int reschedule_range_ticks(struct tw_wheel *w,
							    struct tw_timer *t,
							    struct tw_bucket *b,
							    int64_t earliest, int64_t latest)
{
	int64_t tick = w->tick;

	if (window_stays(w, t, b, earliest, latest, tick, tw__ceil_div(earliest, tick),
			 tw__ceil_div(latest, tick), tw__ceil_div(t->due, tick)))
		return 1;
	return window_move(w, t, earliest, latest);
}

/* Every case of wheel_reschedule_range() but the common one: bad input
 * (each refusal as tw_wheel_add_range() gives it), a timer pending in
 * another wheel, not pending, ready or in a draining bucket, a one-time
 * window, a tick other than 1. */
static __attribute__((noinline)) int reschedule_range_rest(struct tw_wheel *w,
							   struct tw_timer *t,
							   int64_t earliest, int64_t latest)
{
	int rc = check_window_call("tw_wheel_reschedule_range", w, t, earliest, latest);
	struct tw_bucket *b;

	if (rc)
		return rc;
	b = t->bucket;
	if (b && b->wheel != w)
		return TW_EOWNER;
	if (!b || earliest == latest || b->level == TW_LEVEL_READY || b->draining)
		return window_move(w, t, earliest, latest);
	return reschedule_range_ticks(w, t, b, earliest, latest);
}

/* window_move() for the common case's timers (pending, tick 1, a real
 * window): out of its bucket, exact at the aligned tick (at earliest if
 * that has passed), where with a tick of 1 a key is its due time, with
 * the add inlined here rather than called. */
static __attribute__((noinline)) int window_refile(struct tw_wheel *w, struct tw_timer *t,
						   int64_t earliest, int64_t latest)
{
	unlink_pending(w, t);
	t->due = exact_window_due(w, 1, earliest, latest, earliest, latest);
	file_new_exact(w, t, t->due);
	return 1;
}

/* The common case -- a pending timer of this wheel, tick 1, pushed to a
 * window -- decided with one test of everything that would send it
 * elsewhere, then stays or moves; all else is reschedule_range_rest. A
 * pending timer's bucket names its wheel, so a NULL or uninitialised
 * wheel fails b->wheel != w; the bucket's no_window_stay holds the rest
 * (kafka mode, a tick other than 1, a ready list, a drain). */
hot_inline int wheel_reschedule_range(struct tw_wheel *w, struct tw_timer *t,
				      int64_t earliest, int64_t latest)
{
	struct tw_bucket *b;

	if (__builtin_expect(!t || !(b = t->bucket) || b->wheel != w ||
			     earliest >= latest || b->no_window_stay, 0) ||
	    no_callback(w, t))
		return reschedule_range_rest(w, t, earliest, latest);
	if (window_stays(w, t, b, earliest, latest, 1, earliest, latest, t->due))
		return 1;
	return window_refile(w, t, earliest, latest);
}

public_hot int tw_wheel_reschedule_range(struct tw_wheel *w,
					 struct tw_timer *t, int64_t earliest,
					 int64_t latest)
{
	int rc;

	WHEEL_ENTER(w, "tw_wheel_reschedule_range");
	rc = wheel_reschedule_range(w, t, earliest, latest);
	WHEEL_LEAVE(w);
	return rc;
}
