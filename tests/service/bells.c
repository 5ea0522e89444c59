/* SPDX-License-Identifier: MIT */
/*
 * Where the reaper and the executors sleep (src/service/bell.h): no ring
 * is lost in the window between a sleeper letting go of its mutex and its
 * sleep. Forced: the sleeper is parked right there ("bell.counted", its
 * condition found false, the mutex let go, not asleep yet) while another
 * thread makes the condition true and rings ("bell.rung"); released, its
 * sleep must return at once, and what it was woken for must happen. A
 * bell that looked at its ring count only when it went to sleep, after
 * the park, would sleep through that ring: an executor with a timer
 * queued, a reaper with a timer due, until shutdown woke them.
 */
#define _POSIX_C_SOURCE 200809L

#include "forced_jobs.h"
#include "service/core.h"

static void note_rung(const void *obj, void *arg)
{
	(void)obj;
	atomic_store((atomic_int *)arg, 1);
}

/* Until *flag is set, or 10 s. */
static bool soon(atomic_int *flag)
{
	for (int ms = 0; ms < 10000; ms++) {
		struct timespec step = { 0, 1000000 };

		if (atomic_load(flag))
			return true;
		nanosleep(&step, NULL);
	}
	return atomic_load(flag) != 0;
}

/* The sleeper parked at slot counted: an add of j due in a millisecond
 * rings bell meanwhile; released, the sleeper must go on to run j. */
static void ring_while_parked(struct tw_service *svc,
			      const struct tw__bell *bell, int counted,
			      struct job *j)
{
	atomic_int rang = 0;

	sp_on("bell.rung", bell, note_rung, &rang);
	CHECK_EQ(tw_service_add_in(svc, &j->t, TW_MS(1)), TW_OK);
	CHECK(soon(&rang));
	if (!atomic_load(&rang))
		sp_forget("bell.rung", bell); /* rang is about to go */
	sp_release(counted);
	CHECK(soon(&j->finished));
}

static struct tw_service *threaded(unsigned executors)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;

	cfg.executors = executors;
	cfg.shards = 1;
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	return svc;
}

/* The executor parked between counting itself a sleeper and its sleep;
 * the reaper queues a timer and rings meanwhile. */
static void test_an_executor_about_to_sleep_takes_what_was_posted_meanwhile(void)
{
	struct tw_service *svc = threaded(1);
	struct job first, j;
	int counted;

	job_init(&first);
	job_init(&j);
	/* A timer already due (time 0 is past) sends the executor round
	 * its loop, so that it comes to the armed point after the arming.
	 * Parked on its way into its first sleep instead, before it took
	 * that timer, it goes round once more: the shard it has not taken
	 * would not be posted again for the second timer. */
	counted = sp_arm("bell.counted", &svc->work_bell);
	CHECK_EQ(tw_service_add(svc, &first.t, 0), TW_OK);
	CHECK(sp_wait(counted, NULL));
	if (!atomic_load(&first.finished)) {
		int again = sp_arm("bell.counted", &svc->work_bell);

		sp_release(counted);
		counted = again;
		CHECK(sp_wait(counted, NULL));
		CHECK(atomic_load(&first.finished));
	}
	ring_while_parked(svc, &svc->work_bell, counted, &j);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 2, 2, 0);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

/* The reaper, with nothing pending, parked on its way into a sleep with
 * no limit; an add of a timer due in a millisecond kicks it meanwhile. */
static void test_a_reaper_about_to_sleep_runs_what_an_add_kicked_it_for(void)
{
	struct tw_service *svc = threaded(0);
	struct job j;
	int counted;

	job_init(&j);
	counted = sp_arm("bell.counted", &svc->reaper_bell);
	tw_service_kick(svc); /* round its loop once, as above */
	CHECK(sp_wait(counted, NULL));
	ring_while_parked(svc, &svc->reaper_bell, counted, &j);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 1, 1, 0);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

static int64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A timed sleep that no ring ends lasts its whole limit, the reaper's
 * sleep until its next expiry: under a second, over one, and over one by
 * less than a second. The time reaches the kernel in the layout the call
 * reads, whatever the C library's time_t: a 32-bit build with a 64-bit
 * time_t that handed its own struct timespec to the 32-bit futex call
 * would sleep {0 s, 0 ns} for the first (the reaper spinning until its
 * timer is due) and 1 s for the last. A futex sleep wakes early only for
 * a ring or a signal, and nothing rings or signals here. */
static void test_a_timed_sleep_no_ring_ends_lasts_its_limit(void)
{
	const int64_t limits[] = { TW_MS(30), TW_MS(400), TW_MS(1100) };
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct tw__bell bell;

	tw__bell_init(&bell);
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		int64_t start = monotonic_ns(), slept;

		tw__bell_wait(&bell, &mu, limits[i]);
		slept = monotonic_ns() - start;
		if (slept < limits[i])
			fprintf(stderr, "a sleep of %lld ns lasted %lld ns\n",
				(long long)limits[i], (long long)slept);
		CHECK(slept >= limits[i]);
	}
	pthread_mutex_unlock(&mu);
	tw__bell_destroy(&bell);
}

int main(int argc, char **argv)
{
	races_only = argc > 1 ? argv[1] : NULL;
	sp_install();
#ifdef __linux__
	RUN_SELECTED(test_an_executor_about_to_sleep_takes_what_was_posted_meanwhile);
	RUN_SELECTED(test_a_reaper_about_to_sleep_runs_what_an_add_kicked_it_for);
	RUN_SELECTED(test_a_timed_sleep_no_ring_ends_lasts_its_limit);
#else
	/* Elsewhere a bell is a condition variable: its sleeper lets go of
	 * the mutex and sleeps in one call, so there is no point between
	 * the two to park it at, and its timed wait may wake spuriously. */
	fprintf(stderr, "bells: the futex bell is Linux's; nothing to force here\n");
#endif
	return races_report();
}
