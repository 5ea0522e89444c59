/* SPDX-License-Identifier: MIT */
/**
 * @file
 * The timer service: Kafka's SystemTimer in C. Add, cancel and reschedule
 * from any thread; a reaper thread sleeps until the next bucket is due (on
 * Linux with a timer slack of 1 ns: PR_SET_TIMERSLACK) and hands expired
 * timers to a pool of executor threads (or runs them itself).
 *
 * Exactly once. Every timer added ends in exactly one of three ways, and the
 * caller learns which:
 *   - its callback runs (once per add; a periodic timer once per period);
 *   - tw_service_cancel() returns TW_SVC_STOPPED: it will not run;
 *   - tw_service_shutdown() hands it back through its hand_back function
 *     (it was still pending when the service shut down).
 * Never two of these, never none.
 *
 * One run at a time. A timer's callback never runs concurrently with
 * itself, however many executors there are: an expiry that comes due while
 * a run of the same timer is under way -- an add or a reschedule made
 * during the run, from any thread or from the callback, or a periodic
 * re-arm, either due before the run returned -- waits for that run to
 * return and then runs on the same thread (late by what was left of the
 * run, never early). One due after the run returned runs when it comes
 * due, on whichever thread takes it. Two exceptions, where it runs at the
 * next scan instead: where that thread is the one that polls the service
 * (or its reaper, running callbacks itself because the executors' queue is
 * full), so that no callback keeps a poll going; and where other expired
 * timers wait for an executor, so that it goes behind them and a timer
 * that keeps coming due during its own run (a callback that adds it again
 * due at once, a period shorter than its run) never holds an executor from
 * the rest. A callback need not be reentrant, and what it does to its own
 * timer (re-add, reschedule, cancel, free) is never raced by a second run
 * of it. (Linux keeps a re-armed timer on the CPU where its callback runs
 * for the same reason; Java's ScheduledThreadPoolExecutor: "will not
 * concurrently execute".)
 *
 * When may a timer be freed? When the service holds no reference to it:
 * after tw_service_timer_shutdown() (the teardown call: it waits for a
 * running callback and refuses every later add, so nothing can bring the
 * timer back), after its callback returned with nothing added since,
 * after tw_service_cancel_sync() returned with no add made meanwhile, or
 * after shutdown handed it back. Inside its own callback, a one-shot timer
 * may free itself as its last act (nothing in the service touches it
 * afterwards); so may a periodic timer once it has cancelled itself in
 * that callback. Both hold as long as nothing added the timer during that
 * run; tw_service_timer_shutdown() from the callback makes sure of it.
 *
 * Time is the clock's unit: nanoseconds of CLOCK_MONOTONIC by default
 * (TW_MS(30) and the like below write them). The wheel (wheel.h) has no unit
 * of its own: it counts in whatever unit its caller's clock reads.
 * Thread-safety: every function may be called from any thread, including
 * from callbacks, except tw_service_shutdown() and tw_service_poll()
 * (TW_EREENTER) and tw_service_destroy() (nothing happens) from a
 * callback or a hand_back.
 */
#ifndef TIMINGWHEEL_SERVICE_H
#define TIMINGWHEEL_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timingwheel/error.h"
#include "timingwheel/wheel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what this header declares
 * is its exported API. */
#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility push(default)
#endif

struct tw_service;
struct tw_service_timer;

/** @cond INTERNAL */
/* What the duration macros below expand to. A cast is C++'s own there,
 * so that a C++ program built with -Wold-style-cast takes the header. */
#if defined(__cplusplus)
#define TW__AS(type, v) static_cast<type>(v)
#else
#define TW__AS(type, v) ((type)(v))
#endif
#if defined(__cplusplus) && __cplusplus >= 201103L
#define TW__CONSTEXPR constexpr
#else
#define TW__CONSTEXPR
#endif
/* v rounded to an integer, half away from zero, without a comparison
 * (none warns for an unsigned argument): the whole part, and the
 * fraction doubled and truncated, which is 1 (or -1) from a half on. */
static inline TW__CONSTEXPR int64_t tw__round_half_away(long double v)
{
	return TW__AS(int64_t, v) +
	       TW__AS(int64_t, (v - TW__AS(long double, TW__AS(int64_t, v))) * 2);
}
/* x units of per nanoseconds: the whole units exactly, the fraction's
 * nanoseconds rounded. */
static inline TW__CONSTEXPR int64_t tw__duration_of(long double x, int64_t per)
{
	return TW__AS(int64_t, x) * per +
	       tw__round_half_away((x - TW__AS(long double, TW__AS(int64_t, x))) * per);
}
#if defined(__cplusplus)
#define TW__DURATION(x, per) tw__duration_of(TW__AS(long double, x), per)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
/* Only the association chosen is evaluated: an integer's product stays
 * a constant expression. */
#define TW__DURATION(x, per)                                                  \
	_Generic((x), float: tw__duration_of((x), per),                      \
		 double: tw__duration_of((x), per),                            \
		 long double: tw__duration_of((x), per),                       \
		 default: ((int64_t)((x) * (per))))
#else
#define TW__DURATION(x, per) ((int64_t)((x) * (per)))
#endif
/** @endcond */

