/* SPDX-License-Identifier: MIT */
/*
 * core.h — Kafka's SystemTimer: the wheel made safe for many threads. What
 * the service's files share: the service structure, its inboxes, the
 * per-thread record of what a thread is running, and the small helpers
 * every side uses. The state word and its transitions are state.h's.
 *
 * Files (src/service/), each opening with what it owns:
 *   state.h      the state word and its transitions (the machine)
 *   producer.c   add, reschedule, cancel, re-arm, inboxes, kicks
 *   owner.c      the wheel owner's side: drain, apply, expiry, cascade
 *                hooks, tombstones, count
 *   running.c    dispatch, executors, the reaper, poll
 *   sync.c       cancel_sync: entries taken back, waits, rings; the
 *                purgatory's stop_pending
 *   lifecycle.c  timer init, create, shutdown and hand-back, destroy,
 *                stats
 *   transitions.c  (test-point build) every transition checked against
 *                the model's table
 *   service_internal.h  what the purgatory calls beyond the public API
 *
 * Structure. One wheel, owned by whoever holds wheel_mu: the reaper (or a
 * poller, in manual mode), or a cancel_sync making sure a timer is gone.
 * Producers never take that lock. add, cancel and reschedule change the
 * timer's state word with a compare-and-swap and, when the wheel has to
 * follow, push the timer onto the producer's own inbox (a lock-free stack,
 * one per group of threads). The wheel owner drains the inboxes before it
 * advances and brings each timer's place in the wheel in line with its
 * state. This is Netty's HashedWheelTimer queue of pending adds and
 * cancellations; Kafka instead guards its wheel with a read-write lock.
 * Measured against four mutex-guarded shards (docs/service.md), it adds as
 * fast and cancels and churns 1.5-2x faster: a producer touches only the
 * timer and its inbox, and all wheel work stays on one warm thread.
 *
 * The state word (state.h) says where a timer is in the protocol; its
 * transitions are one CAS each, so of two racing calls exactly one wins:
 * a timer runs only if no cancel took EXPIRED away first, and every cancel
 * that reports STOPPED did. A timer is expired only while it is PENDING
 * without F_INBOX, that is, only at the due time the wheel owner last
 * read for it, so a reschedule can never make it fire at its old time.
 * F_ENTRY keeps one entry per timer: an expiry while an older entry still
 * waits does not add a second one (that entry runs it), so no entry can
 * outlive a callback that frees its timer.
 *
 * Tombstones. A plain cancel is that one CAS and a counter: it neither
 * enters an inbox nor touches the wheel. The timer stays linked in its
 * bucket, flagged F_TOMB, until the wheel owner meets it: at its first
 * cascade (the wheel asks drop_tombstone before it files a timer again),
 * at its due time if it is in the lowest level already (on_expire finds
 * it IDLE), when an add places it again, in cancel_sync (which unlinks it
 * before it lets the caller free it) or at shutdown. The owner may not
 * free a timer before cancel_sync anyway, so nobody can tell the timer is
 * still linked -- except in cost: one visit later, cold (measured in
 * bench-service, docs/service.md), and the reaper wakes for a bucket that
 * holds only tombstones. What makes it safe is one invariant (model/service.pml's
 * monitor checks it in every state): a timer the wheel links is PENDING
 * or ADDING, or carries F_INBOX or F_TOMB. So the wheel owner unlinks
 * first and clears the flags after (apply), and cancel_sync takes wheel_mu
 * whenever it sees either flag. tw_service_count() leaves tombstones out:
 * cancels count the flags they set (inbox->tombed), the wheel owner the
 * ones it clears (tombs_cleared).
 *
 * Memory orders, and why each atomic has the one it has:
 *   state word   loads acquire; CAS and flag clears acq_rel. The CAS that
 *                publishes PENDING releases next_due (stored relaxed just
 *                before it), and whoever reads PENDING or EXPIRED acquires
 *                it, so next_due needs no order of its own.
 *   inbox head   push's CAS and the drain's exchange seq_cst: with deadline
 *                they form a store-buffering pair (push() says why only
 *                seq_cst on all four accesses is enough). The push also
 *                publishes t->inbox_next.
 *   deadline     seq_cst stores (reaper) and loads (producers): that pair.
 *   kick_pending seq_cst; its soundness comes from reaper_mu (kick()).
 *                A kick loads it before it exchanges it: the load is
 *                seq_cst too, so that one that comes before the reaper's
 *                clear also had its push come before the drain.
 *   inbox entered, added, closing
 *                a producer increments entered then reads closing,
 *                shutdown stores closing then reads the counts, all
 *                seq_cst: one of them sees the other (the producer backs
 *                out, or shutdown waits for it). The way out (added, or
 *                entered taken back) is release, so what the producer
 *                pushed is visible to shutdown once the counts agree.
 *   running[]    seq_cst: execute stores its slot (SLOT_HELD) before it
 *                takes EXPIRED away, cancel reads the slots after its CAS
 *                failed, then the word (see the slot tags below). The
 *                SLOT_RUN store after a claim is release only: it orders
 *                nothing a cancel relies on.
 *   sync_waits   the callbacks waiting in cancel_sync, of every service,
 *                under one mutex: a waiter posts itself and looks for a
 *                ring in one critical section (closes_ring).
 *   callback, period
 *                relaxed atomics: execute reads them before the CAS that
 *                claims the timer, a reinit writes them after it saw
 *                IDLE; that CAS orders the two (execute).
 *   sync_waiters seq_cst: a waiter counts itself, then re-checks; a waker
 *                changes what the check reads, then reads the count; one
 *                of them sees the other (no missed broadcast).
 *   owner id     in the state word: claimed by the add's CAS.
 *   counters     (added, stopped, tombed, ran, ...) relaxed: statistics;
 *                the exactly-once accounting reads them after the threads
 *                that wrote them were joined.
 *
 * The reaper loops: drain the inboxes, advance the wheel to the clock,
 * dispatch what expired, sleep until the next expiry. It never ticks: with
 * nothing pending it sleeps until kicked. An add due before the reaper's
 * deadline kicks it (once per sleep), and so does every 1024th add to an
 * inbox, which bounds the work left waiting in the inboxes. "Once per
 * sleep" is kick_pending, and it is only safe because the reaper clears it
 * together with kicked under reaper_mu (kick() says why). A producer's
 * push and its read of deadline, and the reaper's store of deadline and
 * its drain, are each sequentially consistent: C11 then guarantees that
 * the reaper finds the timer or the producer sees the deadline and kicks.
 *
 * Dispatch hands expired timers to the executor queue (a bounded ring);
 * when the ring is full the reaper runs the callback itself: back-pressure
 * instead of unbounded memory or a lost timer. What one advance expires
 * waits for dispatch in an array (svc->batch, grown to what one advance
 * expires, 8 bytes a timer, and given back down to BATCH_KEEP after
 * dispatch): a link in every timer would cost 8 bytes on each of millions
 * of timers that are mostly cancelled, never expired. When the array
 * cannot grow a timer stays PENDING and goes back in the wheel due now,
 * so the next advance, at once, expires it: nothing is lost, and to the
 * protocol that is an expiry not yet made. (A fixed cap made that the
 * common case: every advance past the cap walked and re-filed all the
 * rest of the expiry, so firing N timers at once cost N * N / cap visits,
 * 15 passes over a million timers.)
 *
 * Who is running what is kept per thread (running[]), not in the timer, so
 * a one-shot callback may free its own timer. cancel_sync takes wheel_mu,
 * drains the inboxes (the timer leaves the wheel and every inbox), takes
 * back a queued entry, and waits until no slot holds the timer; then
 * nothing in the service refers to it. Three rules keep that wait finite:
 * it never waits for the caller's own callback (from its own callback it
 * unlinks, then returns what it stopped); it returns as soon as the timer
 * is no longer IDLE (someone added it again: it is that add's now, and its
 * entry may only be runnable by the waiting thread); and each callback
 * that waits posts what it waits for in one process-wide list, so a
 * callback about to close a ring of waits -- within one service or across
 * several -- sees it and gets TW_EDEADLK.
 *
 * One run at a time. The same slots keep a timer's runs apart: an
 * executor (or the scanning thread) that takes an expired entry whose
 * timer another slot is running hands the entry to that slot (its low
 * bit, RUN_AGAIN, set by a CAS) instead of running it beside the other
 * run; the slot's thread runs it when its own run and re-arm return, and
 * only then lets go of the slot. One entry per timer, and only an entry
 * starts a run, so the re-arm after a run only ever sees its own RUNNING:
 * a reschedule during the run replaces the re-arm, and a callback that
 * cancels and frees its timer is followed by no other run's re-arm. From
 * its own callback, cancel_sync takes such an entry back from its slot
 * (it would otherwise wait for itself).
 *
 * A timer joins the first service that adds it: the owner's id lives in
 * the state word, and the add's CAS to ADDING writes it. Ids wrap after
 * 2^25 - 1 services; a timer is reused with another service only after a
 * fresh tw_service_timer_init(), which clears it.
 * tw_service_timer_reinit() changes only the callback of an IDLE timer, and
 * tw_service_periodic_reinit() its period too (the periodic bit lives in
 * the state word, read by execute in the same CAS), keeping the flags a
 * plain cancel leaves behind. The period lives outside the 64-byte timer,
 * in struct tw_service_periodic: one-shot timeouts, by far the most
 * common, do not carry it.
 *
 * Shutdown sets closing (under scan_mu, so a poll past its own check sees
 * it), waits for producers inside an add or reschedule (each inbox counts
 * them), stops the threads (executors first run what the queue holds),
 * drains the inboxes and collects every timer still PENDING on a list of
 * its own, flagged F_ENTRY and still PENDING; then it hands each back in
 * turn after a CAS from PENDING, so a racing cancel and the hand-back
 * cannot both claim it, and a cancel that comes first -- from another
 * thread, or from an earlier hand_back -- stops it for good (it is not
 * handed back). F_ENTRY keeps a cancel_sync of a collected timer waiting
 * until shutdown is past it (from hand_back itself, it takes the timer
 * off the list instead, as the list is that thread's), and hand_back
 * runs in the last running[] slot, so a cancel_sync of the timer it holds
 * waits until hand_back returned. A timer whose memory was wiped
 * while the service held it (an init the release build cannot see) breaks
 * the links shutdown walks: the inbox drain stops at an entry without
 * F_INBOX, the wheel's drain at a timer not linked where it is met, and
 * shutdown then checks that every add ended once; it returns TW_ECORRUPT
 * instead of looping for ever.
 *
 * The purgatory stops its timeouts through tw__service_stop_pending()
 * (service_internal.h): a cancel from PENDING and an unlink under wheel_mu
 * that never waits, since a completer may hold a lock that the callback
 * it would wait for wants.
 *
 * All of this is modelled in model/service.pml and checked by SPIN (make
 * model); tests/test_races*.c force each interleaving that once broke it
 * through the test points of test_point.h (docs/model.md).
 */
