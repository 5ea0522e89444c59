/* SPDX-License-Identifier: MIT */
/**
 * @file
 * The single-threaded hierarchical timing wheel (Kafka's TimingWheel,
 * TimerTaskList and TimerTaskEntry, plus the DelayQueue of buckets that lets
 * the clock jump to the next non-empty bucket).
 *
 * The caller owns the clock: time is an int64_t in whatever unit the caller
 * likes (milliseconds in the seeds), and nothing happens until the caller
 * calls tw_wheel_advance(). Timers are intrusive: embed a struct tw_timer in
 * your own object and get it back in the callback with tw_container_of().
 * add, cancel and reschedule are O(1) and never allocate; only
 * tw_wheel_init() allocates.
 *
 * @code
 *     struct conn { int fd; struct tw_timer idle; };
 *
 *     static void on_idle(struct tw_wheel *w, struct tw_timer *t)
 *     {
 *             struct conn *c = tw_container_of(t, struct conn, idle);
 *
 *             (void)w;
 *             close_conn(c);
 *     }
 *
 *     tw_timer_init(&c->idle, on_idle);
 *     tw_wheel_add(&wheel, &c->idle, now + 30000);
 *     ...
 *     tw_wheel_reschedule(&wheel, &c->idle, now + 30000);   // on every read
 * @endcode
 *
 * Thread-safety: none. A wheel and its timers belong to one thread (the
 * timer service in service.h adds the locking). Callbacks run only from
 * tw_wheel_advance(), on the caller's thread.
 */
#ifndef TIMINGWHEEL_WHEEL_H
#define TIMINGWHEEL_WHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timingwheel/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what this header declares
 * is its exported API. */
#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility push(default)
#endif

/** Get the enclosing object of type @p type from @p ptr, a pointer to its
 *  member @p member (the kernel's container_of). */
#define tw_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

struct tw_wheel;
struct tw_timer;
struct tw_bucket;   /* private */
struct tw_level;    /* private */
struct tw_observer; /* inspect.h */

/**
 * Called once when a timer expires. The timer is no longer pending when this
 * runs, so the callback may add or reschedule it again, free it, or add,
 * cancel and reschedule any other timer of the wheel (including ones due in
 * the same advance: cancelled or moved later, they do not run in it; a
 * reschedule that keeps a timer where it fires, as
 * tw_wheel_reschedule_range() does when the window holds its firing, leaves
 * it to run in it). Its calls take effect at once, in both modes: in
 * kafka mode that is where the wheel and Kafka part (TW_MODE_KAFKA).
 * @param wheel the wheel that ran it; tw_wheel_now() is the advance's time
 * @param timer the timer that expired
 */
typedef void tw_timer_fn(struct tw_wheel *wheel, struct tw_timer *timer);

/** Doubly linked list links (private). */
struct tw_link {
	struct tw_link *next;     /**< next in the bucket */
	struct tw_link *prev;     /**< previous in the bucket */
};

/**
 * A timer: 40 bytes on LP64, and the only per-timer memory the wheel uses.
 * Embed it in your own object. All fields are private; use the functions.
 */
struct tw_timer {
	struct tw_link link;      /**< position in its bucket */
	struct tw_bucket *bucket; /**< owning bucket; NULL when not pending */
	int64_t due;              /**< absolute due time given to add */
	tw_timer_fn *fn;          /**< the callback */
};