/** @name Durations in the default clock's unit (nanoseconds)
 * For due times, delays, periods and the tick of a service on the default
 * clock: tw_service_add_in(svc, t, TW_MS(30)). Integers and fractions both
 * work, each argument evaluated once: an integer exactly, and a constant
 * expression where it is one (an enum's value, a static assertion); a
 * fraction rounded to the nearest nanosecond (TW_S(1.5) is 1,500,000,000,
 * and TW_MS(0.3) 300,000, though 0.3 is a hair under 0.3 in binary) --
 * but by TW_NS, which takes whole nanoseconds and truncates a fraction
 * towards zero as a cast does (TW_NS(1.5) is 1). The
 * result is an int64_t and overflows above 292 years. (In C, a fraction's
 * duration is an inline function's result, not a constant expression;
 * before C11, which has no _Generic, a fraction is truncated towards zero
 * instead.)
 * @{ */
#define TW_NS(x) TW__AS(int64_t, x)                  /**< x nanoseconds */
#define TW_US(x) TW__DURATION(x, 1000LL)             /**< x microseconds */
#define TW_MS(x) TW__DURATION(x, 1000000LL)          /**< x milliseconds */
#define TW_S(x) TW__DURATION(x, 1000000000LL)        /**< x seconds */
/** @} */

/**
 * A timer's callback, run once per expiry on an executor (or the reaper),
 * never two runs of one timer at once (see "One run at a time" above).
 * @param svc the service
 * @param t the timer; not pending while this runs, a periodic one
 *          neither: it is re-armed after its callback returns (unless
 *          an add, a reschedule or a cancel of it came during the run,
 *          which then stands)
 */
typedef void tw_service_fn(struct tw_service *svc, struct tw_service_timer *t);
/**
 * Receives a timer that was still pending at shutdown.
 * @param t the timer; no longer pending, and the service will not touch it
 * @param arg the argument given to tw_service_shutdown()
 */
typedef void tw_service_hand_back_fn(struct tw_service_timer *t, void *arg);

/** A manual service's way to wake its event loop (tw_service_set_wake()):
 *  write to an eventfd, uv_async_send(), and the like. Called from the
 *  thread of an add, a reschedule or a periodic timer's re-arm, with no
 *  lock of the service's held; it must not call into the service. */
typedef void tw_service_wake_fn(void *arg);

/**
 * What cancel found (non-negative results). A run starts when its runner
 * takes the expired timer to call its callback, an instant before the
 * call (for an add made during the timer's run, or a periodic timer due
 * again, as soon as that run returns): from then on a cancel says
 * TW_SVC_RUNNING (or stops an add made since: TW_SVC_STOPPED, the run
 * going on), tw_service_timer_pending() says false, and an add waits for
 * the run's end.
 */
enum tw_cancel_result {
	TW_SVC_IDLE = 0,    /**< not pending: never added, already ran, or
			         already stopped; nothing was changed */
	TW_SVC_STOPPED = 1, /**< it was pending (or expired but not yet
			         started) and will not run */
	TW_SVC_RUNNING = 2  /**< too late: its callback was running (a
			         periodic timer will not be re-armed after
			         that run). From
			         tw_service_cancel() it may still be running;
			         from tw_service_cancel_sync() and
			         tw_service_timer_shutdown() it has finished
			         (or, from its own callback, it is the caller;
			         or, for cancel_sync only, the timer was added
			         again while the call waited, and may still
			         be running) */
};

/**
 * A service timer. Embed it in your object; all fields are private. 64
 * bytes on LP64 (60 used), each for a reason:
 *  - 40: the wheel's timer (links, bucket, due time): its entry in its
 *    shard's wheel, or in the list of expired timers waiting to run;
 *  -  8: the callback;
 *  -  4: the state word: the state and three flags, the shard that holds
 *    the timer and the id of the owning service, claimed together by the
 *    first add, so that a timer is never in two services' wheels;
 *  -  4: the window asked for, in ticks (tw_service_add_range());
 *  -  4: where its last expiry waits to run: which runner (executor or
 *    reaper) and the place in that runner's batch.
 * A periodic timer needs its period and the due time of its current
 * period too (the wheel moves a window's due time to where it files it,
 * and the next period counts from the time asked for, not from there):
 * it is a struct tw_service_periodic (80 bytes on LP64), which embeds
 * this one, so that the one-shot timeouts most programs hold by the
 * million do not pay for it.
 */
struct tw_service_timer {
	struct tw_timer wheel_timer; /**< its entry in its shard's wheel (40 B) */
	tw_service_fn *fn;        /**< the callback */
	uint32_t state;           /**< state, flags, shard, owner's id (atomic;
				       src/service/state.h) */
	uint32_t slack;           /**< latest - earliest asked for, in ticks */
	uint16_t runner;          /**< the runner its last expiry went to */
	uint16_t place;           /**< its place in that runner's batch
				       (or, while it waits for an executor,
				       in the service's queue) */
};

/**
 * A periodic service timer: after each run it is re-added at its previous
 * due time + period (no drift) -- unless an add, a reschedule or a cancel
 * of it came during the run: then what that call asked for stands (a
 * reschedule to D: the next run at D, then D + period, D + 2 * period,
 * ...). A run that lasts past the next due time delays that run (never
 * two at once); the due times after it stay on the grid. A run whose due
 * time + period would pass INT64_MAX is its last: the timer is then not
 * pending, as after a cancel (no time is left to run it at). Add, cancel and
 * reschedule its timer member; the callback gets that member (recover
 * your object with offsetof/container_of through it). Prepare it with
 * tw_service_periodic_init(), never with tw_service_timer_init() (which
 * would make it one-shot).
 */
