/* SPDX-License-Identifier: MIT */
/*
 * sync.c — cancel_sync and timer_shutdown: stop the timer as a cancel
 * does (timer.c), then wait until the runner its last expiry went to no
 * longer runs it; after that nothing in the service refers to it. Three
 * rules keep the wait finite:
 *   - it never waits for the caller's own callback;
 *   - it returns as soon as the timer is no longer IDLE: someone added it
 *     again, and what follows belongs to that add (timer_shutdown refuses
 *     such adds, F_SHUT, so its wait always ends with the timer free);
 *   - each callback that waits posts what it waits for in one
 *     process-wide list, so a callback about to close a ring of waits --
 *     within one service or across several -- sees it and gets
 *     TW_EDEADLK.
 * The wait is a condition variable that every run's end broadcasts when
 * someone waits; a waiter also looks again every millisecond, which
 * covers the one race a run's end without a fence can lose (it cleared
 * its mark as the waiter counted itself).
 */
#include "../posix.h"

#include "core.h"

/*
 * The cancel_sync waits of callbacks, of every service in the process: a
 * callback of one service may cancel_sync a timer of another, so a ring
 * of waits may cross services. A record per waiting callback, on its
 * stack, in one list under one mutex: a record is added and the ring
 * looked for under that mutex, so of two callbacks closing a ring the
 * later sees the earlier's record. Only callbacks about to wait come here.
 */
struct sync_wait {
	struct sync_wait *next;
	struct tw_service *run_svc; /* whose callback (or hand-back) this
				       thread runs, as which runner */
	unsigned run_runner;
	struct tw_service *target_svc;
	const struct tw_service_timer *target; /* what it waits for */
	unsigned target_runner;     /* the runner that runs it */
};

static pthread_mutex_t sync_waits_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sync_wait *sync_waits;

/* Whether a waiter's stop of t has been followed by an add of t in its
 * service (t pending, or running again): that waiter returns at its
 * next look. A timer initialised since (by a hand_back) is waited for by
 * its runner's mark alone (tw__svc_wait_unreferenced), so it says no. */
static bool added_since(const struct tw_service *svc,
			const struct tw_service_timer *t)
{
	uint32_t word = word_load(t);

	return word_owner(word) && !owner_check(svc, word) &&
	       word_state(word) != ST_IDLE;
}

/*
 * Under sync_waits_mu: whether me's wait closes a ring. Follow it: the
 * runner that runs me's target, the record of the thread that is that
 * runner, the runner that runs what it waits for, ... until a runner is
 * me's own. Each hop is looked at now: a target no longer marked by its
 * runner is no edge (its waiter returns at its next look), nor is one
 * added again since its waiter's stop (pending, or running again: the
 * waiter returns at its next look too, as service.h promises, though its
 * record still names the runner). A service on
 * the path is alive, as a thread waits in it or runs one of its
 * callbacks, and a posted target may not be freed while its waiter is
 * inside the call.
 */
static bool closes_ring(const struct sync_wait *me)
{
	const struct sync_wait *cur = me;

	for (unsigned hop = 0; hop <= 4096; hop++) {
		const struct sync_wait *r;

		if (running_of(&cur->target_svc->runners[cur->target_runner]) !=
			    cur->target ||
		    added_since(cur->target_svc, cur->target))
			return false;
		if (cur->target_svc == me->run_svc &&
		    cur->target_runner == me->run_runner)
			return true;
		for (r = sync_waits; r; r = r->next)
			if (r->run_svc == cur->target_svc &&
			    r->run_runner == cur->target_runner)
				break;
		if (!r)
			return false;
		cur = r;
	}
	return false; /* longer than any ring of live threads */
}

/* Post me (once) with the runner its target is on now, and look for a
 * ring, atomically with respect to every other waiter. */
