/* SPDX-License-Identifier: MIT */
/*
 * producer.c — the side of the service any thread calls: add, add_in,
 * reschedule, the plain cancel, an executor's re-arm of a periodic timer,
 * and what they share: the inboxes (a lock-free stack per group of
 * threads, with the counts shutdown waits on) and the kick that wakes the
 * reaper. A producer never takes wheel_mu: it changes the state word
 * (state.h) and, when the wheel must follow, pushes the timer on its
 * inbox for the wheel owner (owner.c) to apply.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>

#include "core.h"

static _Thread_local unsigned tls_producer; /* 0: not yet */
static atomic_uint producers_seen;

/* ---- waking the reaper ---- */

/*
 * A manual service has no reaper: the thread that polls it sleeps in its
 * own event loop for what tw_service_timeout() said, and what can make
 * that answer too late is an add it did not see -- from another thread, or
 * a periodic timer's re-arm on an executor (the poll only queued its run).
 * Such a producer calls the loop's wake function, once per question:
 * tw_service_next_expiry() clears kick_pending before it drains the
 * inboxes (seq_cst, as the reaper's clear is before its drain), so a push
 * the drain missed comes after the clear, its load of kick_pending reads
 * the clear or a later kicker's true, and that kicker's wake comes after
 * the clear, so after the loop last looked at its wake-up (the loop reads
 * its eventfd before it asks). The manual deadline stays INT64_MAX: every
 * add takes this path, and the load keeps the common case to one read of
 * a shared line. The polling thread itself does not wake its own loop: it
 * asks tw_service_next_expiry() after its poll, which sees its adds. An
 * executor's re-arm owes the wake until its run's slot let go (execute):
 * called inside the run, a slow wake function kept the slot marked run,
 * so a cancel said RUNNING after the callback returned and a cancel_sync
 * waited for the user's function (the ninth reading, B2).
 */
static void wake_loop(struct tw_service *svc)
{
	tw_service_wake_fn *fn = atomic_load_explicit(&svc->wake, memory_order_acquire);

	if (!fn || THIS_THREAD.scanning == svc || atomic_load(&svc->kick_pending) ||
	    atomic_exchange(&svc->kick_pending, true))
		return;
	if (THIS_THREAD.in_run_tail) {
		THIS_THREAD.wake_owed = svc; /* execute() calls it, slot let go */
		return;
	}
	tw__svc_call_wake(svc);
}

void tw__svc_call_wake(struct tw_service *svc)
{
	tw_service_wake_fn *fn = atomic_load_explicit(&svc->wake, memory_order_acquire);

	if (fn)
		fn(atomic_load_explicit(&svc->wake_arg, memory_order_relaxed));
}

/*
 * kick_pending saves producers the reaper's mutex: once one kick is on its
 * way, the rest return here. That is only sound if the reaper clears
 * kick_pending and kicked together, under reaper_mu: then a kick_pending
 * that is set always has a kicker who will set kicked (or already did,
 * since the reaper last cleared it), so the reaper cannot sleep through
 * it. (Clearing kick_pending outside the lock would let a kick fall between
 * the two clears: kicked erased, kick_pending left set, and no kick would
 * ever get through again.)
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
	if (svc->cfg.manual) {
		wake_loop(svc);
		return;
	}
	if (atomic_load(&svc->kick_pending) ||
	    atomic_exchange(&svc->kick_pending, true))
		return;
	pthread_mutex_lock(&svc->reaper_mu);
	svc->kicked = true;
	pthread_cond_signal(&svc->reaper_cv);
	pthread_mutex_unlock(&svc->reaper_mu);
}

void tw__svc_kick(struct tw_service *svc)
{
	kick(svc);
}

void tw_service_kick(struct tw_service *svc)
{
	if (svc)
		kick(svc);
}

int tw_service_set_wake(struct tw_service *svc, tw_service_wake_fn *wake,
			void *arg)
{
	if (!svc)
		return TW_EINVAL_BECAUSE("tw_service_set_wake", "%s",
					 "the service is NULL");
	if (!svc->cfg.manual)
		return TW_EINVAL_BECAUSE("tw_service_set_wake", "%s",
					 "only a manual service has a loop to "
					 "wake (a reaper wakes itself)");
	/* arg first: a kick that loads the new function reads its arg. */
	atomic_store_explicit(&svc->wake_arg, arg, memory_order_relaxed);
	atomic_store_explicit(&svc->wake, wake, memory_order_release);
	return TW_OK;
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

/* An add has ended in a stop (a cancel, a reschedule, stop_pending). A
 * new tombstone is counted apart: tw_service_count() leaves out the ones
 * still in the wheel. */
void tw__svc_count_stopped(struct tw_service *svc, bool new_tomb)
{
	struct inbox *ib = my_inbox(svc);

	atomic_fetch_add_explicit(new_tomb ? &ib->tombed : &ib->stopped, 1,
				  memory_order_relaxed);
}

/* ---- add, reschedule, re-arm ---- */

/* What a cancel (or a reschedule) that took the timer out of state s
 * reports. */
static int stop_result(const struct tw_service *svc,
		       const struct tw_service_timer *t, unsigned s)
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