#ifndef TW_SERVICE_CORE_H
#define TW_SERVICE_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../debug.h"
#include "../test_point.h"
#include "../wheel_internal.h"
#include "service_internal.h"
#include "state.h"
#include "timingwheel/service.h"

/* What the service's files share is hidden from the shared library's
 * users (as everything but tw_* is), and named tw__svc_* so that it
 * cannot collide with a name of theirs in the static library. The
 * attribute on a declaration lets the compiler reach it directly (no PLT,
 * no general-dynamic TLS call). */
#define TW_HIDDEN __attribute__((visibility("hidden")))

#define MAX_INBOXES 1024
/* The batch room kept between expiries (512 KB); a bigger expiry grows
 * it for as long as its dispatch lasts. */
#define BATCH_KEEP 65536
#define BATCH_MIN 256
#define KICK_EVERY_ADDS 1024

struct inbox {
	_Alignas(64) struct tw_service_timer *head; /* __atomic */
	atomic_uint_fast64_t entered; /* producers that came in (enter()) */
	/* stopped: adds ended by a cancel or a reschedule; tombed: by a
	 * cancel that set F_TOMB (counted apart, so that the tombstones
	 * still in the wheel are tombed - tombs_cleared) */
	atomic_uint_fast64_t added, stopped, tombed;
};

