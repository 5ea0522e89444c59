/* SPDX-License-Identifier: MIT */
/*
 * sync.c — cancel_sync, and the purgatory's stop_pending: the calls after
 * which nothing in the service refers to the timer, so its owner may free
 * it. cancel_sync takes wheel_mu, drains the inboxes (the timer leaves the
 * wheel and every inbox), takes back a queued entry, and waits until no
 * running[] slot holds the timer. Three rules keep that wait finite: it
 * never waits for the caller's own callback (from its own callback it
 * unlinks, then returns what it stopped); it returns as soon as the timer
 * is no longer IDLE (someone added it again: it is that add's now, and
 * its entry may only be runnable by the waiting thread); and each
 * callback that waits posts what it waits for in one process-wide list,
 * so a callback about to close a ring of waits -- within one service or
 * across several -- sees it and gets TW_EDEADLK. stop_pending never waits
 * for a callback at all.
 */
#define _POSIX_C_SOURCE 200809L

#include <sched.h>

#include "core.h"

/* cancel_sync: give up the timer's entry (F_ENTRY), unless it expired
 * again meanwhile (re-added by someone else): then the entry is its
 * only way to run, and stays. */
static bool release_entry(struct tw_service_timer *t)
{
	uint32_t old = word_load(t);

	do {
		if (!word_has(old, F_ENTRY) || word_state(old) == ST_EXPIRED)
			return false;
	} while (!tr_release_entry(t, &old));
	return true;
}

/* Take a timer's one entry back (cancel_sync). Only the scanning thread
 * touches svc->batch; the ring is under q_mu. */