/** When a timer fires relative to its due time. */
enum tw_mode {
	/** Never early: fires at the first tick boundary >= due (ceil), so
	 *  less than one tick late (at INT64_MAX, when that boundary lies
	 *  past it); a timer already due when added fires on the next
	 *  advance. The default. */
	TW_MODE_EXACT = 0,
	/** Kafka's TimingWheel bit for bit: buckets fire at their start, so a
	 *  timer may run up to one tick early; the clock only moves to the
	 *  expirations of the buckets it pops. Buckets of equal expiration
	 *  pop in the order Kafka's DelayQueue (a Java PriorityQueue) pops
	 *  them for the same adds and advances. For reproducing Kafka.
	 *  "Bit for bit" is for adds, cancels, reschedules and advances made
	 *  between advances, at times Kafka takes: a callback's calls take
	 *  effect at once, inside the advance, where Kafka's SystemTimer
	 *  runs a task on an executor thread whose add waits for the whole
	 *  pass (and whose cancel of a timer in the bucket being flushed
	 *  waits for that flush), so after a callback's call the two may
	 *  differ; negative times are floored (Java's % truncates toward
	 *  zero); and past the due times where Kafka's next overflow
	 *  level's tick would pass the largest long (Kafka divides by zero
	 *  there), the wheel goes on with levels Kafka cannot make, the
	 *  last of them unbounded. */
	TW_MODE_KAFKA = 1
};

/** The smallest wheel_size tw_wheel_init() accepts. */
#define TW_WHEEL_SIZE_MIN 2
/** The largest wheel_size tw_wheel_init() accepts (Kafka uses 20). */
#define TW_WHEEL_SIZE_MAX 65536

/**
 * The wheel. Embed or allocate it, then call tw_wheel_init(). Every field is
 * private.
 */
struct tw_wheel {
	int64_t tick;             /**< time units per level-1 bucket */
	int64_t now;              /**< the latest time given to advance */
	size_t count;             /**< checked build: pending timers (a
				       release build keeps no count) */
	struct tw_level *levels;  /**< [max_levels], the first nlevels in use */
	struct tw_bucket *buckets;/**< [max_levels * size + 3]: the levels', two
				       ready lists, drain's hand-back list */
	struct tw_bucket **queue; /**< kafka mode: binary heap of buckets by
				       expiration, then each bucket's place
				       in it, then room for a copy of the
				       heap (exact mode: NULL) */
	size_t queue_len;         /**< kafka mode: buckets in the queue */
	uint64_t queue_seq;       /**< kafka mode: buckets queued so far */
	int64_t upper_pop;        /**< exact mode: no bucket above level 1
				       pops, and no drain ends, before this
				       tick (a bound) */
	const struct tw_observer *observer; /**< inspect.h's hook, or NULL */
	uint32_t size;            /**< buckets per level */
	uint32_t factor;          /**< level tick ratio: size (kafka), size/2
				       (exact) */
	uint32_t nlevels;         /**< levels in use */
	uint32_t max_levels;      /**< levels allocated */
	uint32_t ndraining;       /**< levels with a bucket draining down */
	uint8_t mode;             /**< an enum tw_mode */
	uint8_t ready_cur;        /**< which ready list takes new due timers */
	uint8_t advancing;        /**< inside tw_wheel_advance() (1) or a
				       drain's hand_back (2) */
	uint8_t stopping;         /**< exact mode: an advance asked to stop
				       after a fire, or stopped part way
				       (the timer service's batches) */
};

/* ---- timers ---- */

/**
 * Prepare a timer (not pending). Call once before its first add; never on a
 * pending timer.
 * @param timer the timer (NULL: nothing happens)
 * @param fn its callback (add refuses a timer without one)
 * @par Thread safety
 *      The timer's owner; no wheel is touched.
 */
void tw_timer_init(struct tw_timer *timer, tw_timer_fn *fn);

/**
 * Whether the timer is waiting in a wheel.
 * @param timer an initialised timer
 * @return true from add until it fires, is cancelled or handed back
 * @par Thread safety
 *      The wheel's thread.
 */
static inline bool tw_timer_pending(const struct tw_timer *timer)
{
	return timer->bucket; /* not != NULL: clang++'s -Wzero-as-null-pointer-constant */
}

/**
 * The due time the timer was last added with.
 * @param timer an initialised timer
 * @return the absolute due time of the last add or reschedule
 * @par Thread safety
 *      The wheel's thread.
 */
static inline int64_t tw_timer_due(const struct tw_timer *timer)
{
	return timer->due;
}

