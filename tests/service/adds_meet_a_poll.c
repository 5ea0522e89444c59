/* SPDX-License-Identifier: MIT */
/*
 * Adds that meet a poll moving the service's time.
 *
 * A windowed add or reschedule that files its timer while a poll moves
 * the service's time. The poll stores its time (svc->latest) before it
 * takes the shard's mutex, so an add holding that mutex may read the
 * old time and then the new one. Forced: the add is parked right after
 * it read the time for its window ("file.window", the mutex held), a
 * poll on another thread stores a time past the window's end and waits
 * for the mutex; released, the add must file its window as of one time,
 * and the poll, which advances the shard after the add let go of it,
 * must run the timer: its time is past the window's end. (service.h lets
 * an add made during a poll run at the next poll instead; in this order
 * the poll finds it filed. What matters is that some poll runs it.)
 * Filed with its earliest read before the store and its end read after,
 * the window ended at the wheel's clock before it began: the wheel
 * refused it, the timer stayed PENDING in no bucket and never ran (a
 * reschedule's stayed where it was): 5 runs in 400 of
 * window_promises_threaded built with clang, which read the earliest
 * first, and none in 400 with one reading.
 *
 * And a plain add made after a poll read the clock but before it stored
 * that time as the service's (service.h, tw_service_poll()): it is filed
 * as of the service's older time, at its tick, not due at once -- and
 * runs at that tick, once, never early. Forced: the injected clock parks
 * the polling thread inside its read.
 */
#define _POSIX_C_SOURCE 200809L

#include <semaphore.h>

#include "forced_jobs.h"
#include "service/core.h"

struct window_call {
	struct tw_service *svc;
	struct job *job;
	int64_t earliest, latest;
	bool reschedule;
	int result;
};

static void *window_main(void *arg)
{
	struct window_call *c = arg;

	c->result = c->reschedule
		? tw_service_reschedule_range(c->svc, &c->job->t, c->earliest, c->latest)
		: tw_service_add_range(c->svc, &c->job->t, c->earliest, c->latest);
	return NULL;
}

/* tick 7, one shard, its wheel at c0: the window [c0 + from, c0 + to]
 * filed (an add; a reschedule of the timer pending at c0 + 700) while a
 * poll moves the time to c0 + 70; that poll runs it, once. */
static void window_during_a_poll(bool reschedule, int64_t from, int64_t to)
{
	const int64_t tick = 7, c0 = 7000;
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	struct window_call call = { 0 };
	struct poller poll = { NULL, 0 };
	struct sp_thread filer, poller;
	struct job j;
	int parked;

	cfg.tick = tick;
	cfg.manual = true;
	cfg.shards = 1;
	cfg.clock.now = virtual_clock;
	set_clock(c0);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 0); /* the wheel at c0 / tick */
	job_init(&j);
	if (reschedule)
		CHECK_EQ(tw_service_add(svc, &j.t, c0 + 700), TW_OK);

	call = (struct window_call){ svc, &j, c0 + from, c0 + to, reschedule, 0 };
	parked = sp_arm("file.window", &svc->shards[0]);
	sp_spawn(&filer, window_main, &call);
	CHECK(sp_wait(parked, &filer.done));
	/* The poll stores its time, then waits for the shard's mutex. */
	set_clock(c0 + 70);
	poll.svc = svc;
	sp_spawn(&poller, poll_thread, &poll);
	WAIT_FOR((int64_t)load_u64(&svc->latest) == c0 + 70, "the poll's time");
	sp_release(parked);
	sp_join(&filer, "the windowed call");
	sp_join(&poller, "the poll");

	CHECK_EQ(call.result, reschedule ? TW_SVC_STOPPED : TW_OK);
	CHECK_EQ(poll.result, 1);
	CHECK_EQ(atomic_load(&j.runs), 1);
	CHECK(!tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, reschedule ? 2 : 1, 1, reschedule ? 1 : 0);
	tw_service_destroy(svc);
}

