/* SPDX-License-Identifier: MIT */
/*
 * core.h — Kafka's SystemTimer on locked shards: the wheel made safe for
 * many threads the way Linux's per-CPU timer bases, tokio's sharded driver
 * and Go's per-P heaps make theirs, with each timer under one lock.
 *
 * Files (src/service/), each opening with what it owns:
 *   state.h      the timer's state word and its transitions
 *   timer.c      add, reschedule, cancel, reinit, pending: the calls any
 *                thread makes on a timer, each under its shard's mutex
 *   run.c        the runners: a shard's expiry, the batches, a run and its
 *                end, the executors, the reaper, poll, next_expiry, kicks
 *   sync.c       cancel_sync and timer_shutdown: waiting for a run, and
 *                the cycles of waits (TW_EDEADLK)
 *   lifecycle.c  timer init, create, shutdown and hand-back, destroy,
 *                count, stats, owner ids
 *   transitions.c  (test-point build) every transition checked against
 *                the model's table
 *   for_purgatory.h  what the purgatory calls beyond the public API
 *
 * Structure. N shards (a power of two at least the number of cores by
 * default), each a wheel under its own mutex. A thread adds to its shard,
 * chosen once per thread (round robin); a timer's first add claims it for
 * the service and that shard in one compare-and-swap on its state word,
 * and from then on every call on the timer locks that shard (the shard
 * never changes until the timer is initialised again, so no lock needs a
 * re-check). An add is one uncontended mutex and the wheel's add; a cancel
 * unlinks the timer at once. Threads do not meet unless they touch the
 * same timers, or the reaper takes a shard's due timers.
 *
 * Locks, and what each guards:
 *   shard->mu       the shard's wheel, its expired list, its hand-back
 *                   list, its counters and reaper_sees; the state word of
 *                   every timer the shard holds (state.h), and the timer's
 *                   runner, place, slack and links
 *   svc->work_mu    the executors' list of shards with expired timers
 *                   (taken inside a shard's mutex, never the other way)
 *   svc->reaper_mu  the reaper's kicked and stop flags (a leaf)
 *   svc->scan_mu    one scanner at a time: the reaper or a poll
 *   svc->idle_mu    cancel_sync's sleep (a leaf)
 *   sync_waits_mu   the callbacks waiting in cancel_sync, process-wide
 *   svc->shutdown_mu  one shutdown
 * No callback ever runs under any of them.
 *
 * Expiry. The scanning thread (the reaper, or a manual service's poll)
 * advances each shard's wheel to the clock under the shard's mutex; every
 * due timer moves, still under that lock, to the shard's expired list
 * (QUEUED): a list through the timer's own wheel links, so no expiry
 * allocates and a cancel unlinks a queued timer in O(1). Runners take
 * timers off that list in batches of up to BATCH, again under the mutex
 * (TAKEN, with their place in the batch recorded in the timer), and run
 * them after letting go of it. Without executors the scanner is the one
 * runner and runs each shard's list as soon as it has advanced it; with
 * executors the shard goes on the executors' work list and one executor
 * is woken (one that takes a batch and leaves more behind wakes the
 * next) until queue_capacity timers wait; what expires past that the
 * scanner takes into its own batch and runs itself (back-pressure).
 *
 * The claim. A batch slot holds the timer until the runner claims it with
 * one exchange on that slot, just before the callback; a cancel of a
 * taken timer, under the shard's mutex, tries a compare-and-swap of the
 * same slot from the timer to NULL. Exactly one of the two wins: the
 * cancel (TW_SVC_STOPPED: the runner finds NULL and never touches the
 * timer, so cancel_sync may return and the timer be freed) or the runner
 * (the run is under way: TW_SVC_RUNNING). The callback the run calls is
 * the one read when the timer was taken, so a reinit after a cancel that
 * lost never changes a run that started.
 *
 * The running mark. Each runner has a slot, running, where it stores the
 * timer before its claim and clears it when the run is over: Linux's
 * base->running_timer, per runner rather than per shard because several
 * executors run one shard's timers at once. The mark lives in the runner,
 * not in the timer, so that a one-shot callback may free its own timer:
 * after the callback the runner touches only its slot. A timer records the
 * runner its last expiry went to (t->runner, F_RAN), so "is its callback
 * running?" is one look at one slot: what a cancel answers RUNNING for,
 * and what cancel_sync waits on.
 *
 * One run at a time. With executors, an add of a timer whose callback is
 * running (from another thread, or from the callback) does not go in the
 * wheel, where another executor could fire it beside the run: it is
 * DEFERRED, and the run's slot is tagged RUN_AGAIN with one compare-and-
 * swap. The run's end clears its slot with a compare-and-swap too; when
 * the tag is there it takes the shard's mutex and files the timer -- or,
 * when it is due already, runs it again at once on the same thread. A
 * periodic timer is re-armed the same way, under the mutex, at the run's
 * end: at its previous due time plus its period, unless an add, a
 * reschedule or a cancel came during the run. Without executors the one
 * runner cannot overlap itself, and adds always go in the wheel.
 *
 * cancel_sync stops the timer as cancel does and then waits until the
 * runner its last expiry went to no longer runs it; timer_shutdown also
 * sets F_SHUT under the mutex, so that no add can bring the timer back
 * while it waits or after. From the timer's own callback neither waits
 * for itself. A callback that would wait for a callback that waits for
 * it, in one service or across several, gets TW_EDEADLK (sync.c).
 *
 * The reaper sleeps until the earliest next expiry of the shards, read
 * under each shard's mutex, where it also leaves it (reaper_sees): an add
 * that must run before what the reaper saw for its shard (its window's
 * end rounded up to its tick, tw__svc_runs_by) kicks it, once (it lowers
 * reaper_sees); one that runs at that tick or later waits for it, unless
 * it made its bucket big enough to drain in shares from an earlier pop
 * (wheel/for_service.h), which lowers reaper_sees to the wheel's next
 * expiry and kicks the same way. Both happen under the same mutex, so
 * the reaper either finds the timer or the add sees the old time and kicks;
 * the kick sets a flag under reaper_mu that the reaper reads before it
 * sleeps. Every time read from the clock goes through one rule: the
 * service keeps the latest, and a time behind it counts in
 * stats.clock_backwards and changes nothing.
 *
 * Shutdown closes each shard under its mutex (adds get TW_ESHUTDOWN from
 * then on), stops the reaper, lets the executors run what expired and
 * exit, then moves every pending timer of each shard to that shard's
 * hand-back list (HANDING, still pending to a cancel) and hands them back
 * one at a time, each marked in the hand-back runner's slot while its
 * hand_back runs, as a callback is.
 *
 * All of this is modelled in model/service.pml and checked by SPIN (make
 * model); the programs of tests/service/ built with the test points of
 * test_point.h force each interleaving (docs/model.md).
 */
