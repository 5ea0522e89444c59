/* SPDX-License-Identifier: MIT */
/*
 * A cancel never stops another service's timer, and cancel_sync's
 * TW_EDEADLK comes for a ring of waits across services and hand_back
 * functions, and only for a ring: promises of service.h, each forced
 * through the library's test points (tests/support/stop_points.h): a
 * thread is parked at one step of the protocol, the other side acts, and
 * the outcome is checked against the header's sentence: a cancel on the
 * wrong service racing a timer's first add (it never stops another
 * service's timer: TW_SVC_IDLE before the add's claim, TW_EOWNER after
 * it), a hand_back that cancel_syncs another pending timer,
 * cancel_sync's TW_EDEADLK for a ring of waits across services and through
 * hand_back functions -- and only for a ring --, and destroy from a
 * callback. Nothing is timed: a bound of seconds only turns a hang into a
 * failure, and a hang ends the binary -- so one test can be run alone by
 * naming it:
 *   service_cancels_across_services test_cancel_sync_ring_of_two_services
 * Reinit during a run, one poll running everything due and a periodic
 * timer freed by its own callback are in runs_and_reinits.c.
 */
#define _POSIX_C_SOURCE 200809L

#include "forced_jobs_quiet.h"

/* ---- a cancel on the wrong service, racing the timer's first add ---- */

struct canceller {
	struct tw_service *svc;
	struct tw_service_timer *t;
	bool sync;
	int result;
};

static void *cancel_thread(void *arg)
{
	struct canceller *c = arg;

	c->result = c->sync ? tw_service_cancel_sync(c->svc, c->t)
			    : tw_service_cancel(c->svc, c->t);
	return NULL;
}

struct adder {
	struct tw_service *svc;
	struct tw_service_timer *t;
	int result;
};

static void *add_thread(void *arg)
{
	struct adder *ad = arg;

	ad->result = tw_service_add(ad->svc, ad->t, 2000);
	return NULL;
}

/*
 * service.h, tw_service_cancel(): "TW_EOWNER (it belongs to another
 * service: the owner is set once, by the first add, so a cancel never
 * stops another service's timer, even one whose first add races it;
 * nothing changed)".
 * Forced: A's first add of a fresh timer is parked at point -- before its
 * claim ("add.claiming": the timer has no owner yet) or right after it
 * ("add.claimed": A owns it, it is not filed yet) -- while a cancel (or
 * cancel_sync) on B runs to its end: TW_SVC_IDLE before the claim (a
 * timer never added has nothing to stop, and nothing to wait for),
 * TW_EOWNER after it; never TW_SVC_STOPPED, and never a wait. The add then
 * goes on: the timer is A's and pending in A's wheel only, and ends in one
 * of A's ways (it runs, or A's shutdown hands it back); B counts nothing.
 */
static void cancel_on_the_wrong_service(bool sync, const char *point,
					int expected)
{
	struct tw_service *a = service(true, 0), *b = service(true, 0);
	struct job j;
	struct canceller c = { b, NULL, sync, -1000 };
	struct adder ad = { a, NULL, -1000 };
	struct sp_thread adding, cancelling;
	struct tw_service_stats sa, sb;
	int parked;

	job_init(&j);
	c.t = ad.t = &j.t;
	parked = sp_arm(point, &j.t);
	sp_spawn(&adding, add_thread, &ad);
	CHECK(sp_wait(parked, &adding.done));
	sp_spawn(&cancelling, cancel_thread, &c);
	sp_join(&cancelling, sync ? "cancel_sync on the wrong service"
				  : "cancel on the wrong service");
	CHECK_EQ(c.result, expected);
	sp_release(parked);
	sp_join(&adding, "the first add");
	CHECK_EQ(ad.result, TW_OK);
	/* Nothing changed: A's, pending. */
	CHECK(tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_count(a), 1);
	CHECK_EQ(tw_service_count(b), 0);
	CHECK_EQ(tw_service_cancel(b, &j.t), TW_EOWNER);
	if (!sync) {
		/* It runs in A ... */
		atomic_store(&virtual_now, 2000);
		CHECK_EQ(tw_service_poll(a), 1);
		CHECK_EQ(atomic_load(&j.runs), 1);
		CHECK_EQ(tw_service_shutdown(a, NULL, NULL), 0);
	} else {
		/* ... or A's shutdown hands it back. */
		CHECK_EQ(tw_service_shutdown(a, NULL, NULL), 1);
		CHECK_EQ(atomic_load(&j.runs), 0);
	}
	CHECK_EQ(tw_service_poll(b), 0);
	CHECK_EQ(tw_service_shutdown(b, NULL, NULL), 0);
	tw_service_stats(a, &sa);
	tw_service_stats(b, &sb);
	CHECK_EQ(sa.added, 1);
	CHECK_EQ(sa.ran, sync ? 0 : 1);
	CHECK_EQ(sa.stopped, 0);
	CHECK_EQ(sa.handed_back, sync ? 1 : 0);
	check_exactly_once(a);
	CHECK_EQ(sb.added, 0);
	CHECK_EQ(sb.ran, 0);
	CHECK_EQ(sb.stopped, 0);
	CHECK_EQ(sb.handed_back, 0);
	tw_service_destroy(a);
	tw_service_destroy(b);
}