static void test_an_add_range_files_its_window_as_of_one_time(void)
{
	window_during_a_poll(false, 7, 14);  /* one tick wide */
	window_during_a_poll(false, 1, 60);  /* ends before the poll's time */
	window_during_a_poll(false, 20, 70); /* ends at it */
}

static void test_a_reschedule_range_files_its_window_as_of_one_time(void)
{
	window_during_a_poll(true, 7, 14);
	window_during_a_poll(true, 1, 60);
}

/* ---- an add between a poll's read of the clock and its store ---- */

static struct {
	atomic_llong now;
	atomic_int park; /* 1: the next read parks, after taking its value */
	sem_t parked, go;
} gap;

static int64_t gap_clock(void *arg)
{
	int64_t v = atomic_load(&gap.now);
	int one = 1;

	(void)arg;
	if (atomic_compare_exchange_strong(&gap.park, &one, 0)) {
		sem_post(&gap.parked);
		sem_wait(&gap.go);
	}
	return v;
}

/* tick 1000, the service's time 1000: an add due at 1500 made while a
 * poll that read 1500 has not stored it; then (after) one made once that
 * poll returned. */
static void add_in_the_gap(bool after)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	struct poller poll = { NULL, 0 };
	struct sp_thread poller;
	int64_t when = 0;
	struct job j;

	cfg.tick = 1000;
	cfg.manual = true;
	cfg.shards = 1;
	cfg.clock.now = gap_clock;
	atomic_store(&gap.now, 1000);
	CHECK_EQ(sem_init(&gap.parked, 0, 0), 0);
	CHECK_EQ(sem_init(&gap.go, 0, 0), 0);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 0);
	job_init(&j);
	atomic_store(&gap.now, 1500);
	poll.svc = svc;
	if (after) {
		CHECK_EQ(tw_service_poll(svc), 0);
		CHECK_EQ(tw_service_add(svc, &j.t, 1500), TW_OK);
		/* Reached: due at once, run by the next poll at 1500. */
		CHECK_EQ(tw_service_poll(svc), 1);
	} else {
		atomic_store(&gap.park, 1);
		sp_spawn(&poller, poll_thread, &poll);
		CHECK_EQ(sem_wait(&gap.parked), 0);
		CHECK_EQ(tw_service_add(svc, &j.t, 1500), TW_OK);
		CHECK_EQ(sem_post(&gap.go), 0);
		sp_join(&poller, "the poll");
		CHECK_EQ(poll.result, 0);
		/* Filed at its tick: not run at 1500 or 1999, run at 2000. */
		CHECK(tw_service_next_expiry(svc, &when));
		CHECK_EQ(when, 2000);
		CHECK_EQ(tw_service_poll(svc), 0);
		atomic_store(&gap.now, 1999);
		CHECK_EQ(tw_service_poll(svc), 0);
		CHECK_EQ(atomic_load(&j.runs), 0);
		atomic_store(&gap.now, 2000);
		CHECK_EQ(tw_service_poll(svc), 1);
	}
	CHECK_EQ(atomic_load(&j.runs), 1);
	CHECK(!tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 1, 1, 0);
	tw_service_destroy(svc);
	sem_destroy(&gap.parked);
	sem_destroy(&gap.go);
}

static void test_an_add_while_a_poll_stores_its_time_runs_at_its_tick(void)
{
	add_in_the_gap(false);
	add_in_the_gap(true);
}

int main(int argc, char **argv)
{
	sp_install();
	races_only = argc > 1 ? argv[1] : NULL;
	RUN_SELECTED(test_an_add_range_files_its_window_as_of_one_time);
	RUN_SELECTED(test_a_reschedule_range_files_its_window_as_of_one_time);
	RUN_SELECTED(test_an_add_while_a_poll_stores_its_time_runs_at_its_tick);
	return races_report();
}
