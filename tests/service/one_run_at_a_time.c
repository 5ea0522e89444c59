/* SPDX-License-Identifier: MIT */
/*
 * A timer's callback never runs beside itself: one run at a time
 * (service.h), forced through the test points
 * (tests/support/stop_points.h) as in cancel_sync_and_teardown.c. With
 * executors, an add, a reschedule or a re-add of a timer whose callback
 * is running -- from another thread or from the callback -- is deferred
 * to that run's end
 * (src/service/core.h): the timer is pending, in no wheel, and no poll
 * dispatches it. The run's end runs it at once, on the same thread, when
 * it is due, and files it in the wheel when it is not; a periodic timer's
 * next period follows what the add asked for. A runner whose claim lost to
 * a reschedule files the add its running mark drew. A cancel or
 * cancel_sync from the callback stops a deferred add; a callback may free
 * its timer as its last act. tw_service_timer_shutdown() of a running
 * timer refuses the callback's re-add and returns once the run is over;
 * from the timer's own callback it does not wait, and the callback may
 * free the timer.
 */
#define _POSIX_C_SOURCE 200809L

#include "forced_jobs.h"

/* ---- a timer's callback never runs beside itself ---- */

/*
 * A timer whose runs the test holds: run n returns only once go reaches n.
 * The counts live apart from the timer, which some tests free from its
 * callback.
 */
struct runs {
	atomic_int started, finished;
	atomic_int inside, overlaps; /* runs under way; a run that found one */
	atomic_int go;
	atomic_int again;            /* a run's end found an add deferred to it */
	atomic_int over;             /* runs over ("run.over") */
	atomic_int resched_rc;       /* run 1's reschedule of itself */
	atomic_int cancel_rc;        /* run 2's cancel of itself */
	atomic_int freed;
	int64_t resched_to;          /* run 1 reschedules itself there (0: no) */
	bool cancel_on_run2;         /* run 2 cancels its timer and frees it */
	int64_t at[8];               /* the clock when run n + 1 started */
	pthread_t thread[8];         /* the thread that ran run n + 1 */
};

struct pjob {
	struct tw_service_periodic p;
	struct runs *r;
};

static void pjob_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct pjob *j = tw_container_of(t, struct pjob, p.timer);
	struct runs *r = j->r;
	int n = atomic_fetch_add(&r->started, 1) + 1;

	if (atomic_fetch_add(&r->inside, 1))
		atomic_fetch_add(&r->overlaps, 1);
	if (n <= 8) {
		r->at[n - 1] = atomic_load(&virtual_now);
		r->thread[n - 1] = pthread_self();
	}
	if (n == 1 && r->resched_to)
		atomic_store(&r->resched_rc,
			     tw_service_reschedule(svc, t, r->resched_to));
	if (n == 2 && r->cancel_on_run2) {
		/* Its last act: stop itself and free itself (service.h). */
		atomic_store(&r->cancel_rc, tw_service_cancel(svc, t));
		atomic_fetch_sub(&r->inside, 1);
		atomic_fetch_add(&r->finished, 1);
		memset(j, 0x5a, sizeof(*j));
		free(j);
		atomic_store(&r->freed, 1);
		return;
	}
	while (atomic_load(&r->go) < n)
		sched_yield();
	atomic_fetch_sub(&r->inside, 1);
	atomic_fetch_add(&r->finished, 1);
}

/* period 0: a one-shot timer (service.h: "<= 0: it behaves as a
 * one-shot"). */
static struct pjob *pjob_new(struct runs *r, int64_t period)
{
	struct pjob *j = malloc(sizeof(*j));

	CHECK(j != NULL);
	tw_service_periodic_init(&j->p, pjob_run, period);
	j->r = r;
	return j;
}

static void note_again(const void *obj, void *arg)
{
	(void)obj;
	atomic_fetch_add(&((struct runs *)arg)->again, 1);
}

static void note_over(const void *obj, void *arg)
{
	(void)obj;
	atomic_fetch_add(&((struct runs *)arg)->over, 1);
}

/*
 * A periodic run's re-arm comes after its callback returned, on the
 * executor's thread: the callback's last store (r->finished) says nothing
 * of it. A loaded machine (ThreadSanitizer, a busy CI host) may hold that
 * thread between the two, so a test waits for the timer to be back in the
 * wheel before it moves the clock.
 */
static void wait_for_the_rearm(struct tw_service *svc)
{
	WAIT_FOR(tw_service_count(svc) >= 1, "the run's re-arm never came");
	CHECK_EQ(tw_service_count(svc), 1);
}