struct tw_service {
	struct tw_service_config cfg;
	uint32_t owner_bits;      /* this service's id << OWNER_SHIFT */
	struct inbox *inboxes;
	unsigned ninboxes;
	atomic_bool closing;
	atomic_bool handing_back; /* shutdown's hand-back loop runs: an entry
				     (F_ENTRY) is on its list, not in a batch */
	bool shut_down;
	pthread_mutex_t shutdown_mu;

	/* The wheel and who may touch it. */
	pthread_mutex_t wheel_mu;
	struct tw_wheel wheel;
	pthread_mutex_t scan_mu;  /* one scanner at a time: reaper or poll */

	/* The reaper. */
	pthread_t reaper;
	bool reaper_started;
	pthread_mutex_t reaper_mu;
	pthread_cond_t reaper_cv;
	bool kicked, stop_reaper;
	atomic_bool kick_pending;
	_Atomic int64_t deadline;
	/* A manual service's wake-up (tw_service_set_wake): the event loop's
	 * eventfd or uv_async_send. kick_pending then means "a wake is on its
	 * way since the last tw_service_next_expiry()". */
	_Atomic(tw_service_wake_fn *) wake;
	void *_Atomic wake_arg;

	/* The executors and their bounded queue. */
	pthread_t *executors;
	unsigned nexecutors, nexecutors_started;
	pthread_mutex_t q_mu;
	pthread_cond_t q_cv;
	struct tw_service_timer **ring;
	size_t ring_cap, ring_head, ring_len;
	bool stop_executors;
	/* running[i]: the timer executor i runs; running[nexecutors]: the
	 * scanning thread's; running[nexecutors + 1]: the one shutdown is
	 * handing back. */
	_Atomic(struct tw_service_timer *) *running;
	unsigned nslots;
	/* What the last advance expired, in firing order, and how far
	 * dispatch got; the scanning thread's (a slot taken back by
	 * cancel_sync is NULL). An array, not a link in each timer: only
	 * timers that expire together need a slot, and most never expire. */
	struct tw_service_timer **batch;
	size_t batch_len, batch_cap, batch_pos;
	bool deferred;            /* the last advance left due timers for the
				     next (the batch was full) */
	/* F_TOMB flags the wheel owner cleared (under wheel_mu). */
	uint64_t tombs_cleared;
	/* The first timer the wheel owner found overwritten while the
	 * service held it (an inbox entry without F_INBOX, broken wheel
	 * links: an init of a pending timer, which only the debug build
	 * names at the call), under wheel_mu. Its walk stopped there
	 * instead of looping; shutdown and destroy report it. */
	struct tw_service_timer *broken;
	bool unbalanced;          /* shutdown's accounting did not balance */

