/* SPDX-License-Identifier: MIT */
/*
 * What the wheel's own files (the .c files beside this one) share: the small helpers
 * every path uses, and the hot ones -- the add, the cancel, the filing of
 * an exact timer -- as static inline functions, so that each public call
 * compiles to one body with no call inside it whichever file defines it.
 * Everything here is private to the wheel; what the rest of the library
 * may use is in for_inspect.h and for_service.h.
 *
 * Which file owns what:
 *   wheel.c      the model both modes share (ticks, levels, buckets, the
 *                ready lists), the design essay, and the public calls
 *                that add, cancel, reschedule, advance and ask;
 *   lifecycle.c  tw_timer_init, tw_wheel_init, tw_wheel_drain,
 *                tw_wheel_destroy;
 *   kafka.c      kafka mode: Kafka's filing and its queue of buckets;
 *   exact.c      exact mode: the occupancy bitmaps, early cascades, the
 *                next expiry without waking for cascades, the unordered
 *                jump;
 *   window.c     timers that may fire anywhere in a window
 *                (tw_wheel_add_range, tw_wheel_reschedule_range).
 */
#ifndef TW_WHEEL_OWN_H
#define TW_WHEEL_OWN_H

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bucket.h"
#include "../debug.h"
#include "bucket_queue.h"
#include "../list.h"
#include "for_inspect.h"
#include "for_service.h"

/* The add, cancel and reschedule paths are a few dozen instructions: a
 * call and its spills would be a good part of them. Not in the coverage
 * build (-O0): there each function is one copy, so that a branch counts
 * once, for the code, not once per call site it is forced into. */
#if defined(__GNUC__) && !defined(TW_COVERAGE)
#define hot_inline static inline __attribute__((always_inline))
#else
#define hot_inline static inline
#endif

/* What the hot paths rarely need, out of their way: a call there keeps
 * them from holding values in scratch registers across it. */
#if defined(__GNUC__)
#define cold_path __attribute__((noinline, cold))
#else
#define cold_path
#endif
/* The same for a function of this header, copied into each file that
 * includes it (and unused in some). */
#if defined(__GNUC__)
#define cold_local static __attribute__((noinline, cold, unused))
#else
#define cold_local static
#endif

/* Values read before it are read again after it. */
#if defined(__GNUC__)
#define compiler_barrier() __asm__ __volatile__("" ::: "memory")
#else
#define compiler_barrier() ((void)0)
#endif

/* x (a variable) as a value the compiler cannot see through, so that it
 * keeps it as written: a loop's key + minus_first is then one lea, where
 * gcc turned the negation back into a copy and two subtractions a timer
 * (it emits no instruction). */
#if defined(__GNUC__)
#define hide_from_folding(x) __asm__("" : "+r"(x))
#else
#define hide_from_folding(x) ((void)0)
#endif

/* Out of line, but not cold: gcc moves the code that leads to a cold
 * call into the function's cold part, and with bucket_first_key that
 * was the add's whole common path (the instructions the same, laid out
 * away from the rest and jumped to). */
#if defined(__GNUC__)
#define rare_local static __attribute__((noinline, unused))
#else
#define rare_local static
#endif

#if defined(__GNUC__)
#define prefetch(p) __builtin_prefetch(p)
#else
#define prefetch(p) ((void)(p))
#endif

/* The tick a timer is filed under: its bucket start in kafka mode (floor),
 * the first boundary at or after its due time in exact mode (ceil). */
hot_inline int64_t timer_key(const struct tw_wheel *w, int64_t due)
{
	/* Times already in ticks (a 1 ms tick on a ms clock) need no
	 * division, the slowest instruction on the add path. */
	if (w->tick == 1)
		return due;
	return w->mode == TW_MODE_KAFKA ? tw__floor_div(due, w->tick)
					: tw__ceil_div(due, w->tick);
}

/* timer_key() where the mode is known to be exact. */
hot_inline int64_t exact_key(const struct tw_wheel *w, int64_t due)
{
	return w->tick == 1 ? due : tw__ceil_div(due, w->tick);
}

/* The latest due time whose exact_key() is at or before key: due <=
 * exact_due_by(w, key) says exact_key(w, due) <= key without the division
 * (ceil(due / tick) <= key exactly when due <= key * tick), so that a
 * popped bucket's timers are told due by a compare, not an idiv each (a
 * service's 1 ms tick on its nanosecond clock). Past the int64 range at
 * the top every due time is at or before it; at the bottom, only
 * INT64_MIN, which is at or before every now, so firing it is never early. */
