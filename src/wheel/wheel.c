/* SPDX-License-Identifier: MIT */
/*
 * wheel/wheel.c — Kafka's hierarchical timing wheel, and a faster exact one:
 * what both modes share, and the public calls that add, cancel, reschedule,
 * advance and ask.
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
 * Two queues of buckets. Something must say which bucket pops next. In
 * kafka mode it is Kafka's own DelayQueue of buckets, a heap (kafka.c,
 * with a worked example of seed 001); in exact mode, one 64-bit occupancy
 * word per level and a bit scan (exact.c, with early cascades, waking
 * only to fire, and the unordered jump). Windowed timers, which may fire
 * anywhere in [earliest, latest], are exact mode's too (window.c).
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
 * The default geometry. The service's defaults: a 1 ms tick, 64 buckets,
 * exact mode (factor 32; clock units of 1 ns). Each level's bucket width
 * and how far ahead of its clock it files timers, as tw_wheel_level_info()
 * reports them once every level exists:
 *
 *   level  bucket width        reaches ahead        a timer due in ... lands here
 *     1    1 ms                64 ms                [0, 64 ms)
 *     2    32 ms               2.048 s              [64 ms, 2 s)
 *     3    1.024 s             65.5 s               [2 s, 65 s)
 *     4    32.8 s              35 min               [65 s, 35 min)
 *     5    17.5 min            18.6 h               [35 min, 18.6 h)
 *     6    9.3 h               24.9 days            [18.6 h, 25 days)
 *     7    12.4 days           2.2 years            [25 days, 2.2 years)
 *     8    1.1 years           69.7 years           [2.2, 70 years)
 *     9    34.8 years          the end of int64     beyond (about 292 years)
 *
 * (The bounds of the last column are approximate: where a timer goes
 * depends on where in its bucket the level's clock stands.) Kafka's
 * geometry, kafka mode with wheel_size 20 at the same tick, has 10
 * levels of widths 20^(level-1) ms, each reaching 20 buckets ahead: 1 ms
 * and 20 ms, 20 ms and 400 ms, 400 ms and 8 s, 8 s and 160 s, 160 s and
 * 53 min, 53 min and 17.8 h, 17.8 h and 14.8 days, 14.8 and 296 days,
 * 296 days and 16.2 years; the tenth is unbounded.
 *
 * Guarantees and costs.
 *   add, cancel, reschedule: O(1). Exact mode: a compare per level walked
 *     (levels are few), a shift, a mask, a list link and a bit set; no
 *     division when the tick is 1 (times already in ticks), one otherwise.
 *     Kafka mode: a division per level walked and a heap push when a
 *     bucket turns non-empty. The owner check reads the bucket, whose line
 *     the bucket's count update needs anyway (an address range test
 *     instead was measured 5-10 % slower: more instructions in a loop
 *     bound by cache misses leave fewer misses in flight). No allocation:
 *     tw_wheel_init() allocates every level's buckets (and kafka mode's
 *     queue) up front; a level is still "created" lazily in Kafka's sense
 *     (its clock is fixed when it is first needed).
 *   count: O(levels in use * size), the buckets' counts summed: no add,
 *     cancel or fire keeps a running count (the checked build does).
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
 *   I4 kafka mode: the queue is a heap on the pop time; exact
 *      mode: a level's occupancy bit s is set iff slots[s] is queued, no
 *      timer's key is below its bucket's min_key, and no bucket above
 *      level 1 pops (nor drain ends) before upper_pop;
 *   I5 level L's clock == level L-1's clock / factor (floor);
 *   I6 in exact mode, outside advance, level 1's clock == floor(now / tick);
 *   I7 the bucket counts add up to tw_wheel_count().
 *
 * The files. This one: the arithmetic on ticks, the levels' clocks, the
 * ready lists, moving a popped bucket's timers down (both modes), and the
 * public calls tw_wheel_add, _add_in, _cancel, _reschedule, _advance,
 * _advance_unordered, _next_expiry, _timeout, _now, _count, _levels. Their
 * hot paths (filing a timer, unlinking it) are static inline in
 * own.h, so that each call is one body without a call inside it.
 * lifecycle.c: tw_timer_init, tw_wheel_init, _drain, _destroy. kafka.c,
 * exact.c, window.c: the two queues and the windows, above.
 */
#include "own.h"

/* ---- arithmetic that cannot overflow ---- */