	/* cancel_sync waits here for a callback to finish. */
	pthread_mutex_t idle_mu;
	pthread_cond_t idle_cv;
	atomic_uint sync_waiters;

	atomic_uint_fast64_t added, ran, handed_back, caller_ran,
		backwards, wakeups;
#ifdef TW_TEST_HOOKS
	/* The reaper's last decision, for tests that check what it chose
	 * rather than how often a loaded machine woke it: the nanoseconds
	 * it went to sleep for, -1 for until kicked, 0 for not at all. */
	_Atomic int64_t test_sleep_ns;
#endif
};

/* What this thread is doing for the services, if anything. */
struct tw__svc_thread {
	/* The timer whose callback (or hand-back) it runs, of which service,
	 * in which running[] slot. */
	struct tw_service_timer *current;
	struct tw_service *current_svc;
	unsigned slot;
	/* Whether execute() re-arms the periodic timer it runs when its
	 * callback returns: a cancel of the timer from that callback says
	 * no, so that the callback may free the timer (its last act). */
	bool rearm;
	/* The timers shutdown collected and has not handed back yet, in
	 * order, linked through inbox_next: the shutting-down thread's own
	 * list. */
	struct tw_service_timer *handed;
	struct tw_service *scanning; /* the service it scans for */
	/* An executor's run that re-armed its timer owes this service's
	 * manual loop a wake (wake_loop): made once the slot let go, so
	 * that a cancel does not count a run that only calls the user's
	 * wake function, nor a cancel_sync wait for it. */
	struct tw_service *wake_owed;
	bool in_run_tail; /* from the re-arm to the slot's let-go */
};
extern _Thread_local struct tw__svc_thread tw__svc_this_thread TW_HIDDEN;
#define THIS_THREAD tw__svc_this_thread