struct tw_service_periodic {
	struct tw_service_timer timer; /**< what the service functions take */
	int64_t period;                /**< > 0 while it is periodic */
	int64_t due;                   /**< the earliest time its current
					    period was asked for (the grid
					    the next period counts from) */
};

/** An injectable clock (tests drive a virtual one). */
struct tw_service_clock {
	/** The current time in the service's units; must never fail. A
	 *  clock that goes back is tolerated: the service keeps the latest
	 *  time it read, and an earlier time changes nothing (the reaper
	 *  counts it in stats.clock_backwards; tw_service_poll() returns
	 *  TW_ERANGE). "Never early" is against that latest time: a timer
	 *  added at now + delay while the clock reads behind it may be due
	 *  already. A service with a reaper sleeps until its next timer
	 *  for the difference of two readings taken as nanoseconds of
	 *  CLOCK_MONOTONIC, so its clock must count nanoseconds (from any
	 *  origin); a clock in other units belongs to a manual service,
	 *  whose own loop sleeps and polls (tw_service_timeout()). */
	int64_t (*now)(void *arg);
	void *arg; /**< passed to now */
};

/** How to build a service; zeros everywhere give the defaults. */
struct tw_service_config {
	int64_t tick;             /**< clock units per bucket; 0: 1,000,000,
				       1 ms of the default clock's
				       nanoseconds (a clock in other units
				       sets its own) */
	uint32_t wheel_size;      /**< 0: 64 in exact mode (its fastest), 20
				       (Kafka's) in kafka mode */
	unsigned executors;       /**< threads running callbacks; 0 (the
				       default): none, the reaper thread runs
				       every callback itself, so a slow
				       callback delays every timer behind it
				       (they run late, in exact mode never
				       early) and a
				       callback that blocks stops the service.
				       Give executors when callbacks may
				       block or take long. An executor takes
				       what waits a batch at a time (a quarter
				       of an even share, at most 64), so a
				       callback that blocks still delays the
				       rest of its own batch, though other
				       executors are idle */
	unsigned shards;          /**< wheels, each under its own mutex,
				       rounded up to a power of two; a
				       thread adds to one shard, chosen at its
				       first add (threads share them
				       round-robin), and a timer stays in the
				       shard of its first add. 0: the number
				       of online cores rounded up to a power
				       of two (at most 256) */
	size_t queue_capacity;    /**< executor queue; 0: 4096. When it is
				       full the reaper runs the callback
				       itself (back-pressure, nothing lost),
				       and every timer of every shard waits
				       for that callback as with no
				       executors: keep it well above the
				       timers due at once */
	bool manual;              /**< no reaper thread: call tw_service_poll() */
	enum tw_mode mode;        /**< TW_MODE_EXACT (default): never early */
	struct tw_service_clock clock; /**< now == NULL: CLOCK_MONOTONIC, ns */
};

/** Counters, for monitoring and for the exactly-once accounting. */
struct tw_service_stats {
	uint64_t added;           /**< successful adds (incl. reschedules, re-arms) */
	uint64_t ran;             /**< callbacks run */
	uint64_t stopped;         /**< adds that ended without running: a
				       cancel that returned TW_SVC_STOPPED (or
				       a cancel_sync TW_EDEADLK_STOPPED), or
				       a reschedule of a timer that was still
				       pending (its earlier add ends there), so
				       that added == ran + stopped + handed_back
				       once the service is shut down */
	uint64_t handed_back;     /**< at shutdown */
	uint64_t caller_ran;      /**< run by the reaper because
				       queue_capacity timers waited for
				       executors already */
	uint64_t clock_backwards; /**< times read from the clock behind the
				       latest one (ignored) */
	uint64_t wakeups;         /**< reaper wake-ups */
};

/**
 * Create and start a service (threads start here unless cfg->manual).
 * @param[out] out the new service (NULL on failure)
 * @param cfg the configuration, or NULL for the defaults
 * @retval 0 success
 * @retval TW_EINVAL NULL out, tick < 0, a wheel_size outside
 *         TW_WHEEL_SIZE_MIN..TW_WHEEL_SIZE_MAX (but 0), shards > 256,
 *         executors > 4096, a mode that is neither TW_MODE_EXACT nor
 *         TW_MODE_KAFKA
 * @retval TW_ENOMEM allocation failed
 * @retval TW_EAGAIN a thread could not start (nothing is left running:
 *         each thread has the default stack, and a 32-bit process has
 *         address space for some hundreds of 8 MB stacks, not 4096),
 *         or 2^18 - 1 services are alive at once (each needs an owner id
 *         no other live one holds)
 * @par Thread safety
 *      Any thread.
 */
int tw_service_create(struct tw_service **out, const struct tw_service_config *cfg);