hot_inline int64_t exact_due_by(const struct tw_wheel *w, int64_t key)
{
	int64_t by;

	if (w->tick == 1)
		return key;
	if (__builtin_expect(__builtin_mul_overflow(key, w->tick, &by), 0))
		return key < 0 ? INT64_MIN : INT64_MAX;
	return by;
}

/* Exact mode's floor(key / span) with span = 1 << shift: the compiler's
 * >> on a negative int64_t must be arithmetic (gcc and clang document it;
 * checked here so that a compiler that differs fails to build). */
_Static_assert((-3 >> 1) == -2, "right shift of a negative value must floor");

static inline int64_t shift_floor(int64_t key, unsigned shift)
{
	return key >> shift;
}

static inline void mark_empty(struct tw_wheel *w, struct tw_bucket *b)
{
	w->levels[b->level - 1].occupied[b->slot / 64] &=
		~((uint64_t)1 << (b->slot % 64));
}

/* Out of line in wheel.c: the hot paths only test for an observer. */
cold_path void tw__notify_observer(const struct tw_wheel *w,
				   enum tw_event_kind kind, unsigned level,
				   unsigned slot, int64_t time,
				   const struct tw_timer *t);

/* A macro, so that without an observer the event's arguments (some of
 * them multiplications that saturate) are never computed. */
#define notify(w, kind, level, slot, time, t)                                 \
	do {                                                                  \
		if ((w)->observer)                                            \
			tw__notify_observer((w), (kind), (level), (slot),     \
					    (time), (t));                     \
	} while (0)

static inline void bucket_append(struct tw_bucket *b, struct tw_timer *t)
{
	list_append(&b->head, &t->link);
	b->count++;
	t->bucket = b;
}

/* An empty bucket's min_key is INT64_MAX from the moment it empties,
 * before any callback can run (see bucket_first_key). */
static inline void bucket_take(struct tw_bucket *b, struct tw_timer *t)
{
	list_unlink(&t->link);
	t->bucket = NULL;
	if (--b->count == 0)
		b->min_key = INT64_MAX;
}

#ifdef TW_DEBUG
/* The debug build's table (debug.h) holds every timer pending in a wheel,
 * so that tw_timer_init() on one is named at the call instead of crashing
 * a later advance in the bucket list it broke. (A service's timers are
 * in it too; their init is tw_service_timer_init(), which the service's
 * own table checks.) It also keeps w->count, the running count that
 * tw_wheel_check() holds the buckets' sum to (I7): a release build
 * keeps none (tw_wheel_count() sums the buckets), so that no add,
 * cancel or fire stores to the wheel's count. */
static inline void debug_pending(struct tw_wheel *w, const struct tw_timer *t,
				 bool pending)
{
	if (pending)
		w->count++;
	else
		w->count--;
	tw__debug_set(TW_DBG_WHEEL_TIMER, t, pending, (uintptr_t)w);
}
#else
static inline void debug_pending(struct tw_wheel *w, const struct tw_timer *t,
				 bool pending)
{
	(void)w;
	(void)t;
	(void)pending;
}
#endif

/* A level bucket of exact mode (the only kind that drains) starts or
 * stops draining: no_window_stay follows, on top of the tick. */
static inline void set_draining(const struct tw_wheel *w, struct tw_bucket *b,
				bool draining)
{
	b->draining = draining;
	b->no_window_stay = draining || w->tick != 1;
}

static inline bool no_callback(const struct tw_wheel *w, const struct tw_timer *t)
{
	(void)w;
	return !t->fn;
}

#ifdef TW_DEBUG
/* Why a wheel call's arguments are refused (the debug build says so). */
static inline const char *bad_wheel_call(const struct tw_wheel *w,
					 const struct tw_timer *t)
{
	return !w	    ? "the wheel is NULL"
	       : !w->buckets ? "the wheel is not initialised (tw_wheel_init)"
	       : !t	    ? "the timer is NULL"
			    : "the timer has no callback (tw_timer_init(t, fn) "
			      "with a non-NULL fn)";
}
#endif

