/* SPDX-License-Identifier: MIT */
/*
 * service.c — Kafka's SystemTimer: the wheel made safe for many threads.
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
 * The state word (one 32-bit atomic in the timer):
 *   IDLE      not pending
 *   ADDING    a producer is writing the due time (others wait or skip)
 *   PENDING   pending: in the wheel, or in an inbox on its way there
 *   EXPIRED   fired; its entry waits in a dispatch batch or the queue
 *   RUNNING   a periodic timer's callback runs; it re-arms afterwards
 * plus three flags:
 *   F_INBOX   an inbox holds it; the wheel owner will look at its state
 *   F_ENTRY   a dispatch batch or the executor queue holds an entry for it
 *   F_TOMB    cancelled from PENDING: the wheel may still link it
 * Transitions:
 *   add        IDLE|RUNNING -> ADDING -> PENDING (+F_INBOX)
 *   reschedule any but ADDING -> ADDING -> PENDING (+F_INBOX)
 *   expiry     PENDING (no F_INBOX) -> EXPIRED (+F_ENTRY)   wheel owner
 *   execute    EXPIRED -> IDLE (one-shot) / RUNNING (periodic), -F_ENTRY
 *   re-arm     RUNNING -> ADDING -> PENDING (+F_INBOX)       executor
 *   cancel     PENDING -> IDLE (+F_TOMB), EXPIRED|RUNNING -> IDLE, only
 *              while the owner in the word is the caller's service
 *   collect    PENDING -> PENDING (+F_ENTRY)                 shutdown
 *   hand back  PENDING (+F_ENTRY) -> IDLE (-F_ENTRY)         shutdown
 * Each is one CAS, so of two racing calls exactly one wins: a timer runs
 * only if no cancel took EXPIRED away first, and every cancel that reports
 * STOPPED did. A timer is expired only while it is PENDING without F_INBOX,
 * that is, only at the due time the wheel owner last read for it, so a
 * reschedule can never make it fire at its old time. F_ENTRY keeps one
 * entry per timer: an expiry while an older entry still waits does not add
 * a second one (that entry runs it), so no entry can outlive a callback
 * that frees its timer.
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
 *   running[]    seq_cst: execute stores its slot before it takes EXPIRED
 *                away, cancel reads the slots after its CAS failed (see
 *                running_load).
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
 * waits for dispatch in an array (svc->batch, at most 65536 timers): a
 * link in every timer would cost 8 bytes on each of millions of timers
 * that are mostly cancelled, never expired. When the array is full (or
 * cannot grow) a timer stays PENDING and goes back in the wheel due now,
 * so the next advance, at once, expires it: memory stays bounded, nothing
 * is lost, and to the protocol that is an expiry not yet made.
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
 * waits until hand_back returned.
 *
 * The purgatory stops its timeouts through tw__service_stop_pending()
 * (service_internal.h): a cancel from PENDING and an unlink under wheel_mu
 * that never waits, since a completer may hold a lock that the callback
 * it would wait for wants.
 *
 * All of this is modelled in model/service.pml and checked by SPIN (make
 * model); tests/test_races.c forces each interleaving that once broke it
 * through the test points of test_point.h (docs/model.md).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service_internal.h"
#include "test_point.h"
#include "timingwheel/service.h"

enum {
	ST_IDLE, ST_ADDING, ST_PENDING, ST_EXPIRED, ST_RUNNING,
	ST_MASK = 7,
	F_INBOX = 8,
	F_ENTRY = 16,
	F_PERIODIC = 32, /* period > 0, and the timer is the first member of a
			    struct tw_service_periodic; in the word so execute
			    picks RUNNING or IDLE in its CAS (reinit may
			    change it) */
	F_TOMB = 64,     /* a cancel took it from PENDING: it may still be
			    linked in the wheel, a tombstone, until the wheel
			    owner unlinks it (apply, on_expire, cancel_sync,
			    shutdown), who clears this flag */
	/* The rest of the word: the id of the service that owns the timer,
	 * 0 until the first add claims it in the same CAS that takes the
	 * timer to ADDING (a pointer would cost 8 more bytes a timer). */
	OWNER_SHIFT = 7,
};

#define OWNER_MASK (~(uint32_t)0 << OWNER_SHIFT)
#define OWNER_IDS ((1u << (32 - OWNER_SHIFT)) - 1) /* ids 1 .. OWNER_IDS */

#define MAX_INBOXES 1024
/* The most timers one advance hands to dispatch (512 KB of batch); the
 * rest stay pending, due at once, for the next advance (on_expire). */
#define BATCH_MAX 65536
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

	/* cancel_sync waits here for a callback to finish. */
	pthread_mutex_t idle_mu;
	pthread_cond_t idle_cv;
	atomic_uint sync_waiters;

	atomic_uint_fast64_t added, ran, handed_back, caller_ran,
		backwards, wakeups;
};

/* The timer this thread is running the callback of (or handing back), its
 * running[] slot, and this thread's inbox. */
static _Thread_local struct tw_service_timer *tls_current;
static _Thread_local struct tw_service *tls_current_svc;
static _Thread_local unsigned tls_slot;
/* Whether execute() re-arms the periodic timer it runs when its callback
 * returns: a cancel of the timer from that callback says no, so that the
 * callback may free the timer (its last act). */
static _Thread_local bool tls_rearm;
/* The timers shutdown collected and has not handed back yet, in order,
 * linked through inbox_next: the shutting-down thread's own list. */
static _Thread_local struct tw_service_timer *tls_handed;
static _Thread_local struct tw_service *tls_scanning; /* its scanner */
static _Thread_local unsigned tls_producer;          /* 0: not yet */
static atomic_uint producers_seen;
static atomic_uint services_created; /* the source of owner ids */

#define COUNT(svc, field) \
	atomic_fetch_add_explicit(&(svc)->field, 1, memory_order_relaxed)