/**
 * Prepare a one-shot timer in fresh memory (not pending).
 *
 * Only on memory no service refers to: new memory, or a timer whose last
 * use is over (tw_service_timer_shutdown() or tw_service_cancel_sync()
 * returned, its callback returned with nothing added since, shutdown
 * handed it back, or a plain tw_service_cancel() returned TW_SVC_STOPPED
 * or TW_SVC_IDLE for a timer whose callback cannot be running -- one
 * that has not run since its add, or whose last run you saw return --
 * and that no shutdown is handing back: a cancel says TW_SVC_IDLE from
 * the moment shutdown takes the timer, before its hand_back is called. A
 * cancel during a run stops an add made during that run and returns
 * TW_SVC_STOPPED while the callback still runs: only cancel_sync and
 * timer_shutdown wait for it). Not on a pending timer, nor while its
 * callback may run: the service links it in its wheel or holds it for a run, and
 * wiping those links loses other timers or runs this one twice. To give
 * a timer a new callback, call tw_service_timer_reinit(), which keeps
 * that bookkeeping and says when it cannot. (Nothing can check fresh
 * memory, so this function cannot refuse; the debug build names the
 * mistake.)
 * @param t the timer (NULL: nothing happens)
 * @param fn its callback (add refuses a timer without one)
 * @par Thread safety
 *      The timer's owner; no service is touched.
 */
void tw_service_timer_init(struct tw_service_timer *t, tw_service_fn *fn);

/**
 * Prepare a periodic timer in fresh memory (not pending); as
 * tw_service_timer_init() otherwise.
 * @param p the timer (NULL: nothing happens)
 * @param fn its callback (add refuses a timer without one)
 * @param period > 0: after each run it is re-added at its previous due
 *               time + period (no drift; not past INT64_MAX: that run is
 *               its last); <= 0: it behaves as a one-shot (from its next
 *               add on)
 * @par Thread safety
 *      The timer's owner; no service is touched.
 */
void tw_service_periodic_init(struct tw_service_periodic *p, tw_service_fn *fn,
			      int64_t period);

/**
 * Bind an initialised timer to a service and to the calling thread's
 * shard before its first add, as Linux's timer_setup() binds a timer to
 * its base: the claim that the first add would otherwise make (one
 * compare-and-swap), made here instead, so that the first add costs what
 * every later add costs, the shard's mutex and nothing more. Optional: an
 * add of a timer that is not bound claims it itself. Call it where the
 * timer is set up, from the thread that will add it (the shard is that
 * thread's). The binding lasts until tw_service_timer_init() or
 * tw_service_periodic_init() (a reinit keeps it), as a first add's claim
 * does.
 * @param svc the service
 * @param t an initialised timer
 * @retval 0 bound (or bound to svc already: nothing changed)
 * @retval TW_EINVAL NULL svc or t
 * @retval TW_EOWNER it belongs to another service (one destroyed since
 *         included, within the limit tw_service_destroy() gives; or for
 *         a moment to one whose first add of it races that service's
 *         shutdown, as tw_service_add() says)
 * @retval TW_ESHUTDOWN the service is shut down, whatever the timer (one
 *         not bound stays free for another service), or the timer is
 *         (tw_service_timer_shutdown(), as for tw_service_add(), the
 *         debug build naming it)
 * @par Thread safety
 *      Any thread, callbacks included.
 */
int tw_service_timer_bind(struct tw_service *svc, struct tw_service_timer *t);

/**
 * Give a timer used before a new callback, keeping what the service knows
 * of it. Safe right after a plain tw_service_cancel(), and from the
 * timer's own callback (a one-shot's run is then over; a periodic timer's
 * callback is refused until it cancelled itself). A run that had already
 * started when the cancel came (it returned TW_SVC_RUNNING) keeps the
 * callback it expired with; the new one is for the next add. The timer
 * keeps its service, and a periodic timer its period. It also lifts
 * tw_service_timer_shutdown()'s refusal of adds.
 * @param t an initialised timer
 * @param fn its new callback
 * @retval 0 done
 * @retval TW_EINVAL NULL t, or a timer never initialised (zeroed memory,
 *         or memory overwritten: tw_service_timer_init() prepares it)
 * @retval TW_EBUSY it is pending, expired and waiting to run, or a
 *         periodic callback of it runs that no cancel stopped (after a
 *         tw_service_cancel() that returned TW_SVC_RUNNING the run is
 *         its last, and a reinit is safe, as above) (nothing changed)
 * @par Thread safety
 *      The timer's owner, not concurrently with an add of it.
 */
int tw_service_timer_reinit(struct tw_service_timer *t, tw_service_fn *fn);

/**
 * tw_service_timer_reinit() for a periodic timer, with a new period too.
 * @param p an initialised periodic timer
 * @param fn its new callback
 * @param period as for tw_service_periodic_init()
 * @retval 0 done
 * @retval TW_EINVAL NULL p, or one never initialised, as for
 *         tw_service_timer_reinit()
 * @retval TW_EBUSY as for tw_service_timer_reinit() (nothing changed)
 * @par Thread safety
 *      The timer's owner, not concurrently with an add of it.
 */
int tw_service_periodic_reinit(struct tw_service_periodic *p, tw_service_fn *fn,
			       int64_t period);

/**
 * Whether the timer's latest add has not ended yet: it is pending, or it
 * expired and its callback has not started. False before the first add,
 * once its callback started (a periodic timer: until it is re-armed), and
 * after a cancel stopped it or shutdown handed it back. (Netty's
 * !isExpired() && !isCancelled().) A snapshot: another thread may change
 * it right after.
 * @param t an initialised timer
 * @return true while an add of it waits to run; false for NULL
 * @par Thread safety
 *      Any thread.
 */
bool tw_service_timer_pending(const struct tw_service_timer *t);