int64_t tw__ceil_div_call(int64_t x, int64_t d)
{
	return tw__ceil_div(x, d);
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
	/* The common tick, asked on every next_expiry: no divisions. */
	if (w->tick == 1)
		return key;
	if (key > INT64_MAX / w->tick)
		return INT64_MAX;
	if (key < INT64_MIN / w->tick)
		return INT64_MIN;
	return key * w->tick;
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
	if (w->tick == 1)
		return now;
	if (w->mode == TW_MODE_EXACT && now == INT64_MAX)
		return tw__ceil_div(now, w->tick);
	return tw__floor_div(now, w->tick);
}

void tw__notify_observer(const struct tw_wheel *w, enum tw_event_kind kind,
			 unsigned level, unsigned slot, int64_t time,
			 const struct tw_timer *t)
{
	struct tw_event ev = { kind, level, slot, time, t };

	TW_DEBUG_WHEEL_OBSERVED(w, true);
	w->observer->on_event(w->observer->arg, w, &ev);
	TW_DEBUG_WHEEL_OBSERVED(w, false);
}

/* ---- buckets ---- */

struct tw_bucket *tw__ready_list(const struct tw_wheel *w, unsigned which)
{
	return &w->levels[0].ready[which];
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
struct tw_level *tw__add_level(struct tw_wheel *w)
{
	struct tw_level *below = &w->levels[w->nlevels - 1];
	struct tw_level *lv = &w->levels[w->nlevels++];

	lv->clock = tw__floor_div(below->clock, (int64_t)w->factor);
	tw__wheel_fast_levels(w);
	notify(w, TW_EV_LEVEL_ADDED, w->nlevels, 0, tw__level_clock_time(w, lv),
	       NULL);
	return lv;
}

/* Kafka's advanceClock, in ticks: a level moves when a whole bucket of its
 * own has passed, and then tells the level above. */
void tw__advance_clocks(struct tw_wheel *w, int64_t key)
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

/* Kafka's bucket.flush(addTimerTaskEntry), for up to n timers: each one of
 * a popped bucket either fires (its tick has come) or drops to a lower
 * level. One timer at a time, so a callback may cancel the ones still
 * waiting here. Returns how many fired. */
int64_t tw__move_down(struct tw_wheel *w, struct tw_bucket *b, size_t n)
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
		} else if (w->mode == TW_MODE_EXACT) {
			insert_exact(w, t, key);
		} else {
			tw__insert_kafka(w, t, key);
		}
	}
	return fired;
}

/* ---- the public calls ---- */

/* levels[0].fast_levels, from what it depends on: init sets the mode,
 * the tick and the size for good; tw__add_level() the levels in use, and
 * tw_wheel_set_observer() the observer, call this. */
void tw__wheel_fast_levels(struct tw_wheel *w)
{
	if (w && w->levels)
		w->levels[0].fast_levels =
			w->mode == TW_MODE_EXACT && w->tick == 1 && w->size == 64 &&
					!w->observer
				? w->nlevels
				: 0;
}

/* The checks in the order that costs the add least: levels (NULL exactly
 * when buckets is: init and destroy set both) is read here once for the
 * filing too. */
hot_inline int wheel_add(struct tw_wheel *w, struct tw_timer *t, int64_t due)
{
	if (!w || !w->levels || !t || !t->fn)
		return TW_EINVAL_BECAUSE("tw_wheel_add", "%s", bad_wheel_call(w, t));
	if (t->bucket)
		return TW_EBUSY;
	t->due = due;
	place_new(w, t, due);
	return TW_OK;
}

hot_inline int wheel_add_in(struct tw_wheel *w, struct tw_timer *t, int64_t delay)
{
	int64_t due;

	/* The arguments first: bad-input.md's TW_EINVAL whatever the delay. */
	if (!w || !w->levels || !t || !t->fn)
		return TW_EINVAL_BECAUSE("tw_wheel_add_in", "%s", bad_wheel_call(w, t));
	/* Refused, not clamped: a clamped due time is one the caller did
	 * not ask for, and tw_service_add_in() refuses the same sum. */
	if ((delay > 0 && w->now > INT64_MAX - delay) ||
	    (delay < 0 && w->now < INT64_MIN - delay))
		return TW_EOVERFLOW;
	due = w->now + delay;
	return wheel_add(w, t, due);
}

/* A cancel's refusals, off its path. */
static __attribute__((noinline)) int cancel_refused(const struct tw_wheel *w,
						    const struct tw_timer *t)
{
	if (!w || !w->buckets || !t)
		return TW_EINVAL;
	return t->bucket ? TW_EOWNER : 0;
}

