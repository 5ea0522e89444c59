/* SPDX-License-Identifier: MIT */
/*
 * Issue 28, items 4 to 9: the promises of service.h that a hostile review
 * broke, each forced through the library's test points
 * (tests/stop_points.h): a thread is parked inside the window, the other
 * side acts, and the outcome is checked against the header's sentence.
 * Every test here failed, or deadlocked, on the code before its fix
 * (f6fd10a); the two periodic tests that free their timer only under
 * ASan, and test_reinit_while_apply_places_the_timer only under TSan, as
 * their comments say. Nothing is timed: a bound of seconds only turns a
 * hang into a failure, and a hang ends the binary -- so one test can be
 * run alone by naming it:
 *   test_promises_service test_cancel_sync_ring_of_two_services
 */
#define _POSIX_C_SOURCE 200809L

#include "stop_points.h"

#include "check.h"
#include "virtual_clock.h"


struct job {
	struct tw_service_timer t;
	atomic_int runs;
	atomic_int finished;
	atomic_int result;
	struct job *other;             /* what its callback cancels ... */
	struct tw_service *other_svc;  /* ... and in which service */
	void (*action)(struct tw_service *svc, struct job *self);
};

static void job_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, t);

	atomic_fetch_add(&j->runs, 1);
	if (j->action)
		j->action(svc, j);
	atomic_store(&j->finished, 1);
}

static void job_init(struct job *j)
{
	memset(j, 0, sizeof(*j));
	tw_service_timer_init(&j->t, job_run);
	atomic_store(&j->result, -1000);
}

/* Every add ended in exactly one of the three ways (after shutdown). */
static void check_exactly_once(struct tw_service *svc)
{
	struct tw_service_stats st;

	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
}

/*
 * A park the test point harness cannot see through: the thread spins on a
 * relaxed flag instead of waiting on sp_mu. sp_arm's mutex would order the
 * parked thread's later reads after everything the test did meanwhile, and
 * ThreadSanitizer would then see no race where the library has one; with
 * relaxed flags only the library's own synchronisation orders them.
 */
static const char *quiet_point;
static const void *quiet_obj;
static atomic_int quiet_arrived, quiet_go;

static void quiet_hook(const char *point, const void *obj)
{
	if (obj == quiet_obj && strcmp(point, quiet_point) == 0 &&
	    !atomic_load_explicit(&quiet_go, memory_order_relaxed)) {
		atomic_store_explicit(&quiet_arrived, 1, memory_order_relaxed);
		while (!atomic_load_explicit(&quiet_go, memory_order_relaxed))
			sched_yield();
		return;
	}
	sp_hook(point, obj);
}

static void quiet_arm(const char *point, const void *obj)
{
	quiet_point = point;
	quiet_obj = obj;
	atomic_store(&quiet_arrived, 0);
	atomic_store(&quiet_go, 0);
	tw__test_set_hook(quiet_hook); /* publishes point and obj */
}

static void quiet_wait(const char *what)
{
	WAIT_FOR(atomic_load_explicit(&quiet_arrived, memory_order_relaxed), what);
}

static void quiet_release(void)
{
	atomic_store_explicit(&quiet_go, 1, memory_order_relaxed);
}

/* After the parked thread was joined (the join orders everything). */
static void quiet_disarm(void)
{
	sp_install();
}

/* ---- 4: a cancel on the wrong service ---- */

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

/*
 * service.h, tw_service_cancel(): "TW_EOWNER (it belongs to another
 * service)"; the owner is "claimed by the first add's CAS, so that a timer
 * is never in two services' wheels".
 * Forced: a cancel on B of a fresh timer is parked after its owner check
 * (cancel.owner_checked, nobody owned it yet); A adds the timer; the
 * cancel goes on. It used to take the state word to IDLE without looking
 * at the owner again: TW_SVC_STOPPED for A's timer, which then ended in
 * none of A's three ways and was counted stopped by B. With cancel_sync
 * the caller waited for ever for B to see a timer only A's wheel holds.
 */