static void test_cancel_on_the_wrong_service_before_the_claim_is_idle(void)
{
	cancel_on_the_wrong_service(false, "add.claiming", TW_SVC_IDLE);
}

static void test_cancel_sync_on_the_wrong_service_before_the_claim_is_idle(void)
{
	cancel_on_the_wrong_service(true, "add.claiming", TW_SVC_IDLE);
}

static void test_cancel_on_the_wrong_service_is_eowner(void)
{
	cancel_on_the_wrong_service(false, "add.claimed", TW_EOWNER);
}

static void test_cancel_sync_on_the_wrong_service_is_eowner(void)
{
	cancel_on_the_wrong_service(true, "add.claimed", TW_EOWNER);
}

/* ---- a hand_back that cancel_syncs another pending timer ---- */

struct pair {
	struct tw_service *svc;
	struct job *x, *y;
	bool free_other;          /* free it (ASan) or poison it (any build) */
	struct job *other;        /* what the first hand_back cancelled */
	int calls;
	int result;
};

static void hand_back_cancels_the_other(struct tw_service_timer *t, void *arg)
{
	struct pair *p = arg;

	if (p->calls++)
		return; /* handed back after all: the checks say so */
	p->other = t == &p->x->t ? p->y : p->x;
	p->result = tw_service_cancel_sync(p->svc, &p->other->t);
	if (p->result != TW_SVC_STOPPED)
		return; /* not ours to free */
	/* cancel_sync said it may be freed: from here the service may not
	 * touch it, not even to hand it back. */
	if (p->free_other) {
		free(p->other);
	} else {
		memset(p->other, POISON, sizeof(*p->other));
	}
}

struct down {
	struct tw_service *svc;
	struct pair *pair;
	int64_t result;
};

static void *shutdown_thread(void *arg)
{
	struct down *d = arg;

	d->result = tw_service_shutdown(d->svc, hand_back_cancels_the_other,
					d->pair);
	return NULL;
}

/*
 * service.h, tw_service_cancel_sync(): "Any thread, callbacks and
 * hand_back included"; afterwards "the timer may be freed".
 * Forced: two timers pending at shutdown; the hand_back of whichever comes
 * first cancel_syncs the other, which waits on its shard's hand-back list
 * and is still pending there. The call stops it (TW_SVC_STOPPED) at once,
 * with no wait for this same thread, the timer is not handed back, and the
 * hand_back frees it. (A cancel_sync from another thread of the timer
 * being handed back waits for its hand_back: cancel_sync_and_teardown.c's
 * test_cancel_sync_waits_for_shutdowns_hand_back.)
 */
