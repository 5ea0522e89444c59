/* SPDX-License-Identifier: MIT */
/*
 * The reaper's sleep, checked by what it decides, not by how often it woke.
 *
 * A count of wake-ups over real time is a property of the machine as much
 * as of the library: a reaper that ThreadSanitizer or a busy host stalls
 * wakes more often, or less (one run in 13 under TSan failed such a
 * count). So these tests run a real reaper thread on an injected clock
 * that only the test moves, and read, at the test point
 * "reaper.sleeping", how long the reaper chose to sleep. With the clock
 * still, each decision is exact: the test moves the clock to the end of
 * the chosen sleep, kicks the reaper, and waits for its next decision,
 * which is the one a reaper woken by its own deadline would make. A stall
 * only delays a step; it cannot change what is decided or counted.
 *
 * (The reaper may also wake by itself when the real time of a sleep runs
 * out before the test moves the clock: it then finds nothing due at the
 * same time and decides the same sleep again, which the steps below
 * tolerate by waiting for a decision made after their own kick.)
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "check.h"
#include "service/core.h"
#include "test_point.h"
#include "virtual_clock.h"

/* ---- the reaper's decisions, seen at its test points ---- */

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_cv = PTHREAD_COND_INITIALIZER;
static _Atomic(const struct tw_service *) watched;
static uint64_t scans_begun;      /* "reaper.cleared": a scan is to start */
static uint64_t decided_after;    /* scans_begun at the last decision */
static atomic_int add_kicks;      /* "add.kicks": an add kicked the reaper */
static int64_t decided_ns;        /* that decision's sleep */
/* "reaper.drains": the reaper is to move the drains' shares its scan left
 * owed. With hold_drains set, the first time it comes with shares owed it
 * waits there (parked) until hold_drains is cleared. */
static bool hold_drains, parked;

/* The clock of the test of a time behind: on the reaper's second read
 * after a scan begins (the one it sleeps from; the scan of its one shard
 * takes the first) it reads 3 s behind, once, when armed. */
static atomic_int arm_behind, reads_to_behind;
#define BEHIND TW_S(3)

static int64_t clock_one_behind(void *arg)
{
	int64_t now = virtual_clock(arg);

	if (atomic_load(&reads_to_behind) > 0 &&
	    atomic_fetch_sub(&reads_to_behind, 1) == 1)
		return now - BEHIND;
	return now;
}

static void hook(const char *point, const void *obj)
{
	if (obj != atomic_load(&watched))
		return;
	if (strcmp(point, "reaper.cleared") == 0) {
		pthread_mutex_lock(&seen_mu);
		scans_begun++;
		pthread_mutex_unlock(&seen_mu);
		if (atomic_exchange(&arm_behind, 0))
			atomic_store(&reads_to_behind, 2);
	} else if (strcmp(point, "add.kicks") == 0) {
		atomic_fetch_add(&add_kicks, 1);
	} else if (strcmp(point, "reaper.drains") == 0) {
		struct shard *s = &((struct tw_service *)(uintptr_t)obj)->shards[0];
		bool owed;

		shard_lock(s);
		owed = tw__wheel_drains_owed(&s->wheel);
		shard_unlock(s);
		pthread_mutex_lock(&seen_mu);
		if (owed && hold_drains) {
			parked = true;
			pthread_cond_broadcast(&seen_cv);
			while (hold_drains)
				pthread_cond_wait(&seen_cv, &seen_mu);
		}
		pthread_mutex_unlock(&seen_mu);
	} else if (strcmp(point, "reaper.sleeping") == 0) {
		pthread_mutex_lock(&seen_mu);
		decided_after = scans_begun;
		decided_ns = tw__test_service_sleep_ns(obj);
		pthread_cond_broadcast(&seen_cv);
		pthread_mutex_unlock(&seen_mu);
	}
}

/* Kick the reaper and return the sleep it decides on after a scan that
 * began after the kick: a scan that saw everything the test did before.
 * -2 if none came within 10 s (a hung reaper, not a slow one). */
static int64_t next_decision(struct tw_service *svc)
{
	struct timespec until;
	uint64_t before;
	int64_t ns = -2;

	pthread_mutex_lock(&seen_mu);
	before = scans_begun;
	pthread_mutex_unlock(&seen_mu);
	tw_service_kick(svc);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60; /* a guard against a hang */
	pthread_mutex_lock(&seen_mu);
	while (decided_after <= before && !parked)
		if (pthread_cond_timedwait(&seen_cv, &seen_mu, &until))
			break;
	if (parked)
		ns = -3;
	else if (decided_after > before)
		ns = decided_ns;
	pthread_mutex_unlock(&seen_mu);
	return ns;
}