/* ---- the wheel ---- */

/**
 * Initialise a wheel whose innermost level has wheel_size buckets of tick
 * time units each, with its clock at start. Allocates every level's buckets
 * once, here (levels are still created on demand in Kafka's sense: each one
 * takes its clock from the level below when it is first needed).
 * @param wheel the wheel to set up
 * @param tick time units per level-1 bucket (>= 1)
 * @param wheel_size buckets per level, TW_WHEEL_SIZE_MIN..TW_WHEEL_SIZE_MAX.
 *        Kafka mode uses it as given (Kafka's wheelSize; Kafka uses 20).
 *        Exact mode uses the smallest power of two >= wheel_size, at
 *        least 4 and at most 256: a wheel_size above 256 is taken as 256
 *        (a level keeps four occupancy words; 64, one word, needs 13
 *        levels for the whole int64 range, 256 needs 9). Its levels tick
 *        at half the interval below; tw_wheel_check() and the inspector
 *        report the size in use.
 * @param start the clock's first time
 * @param mode TW_MODE_EXACT (never early) or TW_MODE_KAFKA
 * @retval 0 success
 * @retval TW_EINVAL NULL wheel, tick < 1, wheel_size out of range, unknown mode
 * @retval TW_ENOMEM allocation failed (the wheel is left unusable)
 * @par Thread safety
 *      Single-threaded: the wheel and its timers belong to the
 *      thread that uses them.
 */
int tw_wheel_init(struct tw_wheel *wheel, int64_t tick, uint32_t wheel_size,
		  int64_t start, enum tw_mode mode);

/**
 * Release the wheel's memory. Pending timers are unlinked (no longer
 * pending) without running; use tw_wheel_drain() first to get them back.
 * @param wheel an initialised wheel
 * @retval 0 success
 * @retval TW_EINVAL NULL wheel
 * @retval TW_EREENTER called from a callback (nothing changes)
 * @retval TW_ECORRUPT a bucket list was broken (as tw_wheel_drain()); the
 *         memory is released all the same
 * @par Thread safety
 *      The wheel's thread, outside callbacks.
 */
int tw_wheel_destroy(struct tw_wheel *wheel);

/**
 * Unlink every pending timer and hand each to hand_back instead of running
 * its callback (shutdown of an event loop: nothing is lost). Every timer is
 * taken out first: one that hand_back adds again stays pending in the
 * wheel and is not handed back twice; one that hand_back cancels or
 * reschedules before its turn is not handed back at all.
 * @param wheel an initialised wheel
 * @param hand_back called once per timer, already not pending; may be NULL.
 *        A callback: it may add, cancel and reschedule, and an advance,
 *        a drain or a destroy from it is refused (TW_EREENTER)
 * @return how many timers were handed back, or TW_EINVAL (NULL wheel),
 *         TW_EREENTER (called from a callback) or TW_ECORRUPT: a pending
 *         timer's links were overwritten (tw_timer_init() or memset on a
 *         pending timer, which the debug build names at the call), or a
 *         bucket holds more timers than the wheel counts. The drain stops
 *         there rather than loop or crash, hands back the timers it took
 *         before, and leaves the wheel fit only for tw_wheel_destroy()
 * @par Thread safety
 *      The wheel's thread, outside callbacks.
 */
int64_t tw_wheel_drain(struct tw_wheel *wheel, tw_timer_fn *hand_back);

/**
 * Make timer fire at due (absolute time). O(1), no allocation. A due time
 * <= now fires on the next advance.
 * @param wheel an initialised wheel
 * @param timer an initialised timer that is not pending
 * @param due absolute due time, any int64_t
 * @retval 0 success
 * @retval TW_EINVAL NULL wheel or timer, or a timer without a callback
 * @retval TW_EBUSY already pending (use tw_wheel_reschedule())
 * @par Thread safety
 *      The wheel's thread; callbacks may call it.
 */
int tw_wheel_add(struct tw_wheel *wheel, struct tw_timer *timer, int64_t due);