static void take_entry(struct tw_service *svc, struct tw_service_timer *t)
{
	/* Shutdown's list is the shutting-down thread's: from its
	 * hand_back, a timer still on it is taken off here (the cancel that
	 * got us here stopped it), for that thread cannot wait for itself to
	 * reach it: it would wait for ever. */
	if (THIS_THREAD.current_svc == svc &&
	    THIS_THREAD.slot == svc->nexecutors + 1) {
		for (struct tw_service_timer **pp = &THIS_THREAD.handed; *pp;
		     pp = &(*pp)->inbox_next) {
			if (*pp == t) {
				*pp = t->inbox_next;
				tr_release_entry_now(t);
				return;
			}
		}
	}
	/* From t's own callback: an expiry another thread found t running
	 * here and handed over (execute) waits in this thread's slot, to run
	 * after the callback. Taken back here -- waiting for it would be
	 * waiting for ourselves -- unless t expired again meanwhile (then it
	 * is that expiry's only way to run, and stays). Only this thread
	 * clears its slot's flag. */
	if (THIS_THREAD.current == t && THIS_THREAD.current_svc == svc &&
	    running_again(&svc->running[THIS_THREAD.slot], t)) {
		if (release_entry(t))
			running_store(&svc->running[THIS_THREAD.slot], t);
		return;
	}
	if (THIS_THREAD.scanning == svc) {
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

/* Done when nothing in the service refers to the timer (a callback in slot
 * skip aside: the caller's own) -- or when it is no longer IDLE. Our cancel
 * left it IDLE, so someone has added it again since, and what follows
 * belongs to that add: waiting for its entry could wait for ever on a
 * one-executor service whose executor is the waiting thread (bug 5). */
static bool unreferenced(const struct tw_service *svc,
			 const struct tw_service_timer *t, unsigned skip)
{
	uint32_t st = word_load(t);

	if (word_state(st) != ST_IDLE)
		return true;
	return !word_has(st, F_INBOX | F_ENTRY | F_TOMB) &&
	       !is_held_except(svc, t, skip);
}

/*
 * The cancel_sync waits of callbacks, of every service in the process: a
 * callback of one service may cancel_sync a timer of another (a service
 * per event loop, a purgatory beside a service), so a ring of waits may
 * cross services, which a check per service cannot see. A record per
 * waiting callback, on its stack, in one list under one mutex: a record
 * is added and the ring looked for under that mutex, so of two callbacks
 * closing a ring the later sees the earlier's record.
 * Only callbacks that are about to wait come here: the slow path.
 */
struct sync_wait {
	struct sync_wait *next;
	struct tw_service *run_svc; /* the service whose callback (or
				       hand-back) this thread runs */
	unsigned run_slot;          /* in run_svc->running[] */
	struct tw_service *target_svc;
	const struct tw_service_timer *target; /* what it waits for */
};

static pthread_mutex_t sync_waits_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sync_wait *sync_waits;

/* Under q_mu: whether t's entry waits in the executors' queue. */
static bool on_queue(const struct tw_service *svc,
		     const struct tw_service_timer *t)
{
	for (size_t i = 0; i < svc->ring_len; i++)
		if (svc->ring[(svc->ring_head + i) % svc->ring_cap] == t)
			return true;
	return false;
}

/*
 * Under sync_waits_mu: the slot of svc whose thread must act before a wait
 * for t can end, as things are now: the one running t (a callback or a
 * hand-back; me's own slot aside), else, for a timer with an entry
 * (F_ENTRY), the thread that holds the entry -- shutdown's hand-back
 * slot while its loop runs (the entry is its list, and a ring of waits
 * may run through it), the scanner's while it is in the scanner's
 * batch. An entry in the executors' queue blocks nobody: the waiter takes
 * it back at its next look. nslots: none.
 *
 * Looked at under q_mu: an entry moves between the batch, the queue and
 * an executor's slot only under it, so the look finds it where it is.
 * What each waiter found at its own last look could be stale by now (its
 * target's run had ended, and a check through it found a ring that was
 * not there). t is the target of a waiter whose record is posted, so that
 * waiter is still inside its cancel_sync of t (it leaves the list only
 * under sync_waits_mu), and t may not be freed while a call on it is
 * under way: its word may be read here.
 */
static unsigned holder_slot(struct tw_service *svc,
			    const struct tw_service_timer *t,
			    const struct sync_wait *me)
{
	unsigned holder = svc->nslots;

	pthread_mutex_lock(&svc->q_mu);
	for (unsigned i = 0; i < svc->nslots; i++) {
		if (!(svc == me->run_svc && i == me->run_slot) &&
		    running_load(&svc->running[i]) == t) {
			holder = i;
			break;
		}
	}
	if (holder == svc->nslots && word_has(word_load(t), F_ENTRY) &&
	    !on_queue(svc, t))
		holder = atomic_load(&svc->handing_back) ? svc->nexecutors + 1
							 : svc->nexecutors;
	pthread_mutex_unlock(&svc->q_mu);
	return holder;
}

/*
 * Under sync_waits_mu: whether me's wait closes a ring. Follow it: the
 * slot that holds me's target, the record of the thread in that slot,
 * the slot that holds what it waits for, ... until a slot is me's own.
 * Each hop is looked at now (holder_slot). A service on the path is
 * alive, as a thread waits in it or runs one of its callbacks.
 */
static bool closes_ring(const struct sync_wait *me)
{
	const struct sync_wait *cur = me;

	for (unsigned hop = 0; hop <= 4096; hop++) {
		struct tw_service *svc = cur->target_svc;
		const struct sync_wait *r;
		unsigned i = holder_slot(svc, cur->target, me);

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
 * Unlink the timer from the wheel and every inbox, take back an expired
 * entry still waiting to run, and wait for a running callback (not for
 * the caller's own: a callback that cancel_syncs its own timer cannot wait
 * for itself, and once it returns nothing refers to a one-shot timer). An
 * entry still on its way from the reaper lands in the queue soon; retry
 * rather than wait for an executor to consume it (this thread may be the
 * only executor). Returns TW_EDEADLK instead of closing a cycle of
 * callbacks waiting for each other.
 */
static int make_unreferenced(struct tw_service *svc, struct tw_service_timer *t)
{
	const struct tw__svc_thread *self = &THIS_THREAD;
	bool in_callback = self->current && self->current_svc == svc;
	unsigned skip = in_callback && self->current == t ? self->slot : svc->nslots;
	/* A callback of any service can be in a ring; another thread cannot
	 * (nobody waits for it). */
	struct sync_wait me = { NULL, self->current_svc, self->slot, svc, t };
	bool posted = false;
	int rc = TW_OK;

	for (;;) {
		uint32_t st = word_load(t);

		/* Another service's add took the timer after our cancel found
		 * it fresh: it is that add's, and none of ours to unlink or
		 * unflag (unflagging it would clear the other service's
		 * tombstone under our lock, and put its count wrong). An
		 * owner, once set, changes only by tw_service_timer_init(). */
		if (owner_check(svc, st))
			break;
		/* A tombstone, or on its way through an inbox: make the
		 * wheel match (the drain applies the inbox; a tombstone
		 * without an inbox entry is unlinked here, then unflagged). */
		if (word_has(st, F_INBOX | F_TOMB)) {
			TW_TEST_POINT("cancel_sync.unlink", t);
			pthread_mutex_lock(&svc->wheel_mu);
			tw__svc_drain_inboxes(svc);
			if (owner_check(svc, word_load(t))) {
				pthread_mutex_unlock(&svc->wheel_mu);
				break;
			}
			tw__svc_unlink_stopped(svc, t);
			pthread_mutex_unlock(&svc->wheel_mu);
			st = word_load(t);
		}
		if (word_has(st, F_ENTRY) && word_state(st) != ST_EXPIRED)
			take_entry(svc, t);
		if (unreferenced(svc, t, skip))
			break;
		if (self->current && wait_closes_ring(&me, &posted)) {
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
			tw__svc_wait_for_ns(&svc->idle_cv, &svc->idle_mu, 1000000);
		pthread_mutex_unlock(&svc->idle_mu);
		atomic_fetch_sub(&svc->sync_waiters, 1);
	}
	if (posted)
		unpost_wait(&me);
	return rc;
}

int tw_service_cancel_sync(struct tw_service *svc, struct tw_service_timer *t)
{
	int result = tw__svc_cancel(svc, t), rc;

	if (result == TW_EINVAL || result == TW_EOWNER)
		return result;
	TW_TEST_POINT("cancel_sync.cancelled", t);
	rc = make_unreferenced(svc, t);
	return rc ? rc : result;
}

/*
 * The purgatory's completion (service_internal.h): stop a pending timer and
 * unlink it under wheel_mu, and never wait. Only from PENDING without
 * F_ENTRY: an expired timer's entry, or shutdown's list, still refers to
 * it, and waiting for either hangs a completer whose caller holds a lock
 * the reaper's current callback wants.
 * There the caller leaves the timer alone: its callback or its hand-back
 * runs and finds the work done. It does wait for one thing: an add between
 * its CAS and its push (drained below until F_INBOX is gone). wheel_mu is
 * safe to take under any user lock: only scan, count, shutdown and
 * cancel_sync hold it, and none of them runs user code or waits under it.
 */
int tw__service_stop_pending(struct tw_service *svc, struct tw_service_timer *t)
{
	uint32_t old = word_load(t);

	do {
		old = word_settled(t, old);
		if (word_state(old) != ST_PENDING || word_has(old, F_ENTRY) ||
		    owner_check(svc, old))
			return TW_SVC_IDLE;
	} while (!tr_stop_pending(t, &old));
	tw__svc_count_stopped(svc, !word_has(old, F_TOMB));
	TW_TEST_POINT("stop_pending.stopped", t);
	/* F_INBOX still set after our own drain: the add that set it has not
	 * pushed the timer yet (it does so right after its CAS, a few
	 * instructions, no lock, no user code). Returning now would let the
	 * caller free a timer that push is about to link (a use after free
	 * in the next drain). So drain until the
	 * push has happened; this waits for that add's next instructions,
	 * never for a callback. */
	for (;;) {
		pthread_mutex_lock(&svc->wheel_mu);
		/* Usually the timer was applied long ago (F_INBOX down) and
		 * there is nothing to wait for: no drain, which would visit
		 * every inbox. */
		if (!word_has(word_load(t), F_INBOX))
			break;
		tw__svc_drain_inboxes(svc);
		if (!word_has(word_load(t), F_INBOX))
			break;
		pthread_mutex_unlock(&svc->wheel_mu);
		TW_TEST_POINT("stop_pending.inbox", t);
		sched_yield();
	}
	tw__svc_unlink_stopped(svc, t);
	pthread_mutex_unlock(&svc->wheel_mu);
	return TW_SVC_STOPPED;
}