/**
 * Add at an absolute due time. O(1): the timer's shard's mutex, held for
 * the wheel's add. A timer's first add also claims it for the service,
 * and for the calling thread's shard, with one compare-and-swap. A first
 * add that races its own service's shutdown may claim the timer, find the
 * service closed and give the claim back (TW_ESHUTDOWN): another
 * service's add or bind of the timer in that moment gets TW_EOWNER,
 * and succeeds once that add has returned.
 * @param svc the service
 * @param t an initialised timer
 * @param due absolute due time in clock units
 * @retval 0 success
 * @retval TW_EINVAL NULL svc or t, or no callback
 * @retval TW_EBUSY already pending, or expired and waiting to run (not
 *         once its run started: enum tw_cancel_result)
 * @retval TW_EOWNER it belongs to another service (one destroyed since
 *         included, within the limit tw_service_destroy() gives)
 * @retval TW_ESHUTDOWN the service is shut down, or the timer is
 *         (tw_service_timer_shutdown(); the debug build names it as the
 *         mistake it is, unless the add comes from the timer's own
 *         callback, whose re-add the teardown refuses by design)
 * @par Thread safety
 *      Any thread, callbacks included.
 */
int tw_service_add(struct tw_service *svc, struct tw_service_timer *t, int64_t due);

/**
 * Add at now + delay; a delay <= 0 is due now.
 * @param svc the service
 * @param t an initialised timer
 * @param delay clock units from tw_service_now()
 * @return as tw_service_add(), or TW_EOVERFLOW if now + delay does not fit
 *         an int64_t (past either end: a negative delay too, although it
 *         would be due now)
 * @par Thread safety
 *      Any thread, callbacks included.
 */
int tw_service_add_in(struct tw_service *svc, struct tw_service_timer *t,
		      int64_t delay);

/**
 * Move to a new due time, pending or not.
 *
 * During a run of the timer's callback (from another thread, or from the
 * callback itself) it returns TW_SVC_RUNNING -- or TW_SVC_STOPPED when an
 * add made during the run still waits for it (that add ends here): the
 * run goes on, a periodic timer is not re-armed after it, and the timer
 * is pending at due instead.
 * If due comes before the run returned, the timer runs after it, never
 * beside it: with executors right after it, on the same executor; without,
 * at the next scan (the reaper's, which the reschedule wakes, or a manual
 * service's next tw_service_poll(), for which tw_service_next_expiry()
 * then answers now). A periodic timer then goes on at due + period,
 * due + 2 * period, ...
 * @param svc the service
 * @param t an initialised timer
 * @param due the new absolute due time
 * @return what a cancel would have returned (a TW_SVC_* value), after which
 *         the timer is pending at due; or an error as for tw_service_add()
 *         (then nothing changed)
 * @par Thread safety
 *      Any thread, callbacks included.
 */
int tw_service_reschedule(struct tw_service *svc, struct tw_service_timer *t,
			  int64_t due);

/**
 * Move to now + delay, pending or not (a connection touched: its idle
 * timeout starts again); a delay <= 0 is due now. Everything else as
 * tw_service_reschedule().
 * @param svc the service
 * @param t an initialised timer
 * @param delay clock units from tw_service_now()
 * @return as tw_service_reschedule(), or TW_EOVERFLOW if now + delay does
 *         not fit an int64_t (then nothing changed)
 * @par Thread safety
 *      Any thread, callbacks included.
 */
int tw_service_reschedule_in(struct tw_service *svc, struct tw_service_timer *t,
			     int64_t delay);

/**
 * Add with a window: the timer runs no earlier than earliest and no later
 * than the first tick at or after latest -- under one tick after latest,
 * as a timer added at latest (tw_wheel_add_range() says the same) --
 * plus the reaper's own lateness, as every timer. The
 * service's wheel files it once, in the coarsest bucket that fires inside
 * the window (tw_wheel_add_range()), where it is never moved before it
 * fires, and timers whose windows overlap there fire in one wake-up of
 * the reaper. A window in which no bucket of a level that reaches it
 * pops (at a 1 ms tick and 64 buckets, one narrower than 32 ms up to 2 s
 * away, 1.024 s up to 64 s; tw_wheel_add_range() says more) is filed at
 * its most aligned tick (the one in the window that is a multiple of the
 * largest power of two, so that overlapping windows still run in one
 * wake-up) and moves down the levels as any timer. The window is kept in whole ticks: latest - earliest rounds
 * down to a multiple of the tick (and to at most 2^32 - 1 ticks), so it
 * only ever narrows. earliest == latest is tw_service_add(svc, t,
 * earliest). A periodic timer keeps its window at each re-arm: every run
 * in [due, due + the window], its end under one tick late as above.
 * @param svc the service
 * @param t an initialised timer
 * @param earliest the first time it may run, absolute, in clock units
 * @param latest the last time it may run, >= earliest
 * @return as tw_service_add()
 * @retval TW_EINVAL also: latest < earliest, or a window (latest >
 *         earliest) on a service in TW_MODE_KAFKA, which files timers
 *         as Kafka does (nothing changed)
 * @par Thread safety
 *      Any thread, callbacks included.
 */
int tw_service_add_range(struct tw_service *svc, struct tw_service_timer *t,
			 int64_t earliest, int64_t latest);

