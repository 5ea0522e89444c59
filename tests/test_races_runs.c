/* SPDX-License-Identifier: MIT */
/*
 * A timer's callback never runs beside itself, forced through the test
 * points (tests/stop_points.h) as in test_races.c: a reschedule, a
 * re-add, a cancel_sync or a free while a run is under way.
 */
#define _POSIX_C_SOURCE 200809L

#include "races_jobs.h"

/* ---- a timer's callback never runs beside itself ---- */

/*
 * A periodic timer whose runs the test holds: run n returns only once go
 * reaches n. The counts live apart from the timer, which one test frees
 * from its callback.
 */
struct runs {
	atomic_int started, finished;
	atomic_int inside, overlaps; /* runs under way; a run that found one */
	atomic_int go;
	atomic_int handed;           /* expiries handed to the running thread */
	atomic_int let_go;           /* executions over: the thread let go of t */
	atomic_int resched_rc;       /* run 1's reschedule of itself */
	atomic_int cancel_rc;        /* run 2's cancel of itself */
	atomic_int freed;
	int64_t resched_to;          /* run 1 reschedules itself there (0: no) */
	bool cancel_on_run2;         /* run 2 cancels its timer and frees it */
	int64_t at[8];               /* the clock when run n + 1 started */
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
	if (n <= 8)
		r->at[n - 1] = atomic_load(&virtual_now);
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

static struct pjob *pjob_new(struct runs *r, int64_t period)
{
	struct pjob *j = malloc(sizeof(*j));

	CHECK(j != NULL);
	tw_service_periodic_init(&j->p, pjob_run, period);
	j->r = r;
	return j;
}

static void note_handed(const void *obj, void *arg)
{
	(void)obj;
	atomic_store(&((struct runs *)arg)->handed, 1);
}

static void note_let_go(const void *obj, void *arg)
{
	(void)obj;
	atomic_fetch_add(&((struct runs *)arg)->let_go, 1);
}

/*
 * A periodic run's re-arm comes after its callback returned, on the
 * executor's thread: the callback's last store (r->finished) says nothing
 * of it. A loaded machine (ThreadSanitizer, a busy CI host) may hold that
 * thread between the two, so a test waits for the timer to be back in the
 * wheel before it moves the clock: one timer, not two chains of runs.
 */
static void wait_for_the_rearm(struct tw_service *svc)
{
	WAIT_FOR(tw_service_count(svc) >= 1, "the run's re-arm never came");
	CHECK_EQ(tw_service_count(svc), 1);
}

/* Run 1 of j (due 1000) under way on an executor; then j rescheduled to
 * d2 (from the test, or from run 1 itself), the clock moved to d2 and
 * polled: the expiry of that reschedule is dispatched while run 1 still
 * runs. Returns when the other executor took it (and handed it over, or,
 * before, ran it). */
static void second_expiry_during_run_1(struct tw_service *svc, struct pjob *j,
				       struct runs *r, int64_t d2,
				       bool from_callback)
{
	sp_on("execute.handed_over", &j->p.timer, note_handed, r);
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
	atomic_store(&virtual_now, d2);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r->handed) || atomic_load(&r->started) == 2 ||
		 atomic_load(&r->freed),
		 "the second expiry was neither run nor handed over");
	sp_forget("execute.handed_over", &j->p.timer);
	/* It waits for run 1 to return. */
	CHECK_EQ(atomic_load(&r->handed), 1);
	CHECK_EQ(atomic_load(&r->started), 1);
	CHECK_EQ(atomic_load(&r->overlaps), 0);
}

/*
 * The review's periodic timer (period 100, a run that lasts into the
 * next, two executors), rescheduled during a run to D1 + 50. The
 * reschedule's expiry ran on the other executor beside the run; the
 * run's re-arm, which saw that run's RUNNING, re-armed it too, and two
 * chains of runs went on, twice a period, for ever. Now the expiry waits
 * for run 1 and runs on its thread; the reschedule replaced run 1's
 * re-arm (TW_SVC_RUNNING: not re-armed), so the runs are at 1050 and then
 * every 100 from there: one per period, one at a time.
 */
static void reschedule_during_a_run(bool from_callback)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 100);

	second_expiry_during_run_1(svc, j, &r, 1050, from_callback);
	atomic_store(&r.go, 100); /* run 1 returns, then run 2 runs */
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 2 never ran");
	CHECK_EQ(r.at[1], 1050);
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
 * Period 400, rescheduled during run 1 to D2 = D1 + 200. Run 2 (at D2)
 * ran beside run 1; run 1 returned first and re-armed the timer at its
 * own D1 + 400, reading run 2's RUNNING as its own: the third run came at
 * 1400, not D2 + 400 = 1600. Now run 2 waits for run 1, whose re-arm the
 * reschedule replaced, and re-arms at D2 + 400.
 */
static void test_a_reschedule_during_a_run_sets_the_next_period(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 400);

	second_expiry_during_run_1(svc, j, &r, 1200, false);
	atomic_store(&r.go, 1); /* run 1 returns first */
	WAIT_FOR(atomic_load(&r.finished) == 1, "run 1 never returned");
	WAIT_FOR(atomic_load(&r.started) == 2, "run 2 never ran");
	atomic_store(&r.go, 2);
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 2 never returned");
	CHECK_EQ(r.at[1], 1200);
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
	tw_service_destroy(svc);
	free(j);
}