/* Run 1 of j (due 1000) under way on an executor; then j rescheduled to
 * d2 (from the test, or from run 1 itself) and the clock moved to d2. The
 * reschedule is deferred to run 1's end: j is pending, in no wheel, and
 * a poll at d2 dispatches nothing. Run 1 has not ended. */
static void deferred_during_run_1(struct tw_service *svc, struct pjob *j,
				  struct runs *r, int64_t d2, bool from_callback)
{
	if (from_callback)
		r->resched_to = d2;
	CHECK_EQ(tw_service_add(svc, &j->p.timer, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r->started) == 1, "run 1 never started");
	if (from_callback) {
		WAIT_FOR(atomic_load(&r->resched_rc) != 0,
			 "run 1 never rescheduled itself");
		CHECK_EQ(atomic_load(&r->resched_rc), TW_SVC_RUNNING);
	} else {
		/* Its run is under way: the re-arm after it will not happen. */
		CHECK_EQ(tw_service_reschedule(svc, &j->p.timer, d2), TW_SVC_RUNNING);
	}
	CHECK(tw_service_timer_pending(&j->p.timer));
	CHECK_EQ(tw_service_count(svc), 0);
	atomic_store(&virtual_now, d2);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(atomic_load(&r->started), 1);
	CHECK_EQ(atomic_load(&r->overlaps), 0);
}

/*
 * A periodic timer (period 100, a run that lasts into the next, two
 * executors), rescheduled during run 1 to D1 + 50. The reschedule waits
 * for run 1 and then runs at once on its thread (run 1's end finds it
 * due); it replaced run 1's re-arm (TW_SVC_RUNNING: not re-armed), so the
 * runs are at 1050 and then every 100 from there: one per period, one at
 * a time -- never a second chain of runs beside the first.
 */
static void reschedule_during_a_run(bool from_callback)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 100);

	deferred_during_run_1(svc, j, &r, 1050, from_callback);
	atomic_store(&r.go, 100); /* run 1 returns, then run 2 runs */
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 2 never ran");
	CHECK_EQ(r.at[1], 1050);
	CHECK(pthread_equal(r.thread[0], r.thread[1]));
	wait_for_the_rearm(svc);
	for (int k = 1; k <= 3; k++) {
		/* D1 + k * 100: nothing (the re-arm of run 1 was replaced) */
		atomic_store(&virtual_now, 1000 + 100 * k);
		CHECK_EQ(tw_service_poll(svc), 0);
		atomic_store(&virtual_now, 1050 + 100 * k);
		CHECK_EQ(tw_service_poll(svc), 1);
		WAIT_FOR(atomic_load(&r.finished) == 2 + k, "a period's run never ran");
		CHECK_EQ(atomic_load(&r.started), 2 + k);
		wait_for_the_rearm(svc);
	}
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	check_balanced(svc, 6, 5, 0);
	tw_service_destroy(svc);
	free(j);
}

static void test_a_reschedule_during_a_run_waits_for_the_run(void)
{
	reschedule_during_a_run(false);
}

static void test_a_reschedule_from_the_callback_waits_for_the_run(void)
{
	reschedule_during_a_run(true);
}

/*
 * Period 400, rescheduled during run 1 to D2 = D1 + 200. Run 2 runs
 * after run 1 returned, on its thread, and re-arms at D2 + 400 = 1600:
 * run 1's own re-arm (D1 + 400 = 1400) was replaced by the reschedule.
 */
static void test_a_reschedule_during_a_run_sets_the_next_period(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 400);

	deferred_during_run_1(svc, j, &r, 1200, false);
	atomic_store(&r.go, 1); /* run 1 returns first */
	WAIT_FOR(atomic_load(&r.finished) == 1, "run 1 never returned");
	WAIT_FOR(atomic_load(&r.started) == 2, "run 2 never ran");
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	atomic_store(&r.go, 2);
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 2 never returned");
	CHECK_EQ(r.at[1], 1200);
	CHECK(pthread_equal(r.thread[0], r.thread[1]));
	wait_for_the_rearm(svc);
	atomic_store(&r.go, 100);
	atomic_store(&virtual_now, 1400); /* D1 + 400 */
	CHECK_EQ(tw_service_poll(svc), 0);
	atomic_store(&virtual_now, 1600); /* D2 + 400 */
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.finished) == 3, "run 3 never ran");
	CHECK_EQ(r.at[2], 1600);
	wait_for_the_rearm(svc);
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	check_balanced(svc, 4, 3, 0);
	tw_service_destroy(svc);
	free(j);
}