/**
 * tw_service_reschedule() to a window: as tw_service_add_range() for a
 * timer pending or not. A timer whose bucket in the wheel still fires
 * inside the new window is not moved (tw_wheel_reschedule_range(): a
 * connection's idle timeout pushed on every read costs the reaper no move
 * while its bucket still fits).
 * @param svc the service
 * @param t an initialised timer
 * @param earliest the first time it may run
 * @param latest the last time it may run, >= earliest
 * @return as tw_service_reschedule(); TW_EINVAL as tw_service_add_range()
 * @par Thread safety
 *      Any thread, callbacks included.
 */
int tw_service_reschedule_range(struct tw_service *svc,
				struct tw_service_timer *t, int64_t earliest,
				int64_t latest);

/**
 * Stop a timer: under its shard's mutex it leaves the wheel (or the list
 * of expired timers waiting to run) at once. Does not wait: if the
 * callback is running, it goes on. Use tw_service_timer_shutdown() (or
 * tw_service_cancel_sync()) before freeing the timer.
 * @param svc the service
 * @param t a timer
 * @return TW_SVC_STOPPED, TW_SVC_RUNNING or TW_SVC_IDLE (see
 *         enum tw_cancel_result), or TW_EINVAL (NULL) or TW_EOWNER (it
 *         belongs to another service: the owner is set once, by the
 *         first add, so a cancel never stops another service's timer,
 *         even one whose first add races it; nothing changed)
 * @par Thread safety
 *      Any thread, callbacks included.
 */
int tw_service_cancel(struct tw_service *svc, struct tw_service_timer *t);

/**
 * Like cancel, and then wait until its callback is not running (the
 * kernel's del_timer_sync). Afterwards nothing in the service refers to
 * the timer, and it may be freed -- unless it was added again meanwhile
 * (below): tw_service_timer_shutdown() refuses those adds, and is the
 * call to make before freeing a timer that other threads or its own
 * callback may add again.
 *
 * The rules that come with waiting:
 *   - From the timer's own callback it does everything but wait for that
 *     callback, and returns what the cancel did: TW_SVC_STOPPED if it
 *     stopped an add made meanwhile (by another thread, say), else
 *     TW_SVC_RUNNING (the caller is the callback). A one-shot callback may
 *     then free its timer as its last act.
 *   - A cycle -- callbacks of timers A and B cancel_sync B and A at the
 *     same time, or any longer ring, of one service or across several
 *     (and hand_back functions in it) -- would wait for ever. At least
 *     one of the callbacks in it gets TW_EDEADLK instead, or
 *     TW_EDEADLK_STOPPED where its cancel stopped an add (made during the
 *     run it would wait for): count that add as ended, as after
 *     TW_SVC_STOPPED. Either way its cancel took effect, and the call did
 *     not wait: the other callback may still run, so the timer may not be
 *     freed yet. Cycles through the caller's own locks are the caller's
 *     to avoid, as with the kernel's del_timer_sync().
 *   - If the timer is added again while this call waits -- by another
 *     thread, or by the very callback it waits for -- the call returns:
 *     the timer belongs to that add now, its callback may still be
 *     running, and it may not be freed yet (after a cancel_sync that
 *     returns without such an add, it may). tw_service_timer_shutdown()
 *     is this call with those adds refused.
 *   - If shutdown is handing the timer back, the call returns TW_SVC_IDLE
 *     once its hand_back has returned. A timer still waiting for its turn
 *     to be handed back is pending: the cancel stops it (TW_SVC_STOPPED) at
 *     once, from any thread (a hand_back included), and it is not handed
 *     back.
 * @param svc the service
 * @param t a timer
 * @return as tw_service_cancel(), or TW_EDEADLK or TW_EDEADLK_STOPPED (a
 *         cycle, see above)
 * @par Thread safety
 *      Any thread, callbacks and hand_back included.
 */
int tw_service_cancel_sync(struct tw_service *svc, struct tw_service_timer *t);

/**
 * Tear a timer down so that it may be freed: tw_service_cancel_sync(), and
 * from then on every add of the timer -- tw_service_add() and its
 * variants, a reschedule, a periodic timer's re-arm, its own callback's
 * re-add -- is refused with TW_ESHUTDOWN, until tw_service_timer_init()
 * (or tw_service_timer_reinit()) prepares it again. When it returns the
 * service holds no reference to the timer and its callback is not
 * running, whatever other threads or the callback itself do meanwhile
 * (Linux's timer_shutdown_sync()). From the timer's own callback it does
 * all but wait for that callback: the callback may then free the timer
 * as its last act. Cycles of waits get TW_EDEADLK as from
 * tw_service_cancel_sync() (the refusal of adds is in place all the
 * same). A timer never added is marked too, and refused by every
 * service.
 * @param svc the service
 * @param t a timer
 * @return what the cancel did (enum tw_cancel_result), or TW_EINVAL
 *         (NULL), TW_EOWNER (another service's timer; nothing changed),
 *         TW_EDEADLK or TW_EDEADLK_STOPPED
 * @par Thread safety
 *      Any thread, callbacks and hand_back included.
 */
int tw_service_timer_shutdown(struct tw_service *svc, struct tw_service_timer *t);

