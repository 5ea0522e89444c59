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
 * (shorter than the spans of the levels that reach it) is filed at
 * earliest as an exact timer: it fires at ceil(earliest), inside the
 * window. Kafka mode has no windows (Kafka has none to reproduce).
 *
 * Costs. Choosing the bucket is arithmetic on the window's ticks for at
 * most two levels and a shift per level below them; a push that stays put
 * (the common case of an idle window pushed on every packet) reads the
 * timer and its bucket and writes the due time; a move is a cancel and an
 * add. A windowed timer costs nothing at the pop beyond firing it.
 */
#include "internal.h"

/* place_new() for the window calls, which run in exact mode only: one
 * copy, out of line (not one more inlined copy of the add per call site,
 * with a kafka half that could never run there). */
static void place_new_exact(struct tw_wheel *w, struct tw_timer *t)
{
	w->count++;
	debug_pending(w, t, true);
	if (t->due <= w->now)
		place_ready(w, t);
	else
		insert_exact(w, t, exact_key(w, t->due));
}

/* A popped bucket's windowed timers are its first ones,
 * each with a key at or before the pop: they fire now, whatever becomes
 * of the rest -- a bucket that drains moves its timers over a whole
 * level tick, which a window may not allow. What is left are exact
 * timers, none due before the bucket's expiration: min_key says so, so
 * that next_expiry does not name a tick the drain has passed. */
int64_t tw__fire_windowed(struct tw_wheel *w, struct tw_bucket *b)
{
	int64_t fired = 0;

	while (!list_empty(&b->head)) {
		struct tw_timer *t = list_timer(b->head.next);

		if (exact_key(w, t->due) >= b->expiration)
			break;
		bucket_take(b, t);
		fire(w, t);
		fired++;
	}
	if (b->min_key < b->expiration)
		b->min_key = b->expiration;
	return fired;
}

/* The bucket a window [ek, lk] (ticks, clock0 < ek <= lk) is filed in
 * (its number in *number_out; it may be empty), or NULL. Inlined into
 * the window calls: an idle window pushed on every packet runs it each
 * time, and most levels are ruled out by arithmetic alone. */