static void cancel_on_the_wrong_service(bool sync)
{
	struct tw_service *a = service(true, 0), *b = service(true, 0);
	struct job j;
	struct canceller c = { b, NULL, sync, -1000 };
	struct sp_thread th;
	struct tw_service_stats sa, sb;
	int checked;

	job_init(&j);
	c.t = &j.t;
	checked = sp_arm("cancel.owner_checked", &j.t);
	sp_spawn(&th, cancel_thread, &c);
	CHECK(sp_wait(checked, &th.done));
	CHECK_EQ(tw_service_add(a, &j.t, 2000), TW_OK);
	sp_release(checked);
	sp_join(&th, sync ? "cancel_sync on the wrong service"
			  : "cancel on the wrong service");
	CHECK_EQ(c.result, TW_EOWNER);
	/* Nothing changed: still A's, still pending. */
	CHECK(tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_count(a), 1);
	CHECK_EQ(tw_service_count(b), 0);
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

static void test_cancel_on_the_wrong_service_is_eowner(void)
{
	cancel_on_the_wrong_service(false);
}

static void test_cancel_sync_on_the_wrong_service_is_eowner(void)
{
	cancel_on_the_wrong_service(true);
}

/* ---- 5: a hand_back that cancel_syncs another pending timer ---- */

#define POISON 0x84 /* a state word of 0x84848484 reads as RUNNING (4) */

static bool all_poison(const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != POISON)
			return false;
	return true;
}

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
 * first cancel_syncs the other, which shutdown has already moved to its
 * private hand-back list. That call waited for a flag only this same
 * thread would clear after hand_back returned: shutdown hung. Now it stops
 * the other timer (TW_SVC_STOPPED), which is then not handed back, and the
 * hand_back frees it. (A cancel_sync from another thread of the timer
 * being handed back still waits for its hand_back: test_races.c's
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

/* ---- 6: a cancel_sync ring across services ---- */

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
 * the first). Each service saw a callback of another service as an
 * outsider, so nobody saw the ring and all n waited for ever. Now at least
 * one gets TW_EDEADLK and the others TW_EDEADLK or TW_SVC_RUNNING (they
 * waited for a callback that ended).
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

/* ---- 7: reinit right after a plain cancel ---- */

static atomic_int f1_runs, f2_runs;

static void f1(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	atomic_fetch_add(&f1_runs, 1);
}

static void f2(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	atomic_fetch_add(&f2_runs, 1);
}

static int reinit_one_shot_f2(void *t)
{
	return tw_service_timer_reinit(t, f2);
}

static int reinit_periodic_f2_500(void *p)
{
	return tw_service_periodic_reinit(p, f2, 500);
}

/* A poll on another thread, parked at point with t; there the owner
 * cancels t (the cancel must return cancelled) and reinits it. Returns
 * the poll's result. */
static int64_t cancel_and_reinit_while_polling(struct tw_service *svc,
					       const char *point,
					       struct tw_service_timer *t,
					       int cancelled,
					       int (*reinit)(void *), void *arg)
{
	struct poller pl = { svc, -1000 };
	struct sp_thread th;

	quiet_arm(point, t);
	sp_spawn(&th, poll_thread, &pl);
	quiet_wait("the poller never reached the point");
	CHECK_EQ(tw_service_cancel(svc, t), cancelled);
	CHECK_EQ(reinit(arg), TW_OK);
	quiet_release();
	sp_join(&th, "poll");
	quiet_disarm();
	return pl.result;
}

/*
 * service.h, tw_service_timer_reinit(): "Safe right after a plain
 * tw_service_cancel()".
 * Forced: the poller has taken EXPIRED away from t (execute.claimed) and
 * not yet read its callback. The owner cancels t (TW_SVC_RUNNING: its run
 * is under way) and reinits it with f2. The run read the callback after
 * its CAS, so f2 ran for f1's expiry, and the owner's plain store raced
 * the poller's plain load (TSan). Now the run that started keeps the
 * callback it expired with: f1 runs, and f2 on the next add.
 */