#ifndef TW_SERVICE_CORE_H
#define TW_SERVICE_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../debug.h"
#include "../list.h"
#include "../lock.h"
#include "../test_point.h"
#include "../wheel/for_inspect.h"
#include "../wheel/for_service.h"
#include "bell.h"
#include "for_purgatory.h"
#include "state.h"
#include "timingwheel/service.h"

/* What the service's files share is hidden from the shared library's
 * users (as everything but tw_* is), and named tw__svc_* so that it
 * cannot collide with a name of theirs in the static library. */
#define TW_HIDDEN __attribute__((visibility("hidden")))

/* Timers a runner takes from a shard per lock hold, and runs before it
 * takes more: few enough that they are still in the cache when they run
 * (a batch is taken and run by one thread), many enough that the lock is
 * a small part of an expiry. */
#define BATCH 64
/* The scanner's first batch of a shard's scan without executors, each
 * next one twice as large up to BATCH: the first callback of a wake runs
 * after FIRST_BATCH timers are taken, not 64, each a cache miss (the
 * reaper's lateness: the first callback after a tick boundary 20-30 us
 * earlier, docs/service.md), for a few more lock holds a scan. */
#define FIRST_BATCH 8
#define MAX_EXECUTORS 4096

/* running's low bit: an add came during the run and waits for its end. */
#define RUN_AGAIN ((uintptr_t)1)