/*
 * Run 2 -- the reschedule deferred to run 1's end, due then -- cancels
 * its own timer and frees it, as service.h allows. It runs after run 1
 * returned, on its thread, and nothing touches the timer after run 2's
 * free (ASan sees any touch): not run 2's end, not run 1's re-arm (the
 * reschedule replaced it), not a later poll.
 */
static void test_a_run_that_frees_its_timer_has_no_run_beside_it(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 100);

	r.cancel_on_run2 = true;
	deferred_during_run_1(svc, j, &r, 1000, false);
	CHECK_EQ(atomic_load(&r.freed), 0);
	atomic_store(&r.go, 1);
	WAIT_FOR(atomic_load(&r.freed), "run 2 never ran");
	CHECK_EQ(atomic_load(&r.cancel_rc), TW_SVC_RUNNING);
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 1 never returned");
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	CHECK(pthread_equal(r.thread[0], r.thread[1]));
	atomic_store(&virtual_now, 2000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 2, 2, 0);
	tw_service_destroy(svc);
}

/* ---- adds deferred to a run's end ---- */

/*
 * With two executors, another thread adds a one-shot timer, due now, while
 * its callback runs. The add is deferred: the timer is pending (a second
 * add is TW_EBUSY), in no wheel, and a poll dispatches nothing -- where the
 * other executor could have run it beside the run. When the run returns,
 * its end finds the add ("run.again") and runs the timer at once, on the
 * same thread, never beside the first run.
 */
static void test_an_add_from_another_thread_during_a_run_is_deferred(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 0);

	sp_on("run.again", &j->p.timer, note_again, &r);
	CHECK_EQ(tw_service_add(svc, &j->p.timer, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.started) == 1, "run 1 never started");
	CHECK(!tw_service_timer_pending(&j->p.timer));
	CHECK_EQ(tw_service_add(svc, &j->p.timer, 1000), TW_OK);
	CHECK(tw_service_timer_pending(&j->p.timer));
	CHECK_EQ(tw_service_add(svc, &j->p.timer, 1000), TW_EBUSY);
	CHECK_EQ(tw_service_count(svc), 0);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(atomic_load(&r.started), 1);
	CHECK_EQ(atomic_load(&r.again), 0);
	atomic_store(&r.go, 1);
	WAIT_FOR(atomic_load(&r.started) == 2, "the deferred add never ran");
	CHECK_EQ(atomic_load(&r.again), 1);
	CHECK_EQ(atomic_load(&r.finished), 1); /* run 1 was over */
	sp_on("run.over", &j->p.timer, note_over, &r); /* run 2's end */
	atomic_store(&r.go, 2);
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 2 never returned");
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	CHECK(pthread_equal(r.thread[0], r.thread[1]));
	CHECK_EQ(r.at[1], 1000);
	/* The run's end, not only its callback's last store (below). */
	WAIT_FOR(atomic_load(&r.over) == 1, "run 2 never ended");
	CHECK_EQ(tw_service_cancel_sync(svc, &j->p.timer), TW_SVC_IDLE);
	sp_forget("run.again", &j->p.timer);
	free(j);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 2, 2, 0);
	tw_service_destroy(svc);
}

/*
 * The same add, due at 1500: not due when the run returns (the clock at
 * 1000), so the run's end files it in the wheel, and it runs at 1500 --
 * not before, and once.
 */
static void test_a_deferred_add_not_due_at_the_runs_end_is_filed(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 0);

	sp_on("run.again", &j->p.timer, note_again, &r);
	/* One action a run's end (an action runs once). */
	sp_on("run.over", &j->p.timer, note_over, &r);
	sp_on("run.over", &j->p.timer, note_over, &r);
	CHECK_EQ(tw_service_add(svc, &j->p.timer, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.started) == 1, "run 1 never started");
	CHECK_EQ(tw_service_add(svc, &j->p.timer, 1500), TW_OK);
	CHECK(tw_service_timer_pending(&j->p.timer));
	CHECK_EQ(tw_service_count(svc), 0);
	atomic_store(&r.go, 100);
	WAIT_FOR(tw_service_count(svc) == 1, "the run's end never filed the add");
	CHECK_EQ(atomic_load(&r.again), 1);
	CHECK_EQ(atomic_load(&r.started), 1);
	CHECK(tw_service_timer_pending(&j->p.timer));
	atomic_store(&virtual_now, 1490);
	CHECK_EQ(tw_service_poll(svc), 0);
	atomic_store(&virtual_now, 1500);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.finished) == 2, "the filed add never ran");
	CHECK_EQ(r.at[1], 1500);
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	atomic_store(&virtual_now, 3000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(atomic_load(&r.started), 2);
	/* The callback's last store is not the run's end: a loaded machine
	 * may hold the executor between them, and cancel_sync would then
	 * find the run going on (TW_SVC_RUNNING). */
	WAIT_FOR(atomic_load(&r.over) == 2, "run 2 never ended");
	CHECK_EQ(tw_service_cancel_sync(svc, &j->p.timer), TW_SVC_IDLE);
	sp_forget("run.again", &j->p.timer);
	sp_forget("run.over", &j->p.timer);
	free(j);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 2, 2, 0);
	tw_service_destroy(svc);
}

