/* SPDX-License-Identifier: MIT */
/*
 * cancel_sync returns TW_EDEADLK only for a cycle of waits, also where
 * callbacks run both on the executors and on the scanning thread (the
 * executors' queue full).
 *
 * The scanning thread (here a manual service's poll) runs what expires
 * itself only once queue_capacity timers wait for the executors
 * (back-pressure). With a capacity of one and two timers due, the older,
 * x, fills the queue and the only executor takes it; the poll runs the
 * other, y, itself. y's
 * callback cancel_syncs x, which the executor holds in its batch and has
 * not claimed: parked right after it took its batch ("executor.took", no
 * running mark yet) the cancel takes x's slot back and returns
 * TW_SVC_STOPPED at once; parked at its claim ("run.claiming", its mark on
 * x) the cancel takes the slot back too, and the call waits until the
 * executor lets go of its mark (released when the call is about to wait,
 * "cancel_sync.wait"): the executor waits for nothing, so there is no
 * cycle, and no TW_EDEADLK. Each step happens in the same order every
 * run, whatever the machine's load.
 *
 * The third test is a false ring through another waiter: a ring check
 * that follows a waiting callback's record to the timer it waits for must
 * look at who runs that timer now, not at who ran it when the waiter last
 * looked -- the executor that ran it, whose run has ended since, and
 * which now runs the checking callback itself.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "stop_points.h"
#include "virtual_clock.h"

struct job {
	struct tw_service_timer t;
	atomic_int runs;
	struct job *other;   /* cancel_synced by the callback, if set */
	int took;            /* the stop slot the executor parks in, or -1 */
	atomic_int *gate;    /* the callback waits until it opens, if set */
	atomic_int result;
	atomic_int started, done;
	atomic_int waited;   /* its cancel_sync came to wait */
};

/* Until *flag is set; false after 60 s (a hang, not a slow machine). */
static bool wait_flag(atomic_int *flag)
{
	for (int i = 0; i < 600000 && !atomic_load(flag); i++) {
		struct timespec ts = { 0, 100000 };

		nanosleep(&ts, NULL);
	}
	return atomic_load(flag) != 0;
}

static void job_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct job *j = (struct job *)(void *)t;

	atomic_fetch_add(&j->runs, 1);
	atomic_store(&j->started, 1);
	if (j->gate)
		CHECK(wait_flag(j->gate));
	if (j->other) {
		/* The executor holds the other timer in its batch
		 * (parked). */
		if (j->took >= 0)
			CHECK(sp_wait(j->took, NULL));
		atomic_store(&j->result,
			     tw_service_cancel_sync(svc, &j->other->t));
	}
	atomic_store(&j->done, 1);
}

static void job_init(struct job *j)
{
	memset(j, 0, sizeof(*j));
	j->took = -1;
	tw_service_timer_init(&j->t, job_run);
}

/* At "cancel_sync.wait", on the waiting thread: let the parked thread
 * go (the slot in *arg). */
static void release_parked(const void *obj, void *arg)
{
	(void)obj;
	sp_release(*(int *)arg);
}

/* At "cancel_sync.wait", on the callback's thread: note the wait, and
 * let the parked executor go. */
static void note_wait_and_release(const void *obj, void *arg)
{
	struct job *j = arg;

	(void)obj;
	atomic_store(&j->waited, 1);
	sp_release(j->took);
}

/* The poll runs y (due last) itself, the only executor takes x, parked
 * at point (with obj); y's callback cancel_syncs x. */