#define COUNT(svc, field) \
	atomic_fetch_add_explicit(&(svc)->field, 1, memory_order_relaxed)

static inline int64_t clock_now(const struct tw_service *svc)
{
	return svc->cfg.clock.now(svc->cfg.clock.arg);
}

/* The user's callback lives in the wheel timer's fn: the service's wheel
 * fires every timer through on_expire (wheel.expire), so that field is
 * free, and a timer is 8 bytes smaller. The casts go through a generic
 * function pointer type, and the pointer is called only as what it is.
 * Relaxed atomics, for the owner's tw_service_timer_reinit() may write
 * the callback while a run that already claimed the timer reads it (the
 * run reads it before its claim, so it gets the old one: execute() says
 * why); the wheel never reads it (wheel.expire). */
typedef void tw__generic_fn(void);

/* The end of a window of slack ticks from due (saturating): what the
 * wheel is asked for, and what a kick compares with the reaper's sleep. */
static inline int64_t tw__svc_window_end(const struct tw_service *svc,
					 int64_t due, uint32_t slack)
{
	int64_t width;

	if (__builtin_mul_overflow((int64_t)slack, svc->cfg.tick, &width) ||
	    due > INT64_MAX - width)
		return INT64_MAX;
	return due + width;
}

static inline tw_service_fn *callback_of(const struct tw_service_timer *t)
{
	return (tw_service_fn *)(tw__generic_fn *)__atomic_load_n(
		&t->wheel_timer.fn, __ATOMIC_RELAXED);
}

static inline void set_callback(struct tw_service_timer *t, tw_service_fn *fn)
{
	__atomic_store_n(&t->wheel_timer.fn, (tw_timer_fn *)(tw__generic_fn *)fn,
			 __ATOMIC_RELAXED);
}

/* Only for a timer whose state word carries F_PERIODIC. */
static inline struct tw_service_periodic *
periodic_of(struct tw_service_timer *t)
{
	return (struct tw_service_periodic *)(void *)((char *)t -
		offsetof(struct tw_service_periodic, timer));
}

/* The period, under the same rule as the callback. */
static inline int64_t period_of(struct tw_service_periodic *p)
{
	return __atomic_load_n(&p->period, __ATOMIC_RELAXED);
}

static inline void set_period(struct tw_service_periodic *p, int64_t period)
{
	__atomic_store_n(&p->period, period > 0 ? period : 0, __ATOMIC_RELAXED);
}

/* TW_EOWNER if another service owns the timer. An early answer for add
 * (the claim itself is in the CAS), the whole check for cancel. */
static inline int owner_check(const struct tw_service *svc, uint32_t word)
{
	uint32_t owner = word_owner(word);

	return owner && owner != svc->owner_bits ? TW_EOWNER : TW_OK;
}

/*
 * running[] slots. A slot holds a timer from where its thread took the
 * timer's entry (F_ENTRY) until its run, and every expiry handed to it
 * meanwhile, is over. execute() stores the slot before it takes EXPIRED
 * away, and cancel() reads the slots after its own step on the word, both
 * sequentially consistent, so a cancel that finds a one-shot timer IDLE
 * sees the slot of a callback still running it.
 *
 * The two low bits of a slot (a timer is at least 4-aligned) say what its
 * thread is doing with the timer:
 *   SLOT_RUN        0  a run is under way (claimed; the callback may have
 *                      returned, the re-arm not yet)
 *   RUN_AGAIN       1  the same, and another thread that took an expiry
 *                      of the timer found it running here and handed that
 *                      expiry over (its entry is now this slot's), for this
 *                      thread to run once its run returns: what keeps a
 *                      timer's runs one at a time (execute). Only the
 *                      slot's thread clears it; another sets it only on a
 *                      SLOT_RUN slot, while it holds the timer's one entry
 *   SLOT_HELD       2  it holds the timer's entry and may be claiming it:
 *                      a run only once the claim took F_ENTRY away (its
 *                      thread then stores SLOT_RUN, a plain release store:
 *                      a cancel that still reads SLOT_HELD judges by the
 *                      word)
 *   SLOT_NO_RUN     3  no run: an entry a cancel stopped, which its thread
 *                      gives up (clears F_ENTRY, then the slot), or one it
 *                      hands over to the slot running the timer
 * So a slot holding a timer is a run of it (what a cancel of an IDLE timer
 * answers TW_SVC_RUNNING for) exactly when slot_runs() says so; before
 * the tags a slot that held a stopped entry made a second cancel say
 * RUNNING for a callback that never ran (review G2). cancel_sync, which
 * waits until no slot holds the timer, counts every tag: running_load()
 * gives the timer without them.
 */