/* A thread that runs callbacks: an executor, the scanner, or shutdown's
 * hand-back. Its batch and running slot are written by its own thread
 * and compared-and-swapped by cancels under a shard's mutex. */
struct runner {
	_Alignas(64) _Atomic(struct tw_service_timer *) running;
	_Atomic(struct tw_service_timer *) slot[BATCH];
	tw_service_fn *fn[BATCH];     /* each timer's callback when taken */
	/* and its state word then, whose F_PERIODIC says whether it
	 * re-arms after: a pointer-sized word, as the slots and callbacks
	 * are, so that one index walks the three and the run keeps its
	 * timer in a register. */
	uintptr_t periodic[BATCH];
	/* The periodic[] words of the batch or'ed: without F_PERIODIC when
	 * none of its timers re-arms, the common batch, which then runs
	 * without asking each run about a re-arm (run.c, run_batch). */
	uintptr_t periodic_any;
	unsigned len;
	/* The most an expiry puts into the batch directly (s->direct):
	 * BATCH, less in the scanner's first batches of a scan without
	 * executors (FIRST_BATCH). */
	unsigned cap;
	unsigned index;               /* in svc->runners */
	/* Written by this runner, read by stats. */
	_Atomic uint64_t ran, caller_ran;
};

struct shard {
	_Alignas(64) unsigned mu; /* lock.h: shard_lock() */
	struct tw_wheel wheel;
	struct tw_link expired;   /* QUEUED timers, oldest first */
	struct tw_link handing;   /* shutdown's list */
	/* Timers on the expired list: written under mu, read by executors
	 * and the scanner sizing their batches (all shards). */
	_Atomic uint64_t nexpired;
	/* The earliest time the reaper will look at this shard again, as it
	 * last saw it: an add that ends before it kicks the reaper. */
	int64_t reaper_sees;
	/* The reaper saw nothing pending here (reaper_sees is then
	 * INT64_MAX, and it sleeps until kicked): an add at INT64_MAX, which
	 * ends before no reaper_sees, kicks it too, as the end of time is
	 * due when an injected clock reads it (run.c, wait_until()). */
	bool reaper_idle;
	/* The wheel's unit on the service's clock (its_due() and the
	 * helpers beside it): the service's tick in exact mode, whose
	 * wheel counts in ticks, 1 in kafka mode, whose wheel keeps the
	 * service's time. */
	int64_t unit;
	bool closed;              /* shutdown began: adds refused */
	bool posted;              /* on the executors' work list */
	/* The scanner's runner while it advances this wheel and runs what
	 * expires itself (no executors), else NULL: the wheel's callback
	 * takes what expires straight into its batch, and stops the advance
	 * when the batch is full (run.c). */
	struct runner *direct;
	/* With executors, during the scanner's advance: the count of the
	 * expired list at which the service's queue_capacity is reached
	 * (0: not during this advance); the timer that brings it there
	 * turns direct on, so that what expires after it goes to the
	 * scanner (run.c, scan_shard). */
	uint64_t spill_at;
	struct shard *work_next;
	/* Written under mu (a store each, no read-modify-write), read by
	 * stats from any thread. moved: pending timers rescheduled, each an
	 * add stopped and an add made, which stats counts in both (one
	 * store a reschedule instead of two). */
	_Atomic uint64_t added, stopped, moved;
	struct tw_service *svc;
};

/* A shard's lock (lock.h): held for a few lines by every add, cancel,
 * reschedule and batch, and never waited on with a condition variable. */
static inline void shard_lock(struct shard *s)
{
	tw__lock_acquire(&s->mu);
}

static inline void shard_unlock(struct shard *s)
{
	tw__lock_release(&s->mu);
}

struct tw_service {
	struct tw_service_config cfg;
	uint32_t owner_bits;      /* this service's id << OWNER_SHIFT */
	/* Calls that found the service by a timer's owner id and use it
	 * (tw__svc_of_owner() to tw__svc_let_go()): those that take no
	 * service, which a destroy on another thread may race. Its free
	 * waits until none is left, after no lookup can find it. */
	_Atomic uint32_t lookups;
	struct shard *shards;
	unsigned nshards;