/**
 * tw_wheel_add() at now + delay.
 * @param wheel an initialised wheel
 * @param timer an initialised timer that is not pending
 * @param delay time from tw_wheel_now(), negative for a due time in the
 *              past (due at the next advance)
 * @return as tw_wheel_add()
 * @retval TW_EOVERFLOW now + delay does not fit an int64_t (nothing
 *         changed; tw_service_add_in() refuses the same sums)
 * @par Thread safety
 *      The wheel's thread; callbacks may call it.
 */
int tw_wheel_add_in(struct tw_wheel *wheel, struct tw_timer *timer,
		    int64_t delay);

/**
 * Stop a timer. O(1). Afterwards the timer may be freed or re-added.
 * @param wheel the wheel it was added to
 * @param timer an initialised timer
 * @retval 1 it was pending and will not run (the value and the meaning
 *         of the service's TW_SVC_STOPPED)
 * @retval 0 it was not pending (never added, fired, or cancelled before;
 *         the service's TW_SVC_IDLE). The wheel has no TW_SVC_RUNNING: a
 *         callback runs on the wheel's own thread, so no cancel meets one
 *         running elsewhere
 * @retval TW_EINVAL NULL wheel or timer
 * @retval TW_EOWNER it is pending in another wheel (nothing changes)
 * @par Thread safety
 *      The wheel's thread; callbacks may call it.
 */
int tw_wheel_cancel(struct tw_wheel *wheel, struct tw_timer *timer);

/**
 * Move a timer to a new due time, pending or not (the kernel's mod_timer).
 * O(1), no allocation. In exact mode a pending timer moved later (an idle
 * timeout reset) usually only has its due time changed: it stays in its
 * bucket, which re-files it when it expires, so the reset touches one
 * cache line and the timer still fires at its new time (never early). So
 * tw_wheel_next_expiry() may name a time at which nothing fires; that was
 * already possible (a coarse bucket expires before its timers are due), and
 * an event loop simply sleeps again.
 * @param wheel the wheel
 * @param timer an initialised timer with a callback
 * @param due the new absolute due time
 * @retval 1 it was pending (and is moved)
 * @retval 0 it was not pending (it is pending now)
 * @retval TW_EINVAL NULL wheel or timer, or no callback
 * @retval TW_EOWNER it is pending in another wheel (nothing changes)
 * @par Thread safety
 *      The wheel's thread; callbacks may call it.
 */
int tw_wheel_reschedule(struct tw_wheel *wheel, struct tw_timer *timer,
			int64_t due);

/**
 * Add a timer that may fire anywhere in [earliest, latest]: never before
 * earliest, never after latest (under one tick after it, as every exact
 * timer). It is filed once, in the coarsest bucket that fires inside the
 * window, and is never moved down a level before it fires; timers whose
 * windows overlap there share that bucket, so an event loop wakes once for
 * all of them (a connection's 30 s idle timeout with a 1 % window: see
 * docs/performance.md). A window in which no bucket of a level that
 * reaches it pops (one narrower than those levels' buckets, or, on a
 * wheel of few buckets, one that lies past the pops its levels hold: a
 * bucket above the first level pops a bucket's width before it starts,
 * so a level's last bucket pops a width short of its reach) is an exact
 * timer at the window's most aligned tick: the one in the window that is
 * a multiple of the largest power of two (1 % windows at 30 s, 300 ms
 * wide, land on multiples of 256 ms), so that overlapping windows still
 * fire together; it moves down the levels as any timer. A window whose
 * earliest has passed fires at the next advance. tw_timer_due() says
 * earliest for a window filed in a bucket, the aligned tick's start
 * (earliest or latest when the tick is theirs) for one filed exact. In
 * exact mode earliest == latest is tw_wheel_add(wheel, timer, earliest).
 * Exact mode only: a
 * kafka-mode wheel refuses every window call, earliest == latest
 * included (the service, above it, takes that one as a plain add).
 * @param wheel an initialised wheel in TW_MODE_EXACT
 * @param timer an initialised timer that is not pending
 * @param earliest the first time it may fire
 * @param latest the last time it may fire, >= earliest
 * @retval 0 added
 * @retval TW_EBUSY already pending (nothing changes)
 * @retval TW_EINVAL NULL wheel or timer, no callback, latest < earliest,
 *         or a kafka-mode wheel (nothing changes)
 * @par Thread safety
 *      The wheel's thread; callbacks may call it.
 */