static struct tw_service *reaper_service_on(int64_t start, int64_t tick,
					    int64_t (*now)(void *))
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;

	cfg.tick = tick;
	cfg.wheel_size = 64;
	cfg.executors = 1;
	cfg.shards = 1; /* the clock read once per scan */
	cfg.clock.now = now;
	atomic_store(&virtual_now, start);
	pthread_mutex_lock(&seen_mu);
	scans_begun = decided_after = 0;
	decided_ns = 0;
	pthread_mutex_unlock(&seen_mu);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	atomic_store(&watched, svc);
	return svc;
}

static struct tw_service *reaper_service(int64_t start, int64_t tick)
{
	return reaper_service_on(start, tick, virtual_clock);
}

struct job {
	struct tw_service_timer t;
	atomic_int runs;
	_Atomic int64_t ran_at;
};

static void on_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, t);

	atomic_store(&j->ran_at, tw_service_now(svc));
	atomic_fetch_add(&j->runs, 1);
}

static void job_init(struct job *j)
{
	memset(j, 0, sizeof(*j));
	tw_service_timer_init(&j->t, on_run);
}

static bool all_ran(struct job *j, int n)
{
	struct timespec ms = { 0, 1000000 };

	for (int wait = 0; wait < 60000; wait++) { /* 60 s: a hang guard */
		int done = 0;

		for (int i = 0; i < n; i++)
			done += atomic_load(&j[i].runs) > 0;
		if (done == n)
			return true;
		nanosleep(&ms, NULL);
	}
	return false;
}

/* Follow the reaper from decision to decision, moving the clock to the end
 * of each sleep, until it sleeps until kicked; the number of sleeps that
 * ended with something due (at most `limit`, or -1). */
static int follow_the_reaper(struct tw_service *svc, int limit)
{
	int wakes = 0;
	int64_t ns = next_decision(svc);

	while (ns != -1) {
		if (ns < 0 || ++wakes > limit)
			return -1;
		atomic_fetch_add(&virtual_now, ns);
		ns = next_decision(svc);
	}
	return wakes;
}

/* 64 timers due 10 + i ms from now (i < 64), each allowed to 400 ms: the
 * reaper wakes once for them all (the level-1 bucket that pops at 384 ms
 * holds every window), where the same timers exact wake it for each
 * millisecond that holds one. */
static void test_reaper_wakes_once_for_overlapping_windows(void)
{
	static struct job j[64];
	int wakes[2];

	for (int windowed = 0; windowed < 2; windowed++) {
		int64_t start = TW_S(1000);
		struct tw_service *svc = reaper_service(start, TW_MS(1));

		for (int i = 0; i < 64; i++) {
			job_init(&j[i]);
			CHECK_EQ(tw_service_add_range(svc, &j[i].t,
						      start + TW_MS(10 + i),
						      start + (windowed ? TW_MS(400)
									: TW_MS(10 + i))),
				 TW_OK);
		}
		wakes[windowed] = follow_the_reaper(svc, 1000);
		CHECK(all_ran(j, 64));
		for (int i = 0; i < 64; i++) {
			CHECK_EQ(atomic_load(&j[i].runs), 1);
			CHECK(atomic_load(&j[i].ran_at) >= start + TW_MS(10 + i));
			if (windowed)
				CHECK(atomic_load(&j[i].ran_at) <= start + TW_MS(400));
		}
		CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
		tw_service_destroy(svc);
	}
	CHECK_EQ(wakes[0], 64);
	CHECK_EQ(wakes[1], 1);
}

/* Nothing due for an hour: the reaper sleeps until the far timer's bucket
 * (no ticking); an earlier add wakes it at once, and it sleeps then only
 * until the earlier timer. */
static void test_reaper_sleeps_and_is_woken_by_earlier_add(void)
{
	int64_t start = TW_S(1000);
	struct tw_service *svc = reaper_service(start, TW_MS(1));
	struct job far, near;
	int64_t ns;

	job_init(&far);
	job_init(&near);
	CHECK_EQ(tw_service_add_in(svc, &far.t, TW_S(3600)), TW_OK);
	ns = next_decision(svc);
	/* The level that holds an hour at 1 ms x 64 has buckets of 262 s:
	 * the far timer's pops 3,407.872 s from now, where it cascades. */
	CHECK(ns >= TW_S(3407));
	CHECK(ns <= TW_S(3600));
	CHECK_EQ(tw_service_add_in(svc, &near.t, TW_MS(5)), TW_OK);
	ns = next_decision(svc);
	CHECK_EQ(ns, TW_MS(5));
	atomic_fetch_add(&virtual_now, ns);
	ns = next_decision(svc);
	CHECK(all_ran(&near, 1));
	CHECK(atomic_load(&near.ran_at) >= start + TW_MS(5));
	CHECK_EQ(atomic_load(&far.runs), 0);
	/* And back to the far one. */
	CHECK(ns >= TW_S(3407) - TW_MS(5));
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	tw_service_destroy(svc);
}