/* The hot public calls (add, cancel, reschedule and their variants).
 * Compiled as the amalgamation (tools/amalgamate.sh) into the caller's
 * own translation unit, they are inline definitions there as well as
 * external ones (the public header declares them without inline, so each
 * still has its one external definition and the ABI is the library's),
 * and the compiler puts their bodies into the caller's loop: no call,
 * and checks the caller's code already settles fold away. */
#if defined(TW_AMALGAMATION) && defined(__clang__)
#define public_hot __attribute__((always_inline)) /* clang: no "inline", */
#elif defined(TW_AMALGAMATION) && defined(__GNUC__) /* which it would take */
#define public_hot inline __attribute__((always_inline)) /* for C99's  */
#else /* inline definition; gcc wants it beside always_inline */
#define public_hot
#endif

/* The public calls that change a wheel say, in the debug build (TW_DEBUG),
 * that they are inside it (debug.h), so that a second thread coming in
 * meanwhile is named at its call; elsewhere these are nothing. */
#define WHEEL_ENTER(w, call)                                                  \
	do {                                                                  \
		if (w)                                                        \
			TW_DEBUG_WHEEL_ENTER((w), (call));                    \
	} while (0)
#define WHEEL_LEAVE(w)                                                        \
	do {                                                                  \
		if (w)                                                        \
			TW_DEBUG_WHEEL_LEAVE(w);                              \
	} while (0)

/* ---- shared by the files, out of line ---- */

/* wheel.c */
struct tw_level *tw__add_level(struct tw_wheel *w);
void tw__advance_clocks(struct tw_wheel *w, int64_t key);
int64_t tw__move_down(struct tw_wheel *w, struct tw_bucket *b, size_t n);
/* kafka.c */
void tw__insert_kafka(struct tw_wheel *w, struct tw_timer *t, int64_t key);
int64_t tw__advance_kafka(struct tw_wheel *w, int64_t limit);
/* exact.c */
void tw__insert_exact_slow(struct tw_wheel *w, struct tw_timer *t, int64_t key);
int64_t tw__advance_exact(struct tw_wheel *w, int64_t limit);
int64_t tw__advance_resume(struct tw_wheel *w);
int64_t tw__advance_whole_buckets(struct tw_wheel *w, int64_t limit);
bool tw__next_key_exact_scan(const struct tw_wheel *w, int64_t *key);
struct tw_bucket *tw__level_scan(const struct tw_wheel *w,
				 const struct tw_level *lv, unsigned start);
/* window.c */
int64_t tw__fire_windowed(struct tw_wheel *w, struct tw_bucket *b);

/* ---- the hot paths, inlined into each public call ---- */

/* What the hot paths rarely need, out of their way but in each file that
 * inlines them: the compiler then knows which registers a call to one of
 * them leaves alone, and the hot path saves none around it (a call to
 * another file would make it keep values on the stack). */

/* A bucket that turns non-empty: its expiration and pop time, its
 * min_key, its occupancy bit, and upper_pop if it is above level 1. */
static inline void fill_bucket(struct tw_wheel *w, struct tw_level *lv,
			       struct tw_bucket *b, int64_t number, int64_t key)
{
	b->expiration = (int64_t)((uint64_t)number << lv->shift);
	/* (number - 1) * span, saturated at the bottom of int64 (lead ==
	 * span above level 1). */
	b->pop_at = !lv->lead ? b->expiration
		    : b->expiration < INT64_MIN + (int64_t)lv->lead
			    ? INT64_MIN
			    : b->expiration - (int64_t)lv->lead;
	b->has_expiration = true;
	b->min_key = key;
	lv->occupied[b->slot / 64] |= (uint64_t)1 << (b->slot % 64);
	if (lv != w->levels && b->pop_at < w->upper_pop)
		w->upper_pop = b->pop_at;
}

cold_local void bucket_fill(struct tw_wheel *w, struct tw_level *lv,
			    struct tw_bucket *b, int64_t number, int64_t key)
{
	fill_bucket(w, lv, b, number, key);
}

cold_local void notify_placed(const struct tw_wheel *w,
			      const struct tw_timer *t)
{
	const struct tw_bucket *b = t->bucket;

	tw__notify_observer(w, TW_EV_PLACED, b->level, b->slot,
			    tw__ticks_to_time(w, b->expiration), t);
}