static void scanner_cancel_syncs_what_an_executor_took(const char *point,
						      const void *(*obj)(struct tw_service *,
									 struct job *),
						      bool waits)
{
	struct tw_service *svc = NULL;
	struct tw_service_stats st;
	struct poller p;
	struct sp_thread th;
	struct job *x = malloc(sizeof(*x)), y;

	/* A queue of one: x, due first, fills it and waits for the
	 * executor; y, past it, runs on the poller. */
	svc = service_queue(true, 1, 1);
	p.svc = svc;
	p.result = 0;
	job_init(x);
	job_init(&y);
	y.other = x;
	y.took = sp_arm(point, obj(svc, x));
	sp_on("cancel_sync.wait", &x->t, note_wait_and_release, &y);
	CHECK_EQ(tw_service_add(svc, &x->t, 1010), TW_OK);
	CHECK_EQ(tw_service_add(svc, &y.t, 1020), TW_OK);
	atomic_store(&virtual_now, 1020);
	sp_spawn(&th, poll_thread, &p);
	sp_join(&th, "the poll");
	/* Released by then if the call waited (it never has to: a timer
	 * taken back before its claim is no run, whatever the mark says). */
	sp_release(y.took);
	sp_forget("cancel_sync.wait", &x->t);
	CHECK_EQ(p.result, 2); /* x queued, y run here */
	CHECK_EQ(atomic_load(&y.done), 1);
	CHECK_EQ(atomic_load(&y.result), TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&y.runs), 1);
	CHECK_EQ(atomic_load(&y.waited), waits);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&x->runs), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.caller_ran, 1);
	CHECK_EQ(st.ran, 1);
	CHECK_EQ(st.stopped, 1);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
	free(x); /* cancel_sync returned STOPPED: nothing refers to it */
}

static const void *the_service(struct tw_service *svc, struct job *x)
{
	(void)x;
	return svc;
}

static const void *the_timer(struct tw_service *svc, struct job *x)
{
	(void)svc;
	return &x->t;
}

static void test_cancel_sync_from_the_scanner_stops_what_an_executor_took(void)
{
	scanner_cancel_syncs_what_an_executor_took("executor.took", the_service,
						   false);
}

/* The executor's mark is stored, its claim not made: the cancel_sync
 * takes x back and returns at once (the executor's claim then fails, and
 * it never touches x, which is freed). */
static void test_cancel_sync_from_the_scanner_beats_an_executors_claim(void)
{
	scanner_cancel_syncs_what_an_executor_took("run.claiming", the_timer, false);
}

/*
 * Two executors. s runs on one of them (X) and holds there (its gate);
 * a runs on the other (Y) and cancel_syncs s: it waits for X, and is
 * parked as it is about to wait (its record posted, its look taken while
 * s ran on X). Then s returns, and X, the one executor free, runs m,
 * which cancel_syncs a: m waits for Y, Y waits for s, which nobody runs
 * any more -- no ring. Once m is about to wait, a is let go: its next
 * look finds s done, and both waits end.
 */
static void test_cancel_sync_through_a_waiter_whose_target_ran(void)
{
	struct tw_service *svc = service(true, 2);
	struct tw_service_stats st;
	struct job s, a, m;
	atomic_int gate = 0;
	int parked;

	job_init(&s);
	job_init(&a);
	job_init(&m);
	s.gate = &gate;
	a.other = &s;
	m.other = &a;
	CHECK_EQ(tw_service_add(svc, &s.t, 1010), TW_OK);
	CHECK_EQ(tw_service_add(svc, &a.t, 1020), TW_OK);
	CHECK_EQ(tw_service_add(svc, &m.t, 1030), TW_OK);
	atomic_store(&virtual_now, 1010);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(wait_flag(&s.started));
	parked = sp_arm("cancel_sync.wait", &s.t);
	atomic_store(&virtual_now, 1020);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(sp_wait(parked, NULL));
	sp_on("cancel_sync.wait", &a.t, release_parked, &parked);
	atomic_store(&virtual_now, 1030);
	CHECK_EQ(tw_service_poll(svc), 1); /* queued: both executors busy */
	atomic_store(&gate, 1);
	CHECK(wait_flag(&m.done));
	/* m waited: a ring check that looked at who ran s when a last
	 * looked (X, now running m) would say TW_EDEADLK without a wait. a
	 * is still parked. */
	sp_release(parked);
	sp_forget("cancel_sync.wait", &a.t);
	CHECK(wait_flag(&a.done));
	CHECK_EQ(atomic_load(&m.result), TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&a.result), TW_SVC_RUNNING);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&s.runs), 1);
	CHECK_EQ(atomic_load(&a.runs), 1);
	CHECK_EQ(atomic_load(&m.runs), 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.ran, 3);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

/*
 * A ring does not hide a stop. a and b run on the two executors, each
 * held at its gate; another thread adds each again during its run (the
 * add waits for the run's end). Then each callback cancel_syncs the
 * other: its cancel stops the other's waiting add, and its wait would
 * close a ring. Whichever sees the ring answers TW_EDEADLK_STOPPED, not
 * TW_EDEADLK: every add ends in a run or in a stop its caller was told
 * of (the other caller, which waited, gets TW_SVC_STOPPED).
 */