int tw_wheel_add_range(struct tw_wheel *wheel, struct tw_timer *timer,
		       int64_t earliest, int64_t latest);

/**
 * tw_wheel_reschedule() to a window, made to be called on every packet.
 * A timer whose bucket still fires inside the new window is not moved at
 * all: a windowed one (filed in a bucket that pops inside its window)
 * stays while that pop is inside the new window, even when earliest has
 * passed, and takes the new earliest as its due time; an exact one stays
 * while its bucket expires by the window's end, due at the window's most
 * aligned tick from that expiration on (the bucket re-files it when it
 * expires, as tw_wheel_reschedule() leaves a timer pushed later), so that
 * timers pushed along together still fire together (one in a bucket
 * already popped and draining down is filed again at once, to fire
 * when it would have); pushed to a window
 * whose earliest has passed, it stays at its own tick if that is inside
 * (its due time, if outside the window, moved to the nearer edge).
 * Otherwise a pending timer moves: to the next advance where the window's
 * earliest has come (now or before it, as tw_wheel_add_range() files such
 * a window; tw_timer_due() says earliest), else, exact, to the window's
 * most aligned tick (see tw_wheel_add_range()): its reschedule seeks no
 * coarse bucket, so that a window pushed along stays in one bucket until
 * that bucket expires rather than moving each time the window slides
 * past a pop. A
 * timer that is not pending has no bucket to keep: it is filed as
 * tw_wheel_add_range() files it, in the coarsest bucket that pops inside
 * the window if there is one.
 * @param wheel an initialised wheel in TW_MODE_EXACT
 * @param timer an initialised timer, pending or not
 * @param earliest the first time it may fire
 * @param latest the last time it may fire, >= earliest
 * @retval 1 it was pending (and now has the new window)
 * @retval 0 it was not pending (it is pending now)
 * @retval TW_EINVAL as tw_wheel_add_range() (nothing changes)
 * @retval TW_EOWNER it is pending in another wheel (nothing changes)
 * @par Thread safety
 *      The wheel's thread; callbacks may call it.
 */
int tw_wheel_reschedule_range(struct tw_wheel *wheel, struct tw_timer *timer,
			      int64_t earliest, int64_t latest);

/**
 * Move the clock to now and run every timer that is due by then, in order of
 * the tick they fire at. At one tick, kafka mode runs buckets in order of
 * expiration (ties: the order Kafka's DelayQueue, a Java PriorityQueue,
 * pops them in); exact mode runs them in the order they pop, a bucket of a
 * higher level first (a windowed timer's bucket pops before its
 * expiration, inside the window), as tw_wheel_queue_snapshot() lists
 * them. Empty stretches of time cost nothing: the clock
 * jumps from bucket to bucket. Timers made due by callbacks during this call
 * run on the next call, in both modes (so a callback re-adding itself runs
 * once per advance and cannot loop). In kafka mode that includes a timer
 * whose tick this call reaches but Kafka's lagging clock had not: Kafka
 * would run such an add at once on an executor thread, so no Kafka user can
 * rely on it running in the same pass.
 * @param wheel an initialised wheel
 * @param now the clock's new time, >= the last one
 * @return the number of callbacks run, or TW_EINVAL (NULL wheel), TW_ERANGE
 *         (now is earlier than the last advance; nothing changes) or
 *         TW_EREENTER (called from a callback)
 * @par Thread safety
 *      The wheel's thread, outside callbacks.
 */