/*
 * Run 2 cancels its own timer and frees it, as service.h allows. It ran
 * beside run 1, whose executor then re-armed the freed timer (ASan: a
 * heap use after free in the re-arm). Now run 2 runs after run 1 returned
 * and its re-arm found the reschedule's expiry; nothing touches the timer
 * after run 2's free.
 */
static void test_a_run_that_frees_its_timer_has_no_run_beside_it(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 100);

	r.cancel_on_run2 = true;
	second_expiry_during_run_1(svc, j, &r, 1000, false);
	CHECK_EQ(atomic_load(&r.freed), 0);
	atomic_store(&r.go, 1);
	WAIT_FOR(atomic_load(&r.freed), "run 2 never ran");
	CHECK_EQ(atomic_load(&r.cancel_rc), TW_SVC_RUNNING);
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 1 never returned");
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	atomic_store(&virtual_now, 2000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/*
 * A one-shot timer too: its callback re-adds it due now and goes on. The
 * re-add's expiry waits for the callback to return, then runs on its
 * thread; a cancel_sync from the second run takes nothing it has to wait
 * for.
 */
static atomic_int os_started, os_inside, os_overlaps, os_go, os_readded;

static void oneshot_readd(struct tw_service *svc, struct tw_service_timer *t)
{
	int n = atomic_fetch_add(&os_started, 1) + 1;

	if (atomic_fetch_add(&os_inside, 1))
		atomic_fetch_add(&os_overlaps, 1);
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
	sp_on("execute.handed_over", &t, note_handed, &r);
	/* Two executions let go of t: the one that handed its expiry over,
	 * and the one that ran both runs. */
	sp_on("execute.let_go", &t, note_let_go, &r);
	sp_on("execute.let_go", &t, note_let_go, &r);
	CHECK_EQ(tw_service_add(svc, &t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&os_readded), "run 1 never re-added it");
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.handed) || atomic_load(&os_started) == 2,
		 "the re-add's expiry was neither run nor handed over");
	sp_forget("execute.handed_over", &t);
	CHECK_EQ(atomic_load(&os_started), 1);
	atomic_store(&os_go, 2);
	WAIT_FOR(atomic_load(&os_started) == 2 && !atomic_load(&os_inside),
		 "the re-add never ran");
	CHECK_EQ(atomic_load(&os_overlaps), 0);
	/* Once both executions let go, nothing is left of either. */
	WAIT_FOR(atomic_load(&r.let_go) == 2, "an execution never let go");
	sp_forget("execute.let_go", &t);
	CHECK_EQ(tw_service_cancel_sync(svc, &t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/*
 * From its own callback, a cancel_sync of a timer whose next expiry was
 * handed to this thread (it waits in the thread's own slot) takes it back
 * instead of waiting for itself.
 */
static atomic_int cs_rc;

static void cancel_sync_after_handover(struct tw_service *svc,
				       struct tw_service_timer *t)
{
	struct runs *r = &((struct pjob *)tw_container_of(
		t, struct pjob, p.timer))->r[0];
	int n = atomic_fetch_add(&r->started, 1) + 1;

	while (atomic_load(&r->go) < n)
		sched_yield();
	if (n == 1)
		atomic_store(&cs_rc, tw_service_cancel_sync(svc, t));
	atomic_fetch_add(&r->finished, 1);
}

static void test_a_cancel_sync_from_the_callback_takes_back_a_handed_expiry(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob j;

	tw_service_periodic_init(&j.p, cancel_sync_after_handover, 100);
	j.r = &r;
	sp_on("execute.handed_over", &j.p.timer, note_handed, &r);
	sp_on("execute.let_go", &j.p.timer, note_let_go, &r); /* as above */
	sp_on("execute.let_go", &j.p.timer, note_let_go, &r);
	CHECK_EQ(tw_service_add(svc, &j.p.timer, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.started) == 1, "run 1 never started");
	CHECK_EQ(tw_service_reschedule(svc, &j.p.timer, 1000), TW_SVC_RUNNING);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.handed) || atomic_load(&r.started) == 2,
		 "the expiry was neither run nor handed over");
	sp_forget("execute.handed_over", &j.p.timer);
	CHECK_EQ(atomic_load(&r.handed), 1);
	atomic_store(&r.go, 1);
	WAIT_FOR(atomic_load(&r.finished) == 1, "the cancel_sync never returned");
	/* it stopped the reschedule's add, whose expiry was its own thread's */
	CHECK_EQ(atomic_load(&cs_rc), TW_SVC_STOPPED);
	atomic_store(&r.go, 100);
	WAIT_FOR(atomic_load(&r.let_go) == 2, "an execution never let go");
	sp_forget("execute.let_go", &j.p.timer);
	CHECK_EQ(tw_service_cancel_sync(svc, &j.p.timer), TW_SVC_IDLE);
	CHECK_EQ(atomic_load(&r.started), 1);
	CHECK(!tw_service_timer_pending(&j.p.timer));
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	{
		struct tw_service_stats st;

		tw_service_stats(svc, &st);
		CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	}
	tw_service_destroy(svc);
}

int main(void)
{
	sp_install();
	RUN(test_a_reschedule_during_a_run_waits_for_the_run);
	RUN(test_a_reschedule_from_the_callback_waits_for_the_run);
	RUN(test_a_reschedule_during_a_run_sets_the_next_period);
	RUN(test_a_run_that_frees_its_timer_has_no_run_beside_it);
	RUN(test_a_one_shot_readded_by_its_callback_waits_for_it);
	RUN(test_a_cancel_sync_from_the_callback_takes_back_a_handed_expiry);
	return check_report();
}
