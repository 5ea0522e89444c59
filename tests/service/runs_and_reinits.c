/* SPDX-License-Identifier: MIT */
/*
 * A run keeps the callback it started with, one poll runs everything
 * due, and a periodic timer may stop and free itself in its own run:
 * promises of service.h about a run, forced through the test points as
 * in cancels_across_services.c: a timer re-initialised right after a
 * plain cancel -- after its runner's claim (the run that started keeps the
 * callback it expired with) or before it (the cancel won: nothing of the
 * old callback runs) --, one poll running (or queueing) everything due,
 * and a periodic timer made one-shot or cancelled in its own callback,
 * which may then free it. The reinit tests park the runner with a hook
 * the harness's mutex does not order (quiet_arm), so that ThreadSanitizer
 * sees only the library's own synchronisation. One test can be run alone
 * by naming it:
 *   service_runs_and_reinits test_one_poll_runs_everything_due
 */
#define _POSIX_C_SOURCE 200809L

#include "forced_jobs_quiet.h"

/* ---- reinit right after a plain cancel ---- */

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
 * Forced: the poller has claimed t ("run.claimed": its exchange won the
 * batch slot) and not yet called it. The owner cancels t (TW_SVC_RUNNING:
 * its run is under way) and reinits it with f2. The run calls the
 * callback read when t was taken, under the shard's mutex, so neither a
 * wrong callback nor a data race with the reinit's store (TSan): f1 runs
 * for f1's expiry, and f2 on the next add.
 */
static void test_reinit_after_cancel_keeps_the_started_runs_callback(void)
{
	struct tw_service *svc = service(true, 0);
	struct tw_service_timer t;

	atomic_store(&f1_runs, 0);
	atomic_store(&f2_runs, 0);
	tw_service_timer_init(&t, f1);
	CHECK_EQ(tw_service_add(svc, &t, 1000), TW_OK);
	CHECK_EQ(cancel_and_reinit_while_polling(svc, "run.claimed", &t,
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
 * The same for a periodic timer, with a new period too
 * (tw_service_periodic_reinit()): the old expiry keeps the old callback,
 * f1 runs once (the cancel stops the re-arm), and after the next add f2
 * runs on the new period.
 */
static void test_periodic_reinit_after_cancel_keeps_the_started_runs_callback(void)
{
	struct tw_service *svc = service(true, 0);
	struct tw_service_periodic p;

	atomic_store(&f1_runs, 0);
	atomic_store(&f2_runs, 0);
	tw_service_periodic_init(&p, f1, 100);
	CHECK_EQ(tw_service_add(svc, &p.timer, 1000), TW_OK);
	CHECK_EQ(cancel_and_reinit_while_polling(svc, "run.claimed", &p.timer,
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
 * tw_service_cancel()" -- also while a runner holds the timer in its
 * batch, its running mark stored, about to claim it.
 * Forced: the poller is parked at its claim ("run.claiming"); the owner
 * cancels t (TW_SVC_STOPPED: the cancel takes the batch slot back) and
 * reinits it with f2 at once. The poller's claim then fails: neither f1
 * (the callback t was taken with) nor f2 runs for that expiry, which the
 * poll still counts; a later add runs f2, once.
 */
static void test_reinit_while_a_runner_is_about_to_claim_the_timer(void)
{
	struct tw_service *svc = service(true, 0);
	struct tw_service_timer t;

	atomic_store(&f1_runs, 0);
	atomic_store(&f2_runs, 0);
	tw_service_timer_init(&t, f1);
	CHECK_EQ(tw_service_add(svc, &t, 1000), TW_OK);
	CHECK_EQ(cancel_and_reinit_while_polling(svc, "run.claiming", &t,
						 TW_SVC_STOPPED,
						 reinit_one_shot_f2, &t),
		 1);
	CHECK_EQ(atomic_load(&f1_runs), 0);
	CHECK_EQ(atomic_load(&f2_runs), 0);
	CHECK(!tw_service_timer_pending(&t));
	CHECK_EQ(tw_service_count(svc), 0);
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

/* ---- one poll runs everything due ---- */

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
 * past it, one poll: it dispatches all of them (a batch of expiries has no
 * cap), none left for a later poll at the same clock time, which a
 * manual service's caller has no reason to make.
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

/*
 * service.h, tw_service_timer_reinit(): TW_EBUSY only for a timer
 * pending, expired and waiting to run, or whose periodic callback runs.
 * A one-shot that ran, whose service was then destroyed, is none of these
 * (its run left its word TAKEN, which the live service would have read as
 * ended at its next look): reinit takes it. It keeps its service, gone
 * (service.h: reinit keeps what the service knows of the timer), so
 * another service refuses it until tw_service_timer_init() frees it.
 */
static void test_reinit_of_a_run_timer_of_a_destroyed_service(void)
{
	struct tw_service *svc = service(true, 0);
	struct tw_service_timer t;

	atomic_store(&f1_runs, 0);
	atomic_store(&f2_runs, 0);
	tw_service_timer_init(&t, f1);
	CHECK_EQ(tw_service_add(svc, &t, 1020), TW_OK);
	atomic_store(&virtual_now, 1030);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&f1_runs), 1);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
	CHECK(!tw_service_timer_pending(&t));
	CHECK_EQ(tw_service_timer_reinit(&t, f2), TW_OK);
	svc = service(true, 0);
	CHECK_EQ(tw_service_add(svc, &t, 1020), TW_EOWNER);
	tw_service_timer_init(&t, f2);
	CHECK_EQ(tw_service_add(svc, &t, 1020), TW_OK);
	atomic_store(&virtual_now, 1030);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&f2_runs), 1);
	CHECK_EQ(atomic_load(&f1_runs), 1);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

static void test_one_poll_runs_everything_due(void)
{
	one_poll_runs_everything_due(0);
}

static void test_one_poll_queues_everything_due(void)
{
	one_poll_runs_everything_due(2);
}

/* ---- a periodic timer made one-shot in its own callback ---- */

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
 * period to 0 (0), then overwrites or frees the whole struct. The run's
 * end must not re-arm it, nor read it (POISON makes the state word read
 * as a deferred add, which a run's end that looked would file; ASan sees
 * a touch of the freed struct in the FREE_IT variants): the bytes are all
 * still the poison, it ran once, and nothing was re-added.
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

int main(int argc, char **argv)
{
	only = argc > 1 ? argv[1] : NULL;
	sp_install();
	RUN_SELECTED(test_reinit_after_cancel_keeps_the_started_runs_callback);
	RUN_SELECTED(test_periodic_reinit_after_cancel_keeps_the_started_runs_callback);
	RUN_SELECTED(test_reinit_while_a_runner_is_about_to_claim_the_timer);
	RUN_SELECTED(test_reinit_of_a_run_timer_of_a_destroyed_service);
	RUN_SELECTED(test_one_poll_runs_everything_due);
	RUN_SELECTED(test_one_poll_queues_everything_due);
	RUN_SELECTED(test_periodic_made_one_shot_overwrites_itself);
	RUN_SELECTED(test_periodic_made_one_shot_frees_itself);
	RUN_SELECTED(test_periodic_cancelled_in_its_callback_overwrites_itself);
	RUN_SELECTED(test_periodic_cancelled_in_its_callback_frees_itself);
	if (tests_passed + tests_failed == 0) {
		fprintf(stderr, "no test named %s\n", only);
		return 2;
	}
	return check_report();
}