enum { SLOT_RUN = 0, RUN_AGAIN = 1, SLOT_HELD = 2, SLOT_NO_RUN = 3,
       SLOT_TAGS = 3 };

static inline uintptr_t slot_value(_Atomic(struct tw_service_timer *) *slot)
{
	return (uintptr_t)atomic_load(slot);
}

static inline struct tw_service_timer *
running_load(_Atomic(struct tw_service_timer *) *slot)
{
	return (struct tw_service_timer *)(slot_value(slot) & ~(uintptr_t)SLOT_TAGS);
}

static inline void running_store(_Atomic(struct tw_service_timer *) *slot,
				 struct tw_service_timer *t)
{
	atomic_store(slot, t);
}

/* The slot holds t with tag (SLOT_HELD, SLOT_NO_RUN; SLOT_RUN is
 * running_store). */
static inline void running_tag(_Atomic(struct tw_service_timer *) *slot,
			       struct tw_service_timer *t, unsigned tag)
{
	atomic_store(slot, (struct tw_service_timer *)((uintptr_t)t | tag));
}

/* SLOT_HELD -> SLOT_RUN after the claim. Release, not seq_cst: nothing is
 * ordered by it (the claim's CAS already told a cancel a run is under
 * way, slot_runs), and a full barrier per fired timer costs. */
static inline void running_claimed(_Atomic(struct tw_service_timer *) *slot,
				   struct tw_service_timer *t)
{
	atomic_store_explicit(slot, t, memory_order_release);
}

/* Whether a slot's value holds t for a run, under way or to come: any tag
 * but SLOT_NO_RUN. */
static inline bool slot_may_run(uintptr_t value, const struct tw_service_timer *t)
{
	return (value & ~(uintptr_t)SLOT_TAGS) == (uintptr_t)t &&
	       (value & SLOT_TAGS) != SLOT_NO_RUN;
}

/* Whether slot holds a run of t. SLOT_RUN and RUN_AGAIN are stored only
 * after a claim went through. A SLOT_HELD slot is a run only once its
 * claim took F_ENTRY away; but a thread that gives its entry up also
 * clears F_ENTRY (after storing SLOT_NO_RUN), so "HELD, then a word
 * without F_ENTRY" is not enough (the ninth reading: a cancel between the
 * two loads answered RUNNING for a give-up). The slot is read again after
 * the word: still held or marked run, the claim cleared F_ENTRY. (Held
 * again only after a give-up, a let-go, a new add, its expiry and a new
 * take all came between two adjacent loads of the cancelling thread:
 * model/service.pml makes the three loads three steps, and its assertion
 * that RUNNING comes from a run holds.) */
static inline bool slot_runs(_Atomic(struct tw_service_timer *) *slot,
			     const struct tw_service_timer *t)
{
	uintptr_t v = slot_value(slot);

	if ((v & ~(uintptr_t)SLOT_TAGS) != (uintptr_t)t)
		return false;
	switch (v & SLOT_TAGS) {
	case SLOT_RUN:
	case RUN_AGAIN:
		return true;
	case SLOT_HELD:
		TW_TEST_POINT("cancel.held_slot", t);
		if (word_has(word_load(t), F_ENTRY))
			return false;
		return slot_may_run(slot_value(slot), t);
	default:
		return false;
	}
}

/* Hand an expiry of t to the slot running it: false if the slot's run of
 * t ended meanwhile, it is already flagged, or it does not run t yet. */
