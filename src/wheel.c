/* SPDX-License-Identifier: MIT */
/*
 * wheel.c — Kafka's hierarchical timing wheel, and a faster exact one.
 *
 * ==========================================================================
 *  D E S I G N
 * ==========================================================================
 *
 * The problem. A server holds millions of timeouts and cancels almost all of
 * them before they fire. A heap (the JDK's DelayQueue, libuv, libev) pays
 * O(log n) on every add and cancel. A timing wheel pays O(1): a timer goes
 * into the bucket its due time hashes to, and leaves it by unlinking itself.
 *
 * Buckets. A wheel of wheel_size buckets, each covering `tick` time units,
 * covers interval = tick * wheel_size. A timer due at d goes into bucket
 * (d / tick) mod wheel_size — Kafka's "virtual id" modulo the size — and the
 * bucket remembers its expiration, virtualId * tick: the start of the tick
 * it covers. A bucket is Kafka's TimerTaskList: a doubly linked list through
 * the timers' own links (struct tw_timer is the TimerTaskEntry, embedded in
 * the caller's object, so adding allocates nothing).
 *
 * Overflow wheels. A due time beyond [currentTime, currentTime + interval)
 * goes up a level: level n+1 has the same number of buckets, and its tick is
 * level n's interval. A level is created the first time something needs it,
 * with its clock taken from the level below and rounded down to its own
 * tick. When a higher bucket expires, its timers are not run but re-added:
 * the clock has moved, so each now lands in a lower, finer level — or fires.
 *
 * The bucket queue. Nothing ticks. In kafka mode every bucket that holds
 * timers is in a priority queue keyed by its expiration (Kafka's DelayQueue
 * of buckets), so tw_wheel_advance() pops the buckets whose time has come,
 * moves the clocks straight to each one's expiration and flushes it; empty
 * stretches of time cost nothing, and tw_wheel_next_expiry() is the queue's
 * head. The queue holds buckets, not timers: at most levels * wheel_size
 * entries however many timers there are.
 *
 * Exact mode replaces the heap with one 64-bit occupancy word per level
 * (bit s set iff slot s holds a queued bucket) and makes every level's
 * size a power of two, so that filing a timer is a shift and a mask and
 * finding a level's next bucket is a shift and a count of trailing zeros
 * from the slot after its clock (wahern/timeout's idea). Advance looks at
 * level 1's next bucket on every step but at the levels above only when
 * upper_pop, a lower bound on their next pop, says one of them may come
 * first: once per bucket that pops, not once per timer.
 *
 * Worked example (seed 001): tick 1000, wheel_size 3, start 1675752020558,
 * seven tasks due 1..7 s later, in kafka mode.
 *   level 1: tick 1000, currentTime ...020000, range [...020000, ...023000).
 *   task1 (due ...021558): virtualId 1675752021, bucket 0, expiration
 *     ...021000. task2: bucket 1, expiration ...022000.
 *   task3 (...023558) is out of level 1's range, so level 2 is created:
 *     tick 3000, startMs = level 1's ...020000, rounded down to ...018000;
 *     range [...018000, ...027000). virtualId 558584007, bucket 0,
 *     expiration ...021000. task4..6 share level 2 bucket 1 (...024000).
 *   task7 (...027558) needs level 3: tick 9000, currentTime ...012000,
 *     bucket 2, expiration ...021000.
 *   The queue now holds ...021000 three times (L1#0, L2#0, L3#2), ...022000
 *   and ...024000. Advancing to ...021000 pops all three: task1 fires (at
 *   ...021000, 558 ms before its due time — Kafka's buckets fire at their
 *   start), task3 drops to level 1 bucket 2 (...023000) and task7 to level 2
 *   bucket 2 (...027000). Then one bucket a second: ...022000 ... ...027000.
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
 * so that no advance is left with all of it (issue 14: 81 % of stepped
 * advances fired nothing before, 0 % now in the benchmark's loops).
 *
 * Two modes. Kafka fires a bucket at its start, and its clock only moves to
 * the expirations of the buckets it pops, so a timer can run up to a tick
 * early (18.7 % of 1e6 tasks did in our measurement of Kafka's SystemTimer).
 * TW_MODE_KAFKA keeps that, bit for bit, to reproduce Kafka's traces. The
 * default, TW_MODE_EXACT, files a timer under ceil(due / tick) instead of
 * floor(due / tick): the same structure, with every timer in the bucket that
 * starts at the first tick boundary at or after its due time. So it never
 * fires early and is less than one tick late; a timer due at or before now
 * waits in a ready list and fires on the next advance; and advance moves the
 * clocks to now, so a relative timeout is always measured from the caller's
 * time, not from the last bucket popped.
 *
 * Ticks, not time units. All the arithmetic below is on tick numbers
 * (floor or ceil of due / tick) and each level's clock is a bucket number
 * (Kafka's currentTime / tickMs). Kafka's expressions map one to one —
 *     expiration < currentTime + tickMs     <=>  key <= level 1 clock
 *     expiration < currentTime + interval   <=>  key / span < clock + size
 *     currentTime = t - t % tickMs          <=>  clock = t / span
 * (with span = factor^(level-1) ticks, factor = wheel_size in kafka mode,
 * half of the rounded size in exact mode, where span is a power of two and
 * the division a shift) — but no product ever has to fit
 * in an int64_t: due times near INT64_MAX and negative start times are fine,
 * and levels are added until one covers the whole int64 range (at most 64,
 * 15 for wheel_size 20 in kafka mode, 13 for exact mode's 64). Division rounds toward minus infinity, which is
 * Kafka's for the non-negative times Kafka ever sees.
 *
 * Guarantees and costs.
 *   add, cancel, reschedule: O(1). Exact mode: a compare per level walked
 *     (levels are few), a shift, a mask, a list link and a bit set; no
 *     division when the tick is 1 (times already in ticks), one otherwise.
 *     Kafka mode: a division per level walked and a heap push when a
 *     bucket turns non-empty. The owner check reads the bucket, whose line
 *     the count update needs anyway (an address range test instead was
 *     measured 5-10 % slower: more instructions in a loop bound by cache
 *     misses leave fewer misses in flight). No allocation: tw_wheel_init() allocates every level's
 *     buckets (and kafka mode's queue) up front; a level is still
 *     "created" lazily in Kafka's sense (its clock is fixed when it is
 *     first needed).
 *   advance: exact mode O(buckets popped * levels / 64 + timers moved or
 *     fired), kafka mode O(buckets popped * log B + timers moved or fired);
 *     each timer moves down at most once per level; in exact mode the
 *     moves are spread over the tick before they are needed.
 *   next_expiry: exact mode O(levels) bit scans; kafka mode O(1).
 *   memory: 40 bytes per timer (struct tw_timer), nothing else per timer.
 *   order: buckets are popped by expiration, ties in the order they were
 *     queued; inside a bucket, timers in the order they joined it.
 *   callbacks: run only from advance, with the timer already unlinked, so
 *     they may add, cancel, reschedule or free any timer. A timer made due
 *     by a callback runs on the next advance, never in a loop.
 *
 * Invariants (checked by tw_wheel_check() in inspect.c, after every step of
 * the tests):
 *   I1 every timer in a level bucket has key / span == the bucket's number,
 *      and the bucket's expiration is that number * span; in exact mode a
 *      rescheduled timer may instead stay in a bucket that expires before
 *      its key (key >= expiration: re-filed when the bucket expires);
 *   I2 a bucket number b at level L satisfies clock < b < clock + size
 *      (<= clock + size on the unbounded top level), so no two live bucket
 *      numbers share a slot;
 *   I3 a bucket has an expiration iff it is in the queue (or it is its
 *      level's one draining bucket); in exact mode only non-empty buckets
 *      are queued (Kafka leaves a bucket emptied by cancel queued until it
 *      expires, and so does kafka mode); a queued bucket's pop time is its
 *      expiration, minus one level tick on early-cascade levels;
 *   I4 kafka mode: the queue is a heap on (pop time, queue order); exact
 *      mode: a level's occupancy bit s is set iff slots[s] is queued, no
 *      timer's key is below its bucket's min_key, and no bucket above
 *      level 1 pops (nor drain ends) before upper_pop;
 *   I5 level L's clock == level L-1's clock / factor (floor);
 *   I6 in exact mode, outside advance, level 1's clock == floor(now / tick);
 *   I7 the bucket counts add up to tw_wheel_count().
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bucket.h"
#include "debug.h"
#include "bucket_queue.h"
#include "list.h"
#include "wheel_internal.h"

/* ---- arithmetic that cannot overflow ---- */