static void test_reinit_after_cancel_keeps_the_started_runs_callback(void)
{
	struct tw_service *svc = service(true, 0);
	struct tw_service_timer t;

	atomic_store(&f1_runs, 0);
	atomic_store(&f2_runs, 0);
	tw_service_timer_init(&t, f1);
	CHECK_EQ(tw_service_add(svc, &t, 1000), TW_OK);
	CHECK_EQ(cancel_and_reinit_while_polling(svc, "execute.claimed", &t,
						 TW_SVC_RUNNING,
						 reinit_one_shot_f2, &t),
		 1);
	CHECK_EQ(atomic_load(&f1_runs), 1);
	CHECK_EQ(atomic_load(&f2_runs), 0);
	CHECK_EQ(tw_service_add(svc, &t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&f1_runs), 1);
	CHECK_EQ(atomic_load(&f2_runs), 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

/*
 * The same for a periodic timer, whose run also read its period after the
 * CAS: tw_service_periodic_reinit() "with a new period too" gave the old
 * expiry the new callback and the new period. Now f1 runs once (the cancel
 * stops the re-arm), and after the next add f2 runs on the new period.
 */
static void test_periodic_reinit_after_cancel_keeps_the_started_runs_callback(void)
{
	struct tw_service *svc = service(true, 0);
	struct tw_service_periodic p;

	atomic_store(&f1_runs, 0);
	atomic_store(&f2_runs, 0);
	tw_service_periodic_init(&p, f1, 100);
	CHECK_EQ(tw_service_add(svc, &p.timer, 1000), TW_OK);
	CHECK_EQ(cancel_and_reinit_while_polling(svc, "execute.claimed", &p.timer,
						 TW_SVC_RUNNING,
						 reinit_periodic_f2_500, &p),
		 1);
	CHECK_EQ(atomic_load(&f1_runs), 1);
	CHECK_EQ(atomic_load(&f2_runs), 0);
	CHECK(!tw_service_timer_pending(&p.timer)); /* the cancel held */
	CHECK_EQ(tw_service_add(svc, &p.timer, 2000), TW_OK);
	atomic_store(&virtual_now, 2000);
	CHECK_EQ(tw_service_poll(svc), 1);
	atomic_store(&virtual_now, 2400);
	CHECK_EQ(tw_service_poll(svc), 0); /* not on the old period */
	atomic_store(&virtual_now, 2500);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&f1_runs), 1);
	CHECK_EQ(atomic_load(&f2_runs), 2);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

/*
 * service.h, tw_service_timer_reinit(): "Safe right after a plain
 * tw_service_cancel()" -- also while the wheel's owner is placing the
 * timer.
 * Forced: the poller drains a just-added t and has taken F_INBOX away
 * (apply.cleared), not yet placed it in the wheel; the owner cancels t
 * (plain) and reinits it with f2; the poller places it (a tombstone now).
 * The placing read the wheel timer's fn, which the reinit wrote with a
 * plain store: a data race that changes no outcome, so ThreadSanitizer
 * is the only witness -- only a TSan build of this test can fail on it.
 * (The read went in e40264f, with the test point; the test fails under
 * TSan on that commit with its src/wheel.c taken back to 932e480.) Every
 * build checks the outcome: t does not run, and a later add runs f2 once.
 */
static void test_reinit_while_apply_places_the_timer(void)
{
	struct tw_service *svc = service(true, 0);
	struct tw_service_timer t;

	atomic_store(&f1_runs, 0);
	atomic_store(&f2_runs, 0);
	tw_service_timer_init(&t, f1);
	CHECK_EQ(tw_service_add(svc, &t, 5000), TW_OK);
	CHECK_EQ(cancel_and_reinit_while_polling(svc, "apply.cleared", &t,
						 TW_SVC_STOPPED,
						 reinit_one_shot_f2, &t),
		 0);
	CHECK_EQ(tw_service_count(svc), 0);
	/* Re-added while its tombstone may still be linked. */
	CHECK_EQ(tw_service_add(svc, &t, 5000), TW_OK);
	atomic_store(&virtual_now, 5000);
	CHECK_EQ(tw_service_poll(svc), 1);
	atomic_store(&virtual_now, 9000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(atomic_load(&f1_runs), 0);
	CHECK_EQ(atomic_load(&f2_runs), 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

/* ---- 8: one poll runs everything due ---- */

#define MANY 100000

static atomic_int many_runs;

static void count_run(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	atomic_fetch_add_explicit(&many_runs, 1, memory_order_relaxed);
}

/*
 * service.h, tw_service_poll(): "run (or queue for the executors)
 * everything due at the clock's current time".
 * Forced: 100,000 one-shot timers due at the same time, the clock moved
 * past it, one poll. An advance handed at most 65,536 timers to dispatch
 * (the batch was capped then); the poll ran those and left 34,464 for a
 * later poll at the same clock reading, which a manual service's caller
 * has no reason to make. Now the one poll dispatches all of them.
 */
static void one_poll_runs_everything_due(unsigned executors)
{
	struct tw_service *svc = service(true, executors);
	struct tw_service_timer *timers = calloc(MANY, sizeof(*timers));
	struct tw_service_stats st;
	int64_t n;

	atomic_store(&many_runs, 0);
	for (int i = 0; i < MANY; i++) {
		tw_service_timer_init(&timers[i], count_run);
		CHECK_EQ(tw_service_add(svc, &timers[i], 5000), TW_OK);
	}
	atomic_store(&virtual_now, 5001);
	n = tw_service_poll(svc);
	CHECK_EQ(n, MANY);
	if (executors)
		WAIT_FOR(atomic_load(&many_runs) >= n,
			 "the executors never ran what the poll queued");
	CHECK_EQ(atomic_load(&many_runs), MANY);
	CHECK_EQ(tw_service_count(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.ran, MANY);
	check_exactly_once(svc);
	tw_service_destroy(svc);
	free(timers);
}

static void test_one_poll_runs_everything_due(void)
{
	one_poll_runs_everything_due(0);
}

static void test_one_poll_queues_everything_due(void)
{
	one_poll_runs_everything_due(2);
}

/* ---- 9: a periodic timer made one-shot in its own callback ---- */

enum { KEEP_PERIOD, DROP_PERIOD };
enum { POISON_IT, FREE_IT };

static int self_reinit, self_free;
static atomic_int self_runs, self_cancel, self_reinit_rc;

/* Its last act: the memory is gone (FREE_IT) or overwritten (POISON_IT). */
static void one_shot_and_free(struct tw_service *svc, struct tw_service_timer *t)
{
	struct tw_service_periodic *p =
		tw_container_of(t, struct tw_service_periodic, timer);

	atomic_fetch_add(&self_runs, 1);
	atomic_store(&self_cancel, tw_service_cancel(svc, t));
	if (self_reinit == DROP_PERIOD)
		atomic_store(&self_reinit_rc,
			     tw_service_periodic_reinit(p, one_shot_and_free, 0));
	if (self_free == FREE_IT)
		free(p);
	else
		memset(p, POISON, sizeof(*p));
}

/*
 * service.h: "Inside its own callback, a timer may free itself as its
 * last act (nothing in the service touches it afterwards)"; a periodic
 * timer that cancelled itself (and, with DROP_PERIOD, took its period to
 * 0: "<= 0: it behaves as a one-shot") is over as a periodic timer.
 * Forced: the callback cancels itself (TW_SVC_RUNNING), maybe reinits its
 * period to 0 (0), then overwrites or frees the whole struct. The service
 * re-armed it on the period it read before the callback: it loaded the
 * state word, and POISON makes that word read RUNNING, so the re-arm went
 * on to write the freed timer and push it (ASan: heap-use-after-free in
 * the FREE_IT variants). Now nothing touches it: the bytes are all still
 * the poison, it ran once, and nothing was re-added.
 */
static void periodic_frees_itself(int reinit, int how)
{
	struct tw_service *svc = service(true, 0);
	struct tw_service_periodic *p = malloc(sizeof(*p));
	struct tw_service_stats st;

	self_reinit = reinit;
	self_free = how;
	atomic_store(&self_runs, 0);
	atomic_store(&self_cancel, -1000);
	atomic_store(&self_reinit_rc, -1000);
	tw_service_periodic_init(p, one_shot_and_free, 100);
	CHECK_EQ(tw_service_add(svc, &p->timer, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&self_runs), 1);
	CHECK_EQ(atomic_load(&self_cancel), TW_SVC_RUNNING);
	if (reinit == DROP_PERIOD)
		CHECK_EQ(atomic_load(&self_reinit_rc), TW_OK);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 1);
	CHECK_EQ(st.ran, 1);
	if (how == POISON_IT) {
		bool intact = all_poison(p, sizeof(*p));

		CHECK(intact);
		if (!intact) {
			/* The service holds garbage as a timer now: polling
			 * or shutting it down would follow its links. */
			fprintf(stderr, "the service wrote the timer after its "
				"callback's last act; leaving it alone\n");
			return;
		}
		free(p);
	}
	atomic_store(&virtual_now, 1100);
	CHECK_EQ(tw_service_poll(svc), 0);
	atomic_store(&virtual_now, 1200);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_count(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 1);
	CHECK_EQ(st.ran, 1);
	CHECK_EQ(st.stopped, 0);
	CHECK_EQ(st.handed_back, 0);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

static void test_periodic_made_one_shot_overwrites_itself(void)
{
	periodic_frees_itself(DROP_PERIOD, POISON_IT);
}

static void test_periodic_made_one_shot_frees_itself(void)
{
	periodic_frees_itself(DROP_PERIOD, FREE_IT);
}

static void test_periodic_cancelled_in_its_callback_overwrites_itself(void)
{
	periodic_frees_itself(KEEP_PERIOD, POISON_IT);
}

static void test_periodic_cancelled_in_its_callback_frees_itself(void)
{
	periodic_frees_itself(KEEP_PERIOD, FREE_IT);
}

/* ---- found by the project's own review of the fixed headers ---- */

/*
 * service.h, tw_service_cancel_sync(): a ring "of one service or across
 * several (and hand_back functions in it)" gets TW_EDEADLK.
 * Forced: two services shut down at once, two pending timers each. Each
 * hand_back, on its first timer, waits until the other's holds its own,
 * then cancel_syncs the other service's second timer, still on that
 * service's hand-back list: each waits for the other's list to move on.
 * The ring check took an entry without a running slot for the scanner's,
 * and both hung. Now one of them gets TW_EDEADLK (its cancel took
 * effect), the other TW_SVC_STOPPED once the first returned, and each
 * shutdown hands one timer back.
 */
static struct tw_service *hb_svc[2];
static struct job hb_jobs[2][2];
static struct tw_service_timer *_Atomic hb_held[2];
static atomic_int hb_result[2];

static void hand_back_then_ring(struct tw_service_timer *t, void *arg)
{
	int me = (int)(intptr_t)arg, other = 1 - me;
	struct tw_service_timer *theirs;

	if (atomic_load(&hb_held[me]))
		return;
	atomic_store(&hb_held[me], t);
	WAIT_FOR(atomic_load(&hb_held[other]), "the other hand_back");
	theirs = atomic_load(&hb_held[other]) == &hb_jobs[other][0].t
			 ? &hb_jobs[other][1].t
			 : &hb_jobs[other][0].t;
	atomic_store(&hb_result[me], tw_service_cancel_sync(hb_svc[other], theirs));
}

static void *hand_back_ring_shutdown(void *arg)
{
	int me = (int)(intptr_t)arg;

	return (void *)(intptr_t)tw_service_shutdown(hb_svc[me], hand_back_then_ring,
						     arg);
}

static void test_cancel_sync_ring_through_hand_back_lists(void)
{
	struct sp_thread th[2];
	int deadlocks = 0;

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
		sp_spawn(&th[i], hand_back_ring_shutdown, (void *)i);
	for (int i = 0; i < 2; i++)
		sp_join(&th[i], "two shutdowns whose hand_backs cancel_sync across");
	for (int i = 0; i < 2; i++) {
		int r = atomic_load(&hb_result[i]);

		CHECK(r == TW_EDEADLK || r == TW_SVC_STOPPED);
		deadlocks += r == TW_EDEADLK;
		check_exactly_once(hb_svc[i]);
	}
	CHECK(deadlocks >= 1);
	for (int i = 0; i < 2; i++)
		tw_service_destroy(hb_svc[i]);
}

/*
 * service.h, tw_service_cancel_sync(): TW_EOWNER, "a cancel never stops
 * another service's timer" -- nor touches it.
 * Forced: cancel_sync(B, t) of a fresh t has found it IDLE (parked at
 * cancel_sync.cancelled); A adds t, places it and cancels it: a tombstone
 * in A's wheel. The parked call then unflagged A's tombstone under B's
 * lock and counted it as B's, and A's tw_service_count() stayed one short
 * for good. Now it sees A's id in the word and leaves the timer alone.
 */
static void *cancel_sync_on(void *arg)
{
	struct job *j = arg;

	atomic_store(&j->result, tw_service_cancel_sync((struct tw_service *)j->other_svc,
						     &j->t));
	return NULL;
}

static void test_cancel_sync_on_the_wrong_service_leaves_its_tombstone(void)
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
	CHECK_EQ(tw_service_cancel(a, &j.t), TW_SVC_STOPPED); /* a tombstone */
	sp_release(slot);
	sp_join(&th, "cancel_sync on the wrong service");
	CHECK_EQ(atomic_load(&j.result), TW_SVC_IDLE);
	atomic_store(&virtual_now, 6000);
	CHECK_EQ(tw_service_poll(a), 0);            /* the tombstone goes */
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
 * service.h: tw_service_destroy() from a callback: "nothing happens".
 * It freed the service under the poll that ran the callback (a
 * use-after-free: only ASan sees it every time; make sanitize runs this
 * test). Now the service goes on, and is destroyed from outside.
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

static const char *only; /* argv[1]: run just this test */

#define RUN_SELECTED(test)                                                  \
	do {                                                                \
		if (!only || strcmp(only, #test) == 0)                      \
			RUN(test);                                          \
	} while (0)

int main(int argc, char **argv)
{
	only = argc > 1 ? argv[1] : NULL;
	sp_install();
	RUN_SELECTED(test_cancel_on_the_wrong_service_is_eowner);
	RUN_SELECTED(test_cancel_sync_on_the_wrong_service_is_eowner);
	RUN_SELECTED(test_hand_back_cancel_syncs_another_pending_timer);
	RUN_SELECTED(test_hand_back_cancel_syncs_and_frees_another_pending_timer);
	RUN_SELECTED(test_cancel_sync_ring_of_two_services);
	RUN_SELECTED(test_cancel_sync_ring_of_two_services_on_executors);
	RUN_SELECTED(test_cancel_sync_ring_of_three_services);
	RUN_SELECTED(test_reinit_after_cancel_keeps_the_started_runs_callback);
	RUN_SELECTED(test_periodic_reinit_after_cancel_keeps_the_started_runs_callback);
	RUN_SELECTED(test_reinit_while_apply_places_the_timer);
	RUN_SELECTED(test_one_poll_runs_everything_due);
	RUN_SELECTED(test_one_poll_queues_everything_due);
	RUN_SELECTED(test_periodic_made_one_shot_overwrites_itself);
	RUN_SELECTED(test_periodic_made_one_shot_frees_itself);
	RUN_SELECTED(test_periodic_cancelled_in_its_callback_overwrites_itself);
	RUN_SELECTED(test_periodic_cancelled_in_its_callback_frees_itself);
	RUN_SELECTED(test_cancel_sync_ring_through_hand_back_lists);
	RUN_SELECTED(test_cancel_sync_on_the_wrong_service_leaves_its_tombstone);
	RUN_SELECTED(test_destroy_from_a_callback_does_nothing);
	if (tests_passed + tests_failed == 0) {
		fprintf(stderr, "no test named %s\n", only);
		return 2;
	}
	return check_report();
}