/* The reaper sleeps until 5 ms, a tick of 1 ms: an add due at 4.3 ms
 * runs at the 5 ms tick (exact mode: never early, under a tick late), so
 * it does not kick the reaper; one due at 3.5 ms (its tick 4 ms, before
 * the reaper's wake-up) does, once; both run, never early. */
static void test_an_add_in_the_tick_the_reaper_wakes_for_does_not_kick(void)
{
	int64_t start = TW_S(1000);
	struct tw_service *svc = reaper_service(start, TW_MS(1));
	struct job first, same_tick, earlier;

	job_init(&first);
	job_init(&same_tick);
	job_init(&earlier);
	CHECK_EQ(tw_service_add(svc, &first.t, start + TW_MS(5)), TW_OK);
	CHECK_EQ(next_decision(svc), TW_MS(5));
	atomic_store(&add_kicks, 0);
	CHECK_EQ(tw_service_add(svc, &same_tick.t, start + TW_US(4300)), TW_OK);
	CHECK_EQ(atomic_load(&add_kicks), 0);
	CHECK_EQ(tw_service_reschedule(svc, &same_tick.t, start + TW_US(4700)),
		 TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&add_kicks), 0);
	CHECK_EQ(tw_service_add(svc, &earlier.t, start + TW_US(3500)), TW_OK);
	CHECK_EQ(atomic_load(&add_kicks), 1);
	CHECK_EQ(next_decision(svc), TW_MS(4));
	atomic_fetch_add(&virtual_now, TW_MS(4));
	CHECK_EQ(next_decision(svc), TW_MS(1));
	CHECK(all_ran(&earlier, 1));
	CHECK_EQ(atomic_load(&earlier.ran_at), start + TW_MS(4));
	CHECK_EQ(atomic_load(&same_tick.runs), 0);
	atomic_fetch_add(&virtual_now, TW_MS(1));
	next_decision(svc);
	CHECK(all_ran(&first, 1));
	CHECK(all_ran(&same_tick, 1));
	CHECK_EQ(atomic_load(&same_tick.ran_at), start + TW_MS(5));
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/* A bucket above level 1 that holds more than 2,048 timers drains in
 * shares from its pop on, and the wheel's next expiry names that pop
 * (src/wheel/exact.c, next_key_scan); a reaper that slept until the first
 * timer's tick would move the whole bucket in one scan while that timer
 * and the ones after it wait (1e6 timers over 2 s: 16,000 a bucket, some
 * 20 ms late). So the add that makes the bucket that big kicks the
 * reaper, although its own tick is no earlier than what the reaper saw,
 * and the reaper then sleeps only until the pop. Every timer runs at its
 * tick. */
