/* SPDX-License-Identifier: MIT */
/*
 * cancel_sync's TW_EDEADLK where the executors' queue is full and the
 * scanning thread runs a callback itself: only for a cycle of waits.
 *
 * A callback that the polling thread runs (the queue had no room) waits
 * in cancel_sync for a timer whose entry an executor has just taken off
 * the queue. The executor waits for nothing, so there is no cycle: the
 * wait ends when the executor gives the entry up. The executor is parked
 * at "executor.took", right after it took the entry, until the callback's
 * cancel_sync is about to wait ("cancel_sync.wait"): each step happens in
 * the same order every run, whatever the machine's load. (The entry used
 * to reach the executor's running[] slot only after the queue's lock was
 * let go; in between, a ring check took the scanning thread -- the
 * caller itself -- for the entry's holder and returned TW_EDEADLK.)
 *
 * The second test is the same false ring through another waiter: a check
 * followed a waiting callback's record to the timer it waits for and took
 * that timer's holder from what the waiter had seen at its own last look
 * -- the executor that ran it, whose run had ended since, and which now
 * ran the checking callback itself.
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
		/* The executor has the other timer's entry in hand
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

static void test_cancel_sync_from_the_scanner_waits_for_an_executor(void)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	struct tw_service_stats st;
	struct poller p;
	struct sp_thread th;
	struct job x, *y = malloc(sizeof(*y));

	/* A queue of one: y (due first) fills it, x runs on the poller. */
	cfg.tick = 10;
	cfg.wheel_size = 8;
	cfg.manual = true;
	cfg.executors = 1;
	cfg.queue_capacity = 1;
	cfg.clock.now = virtual_clock;
	atomic_store(&virtual_now, 1000);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	p.svc = svc;
	p.result = 0;
	job_init(&x);
	job_init(y);
	x.other = y;
	x.took = sp_arm("executor.took", &y->t);
	sp_on("cancel_sync.wait", &y->t, release_parked, &x.took);
	CHECK_EQ(tw_service_add(svc, &y->t, 1010), TW_OK);
	CHECK_EQ(tw_service_add(svc, &x.t, 1020), TW_OK);
	atomic_store(&virtual_now, 1020);
	sp_spawn(&th, poll_thread, &p);
	sp_join(&th, "the poll");
	/* Before the fix: TW_EDEADLK, no wait; the executor is still parked. */
	sp_release(x.took);
	sp_forget("cancel_sync.wait", &y->t);
	CHECK_EQ(p.result, 2); /* y queued, x run here */
	CHECK_EQ(atomic_load(&x.done), 1);
	CHECK_EQ(atomic_load(&x.result), TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&x.runs), 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&y->runs), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.caller_ran, 1);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
	free(y); /* cancel_sync returned STOPPED: nothing refers to it */
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
	/* Before the fix: TW_EDEADLK, no wait; a is still parked. */
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

int main(void)
{
	sp_install();
	RUN(test_cancel_sync_from_the_scanner_waits_for_an_executor);
	RUN(test_cancel_sync_through_a_waiter_whose_target_ran);
	return check_report();
}