	/* Runners: [0, nexecutors) the executors, [SCANNER] the scanning
	 * thread, [HAND_BACK] shutdown's. */
	struct runner *runners;
	unsigned nexecutors, nrunners;

	bool closing;             /* under scan_mu: shutdown began */
	bool shut_down;
	/* 1 once shutdown closed every shard (written once, read without a
	 * lock): a first add looks before it claims a timer it could only
	 * give back (timer.c, claim). */
	_Atomic uint64_t all_closed;
	pthread_mutex_t shutdown_mu;
	pthread_mutex_t scan_mu;
	/* The latest time read from the clock (an int64_t): written by the scanning
	 * thread only, read by a run's end. */
	_Atomic uint64_t latest;

	/* The reaper. */
	pthread_t reaper;
	bool reaper_started;
	pthread_mutex_t reaper_mu;
	struct tw__bell reaper_bell;
	bool kicked, stop_reaper;
	/* The reaper's own: a scan left a shard's drains' shares owed
	 * (run.c, drain_pass). */
	bool drains_left;
	/* A manual service's wake-up (tw_service_set_wake, under
	 * reaper_mu): armed by each tw_service_next_expiry(), used by the
	 * first add after it (wake_armed 1: armed). */
	tw_service_wake_fn *wake;
	void *wake_arg;
	_Atomic uint64_t wake_armed;

	/* With executors: every timer the scanner puts on an expired list,
	 * in that order, round a ring of ahead_mask + 1 places (its size
	 * the queue's capacity as a power of two, at most 65,536), and each
	 * QUEUED timer's place is its index here. A take reads it only to
	 * prefetch the timers AHEAD of the one it takes, whose lines the
	 * scanner wrote: without it a take walks the list one cache miss
	 * after another, with the shard's mutex held. The list is what
	 * holds the timers: a place overwritten (a queue past the ring) or
	 * naming a timer since taken, cancelled or freed costs one useless
	 * prefetch, nothing else. Written by the scanner under one shard's
	 * mutex, read by an executor under another's: relaxed atomics. */
	_Atomic(struct tw_service_timer *) *ahead;
	uint32_t ahead_mask, ahead_next;

	/* The executors and their work list. */
	pthread_t *executors;
	unsigned nexecutors_started;
	pthread_mutex_t work_mu;
	struct tw__bell work_bell;
	struct shard *work_head, *work_tail;
	bool stop_executors;

	/* cancel_sync waits here for a run to end. */
	pthread_mutex_t idle_mu;
	pthread_cond_t idle_cv;
	_Atomic uint64_t sync_waiters; /* changed under idle_mu */

	_Atomic uint64_t handed_back, backwards, wakeups;
	/* The first timer shutdown found overwritten while the service held
	 * it (broken wheel links: an init of a pending timer). */
	struct tw_service_timer *broken;
	bool unbalanced;          /* shutdown's accounting did not balance */
#ifdef TW_TEST_HOOKS
	/* The reaper's last decision (ns it went to sleep for, -1 until
	 * kicked, 0 not at all), for tests that check what it chose. */
	_Atomic uint64_t test_sleep_ns; /* an int64_t */
#endif
};

/* How far ahead of the timer a take takes it prefetches (svc->ahead): a
 * take's step is some twenty instructions, and a line that the scanner's
 * core holds takes many times that to come (docs/service.md measures the
 * take with and without). */
#define AHEAD 16

#define SCANNER(svc) ((svc)->nexecutors)
#define HAND_BACK(svc) ((svc)->nexecutors + 1)

/* What this thread is doing for the services, if anything. */
struct tw__svc_thread {
	/* The timer whose callback (or hand-back) it runs, of which service,
	 * as which runner. */
	struct tw_service_timer *current;
	struct tw_service *current_svc;
	unsigned runner;
	/* Whether the run's end re-arms the periodic timer it runs: a cancel
	 * of the timer from that callback says no, so that the callback may
	 * free the timer as its last act. Non-zero: yes (F_PERIODIC of a
	 * batch's periodic[] word). */
	uintptr_t rearm;
	struct tw_service *scanning; /* the service it scans for */
};
/* initial-exec: read at a fixed offset from the thread pointer; the
 * shared library's default model calls __tls_get_addr at every add,
 * cancel and run (a dlopen()ed library takes these bytes from the static
 * TLS glibc keeps for that). */