/* File a timer that is new (from add or reschedule). A timer due now
 * waits in the ready list for the next advance. In kafka mode "due now"
 * is Kafka's test (its tick has been reached by level 1's clock) -- and,
 * from a callback, also any tick up to the one the advance under way runs
 * to: Kafka's clock lags the caller's, so such a timer went into a bucket
 * this very advance was about to pop, and a callback that re-added itself
 * ran again in the same advance. Kafka itself runs an add that is
 * already due at once, on an executor thread, so its callers cannot rely
 * on either order; ours can rely on "the next advance". */
cold_local void place_ready(struct tw_wheel *w, struct tw_timer *t)
{
	bucket_append(tw__ready_list(w, w->ready_cur), t);
	notify(w, TW_EV_READY, TW_LEVEL_READY, 0, 0, t); /* names no time */
}

/* A timer just appended with a key at or before its bucket's min_key:
 * the bucket was empty (an empty bucket keeps min_key at INT64_MAX --
 * bucket_init, bucket_take, unlink_pending -- so that the add has one
 * test for both; tw_wheel_check() checks it) or its min_key moves down.
 * Called last, with nothing of the caller's to keep across it. */
rare_local void bucket_first_key(struct tw_wheel *w, struct tw_level *lv,
				 struct tw_bucket *b, int64_t key)
{
	if (b->count == 1)
		fill_bucket(w, lv, b, shift_floor(key, lv->shift), key);
	else if (key < b->min_key)
		b->min_key = key;
}

/* Timer t, already counted as pending, first in bucket b of level lv
 * (above level 1; number is b's), where it fires when b pops: the place
 * of a windowed timer (window.c) and of a timer a drain moves that is due
 * at a pop (exact.c). Its key is at or before the pop, which is before
 * b's expiration: that is what marks it. */
static inline void bucket_put_first(struct tw_wheel *w, struct tw_level *lv,
				    struct tw_bucket *b, struct tw_timer *t,
				    int64_t number)
{
	int64_t pop;

	if (b->count == 0)
		bucket_fill(w, lv, b, number, (int64_t)((uint64_t)(number - 1) << lv->shift));
	pop = b->pop_at;
	list_append(b->head.next, &t->link); /* before the first */
	lv->windowed = true;
	b->count++;
	t->bucket = b;
	if (pop < b->min_key)
		b->min_key = pop;
	if (w->observer)
		notify_placed(w, t);
}

/* Exact mode's level for a distance of at least 1 tick from level 1's
 * clock, with 64 buckets a level: level L holds distances below
 * 2^(5L + 6), so the index of distance's highest bit, h, names it:
 * floor((h - 1) / 5), 0 for h = 0, which (h * 51) >> 8 is for every h in
 * 0..63 -- a bit scan and a multiply, no loop over the levels below
 * (whose branch a random due time would mispredict) and no division. */
static inline unsigned level64(uint64_t distance)
{
	return (((unsigned)__builtin_clzll(distance) ^ 63) * 51) >> 8;
}

/* Exact mode's insert at 2^bits buckets a level (bits a constant
 * wherever it is inlined: 6 on every public call of the default size,
 * 7 and 8 out of line in exact.c), for a key after level 1's clock
 * (every caller's: a timer due by then fires or waits in the ready list)
 * and nlevels levels in use: the level found at once, its bucket number a
 * shift and its slot a mask, a bucket queued by setting its level's
 * occupancy bit. A bucket also keeps the smallest key it has held since
 * it last emptied, so next_expiry can name the tick its first timer
 * fires at instead of the tick it cascades at.
 *
 * With 2^bits buckets a level, each ticking at half the interval below, a
 * level holds distances below 2^((bits - 1)L + bits), so the count of
 * distance's bits names the level: (log2 - 1) / (bits - 1) levels up,
 * level64's multiply for 64 buckets; "| 2" makes a distance below 2^bits
 * give level 1 without a branch ("| 1" for level64).
 *
 * It is split for speed: the add every caller makes -- the level found at
 * once, the bucket already queued -- is a few dozen instructions with no
 * call in it, so the compiler keeps it in scratch registers and saves
 * none; a bucket that fills or a key before its bucket's min_key (one
 * test: above), and (false returned, nothing done) a level still to be
 * created, or a key one bucket past the level found, are handled out of
 * line. levels is w->levels, read by the caller before its stores; the
 * caller tells the observer. */