static inline bool running_hand_over(_Atomic(struct tw_service_timer *) *slot,
				     struct tw_service_timer *t)
{
	struct tw_service_timer *expect = t;

	return atomic_compare_exchange_strong(
		slot, &expect,
		(struct tw_service_timer *)((uintptr_t)t | RUN_AGAIN));
}

/* Whether an expiry of t was handed to this slot (its own thread asks). */
static inline bool running_again(_Atomic(struct tw_service_timer *) *slot,
				 const struct tw_service_timer *t)
{
	return slot_value(slot) == ((uintptr_t)t | RUN_AGAIN);
}

/* The slot's thread is done with t (its slot tagged tag: SLOT_RUN after a
 * run, SLOT_NO_RUN after giving up or handing over an entry): empty it, unless
 * an expiry was handed over meanwhile (only on SLOT_RUN); then it holds
 * that entry (SLOT_HELD) and returns false (the caller runs that expiry).
 * Reads the slot only, never the timer, which a one-shot callback may
 * have freed. */
static inline bool running_let_go(_Atomic(struct tw_service_timer *) *slot,
				  struct tw_service_timer *t, unsigned tag)
{
	struct tw_service_timer *expect =
		(struct tw_service_timer *)((uintptr_t)t | tag);

	if (atomic_compare_exchange_strong(slot, &expect, NULL))
		return true;
	running_tag(slot, t, SLOT_HELD);
	return false;
}

/* Whether a slot other than skip (skip = nslots: none) holds t, whatever
 * its thread does with it: cancel_sync waits until none does. */
static inline bool is_held_except(const struct tw_service *svc,
				  const struct tw_service_timer *t,
				  unsigned skip)
{
	for (unsigned i = 0; i < svc->nslots; i++)
		if (i != skip && running_load(&svc->running[i]) == t)
			return true;
	return false;
}

/* Whether a slot other than skip runs t (slot_runs): what a cancel that
 * found t IDLE answers TW_SVC_RUNNING for. */
static inline bool is_running_except(const struct tw_service *svc,
				     const struct tw_service_timer *t,
				     unsigned skip)
{
	for (unsigned i = 0; i < svc->nslots; i++)
		if (i != skip && slot_runs(&svc->running[i], t))
			return true;
	return false;
}

/* producer.c */
TW_HIDDEN void tw__svc_kick(struct tw_service *svc);
TW_HIDDEN void tw__svc_call_wake(struct tw_service *svc);
TW_HIDDEN void tw__svc_rearm(struct tw_service *svc, struct tw_service_timer *t,
			     int64_t due, bool last);
TW_HIDDEN int tw__svc_cancel(struct tw_service *svc, struct tw_service_timer *t);
TW_HIDDEN void tw__svc_count_stopped(struct tw_service *svc, bool new_tomb);
/* owner.c: wheel_mu held */
TW_HIDDEN void tw__svc_drain_inboxes(struct tw_service *svc);
TW_HIDDEN void tw__svc_clear_tomb(struct tw_service *svc,
				  struct tw_service_timer *t);
TW_HIDDEN void tw__svc_unlink_stopped(struct tw_service *svc,
				      struct tw_service_timer *t);
TW_HIDDEN void tw__svc_on_expire(struct tw_wheel *w, struct tw_timer *wt);
TW_HIDDEN bool tw__svc_drop_tombstone(struct tw_wheel *w, struct tw_timer *wt);
TW_HIDDEN void tw__svc_scan(struct tw_service *svc, int64_t now, int64_t *next);
/* running.c */
TW_HIDDEN void tw__svc_wake_sync_waiters(struct tw_service *svc);
TW_HIDDEN void *tw__svc_reaper_main(void *arg);
TW_HIDDEN void *tw__svc_executor_main(void *arg);
TW_HIDDEN int64_t tw__svc_monotonic_ns(void *arg);
TW_HIDDEN void tw__svc_wait_for_ns(pthread_cond_t *cv, pthread_mutex_t *mu,
				   int64_t rel);

struct tw__svc_executor_arg {
	struct tw_service *svc;
	unsigned index;
};

#endif