static int64_t monotonic_ns(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t clock_now(const struct tw_service *svc)
{
	return svc->cfg.clock.now(svc->cfg.clock.arg);
}

/* ---- the timer's state word ---- */

/* The user's callback lives in the wheel timer's fn: the service's wheel
 * fires every timer through on_expire (wheel.expire), so that field is
 * free, and a timer is 8 bytes smaller. The casts go through a generic
 * function pointer type, and the pointer is called only as what it is. */
typedef void generic_fn(void);

#if defined(__LP64__)
/* service.h says what each of these bytes is for; keep it true. */
_Static_assert(sizeof(struct tw_service_timer) == 64,
	       "a one-shot service timer is 64 bytes on LP64");
#endif

/* Only for a timer whose state word carries F_PERIODIC. */
static inline struct tw_service_periodic *
periodic_of(struct tw_service_timer *t)
{
	return (struct tw_service_periodic *)(void *)((char *)t -
		offsetof(struct tw_service_periodic, timer));
}

/* Relaxed atomics, for the owner's tw_service_timer_reinit() may write
 * the callback while a run that already claimed the timer reads it (the
 * run reads it before its claim, so it gets the old one: execute() says
 * why); the wheel never reads it (wheel.expire). */
static inline tw_service_fn *callback_of(const struct tw_service_timer *t)
{
	return (tw_service_fn *)(generic_fn *)__atomic_load_n(
		&t->wheel_timer.fn, __ATOMIC_RELAXED);
}

static inline void set_callback(struct tw_service_timer *t, tw_service_fn *fn)
{
	__atomic_store_n(&t->wheel_timer.fn, (tw_timer_fn *)(generic_fn *)fn,
			 __ATOMIC_RELAXED);
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

static uint32_t state_load(const struct tw_service_timer *t)
{
	return __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
}

static bool state_cas(struct tw_service_timer *t, uint32_t *old, uint32_t new)
{
	return __atomic_compare_exchange_n(&t->state, old, new, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static uint32_t state_clear(struct tw_service_timer *t, uint32_t flags)
{
	return __atomic_fetch_and(&t->state, ~flags, __ATOMIC_ACQ_REL);
}

/* The state word once no producer is between taking the timer (ADDING)
 * and publishing its due time: a few instructions, unless it was
 * preempted. */
static uint32_t settled(const struct tw_service_timer *t, uint32_t old)
{
	while ((old & ST_MASK) == ST_ADDING) {
		sched_yield();
		old = state_load(t);
	}
	return old;
}

/*
 * running[] slots. execute() stores its timer before it takes EXPIRED
 * away, and cancel() reads the slots after it failed to, both sequentially
 * consistent, so a cancel that finds a one-shot timer IDLE sees the slot of
 * a callback still running it.
 */
static inline struct tw_service_timer *
running_load(_Atomic(struct tw_service_timer *) *slot)
{
	return atomic_load(slot);
}

static inline void running_store(_Atomic(struct tw_service_timer *) *slot,
				 struct tw_service_timer *t)
{
	atomic_store(slot, t);
}

/* Whether a callback (or a hand-back) of t is under way in a slot other
 * than skip (skip = nslots: none). */
static bool is_running_except(const struct tw_service *svc,
			      const struct tw_service_timer *t, unsigned skip)
{
	for (unsigned i = 0; i < svc->nslots; i++)
		if (i != skip && running_load(&svc->running[i]) == t)
			return true;
	return false;
}


/* ---- waking the reaper ---- */

/*
 * kick_pending saves producers the reaper's mutex: once one kick is on its
 * way, the rest return here. That is only sound if the reaper clears
 * kick_pending and kicked together, under reaper_mu: then a kick_pending
 * that is set always has a kicker who will set kicked (or already did,
 * since the reaper last cleared it), so the reaper cannot sleep through
 * it. (Clearing kick_pending outside the lock let a kick fall between the
 * two clears: kicked was erased, kick_pending stayed set, and no kick ever
 * got through again -- issue 13's bug 1.)
 */
static void kick(struct tw_service *svc)
{
	/* Already kicked since it last looked: a load first, because while
	 * the reaper scans (deadline INT64_MAX) every add comes here, and an
	 * exchange on this shared line each time cost an add 14 % of its
	 * time. seq_cst, not relaxed: if this load comes before the reaper's
	 * clear in the single total order, so did our push, and the drain
	 * after the clear finds the timer; if after, it reads the clear (or a
	 * later kick's true). The exchange decides between racing kickers. */
	if (svc->cfg.manual || atomic_load(&svc->kick_pending) ||
	    atomic_exchange(&svc->kick_pending, true))
		return;
	pthread_mutex_lock(&svc->reaper_mu);
	svc->kicked = true;
	pthread_cond_signal(&svc->reaper_cv);
	pthread_mutex_unlock(&svc->reaper_mu);
}

/* ---- inboxes ---- */

static struct inbox *my_inbox(struct tw_service *svc)
{
	if (!tls_producer)
		tls_producer = atomic_fetch_add(&producers_seen, 1) + 1;
	return &svc->inboxes[(tls_producer - 1) % svc->ninboxes];
}

/* Only the thread that set F_INBOX pushes, so t->inbox_next is its own. */
static void push(struct inbox *ib, struct tw_service_timer *t)
{
	struct tw_service_timer *head = __atomic_load_n(&ib->head, __ATOMIC_RELAXED);

	/* Sequentially consistent, not just release: the producer next
	 * reads svc->deadline to decide whether to kick, and the reaper
	 * stores deadline before it drains. That is the store-buffering
	 * shape (each side writes one location, then reads the other's);
	 * only seq_cst on all four accesses makes C11 promise that one side
	 * sees the other's write: the reaper finds the timer, or the
	 * producer sees the reaper's deadline and kicks. (On x86 a locked
	 * CAS is already a full barrier: this costs nothing there.) */
	do
		t->inbox_next = head;
	while (!__atomic_compare_exchange_n(&ib->head, &head, t, true,
					    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
}

/*
 * A producer's way in and out. entered counts producers that came in
 * (those that fail or back out take theirs back), added those that left
 * having added: so entered - added are inside, and shutdown, after it set
 * closing, waits until the two are equal -- nothing is pushed behind its
 * back. The counter an add needs anyway (added, the statistics') is the
 * way out: two atomics a call instead of three. A producer increments
 * entered, then reads closing; shutdown stores closing, then reads
 * entered (all seq_cst): a producer shutdown did not count sees closing.
 */
static struct inbox *enter(struct tw_service *svc)
{
	struct inbox *ib = my_inbox(svc);

	atomic_fetch_add(&ib->entered, 1);
	if (atomic_load(&svc->closing)) {
		atomic_fetch_sub(&ib->entered, 1);
		return NULL;
	}
	return ib;
}

/* Out without an add (an error). */
static void leave_unchanged(struct inbox *ib)
{
	atomic_fetch_sub_explicit(&ib->entered, 1, memory_order_release);
}

/* Out after an add. Every KICK_EVERY_ADDS-th add to an inbox kicks the
 * reaper: an add pushes at most once, so that bounds the work waiting in
 * an inbox. Release: what the add pushed is visible to a shutdown that
 * reads the count. */
static void leave_added(struct tw_service *svc, struct inbox *ib)
{
	if ((atomic_fetch_add_explicit(&ib->added, 1, memory_order_release) + 1) %
	    KICK_EVERY_ADDS == 0)
		kick(svc);
}

/* Wheel owner: the timer is not a tombstone any more (unlinked, or about
 * to be placed again by an inbox entry). Counted only if the flag was
 * set: a cancel may set it again at any time, and counts that one. */
static void clear_tomb(struct tw_service *svc, struct tw_service_timer *t)
{
	if (state_clear(t, F_TOMB) & F_TOMB)
		svc->tombs_cleared++;
}

/*
 * Wheel owner: make the timer's place in the wheel match its state, and
 * take down the flags that said it might not (F_INBOX, F_TOMB) -- in the
 * order that keeps cancel_sync safe. A timer that is not PENDING or ADDING
 * is unlinked first and its flags cleared after, by a CAS from the state
 * that was unlinked: a cancel_sync that finds no flag may let its caller
 * free the timer, so no flag may go while the wheel still links it.
 * (Clearing first, then unlinking, was a use-after-free: a cancel_sync in
 * between returned at once.) A PENDING timer is the opposite: F_INBOX goes
 * first, and next_due is read after, so a reschedule racing this apply
 * either is read here or pushes again. If the CAS finds the word changed
 * (an add, a cancel), the loop looks again; the same word back after an
 * add and a cancel (ABA) needs nothing more: only the wheel owner links.
 */
static void apply(struct tw_service *svc, struct tw_service_timer *t)
{
	/* A first guess, not a load: the word of a one-shot timer of ours
	 * added or rescheduled (most of what an inbox holds). A load first
	 * would fetch the line shared from the producer's core and the CAS
	 * fetch it again to own it; a wrong guess only costs a failed CAS,
	 * which loads the real word. */
	uint32_t old = svc->owner_bits | ST_PENDING | F_INBOX, s;

	for (;;) {
		s = old & ST_MASK;
		if (s != ST_PENDING && s != ST_ADDING &&
		    tw_timer_pending(&t->wheel_timer)) {
			tw_wheel_cancel(&svc->wheel, &t->wheel_timer);
			TW_TEST_POINT("apply.unlinked", t);
		}
		/* ADDING: its producer pushes again when it publishes,
		 * because it will find F_INBOX clear. */
		if (state_cas(t, &old, old & ~(uint32_t)(F_INBOX | F_TOMB)))
			break;
	}
	if (old & F_TOMB)
		svc->tombs_cleared++;
	TW_TEST_POINT("apply.cleared", t);
	if (s == ST_PENDING)
		tw_wheel_reschedule(&svc->wheel, &t->wheel_timer,
				    __atomic_load_n(&t->next_due, __ATOMIC_RELAXED));
}

/* Wheel owner (wheel_mu held). */
static void drain_inboxes(struct tw_service *svc)
{
	for (unsigned i = 0; i < svc->ninboxes; i++) {
		/* seq_cst: the other half of push()'s store-buffering pair. */
		struct tw_service_timer *t =
			__atomic_exchange_n(&svc->inboxes[i].head, NULL,
					    __ATOMIC_SEQ_CST);

		while (t) {
			/* Read before apply: once F_INBOX is clear the
			 * timer may be pushed again. */
			struct tw_service_timer *next = t->inbox_next;

			apply(svc, t);
			t = next;
		}
	}
}

/* ---- expiry ---- */

/* A slot in the batch: grow it (doubling, up to BATCH_MAX), or false. */
static bool batch_room(struct tw_service *svc)
{
	struct tw_service_timer **grown;
	size_t cap;

	if (svc->batch_len < svc->batch_cap)
		return true;
	if (svc->batch_cap >= BATCH_MAX)
		return false;
	cap = svc->batch_cap ? 2 * svc->batch_cap : BATCH_MIN;
	grown = realloc(svc->batch, cap * sizeof(*grown));
	if (!grown)
		return false;
	svc->batch = grown;
	svc->batch_cap = cap;
	return true;
}

/* The wheel callback, under wheel_mu, on the scanning thread. The wheel
 * has already unlinked the timer. With no room in the batch (full, or
 * out of memory) the timer stays PENDING and goes back in the wheel due
 * now: the next advance, which the reaper starts at once (the wheel's
 * next expiry is now), expires it. To the protocol that is an expiry not
 * yet made (model/service.pml's scan defers the same way). */
static void on_expire(struct tw_wheel *w, struct tw_timer *wt)
{
	struct tw_service *svc = tw_container_of(w, struct tw_service, wheel);
	struct tw_service_timer *t =
		tw_container_of(wt, struct tw_service_timer, wheel_timer);
	uint32_t old = state_load(t);

	do {
		/* Cancelled (a tombstone: gone now), or moved since it was
		 * placed: an inbox entry (or its producer) will place it
		 * again if it is pending. */
		if ((old & ST_MASK) != ST_PENDING || (old & F_INBOX)) {
			if (old & F_TOMB)
				clear_tomb(svc, t);
			return;
		}
		if (!(old & F_ENTRY) && !batch_room(svc)) {
			TW_TEST_POINT("expire.deferred", t);
			svc->deferred = true;
			tw_wheel_add(w, wt, tw_wheel_now(w));
			return;
		}
	} while (!state_cas(t, &old, (old & ~ST_MASK) | ST_EXPIRED | F_ENTRY));
	if (old & F_ENTRY)
		return; /* an older entry still waits: it runs this expiry */
	svc->batch[svc->batch_len++] = t;
}

/* The wheel's question at a cascade, under wheel_mu: the timer, unlinked
 * a moment ago, is dropped if it is not pending -- a tombstone (or a timer
 * an inbox entry will look at again). Dropped at its first cascade rather
 * than filed down level by level until its due time: one visit instead of
 * one per level (bench: "tombstones"). Unlinked before the flag goes, as
 * apply() does. */
static bool drop_tombstone(struct tw_wheel *w, struct tw_timer *wt)
{
	struct tw_service *svc = tw_container_of(w, struct tw_service, wheel);
	struct tw_service_timer *t =
		tw_container_of(wt, struct tw_service_timer, wheel_timer);
	uint32_t s = state_load(t) & ST_MASK;

	if (s == ST_PENDING || s == ST_ADDING)
		return false;
	clear_tomb(svc, t);
	return true;
}

static void wake_sync_waiters(struct tw_service *svc)
{
	if (atomic_load(&svc->sync_waiters)) {
		pthread_mutex_lock(&svc->idle_mu);
		pthread_cond_broadcast(&svc->idle_cv);
		pthread_mutex_unlock(&svc->idle_mu);
	}
}

/* RUNNING -> PENDING at due, unless a cancel or an add got there first. */
static void rearm(struct tw_service *svc, struct tw_service_timer *t, int64_t due)
{
	uint32_t old = state_load(t);

	for (;;) {
		bool closing = atomic_load(&svc->closing);

		if ((old & ST_MASK) != ST_RUNNING)
			return; /* a cancel or an add won */
		/* Each failed CAS reloads old: look at its state again. */
		if (state_cas(t, &old, (old & ~ST_MASK) |
					       (closing ? ST_IDLE : ST_ADDING))) {
			if (closing)
				return; /* its run was its end */
			break;
		}
	}
	__atomic_store_n(&t->next_due, due, __ATOMIC_RELAXED);
	old = state_load(t);
	while (!state_cas(t, &old, (old & ~ST_MASK) | ST_PENDING | F_INBOX))
		;
	if (!(old & F_INBOX))
		push(my_inbox(svc), t);
	COUNT(svc, added); /* an executor's: no producer's inbox count */
	if (due < atomic_load(&svc->deadline))
		kick(svc);
}

/* Run one expired timer if nobody cancelled it meanwhile. This consumes
 * the timer's one entry (F_ENTRY). */
static void execute(struct tw_service *svc, struct tw_service_timer *t,
		    unsigned slot_index)
{
	_Atomic(struct tw_service_timer *) *slot = &svc->running[slot_index];
	tw_service_fn *fn;
	int64_t period, due;
	uint32_t old, next;
	bool rearm_after;

	running_store(slot, t);
	old = state_load(t);
	do {
		/* Read before the claim, while the timer is EXPIRED and
		 * reinit refuses it: once the CAS below takes EXPIRED away, a
		 * cancel finds it IDLE and the owner may reinit it at once
		 * (tw_service_timer_reinit: "safe right after a plain
		 * cancel"). Read after, the run that had started took the new
		 * callback, and the two raced (issue 28, item 7). If the CAS
		 * wins, any later reinit read our CAS first: these reads come
		 * before its writes. */
		fn = callback_of(t);
		period = old & F_PERIODIC ? period_of(periodic_of(t)) : 0;
		next = old & ~(uint32_t)F_ENTRY;
		if ((old & ST_MASK) == ST_EXPIRED)
			next = (next & ~ST_MASK) |
			       (old & F_PERIODIC ? ST_RUNNING : ST_IDLE);
	} while (!state_cas(t, &old, next));
	TW_TEST_POINT("execute.claimed", t);
	if ((old & ST_MASK) != ST_EXPIRED) {
		running_store(slot, NULL);
		wake_sync_waiters(svc); /* cancel_sync may wait for the entry */
		return; /* stopped by cancel */
	}
	due = __atomic_load_n(&t->next_due, __ATOMIC_RELAXED);

	tls_current = t;
	tls_current_svc = svc;
	tls_slot = slot_index;
	tls_rearm = period > 0;
	fn(svc, t); /* a one-shot timer may be freed from here on */
	rearm_after = tls_rearm;
	tls_current = NULL;
	tls_current_svc = NULL;
	COUNT(svc, ran);

	/* From the due time, not from now: no drift. Not if the callback
	 * cancelled its own timer: it may have freed it since (issue 28,
	 * item 9), and a cancelled periodic timer is not re-armed anyway. */
	if (rearm_after)
		rearm(svc, t, due > INT64_MAX - period ? INT64_MAX : due + period);
	running_store(slot, NULL);
	wake_sync_waiters(svc);
}

/* Hand the batch to the executors, a ring's worth per lock, or run a
 * timer here when the ring is full. The rest of the batch stays in
 * svc->batch, where a callback run here may take a timer out
 * (cancel_sync leaves NULL). */
static int64_t dispatch(struct tw_service *svc)
{
	int64_t n = 0;

	while (svc->batch_pos < svc->batch_len) {
		struct tw_service_timer *t;

		if (svc->nexecutors) {
			size_t queued = 0;

			pthread_mutex_lock(&svc->q_mu);
			while (svc->batch_pos < svc->batch_len &&
			       svc->ring_len < svc->ring_cap &&
			       !svc->stop_executors) {
				t = svc->batch[svc->batch_pos++];
				if (!t)
					continue;
				svc->ring[(svc->ring_head + svc->ring_len++) %
					  svc->ring_cap] = t;
				queued++;
			}
			if (queued)
				pthread_cond_broadcast(&svc->q_cv);
			pthread_mutex_unlock(&svc->q_mu);
			n += (int64_t)queued;
			if (svc->batch_pos == svc->batch_len)
				break;
			COUNT(svc, caller_ran);
		}
		t = svc->batch[svc->batch_pos++];
		if (!t)
			continue;
		n++;
		execute(svc, t, svc->nexecutors);
	}
	svc->batch_len = svc->batch_pos = 0;
	return n;
}

/* cancel_sync: give up the timer's entry (F_ENTRY), unless it expired
 * again meanwhile (re-added by someone else): then the entry is its
 * only way to run, and stays. */
static bool release_entry(struct tw_service_timer *t)
{
	uint32_t old = state_load(t);

	do {
		if (!(old & F_ENTRY) || (old & ST_MASK) == ST_EXPIRED)
			return false;
	} while (!state_cas(t, &old, old & ~(uint32_t)F_ENTRY));
	return true;
}

/* Take a timer's one entry back (cancel_sync). Only the scanning thread
 * touches svc->batch; the ring is under q_mu. */
static void take_entry(struct tw_service *svc, struct tw_service_timer *t)
{
	/* Shutdown's list is the shutting-down thread's: from its
	 * hand_back, a timer still on it is taken off here (the cancel that
	 * got us here stopped it), for that thread cannot wait for itself to
	 * reach it (issue 28, item 5: it waited for ever). */
	if (tls_current_svc == svc && tls_slot == svc->nexecutors + 1) {
		for (struct tw_service_timer **pp = &tls_handed; *pp;
		     pp = &(*pp)->inbox_next) {
			if (*pp == t) {
				*pp = t->inbox_next;
				state_clear(t, F_ENTRY);
				return;
			}
		}
	}
	if (tls_scanning == svc) {
		for (size_t i = svc->batch_pos; i < svc->batch_len; i++) {
			if (svc->batch[i] == t) {
				if (release_entry(t))
					svc->batch[i] = NULL;
				return;
			}
		}
	}
	pthread_mutex_lock(&svc->q_mu);
	for (size_t i = 0; i < svc->ring_len; i++) {
		size_t slot = (svc->ring_head + i) % svc->ring_cap;

		if (svc->ring[slot] == t) {
			if (release_entry(t))
				svc->ring[slot] = NULL; /* the executor skips it */
			break;
		}
	}
	pthread_mutex_unlock(&svc->q_mu);
}

/* Drain the inboxes, advance the wheel to now and return the earliest
 * next expiry. What expired is in svc->batch, in firing order. */
static void scan(struct tw_service *svc, int64_t now, int64_t *next)
{
	int64_t when;

	pthread_mutex_lock(&svc->wheel_mu);
	drain_inboxes(svc);
	if (now < tw_wheel_now(&svc->wheel)) {
		COUNT(svc, backwards);
		now = tw_wheel_now(&svc->wheel);
	}
	tw_wheel_advance(&svc->wheel, now);
	*next = tw_wheel_next_expiry(&svc->wheel, &when) ? when : INT64_MAX;
	pthread_mutex_unlock(&svc->wheel_mu);
}

/* Wait on cv (its clock is CLOCK_MONOTONIC) for at most rel ns. */
static void wait_for_ns(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t rel)
{
	int64_t abs_ns = monotonic_ns(NULL) + rel;
	struct timespec ts = { abs_ns / 1000000000, abs_ns % 1000000000 };

	pthread_cond_timedwait(cv, mu, &ts);
}

#define MAX_SLEEP_NS (3600 * 1000000000LL)

static void wait_until(struct tw_service *svc, int64_t next)
{
	int64_t now, rel;

	if (next == INT64_MAX) {
		pthread_cond_wait(&svc->reaper_cv, &svc->reaper_mu);
		return;
	}
	/* The clock may be injected: sleep its distance as nanoseconds. An
	 * injected clock may be anywhere in the int64 range, so next - now
	 * need not fit (it overflowed into a negative "due already", and
	 * the reaper spun): compare before subtracting. */
	now = clock_now(svc);
	if (next <= now)
		return;
	rel = now < 0 && next > INT64_MAX + now ? MAX_SLEEP_NS : next - now;
	if (rel > MAX_SLEEP_NS)
		rel = MAX_SLEEP_NS;
	wait_for_ns(&svc->reaper_cv, &svc->reaper_mu, rel);
}

static void *reaper_main(void *arg)
{
	struct tw_service *svc = arg;

	for (;;) {
		int64_t next;

		TW_TEST_POINT("reaper.loop_top", svc);
		pthread_mutex_lock(&svc->reaper_mu);
		if (svc->stop_reaper) {
			pthread_mutex_unlock(&svc->reaper_mu);
			break;
		}
		/* Both kick flags at once, under the lock (see kick()). */
		svc->kicked = false;
		atomic_store(&svc->kick_pending, false);
		/* While it scans, every add due before forever kicks. seq_cst,
		 * before the drain: push() explains the pairing. */
		atomic_store(&svc->deadline, INT64_MAX);
		pthread_mutex_unlock(&svc->reaper_mu);
		TW_TEST_POINT("reaper.cleared", svc);

		pthread_mutex_lock(&svc->scan_mu);
		tls_scanning = svc;
		scan(svc, clock_now(svc), &next);
		dispatch(svc);
		tls_scanning = NULL;
		pthread_mutex_unlock(&svc->scan_mu);

		pthread_mutex_lock(&svc->reaper_mu);
		if (!svc->kicked && !svc->stop_reaper) {
			atomic_store(&svc->deadline, next);
			wait_until(svc, next);
		}
		pthread_mutex_unlock(&svc->reaper_mu);
		COUNT(svc, wakeups);
	}
	return NULL;
}

struct executor_arg {
	struct tw_service *svc;
	unsigned index;
};

static void *executor_main(void *arg)
{
	struct tw_service *svc = ((struct executor_arg *)arg)->svc;
	unsigned index = ((struct executor_arg *)arg)->index;

	free(arg);
	for (;;) {
		struct tw_service_timer *t;

		pthread_mutex_lock(&svc->q_mu);
		while (svc->ring_len == 0 && !svc->stop_executors)
			pthread_cond_wait(&svc->q_cv, &svc->q_mu);
		if (svc->ring_len == 0) {
			pthread_mutex_unlock(&svc->q_mu);
			break;
		}
		t = svc->ring[svc->ring_head];
		svc->ring_head = (svc->ring_head + 1) % svc->ring_cap;
		svc->ring_len--;
		pthread_mutex_unlock(&svc->q_mu);
		if (t) /* NULL: taken back by cancel_sync */
			execute(svc, t, index);
	}
	return NULL;
}

/* ---- public API ---- */

void tw_service_timer_init(struct tw_service_timer *t, tw_service_fn *fn)
{
	if (!t)
		return;
	memset(t, 0, sizeof(*t));
	set_callback(t, fn);
}

/* F_PERIODIC is set only here and in tw_service_periodic_reinit(): it also
 * says that the timer is the first member of a struct tw_service_periodic,
 * so that execute may read the period behind it. */
void tw_service_periodic_init(struct tw_service_periodic *p, tw_service_fn *fn,
			      int64_t period)
{
	if (!p)
		return;
	tw_service_timer_init(&p->timer, fn);
	p->period = period > 0 ? period : 0;
	p->timer.state = period > 0 ? F_PERIODIC : 0;
}

bool tw_service_timer_pending(const struct tw_service_timer *t)
{
	uint32_t s;

	if (!t)
		return false;
	s = state_load(t) & ST_MASK;
	return s == ST_ADDING || s == ST_PENDING || s == ST_EXPIRED;
}

/* Only the callback (and a periodic timer's period) change: the wheel
 * links, the inbox link and the flags may still be the service's (a plain
 * cancel leaves the unlinking to the reaper, and an expired entry to its
 * executor), and wiping them is what made a re-initialised timer run twice
 * (bug 8). The CAS publishes the new fields with the flag it writes. */
static int reinit(struct tw_service_timer *t, tw_service_fn *fn,
		  struct tw_service_periodic *p, int64_t period)
{
	uint32_t old, next;

	if (!t)
		return TW_EINVAL;
	old = state_load(t);
	if ((old & ST_MASK) != ST_IDLE)
		return TW_EBUSY;
	/* While it is IDLE no service thread claims it; a run that claimed
	 * it before read both fields first (execute). */
	set_callback(t, fn);
	if (p)
		set_period(p, period);
	do {
		if ((old & ST_MASK) != ST_IDLE)
			return TW_EBUSY; /* an add raced its owner: misuse */
		next = old;
		if (p)
			next = period > 0 ? old | F_PERIODIC
					  : old & ~(uint32_t)F_PERIODIC;
	} while (!state_cas(t, &old, next));
	return TW_OK;
}

int tw_service_timer_reinit(struct tw_service_timer *t, tw_service_fn *fn)
{
	return reinit(t, fn, NULL, 0);
}

int tw_service_periodic_reinit(struct tw_service_periodic *p, tw_service_fn *fn,
			       int64_t period)
{
	return p ? reinit(&p->timer, fn, p, period) : TW_EINVAL;
}

static void free_service(struct tw_service *svc)
{
	if (svc->wheel.buckets)
		tw_wheel_destroy(&svc->wheel);
	free(svc->inboxes);
	free(svc->executors);
	free(svc->ring);
	free(svc->batch);
	free(svc->running);
	pthread_mutex_destroy(&svc->shutdown_mu);
	pthread_mutex_destroy(&svc->wheel_mu);
	pthread_mutex_destroy(&svc->scan_mu);
	pthread_mutex_destroy(&svc->reaper_mu);
	pthread_cond_destroy(&svc->reaper_cv);
	pthread_mutex_destroy(&svc->q_mu);
	pthread_cond_destroy(&svc->q_cv);
	pthread_mutex_destroy(&svc->idle_mu);
	pthread_cond_destroy(&svc->idle_cv);
	free(svc);
}

static int start_threads(struct tw_service *svc)
{
	for (unsigned i = 0; i < svc->cfg.executors; i++) {
		struct executor_arg *arg = malloc(sizeof(*arg));

		if (!arg)
			return TW_ENOMEM;
		arg->svc = svc;
		arg->index = i;
		if (pthread_create(&svc->executors[i], NULL, executor_main, arg)) {
			free(arg);
			return TW_EAGAIN;
		}
		svc->nexecutors_started++;
	}
	if (!svc->cfg.manual) {
		if (pthread_create(&svc->reaper, NULL, reaper_main, svc))
			return TW_EAGAIN;
		svc->reaper_started = true;
	}
	return TW_OK;
}

int tw_service_create(struct tw_service **out, const struct tw_service_config *cfg)
{
	struct tw_service *svc;
	pthread_condattr_t attr;
	int rc;

	if (!out)
		return TW_EINVAL;
	*out = NULL;
	svc = calloc(1, sizeof(*svc));
	if (!svc)
		return TW_ENOMEM;
	if (cfg)
		svc->cfg = *cfg;
	svc->owner_bits = (atomic_fetch_add(&services_created, 1) % OWNER_IDS + 1)
			  << OWNER_SHIFT;
	if (!svc->cfg.tick)
		svc->cfg.tick = 1000000;
	/* Kafka's 20 in kafka mode; exact mode's fastest, 64 (wheel.h). */
	if (!svc->cfg.wheel_size)
		svc->cfg.wheel_size = svc->cfg.mode == TW_MODE_KAFKA ? 20 : 64;
	if (!svc->cfg.inboxes)
		svc->cfg.inboxes = 8;
	if (!svc->cfg.queue_capacity)
		svc->cfg.queue_capacity = 4096;
	if (!svc->cfg.clock.now)
		svc->cfg.clock.now = monotonic_ns;
	if (svc->cfg.tick < 1 || svc->cfg.inboxes > MAX_INBOXES ||
	    svc->cfg.executors > 4096 ||
	    svc->cfg.wheel_size < TW_WHEEL_SIZE_MIN ||
	    svc->cfg.wheel_size > TW_WHEEL_SIZE_MAX) {
		free(svc);
		return TW_EINVAL;
	}
	svc->ninboxes = svc->cfg.inboxes;
	svc->nexecutors = svc->cfg.executors;

	pthread_mutex_init(&svc->shutdown_mu, NULL);
	pthread_mutex_init(&svc->wheel_mu, NULL);
	pthread_mutex_init(&svc->scan_mu, NULL);
	pthread_mutex_init(&svc->reaper_mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&svc->reaper_cv, &attr);
	pthread_cond_init(&svc->idle_cv, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&svc->q_mu, NULL);
	pthread_cond_init(&svc->q_cv, NULL);
	pthread_mutex_init(&svc->idle_mu, NULL);
	atomic_init(&svc->deadline, INT64_MAX);
	atomic_init(&svc->closing, false);
	atomic_init(&svc->handing_back, false);
	atomic_init(&svc->kick_pending, false);
	atomic_init(&svc->sync_waiters, 0);

	svc->nslots = svc->nexecutors + 2;
	svc->running = calloc(svc->nslots, sizeof(*svc->running));
	svc->ring = calloc(svc->cfg.queue_capacity, sizeof(*svc->ring));
	svc->ring_cap = svc->cfg.queue_capacity;
	svc->executors = calloc(svc->nexecutors + 1, sizeof(*svc->executors));
	svc->inboxes = aligned_alloc(64, svc->ninboxes * sizeof(*svc->inboxes));
	if (!svc->running || !svc->ring || !svc->executors ||
	    !svc->inboxes) {
		free_service(svc);
		return TW_ENOMEM;
	}
	for (unsigned i = 0; i < svc->ninboxes; i++) {
		struct inbox *ib = &svc->inboxes[i];

		memset(ib, 0, sizeof(*ib));
		atomic_init(&ib->entered, 0);
		atomic_init(&ib->added, 0);
		atomic_init(&ib->stopped, 0);
		atomic_init(&ib->tombed, 0);
	}
	rc = tw_wheel_init(&svc->wheel, svc->cfg.tick, svc->cfg.wheel_size,
			   clock_now(svc), svc->cfg.mode);
	if (rc) {
		free_service(svc);
		return rc;
	}
	svc->wheel.expire = on_expire; /* each timer's fn is its callback */
	svc->wheel.drop = drop_tombstone;
	rc = start_threads(svc);
	if (rc) {
		tw_service_destroy(svc);
		return rc;
	}
	*out = svc;
	return TW_OK;
}

/* TW_EOWNER if another service owns the timer. An early answer for add
 * (the claim itself is in the CAS), the whole check for cancel. */
static int owner_check(const struct tw_service *svc, uint32_t word)
{
	uint32_t owner = word & OWNER_MASK;

	return owner && owner != svc->owner_bits ? TW_EOWNER : TW_OK;
}

/* What a cancel that took the timer out of state s reports. */
static int stop_result(const struct tw_service *svc,
		       const struct tw_service_timer *t, uint32_t s)
{
	switch (s) {
	case ST_PENDING:
	case ST_EXPIRED:
		return TW_SVC_STOPPED;
	case ST_RUNNING:
		return TW_SVC_RUNNING;
	default:
		/* Not the hand-back slot: a timer shutdown is handing back
		 * has ended that way; its callback is not running. */
		return is_running_except(svc, t, svc->nexecutors + 1)
			       ? TW_SVC_RUNNING
			       : TW_SVC_IDLE;
	}
}

static int add_or_reschedule(struct tw_service *svc, struct tw_service_timer *t,
			     int64_t due, bool reschedule)
{
	struct inbox *ib;
	uint32_t old, s;
	int rc;

	if (!svc || !t || !callback_of(t))
		return TW_EINVAL;
	old = state_load(t);
	rc = owner_check(svc, old);
	if (rc)
		return rc;
	ib = enter(svc);
	if (!ib)
		return TW_ESHUTDOWN;
	for (;;) {
		old = settled(t, old);
		/* A claim and a state change in one CAS: two services adding
		 * the same fresh timer at once cannot both win (with a check
		 * and a separate store of the owner, both did). */
		rc = owner_check(svc, old);
		if (rc) {
			leave_unchanged(ib);
			return rc;
		}
		s = old & ST_MASK;
		if (!reschedule && (s == ST_PENDING || s == ST_EXPIRED)) {
			leave_unchanged(ib);
			return TW_EBUSY;
		}
		TW_TEST_POINT("add.owner_checked", t);
		if (state_cas(t, &old, (old & ~ST_MASK) | ST_ADDING |
					       svc->owner_bits))
			break;
	}
	rc = reschedule ? stop_result(svc, t, s) : TW_OK;
	if (rc == TW_SVC_STOPPED)
		atomic_fetch_add_explicit(&ib->stopped, 1, memory_order_relaxed);
	__atomic_store_n(&t->next_due, due, __ATOMIC_RELAXED);
	old = state_load(t);
	while (!state_cas(t, &old, (old & ~ST_MASK) | ST_PENDING | F_INBOX))
		;
	TW_TEST_POINT("add.published", t);
	if (!(old & F_INBOX))
		push(ib, t);
	if (due < atomic_load(&svc->deadline))
		kick(svc);
	leave_added(svc, ib);
	return rc;
}

int tw_service_add(struct tw_service *svc, struct tw_service_timer *t, int64_t due)
{
	return add_or_reschedule(svc, t, due, false);
}

int tw_service_add_in(struct tw_service *svc, struct tw_service_timer *t,
		      int64_t delay)
{
	int64_t now;

	if (!svc)
		return TW_EINVAL;
	now = clock_now(svc);
	if (delay > 0 && now > INT64_MAX - delay)
		return TW_EOVERFLOW;
	if (delay < 0)
		delay = 0;
	return add_or_reschedule(svc, t, now + delay, false);
}

int tw_service_reschedule(struct tw_service *svc, struct tw_service_timer *t,
			  int64_t due)
{
	return add_or_reschedule(svc, t, due, true);
}

/*
 * Take the timer to IDLE with one CAS; *was says from which state. A
 * pending timer stays where it is in the wheel, a tombstone (F_TOMB),
 * until the wheel owner meets it: at its due time, when an add places it
 * again, or in cancel_sync, which unlinks it before it returns. Nothing is
 * pushed and no inbox is entered: the caller may not free the timer before
 * cancel_sync anyway, and the wheel owner skips a timer that is not
 * PENDING. This is what makes a plain cancel one CAS and one counter
 * (model/service.pml checks the tombstone protocol, docs/model.md).
 */
static int cancel_state(struct tw_service *svc, struct tw_service_timer *t,
			uint32_t *was)
{
	uint32_t old = state_load(t), s, next;
	int result;

	for (;;) {
		old = settled(t, old);
		/* The owner rides in the word the CAS compares, so checking
		 * it here makes check and change one step: an add on another
		 * service landing after the caller's first check is seen
		 * (issue 28, item 4: this cancel stopped the other service's
		 * timer, and neither service's accounting balanced). */
		if (owner_check(svc, old))
			return TW_EOWNER;
		s = old & ST_MASK;
		if (s == ST_IDLE)
			break;
		next = (old & ~ST_MASK) | ST_IDLE;
		if (s == ST_PENDING)
			next |= F_TOMB;
		if (state_cas(t, &old, next))
			break;
	}
	result = stop_result(svc, t, s);
	if (result == TW_SVC_STOPPED) {
		struct inbox *ib = my_inbox(svc);

		/* A new tombstone is counted apart: tw_service_count()
		 * leaves out the ones still in the wheel. */
		if (s == ST_PENDING && !(old & F_TOMB))
			atomic_fetch_add_explicit(&ib->tombed, 1,
						  memory_order_relaxed);
		else
			atomic_fetch_add_explicit(&ib->stopped, 1,
						  memory_order_relaxed);
	}
	*was = s;
	return result;
}

/* Done when nothing in the service refers to the timer (a callback in slot
 * skip aside: the caller's own) -- or when it is no longer IDLE. Our cancel
 * left it IDLE, so someone has added it again since, and what follows
 * belongs to that add: waiting for its entry could wait for ever on a
 * one-executor service whose executor is the waiting thread (bug 5). */
static bool unreferenced(const struct tw_service *svc,
			 const struct tw_service_timer *t, unsigned skip)
{
	uint32_t st = state_load(t);

	if ((st & ST_MASK) != ST_IDLE)
		return true;
	return !(st & (F_INBOX | F_ENTRY | F_TOMB)) &&
	       !is_running_except(svc, t, skip);
}

/*
 * The cancel_sync waits of callbacks, of every service in the process: a
 * callback of one service may cancel_sync a timer of another (a service
 * per event loop, a purgatory beside a service), so a ring of waits may
 * cross services, and a check per service saw none of it (issue 28, item
 * 6). A record per waiting callback, on its stack, in one list under one
 * mutex: a record is added and the ring looked for under that mutex, so
 * of two callbacks closing a ring the later sees the earlier's record.
 * Only callbacks that are about to wait come here: the slow path.
 */
struct sync_wait {
	struct sync_wait *next;
	const struct tw_service *run_svc; /* the service whose callback (or
					     hand-back) this thread runs */
	unsigned run_slot;                /* in run_svc->running[] */
	const struct tw_service *target_svc;
	const struct tw_service_timer *target; /* what it waits for */
	unsigned held_slot; /* the slot of target_svc whose thread holds the
			       target's entry (scanner, or shutdown's
			       hand-back), as its owner last saw; nslots: none */
};

static pthread_mutex_t sync_waits_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sync_wait *sync_waits;

/*
 * Under sync_waits_mu: the slot of svc whose thread must act before a wait
 * for t can end: the one running t (a callback or a hand-back), else, for
 * a timer with an entry (F_ENTRY), the thread that holds the entry --
 * shutdown's hand-back slot while its loop runs (the entry is its list:
 * a ring through that list hung, found by the review of issue 28), the
 * scanner's otherwise. Reads t's state word: only for the caller's own
 * target, the one timer known to be alive here. nslots: none.
 */
static unsigned holder_slot(const struct tw_service *svc,
			    const struct tw_service_timer *t,
			    const struct sync_wait *me)
{
	for (unsigned i = 0; i < svc->nslots; i++)
		if (!(svc == me->run_svc && i == me->run_slot) &&
		    running_load(&svc->running[i]) == t)
			return i;
	if (!(state_load(t) & F_ENTRY))
		return svc->nslots;
	return atomic_load(&svc->handing_back) ? svc->nexecutors + 1
					       : svc->nexecutors;
}

/*
 * Under sync_waits_mu: whether me's wait closes a ring. Follow it: the
 * slot that holds me's target, the record of the thread in that slot,
 * the slot that holds what it waits for, ... until a slot is me's own.
 * Another waiter's target may be freed as soon as its wait ends, so its
 * state word is not read here: a slot running it is found by comparing
 * pointers, and an entry's holder is the one that waiter found itself
 * (held_slot, refreshed each time it looks). A service on the path is
 * alive, as a thread waits in it or runs one of its callbacks.
 */
static bool closes_ring(const struct sync_wait *me)
{
	const struct sync_wait *cur = me;

	for (unsigned hop = 0; hop <= 4096; hop++) {
		const struct tw_service *svc = cur->target_svc;
		const struct sync_wait *r;
		unsigned i = 0;

		while (i < svc->nslots &&
		       ((svc == me->run_svc && i == me->run_slot) ||
			running_load(&svc->running[i]) != cur->target))
			i++;
		if (i == svc->nslots)
			i = cur->held_slot;
		if (i >= svc->nslots)
			return false;
		if (svc == me->run_svc && i == me->run_slot)
			return true;
		for (r = sync_waits; r; r = r->next)
			if (r->run_svc == svc && r->run_slot == i)
				break;
		if (!r)
			return false;
		cur = r;
		if (cur->target_svc == me->run_svc &&
		    running_load(&me->run_svc->running[me->run_slot]) ==
			    cur->target)
			return true;
	}
	return false; /* longer than any ring of live threads */
}

/* Post me (once) and look for a ring, atomically with respect to every
 * other waiter. */
static bool wait_closes_ring(struct sync_wait *me, bool *posted)
{
	bool ring;

	pthread_mutex_lock(&sync_waits_mu);
	me->held_slot = holder_slot(me->target_svc, me->target, me);
	if (!*posted) {
		me->next = sync_waits;
		sync_waits = me;
		*posted = true;
	}
	ring = closes_ring(me);
	pthread_mutex_unlock(&sync_waits_mu);
	return ring;
}

static void unpost_wait(struct sync_wait *me)
{
	struct sync_wait **pp;

	pthread_mutex_lock(&sync_waits_mu);
	for (pp = &sync_waits; *pp != me; pp = &(*pp)->next)
		;
	*pp = me->next;
	pthread_mutex_unlock(&sync_waits_mu);
}

/*
 * cancel_sync: unlink the timer from the wheel and every inbox, take back
 * an expired entry still waiting to run, and wait for a running callback
 * (not for the caller's own: a callback that cancel_syncs its own timer
 * cannot wait for itself, and once it returns nothing refers to a one-shot
 * timer). An entry still on its way from the reaper lands in the queue
 * soon; retry rather than wait for an executor to consume it (this thread
 * may be the only executor). Returns TW_EDEADLK instead of closing a cycle
 * of callbacks waiting for each other.
 */
static int make_unreferenced(struct tw_service *svc, struct tw_service_timer *t)
{
	bool in_callback = tls_current && tls_current_svc == svc;
	unsigned skip = in_callback && tls_current == t ? tls_slot : svc->nslots;
	/* A callback of any service can be in a ring; another thread cannot
	 * (nobody waits for it). */
	struct sync_wait me = { NULL, tls_current_svc, tls_slot, svc, t,
				svc->nslots };
	bool posted = false;
	int rc = TW_OK;

	for (;;) {
		uint32_t st = state_load(t);

		/* Another service's add took the timer after our cancel found
		 * it fresh: it is that add's, and none of ours to unlink or
		 * unflag (issue 28's review: this cleared the other
		 * service's tombstone under our lock, and its count went
		 * wrong). An owner, once set, changes only by
		 * tw_service_timer_init(). */
		if (owner_check(svc, st))
			break;
		/* A tombstone, or on its way through an inbox: make the
		 * wheel match (the drain applies the inbox; a tombstone
		 * without an inbox entry is unlinked here, then unflagged). */
		if (st & (F_INBOX | F_TOMB)) {
			TW_TEST_POINT("cancel_sync.unlink", t);
			pthread_mutex_lock(&svc->wheel_mu);
			drain_inboxes(svc);
			st = state_load(t);
			if (owner_check(svc, st)) {
				pthread_mutex_unlock(&svc->wheel_mu);
				break;
			}
			if ((st & ST_MASK) != ST_PENDING &&
			    (st & ST_MASK) != ST_ADDING) {
				if (tw_timer_pending(&t->wheel_timer))
					tw_wheel_cancel(&svc->wheel,
							&t->wheel_timer);
				clear_tomb(svc, t);
			}
			pthread_mutex_unlock(&svc->wheel_mu);
			st = state_load(t);
		}
		if ((st & F_ENTRY) && (st & ST_MASK) != ST_EXPIRED)
			take_entry(svc, t);
		if (unreferenced(svc, t, skip))
			break;
		if (tls_current && wait_closes_ring(&me, &posted)) {
			rc = TW_EDEADLK;
			break;
		}
		TW_TEST_POINT("cancel_sync.wait", t);
		/* Counted before the check under the lock: a waker reads the
		 * count after it changed what the check reads (both seq_cst),
		 * so it broadcasts or this check sees its change. */
		atomic_fetch_add(&svc->sync_waiters, 1);
		pthread_mutex_lock(&svc->idle_mu);
		if (!unreferenced(svc, t, skip))
			wait_for_ns(&svc->idle_cv, &svc->idle_mu, 1000000);
		pthread_mutex_unlock(&svc->idle_mu);
		atomic_fetch_sub(&svc->sync_waiters, 1);
	}
	if (posted)
		unpost_wait(&me);
	return rc;
}

static int cancel(struct tw_service *svc, struct tw_service_timer *t, bool sync)
{
	uint32_t was;
	int result, rc;

	if (!svc || !t)
		return TW_EINVAL;
	result = owner_check(svc, state_load(t));
	if (result)
		return result;
	TW_TEST_POINT("cancel.owner_checked", t);
	result = cancel_state(svc, t, &was);
	if (result == TW_EOWNER)
		return result;
	if (tls_current == t && tls_current_svc == svc)
		tls_rearm = false; /* its run is its last: it may free itself */
	if (!sync)
		return result;
	TW_TEST_POINT("cancel_sync.cancelled", t);
	rc = make_unreferenced(svc, t);
	return rc ? rc : result;
}

/*
 * The purgatory's completion (service_internal.h): stop a pending timer and
 * unlink it under wheel_mu, and never wait. Only from PENDING without
 * F_ENTRY: an expired timer's entry, or shutdown's list, still refers to
 * it, and waiting for either is what hung a completer whose caller held a
 * lock the reaper's current callback wanted (issue 28, items 2 and 5).
 * There the caller leaves the timer alone: its callback or its hand-back
 * runs and finds the work done. It does wait for one thing: an add between
 * its CAS and its push (drained below until F_INBOX is gone). wheel_mu is
 * safe to take under any user lock: only scan, count, shutdown and
 * cancel_sync hold it, and none of them runs user code or waits under it.
 */
int tw__service_stop_pending(struct tw_service *svc, struct tw_service_timer *t)
{
	uint32_t old = state_load(t), st;

	do {
		old = settled(t, old);
		if ((old & ST_MASK) != ST_PENDING || (old & F_ENTRY) ||
		    owner_check(svc, old))
			return TW_SVC_IDLE;
	} while (!state_cas(t, &old, (old & ~ST_MASK) | ST_IDLE | F_TOMB));
	if (!(old & F_TOMB))
		atomic_fetch_add_explicit(&my_inbox(svc)->tombed, 1,
					  memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&my_inbox(svc)->stopped, 1,
					  memory_order_relaxed);
	TW_TEST_POINT("stop_pending.stopped", t);
	/* F_INBOX still set after our own drain: the add that set it has not
	 * pushed the timer yet (it does so right after its CAS, a few
	 * instructions, no lock, no user code). Returning now would let the
	 * caller free a timer that push is about to link (issue 28's second
	 * review: a use-after-free in the next drain). So drain until the
	 * push has happened; this waits for that add's next instructions,
	 * never for a callback. */
	for (;;) {
		pthread_mutex_lock(&svc->wheel_mu);
		drain_inboxes(svc);
		st = state_load(t);
		if (!(st & F_INBOX))
			break;
		pthread_mutex_unlock(&svc->wheel_mu);
		TW_TEST_POINT("stop_pending.inbox", t);
		sched_yield();
	}
	if ((st & ST_MASK) != ST_PENDING && (st & ST_MASK) != ST_ADDING) {
		if (tw_timer_pending(&t->wheel_timer))
			tw_wheel_cancel(&svc->wheel, &t->wheel_timer);
		clear_tomb(svc, t);
	}
	pthread_mutex_unlock(&svc->wheel_mu);
	return TW_SVC_STOPPED;
}

int tw_service_cancel(struct tw_service *svc, struct tw_service_timer *t)
{
	return cancel(svc, t, false);
}

int tw_service_cancel_sync(struct tw_service *svc, struct tw_service_timer *t)
{
	return cancel(svc, t, true);
}

int64_t tw_service_poll(struct tw_service *svc)
{
	int64_t now, n, next;

	if (!svc)
		return TW_EINVAL;
	if (tls_scanning || tls_current)
		return TW_EREENTER;
	if (atomic_load(&svc->closing))
		return TW_ESHUTDOWN;
	TW_TEST_POINT("poll.enter", svc);
	pthread_mutex_lock(&svc->scan_mu);
	/* Again under scan_mu, which shutdown holds while it sets closing: a
	 * poll that got past the check above could otherwise expire timers
	 * shutdown is about to hand back, and run them after it returned. */
	if (atomic_load(&svc->closing)) {
		pthread_mutex_unlock(&svc->scan_mu);
		return TW_ESHUTDOWN;
	}
	now = clock_now(svc);
	pthread_mutex_lock(&svc->wheel_mu);
	n = now < tw_wheel_now(&svc->wheel) ? TW_ERANGE : 0;
	pthread_mutex_unlock(&svc->wheel_mu);
	if (n == 0) {
		/* Everything due at this clock reading, however many: an
		 * advance hands at most BATCH_MAX timers to dispatch and
		 * leaves the rest due now, so scan again until none was left
		 * (one poll ran 65,536 of 100,000 due timers, and a manual
		 * service has no call that says to poll again: issue 28,
		 * item 8). Only a full batch repeats, so a callback that adds
		 * timers due now cannot keep the loop going on its own. */
		tls_scanning = svc;
		do {
			svc->deferred = false;
			scan(svc, now, &next);
			TW_TEST_POINT("poll.scanned", svc);
			n += dispatch(svc);
		} while (svc->deferred);
		tls_scanning = NULL;
	}
	pthread_mutex_unlock(&svc->scan_mu);
	return n;
}

void tw_service_kick(struct tw_service *svc)
{
	if (svc)
		kick(svc);
}

int64_t tw_service_now(const struct tw_service *svc)
{
	if (!svc)
		return 0;
	return clock_now(svc);
}

size_t tw_service_count(struct tw_service *svc)
{
	size_t n;
	int64_t tombs;

	if (!svc)
		return 0;
	pthread_mutex_lock(&svc->wheel_mu);
	drain_inboxes(svc);
	n = tw_wheel_count(&svc->wheel);
	tombs = -(int64_t)svc->tombs_cleared;
	for (unsigned i = 0; i < svc->ninboxes; i++)
		tombs += (int64_t)atomic_load_explicit(&svc->inboxes[i].tombed,
						       memory_order_relaxed);
	pthread_mutex_unlock(&svc->wheel_mu);
	/* Tombstones are cancelled timers the wheel still links. A cancel
	 * counts its tombstone after its CAS, so for a moment the wheel
	 * owner may have cleared more than were counted: never below 0. */
	if (tombs > 0)
		n = (size_t)tombs < n ? n - (size_t)tombs : 0;
	return n;
}

void tw_service_stats(struct tw_service *svc, struct tw_service_stats *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!svc)
		return;
	out->added = atomic_load(&svc->added);
	for (unsigned i = 0; i < svc->ninboxes; i++) {
		out->added += atomic_load(&svc->inboxes[i].added);
		out->stopped += atomic_load(&svc->inboxes[i].stopped) +
				atomic_load(&svc->inboxes[i].tombed);
	}
	out->ran = atomic_load(&svc->ran);
	out->handed_back = atomic_load(&svc->handed_back);
	out->caller_ran = atomic_load(&svc->caller_ran);
	out->clock_backwards = atomic_load(&svc->backwards);
	out->wakeups = atomic_load(&svc->wakeups);
}

/* PENDING -> PENDING + F_ENTRY: from here until its turn the timer is on
 * shutdown's private list, still pending, so that a cancel may still stop
 * it (then it is not handed back: one end each), and F_ENTRY (then the
 * hand-back slot) keeps a racing cancel_sync waiting until shutdown is
 * past it; returning at once let its caller free a timer that was about
 * to be handed back (bug 3). (It was IDLE here, claimed for the
 * hand-back: a hand_back that cancel_synced another timer on the list
 * then waited for ever, issue 28 item 5.) */
static void collect_pending(struct tw_wheel *w, struct tw_timer *wt)
{
	struct tw_service_timer *t =
		tw_container_of(wt, struct tw_service_timer, wheel_timer);
	uint32_t old = state_load(t);

	do {
		if ((old & ST_MASK) != ST_PENDING) {
			/* a cancel claimed it (unlinked now, by the drain) */
			if (old & F_TOMB)
				clear_tomb(tw_container_of(w, struct tw_service,
							   wheel), t);
			return;
		}
	} while (!state_cas(t, &old, old | F_ENTRY));
	/* The inbox link is free: the inboxes are drained and closed (no
	 * producer is inside, none can enter, the threads are stopped). */
	t->inbox_next = tls_handed;
	tls_handed = t;
}

static void stop_threads(struct tw_service *svc)
{
	if (svc->reaper_started) {
		pthread_mutex_lock(&svc->reaper_mu);
		svc->stop_reaper = true;
		pthread_cond_signal(&svc->reaper_cv);
		pthread_mutex_unlock(&svc->reaper_mu);
		pthread_join(svc->reaper, NULL);
		svc->reaper_started = false;
	}
	/* Expired timers already in the queue run: the executors drain it
	 * before they exit. */
	pthread_mutex_lock(&svc->q_mu);
	svc->stop_executors = true;
	pthread_cond_broadcast(&svc->q_cv);
	pthread_mutex_unlock(&svc->q_mu);
	for (unsigned i = 0; i < svc->nexecutors_started; i++)
		pthread_join(svc->executors[i], NULL);
	svc->nexecutors_started = 0;
}

int64_t tw_service_shutdown(struct tw_service *svc,
			    tw_service_hand_back_fn *hand_back, void *arg)
{
	int64_t n = 0;

	if (!svc)
		return TW_EINVAL;
	if (tls_current || tls_scanning)
		return TW_EREENTER;
	pthread_mutex_lock(&svc->shutdown_mu);
	if (svc->shut_down) {
		pthread_mutex_unlock(&svc->shutdown_mu);
		return 0;
	}
	/* Serialise with pollers, then refuse adds from here on, and wait
	 * for the producers already inside. */
	pthread_mutex_lock(&svc->scan_mu);
	atomic_store(&svc->closing, true);
	pthread_mutex_unlock(&svc->scan_mu);
	for (unsigned i = 0; i < svc->ninboxes; i++)
		while (atomic_load(&svc->inboxes[i].entered) !=
		       atomic_load(&svc->inboxes[i].added)) {
			TW_TEST_POINT("shutdown.producer_inside", svc);
			sched_yield();
		}
	tls_handed = NULL;
	stop_threads(svc);
	TW_TEST_POINT("shutdown.drain", svc);
	pthread_mutex_lock(&svc->wheel_mu);
	drain_inboxes(svc);
	tw_wheel_drain(&svc->wheel, collect_pending);
	pthread_mutex_unlock(&svc->wheel_mu);
	/* hand_back runs like a callback, in the last running[] slot: a
	 * cancel_sync of the timer waits until it returned, and from inside
	 * hand_back shutdown is refused and cancel_sync(t) does not wait for
	 * itself. */
	tls_current_svc = svc;
	tls_slot = svc->nexecutors + 1;
	atomic_store(&svc->handing_back, true);
	while (tls_handed) {
		struct tw_service_timer *t = tls_handed;
		_Atomic(struct tw_service_timer *) *slot = &svc->running[tls_slot];
		uint32_t old;

		tls_handed = t->inbox_next;
		/* The slot first: a cancel that finds the timer IDLE without
		 * F_ENTRY then sees the hand-back under way in it. */
		running_store(slot, t);
		old = state_load(t);
		do {
			if ((old & ST_MASK) != ST_PENDING)
				break;
		} while (!state_cas(t, &old, (old & ~(uint32_t)(ST_MASK | F_ENTRY)) |
						     ST_IDLE));
		if ((old & ST_MASK) != ST_PENDING) {
			/* A cancel stopped it first: not ours to hand back.
			 * Let go of it, the tombstone flag before the entry
			 * (a cancel_sync returns once F_ENTRY is gone). */
			running_store(slot, NULL);
			pthread_mutex_lock(&svc->wheel_mu);
			clear_tomb(svc, t);
			state_clear(t, F_ENTRY);
			pthread_mutex_unlock(&svc->wheel_mu);
			wake_sync_waiters(svc);
			continue;
		}
		n++;
		COUNT(svc, handed_back);
		TW_TEST_POINT("shutdown.hand_back", t);
		tls_current = t;
		if (hand_back)
			hand_back(t, arg);
		tls_current = NULL;
		running_store(slot, NULL);
		wake_sync_waiters(svc);
	}
	atomic_store(&svc->handing_back, false);
	tls_current_svc = NULL;
	svc->shut_down = true;
	pthread_mutex_unlock(&svc->shutdown_mu);
	return n;
}

void tw_service_destroy(struct tw_service *svc)
{
	/* From a callback or a hand_back the service is running the caller:
	 * freeing it there was a use-after-free on return (issue 28's
	 * review). Refused like shutdown, by doing nothing. */
	if (!svc || tls_current || tls_scanning)
		return;
	tw_service_shutdown(svc, NULL, NULL);
	free_service(svc);
}