hot_inline bool file_exact(struct tw_level *levels, uint32_t nlevels,
			   struct tw_wheel *w, struct tw_timer *t, int64_t key,
			   unsigned bits)
{
	uint64_t distance = (uint64_t)key - (uint64_t)levels[0].clock;
	unsigned i = bits == 6 ? level64(distance | 1)
			       : (unsigned)(62 - __builtin_clzll(distance | 2)) / (bits - 1);
	struct tw_level *lv;
	struct tw_bucket *b;
	int64_t number;

	if (__builtin_expect(i >= nlevels, 0))
		return false;
	lv = &levels[i];
	number = shift_floor(key, lv->shift);
	if (__builtin_expect((uint64_t)number - (uint64_t)lv->clock >=
				     (uint64_t)1 << bits, 0))
		return false;
	b = &lv->slots[(uint64_t)number & (((uint64_t)1 << bits) - 1)];
	bucket_append(b, t);
	if (__builtin_expect(key <= b->min_key, 0))
		bucket_first_key(w, lv, b, key);
	return true;
}

/* The size whose add is inlined into every public call: the default's,
 * 64 buckets a level (2^6), by file_exact. A build that makes another
 * size its default inlines that one instead (-DTW_EXACT_INLINE_BITS=8 for
 * 256: how the geometry section of docs/performance.md measured 256 as a
 * default); the other sizes take the same path out of line, with their
 * own constants. */
#ifndef TW_EXACT_INLINE_BITS
#define TW_EXACT_INLINE_BITS 6
#endif

/* Exact mode's insert, any size: the inlined size's short path, or the
 * slow path in exact.c (any level, any size, levels created as needed). */
hot_inline void insert_exact(struct tw_wheel *w, struct tw_timer *t, int64_t key)
{
	if (__builtin_expect(w->size == 1u << TW_EXACT_INLINE_BITS, 1) &&
	    file_exact(w->levels, w->nlevels, w, t, key, TW_EXACT_INLINE_BITS)) {
		if (__builtin_expect(w->observer != NULL, 0))
			notify_placed(w, t);
		return;
	}
	tw__insert_exact_slow(w, t, key);
}

/* File a timer that is new (from add or reschedule), due at due (already
 * in t->due). The wheels most callers make (exact mode, a tick of 1, 64
 * buckets, no observer) have their levels in use in levels[0].fast_levels
 * (others 0): a due time after now is filed by file_exact with no other
 * test, on fields read before the first store; anything it does not file
 * takes the general path, which tests it all again. */
hot_inline void place_new(struct tw_wheel *w, struct tw_timer *t, int64_t due)
{
	struct tw_level *levels = w->levels;
	int64_t key;

	debug_pending(w, t, true);
	if (__builtin_expect(due > w->now, 1) &&
	    file_exact(levels, levels->fast_levels, w, t, due, 6))
		return;
	/* The general path reads the wheel afresh: what the short path
	 * read, kept in registers for it, would cost the short path a move
	 * each (an empty asm: no instruction). */
	compiler_barrier();
	/* The mode is tested once: exact mode's add is the one to keep
	 * short. */
	if (w->mode == TW_MODE_EXACT) {
		if (due <= w->now)
			place_ready(w, t);
		else
			insert_exact(w, t, exact_key(w, due));
		return;
	}
	key = timer_key(w, due);
	if (key <= w->levels[0].clock ||
	    ((w->advancing & TW_IN_ADVANCE) && key <= tw__due_limit(w, w->now)))
		place_ready(w, t);
	else
		tw__insert_kafka(w, t, key);
}

/* A level bucket that has just emptied: min_key back to INT64_MAX (see
 * bucket_first_key); in exact mode, which keeps only non-empty buckets
 * queued (so next_expiry never reports a time when there is nothing to
 * do), out of the queue. */
static inline void bucket_emptied(struct tw_wheel *w, struct tw_bucket *b)
{
	b->min_key = INT64_MAX;
	if (w->mode == TW_MODE_EXACT && b->has_expiration) {
		mark_empty(w, b);
		b->has_expiration = false;
	}
}

/* The bucket's count last, so that its test needs no reload. The
 * timer's own links are left as they were: t->bucket alone says whether
 * it is pending (a store fewer on every cancel and move). */