/**
 * Manual services: run (or queue for the executors) everything due at the
 * clock's current time, however many timers that is. The poll advances
 * each shard once: a timer that one of these callbacks adds, due already,
 * runs at the next poll -- or in this one, when it lands in a shard this
 * poll has still to advance -- so callbacks that add due timers cannot
 * keep a poll going. The same holds for another thread's add that returns
 * while a poll is under way; an add that returned before the poll began
 * runs in it if its time has come by the clock's time: in exact mode that
 * is its due time rounded up to its tick (due at 1,500 with a tick of
 * 1,000, it runs in a poll at 2,000 or later, never in one at 1,500) --
 * unless the service's time had already reached its due time when it was
 * added (a poll that read the clock at 1,500 or later returned before the
 * add began; a poll under way during the add may not have made the time
 * it read the service's yet): such a timer is due at once and runs at the
 * next poll that runs anything, whatever time that reads (one whose clock
 * reads behind the service's time returns TW_ERANGE and changes nothing).
 * A window's due time is its earliest; tw_service_reschedule_range() does
 * not move a pending timer whose bucket still fires inside the new window,
 * reached or not (it runs when its bucket fires).
 * @param svc the service
 * @return how many were dispatched (expired by this poll: run here or
 *         queued for the executors, one a callback stops before its turn
 *         included), or TW_EINVAL (NULL, or a service with a reaper:
 *         its reaper polls it), TW_ERANGE (the clock went backwards;
 *         nothing changes), TW_EREENTER (from a callback) or
 *         TW_ESHUTDOWN
 * @par Thread safety
 *      Any thread but the callbacks; one poll at a time.
 */
int64_t tw_service_poll(struct tw_service *svc);

/**
 * Manual services: how the service wakes the event loop that polls it
 * when something its last answer (tw_service_next_expiry(),
 * tw_service_timeout()) could not see happens: an add or a reschedule
 * from another thread (or from the loop's own thread between polls, which
 * then wakes itself once, harmlessly), the re-arm of a periodic timer
 * whose run the poll queued for an executor (the executor re-arms it
 * after the loop asked; no poll sees it, and without a wake the loop
 * sleeps past it), or an add made during its timer's run on an executor
 * (it waits for that run's end, which files it and wakes the loop).
 * The first such call after each question wakes the loop, whatever its
 * due time (the loop asks again, and may sleep as long as before): the
 * service calls wake(arg) once for all that comes after a question
 * (tw_service_next_expiry(), any thread's), though a call decided before
 * the question may still be made after it (a spurious wake, never a lost
 * one). Never from the thread that is polling while it polls (its loop
 * asks after the poll); for a periodic timer's re-arm on an executor,
 * only once that run is over (a cancel then finds no run, and a
 * cancel_sync does not wait for the wake), while an add, a reschedule or
 * tw_service_kick() from a callback running on an executor calls it
 * there, inside the run. The loop must consume its wake-up (read the
 * eventfd) before it asks tw_service_timeout(), not after: a wake that
 * comes after the question is then never lost.
 * Set it before other threads add to the service or its executors run
 * periodic timers, and take it away (NULL), or free what wake uses, only
 * once they have stopped (or the service is destroyed): a call that
 * loaded the old function may still be running, with the old argument or
 * the new one, and so may the call of an add still returning when
 * tw_service_shutdown() returns.
 * @param svc a manual service
 * @param wake the function, or NULL
 * @param arg passed to wake
 * @retval 0 done
 * @retval TW_EINVAL NULL svc, or a service with a reaper (it needs none)
 * @par Thread safety
 *      Any thread, as the paragraph above says.
 */
int tw_service_set_wake(struct tw_service *svc, tw_service_wake_fn *wake,
			void *arg);

/**
 * Manual services: when tw_service_poll() next has work to do, for an event
 * loop (tw_wheel_next_expiry() of the service's wheel). Never later than
 * the earliest pending timer's due time, or the end of its window, each
 * rounded up to its tick (under one tick after it): a loop that sleeps
 * until then and polls misses nothing, and in exact mode runs nothing
 * early (the poll never does; kafka mode's buckets fire at their start,
 * up to a tick early, as its answer says). It may be earlier
 * (a bucket of a higher level only moves its timers down, a cancelled
 * timer's bucket still expires); the loop then polls and asks again.
 *
 * It looks at every shard under its mutex, so every add that returned
 * before it, from any thread, is in its answer, and so is every periodic
 * timer a poll re-armed. Not in it: an add from another thread after it,
 * a periodic timer whose run a poll queued for an executor and that the
 * executor has not re-armed yet, and an add made during its timer's run
 * on an executor, which waits for that run's end (the answer may then be
 * "nothing pending"). Each calls the function given to
 * tw_service_set_wake(); a loop without one must wake itself for them (an
 * add's own thread can, an executor's re-arm or run's end cannot: give
 * one when timers run on executors).
 * @param svc the service
 * @param[out] when the due time, in clock units; the service's latest
 *             clock's time when timers are due already
 * @return false if nothing is pending but what the paragraph above leaves
 *         out, and, in TW_MODE_KAFKA, no bucket that held a timer since
 *         cancelled is still to expire (or NULL svc or when; *when is
 *         then untouched)
 * @par Thread safety
 *      Any thread, callbacks included.
 */
bool tw_service_next_expiry(struct tw_service *svc, int64_t *when);