static bool wait_closes_ring(struct sync_wait *me, unsigned target_runner,
			     bool *posted)
{
	bool ring;

	pthread_mutex_lock(&sync_waits_mu);
	me->target_runner = target_runner;
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

/* Whether one of svc's runners marks t (running it, or handing it back),
 * and which. */
static bool marked_by_a_runner(struct tw_service *svc,
			       const struct tw_service_timer *t, unsigned *runner)
{
	for (unsigned i = 0; i < svc->nrunners; i++)
		if (running_of(&svc->runners[i]) == t) {
			*runner = i;
			return true;
		}
	return false;
}

/*
 * Wait until t's last run is over (not the caller's own), or t was added
 * again; TW_EDEADLK instead of closing a cycle of callbacks waiting for
 * each other. A run found over clears F_RAN (settle), so later calls need
 * not look at the runner. A timer initialised meanwhile -- by the
 * hand_back this waits for, which service.h allows, and maybe added to
 * another service since -- is no longer this service's: its word is not
 * read again, nor settled, nor its runner taken for one of ours; the wait
 * goes on by this service's runners' marks alone, until none names it.
 */
int tw__svc_wait_unreferenced(struct tw_service *svc, struct tw_service_timer *t,
			      bool shut)
{
	/* A copy, not a pointer: UBSan's null check of a pointer to an
	 * initial-exec thread-local tests flags that the linker's
	 * relaxation of the address's add leaves stale (gcc 12, an
	 * optimised build with -fsanitize=undefined: a report, and an
	 * abort, on every call). Nothing here changes the thread's state. */
	const struct tw__svc_thread self = THIS_THREAD;
	bool own = self.current == t && self.current_svc == svc;
	struct sync_wait me = { NULL, self.current_svc, self.runner, svc, t, 0 };
	uint32_t word = word_load(t);
	struct shard *s = NULL;
	bool posted = false, ours;
	int rc = TW_OK;

	(void)shut;
	/* The cancel before this found the timer ours: a word that is not
	 * ours now was initialised since, maybe by the hand_back this is to
	 * wait for (a timer never added here has no runner's mark either). */
	ours = word_owner(word) && !owner_check(svc, word) &&
	       word_shard(word) < svc->nshards;
	if (ours)
		s = shard_of(svc, word);
	for (;;) {
		unsigned runner = 0;
		bool going, locked = ours;

		if (locked) {
			shard_lock(s);
			word = word_load(t);
			ours = word_owner(word) && !owner_check(svc, word);
		}
		if (!ours) {
			/* Initialised since (see above). */
			going = marked_by_a_runner(svc, t, &runner);
		} else if (word_state(word) != ST_IDLE) {
			/* Added again since our stop: that add's now. */
			shard_unlock(s);
			break;
		} else {
			runner = t->runner;
			going = run_going_on(svc, t, word);
			if (!going && word_has(word, F_RAN))
				word_set(t, word, word & ~(uint32_t)F_RAN, TR_settle);
		}
		if (locked)
			shard_unlock(s);
		if (!going || (own && runner == self.runner))
			break;
		if (self.current && wait_closes_ring(&me, runner, &posted)) {
			rc = TW_EDEADLK;
			break;
		}
		TW_TEST_POINT("cancel_sync.wait", t);
		/* Counted before the look, under idle_mu: a run's end that
		 * clears its mark after this look usually sees the count and
		 * broadcasts (it reads it without a fence: when it misses,
		 * the millisecond's look again finds the mark gone). */
		pthread_mutex_lock(&svc->idle_mu);
		bump(&svc->sync_waiters, 1);
		if (running_of(&svc->runners[runner]) == t)
			tw__svc_wait_for_ns(&svc->idle_cv, &svc->idle_mu, 1000000);
		bump(&svc->sync_waiters, -1);
		pthread_mutex_unlock(&svc->idle_mu);
	}
	if (posted)
		unpost_wait(&me);
	return rc;
}

static int stop_and_wait(struct tw_service *svc, struct tw_service_timer *t,
			 bool shut)
{
	int result = tw__svc_cancel(svc, t, shut,
				    shut ? "tw_service_timer_shutdown"
					 : "tw_service_cancel_sync"), rc;

	if (result == TW_EINVAL || result == TW_EOWNER)
		return result;
	TW_TEST_POINT("cancel_sync.cancelled", t);
	rc = tw__svc_wait_unreferenced(svc, t, shut);
	/* A ring does not hide the stop: the caller counts the add it
	 * ended, as it would a TW_SVC_STOPPED, and knows not to free. */
	if (rc == TW_EDEADLK && result == TW_SVC_STOPPED)
		return TW_EDEADLK_STOPPED;
	return rc ? rc : result;
}

int tw_service_cancel_sync(struct tw_service *svc, struct tw_service_timer *t)
{
	return stop_and_wait(svc, t, false);
}

int tw_service_timer_shutdown(struct tw_service *svc, struct tw_service_timer *t)
{
	return stop_and_wait(svc, t, true);
}