int64_t tw__floor_div(int64_t x, int64_t d)
{
	int64_t q = x / d;

	if ((x % d != 0) && (x < 0))
		q--;
	return q;
}

int64_t tw__ceil_div(int64_t x, int64_t d)
{
	int64_t q = x / d;

	if ((x % d != 0) && (x > 0))
		q++;
	return q;
}

/* Floor division by a span, which may exceed INT64_MAX on the top levels. */
int64_t tw__span_div(int64_t x, uint64_t span)
{
	if (span > (uint64_t)INT64_MAX)
		return x < 0 ? -1 : 0;
	return tw__floor_div(x, (int64_t)span);
}

/* a * b clamped to the int64 range; b may exceed INT64_MAX. */
int64_t tw__mul_sat(int64_t a, uint64_t b)
{
	uint64_t magnitude, product;
	int64_t fits;

	if (a == 0 || b == 0)
		return 0;
	/* The common case without a division. */
	if (b <= (uint64_t)INT64_MAX &&
	    !__builtin_mul_overflow(a, (int64_t)b, &fits))
		return fits;
	if (a > 0)
		return (uint64_t)a > (uint64_t)INT64_MAX / b
			       ? INT64_MAX
			       : (int64_t)((uint64_t)a * b);
	magnitude = (uint64_t)0 - (uint64_t)a;
	if (magnitude > ((uint64_t)INT64_MAX + 1) / b)
		return INT64_MIN;
	product = magnitude * b; /* <= 2^63 */
	return product == (uint64_t)INT64_MAX + 1 ? INT64_MIN
						  : -(int64_t)product;
}

/* key * tick in time units, clamped to the int64 range. */
int64_t tw__ticks_to_time(const struct tw_wheel *w, int64_t key)
{
	if (key > INT64_MAX / w->tick)
		return INT64_MAX;
	if (key < INT64_MIN / w->tick)
		return INT64_MIN;
	return key * w->tick;
}

/* The add, cancel and reschedule paths are a few dozen instructions: a
 * call and its spills would be a good part of them. */
#if defined(__GNUC__)
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

int64_t tw__timer_key(const struct tw_wheel *w, int64_t due)
{
	return timer_key(w, due);
}

/* The last tick whose buckets are due at time now. */
int64_t tw__due_limit(const struct tw_wheel *w, int64_t now)
{
	/* In exact mode a timer due at INT64_MAX is filed under a boundary
	 * that is not representable; the end of time is when it fires. */
	if (w->mode == TW_MODE_EXACT && now == INT64_MAX)
		return tw__ceil_div(now, w->tick);
	return tw__floor_div(now, w->tick);
}

#if defined(__GNUC__)
#define prefetch(p) __builtin_prefetch(p)
#else
#define prefetch(p) ((void)(p))
#endif

static uint32_t slot_of(const struct tw_wheel *w, int64_t bucket_number)
{
	int64_t m = bucket_number % (int64_t)w->size;

	return (uint32_t)(m < 0 ? m + (int64_t)w->size : m);
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
	w->levels[b->level - 1].occupied &= ~((uint64_t)1 << b->slot);
}

static cold_path void notify_observer(const struct tw_wheel *w, enum tw_event_kind kind,
			    unsigned level, unsigned slot, int64_t time,
			    const struct tw_timer *t)
{
	struct tw_event ev = { kind, level, slot, time, t };

	w->observer->on_event(w->observer->arg, w, &ev);
}

/* A macro, so that without an observer the event's arguments (some of
 * them multiplications that saturate) are never computed. */
#define notify(w, kind, level, slot, time, t)                                 \
	do {                                                                  \
		if ((w)->observer)                                            \
			notify_observer((w), (kind), (level), (slot), (time), \
					(t));                                 \
	} while (0)

/* ---- buckets ---- */