/* A pending timer whose bucket names this wheel is all the common path
 * tests: the wheel is then initialised (a bucket names its wheel from
 * init to destroy, and destroy leaves no timer pending in it), so the
 * test that it is waits for the other answers, as in
 * tw_wheel_reschedule_range(). Nor does it test w for NULL: a pending
 * timer's bucket names a wheel, never NULL, so a NULL w fails the owner
 * test and cancel_refused() answers TW_EINVAL for it. The one exception:
 * a destroy that found broken links (TW_ECORRUPT) leaves the timers it
 * could not reach naming freed buckets; a cancel of one of them reads
 * that bucket before it answers TW_EINVAL. */
hot_inline int wheel_cancel(struct tw_wheel *w, struct tw_timer *t)
{
	struct tw_bucket *b;

	if (__builtin_expect(!t || !(b = t->bucket) || b->wheel != w, 0))
		return cancel_refused(w, t);
	unlink_pending(w, t);
	return 1;
}

/* Exact mode: a timer moved to a due time at or after the start of the
 * bucket it is in (an idle timeout reset later) only needs its due time
 * changed. Its bucket expires no later than the new tick, and whatever a
 * bucket holds is re-filed by its key when it expires (tw__move_down), so the
 * timer is never early and no later than if it had moved now. Saves the
 * unlink and the append: three cache misses become the one on the timer.
 * The price is paid at most once per bucket the timer sits in, not once
 * per reset. Kafka mode always moves, as Kafka's remove-then-add does. */
hot_inline bool stays_put(const struct tw_wheel *w, const struct tw_timer *t,
		      int64_t due)
{
	struct tw_bucket *b = t->bucket;
	int64_t key, expiration, min_key;

	if (w->mode != TW_MODE_EXACT || b->level == TW_LEVEL_READY ||
	    b->draining || due <= w->now)
		return false;
	key = exact_key(w, due);
	expiration = b->expiration;
	min_key = b->min_key;
	/* A windowed timer (its key before its bucket's: it fires when the
	 * bucket pops) sits among the bucket's first timers; made exact, it
	 * moves, so that those stay together (windows, below). Only a
	 * bucket whose min_key is before its expiration can hold one. */
	if (key < expiration ||
	    (min_key < expiration && exact_key(w, t->due) < expiration))
		return false;
	if (key < min_key)
		b->min_key = key;
	return true;
}

/* stays_put() where the bucket's no_window_stay is clear (exact mode, a
 * tick of 1, a level bucket not draining): a key is its due time. */
hot_inline bool stays_put_tick1(const struct tw_wheel *w, struct tw_timer *t,
				struct tw_bucket *b, int64_t due)
{
	int64_t expiration = b->expiration, min_key = b->min_key;

	if (due <= w->now || due < expiration ||
	    (min_key < expiration && t->due < expiration))
		return false;
	if (due < min_key)
		b->min_key = due;
	t->due = due;
	return true;
}

hot_inline int wheel_reschedule(struct tw_wheel *w, struct tw_timer *t, int64_t due)
{
	struct tw_bucket *b;
	int was_pending;

	/* The common case first, decided from the timer and its bucket: a
	 * pending timer of this wheel (which is then initialised, as for
	 * a cancel) in a bucket that no_window_stay does not rule out, that
	 * stays. */
	if (__builtin_expect(w && t && (b = t->bucket) && b->wheel == w &&
			     !b->no_window_stay && !no_callback(w, t), 1) &&
	    stays_put_tick1(w, t, b, due))
		return 1;

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
	place_new(w, t, due);
	return was_pending;
}

public_hot int tw_wheel_add(struct tw_wheel *w, struct tw_timer *t,
			    int64_t due)
{
	int rc;

	WHEEL_ENTER(w, "tw_wheel_add");
	rc = wheel_add(w, t, due);
	WHEEL_LEAVE(w);
	return rc;
}

public_hot int tw_wheel_add_in(struct tw_wheel *w, struct tw_timer *t,
			       int64_t delay)
{
	int rc;

	WHEEL_ENTER(w, "tw_wheel_add_in");
	rc = wheel_add_in(w, t, delay);
	WHEEL_LEAVE(w);
	return rc;
}

