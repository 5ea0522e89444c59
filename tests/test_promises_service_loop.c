/* SPDX-License-Identifier: MIT */
/*
 * The eighth hostile reading of service.h (docs/review.md, G1), forced
 * through the test points as in test_promises_service.c: a manual
 * service's loop is woken (tw_service_set_wake) by what its last question
 * could not see: an executor's re-arm of a periodic timer, an add from
 * another thread.
 * Each failed (hung, or answered wrongly) on the code before its fix. One
 * test can be run alone by naming it:
 *   test_promises_service_loop test_an_executors_rearm_wakes_the_loop
 */
#define _POSIX_C_SOURCE 200809L

#include "service_promise_jobs.h"

/* ---- G1: waking the loop ---- */

/* The loop's eventfd: a count of wakes the loop has not read yet. */
struct wake_count {
	atomic_int unread, calls;
};

static void wake_counted(void *arg)
{
	struct wake_count *w = arg;

	atomic_fetch_add(&w->unread, 1);
	atomic_fetch_add(&w->calls, 1);
}

/* The loop reads its wake-up before it asks (service.h says why). */
static void read_wakes(struct wake_count *w)
{
	atomic_store(&w->unread, 0);
}

#define PERIOD 100  /* ten ticks of service()'s clock */
#define ROUNDS 20

struct held_periodic {
	struct tw_service_periodic p;
	atomic_int runs;   /* callbacks started */
	atomic_int go;     /* runs the loop has let return */
};

/* Returns only once the loop has asked its question during this run. */
static void held_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct held_periodic *h = tw_container_of(t, struct held_periodic, p.timer);
	int run = atomic_fetch_add(&h->runs, 1) + 1;

	(void)svc;
	WAIT_FOR(atomic_load(&h->go) >= run, "the loop never let the run return");
}

/*
 * service.h, tw_service_next_expiry() / tw_service_timeout(): a loop that
 * sleeps for what they say misses nothing. A manual service with one
 * executor and a periodic timer: each poll queues the run for the
 * executor; the loop asks while the run is under way (the timer is in no
 * wheel: "nothing pending", -1) and sleeps. Before tw_service_set_wake the
 * executor's re-arm told nobody (kick() returned at once for a manual
 * service), and the loop slept past every later run (the review's loop:
 * 3 runs in 3 s instead of about 150). Now the re-arm calls the loop's
 * wake-up, once per question, and the loop's next question has the
 * period's due time.
 */
static void test_an_executors_rearm_wakes_the_loop(void)
{
	struct tw_service *svc = service(true, 1);
	struct wake_count w = { 0 };
	struct held_periodic h;
	int64_t now = 1000;

	memset(&h, 0, sizeof(h));
	CHECK_EQ(tw_service_set_wake(svc, wake_counted, &w), TW_OK);
	tw_service_periodic_init(&h.p, held_run, PERIOD);
	CHECK_EQ(tw_service_add(svc, &h.p.timer, now), TW_OK);
	CHECK_EQ(atomic_load(&w.calls), 1); /* another thread's add, for the loop */
	for (int round = 1; round <= ROUNDS; round++) {
		read_wakes(&w);
		CHECK_EQ(tw_service_poll(svc), 1); /* queued for the executor */
		WAIT_FOR(atomic_load(&h.runs) == round, "the executor never ran it");
		/* The run is under way, the timer in no wheel. */
		CHECK_EQ(tw_service_timeout(svc, now), -1);
		atomic_store(&h.go, round);
		/* The loop sleeps "for ever": only the wake-up ends it. */
		WAIT_FOR(atomic_load(&w.unread) > 0,
			 "the executor's re-arm never woke the loop");
		read_wakes(&w);
		CHECK_EQ(tw_service_timeout(svc, now), PERIOD);
		now += PERIOD;
		set_clock(now);
	}
	CHECK_EQ(atomic_load(&h.runs), ROUNDS);
	CHECK_EQ(atomic_load(&w.calls), 1 + ROUNDS); /* one per re-arm */
	CHECK_EQ(tw_service_cancel(svc, &h.p.timer), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

struct adder {
	struct tw_service *svc;
	struct job *a, *b;
};

static void *add_two(void *arg)
{
	struct adder *ad = arg;

	CHECK_EQ(tw_service_add(ad->svc, &ad->a->t, 1050), TW_OK);
	CHECK_EQ(tw_service_add(ad->svc, &ad->b->t, 1030), TW_OK);
	return NULL;
}

/*
 * service.h, tw_service_set_wake(): an add from another thread after the
 * loop's question wakes it, once per question. The loop asked (nothing
 * pending) and sleeps; another thread adds two timers: one wake. The
 * second add found the wake on its way; the loop's next question has both
 * (the earlier, 1030: timeout 30). After that question the next add wakes
 * the loop again.
 */
static void test_an_add_from_another_thread_wakes_the_loop_once_per_question(void)
{
	struct tw_service *svc = service(true, 0);
	struct wake_count w = { 0 };
	struct job a, b, c;
	struct adder ad = { svc, &a, &b };
	struct sp_thread th;

	job_init(&a);
	job_init(&b);
	job_init(&c);
	CHECK_EQ(tw_service_set_wake(svc, wake_counted, &w), TW_OK);
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), -1);
	sp_spawn(&th, add_two, &ad);
	sp_join(&th, "the adding thread");
	CHECK_EQ(atomic_load(&w.unread), 1);
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), 30);
	CHECK_EQ(tw_service_add(svc, &c.t, 1010), TW_OK);
	CHECK_EQ(atomic_load(&w.calls), 2);
	/* tw_service_kick() of a manual service calls the wake-up too, once
	 * per question: the add's wake is still unread. */
	tw_service_kick(svc);
	CHECK_EQ(atomic_load(&w.calls), 2);
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), 10);
	tw_service_kick(svc);
	CHECK_EQ(atomic_load(&w.calls), 3);
	set_clock(1050);
	CHECK_EQ(tw_service_poll(svc), 3);
	CHECK_EQ(atomic_load(&a.runs) + atomic_load(&b.runs) + atomic_load(&c.runs), 3);
	/* Taken away: nothing is called. */
	CHECK_EQ(tw_service_set_wake(svc, NULL, NULL), TW_OK);
	CHECK_EQ(tw_service_timeout(svc, 1050), -1);
	CHECK_EQ(tw_service_add(svc, &a.t, 2000), TW_OK);
	CHECK_EQ(atomic_load(&w.calls), 3);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