static void bucket_init(struct tw_wheel *w, struct tw_bucket *b)
{
	size_t index = (size_t)(b - w->buckets);
	bool in_level = index < (size_t)w->max_levels * w->size;

	list_init(&b->head);
	b->level = in_level ? (uint8_t)(index / w->size + 1) : TW_LEVEL_READY;
	b->slot = in_level ? (uint32_t)(index % w->size) : 0;
	b->min_key = 0;
	b->expiration = 0;
	b->queue_seq = 0;
	b->queue_index = TW_NOT_QUEUED;
	b->count = 0;
	b->wheel = w;
	b->has_expiration = false;
	b->draining = false;
}

static void bucket_append(struct tw_bucket *b, struct tw_timer *t)
{
	list_append(&b->head, &t->link);
	b->count++;
	t->bucket = b;
}

static void bucket_take(struct tw_bucket *b, struct tw_timer *t)
{
	list_unlink(&t->link);
	b->count--;
	t->bucket = NULL;
}

/* Kafka's TimerTaskList.setExpiration + queue.offer: a bucket enters the
 * queue when it gets a new expiration. */
static void bucket_set_expiration(struct tw_wheel *w, struct tw_bucket *b,
				  int64_t expiration, int64_t pop_at)
{
	if (b->has_expiration && b->expiration == expiration)
		return;
	if (b->queue_index != TW_NOT_QUEUED)
		tw__bq_remove(w, b);
	b->expiration = expiration;
	b->pop_at = pop_at;
	b->has_expiration = true;
	tw__bq_push(w, b);
}

struct tw_bucket *tw__ready_list(const struct tw_wheel *w, unsigned which)
{
	return &w->buckets[(size_t)w->max_levels * w->size + which];
}

/* Timers tw_wheel_drain() has taken out and not yet handed back. */
struct tw_bucket *tw__hand_back_list(const struct tw_wheel *w)
{
	return &w->buckets[(size_t)w->max_levels * w->size + 2];
}

/* ---- levels ---- */

int64_t tw__level_clock_time(const struct tw_wheel *w, const struct tw_level *lv)
{
	return tw__ticks_to_time(w, tw__mul_sat(lv->clock, lv->span));
}

/* Kafka's addOverflowWheel: startMs is the current time of the level below,
 * rounded down to this level's tick. */
static struct tw_level *add_level(struct tw_wheel *w)
{
	struct tw_level *below = &w->levels[w->nlevels - 1];
	struct tw_level *lv = &w->levels[w->nlevels++];

	lv->clock = tw__floor_div(below->clock, (int64_t)w->factor);
	notify(w, TW_EV_LEVEL_ADDED, w->nlevels, 0, tw__level_clock_time(w, lv),
	       NULL);
	return lv;
}

/* Kafka's advanceClock, in ticks: a level moves when a whole bucket of its
 * own has passed, and then tells the level above. */
static void advance_clocks(struct tw_wheel *w, int64_t key)
{
	for (uint32_t i = 0; i < w->nlevels; i++) {
		struct tw_level *lv = &w->levels[i];
		int64_t number = w->mode == TW_MODE_EXACT
					 ? shift_floor(key, lv->shift)
					 : tw__span_div(key, lv->span);

		if (number <= lv->clock)
			break;
		lv->clock = number;
		notify(w, TW_EV_CLOCK, i + 1, 0, tw__level_clock_time(w, lv),
		       NULL);
	}
}

/* Kafka's TimingWheel.add for a timer that is not due: the first level
 * whose range holds it, creating levels as needed. key > level 1's clock.
 * Level L's clock is level 1's / span (I5), so its bucket number for key
 * is at least distance / span - 1 ahead of it: a level whose too_far the
 * distance reaches cannot hold the timer, and is passed without dividing. */
static void insert(struct tw_wheel *w, struct tw_timer *t, int64_t key)
{
	uint64_t distance = (uint64_t)key - (uint64_t)w->levels[0].clock;

	for (uint32_t i = 0;; i++) {
		struct tw_level *lv;
		int64_t number;

		lv = i < w->nlevels ? &w->levels[i] : add_level(w);
		if (!lv->unbounded && distance >= lv->too_far)
			continue;
		number = tw__span_div(key, lv->span);
		/* number > lv->clock here (I2), so the unsigned distance is
		 * exact even when it exceeds INT64_MAX. */
		if (lv->unbounded ||
		    (uint64_t)number - (uint64_t)lv->clock < w->size) {
			uint32_t slot = slot_of(w, number);
			struct tw_bucket *b = &lv->slots[slot];

			bucket_append(b, t);
			bucket_set_expiration(
				w, b, (int64_t)((uint64_t)number * lv->span),
				lv->lead ? tw__mul_sat(number - 1, lv->lead)
					 : (int64_t)((uint64_t)number * lv->span));
			notify(w, TW_EV_PLACED, i + 1, slot,
			       tw__ticks_to_time(w, b->expiration), t);
			return;
		}
	}
}

/* Exact mode's insert: the same levels, found the same way, but a bucket
 * number is a shift and its slot a mask, and a bucket is queued by setting
 * its level's occupancy bit. A bucket also keeps the smallest key it has
 * held since it last emptied, so next_expiry can name the tick its first
 * timer fires at instead of the tick it cascades at.
 *
 * It is split for speed (issue 24): the add every caller makes -- the
 * level found at once, the bucket already queued -- is a few dozen
 * instructions with no call in it, so the compiler keeps it in scratch
 * registers and saves none; a bucket that fills, a level still to be
 * created, the top level and an observer are handled out of line. */
static cold_path void bucket_fill(struct tw_wheel *w, struct tw_level *lv,
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
	lv->occupied |= (uint64_t)1 << b->slot;
	if (lv != w->levels && b->pop_at < w->upper_pop)
		w->upper_pop = b->pop_at;
}

static cold_path void notify_placed(const struct tw_wheel *w,
				    const struct tw_timer *t)
{
	const struct tw_bucket *b = t->bucket;

	notify_observer(w, TW_EV_PLACED, b->level, b->slot,
			tw__ticks_to_time(w, b->expiration), t);
}

/* Any level, any size: the first level whose range holds the key,
 * creating levels as needed. */