/* ADDING -> PENDING at due with a window of slack ticks, pushed if this
 * publish set F_INBOX; kicks a reaper that would sleep past the window's
 * end (one that wakes inside it fires the timer then: no kick, and no
 * extra wake-up). */
static void publish(struct tw_service *svc, struct inbox *ib,
		    struct tw_service_timer *t, int64_t due, uint32_t slack)
{
	uint32_t old;

	/* Both before the CAS that publishes: apply reads them only after
	 * it took F_INBOX down, and an entry whose pair it read torn is
	 * pushed again by the publish that tore it (owner.c, apply). */
	__atomic_store_n(&t->next_due, due, __ATOMIC_RELAXED);
	__atomic_store_n(&t->next_slack, slack, __ATOMIC_RELAXED);
	old = tr_publish(t);
	TW_TEST_POINT("add.published", t);
	if (!word_has(old, F_INBOX))
		push(ib, t);
	if (tw__svc_window_end(svc, due, slack) < atomic_load(&svc->deadline))
		kick(svc);
}

static int add_or_reschedule(struct tw_service *svc, struct tw_service_timer *t,
			     int64_t due, uint32_t slack, bool reschedule,
			     const char *call)
{
	struct inbox *ib;
	uint32_t old;
	unsigned s;
	int rc;

	(void)call; /* TW_EINVAL_BECAUSE drops its arguments in release */
	if (!svc || !t || !callback_of(t))
		return TW_EINVAL_BECAUSE(call, "%s", !svc ? "the service is NULL"
					 : !t ? "the timer is NULL"
					 : "the timer has no callback "
					   "(tw_service_timer_init(t, fn) with "
					   "a non-NULL fn)");
	old = word_load(t);
	rc = owner_check(svc, old);
	if (rc)
		return rc;
	ib = enter(svc);
	if (!ib)
		return TW_ESHUTDOWN;
	for (;;) {
		old = word_settled(t, old);
		/* The owner is checked in the word the CAS compares: two
		 * services adding the same fresh timer at once cannot both
		 * win (with a check and a separate store, both did). */
		rc = owner_check(svc, old);
		if (rc) {
			leave_unchanged(ib);
			return rc;
		}
		s = word_state(old);
		if (!reschedule && (s == ST_PENDING || s == ST_EXPIRED)) {
			leave_unchanged(ib);
			return TW_EBUSY;
		}
		TW_TEST_POINT("add.owner_checked", t);
		if (tr_add(t, &old, svc->owner_bits))
			break;
	}
	rc = reschedule ? stop_result(svc, t, s) : TW_OK;
	if (rc == TW_SVC_STOPPED)
		atomic_fetch_add_explicit(&ib->stopped, 1, memory_order_relaxed);
	publish(svc, ib, t, due, slack);
	leave_added(svc, ib);
	return rc;
}

int tw_service_add(struct tw_service *svc, struct tw_service_timer *t, int64_t due)
{
	return add_or_reschedule(svc, t, due, 0, false, "tw_service_add");
}

/* now + delay (a negative delay: now), or TW_EOVERFLOW past INT64_MAX. */
static int due_in(struct tw_service *svc, int64_t delay, int64_t *due)
{
	int64_t now = clock_now(svc);

	/* The wheel's rule (tw_wheel_add_in): a sum past either end of the
	 * int64 range is refused, not clamped. A delay <= 0 is due now. */
	if ((delay > 0 && now > INT64_MAX - delay) ||
	    (delay < 0 && now < INT64_MIN - delay))
		return TW_EOVERFLOW;
	*due = delay > 0 ? now + delay : now;
	return TW_OK;
}

int tw_service_add_in(struct tw_service *svc, struct tw_service_timer *t,
		      int64_t delay)
{
	int64_t due;
	int rc;

	if (!svc)
		return TW_EINVAL;
	rc = due_in(svc, delay, &due);
	return rc ? rc : add_or_reschedule(svc, t, due, 0, false,
					   "tw_service_add_in");
}

int tw_service_reschedule(struct tw_service *svc, struct tw_service_timer *t,
			  int64_t due)
{
	return add_or_reschedule(svc, t, due, 0, true, "tw_service_reschedule");
}

/* A window's width in whole ticks, rounded down (it may only narrow) and
 * capped at what the timer's 32 bits hold; or TW_EINVAL. *slack is written
 * on every path, so a caller never reads it unset: the compiler cannot see
 * that TW_EINVAL_BECAUSE (a call into debug.c in the debug build) never
 * returns 0. */
static int window_slack(const struct tw_service *svc, const char *call,
			int64_t earliest, int64_t latest, uint32_t *slack)
{
	uint64_t ticks;

	*slack = 0;
	(void)call; /* TW_EINVAL_BECAUSE drops its arguments in release */
	if (!svc)
		return TW_EINVAL_BECAUSE(call, "%s", "the service is NULL");
	if (latest < earliest)
		return TW_EINVAL_BECAUSE(call, "the window ends (%lld) before it "
					 "starts (%lld)", (long long)latest,
					 (long long)earliest);
	if (latest > earliest && svc->cfg.mode == TW_MODE_KAFKA)
		return TW_EINVAL_BECAUSE(call, "%s", "a kafka-mode service files "
					 "timers as Kafka does, which has no "
					 "windows: use TW_MODE_EXACT");
	/* The difference of two int64_t with latest >= earliest fits a
	 * uint64_t; in int64_t it could overflow. */
	ticks = ((uint64_t)latest - (uint64_t)earliest) / (uint64_t)svc->cfg.tick;
	*slack = ticks > UINT32_MAX ? UINT32_MAX : (uint32_t)ticks;
	return TW_OK;
}