static void test_an_add_that_makes_a_bucket_drain_in_shares_kicks(void)
{
	enum { MANY = 2049 };
	static struct job j[MANY];
	int64_t start = TW_S(1000), due = start + TW_MS(1000);
	struct tw_service *svc = reaper_service(start, TW_MS(1));
	int64_t ns;

	for (int i = 0; i < MANY; i++)
		job_init(&j[i]);
	CHECK_EQ(tw_service_add(svc, &j[0].t, due), TW_OK);
	CHECK_EQ(next_decision(svc), TW_MS(1000));
	atomic_store(&add_kicks, 0);
	for (int i = 1; i < MANY - 1; i++)
		CHECK_EQ(tw_service_add(svc, &j[i].t, due), TW_OK);
	CHECK_EQ(atomic_load(&add_kicks), 0); /* 2,048: one advance moves them */
	CHECK_EQ(tw_service_add(svc, &j[MANY - 1].t, due), TW_OK);
	CHECK_EQ(atomic_load(&add_kicks), 1);
	ns = next_decision(svc);
	CHECK(ns > 0);
	CHECK(ns < TW_MS(1000));
	CHECK(follow_the_reaper(svc, 1000) > 0);
	CHECK(all_ran(j, MANY));
	for (int i = 0; i < MANY; i++)
		CHECK_EQ(atomic_load(&j[i].ran_at), due);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/* With an executor, a tick's run is the executor's before the reaper
 * moves the drains' shares (wheel/for_service.h): its scan leaves them
 * owed, and while the reaper is held where it is to move them, the
 * executor runs every timer due by then. 300 timers due at 1 s fill a
 * bucket that drains in shares, and one timer is due every millisecond
 * before it; the reaper is held the first time it has shares owed, and
 * the shares move after. Every timer runs once, never early, the 300 at
 * their tick. */
static void test_an_executor_has_the_run_before_the_drains_shares(void)
{
	enum { MANY = 300, STEPS = 100 };
	static struct job j[MANY], step[STEPS];
	int64_t start = TW_S(1000), due = start + TW_MS(1000), now, ns;
	struct tw_service *svc = reaper_service(start, TW_MS(1));
	struct shard *s = &svc->shards[0];
	bool owed;
	int ran = 0, due_by_now = 0;

	for (int i = 0; i < MANY; i++) {
		job_init(&j[i]);
		CHECK_EQ(tw_service_add(svc, &j[i].t, due), TW_OK);
	}
	for (int k = 0; k < STEPS; k++) {
		job_init(&step[k]);
		CHECK_EQ(tw_service_add(svc, &step[k].t, due - TW_MS(STEPS - k)),
			 TW_OK);
	}
	pthread_mutex_lock(&seen_mu);
	hold_drains = true;
	parked = false;
	pthread_mutex_unlock(&seen_mu);
	ns = next_decision(svc);
	for (int wakes = 0; ns >= 0 && wakes < 2000; wakes++) {
		atomic_fetch_add(&virtual_now, ns);
		ns = next_decision(svc);
	}
	CHECK_EQ(ns, -3); /* parked at "reaper.drains" with shares owed */
	now = atomic_load(&virtual_now);
	for (int k = 0; k < STEPS; k++)
		if (due - TW_MS(STEPS - k) <= now)
			due_by_now++;
	CHECK(due_by_now > 0);
	CHECK(all_ran(step, due_by_now));
	shard_lock(s);
	owed = tw__wheel_drains_owed(&s->wheel);
	shard_unlock(s);
	CHECK(owed);
	pthread_mutex_lock(&seen_mu);
	hold_drains = false;
	parked = false;
	pthread_cond_broadcast(&seen_cv);
	pthread_mutex_unlock(&seen_mu);
	CHECK(follow_the_reaper(svc, 5000) > 0);
	CHECK(all_ran(j, MANY));
	CHECK(all_ran(step, STEPS));
	for (int i = 0; i < MANY; i++) {
		ran += atomic_load(&j[i].runs);
		CHECK_EQ(atomic_load(&j[i].ran_at), due);
	}
	/* Never early; the test may have moved the clock on before the
	 * executor ran one (the last tick's stay: nothing moves it after). */
	for (int k = 0; k < STEPS; k++) {
		ran += atomic_load(&step[k].runs);
		CHECK(atomic_load(&step[k].ran_at) >= due - TW_MS(STEPS - k));
	}
	CHECK_EQ(ran, MANY + STEPS);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/* An injected clock near INT64_MIN and a timer half way to INT64_MAX:
 * next - now does not fit an int64_t. Overflowed into a negative "due
 * already", it would make the reaper spin; the reaper sleeps its
 * longest. */
static void test_reaper_sleeps_with_a_clock_near_int64_min(void)
{
	struct tw_service *svc = reaper_service(INT64_MIN + 1000, 1000);
	struct job far;

	job_init(&far);
	CHECK_EQ(tw_service_add(svc, &far.t, INT64_MAX / 2), TW_OK);
	CHECK_EQ(next_decision(svc), TW_S(3600));
	CHECK_EQ(next_decision(svc), TW_S(3600)); /* and again: no spin */
	CHECK_EQ(atomic_load(&far.runs), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	tw_service_destroy(svc);
}

/* service.h: "A clock that goes back is tolerated: the service keeps the
 * latest time it read, and an earlier time changes nothing". The reaper
 * reads the clock again to size its sleep; without that rule there, one
 * time 3 s behind would make a timer due in 100 ms run 3 s late, and
 * clock_backwards would not count it. Every time read goes through the
 * rule. */
static void test_a_clock_behind_changes_no_sleep(void)
{
	int64_t start = TW_S(1000);
	struct tw_service *svc = reaper_service_on(start, TW_MS(1), clock_one_behind);
	struct tw_service_stats st;
	struct job a;

	job_init(&a);
	CHECK_EQ(tw_service_add(svc, &a.t, start + TW_MS(100)), TW_OK);
	CHECK_EQ(next_decision(svc), TW_MS(100));
	atomic_store(&arm_behind, 1);
	CHECK_EQ(next_decision(svc), TW_MS(100)); /* not 3.1 s */
	tw_service_stats(svc, &st);
	CHECK(st.clock_backwards >= 1);
	atomic_fetch_add(&virtual_now, TW_MS(100));
	next_decision(svc);
	CHECK(all_ran(&a, 1));
	CHECK_EQ(atomic_load(&a.ran_at), start + TW_MS(100));
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/* A timer pending at the end of time (due at INT64_MAX, or at a tick
 * boundary past it) is due when an injected clock reads INT64_MAX
 * (service.h lets a clock start anywhere; purgatory.h times an op out
 * there). A reaper that saw nothing pending sleeps until kicked, so the
 * first add due at INT64_MAX kicks it, and the next one does not; seeing
 * such a timer, it sleeps until the clock can read INT64_MAX (an hour at
 * a time at most), and runs it then. With ticks of 1 ns and of 1 s, and a
 * clock that reads INT64_MAX from the start. */
static void end_of_time(int64_t start, int64_t tick)
{
	struct tw_service *svc = reaper_service(start, tick);
	struct job end[2];
	int kicks;

	job_init(&end[0]);
	job_init(&end[1]);
	CHECK_EQ(next_decision(svc), -1); /* nothing pending: until kicked */
	kicks = atomic_load(&add_kicks);
	CHECK_EQ(tw_service_add(svc, &end[0].t, INT64_MAX), TW_OK);
	CHECK_EQ(atomic_load(&add_kicks), kicks + 1);
	CHECK_EQ(tw_service_add(svc, &end[1].t, INT64_MAX), TW_OK);
	if (start < INT64_MAX) {
		CHECK_EQ(atomic_load(&add_kicks), kicks + 1);
		CHECK_EQ(next_decision(svc), INT64_MAX - start);
		CHECK_EQ(atomic_load(&end[0].runs), 0);
		atomic_store(&virtual_now, INT64_MAX);
	}
	CHECK_EQ(next_decision(svc), -1); /* both run: nothing is pending */
	CHECK(all_ran(end, 2));
	CHECK_EQ(atomic_load(&end[0].ran_at), INT64_MAX);
	CHECK_EQ(atomic_load(&end[1].ran_at), INT64_MAX);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

static void test_a_timer_at_the_end_of_time_runs_when_the_clock_reads_it(void)
{
	end_of_time(INT64_MAX - TW_MS(200), 1);
	end_of_time(INT64_MAX - TW_MS(200), TW_S(1));
	end_of_time(INT64_MAX, 1);
	end_of_time(INT64_MAX, TW_S(1));
}

#ifdef __linux__
static atomic_long reaper_slack = -1;

static void note_slack(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	atomic_store(&reaper_slack, (long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
}

/* The reaper sleeps to the tick it fires at with a timer slack of 1 ns,
 * not Linux's default 50 us: a callback run on it (no executors, the
 * real clock) reads its thread's slack. */
static void test_the_reaper_sleeps_with_no_timer_slack(void)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc;
	struct tw_service_timer t;
	struct timespec now, pause = { 0, 1000000 };

	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	tw_service_timer_init(&t, note_slack);
	clock_gettime(CLOCK_MONOTONIC, &now);
	CHECK_EQ(tw_service_add(svc, &t, (int64_t)now.tv_sec * 1000000000 +
						  now.tv_nsec + 1000000),
		 TW_OK);
	for (int i = 0; i < 10000 && atomic_load(&reaper_slack) < 0; i++)
		nanosleep(&pause, NULL);
	CHECK_EQ(atomic_load(&reaper_slack), 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}
#endif

int main(void)
{
	tw__test_set_hook(hook);
	RUN(test_reaper_wakes_once_for_overlapping_windows);
	RUN(test_reaper_sleeps_and_is_woken_by_earlier_add);
	RUN(test_an_add_in_the_tick_the_reaper_wakes_for_does_not_kick);
	RUN(test_an_add_that_makes_a_bucket_drain_in_shares_kicks);
	RUN(test_an_executor_has_the_run_before_the_drains_shares);
	RUN(test_reaper_sleeps_with_a_clock_near_int64_min);
	RUN(test_a_clock_behind_changes_no_sleep);
	RUN(test_a_timer_at_the_end_of_time_runs_when_the_clock_reads_it);
#ifdef __linux__
	RUN(test_the_reaper_sleeps_with_no_timer_slack);
#endif
	return check_report();
}