static void hand_back_cancel_syncs_another(bool free_other)
{
	struct tw_service *svc = service(true, 0);
	struct job *x = malloc(sizeof(*x)), *y = malloc(sizeof(*y));
	struct pair p = { svc, x, y, free_other, NULL, 0, -1000 };
	struct down d = { svc, &p, -1000 };
	struct sp_thread th;
	struct tw_service_stats st;

	job_init(x);
	job_init(y);
	CHECK_EQ(tw_service_add(svc, &x->t, 5000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &y->t, 5000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 0); /* both in the wheel */
	sp_spawn(&th, shutdown_thread, &d);
	sp_join(&th, "shutdown whose hand_back cancel_syncs another timer");
	CHECK_EQ(p.result, TW_SVC_STOPPED);
	CHECK_EQ(p.calls, 1);
	CHECK_EQ(d.result, 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 2);
	CHECK_EQ(st.ran, 0);
	CHECK_EQ(st.handed_back, 1);
	CHECK_EQ(st.stopped, 1);
	check_exactly_once(svc);
	if (p.result == TW_SVC_STOPPED && !free_other)
		CHECK(all_poison(p.other, sizeof(*p.other)));
	/* The one handed back is the owner's again. */
	if (p.other) {
		struct job *kept = p.other == x ? y : x;

		CHECK(!tw_service_timer_pending(&kept->t));
		CHECK_EQ(tw_service_cancel_sync(svc, &kept->t), TW_SVC_IDLE);
		free(kept);
	}
	if (p.result != TW_SVC_STOPPED || !free_other)
		free(p.other);
	tw_service_destroy(svc);
}

static void test_hand_back_cancel_syncs_another_pending_timer(void)
{
	hand_back_cancel_syncs_another(false);
}

/* The same, freeing the stopped timer: ASan sees any later touch. */
static void test_hand_back_cancel_syncs_and_frees_another_pending_timer(void)
{
	hand_back_cancel_syncs_another(true);
}

/* ---- a cancel_sync ring across services ---- */

static atomic_int ring_met;
static int ring_size;

/* Every callback of the ring is running before any of them cancels: the
 * ring is closed, not a chain that one of them could just wait out. */
static void meet_then_cancel_next(struct tw_service *svc, struct job *self)
{
	(void)svc;
	atomic_fetch_add(&ring_met, 1);
	while (atomic_load(&ring_met) < ring_size)
		sched_yield();
	atomic_store(&self->result,
		     tw_service_cancel_sync(self->other_svc, &self->other->t));
}

/*
 * service.h, tw_service_cancel_sync(): "A cycle -- callbacks of timers A
 * and B cancel_sync B and A at the same time, or any longer ring -- would
 * wait for ever. At least one of the callbacks in it gets TW_EDEADLK
 * instead." Nothing there limits it to one service.
 * Forced: n services, one timer each; timer i's callback waits until all n
 * callbacks run, then cancel_syncs timer i+1 in service i+1 (the last one
 * the first). Each waits for a callback of another service, and the waits
 * close a ring: at least one gets TW_EDEADLK and the others TW_EDEADLK or
 * TW_SVC_RUNNING (they waited for a callback that ended).
 * executors 0: each service is polled from its own thread, which runs the
 * callback; executors 1: one poll queues it, the executor runs it.
 */
static void cancel_sync_ring(int n, unsigned executors)
{
	struct tw_service *svc[3];
	struct job jobs[3];
	struct poller pl[3];
	struct sp_thread th[3];
	int deadlocks = 0;

	atomic_store(&ring_met, 0);
	ring_size = n;
	for (int i = 0; i < n; i++) {
		svc[i] = service(true, executors);
		job_init(&jobs[i]);
		jobs[i].action = meet_then_cancel_next;
	}
	for (int i = 0; i < n; i++) {
		jobs[i].other = &jobs[(i + 1) % n];
		jobs[i].other_svc = svc[(i + 1) % n];
		CHECK_EQ(tw_service_add(svc[i], &jobs[i].t, 1000), TW_OK);
	}
	for (int i = 0; i < n; i++) {
		pl[i].svc = svc[i];
		pl[i].result = -1000;
		if (executors)
			CHECK_EQ(tw_service_poll(svc[i]), 1);
		else
			sp_spawn(&th[i], poll_thread, &pl[i]);
	}
	for (int i = 0; i < n; i++)
		WAIT_FOR(atomic_load(&jobs[i].finished),
			 "callbacks cancel_sync each other across services");
	for (int i = 0; i < n; i++) {
		int r = atomic_load(&jobs[i].result);

		if (!executors) {
			sp_join(&th[i], "poll");
			CHECK_EQ(pl[i].result, 1);
		}
		deadlocks += r == TW_EDEADLK;
		CHECK(r == TW_EDEADLK || r == TW_SVC_RUNNING);
	}
	CHECK(deadlocks >= 1);
	for (int i = 0; i < n; i++) {
		CHECK_EQ(tw_service_shutdown(svc[i], NULL, NULL), 0);
		CHECK_EQ(atomic_load(&jobs[i].runs), 1);
		check_exactly_once(svc[i]);
		tw_service_destroy(svc[i]);
	}
}

static void test_cancel_sync_ring_of_two_services(void)
{
	cancel_sync_ring(2, 0);
}

static void test_cancel_sync_ring_of_two_services_on_executors(void)
{
	cancel_sync_ring(2, 1);
}

static void test_cancel_sync_ring_of_three_services(void)
{
	cancel_sync_ring(3, 0);
}

/* ---- hand_back functions that cancel_sync across services ---- */

/*
 * Two services shut down at once, two pending timers each. Each
 * hand_back, on its first timer, waits until the other's holds its own,
 * then cancel_syncs a timer of the other service:
 *   RING  the one the other hand_back holds. Each waits for the other's
 *         hand_back to return: a ring of waits through hand_back functions
 *         (service.h: "of one service or across several (and hand_back
 *         functions in it)"). At least one gets TW_EDEADLK; the other
 *         TW_EDEADLK or, once the first returned, TW_SVC_IDLE (its timer
 *         was being handed back). Both timers of each service are handed
 *         back.
 *   LIST  the other service's second timer, still waiting on its shard's
 *         hand-back list: pending, so the cancel stops it (TW_SVC_STOPPED)
 *         at once. Nobody waits for anybody: no ring, and no TW_EDEADLK
 *         (only a real cycle gets it). Each shutdown hands one timer back.
 *         Each hand_back returns only once both calls have, so that
 *         neither shutdown moves on to the timer the other cancels.
 */
enum { RING, LIST };

static int hb_mode;
static struct tw_service *hb_svc[2];
static struct job hb_jobs[2][2];
static struct tw_service_timer *_Atomic hb_held[2];
static atomic_int hb_result[2];

static void hand_back_then_cancel_sync(struct tw_service_timer *t, void *arg)
{
	int me = (int)(intptr_t)arg, other = 1 - me;
	struct tw_service_timer *held, *target;

	if (atomic_load(&hb_held[me]))
		return;
	atomic_store(&hb_held[me], t);
	WAIT_FOR(atomic_load(&hb_held[other]), "the other hand_back");
	held = atomic_load(&hb_held[other]);
	if (hb_mode == RING)
		target = held;
	else
		target = held == &hb_jobs[other][0].t ? &hb_jobs[other][1].t
						     : &hb_jobs[other][0].t;
	atomic_store(&hb_result[me], tw_service_cancel_sync(hb_svc[other], target));
	if (hb_mode == LIST)
		WAIT_FOR(atomic_load(&hb_result[other]) != -1000,
			 "the other hand_back's cancel_sync");
}

static void *hand_back_shutdown(void *arg)
{
	int me = (int)(intptr_t)arg;

	return (void *)(intptr_t)tw_service_shutdown(hb_svc[me],
						     hand_back_then_cancel_sync, arg);
}

static void hand_backs_cancel_sync_across(int mode)
{
	struct sp_thread th[2];
	int deadlocks = 0;

	hb_mode = mode;
	for (int i = 0; i < 2; i++) {
		hb_svc[i] = service(true, 0);
		atomic_store(&hb_held[i], NULL);
		atomic_store(&hb_result[i], -1000);
		for (int j = 0; j < 2; j++) {
			job_init(&hb_jobs[i][j]);
			CHECK_EQ(tw_service_add(hb_svc[i], &hb_jobs[i][j].t, 5000), TW_OK);
		}
	}
	for (intptr_t i = 0; i < 2; i++)
		sp_spawn(&th[i], hand_back_shutdown, (void *)i);
	for (int i = 0; i < 2; i++)
		sp_join(&th[i], "two shutdowns whose hand_backs cancel_sync across");
	for (int i = 0; i < 2; i++) {
		struct tw_service_stats st;
		int r = atomic_load(&hb_result[i]);

		tw_service_stats(hb_svc[i], &st);
		if (mode == RING) {
			CHECK(r == TW_EDEADLK || r == TW_SVC_IDLE);
			CHECK_EQ(st.handed_back, 2);
		} else {
			CHECK_EQ(r, TW_SVC_STOPPED);
			CHECK_EQ(st.handed_back, 1);
			CHECK_EQ(st.stopped, 1);
		}
		deadlocks += r == TW_EDEADLK;
		check_exactly_once(hb_svc[i]);
	}
	if (mode == RING)
		CHECK(deadlocks >= 1);
	else
		CHECK_EQ(deadlocks, 0);
	for (int i = 0; i < 2; i++)
		tw_service_destroy(hb_svc[i]);
}

static void test_cancel_sync_ring_through_hand_backs(void)
{
	hand_backs_cancel_sync_across(RING);
}

static void test_cancel_sync_across_hand_back_lists_stops_at_once(void)
{
	hand_backs_cancel_sync_across(LIST);
}

/*
 * service.h, tw_service_cancel_sync(): TW_EOWNER, "a cancel never stops
 * another service's timer" -- nor touches it.
 * Forced: cancel_sync(B, t) of a fresh t has found nothing to stop (no
 * owner: TW_SVC_IDLE) and is parked before its wait
 * ("cancel_sync.cancelled"); A adds t, files it and cancels it. The
 * parked call then looks again: it must see A's id in the word and leave
 * the timer alone -- no wait, no lock of B's taken as if it held t, no
 * count of B's or A's changed -- and A's count and accounting stay right.
 */
static void *cancel_sync_on(void *arg)
{
	struct job *j = arg;

	atomic_store(&j->result, tw_service_cancel_sync((struct tw_service *)j->other_svc,
						     &j->t));
	return NULL;
}

static void test_cancel_sync_on_the_wrong_service_leaves_the_timer_alone(void)
{
	struct tw_service *a = service(true, 0), *b = service(true, 0);
	struct job j, more[3];
	struct sp_thread th;
	int slot;

	job_init(&j);
	j.other_svc = b;
	slot = sp_arm("cancel_sync.cancelled", &j.t);
	sp_spawn(&th, cancel_sync_on, &j);
	CHECK(sp_wait(slot, &th.done));
	CHECK_EQ(tw_service_add(a, &j.t, 5000), TW_OK);
	CHECK_EQ(tw_service_poll(a), 0);            /* in A's wheel */
	CHECK_EQ(tw_service_cancel(a, &j.t), TW_SVC_STOPPED);
	sp_release(slot);
	sp_join(&th, "cancel_sync on the wrong service");
	CHECK_EQ(atomic_load(&j.result), TW_SVC_IDLE);
	atomic_store(&virtual_now, 6000);
	CHECK_EQ(tw_service_poll(a), 0);            /* nothing left to run */
	for (int i = 0; i < 3; i++) {
		job_init(&more[i]);
		CHECK_EQ(tw_service_add(a, &more[i].t, 9000), TW_OK);
	}
	CHECK_EQ(tw_service_count(a), 3);
	CHECK_EQ(tw_service_count(b), 0);
	CHECK_EQ(tw_service_cancel_sync(a, &j.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_shutdown(a, NULL, NULL), 3);
	check_exactly_once(a);
	tw_service_destroy(a);
	tw_service_destroy(b);
}

/*
 * service.h: tw_service_destroy() from a callback: "nothing happens". A
 * destroy that freed the service under the poll that ran the callback
 * would be a use-after-free (only ASan sees it every time; make sanitize
 * runs this test). The service goes on, and is destroyed from outside.
 */
static void destroy_own_service(struct tw_service *svc, struct job *self)
{
	(void)self;
	tw_service_destroy(svc);
}

static void test_destroy_from_a_callback_does_nothing(void)
{
	struct tw_service *svc = service(true, 0);
	struct job j, k;

	job_init(&j);
	j.action = destroy_own_service;
	job_init(&k);
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&j.runs), 1);
	CHECK_EQ(tw_service_add(svc, &k.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&k.runs), 1);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

int main(int argc, char **argv)
{
	only = argc > 1 ? argv[1] : NULL;
	sp_install();
	RUN_SELECTED(test_cancel_on_the_wrong_service_before_the_claim_is_idle);
	RUN_SELECTED(test_cancel_sync_on_the_wrong_service_before_the_claim_is_idle);
	RUN_SELECTED(test_cancel_on_the_wrong_service_is_eowner);
	RUN_SELECTED(test_cancel_sync_on_the_wrong_service_is_eowner);
	RUN_SELECTED(test_hand_back_cancel_syncs_another_pending_timer);
	RUN_SELECTED(test_hand_back_cancel_syncs_and_frees_another_pending_timer);
	RUN_SELECTED(test_cancel_sync_ring_of_two_services);
	RUN_SELECTED(test_cancel_sync_ring_of_two_services_on_executors);
	RUN_SELECTED(test_cancel_sync_ring_of_three_services);
	RUN_SELECTED(test_cancel_sync_ring_through_hand_backs);
	RUN_SELECTED(test_cancel_sync_across_hand_back_lists_stops_at_once);
	RUN_SELECTED(test_cancel_sync_on_the_wrong_service_leaves_the_timer_alone);
	RUN_SELECTED(test_destroy_from_a_callback_does_nothing);
	if (tests_passed + tests_failed == 0) {
		fprintf(stderr, "no test named %s\n", only);
		return 2;
	}
	return check_report();
}