static void insert_exact_slow(struct tw_wheel *w, struct tw_timer *t, int64_t key)
{
	uint64_t distance = (uint64_t)key - (uint64_t)w->levels[0].clock;

	for (uint32_t i = 0;; i++) {
		struct tw_level *lv;
		struct tw_bucket *b;
		int64_t number;

		lv = i < w->nlevels ? &w->levels[i] : add_level(w);
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

hot_inline void insert_exact(struct tw_wheel *w, struct tw_timer *t, int64_t key)
{
	uint64_t distance = (uint64_t)key - (uint64_t)w->levels[0].clock;
	struct tw_level *lv;
	struct tw_bucket *b;
	int64_t number;
	unsigned i;

	/* With 64 buckets a level holds distances below 2^(5L + 6) at most,
	 * so the count of distance's bits names the level: no loop over the
	 * levels below, whose branch a random due time would mispredict. */
	if (__builtin_expect(w->size != 64, 0))
		goto slow;
	/* (bits - 2) / 5 levels up; "| 2" makes a distance below 64 give
	 * level 1 without a branch. */
	i = (unsigned)(62 - __builtin_clzll(distance | 2)) / 5;
	if (__builtin_expect(i >= w->nlevels, 0))
		goto slow;
	lv = &w->levels[i];
	number = shift_floor(key, lv->shift);
	if (__builtin_expect((uint64_t)number - (uint64_t)lv->clock >= 64, 0))
		goto slow;
	b = &lv->slots[(uint64_t)number & 63];
	if (__builtin_expect(b->count == 0, 0))
		bucket_fill(w, lv, b, number, key);
	else if (key < b->min_key)
		b->min_key = key;
	bucket_append(b, t);
	if (__builtin_expect(w->observer != NULL, 0))
		notify_placed(w, t);
	return;
slow:
	insert_exact_slow(w, t, key);
}

#ifdef TW_DEBUG
/* The debug build's table (debug.h) holds every timer pending in a wheel
 * of the caller's, so that tw_timer_init() on one is named at the call
 * instead of crashing a later advance in the bucket list it broke. The
 * service's wheel (it has an expire function) is left out: its timers are
 * tracked as the service's, and their init is tw_service_timer_init(). */
static void debug_pending(const struct tw_wheel *w, const struct tw_timer *t,
			  bool pending)
{
	if (!w->expire)
		tw__debug_set(TW_DBG_WHEEL_TIMER, t, pending, (uintptr_t)w);
}
#else
#define debug_pending(w, t, pending) ((void)0)
#endif

/* File a timer that is new (from add or reschedule). A timer due now
 * waits in the ready list for the next advance. In kafka mode "due now"
 * is Kafka's test (its tick has been reached by level 1's clock) -- and,
 * from a callback, also any tick up to the one the advance under way runs
 * to: Kafka's clock lags the caller's, so such a timer went into a bucket
 * this very advance was about to pop, and a callback that re-added itself
 * ran again in the same advance (issue 13, bug 11). Kafka itself runs an
 * add that is already due at once, on an executor thread, so its callers
 * cannot rely on either order; ours can rely on "the next advance". */
static cold_path void place_ready(struct tw_wheel *w, struct tw_timer *t)
{
	bucket_append(tw__ready_list(w, w->ready_cur), t);
	notify(w, TW_EV_READY, TW_LEVEL_READY, 0, w->now, t);
}

/* timer_key() where the mode is known to be exact (the window calls). */
hot_inline int64_t exact_key(const struct tw_wheel *w, int64_t due)
{
	return w->tick == 1 ? due : tw__ceil_div(due, w->tick);
}

hot_inline void place_new(struct tw_wheel *w, struct tw_timer *t)
{
	int64_t key;

	w->count++;
	debug_pending(w, t, true);
	/* The mode is tested once: exact mode's add is the one to keep
	 * short. */
	if (w->mode == TW_MODE_EXACT) {
		if (t->due <= w->now)
			place_ready(w, t);
		else
			insert_exact(w, t, exact_key(w, t->due));
		return;
	}
	key = timer_key(w, t->due);
	if (key <= w->levels[0].clock ||
	    (w->advancing && key <= tw__due_limit(w, w->now)))
		place_ready(w, t);
	else
		insert(w, t, key);
}

hot_inline void unlink_pending(struct tw_wheel *w, struct tw_timer *t)
{
	struct tw_bucket *b = t->bucket;

	bucket_take(b, t);
	w->count--;
	debug_pending(w, t, false);
	/* Exact mode keeps only non-empty buckets queued, so next_expiry
	 * never reports a time when there is nothing to do. */
	if (w->mode == TW_MODE_EXACT && b->count == 0 && b->has_expiration) {
		mark_empty(w, b);
		b->has_expiration = false;
	}
}

static void fire(struct tw_wheel *w, struct tw_timer *t)
{
	w->count--;
	debug_pending(w, t, false);
	notify(w, TW_EV_FIRED, 0, 0, w->now, t);
	(w->expire ? w->expire : t->fn)(w, t);
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
static bool early_cascade(enum tw_mode mode, uint32_t size)
{
	return mode == TW_MODE_EXACT && size >= 4;
}

/* Kafka's bucket.flush(addTimerTaskEntry), for up to n timers: each one of
 * a popped bucket either fires (its tick has come) or drops to a lower
 * level. One timer at a time, so a callback may cancel the ones still
 * waiting here. Returns how many fired. */
static int64_t move_down(struct tw_wheel *w, struct tw_bucket *b, size_t n)
{
	int64_t fired = 0;

	while (n-- && !list_empty(&b->head)) {
		struct tw_timer *t = list_timer(b->head.next);
		int64_t key = timer_key(w, t->due);

		/* The list is a chain of cache misses: start on the next one
		 * while this one moves. */
		prefetch(t->link.next);
		bucket_take(b, t);
		if (key <= w->levels[0].clock) {
			fire(w, t);
			fired++;
		} else if (w->drop && w->drop(w, t)) {
			w->count--; /* cancelled by its owner: not filed again */
		} else if (w->mode == TW_MODE_EXACT) {
			insert_exact(w, t, key);
		} else {
			insert(w, t, key);
		}
	}
	return fired;
}

/* Move up to n timers of a draining bucket down (none fire normally: a
 * draining bucket's timers are due from its expiration on). */
static int64_t drain_some(struct tw_wheel *w, struct tw_level *lv, size_t n)
{
	struct tw_bucket *b = lv->draining;
	int64_t fired = move_down(w, b, n);

	if (list_empty(&b->head)) {
		b->draining = false;
		lv->draining = NULL;
		w->ndraining--;
	}
	return fired;
}

/* Spread each drain over the ticks before its deadline (its bucket's
 * expiration), in proportion to the ticks this advance covers: an event
 * loop that wakes every tick moves 1/left of the rest each time; one that
 * wakes less often moves more per wake, never all at once unless the
 * deadline has come. pop_at remembers how far the drain has got. */
static int64_t drain_share(struct tw_wheel *w, int64_t limit)
{
	int64_t fired = 0;

	for (uint32_t i = 1; w->ndraining && i < w->nlevels; i++) {
		struct tw_level *lv = &w->levels[i];
		struct tw_bucket *b = lv->draining;
		double elapsed, total;
		size_t share;

		if (!b || limit <= b->pop_at)
			continue;
		elapsed = (double)((uint64_t)limit - (uint64_t)b->pop_at);
		total = (double)((uint64_t)b->expiration - (uint64_t)b->pop_at);
		share = (size_t)((double)b->count * elapsed / total) + 1;
		b->pop_at = limit;
		fired += drain_some(w, lv, share);
	}
	return fired;
}

/* ---- exact mode's queue: the occupancy bitmaps ----
 *
 * A level's queued buckets are the set bits of its occupied word; the
 * buckets ahead of its clock, in time order, are the slots from
 * (clock + 1) & mask onwards, wrapping. So the next one is a shift and a
 * count of trailing zeros, and no heap is kept. */
static struct tw_bucket *level_next(const struct tw_wheel *w,
				    const struct tw_level *lv)
{
	uint64_t occupied = lv->occupied, ahead;
	unsigned start;

	if (!occupied)
		return NULL;
	/* Level 1 from its clock on: when a bucket above pops at the tick
	 * of a level 1 bucket (ties go up first), the clock reaches that
	 * bucket before it is flushed. */
	start = (unsigned)((uint64_t)(lv == w->levels ? lv->clock : lv->clock + 1) &
			   (w->size - 1));
	ahead = occupied >> start;
	return &lv->slots[ahead ? start + (unsigned)__builtin_ctzll(ahead)
				: (unsigned)__builtin_ctzll(occupied)];
}

/* The level's queued bucket after b, in time order (slots wrap from the
 * clock on), or NULL. */
static const struct tw_bucket *level_next_after(const struct tw_level *lv,
						const struct tw_bucket *b)
{
	uint64_t rest = lv->occupied & ~((uint64_t)1 << b->slot), ahead;
	unsigned from = b->slot + 1;

	if (!rest)
		return NULL;
	ahead = from < 64 ? rest >> from : 0;
	return &lv->slots[ahead ? from + (unsigned)__builtin_ctzll(ahead)
				: (unsigned)__builtin_ctzll(rest)];
}

/* The next event above level 1: a bucket that pops (starts draining) or
 * a drain that must end (its deadline has come). A tie goes to the drain:
 * a drain's timers must be down before anything at its deadline pops.
 * Refreshes upper_pop. */
static bool upper_next(struct tw_wheel *w, struct tw_level **level,
		       struct tw_bucket **pop, int64_t *when)
{
	bool found = false, best_drains = false;

	for (uint32_t i = 1; i < w->nlevels; i++) {
		struct tw_level *lv = &w->levels[i];
		struct tw_bucket *b;

		if (lv->draining &&
		    (!found || lv->draining->expiration < *when ||
		     (lv->draining->expiration == *when && !best_drains))) {
			found = best_drains = true;
			*when = lv->draining->expiration;
			*level = lv;
			*pop = NULL;
		}
		b = level_next(w, lv);
		if (b && (!found || b->pop_at < *when)) {
			found = true;
			best_drains = false;
			*when = b->pop_at;
			*level = lv;
			*pop = b;
		}
	}
	w->upper_pop = found ? *when : INT64_MAX;
	return found;
}

static void pop_bucket(struct tw_wheel *w, struct tw_bucket *b)
{
	mark_empty(w, b);
	b->has_expiration = false;
	notify(w, TW_EV_POPPED, b->level, b->slot,
	       tw__ticks_to_time(w, b->pop_at), NULL);
	advance_clocks(w, b->pop_at);
}

/* A popped bucket's windowed timers (windows, below) are its first ones,
 * each with a key at or before the pop: they fire now, whatever becomes
 * of the rest -- a bucket that drains moves its timers over a whole
 * level tick, which a window may not allow. What is left are exact
 * timers, none due before the bucket's expiration: min_key says so, so
 * that next_expiry does not name a tick the drain has passed. */
static int64_t fire_windowed(struct tw_wheel *w, struct tw_bucket *b)
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

/* The most timers a popped bucket moves down at once rather than in
 * shares: about a microsecond of work, well under one tick. */
#define SMALL_BUCKET 32

/* Kafka's advance loop with the heap replaced by the bitmaps: level 1's
 * next bucket is one bit scan away; the levels above are looked at only
 * when upper_pop says something up there may be due first, which is once
 * per bucket that pops, not once per tick or per timer. */
static int64_t advance_exact(struct tw_wheel *w, int64_t limit)
{
	struct tw_level *lv = NULL;
	struct tw_bucket *b0, *up = NULL;
	int64_t fired = 0, when = 0;

	for (;;) {
		b0 = level_next(w, &w->levels[0]);
		if (w->upper_pop <= limit &&
		    (!b0 || w->upper_pop <= b0->expiration) &&
		    upper_next(w, &lv, &up, &when) && when <= limit &&
		    (!b0 || when <= b0->expiration)) {
			if (!up) {
				fired += drain_some(w, lv, SIZE_MAX);
				continue;
			}
			pop_bucket(w, up);
			/* Only a bucket with a windowed timer has a min_key
			 * before its expiration. */
			if (up->min_key < up->expiration)
				fired += fire_windowed(w, up);
			/* A bucket small enough to move in one step is moved
			 * now: draining only pays for itself when moving
			 * everything at once would be a stall. */
			if (up->count <= SMALL_BUCKET) {
				fired += move_down(w, up, SIZE_MAX);
				continue;
			}
			/* The level's previous drain ended at this bucket's
			 * pop time at the latest (its deadline is this pop
			 * time or earlier, and ties go to the drain), so a
			 * level drains one bucket at a time (I3). */
			lv->draining = up;
			up->draining = true;
			w->ndraining++;
			continue;
		}
		if (!b0 || b0->expiration > limit)
			break;
		pop_bucket(w, b0);
		fired += move_down(w, b0, SIZE_MAX);
	}
	advance_clocks(w, limit);
	return fired + drain_share(w, limit);
}

/* ---- one jump without order (tw_wheel_advance_unordered) ----
 *
 * An advance that passes a bucket's whole range fires everything in it,
 * but the ordered advance still files those timers down level by level
 * (a timer 3 h out moves four times before it fires) so that they run in
 * tick order: about 1,000 instructions per timer in a one-jump expiry of
 * 1e5 timers (issue 24). When the caller does not need that order, such a
 * bucket is emptied where it is: each timer fires straight from it (or,
 * if a stays-put reschedule left a later key in it, is filed again). What
 * is left -- the one bucket per level that straddles the limit, and
 * level 1 -- then goes through the ordered advance. */

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
	uint64_t occupied = lv->occupied;

	while (occupied) {
		unsigned s = (unsigned)__builtin_ctzll(occupied);
		int64_t number = base + (int64_t)(((uint64_t)s - (uint64_t)base) &
						  (w->size - 1));

		if (number <= last)
			return &lv->slots[s];
		occupied &= occupied - 1;
	}
	return NULL;
}

/* Fire (or file again) every timer of a bucket taken out of the queue,
 * one at a time, so a callback may cancel the ones still waiting. */
static int64_t empty_bucket(struct tw_wheel *w, struct tw_bucket *b, int64_t limit)
{
	int64_t fired = 0;

	while (!list_empty(&b->head)) {
		struct tw_timer *t = list_timer(b->head.next);
		int64_t key = exact_key(w, t->due); /* exact mode only */

		prefetch(t->link.next);
		bucket_take(b, t);
		if (key <= limit) {
			fire(w, t);
			fired++;
		} else if (w->drop && w->drop(w, t)) {
			w->count--;
		} else {
			insert_exact(w, t, key);
		}
	}
	return fired;
}

static int64_t advance_whole_buckets(struct tw_wheel *w, int64_t limit)
{
	int64_t fired = 0;

	for (uint32_t i = w->nlevels; i-- > 0;) {
		struct tw_level *lv = &w->levels[i];
		struct tw_bucket *b;

		if (lv->draining && shift_floor(lv->draining->expiration, lv->shift) <=
					    last_whole_bucket(lv, limit)) {
			b = lv->draining;
			b->draining = false;
			lv->draining = NULL;
			w->ndraining--;
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
	}
	return fired;
}

/* The most timers one advance should have to move down: about 0.1-0.2 ms
 * of work. A bigger bucket asks for wake-ups of its own (below). */
#define DRAIN_CHUNK 2048

/* The tick at which exact mode next has work: level 1's next bucket, or
 * the smallest key of the next bucket of each level above and of each
 * drain -- a tick at which a timer fires, never one at which a bucket only
 * cascades, so that an event loop is not woken for cascades. Except where
 * waking only to fire would leave one advance a stall: a bucket of more
 * than DRAIN_CHUNK timers also asks for its pop tick, and while it drains,
 * for the tick by which its share reaches DRAIN_CHUNK -- one wake per
 * DRAIN_CHUNK timers moved, none for a bucket that small. (A loop that
 * only woke to fire slept through a 500,000-timer bucket's whole drain and
 * moved it in one 20-40 ms advance: the service's lateness, issue 14.) */
static bool next_key_exact_scan(const struct tw_wheel *w, int64_t *key)
{
	bool found = false;

	for (uint32_t i = 0; i < w->nlevels; i++) {
		const struct tw_level *lv = &w->levels[i];
		const struct tw_bucket *b = level_next(w, lv);
		const struct tw_bucket *d = lv->draining;
		int64_t k;

		/* On level 1 min_key is the bucket's own tick (a stays-put
		 * reschedule only moves later). */
		if (b) {
			const struct tw_bucket *b2;

			k = b->min_key;
			if (b->count > DRAIN_CHUNK && b->pop_at < k)
				k = b->pop_at;
			/* The bucket after it pops at this one's expiration,
			 * and its windowed timers fire then: possibly before
			 * this one's first timer (no later bucket's can). */
			if (lv->windowed && (b2 = level_next_after(lv, b)) != NULL &&
			    b2->min_key < k)
				k = b2->min_key;
			if (!found || k < *key)
				*key = k;
			found = true;
		}
		if (d && d->count) {
			k = d->min_key;
			if (d->count > DRAIN_CHUNK) {
				/* d->pop_at: drained up to; shares are
				 * count * elapsed / (expiration - pop_at). */
				double total = (double)((uint64_t)d->expiration -
							(uint64_t)d->pop_at);
				uint64_t step = (uint64_t)(total * DRAIN_CHUNK /
							   (double)d->count) + 1;

				if ((uint64_t)k - (uint64_t)d->pop_at > step)
					k = (int64_t)((uint64_t)d->pop_at + step);
			}
			if (!found || k < *key)
				*key = k;
			found = true;
		}
	}
	return found;
}

/* An event loop asks before every advance, so the common answer is kept
 * to one bit scan: with nothing draining, every bucket above level 1 pops
 * at upper_pop or later (I4) and holds no key below its pop time, so a
 * level 1 bucket at or before upper_pop is the answer; the scan of every
 * level is left for the rest. */
static bool next_key_exact(const struct tw_wheel *w, int64_t *key)
{
	const struct tw_bucket *b;

	if (!w->ndraining && (b = level_next(w, w->levels)) != NULL &&
	    b->min_key <= w->upper_pop) {
		*key = b->min_key;
		return true;
	}
	return next_key_exact_scan(w, key);
}

/* ---- public API ---- */

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

/* Exact mode's buckets per level: wheel_size rounded up to a power of two
 * (a slot is then a mask), at least 4 (so a level spans two ticks of the
 * one above: early cascades) and at most 64 (one occupancy word). */
static uint32_t exact_size(uint32_t wheel_size)
{
	uint32_t size = 4;

	while (size < wheel_size && size < 64)
		size *= 2;
	return size;
}

int tw_wheel_init(struct tw_wheel *w, int64_t tick, uint32_t wheel_size,
		  int64_t start, enum tw_mode mode)
{
	uint32_t max_levels = 0, factor, size;
	size_t nbuckets;
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
	w->buckets = calloc(nbuckets + 3, sizeof(*w->buckets));
	/* Only kafka mode keeps Kafka's bucket queue (exact mode: bitmaps). */
	w->queue = mode == TW_MODE_KAFKA ? calloc(nbuckets, sizeof(*w->queue))
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
	w->nlevels = 1;
	/* I6: a wheel started at the end of time has reached its last tick. */
	w->levels[0].clock = tw__due_limit(w, start);
	return TW_OK;
}

/* Everything moves to the hand-back list first, and only then is handed
 * back: a timer that hand_back adds again goes into the emptied wheel and
 * stays there, instead of being found by a later bucket of the same walk
 * and handed back again, for ever (issue 13, bug 10). A timer still on the
 * list is pending (its bucket is the list), so hand_back may also cancel
 * or reschedule the ones not yet handed back; those are not handed back. */
/* Whether t, met in bucket b, is linked there as the wheel links it. A
 * pending timer whose memory was overwritten (tw_timer_init() or a memset
 * on it, a re-add of it after that) leaves links no walk can trust: the
 * drain then stops instead of looping for ever or following a NULL. */
static bool linked_in(const struct tw_bucket *b, const struct tw_timer *t)
{
	return t->bucket == b && t->link.next && t->link.prev;
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
	expected = w->count;
	w->queue_len = 0;
	for (size_t i = 0; i < nbuckets && !*broken; i++) {
		struct tw_bucket *b = &w->buckets[i];

		b->has_expiration = false;
		b->draining = false;
		b->queue_index = TW_NOT_QUEUED;
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
		w->levels[i].occupied = 0;
	}
	w->ndraining = 0;
	w->upper_pop = INT64_MAX;
	/* The held list is the drain's own: sound even when a bucket was
	 * not (what was taken before the break is handed back). */
	while (taken-- && !list_empty(&held->head)) {
		struct tw_timer *t = list_timer(held->head.next);

		bucket_take(held, t);
		w->count--;
		debug_pending(w, t, false);
		n++;
		if (hand_back)
			hand_back(w, t);
	}
	if (*broken) {
		w->count = 0; /* what is left cannot be walked */
		return TW_ECORRUPT;
	}
	return n;
}

int64_t tw__wheel_drain_checked(struct tw_wheel *w, tw_timer_fn *hand_back,
				struct tw_timer **broken)
{
	return drain_checked(w, hand_back, broken);
}

hot_inline int64_t wheel_drain(struct tw_wheel *w, tw_timer_fn *hand_back)
{
	struct tw_timer *broken;

	return drain_checked(w, hand_back, &broken);
}

hot_inline int wheel_destroy(struct tw_wheel *w)
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

/* A wheel with an expire function (the service's) fires every timer
 * through it and never reads a timer's fn: the service keeps its own use
 * for that field, which a timer's owner may rewrite while the wheel holds
 * the timer (tw_service_timer_reinit after a plain cancel). */
static inline bool no_callback(const struct tw_wheel *w, const struct tw_timer *t)
{
	return !w->expire && !t->fn;
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

hot_inline int wheel_add(struct tw_wheel *w, struct tw_timer *t, int64_t due)
{
	if (!w || !w->buckets || !t || no_callback(w, t))
		return TW_EINVAL_BECAUSE("tw_wheel_add", "%s", bad_wheel_call(w, t));
	if (t->bucket)
		return TW_EBUSY;
	t->due = due;
	place_new(w, t);
	return TW_OK;
}

hot_inline int wheel_add_in(struct tw_wheel *w, struct tw_timer *t, int64_t delay)
{
	int64_t due;

	if (!w)
		return TW_EINVAL;
	/* Refused, not clamped: a clamped due time is one the caller did
	 * not ask for, and tw_service_add_in() refuses the same sum. */
	if ((delay > 0 && w->now > INT64_MAX - delay) ||
	    (delay < 0 && w->now < INT64_MIN - delay))
		return TW_EOVERFLOW;
	due = w->now + delay;
	return wheel_add(w, t, due);
}

hot_inline int wheel_cancel(struct tw_wheel *w, struct tw_timer *t)
{
	if (!w || !w->buckets || !t)
		return TW_EINVAL;
	if (!t->bucket)
		return 0;
	if (t->bucket->wheel != w)
		return TW_EOWNER;
	unlink_pending(w, t);
	return 1;
}

/* Exact mode: a timer moved to a due time at or after the start of the
 * bucket it is in (an idle timeout reset later) only needs its due time
 * changed. Its bucket expires no later than the new tick, and whatever a
 * bucket holds is re-filed by its key when it expires (move_down), so the
 * timer is never early and no later than if it had moved now. Saves the
 * unlink and the append: three cache misses become the one on the timer.
 * The price is paid at most once per bucket the timer sits in, not once
 * per reset. Kafka mode always moves, as Kafka's remove-then-add does. */
hot_inline bool stays_put(const struct tw_wheel *w, const struct tw_timer *t,
		      int64_t due)
{
	struct tw_bucket *b = t->bucket;
	int64_t key;

	if (w->mode != TW_MODE_EXACT || b->level == TW_LEVEL_READY ||
	    b->draining || due <= w->now)
		return false;
	key = timer_key(w, due);
	/* A windowed timer (its key before its bucket's: it fires when the
	 * bucket pops) sits among the bucket's first timers; made exact, it
	 * moves, so that those stay together (windows, below). Only a
	 * bucket whose min_key is before its expiration can hold one. */
	if (key < b->expiration ||
	    (b->min_key < b->expiration && timer_key(w, t->due) < b->expiration))
		return false;
	if (key < b->min_key)
		b->min_key = key;
	return true;
}

hot_inline int wheel_reschedule(struct tw_wheel *w, struct tw_timer *t, int64_t due)
{
	int was_pending;

	if (!w || !w->buckets || !t || no_callback(w, t))
		return TW_EINVAL_BECAUSE("tw_wheel_reschedule", "%s",
					 bad_wheel_call(w, t));
	if (t->bucket && t->bucket->wheel != w)
		return TW_EOWNER;
	was_pending = t->bucket != NULL;
	if (was_pending && stays_put(w, t, due)) {
		t->due = due;
		return 1;
	}
	if (was_pending)
		unlink_pending(w, t);
	t->due = due;
	place_new(w, t);
	return was_pending;
}

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

/* ---- windows (issue 26) ----
 *
 * A timer that may fire anywhere in [earliest, latest] is filed once, in
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
 * it starts: fire_windowed) and lower the bucket's min_key to the pop, so
 * that next_expiry wakes for them. A window that no such bucket fits
 * (shorter than the spans of the levels that reach it) is filed at
 * earliest as an exact timer: it fires at ceil(earliest), inside the
 * window. Kafka mode has no windows (Kafka has none to reproduce). */

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
			add_level(w);
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

hot_inline int64_t wheel_advance_how(struct tw_wheel *w, int64_t now,
				    bool unordered)
{
	struct tw_bucket *ready, *b;
	int64_t limit, fired = 0;

	if (!w || !w->buckets)
		return TW_EINVAL;
	if (w->advancing)
		return TW_EREENTER;
	if (now < w->now)
		return TW_ERANGE;
	w->advancing = 1;
	w->now = now;
	limit = tw__due_limit(w, now);

	/* Callbacks file newly due timers in the other ready list, which
	 * waits for the next advance. */
	ready = tw__ready_list(w, w->ready_cur);
	w->ready_cur ^= 1;
	while (!list_empty(&ready->head)) {
		struct tw_timer *t = list_timer(ready->head.next);

		bucket_take(ready, t);
		fire(w, t);
		fired++;
	}

	if (w->mode == TW_MODE_EXACT) {
		if (unordered)
			fired += advance_whole_buckets(w, limit);
		fired += advance_exact(w, limit);
		w->advancing = 0;
		return fired;
	}
	for (;;) {
		b = tw__bq_top(w);
		if (!b || b->pop_at > limit)
			break;
		tw__bq_pop(w);
		notify(w, TW_EV_POPPED, b->level, b->slot,
		       tw__ticks_to_time(w, b->pop_at), NULL);
		advance_clocks(w, b->pop_at);
		b->has_expiration = false;
		fired += move_down(w, b, SIZE_MAX);
	}
	w->advancing = 0;
	return fired;
}


hot_inline int64_t wheel_advance(struct tw_wheel *w, int64_t now)
{
	return wheel_advance_how(w, now, false);
}

/* Kafka mode has no buckets to empty where they are (its levels are not
 * powers of two): it runs the ordered advance, which the unordered one
 * allows. */
hot_inline int64_t wheel_advance_unordered(struct tw_wheel *w, int64_t now)
{
	return wheel_advance_how(w, now, true);
}

/* The public calls that change a wheel. In the debug build (TW_DEBUG) each
 * one says it is inside the wheel (debug.h), so that a second thread coming
 * in meanwhile is named at its call; elsewhere each is its body, inlined. */
#ifdef TW_DEBUG
#define WHEEL_CALL(type, name, params, args)                                   \
	type tw_wheel_##name params                                            \
	{                                                                     \
		type rc;                                                      \
		if (w)                                                        \
			TW_DEBUG_WHEEL_ENTER(w, "tw_wheel_" #name);           \
		rc = wheel_##name args;                                       \
		if (w)                                                        \
			TW_DEBUG_WHEEL_LEAVE(w);                              \
		return rc;                                                    \
	}
#else
#define WHEEL_CALL(type, name, params, args)                                   \
	type tw_wheel_##name params                                            \
	{                                                                     \
		return wheel_##name args;                                     \
	}
#endif

WHEEL_CALL(int, add, (struct tw_wheel *w, struct tw_timer *t, int64_t due), (w, t, due))
WHEEL_CALL(int, add_in, (struct tw_wheel *w, struct tw_timer *t, int64_t delay), (w, t, delay))
WHEEL_CALL(int, cancel, (struct tw_wheel *w, struct tw_timer *t), (w, t))
WHEEL_CALL(int, reschedule, (struct tw_wheel *w, struct tw_timer *t, int64_t due), (w, t, due))
WHEEL_CALL(int, add_range, (struct tw_wheel *w, struct tw_timer *t, int64_t earliest, int64_t latest), (w, t, earliest, latest))
WHEEL_CALL(int, reschedule_range, (struct tw_wheel *w, struct tw_timer *t, int64_t earliest, int64_t latest), (w, t, earliest, latest))
WHEEL_CALL(int64_t, advance, (struct tw_wheel *w, int64_t now), (w, now))
WHEEL_CALL(int64_t, advance_unordered, (struct tw_wheel *w, int64_t now), (w, now))
WHEEL_CALL(int64_t, drain, (struct tw_wheel *w, tw_timer_fn *hand_back), (w, hand_back))
WHEEL_CALL(int, destroy, (struct tw_wheel *w), (w))

bool tw_wheel_next_expiry(const struct tw_wheel *w, int64_t *when)
{
	const struct tw_bucket *top;
	int64_t t = 0;

	if (!w || !w->buckets || !when)
		return false;
	if (tw__ready_list(w, w->ready_cur)->count) {
		*when = w->now;
		return true;
	}
	if (w->mode == TW_MODE_EXACT) {
		if (!next_key_exact(w, &t))
			return false;
	} else {
		top = tw__bq_top(w);
		if (!top)
			return false;
		t = top->pop_at;
	}
	t = tw__ticks_to_time(w, t);
	/* Kafka mode may file a bucket behind the caller's clock (its own
	 * clock lags); it is due now. */
	*when = t < w->now ? w->now : t;
	return true;
}

int64_t tw_wheel_timeout(const struct tw_wheel *w, int64_t now)
{
	int64_t when = 0;
	bool any = tw_wheel_next_expiry(w, &when);

	return tw__timeout_until(any, when, now);
}

int64_t tw_wheel_now(const struct tw_wheel *w)
{
	if (!w)
		return 0;
	return w->now;
}

size_t tw_wheel_count(const struct tw_wheel *w)
{
	if (!w)
		return 0;
	return w->count;
}

unsigned tw_wheel_levels(const struct tw_wheel *w)
{
	if (!w)
		return 0;
	return w->nlevels;
}

unsigned tw__bucket_level(const struct tw_wheel *w, const struct tw_bucket *b)
{
	(void)w;
	return b->level;
}

/* In the queue: the heap in kafka mode, an occupancy bit in exact mode. */
bool tw__bucket_queued(const struct tw_wheel *w, const struct tw_bucket *b)
{
	if (w->mode == TW_MODE_KAFKA)
		return b->queue_index != TW_NOT_QUEUED;
	return b->level != TW_LEVEL_READY &&
	       ((w->levels[b->level - 1].occupied >> b->slot) & 1);
}

unsigned tw__bucket_slot(const struct tw_wheel *w, const struct tw_bucket *b)
{
	(void)w;
	return b->slot;
}