hot_inline struct tw_bucket *window_bucket(struct tw_wheel *w, int64_t ek, int64_t lk,
					   int64_t *number_out)
{
	uint64_t distance = (uint64_t)lk - (uint64_t)w->levels[0].clock;
	/* The window holds a multiple of 2^s for each s up to the highest
	 * bit in which ek - 1 and lk differ, and for no larger s: a level
	 * whose shift is above that has no pop inside the window (no
	 * overflow: ek > clock0). */
	unsigned fits = (unsigned)(63 - __builtin_clzll((uint64_t)(ek - 1) ^ (uint64_t)lk));
	uint32_t top = 0;

	/* The first level whose range may reach lk (at 64 buckets named by
	 * distance's bits, as insert_exact does; otherwise the first whose
	 * too_far the distance does not reach), and the one above it: the
	 * first may still fall short of lk, or hold no pop inside the
	 * window where the coarser one does. A level not made yet is
	 * weighed from the clock it would have, and made only if the
	 * window is filed there. */
	if (w->size == 64) {
		top = (unsigned)(62 - __builtin_clzll(distance | 2)) / 5;
	} else {
		while (top + 1 < w->max_levels && !w->levels[top].unbounded &&
		       distance >= w->levels[top].too_far)
			top++;
	}
	if (top + 1 < w->max_levels)
		top++;
	/* No level above the one whose shift is fits / 5 (5 bits a level at
	 * 64 buckets) has a pop in the window; the loop passes such levels
	 * of other sizes by their shift. */
	if (w->size == 64 && fits / 5 < top)
		top = fits / 5;
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

/* Into bucket b (number `number`, above level 1), which pops at tick
 * pop: first in it, and min_key no later. */
static void file_windowed(struct tw_wheel *w, struct tw_timer *t, struct tw_bucket *b,
			  int64_t number)
{
	struct tw_level *lv = &w->levels[b->level - 1];
	int64_t pop;

	if (b->count == 0)
		bucket_fill(w, lv, b, number, (int64_t)((uint64_t)(number - 1) << lv->shift));
	pop = b->pop_at;
	list_append(b->head.next, &t->link); /* before the first */
	lv->windowed = true;
	w->count++;
	debug_pending(w, t, true);
	b->count++;
	t->bucket = b;
	if (pop < b->min_key)
		b->min_key = pop;
	if (w->observer)
		notify_placed(w, t);
}

/* A window that is not one time: in a bucket popping inside it, or at
 * earliest. t->due is earliest (never before it). */
static void place_window(struct tw_wheel *w, struct tw_timer *t, int64_t latest)
{
	int64_t number = 0;
	struct tw_bucket *b = window_bucket_for(w, t->due, exact_key(w, t->due),
						exact_key(w, latest), &number);

	if (b)
		file_windowed(w, t, b, number);
	else
		place_new_exact(w, t);
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

/* The end of a window call that moves the timer: out of its bucket (if
 * pending) into b (a window's bucket), or filed at earliest when b is
 * NULL. Out of line, so that the calls' common ends (the timer stays)
 * need no registers saved. */
static int window_move(struct tw_wheel *w, struct tw_timer *t, struct tw_bucket *b,
		       int64_t number, int64_t earliest)
{
	int was_pending = t->bucket != NULL;

	if (was_pending)
		unlink_pending(w, t);
	t->due = earliest;
	if (b)
		file_windowed(w, t, b, number);
	else
		place_new_exact(w, t);
	return was_pending;
}

/* A window call pushing a pending timer stays put when the bucket it is
 * in still fires inside the new window (a connection's idle window
 * pushed on every packet). A timer does not change sides in its list: a
 * windowed one (first in its bucket, fires at the pop) stays if the pop
 * is inside the window and the new earliest still marks it windowed,
 * and takes earliest as its due time; an exact one (fires at its own
 * key's tick) stays if that tick is inside the window, and keeps its due
 * time, or takes earliest if that is later in the same tick (moving
 * either would break the header's "moves nothing"). Otherwise, when no
 * bucket fits the
 * window, it stays as under a plain reschedule (stays_put) if that would
 * keep it: an exact timer pushed later is re-filed at its bucket's
 * expiration by earliest, inside the window. One that a bucket fits
 * moves there once, and its later pushes stay put. All of it is decided
 * here from one look at the timer and its bucket, with each key
 * computed once (the tick is read once: a store to a timer's due time
 * could otherwise be taken to change it). */
hot_inline int wheel_reschedule_range(struct tw_wheel *w, struct tw_timer *t,
				      int64_t earliest, int64_t latest)
{
	struct tw_bucket *b, *fit = NULL;
	int64_t number = 0, ek, lk, tick;
	bool keep = false;
	int rc;

	rc = check_window_call("tw_wheel_reschedule_range", w, t, earliest, latest);
	if (rc)
		return rc;
	b = t->bucket;
	if (b && b->wheel != w)
		return TW_EOWNER;
	if (earliest == latest)
		return window_move(w, t, NULL, 0, earliest);
	tick = w->tick;
	ek = tick == 1 ? earliest : tw__ceil_div(earliest, tick);
	lk = tick == 1 ? latest : tw__ceil_div(latest, tick);
	/* Its bucket still fires inside the new window: it stays, even
	 * when earliest has passed (then it fires at that pop as it would
	 * have). */
	if (b && b->level != TW_LEVEL_READY && !b->draining) {
		int64_t key = tick == 1 ? t->due : tw__ceil_div(t->due, tick);
		int64_t expiration = b->expiration;

		if (key >= expiration) {
			if (ek <= key && key <= lk) {
				/* Never before earliest: an earlier due time
				 * in the same tick (ek == key) becomes
				 * earliest, and the key is kept. */
				if (t->due < earliest)
					t->due = earliest;
				return 1;
			}
			keep = ek >= expiration;
		} else {
			int64_t pop = b->level == 1 ? expiration : b->pop_at;

			if (ek < expiration && pop >= ek && pop <= lk) {
				t->due = earliest;
				return 1;
			}
			/* A windowed timer made exact moves, so that the
			 * windowed ones stay first in their bucket. */
			keep = ek >= expiration && b->min_key >= expiration;
		}
	}
	if (earliest > w->now) {
		if (lk > w->levels[0].clock + 1)
			fit = window_bucket(w, ek, lk, &number);
		if (!fit && keep) {
			if (ek < b->min_key)
				b->min_key = ek;
			t->due = earliest;
			return 1;
		}
	}
	return window_move(w, t, fit, number, earliest);
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