static struct job readded;

static void add_another(struct tw_service *svc, struct job *self)
{
	(void)self;
	CHECK_EQ(tw_service_add(svc, &readded.t, 1000), TW_OK); /* due now */
}

/*
 * The polling thread does not wake its own loop: a callback the poll runs
 * adds a timer; the loop asks after the poll and sees it (timeout 0).
 */
static void test_the_polling_thread_does_not_wake_its_own_loop(void)
{
	struct tw_service *svc = service(true, 0);
	struct wake_count w = { 0 };
	struct job a;

	job_init(&a);
	job_init(&readded);
	a.action = add_another;
	CHECK_EQ(tw_service_set_wake(svc, wake_counted, &w), TW_OK);
	CHECK_EQ(tw_service_timeout(svc, 1000), -1);
	CHECK_EQ(tw_service_add(svc, &a.t, 1000), TW_OK);
	CHECK_EQ(atomic_load(&w.calls), 1);
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), 0);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&a.runs), 1);
	CHECK_EQ(atomic_load(&w.calls), 1); /* the callback's add: no wake */
	CHECK_EQ(tw_service_timeout(svc, 1000), 0);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&readded.runs), 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

static void test_set_wake_refuses_what_has_no_loop(void)
{
	struct tw_service *reaped = service(false, 0);
	struct wake_count w = { 0 };

	CHECK_EQ(tw_service_set_wake(NULL, wake_counted, &w), TW_EINVAL);
	CHECK_EQ(tw_service_set_wake(reaped, wake_counted, &w), TW_EINVAL);
	tw_service_kick(reaped); /* still wakes its reaper, calls nothing */
	CHECK_EQ(atomic_load(&w.calls), 0);
	CHECK_EQ(tw_service_shutdown(reaped, NULL, NULL), 0);
	tw_service_destroy(reaped);
}

int main(int argc, char **argv)
{
	only = argc > 1 ? argv[1] : NULL;
	sp_install();
	RUN_SELECTED(test_an_executors_rearm_wakes_the_loop);
	RUN_SELECTED(test_an_add_from_another_thread_wakes_the_loop_once_per_question);
	RUN_SELECTED(test_the_polling_thread_does_not_wake_its_own_loop);
	RUN_SELECTED(test_set_wake_refuses_what_has_no_loop);
	if (tests_passed + tests_failed == 0) {
		fprintf(stderr, "no test named %s\n", only);
		return 2;
	}
	return check_report();
}
