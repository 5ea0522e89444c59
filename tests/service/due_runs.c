/* SPDX-License-Identifier: MIT */
/*
 * A service's wheel hands the due runs of a level-1 bucket to the
 * service whole (wheel/for_service.h). Such a bucket can also hold a
 * timer that a reschedule to a later tick left in it. That timer must
 * stop the run and wait for its own tick, and every timer before and
 * after it must run once, at its tick. Three ways: the polling thread
 * runs everything (no executors), one executor runs it, and one executor
 * with room for a few timers, so that the rest spill over to the
 * polling thread in the middle of a run. The bucket holds more timers
 * than a batch, so the advance also stops and goes on part way.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>
#include <time.h>

#include "check.h"
#include "virtual_clock.h"

#define N 300
#define DUE 1500
#define LATER 1530 /* a later tick of the same level-1 bucket's reach */

struct item {
	struct tw_service_timer t;
	_Atomic int runs;
	_Atomic int64_t ran_at;
};

static struct item items[N];
static atomic_long ran;

static void on_expire(struct tw_service *svc, struct tw_service_timer *t)
{
	struct item *it = tw_container_of(t, struct item, t);

	(void)svc;
	atomic_store(&it->ran_at, virtual_clock(NULL));
	atomic_fetch_add(&it->runs, 1);
	atomic_fetch_add(&ran, 1);
}

/* The timers a reschedule moves later: scattered over the bucket's
 * list, one of them first and one last. */
static bool moved_later(size_t i)
{
	return i == 0 || i % 37 == 5 || i == N - 1;
}

static long moved_count(void)
{
	long k = 0;

	for (size_t i = 0; i < N; i++)
		k += moved_later(i);
	return k;
}

/* Wait (up to 10 s) until `want` callbacks have run. */
static void wait_for_runs(long want)
{
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; i < 10000 && atomic_load(&ran) < want; i++)
		nanosleep(&ms, NULL);
}

static void runs_with(unsigned executors, size_t queue_capacity)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	long later = moved_count();

	cfg.tick = 10;
	cfg.manual = true;
	cfg.executors = executors;
	cfg.queue_capacity = queue_capacity;
	cfg.clock.now = virtual_clock;
	set_clock(1000);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	atomic_store(&ran, 0);
	for (size_t i = 0; i < N; i++) {
		atomic_store(&items[i].runs, 0);
		atomic_store(&items[i].ran_at, -1);
		tw_service_timer_init(&items[i].t, on_expire);
		CHECK_EQ(tw_service_add(svc, &items[i].t, DUE), TW_OK);
	}
	/* Pending, moved later: they stay in their bucket, due after it. */
	for (size_t i = 0; i < N; i++)
		if (moved_later(i))
			CHECK_EQ(tw_service_reschedule(svc, &items[i].t, LATER), 1);

	set_clock(DUE);
	tw_service_poll(svc);
	wait_for_runs(N - later);
	CHECK_EQ(atomic_load(&ran), N - later);
	for (size_t i = 0; i < N; i++) {
		int runs = atomic_load(&items[i].runs);

		if (moved_later(i) ? runs != 0 : runs != 1 ||
						 atomic_load(&items[i].ran_at) != DUE) {
			fprintf(stderr, "timer %zu: %d runs, at %lld\n", i, runs,
				(long long)atomic_load(&items[i].ran_at));
			CHECK(!"a timer ran other than once at its tick");
			break;
		}
	}

	/* Nothing before their tick, then each once. */
	set_clock(LATER - 1);
	tw_service_poll(svc);
	CHECK_EQ(atomic_load(&ran), N - later);
	set_clock(LATER);
	tw_service_poll(svc);
	wait_for_runs(N);
	CHECK_EQ(atomic_load(&ran), N);
	for (size_t i = 0; i < N; i++)
		if (moved_later(i)) {
			CHECK_EQ(atomic_load(&items[i].runs), 1);
			CHECK_EQ(atomic_load(&items[i].ran_at), LATER);
		}
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

static void test_a_later_timer_in_a_due_run_waits_on_the_polling_thread(void)
{
	runs_with(0, 0);
}

static void test_a_later_timer_in_a_due_run_waits_with_an_executor(void)
{
	runs_with(1, 0);
}

static void test_a_later_timer_in_a_due_run_waits_past_a_full_queue(void)
{
	runs_with(1, 5);
}

int main(void)
{
	RUN(test_a_later_timer_in_a_due_run_waits_on_the_polling_thread);
	RUN(test_a_later_timer_in_a_due_run_waits_with_an_executor);
	RUN(test_a_later_timer_in_a_due_run_waits_past_a_full_queue);
	return check_report();
}