hot_inline void unlink_pending(struct tw_wheel *w, struct tw_timer *t)
{
	struct tw_bucket *b = t->bucket;
	struct tw_link *next = t->link.next, *prev = t->link.prev;

	debug_pending(w, t, false);
	prev->next = next;
	next->prev = prev;
	t->bucket = NULL;
	if (--b->count == 0)
		bucket_emptied(w, b);
}

/* A mover's append of t to nb, which it counts and names as t's bucket;
 * the list's last link before it is returned (its head: nb was empty). */
hot_inline struct tw_link *append_moved(struct tw_bucket *nb, struct tw_timer *t)
{
	struct tw_link *prev = nb->head.prev;

	t->link.next = &nb->head;
	prev->next = &t->link;
	t->link.prev = prev;
	nb->head.prev = &t->link;
	nb->count++;
	t->bucket = nb;
	return prev;
}

/* b without the taken timers before l, its first one now (the list's
 * head if none is left). */
static inline void bucket_cut(struct tw_bucket *b, struct tw_link *l, size_t taken)
{
	b->head.next = l;
	l->prev = &b->head;
	b->count -= taken;
	if (b->count == 0)
		b->min_key = INT64_MAX;
}

/* The first timer of b out of it, its successor next: a pop's take. */
hot_inline void take_first(struct tw_bucket *b, struct tw_timer *t,
			   struct tw_link *next)
{
	t->bucket = NULL;
	bucket_cut(b, next, 1);
}

static inline void fire(struct tw_wheel *w, struct tw_timer *t)
{
	debug_pending(w, t, false);
	notify(w, TW_EV_FIRED, 0, 0, w->now, t);
	t->fn(w, t);
}

/* ---- exact mode's queue: the occupancy bitmaps ----
 *
 * A level's queued buckets are the set bits of its occupied words; the
 * buckets ahead of its clock, in time order, are the slots from
 * (clock + 1) & mask onwards, wrapping. So the next one is a shift and a
 * count of trailing zeros (at up to 64 buckets a level; a scan of the
 * words above that, in exact.c), and no heap is kept. */
/* wide: the wheel has more than 64 buckets a level (a constant where the
 * caller has tested it once, as exact.c's advance does). */
/* above: lv is a level above level 1 (a constant where the caller knows
 * it). */
hot_inline struct tw_bucket *level_next_at(const struct tw_wheel *w,
					   const struct tw_level *lv, bool wide,
					   bool above)
{
	uint64_t occupied = lv->occupied[0], ahead;
	/* Level 1 from its clock on: when a bucket above pops at the tick
	 * of a level 1 bucket (ties go up first), the clock reaches that
	 * bucket before it is flushed. */
	unsigned start = (unsigned)((uint64_t)(above ? lv->clock + 1 : lv->clock) &
				    (w->size - 1));

	if (wide)
		return tw__level_scan(w, lv, start);
	if (!occupied)
		return NULL;
	/* The word turned right by start (one rotate): the slots from
	 * start on come first, then the ones before it, which a level of
	 * fewer than 64 buckets leaves at the top (64 - start + slot). */
	ahead = (occupied >> start) | (occupied << ((64 - start) & 63));
	return &lv->slots[(start + (unsigned)__builtin_ctzll(ahead)) & 63];
}

hot_inline struct tw_bucket *level_next_in(const struct tw_wheel *w,
					   const struct tw_level *lv, bool wide)
{
	return level_next_at(w, lv, wide, lv != w->levels);
}

static inline struct tw_bucket *level_next(const struct tw_wheel *w,
					   const struct tw_level *lv)
{
	return level_next_in(w, lv, w->size > 64);
}

/* An event loop asks before every advance, so the common answer is kept
 * to one bit scan: every bucket above level 1 pops at upper_pop or later
 * (I4) and holds no key below its pop time, and a drain has no timer due
 * before its end (nor does it end before upper_pop) and asks for no wake
 * before levels[0].drain_wake, so a level 1 bucket at or before both is
 * the answer; the scan of every level (exact.c) is left for the rest. */
static inline bool next_key_exact(const struct tw_wheel *w, int64_t *key)
{
	const struct tw_bucket *b;

	if ((b = level_next(w, w->levels)) != NULL && b->min_key <= w->upper_pop &&
	    (!w->ndraining || b->min_key <= w->levels[0].drain_wake)) {
		*key = b->min_key;
		return true;
	}
	return tw__next_key_exact_scan(w, key);
}

#endif