/*
 * A one-shot timer re-added by its own callback, due now: the re-add
 * waits for the callback to return, then runs on its thread; a poll in
 * between dispatches nothing. Once both runs are over ("run.over" twice)
 * a cancel_sync has nothing to stop or wait for.
 */
static atomic_int os_started, os_inside, os_overlaps, os_go, os_readded;
static pthread_t os_thread[2];

static void oneshot_readd(struct tw_service *svc, struct tw_service_timer *t)
{
	int n = atomic_fetch_add(&os_started, 1) + 1;

	if (atomic_fetch_add(&os_inside, 1))
		atomic_fetch_add(&os_overlaps, 1);
	if (n <= 2)
		os_thread[n - 1] = pthread_self();
	if (n == 1) {
		CHECK_EQ(tw_service_add(svc, t, 1000), TW_OK);
		atomic_store(&os_readded, 1);
	}
	while (atomic_load(&os_go) < n)
		sched_yield();
	atomic_fetch_sub(&os_inside, 1);
}

static void test_a_one_shot_readded_by_its_callback_waits_for_it(void)
{
	struct tw_service *svc = service(true, 2);
	struct tw_service_timer t;
	struct runs r = { 0 };

	tw_service_timer_init(&t, oneshot_readd);
	sp_on("run.again", &t, note_again, &r);
	sp_on("run.over", &t, note_over, &r);
	sp_on("run.over", &t, note_over, &r);
	CHECK_EQ(tw_service_add(svc, &t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&os_readded), "run 1 never re-added it");
	CHECK(tw_service_timer_pending(&t));
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(atomic_load(&os_started), 1);
	atomic_store(&os_go, 2);
	WAIT_FOR(atomic_load(&os_started) == 2 && !atomic_load(&os_inside),
		 "the re-add never ran");
	CHECK_EQ(atomic_load(&os_overlaps), 0);
	CHECK(pthread_equal(os_thread[0], os_thread[1]));
	WAIT_FOR(atomic_load(&r.over) == 2, "a run never ended");
	CHECK_EQ(atomic_load(&r.again), 1);
	sp_forget("run.again", &t);
	sp_forget("run.over", &t);
	CHECK_EQ(tw_service_cancel_sync(svc, &t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 2, 2, 0);
	tw_service_destroy(svc);
}

/*
 * From its own callback, a cancel_sync of a timer whose reschedule (by
 * another thread, during this run) waits for the run's end stops that add
 * (TW_SVC_STOPPED) instead of waiting for itself; the run's end then finds
 * nothing to file or run.
 */
static atomic_int cs_rc;

static void cancel_sync_itself_in_run_1(struct tw_service *svc,
					struct tw_service_timer *t)
{
	struct runs *r = ((struct pjob *)tw_container_of(
		t, struct pjob, p.timer))->r;
	int n = atomic_fetch_add(&r->started, 1) + 1;

	while (atomic_load(&r->go) < n)
		sched_yield();
	if (n == 1)
		atomic_store(&cs_rc, tw_service_cancel_sync(svc, t));
	atomic_fetch_add(&r->finished, 1);
}

static void test_a_cancel_sync_from_the_callback_stops_a_deferred_add(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob j;

	tw_service_periodic_init(&j.p, cancel_sync_itself_in_run_1, 100);
	j.r = &r;
	atomic_store(&cs_rc, -1000);
	sp_on("run.again", &j.p.timer, note_again, &r);
	sp_on("run.over", &j.p.timer, note_over, &r);
	CHECK_EQ(tw_service_add(svc, &j.p.timer, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.started) == 1, "run 1 never started");
	CHECK_EQ(tw_service_reschedule(svc, &j.p.timer, 1000), TW_SVC_RUNNING);
	CHECK(tw_service_timer_pending(&j.p.timer));
	CHECK_EQ(tw_service_poll(svc), 0);
	atomic_store(&r.go, 1);
	WAIT_FOR(atomic_load(&r.finished) == 1, "the cancel_sync never returned");
	CHECK_EQ(atomic_load(&cs_rc), TW_SVC_STOPPED);
	atomic_store(&r.go, 100);
	WAIT_FOR(atomic_load(&r.over) == 1, "run 1 never ended");
	/* The stop untagged the run's mark: its end had nothing to do, and
	 * did not look at the timer (which the callback could have freed). */
	CHECK_EQ(atomic_load(&r.again), 0);
	sp_forget("run.again", &j.p.timer);
	sp_forget("run.over", &j.p.timer);
	CHECK_EQ(tw_service_cancel_sync(svc, &j.p.timer), TW_SVC_IDLE);
	CHECK_EQ(atomic_load(&r.started), 1);
	CHECK(!tw_service_timer_pending(&j.p.timer));
	CHECK_EQ(tw_service_count(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 2, 1, 1);
	tw_service_destroy(svc);
}

/* ---- a reschedule at the claim: filed at once ---- */

/*
 * The only executor has taken j (due 1000) and stored its running mark,
 * about to claim it ("run.claiming"). Another thread reschedules j to `to`:
 * the reschedule takes the batch slot back (TW_SVC_STOPPED: that expiry
 * ends there) and, since no run of j goes on (a timer taken back before
 * its claim is none, whatever the mark says), files it in the wheel at
 * once. The runner's claim then fails ("run.lost" after its end), and it
 * leaves j alone; j runs exactly once, at `to` or, when `to` is due, at
 * the next poll, and shutdown finds every add ended. (Read as a run, the
 * mark would defer the add to the lost claim's end, which must then file
 * it: model/service.pml, mutation 1.)
 */
static void a_reschedule_at_the_claim(int64_t to)
{
	struct tw_service *svc = service(true, 1);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 0);
	struct tw_service_timer *t = &j->p.timer;
	int claiming, lost;
	int64_t n;

	atomic_store(&r.go, 100);
	CHECK_EQ(tw_service_add(svc, t, 1000), TW_OK);
	claiming = sp_arm("run.claiming", t);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(sp_wait(claiming, NULL));
	lost = sp_arm("run.lost", t);
	CHECK_EQ(tw_service_reschedule(svc, t, to), TW_SVC_STOPPED);
	CHECK(tw_service_timer_pending(t));
	CHECK_EQ(tw_service_count(svc), 1); /* in the wheel at once */
	sp_release(claiming);
	CHECK(sp_wait(lost, NULL));
	sp_release(lost);
	CHECK_EQ(atomic_load(&r.started), 0);
	CHECK(tw_service_timer_pending(t));
	sp_on("run.over", t, note_over, &r);
	if (to > 1000) {
		atomic_store(&virtual_now, to - 10);
		CHECK_EQ(tw_service_poll(svc), 0);
		atomic_store(&virtual_now, to);
	}
	n = tw_service_poll(svc);
	CHECK_EQ(n, 1);
	if (n == 1) {
		WAIT_FOR(atomic_load(&r.finished) == 1, "the filed add never ran");
		CHECK_EQ(r.at[0], to > 1000 ? to : 1000);
	}
	atomic_store(&virtual_now, to + 1000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(atomic_load(&r.started), 1);
	/* The run's end, not only its callback's last store (above). */
	WAIT_FOR(atomic_load(&r.over) == 1, "the filed add's run never ended");
	CHECK_EQ(tw_service_cancel_sync(svc, t), TW_SVC_IDLE);
	sp_forget("run.over", t);
	free(j);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 2, 1, 1);
	tw_service_destroy(svc);
}

static void test_a_reschedule_at_the_claim_is_filed_at_once(void)
{
	a_reschedule_at_the_claim(1500);
}

static void test_a_reschedule_at_the_claim_due_now_runs_at_the_next_poll(void)
{
	a_reschedule_at_the_claim(1000);
}

/* ---- tw_service_timer_shutdown() of a running timer ---- */

struct shut_job {
	struct tw_service_timer t;
	atomic_int runs, gate, finished;
	atomic_int readd;       /* re-add itself once the gate opens */
	atomic_int readd_rc;
	atomic_int self_shut;   /* timer_shutdown itself and free itself */
	atomic_int *self_rc;    /* where that call's result goes */
};

static void shut_job_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct shut_job *sj = tw_container_of(t, struct shut_job, t);

	atomic_fetch_add(&sj->runs, 1);
	WAIT_FOR(atomic_load(&sj->gate), "the test never opened the gate");
	if (atomic_load(&sj->readd))
		atomic_store(&sj->readd_rc, tw_service_add(svc, t, 1000));
	if (atomic_load(&sj->self_shut)) {
		atomic_int *rc = sj->self_rc;

		/* Its last act: tear itself down and free itself. */
		atomic_store(rc, tw_service_timer_shutdown(svc, t));
		free(sj);
		return;
	}
	atomic_store(&sj->finished, 1);
}