int tw_service_add_range(struct tw_service *svc, struct tw_service_timer *t,
			 int64_t earliest, int64_t latest)
{
	uint32_t slack;
	int rc = window_slack(svc, "tw_service_add_range", earliest, latest, &slack);

	return rc ? rc : add_or_reschedule(svc, t, earliest, slack, false,
					  "tw_service_add_range");
}

int tw__service_add_in_range(struct tw_service *svc, struct tw_service_timer *t,
			     int64_t delay, int64_t tolerance)
{
	/* The purgatory's op has a tolerance >= 0 (tw_op_set_tolerance
	 * checked it). */
	int64_t earliest;
	int rc = due_in(svc, delay, &earliest);

	if (rc)
		return rc;
	return tw_service_add_range(svc, t, earliest,
				    earliest > INT64_MAX - tolerance ? INT64_MAX
								     : earliest + tolerance);
}

int tw_service_reschedule_range(struct tw_service *svc,
				struct tw_service_timer *t, int64_t earliest,
				int64_t latest)
{
	uint32_t slack;
	int rc = window_slack(svc, "tw_service_reschedule_range", earliest,
			      latest, &slack);

	return rc ? rc : add_or_reschedule(svc, t, earliest, slack, true,
					  "tw_service_reschedule_range");
}

/* An executor, after a periodic timer's callback returned: RUNNING ->
 * PENDING at due, unless a cancel or an add got there first. Once the
 * service is closing, or when the next period would end past INT64_MAX
 * (last: no such time to run at, and a due time held at INT64_MAX would
 * run at every poll once the clock reads it), the run was the timer's
 * last (RUNNING -> IDLE). */
void tw__svc_rearm(struct tw_service *svc, struct tw_service_timer *t,
		   int64_t due, bool last)
{
	uint32_t old = word_load(t);

	for (;;) {
		bool closing = last || atomic_load(&svc->closing);

		if (word_state(old) != ST_RUNNING)
			return; /* a cancel or an add won */
		/* Each failed CAS reloads old: look at its state again. */
		if (tr_rearm(t, &old, closing)) {
			if (closing)
				return; /* its run was its end */
			break;
		}
	}
	/* Its window stays: only an add or a reschedule writes one. */
	publish(svc, my_inbox(svc), t, due,
		__atomic_load_n(&t->next_slack, __ATOMIC_RELAXED));
	COUNT(svc, added); /* an executor's: no producer's inbox count */
}

/* ---- cancel ---- */

/*
 * Take the timer to IDLE with one CAS. A pending timer stays where it is
 * in the wheel, a tombstone (F_TOMB), until the wheel owner meets it: at
 * its due time, when an add places it again, or in cancel_sync, which
 * unlinks it before it returns. Nothing is pushed and no inbox is
 * entered: the caller may not free the timer before cancel_sync anyway,
 * and the wheel owner skips a timer that is not PENDING. This is what
 * makes a plain cancel one CAS and one counter (model/service.pml checks
 * the tombstone protocol, docs/model.md).
 */
static int cancel(struct tw_service *svc, struct tw_service_timer *t)
{
	uint32_t old;
	unsigned s;
	int result;

	if (!svc || !t)
		return TW_EINVAL;
	old = word_load(t);
	result = owner_check(svc, old);
	if (result)
		return result;
	TW_TEST_POINT("cancel.owner_checked", t);
	/* Read again: an early answer above, the decision below (the word
	 * may have a new owner by now). */
	old = word_load(t);
	for (;;) {
		old = word_settled(t, old);
		/* The owner rides in the word the CAS compares, so checking
		 * it here makes check and change one step: an add on another
		 * service landing after the caller's first check is seen
		 * (else this cancel would stop the other service's timer, and
		 * neither service's accounting would balance). */
		if (owner_check(svc, old))
			return TW_EOWNER;
		s = word_state(old);
		if (s == ST_IDLE || tr_cancel(t, &old))
			break;
	}
	result = stop_result(svc, t, s);
	if (result == TW_SVC_STOPPED)
		tw__svc_count_stopped(svc, s == ST_PENDING && !word_has(old, F_TOMB));
	if (THIS_THREAD.current == t && THIS_THREAD.current_svc == svc)
		THIS_THREAD.rearm = false; /* its run is its last: it may free itself */
	return result;
}

int tw__svc_cancel(struct tw_service *svc, struct tw_service_timer *t)
{
	return cancel(svc, t);
}

int tw_service_cancel(struct tw_service *svc, struct tw_service_timer *t)
{
	return cancel(svc, t);
}