#define TW_SVC_TLS __attribute__((tls_model("initial-exec")))

/* The common cases of add, cancel, reschedule and a batch's run are
 * forced into their callers (a call and its spills would be a good part
 * of them); not in the coverage build (-O0), where each function is one
 * copy, so that a branch counts once, not once per call site (as the
 * wheel's hot_inline). */
#if defined(__GNUC__) && !defined(TW_COVERAGE)
#define svc_hot_inline static inline __attribute__((always_inline))
#else
#define svc_hot_inline static inline
#endif
extern _Thread_local struct tw__svc_thread tw__svc_this_thread TW_HIDDEN TW_SVC_TLS;
#define THIS_THREAD tw__svc_this_thread

/* ---- the atomics ----
 *
 * Every atomic access of the service is one of the helpers below or one
 * of state.h's three on the state word: a 64-bit word read, written or
 * exchanged with no order of its own (counters, flags, the latest clock
 * time read: what orders them is a mutex, or nothing needs to be), and the
 * two places where threads meet without a lock, a runner's running mark
 * and its batch slots. The mutexes do the rest. */

static inline uint64_t load_u64(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

static inline void store_u64(_Atomic uint64_t *p, uint64_t v)
{
	atomic_store_explicit(p, v, memory_order_relaxed);
}

static inline uint64_t exchange_u64(_Atomic uint64_t *p, uint64_t v)
{
	return atomic_exchange_explicit(p, v, memory_order_relaxed);
}

/* A counter with one writer at a time (a shard's, under its mutex; a
 * runner's, on its thread): a load and a store, no locked instruction.
 * A negative by counts down. */
static inline void bump(_Atomic uint64_t *c, int64_t by)
{
	store_u64(c, load_u64(c) + (uint64_t)by);
}

/*
 * The shards' wheels' time. In exact mode a shard's wheel counts in the
 * service's ticks, with a tick of 1: a due time is filed under its key,
 * ceil(due / tick), the first tick boundary at or after it, as a wheel
 * with the service's tick files it, and the wheel is advanced to
 * floor(now / tick). A wheel whose times are its keys tells a timer due
 * by a compare and moves it down with no division -- an idiv a move on a
 * wheel with the service's tick -- and takes the short paths a tick of 1
 * has (make bench-instr-service: an expired timer 100.3 instructions
 * through a wheel with the service's 1 ms tick on its nanosecond clock,
 * 85.4 through one in ticks). What service.h promises of a time the
 * service has reached -- it is due at once, and the next expiry of what
 * is due is the service's latest time -- is kept with that latest time
 * (svc->latest), not the shard's: a due time at or before it is filed at
 * the wheel's clock, due at the shard's next advance, though the shard's
 * wheel was last advanced to an earlier time (a callback that moved the
 * clock while a poll went from shard to shard), and the wheel's "now" is
 * told as that latest time (service_time()). With a tick of 1 too: a
 * window [105, 400] in a wheel last advanced to 100 would be filed at a
 * tick inside it, though the service's time is 115. Kafka mode's wheel
 * keeps the service's time and tick: Kafka's floor keys are its own
 * arithmetic, and a bucket fires from its start, so a time the service
 * reached runs at the next poll there as well (it has no windows).
 */
static inline int64_t service_latest(const struct shard *s)
{
	return (int64_t)load_u64(&s->svc->latest);
}

/* its_due() against a reading of latest the caller made. */
static inline int64_t its_due_at(const struct shard *s, int64_t due,
				 int64_t latest)
{
	if (s->unit != 1)
		return due <= latest ? s->wheel.now : tw__ceil_div(due, s->unit);
	/* Kafka mode files by the service's time, as Kafka does. */
	if (s->wheel.mode == TW_MODE_KAFKA)
		return due;
	/* Exact mode with a tick of 1: a window's earliest after the
	 * lagging wheel's clock would be filed at a tick of the wheel's
	 * own choosing inside the window, not due at once. */
	return due <= latest ? s->wheel.now : due;
}

/* The unit tested before latest is read: written as its_due_at(s, due,
 * service_latest(s)), the read first, an add costs two instructions more
 * (make bench-instr-service). */
static inline int64_t its_due(const struct shard *s, int64_t due)
{
	if (s->unit != 1)
		return due <= service_latest(s) ? s->wheel.now
						: tw__ceil_div(due, s->unit);
	return its_due_at(s, due, service_latest(s));
}

/* A window [due, end] on the wheel's keys, in *first and *last, both
 * against one reading of latest. The scanner moves latest before it
 * takes this shard's mutex, so two readings may fall on either side of
 * its store: due after the first, end at or before the second, and the
 * window would end (at the wheel's clock) before it begins -- which the
 * wheel refuses, leaving a timer the service calls pending in no
 * bucket, never to run. One reading keeps first <= last: a time after
 * latest keys after the tick latest is in, which the wheel's clock has
 * not passed. */
static inline void its_window(const struct shard *s, int64_t due, int64_t end,
			      int64_t *first, int64_t *last)
{
	int64_t latest = service_latest(s);

	TW_TEST_POINT("file.window", s);
	*first = its_due_at(s, due, latest);
	*last = its_due_at(s, end, latest);
}

/* What an advance to now (the service's clock) advances the wheel to:
 * floor(now / tick), but at INT64_MAX ceil, as a wheel with the service's
 * tick makes its end of time the key of a timer due at INT64_MAX. */
static inline int64_t wheel_now_of(const struct shard *s, int64_t now)
{
	if (s->unit == 1)
		return now;
	return now == INT64_MAX ? tw__ceil_div(now, s->unit)
				: tw__floor_div(now, s->unit);
}

/* A time the wheel names (its next expiry) on the service's clock:
 * key * tick, saturated, and never before the service's latest time,
 * which is what is said of a timer due now -- with a unit of 1 too (kafka
 * mode, or a tick of 1), where a shard's wheel last advanced before a
 * callback moved the clock names its own older time. */
static inline int64_t service_time(const struct shard *s, int64_t when)
{
	int64_t latest = service_latest(s);

	if (s->unit != 1) {
		if (when > INT64_MAX / s->unit)
			return INT64_MAX;
		when = when < INT64_MIN / s->unit ? INT64_MIN : when * s->unit;
	}
	return when < latest ? latest : when;
}

/* Advance s's wheel to now (the service's clock), under mu. */
static inline int64_t advance_wheel(struct shard *s, int64_t now)
{
	return tw_wheel_advance(&s->wheel, wheel_now_of(s, now));
}

/* s's wheel's next expiry on the service's clock, under mu. */
static inline bool wheel_next_expiry(const struct shard *s, int64_t *when)
{
	int64_t key;

	if (!tw_wheel_next_expiry(&s->wheel, &key))
		return false;
	*when = service_time(s, key);
	return true;
}

static inline int64_t clock_now(const struct tw_service *svc)
{
	return svc->cfg.clock.now(svc->cfg.clock.arg);
}

static inline struct tw_service_timer *svc_timer_of(struct tw_timer *wt)
{
	return tw_container_of(wt, struct tw_service_timer, wheel_timer);
}

static inline struct shard *shard_of(struct tw_service *svc, uint32_t word)
{
	return &svc->shards[word_shard(word)];
}

/* The end of a window of slack ticks from due (saturating): what the
 * wheel is asked for, and what a kick compares with the reaper's sleep.
 * The width in uint64: a window from a negative due may be wider than
 * INT64_MAX and still end inside int64 (at latest, where the add's
 * rounding down put it: a window only narrows). */
static inline int64_t tw__svc_window_end(const struct tw_service *svc,
					 int64_t due, uint32_t slack)
{
	uint64_t width;

	if (__builtin_mul_overflow((uint64_t)slack, (uint64_t)svc->cfg.tick,
				   &width) ||
	    width > (uint64_t)INT64_MAX - (uint64_t)due)
		return INT64_MAX;
	return (int64_t)((uint64_t)due + width);
}

/* The time the reaper must look at a shard by, for a timer whose window
 * ends (or that is due) at end: exact mode runs a timer at the first
 * tick at or after that, so a reaper asleep until a tick no later than
 * that runs it on its own, and an add needs no kick (short timeouts due a
 * fraction of a tick before a busy reaper's next tick, the common case,
 * would otherwise wake it for nothing). Kafka mode's
 * buckets start up to a tick before their timers: end itself. */
static inline int64_t tw__svc_runs_by(const struct tw_service *svc, int64_t end)
{
	int64_t tick = svc->cfg.tick, over = end % tick;

	if (svc->cfg.mode == TW_MODE_KAFKA || over == 0)
		return end;
	if (over < 0)
		return end - over; /* toward +infinity: the tick above */
	return end > INT64_MAX - (tick - over) ? INT64_MAX : end + (tick - over);
}

/* The callback: written by init (the timer is not shared yet) and by
 * reinit under the shard's mutex, read under it when the timer is taken
 * to run (a run uses the copy it was taken with). */
static inline tw_service_fn *callback_of(const struct tw_service_timer *t)
{
	return t->fn;
}

static inline void set_callback(struct tw_service_timer *t, tw_service_fn *fn)
{
	t->fn = fn;
}

/* Only for a timer whose state word carries F_PERIODIC. */
static inline struct tw_service_periodic *
periodic_of(struct tw_service_timer *t)
{
	return tw_container_of(t, struct tw_service_periodic, timer);
}

/* The period: under the shard's mutex, as the callback. */
static inline int64_t period_of(struct tw_service_periodic *p)
{
	return p->period;
}

static inline void set_period(struct tw_service_periodic *p, int64_t period)
{
	p->period = period > 0 ? period : 0;
}

/* Under the shard's mutex, whenever a periodic timer is filed or run
 * again: the earliest time asked for this period, which the next period
 * counts from. Not the wheel timer's due time: the wheel moves a
 * window's due time to the tick it files it at, anywhere in the window,
 * and counting from there would let the grid slide to each window's end
 * and past it. */
static inline void set_grid(struct tw_service_timer *t, uint32_t word,
			    int64_t due)
{
	if (word_has(word, F_PERIODIC))
		periodic_of(t)->due = due;
}

static inline int64_t grid_of(struct tw_service_timer *t)
{
	return periodic_of(t)->due;
}

/* TW_EOWNER if another service owns the timer. The owner is set once, by
 * the first add's claim, so a check outside the mutex is final. */
static inline int owner_check(const struct tw_service *svc, uint32_t word)
{
	uint32_t owner = word_owner(word);

	return owner && owner != svc->owner_bits ? TW_EOWNER : TW_OK;
}

/* ---- where threads meet without a lock ----
 *
 * A runner's mark: stored (release) before its claim and when its run is
 * over; tagged, and cleared at the end of a run with executors, by
 * compare-and-swap. A batch slot: stored under the shard's mutex when the
 * timer is taken, exchanged by the runner's claim, compared-and-swapped
 * by a cancel's take-back: of the last two exactly one gets the timer. */

static inline struct tw_service_timer *mark_load(struct runner *r)
{
	return atomic_load_explicit(&r->running, memory_order_acquire);
}

static inline void mark_store(struct runner *r, struct tw_service_timer *t)
{
	atomic_store_explicit(&r->running, t, memory_order_release);
}

/* running from *expect to to; on failure *expect is what it holds. */
static inline bool mark_cas(struct runner *r, struct tw_service_timer **expect,
			    struct tw_service_timer *to)
{
	return atomic_compare_exchange_strong_explicit(&r->running, expect, to,
						       memory_order_acq_rel,
						       memory_order_acquire);
}

static inline struct tw_service_timer *slot_load(struct runner *r, unsigned i)
{
	return atomic_load_explicit(&r->slot[i], memory_order_acquire);
}

static inline void slot_store(struct runner *r, size_t i,
			      struct tw_service_timer *t)
{
	atomic_store_explicit(&r->slot[i], t, memory_order_relaxed);
}

/* The runner's claim: the slot's timer, or NULL if a cancel took it. */
static inline struct tw_service_timer *slot_claim(struct runner *r, unsigned i)
{
	return atomic_exchange_explicit(&r->slot[i], NULL, memory_order_acq_rel);
}

/* A cancel's take-back of t: whether it won. */
static inline bool slot_take_back(struct runner *r, unsigned i,
				  struct tw_service_timer *t)
{
	return atomic_compare_exchange_strong_explicit(
		&r->slot[i], &t, NULL, memory_order_acq_rel, memory_order_acquire);
}

static inline struct tw_service_timer *running_of(struct runner *r)
{
	return (struct tw_service_timer *)((uintptr_t)mark_load(r) & ~RUN_AGAIN);
}

/* Under the shard's mutex: whether a taken timer's batch slot still holds
 * it (not claimed yet). */
static inline bool taken_unclaimed(const struct tw_service *svc,
				   const struct tw_service_timer *t)
{
	return slot_load(&svc->runners[t->runner], t->place) == t;
}

/* Whether the timer's last expiry is being run now (its word carries
 * F_RAN and the runner it went to still marks it). */
static inline bool run_going_on(const struct tw_service *svc,
				const struct tw_service_timer *t, uint32_t word)
{
	return word_has(word, F_RAN) && running_of(&svc->runners[t->runner]) == t;
}

/* What a cancel of a timer it found IDLE reports: RUNNING while the
 * runner its last expiry went to still runs it (not while shutdown hands
 * it back: that add ended in the hand-back). */
static inline int tw__svc_idle_result(const struct tw_service *svc,
				      const struct tw_service_timer *t,
				      uint32_t word)
{
	return run_going_on(svc, t, word) && t->runner != HAND_BACK(svc)
		       ? TW_SVC_RUNNING
		       : TW_SVC_IDLE;
}

/* lifecycle.c: the live service that owns a word's id, or NULL; one
 * found is kept from being freed until tw__svc_let_go(). */
TW_HIDDEN struct tw_service *tw__svc_of_owner(uint32_t word);
/* The end of a use that tw__svc_of_owner() began (non-NULL). */
TW_HIDDEN void tw__svc_let_go(struct tw_service *svc);

/* timer.c */
TW_HIDDEN int tw__svc_stop_locked(struct tw_service *svc, struct shard *s,
				  struct tw_service_timer *t, uint32_t word);
TW_HIDDEN int tw__svc_cancel(struct tw_service *svc, struct tw_service_timer *t,
			     bool shut, const char *call);
TW_HIDDEN void tw__svc_file(struct tw_service *svc, struct shard *s,
			    struct tw_service_timer *t, uint32_t word,
			    int64_t due, uint32_t slack, enum tw__svc_transition tr,
			    bool *kick);
/* run.c */
TW_HIDDEN void tw__svc_fire(struct tw_wheel *w, struct tw_timer *wt);
TW_HIDDEN size_t tw__svc_take_run(struct tw_wheel *w, struct tw_bucket *b,
				  int64_t due_by);
TW_HIDDEN void tw__svc_kick(struct tw_service *svc);
TW_HIDDEN void tw__svc_wake_loop(struct tw_service *svc);
TW_HIDDEN void tw__svc_wake_sync_waiters(struct tw_service *svc);
TW_HIDDEN int64_t tw__svc_read_clock(struct tw_service *svc);
TW_HIDDEN void *tw__svc_reaper_main(void *arg);
TW_HIDDEN void *tw__svc_executor_main(void *arg);
TW_HIDDEN int64_t tw__svc_monotonic_ns(void *arg);
TW_HIDDEN void tw__svc_wait_for_ns(pthread_cond_t *cv, pthread_mutex_t *mu,
				   int64_t rel);
TW_HIDDEN void tw__svc_run_expired(struct tw_service *svc, struct shard *s,
				   unsigned runner_index, int64_t limit,
				   int64_t *dispatched);
/* sync.c */
TW_HIDDEN int tw__svc_wait_unreferenced(struct tw_service *svc,
					struct tw_service_timer *t, bool shut);

struct tw__svc_executor_arg {
	struct tw_service *svc;
	unsigned index;
};

#endif