static struct shut_job *shut_job_new(void)
{
	struct shut_job *sj = calloc(1, sizeof(*sj));

	CHECK(sj != NULL);
	tw_service_timer_init(&sj->t, shut_job_run);
	atomic_store(&sj->readd_rc, -1000);
	return sj;
}

static void open_gate(const void *obj, void *arg)
{
	(void)obj;
	atomic_store(&((struct shut_job *)arg)->gate, 1);
}

struct shutter {
	struct tw_service *svc;
	struct shut_job *sj;
	atomic_int result, finished_at_return;
};

static void *timer_shutdown_thread(void *arg)
{
	struct shutter *s = arg;
	int rc = tw_service_timer_shutdown(s->svc, &s->sj->t);

	atomic_store(&s->finished_at_return, atomic_load(&s->sj->finished));
	atomic_store(&s->result, rc);
	return NULL;
}

/*
 * tw_service_timer_shutdown() from another thread while the callback runs
 * on the only executor; the callback re-adds its timer once the teardown
 * is waiting for it ("cancel_sync.wait" opens its gate). The re-add is
 * refused (TW_ESHUTDOWN); timer_shutdown returns TW_SVC_RUNNING only once
 * the callback has returned; then the service holds no reference to the
 * timer, and the owner frees it (ASan sees any later touch).
 */