static void test_a_ring_tells_of_the_add_its_cancel_stopped(void)
{
	struct tw_service *svc = service(true, 2);
	struct tw_service_stats st;
	struct job a, b;
	atomic_int gate = 0;
	int ra, rb;

	job_init(&a);
	job_init(&b);
	a.gate = b.gate = &gate;
	a.other = &b;
	b.other = &a;
	CHECK_EQ(tw_service_add(svc, &a.t, 1010), TW_OK);
	CHECK_EQ(tw_service_add(svc, &b.t, 1010), TW_OK);
	atomic_store(&virtual_now, 1010);
	CHECK_EQ(tw_service_poll(svc), 2);
	CHECK(wait_flag(&a.started));
	CHECK(wait_flag(&b.started));
	CHECK_EQ(tw_service_add(svc, &a.t, 5000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &b.t, 5000), TW_OK);
	atomic_store(&gate, 1);
	CHECK(wait_flag(&a.done));
	CHECK(wait_flag(&b.done));
	ra = atomic_load(&a.result);
	rb = atomic_load(&b.result);
	CHECK(ra == TW_EDEADLK_STOPPED || rb == TW_EDEADLK_STOPPED);
	CHECK(ra == TW_EDEADLK_STOPPED || ra == TW_SVC_STOPPED);
	CHECK(rb == TW_EDEADLK_STOPPED || rb == TW_SVC_STOPPED);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&a.runs), 1);
	CHECK_EQ(atomic_load(&b.runs), 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 4);
	CHECK_EQ(st.ran, 2);
	CHECK_EQ(st.stopped, 2);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

/*
 * A waiter whose wait an add ended is no edge of a ring, though it has
 * not looked again yet. s runs on one executor, held at its gate; a's
 * callback, on the other, cancel_syncs s and is parked about to wait
 * (its record posted: s, on that executor). Another thread adds s again
 * during its run -- a's wait is over (service.h: the call returns) --
 * and then s's callback cancel_syncs a. a's record still names s on the
 * executor that runs s, and s's own runner is the end of that path, but
 * s is pending again: no ring, and s's call waits for a's callback, which
 * returns at its next look, instead of answering TW_EDEADLK.
 */
static void test_a_wait_an_add_ended_closes_no_ring(void)
{
	struct tw_service *svc = service(true, 2);
	struct tw_service_stats st;
	struct job s, a;
	atomic_int gate = 0;
	int parked, s_waits;

	job_init(&s);
	job_init(&a);
	s.gate = &gate;
	a.other = &s;
	CHECK_EQ(tw_service_add(svc, &s.t, 1010), TW_OK);
	CHECK_EQ(tw_service_add(svc, &a.t, 1020), TW_OK);
	atomic_store(&virtual_now, 1010);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(wait_flag(&s.started));
	parked = sp_arm("cancel_sync.wait", &s.t);
	atomic_store(&virtual_now, 1020);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(sp_wait(parked, &a.done)); /* a is about to wait for s */
	CHECK_EQ(tw_service_add(svc, &s.t, 5000), TW_OK); /* behind its run */
	s.other = &a;
	s_waits = sp_arm("cancel_sync.wait", &a.t);
	atomic_store(&gate, 1);
	/* s's call comes to wait for a: no TW_EDEADLK first */
	CHECK(sp_wait(s_waits, &s.done));
	sp_release(parked);
	sp_release(s_waits);
	CHECK(wait_flag(&a.done));
	CHECK(wait_flag(&s.done));
	CHECK_EQ(atomic_load(&a.result), TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&s.result), TW_SVC_RUNNING);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1); /* s's second add */
	CHECK_EQ(atomic_load(&s.runs), 1);
	CHECK_EQ(atomic_load(&a.runs), 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

int main(void)
{
	sp_install();
	RUN(test_cancel_sync_from_the_scanner_stops_what_an_executor_took);
	RUN(test_cancel_sync_from_the_scanner_beats_an_executors_claim);
	RUN(test_cancel_sync_through_a_waiter_whose_target_ran);
	RUN(test_a_ring_tells_of_the_add_its_cancel_stopped);
	RUN(test_a_wait_an_add_ended_closes_no_ring);
	return check_report();
}