public_hot int tw_wheel_cancel(struct tw_wheel *w, struct tw_timer *t)
{
	int rc;

	WHEEL_ENTER(w, "tw_wheel_cancel");
	rc = wheel_cancel(w, t);
	WHEEL_LEAVE(w);
	return rc;
}

public_hot int tw_wheel_reschedule(struct tw_wheel *w, struct tw_timer *t,
				   int64_t due)
{
	int rc;

	WHEEL_ENTER(w, "tw_wheel_reschedule");
	rc = wheel_reschedule(w, t, due);
	WHEEL_LEAVE(w);
	return rc;
}

hot_inline int64_t wheel_advance_how(struct tw_wheel *w, int64_t now,
				    bool unordered)
{
	struct tw_bucket *ready;
	int64_t limit, fired = 0;

	if (!w || !w->buckets)
		return TW_EINVAL;
	if (w->advancing)
		return TW_EREENTER;
	if (now < w->now)
		return TW_ERANGE;
	w->advancing = TW_IN_ADVANCE;
	w->now = now;
	limit = tw__due_limit(w, now);

	/* Callbacks file newly due timers in the other ready list, which
	 * waits for the next advance -- the one after an advance that
	 * stopped part way (for_service.h), which goes on where it stopped
	 * first, as the advance would have had it not stopped. */
	if (__builtin_expect(w->stopping & TW_STOPPED, 0)) {
		fired = tw__advance_resume(w);
		if (w->stopping) {
			w->advancing = 0;
			return fired;
		}
	} else {
		ready = tw__ready_list(w, w->ready_cur);
		w->ready_cur ^= 1;
		while (!list_empty(&ready->head)) {
			struct tw_timer *t = list_timer(ready->head.next);

			bucket_take(ready, t);
			fire(w, t);
			fired++;
		}
	}

	if (w->mode == TW_MODE_EXACT) {
		if (unordered)
			fired += tw__advance_whole_buckets(w, limit);
		fired += tw__advance_exact(w, limit);
	} else {
		fired += tw__advance_kafka(w, limit);
	}
	w->advancing = 0;
	return fired;
}

int64_t tw_wheel_advance(struct tw_wheel *w, int64_t now)
{
	int64_t rc;

	WHEEL_ENTER(w, "tw_wheel_advance");
	rc = wheel_advance_how(w, now, false);
	WHEEL_LEAVE(w);
	return rc;
}

/* Kafka mode has no buckets to empty where they are (its levels are not
 * powers of two): it runs the ordered advance, which the unordered one
 * allows. */
int64_t tw_wheel_advance_unordered(struct tw_wheel *w, int64_t now)
{
	int64_t rc;

	WHEEL_ENTER(w, "tw_wheel_advance_unordered");
	rc = wheel_advance_how(w, now, true);
	WHEEL_LEAVE(w);
	return rc;
}

bool tw_wheel_next_expiry(const struct tw_wheel *w, int64_t *when)
{
	const struct tw_bucket *top;
	int64_t t = 0;

	if (!w || !w->buckets || !when)
		return false;
	/* An advance stopped part way has its rest due now. */
	if (tw__ready_list(w, w->ready_cur)->count || (w->stopping & TW_STOPPED)) {
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

/* The pending timers are what the buckets hold: the levels' in use, the
 * two ready lists and the drain's hand-back list (a timer set aside by an
 * advance stays counted in its bucket). Summed on demand, not kept as a
 * running count, which would cost every add, cancel and fire a store to
 * the wheel; the checked build keeps one too (own.h, debug_pending) and
 * tw_wheel_check() holds this sum to it (I7). */
size_t tw__pending_sum(const struct tw_wheel *w)
{
	size_t in_levels = (size_t)w->nlevels * w->size;
	size_t lists = (size_t)w->max_levels * w->size, n = 0;

	for (size_t i = 0; i < in_levels; i++)
		n += w->buckets[i].count;
	for (size_t i = lists; i < lists + 3; i++)
		n += w->buckets[i].count;
	return n;
}

size_t tw_wheel_count(const struct tw_wheel *w)
{
	if (!w || !w->buckets)
		return 0;
	return tw__pending_sum(w);
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
		return b->level != TW_LEVEL_READY &&
		       tw__queue_place(w, b)->index != TW_NOT_QUEUED;
	return b->level != TW_LEVEL_READY &&
	       tw__occupied(&w->levels[b->level - 1], b->slot);
}

unsigned tw__bucket_slot(const struct tw_wheel *w, const struct tw_bucket *b)
{
	(void)w;
	return b->slot;
}