static void test_timer_shutdown_refuses_the_callbacks_readd(void)
{
	struct tw_service *svc = service(true, 1);
	struct shut_job *sj = shut_job_new();
	struct shutter s = { svc, sj, -1000, -1 };
	struct sp_thread th;

	atomic_store(&sj->readd, 1);
	CHECK_EQ(tw_service_add(svc, &sj->t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&sj->runs) == 1, "the callback never started");
	sp_on("cancel_sync.wait", &sj->t, open_gate, sj);
	sp_spawn(&th, timer_shutdown_thread, &s);
	sp_join(&th, "timer_shutdown of a running timer");
	sp_forget("cancel_sync.wait", &sj->t);
	CHECK_EQ(atomic_load(&s.result), TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&s.finished_at_return), 1);
	CHECK_EQ(atomic_load(&sj->readd_rc), TW_ESHUTDOWN);
	CHECK_EQ(atomic_load(&sj->runs), 1);
	CHECK(!tw_service_timer_pending(&sj->t));
	free(sj);
	atomic_store(&virtual_now, 2000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_count(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 1, 1, 0);
	tw_service_destroy(svc);
}

/*
 * The other order: another thread's add came during the run (deferred to
 * its end) before the teardown. timer_shutdown stops that add
 * (TW_SVC_STOPPED) and still waits for the run to return; the run's end
 * then files and runs nothing, and the owner frees the timer.
 */
static void test_timer_shutdown_stops_an_add_deferred_to_the_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct shut_job *sj = shut_job_new();
	struct shutter s = { svc, sj, -1000, -1 };
	struct sp_thread th;

	CHECK_EQ(tw_service_add(svc, &sj->t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&sj->runs) == 1, "the callback never started");
	CHECK_EQ(tw_service_add(svc, &sj->t, 1000), TW_OK); /* deferred */
	CHECK(tw_service_timer_pending(&sj->t));
	sp_on("cancel_sync.wait", &sj->t, open_gate, sj);
	sp_spawn(&th, timer_shutdown_thread, &s);
	sp_join(&th, "timer_shutdown of a running timer");
	sp_forget("cancel_sync.wait", &sj->t);
	CHECK_EQ(atomic_load(&s.result), TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&s.finished_at_return), 1);
	CHECK_EQ(atomic_load(&sj->runs), 1);
	CHECK(!tw_service_timer_pending(&sj->t));
	free(sj);
	CHECK_EQ(tw_service_poll(svc), 0);
	atomic_store(&virtual_now, 2000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 2, 1, 1);
	tw_service_destroy(svc);
}

/*
 * tw_service_timer_shutdown() from the timer's own callback: it does not
 * wait for itself, and the callback frees the timer as its last act
 * (service.h: "the callback may then free the timer as its last act").
 * Plain, it reports TW_SVC_RUNNING (the caller is the run). With another
 * thread's add made during the run (deferred to its end), it stops that
 * add (TW_SVC_STOPPED) -- "tw_service_timer_shutdown() from the callback
 * makes sure of it" -- and the free is as safe: nothing in the service may
 * touch the timer after it (ASan sees any touch).
 */