int64_t tw_wheel_advance(struct tw_wheel *wheel, int64_t now);

/**
 * tw_wheel_advance() without its order: every timer due by now runs, once,
 * but in no promised order among those not already due before the call
 * (those run first, as in tw_wheel_advance()). In exact mode never early,
 * under one tick late; callbacks as in tw_wheel_advance(). For a clock
 * that jumps -- an event loop that slept through many ticks, a batch job,
 * a test -- it is much cheaper: a bucket whose whole range has passed fires where it is,
 * where the ordered advance files each of its timers down level by level
 * to sort them (in exact mode at 64 buckets, about 3.5 moves per timer in a
 * one-jump expiry of timers spread over 3 h; docs/performance.md has the
 * figures). Stepping tick by tick, both cost the same. In kafka mode it is
 * tw_wheel_advance(), early firing included.
 * @param wheel an initialised wheel
 * @param now the clock's new time, >= the last one
 * @return as tw_wheel_advance()
 * @par Thread safety
 *      The wheel's thread, outside callbacks.
 */
int64_t tw_wheel_advance_unordered(struct tw_wheel *wheel, int64_t now);

/**
 * When advance next has work to do. Kafka mode: the expiration of the
 * earliest bucket (a higher-level bucket only moves its timers down, so
 * this is never later than the next timer, sometimes earlier). Exact mode:
 * the earliest tick a timer may fire at (each queued bucket's smallest due
 * tick since it last emptied, a lower bound a cancel leaves), or where a
 * big bucket starts to move down (below); an advance before it may move
 * timers down but fires nothing. Either: the current time if timers are
 * already due or that time has passed (in kafka mode a bucket may be filed
 * behind the clock, which lags the caller's time). An add can make it
 * earlier than the added timer's due time: in exact mode a bucket of more
 * than 2,048 timers moves them down in shares, from a time before its first
 * is due, and this names that time. A thread that sleeps until the answer
 * and wakes early only for adds due before it (as a reaper might) sleeps
 * through that time and moves such a bucket in one advance, its first
 * timers late by as long as that takes; asking again after a batch of adds
 * avoids it (tw_service asks when a bucket grows past 2,048 timers).
 * @param wheel an initialised wheel
 * @param[out] when the time, if anything is queued
 * @return false (and *when is left alone) if nothing is queued
 * @par Thread safety
 *      The wheel's thread.
 */
bool tw_wheel_next_expiry(const struct tw_wheel *wheel, int64_t *when);

/**
 * The poll timeout for an event loop (epoll_wait, uv_timer_start).
 * @param wheel an initialised wheel
 * @param now the caller's clock
 * @return -1 if nothing is queued, otherwise max(0, next expiry - now),
 *         clamped to INT64_MAX
 * @par Thread safety
 *      The wheel's thread.
 */
int64_t tw_wheel_timeout(const struct tw_wheel *wheel, int64_t now);

/**
 * The wheel's clock.
 * @param wheel an initialised wheel
 * @return the latest time given to advance (or init's start); 0 for NULL
 * @par Thread safety
 *      The wheel's thread.
 */
int64_t tw_wheel_now(const struct tw_wheel *wheel);

/**
 * Pending timers: the sum of the buckets' counts, O(levels in use x
 * wheel_size) (at most 835 buckets with the default 64 a level), so that
 * no add, cancel or fire pays for a running count. For statistics and
 * tests; an event loop asks tw_wheel_next_expiry() when to wake.
 * @param wheel an initialised wheel
 * @return how many timers are pending (0 for NULL)
 * @par Thread safety
 *      The wheel's thread.
 */
size_t tw_wheel_count(const struct tw_wheel *wheel);

/**
 * Levels created so far.
 * @param wheel an initialised wheel
 * @return 1 after init; Kafka's overflow wheels add more on demand (0 for
 *         NULL)
 * @par Thread safety
 *      The wheel's thread.
 */
unsigned tw_wheel_levels(const struct tw_wheel *wheel);

#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