/**
 * The poll timeout for an event loop driving a manual service
 * (tw_wheel_timeout() for the service): how long it may sleep before its
 * next tw_service_poll(), with tw_service_next_expiry()'s promise (and its
 * rule for adds from other threads). In clock units: on the default clock
 * nanoseconds, which epoll_wait() and uv_timer_start() take in whole
 * milliseconds, rounded up (timeout / 1000000 + (timeout % 1000000 != 0);
 * not (timeout + 999999) / 1000000, which overflows near the INT64_MAX
 * clamp): rounding down would wake the loop before the timer is due, and
 * it would spin on polls that find nothing.
 * @param svc the service
 * @param now the service's clock (tw_service_now())
 * @return -1 where tw_service_next_expiry() says false (or NULL svc),
 *         otherwise
 *         max(0, next expiry - now), clamped to INT64_MAX
 * @par Thread safety
 *      Any thread, callbacks included.
 */
int64_t tw_service_timeout(struct tw_service *svc, int64_t now);

/**
 * Wake the reaper, so it reads the clock again (after moving an injected
 * clock); for a manual service, call its wake function
 * (tw_service_set_wake()) unless one was made (or decided) since the
 * last tw_service_next_expiry(), or the caller is the thread polling it
 * (from a callback the poll runs: its loop asks after the poll).
 * @param svc the service (NULL: nothing happens)
 * @par Thread safety
 *      Any thread.
 */
void tw_service_kick(struct tw_service *svc);

/**
 * Read the service's clock.
 * @param svc the service
 * @return the clock's current time, or 0 for NULL
 * @par Thread safety
 *      Any thread.
 */
int64_t tw_service_now(const struct tw_service *svc);

/**
 * Timers waiting in the shards' wheels for their due time. Not counted,
 * though tw_service_timer_pending() says true for them: a timer that has
 * expired and waits to run, and an add made during its timer's run on an
 * executor, which waits for that run's end (with no executors such an
 * add is filed in the wheel at once, and counted).
 * @param svc the service
 * @return timers pending (0 for NULL); with other threads adding and
 *         cancelling, a snapshot
 * @par Thread safety
 *      Any thread (takes each shard's mutex in turn, and sums its wheel's
 *      buckets under it, as tw_wheel_count() does: for statistics, not
 *      for every operation).
 */
size_t tw_service_count(struct tw_service *svc);

/**
 * Read the counters.
 * @param svc the service
 * @param[out] out the counters (zeroed for a NULL svc; NULL out: nothing)
 * @par Thread safety
 *      Any thread.
 */
void tw_service_stats(struct tw_service *svc, struct tw_service_stats *out);

/**
 * Stop accepting adds (TW_ESHUTDOWN from then on), stop the reaper, let the
 * executors run what already expired (what a scan took out of its wheel:
 * one due by the clock but not yet taken is still pending) and exit, then
 * hand every timer that is still pending to hand_back, on this thread, one
 * at a time. hand_back
 * runs like a callback: shutdown from it is refused, a cancel_sync of the
 * timer it holds waits until it returned. A timer is handed back when
 * shutdown takes it, under its shard's mutex, an instant before its
 * hand_back is called; until then it is still pending: a cancel (from
 * hand_back or any thread) stops it, and then it is not handed back.
 * From the take on, a cancel says TW_SVC_IDLE (that add ended in the
 * hand-back) and tw_service_timer_pending() false: only cancel_sync and
 * tw_service_timer_shutdown() wait for the hand_back to return.
 * @param svc the service
 * @param hand_back receives each pending timer (may be NULL)
 * @param arg passed to hand_back
 * @return how many were handed back (0 when called again), or TW_EINVAL
 *         (NULL) or TW_EREENTER (from a callback), or TW_ECORRUPT: the
 *         service lost track of a timer it held, and says so instead of
 *         waiting for it for ever. A timer initialised (or its memory
 *         reused) while pending leaves links no walk can follow, or an
 *         add that never ends: the walk stops at the first broken link,
 *         and the count of adds does not balance with the runs, stops
 *         and hand-backs. The timers it could reach were handed back all
 *         the same. (The debug build names the init at the call.)
 * @par Thread safety
 *      Any thread but the callbacks.
 */
int64_t tw_service_shutdown(struct tw_service *svc,
			    tw_service_hand_back_fn *hand_back, void *arg);

/**
 * Shut down (handing nothing back) if needed, and free. It never waits
 * for a timer it cannot account for: see TW_ECORRUPT below. Its timers
 * keep its owner id (an 18-bit number in their state word) until
 * tw_service_timer_init(): another service refuses them (TW_EOWNER) only
 * until 2^18 - 1 more services have been created, when a new one may
 * get that id back and cannot tell such a timer from its own: a call
 * with it then acts on the state the old service left (the runner that
 * last took it, which the new service may not have). Initialise a
 * destroyed service's timers before any other service sees them.
 * @param svc the service
 * @retval 0 done
 * @retval TW_EINVAL NULL svc (nothing happens)
 * @retval TW_EREENTER called from a callback or a hand_back of any
 *         service (nothing happens, as tw_service_shutdown() refuses
 *         there)
 * @retval TW_ECORRUPT freed, but the service had lost track of a timer
 *         it held (as tw_service_shutdown() says: a timer initialised
 *         while pending); the debug build (TW_DEBUG) aborts instead,
 *         naming the timer when it found one
 * @par Thread safety
 *      Any thread but the callbacks; nothing may use svc after
 *      (unless TW_EINVAL or TW_EREENTER).
 */
int tw_service_destroy(struct tw_service *svc);

#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