static void timer_shutdown_from_its_own_callback(bool added_during_the_run)
{
	struct tw_service *svc = service(true, 1);
	struct shut_job *sj = shut_job_new();
	atomic_int rc = -1000;

	sj->self_rc = &rc;
	atomic_store(&sj->self_shut, 1);
	CHECK_EQ(tw_service_add(svc, &sj->t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&sj->runs) == 1, "the callback never started");
	if (added_during_the_run)
		CHECK_EQ(tw_service_add(svc, &sj->t, 1000), TW_OK); /* deferred */
	atomic_store(&sj->gate, 1); /* from here on sj may be gone */
	WAIT_FOR(atomic_load(&rc) != -1000, "timer_shutdown waited for its own callback");
	CHECK_EQ(atomic_load(&rc),
		 added_during_the_run ? TW_SVC_STOPPED : TW_SVC_RUNNING);
	CHECK_EQ(tw_service_poll(svc), 0);
	atomic_store(&virtual_now, 2000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_count(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	if (added_during_the_run)
		check_balanced(svc, 2, 1, 1);
	else
		check_balanced(svc, 1, 1, 0);
	tw_service_destroy(svc);
}

static void test_timer_shutdown_from_its_own_callback_lets_it_free_itself(void)
{
	timer_shutdown_from_its_own_callback(false);
}

static void test_timer_shutdown_from_its_own_callback_stops_a_deferred_add(void)
{
	timer_shutdown_from_its_own_callback(true);
}

/* ---- a period due during its run runs next, on the same thread ---- */

struct slow_periodic {
	struct tw_service_periodic p;
	atomic_int started;
	atomic_int runs;        /* runs recorded: counted after the record */
	atomic_int hold;        /* run 1 waits while set */
	pthread_t thread[2];
	int64_t at[2];
};

static void slow_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct slow_periodic *sp = tw_container_of(t, struct slow_periodic, p.timer);
	int n = atomic_fetch_add(&sp->started, 1);

	if (n < 2) {
		sp->thread[n] = pthread_self();
		sp->at[n] = tw_service_now(svc);
	}
	atomic_fetch_add(&sp->runs, 1);
	if (n == 0)
		while (atomic_load(&sp->hold))
			sched_yield();
}

/*
 * service.h: "a periodic re-arm due before the run returned -- waits for
 * that run to return and then runs on the same thread". Two executors, a
 * period of 100: run 1 (at 1000) lasts until the clock reads 1100, its
 * next due time. When it returns, run 2 runs at once on the same executor
 * -- no poll needed, no other executor involved. (Filed in the wheel, it
 * waited for the next poll, which one of the two executors then ran: on
 * the other thread more than nine times in ten.)
 */
static void test_a_period_due_during_its_run_runs_next_on_the_same_thread(void)
{
	struct tw_service *svc = service(true, 2);
	struct slow_periodic sp;

	memset(&sp, 0, sizeof(sp));
	atomic_store(&sp.hold, 1);
	tw_service_periodic_init(&sp.p, slow_run, 100);
	CHECK_EQ(tw_service_add(svc, &sp.p.timer, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&sp.runs) == 1, "run 1 never started");
	atomic_store(&virtual_now, 1100);
	atomic_store(&sp.hold, 0);
	WAIT_FOR(atomic_load(&sp.runs) >= 2, "run 2 waited for a poll");
	CHECK(pthread_equal(sp.thread[0], sp.thread[1]));
	CHECK_EQ(sp.at[1], 1100);
	WAIT_FOR(tw_service_count(svc) == 1, "run 2's re-arm never came");
	CHECK_EQ(tw_service_cancel_sync(svc, &sp.p.timer), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/* ---- a timer due again at its run's end goes behind one that waits ---- */

#define HOG_RUNS 50

/* A timer that keeps coming due during its own run: each run but the last
 * adds it again, due at once; run 1 waits while hold is set. */
struct hog {
	struct tw_service_timer t;
	struct tw_service_periodic p;
	atomic_int runs, hold, overlaps, inside;
	atomic_int runs_before_other; /* its runs when the other timer ran */
	struct tw_service_timer other;
};

static struct hog hog;

/* The one-shot hog adds itself again; the periodic one is re-armed. */
static void hog_run(struct tw_service *svc, struct tw_service_timer *t)
{
	if (atomic_fetch_add(&hog.inside, 1))
		atomic_fetch_add(&hog.overlaps, 1);
	if (atomic_fetch_add(&hog.runs, 1) == 0)
		while (atomic_load(&hog.hold))
			sched_yield();
	atomic_fetch_sub(&hog.inside, 1);
	if (t == &hog.t && atomic_load(&hog.runs) < HOG_RUNS)
		CHECK_EQ(tw_service_add(svc, t, tw_service_now(svc)), TW_OK);
}

static void other_run(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	atomic_store(&hog.runs_before_other, atomic_load(&hog.runs));
}

/*
 * One executor. The hog's run 1 (at 1000) lasts until another timer,
 * due at 1050, has expired and waits in the executors' list. Then the
 * hog's add due at once (or its period, 100, due by 1100) goes behind it:
 * the other timer runs after the hog's first run, not after a streak of
 * runs that would last as long as the hog keeps coming due (before, it
 * ran after all 50, or after the periodic hog's run 2). The hog's next
 * run waits for a poll, which finds it due in the wheel.
 */
static void hog_and_other(bool periodic)
{
	struct tw_service *svc = service(true, 1);
	struct tw_service_timer *ht = periodic ? &hog.p.timer : &hog.t;

	memset(&hog, 0, sizeof(hog));
	atomic_store(&hog.runs_before_other, -1);
	atomic_store(&hog.hold, 1);
	if (periodic)
		tw_service_periodic_init(&hog.p, hog_run, 100);
	else
		tw_service_timer_init(&hog.t, hog_run);
	tw_service_timer_init(&hog.other, other_run);
	CHECK_EQ(tw_service_add(svc, ht, 1000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &hog.other, 1050), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&hog.runs) == 1, "the hog's run 1 never started");
	atomic_store(&virtual_now, 1100);
	CHECK_EQ(tw_service_poll(svc), 1); /* the other: waits for the executor */
	atomic_store(&hog.hold, 0);
	WAIT_FOR(atomic_load(&hog.runs_before_other) >= 0, "the other never ran");
	CHECK_EQ(atomic_load(&hog.runs_before_other), 1);
	/* The hog, filed due at once, runs at the next poll; with nothing
	 * else waiting, its later runs follow at once on the executor. */
	CHECK_EQ(tw_service_poll(svc), 1);
	if (periodic) {
		WAIT_FOR(atomic_load(&hog.runs) == 2, "the hog's run 2 never came");
		wait_for_the_rearm(svc); /* run 2 over: not RUNNING */
		CHECK_EQ(tw_service_cancel_sync(svc, ht), TW_SVC_STOPPED);
	} else {
		WAIT_FOR(atomic_load(&hog.runs) == HOG_RUNS, "the hog's runs stopped");
		WAIT_FOR(tw_service_count(svc) == 0, "the hog's last run never ended");
	}
	CHECK_EQ(atomic_load(&hog.overlaps), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

static void test_a_readd_due_during_its_run_goes_behind_a_waiting_timer(void)
{
	hog_and_other(false);
}

static void test_a_period_due_during_its_run_goes_behind_a_waiting_timer(void)
{
	hog_and_other(true);
}

int main(int argc, char **argv)
{
	races_only = argc > 1 ? argv[1] : NULL;
	sp_install();
	RUN_SELECTED(test_a_period_due_during_its_run_runs_next_on_the_same_thread);
	RUN_SELECTED(test_a_readd_due_during_its_run_goes_behind_a_waiting_timer);
	RUN_SELECTED(test_a_period_due_during_its_run_goes_behind_a_waiting_timer);
	RUN_SELECTED(test_a_reschedule_during_a_run_waits_for_the_run);
	RUN_SELECTED(test_a_reschedule_from_the_callback_waits_for_the_run);
	RUN_SELECTED(test_a_reschedule_during_a_run_sets_the_next_period);
	RUN_SELECTED(test_a_run_that_frees_its_timer_has_no_run_beside_it);
	RUN_SELECTED(test_an_add_from_another_thread_during_a_run_is_deferred);
	RUN_SELECTED(test_a_deferred_add_not_due_at_the_runs_end_is_filed);
	RUN_SELECTED(test_a_one_shot_readded_by_its_callback_waits_for_it);
	RUN_SELECTED(test_a_cancel_sync_from_the_callback_stops_a_deferred_add);
	RUN_SELECTED(test_a_reschedule_at_the_claim_is_filed_at_once);
	RUN_SELECTED(test_a_reschedule_at_the_claim_due_now_runs_at_the_next_poll);
	RUN_SELECTED(test_timer_shutdown_refuses_the_callbacks_readd);
	RUN_SELECTED(test_timer_shutdown_stops_an_add_deferred_to_the_run);
	RUN_SELECTED(test_timer_shutdown_from_its_own_callback_lets_it_free_itself);
	RUN_SELECTED(test_timer_shutdown_from_its_own_callback_stops_a_deferred_add);
	return races_report();
}
