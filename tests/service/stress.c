/* SPDX-License-Identifier: MIT */
/*
 * Every add ends exactly once, under stress: several threads add, cancel
 * and reschedule a shared pool of timers (any thread may touch any
 * timer; half the reschedules and half the owned adds with a window)
 * while the reaper and executors expire them on the real clock;
 * callbacks re-add timers too. At the end,
 * after shutdown, every add is accounted for exactly once:
 *
 *     adds == runs + cancels that returned STOPPED + timers handed back
 *
 * per timer and in total: zero lost, zero doubled. Each thread also owns
 * timers it allocates, adds, stops with cancel_sync at a random moment
 * (before, around or after expiry), checks (it ran exactly once, never
 * early, or cancel_sync stopped it) and then scribbles over and frees: a
 * service that still touched one afterwards is a use-after-free that ASan
 * (make sanitize) and TSan (make tsan) report. Built with
 * ThreadSanitizer by `make tsan`; `make soak` runs it for minutes.
 *
 * Built as service_stress_shaken (TW_SHAKE, the timingwheel_hooks
 * library), it also shakes the schedule: at every named point of the
 * protocol a thread yields or sleeps a few microseconds with a seeded
 * probability (tests/support/stop_points.h), in the style of PCT, so that
 * windows of a few instructions are entered far more often than timing
 * alone would.
 *
 * usage: service_stress [TOTAL_OPS [THREADS [EXECUTORS [SHARDS
 *                       [SEED [PERCENT]]]]]]
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#ifdef TW_SHAKE
#include "stop_points.h"
#endif

#define POOL 4096

struct item {
	struct tw_service_timer t;
	atomic_long adds, runs, stopped, handed;
	bool readd;         /* its callback adds it again, once a two runs */
};

static struct item pool[POOL];
static struct tw_service *svc;
static long ops_per_thread;

static void on_run(struct tw_service *s, struct tw_service_timer *t)
{
	struct item *it = tw_container_of(t, struct item, t);

	/* An add from the callback races the producers' calls on the timer.
	 * Every other run, not every run: a timer that re-adds itself after
	 * every run fires on every tick until shutdown, and 512 of them kept
	 * the reaper from ever catching up under valgrind (its producers
	 * waited minutes for their shard's lock). */
	if ((atomic_fetch_add(&it->runs, 1) & 1) == 0 && it->readd &&
	    tw_service_add_in(s, t, 20000) == TW_OK)
		atomic_fetch_add(&it->adds, 1);
}

/* A timer one thread owns from malloc to free. */
struct owned {
	struct tw_service_timer t;
	atomic_int runs;
	int64_t due;
};

static atomic_long owned_adds, owned_runs, owned_stopped;

static void on_owned(struct tw_service *s, struct tw_service_timer *t)
{
	struct owned *o = tw_container_of(t, struct owned, t);

	CHECK(tw_service_now(s) >= o->due); /* never early */
	sched_yield(); /* a callback that takes a while: cancel_sync waits */
	atomic_fetch_add(&o->runs, 1);
}

static void owned_round(uint64_t *seed)
{
	struct owned *o = malloc(sizeof(*o));
	int rc;

	CHECK(o != NULL);
	memset(o, 0, sizeof(*o));
	tw_service_timer_init(&o->t, on_owned);
	o->due = tw_service_now(svc) + (int64_t)(test_rand(seed) % 50000);
	/* Half with a window of up to 1 ms: never before due. */
	if (test_rand(seed) % 2)
		CHECK_EQ(tw_service_add_range(svc, &o->t, o->due,
					      o->due + (int64_t)(test_rand(seed) % 1000000)),
			 TW_OK);
	else
		CHECK_EQ(tw_service_add(svc, &o->t, o->due), TW_OK);
	atomic_fetch_add(&owned_adds, 1);
	switch (test_rand(seed) % 4) {
	case 0:
		break; /* almost surely still pending */
	case 1:
		sched_yield();
		break;
	case 2: /* at its expiry: maybe queued or running */
		while (tw_service_now(svc) < o->due)
			;
		break;
	default: /* after: maybe running or done */
		while (tw_service_now(svc) < o->due + 100000)
			;
		break;
	}
	rc = tw_service_cancel_sync(svc, &o->t);
	if (rc == TW_SVC_STOPPED) {
		CHECK_EQ(atomic_load(&o->runs), 0);
		atomic_fetch_add(&owned_stopped, 1);
	} else {
		CHECK(rc == TW_SVC_IDLE || rc == TW_SVC_RUNNING);
		CHECK_EQ(atomic_load(&o->runs), 1);
		atomic_fetch_add(&owned_runs, 1);
	}
	memset(o, 0x5a, sizeof(*o));
	free(o);
}

static void account(struct item *it, int result)
{
	if (result == TW_SVC_STOPPED)
		atomic_fetch_add(&it->stopped, 1);
}

static void *producer(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;

	for (long i = 0; i < ops_per_thread; i++) {
		struct item *it = &pool[test_rand(&seed) % POOL];
		int64_t delay = (int64_t)(test_rand(&seed) % 2000000); /* 0..2 ms */
		int rc;

		switch (test_rand(&seed) % 9) {
		case 8:
			owned_round(&seed);
			break;
		case 0:
		case 1:
		case 4:
		case 5:
			rc = tw_service_add_in(svc, &it->t, delay);
			if (rc == TW_OK)
				atomic_fetch_add(&it->adds, 1);
			else
				CHECK(rc == TW_EBUSY);
			break;
		case 2:
		case 6:
			rc = tw_service_cancel(svc, &it->t);
			CHECK(rc >= 0);
			account(it, rc);
			break;
		default:
			/* Half of the reschedules to a window of up to 2 ms:
			 * apply's two loads raced by the next reschedule. */
			if (test_rand(&seed) % 2) {
				int64_t at = tw_service_now(svc) + delay;

				rc = tw_service_reschedule_range(
					svc, &it->t, at,
					at + (int64_t)(test_rand(&seed) % 2000000));
			} else {
				rc = tw_service_reschedule(svc, &it->t,
							   tw_service_now(svc) + delay);
			}
			CHECK(rc >= 0);
			account(it, rc);
			atomic_fetch_add(&it->adds, 1);
			break;
		}
	}
	return NULL;
}

static void hand_back(struct tw_service_timer *t, void *arg)
{
	(void)arg;
	atomic_fetch_add(&tw_container_of(t, struct item, t)->handed, 1);
}

static long total_ops = 1000000;
static unsigned nthreads = 4, nexecutors = 2, nshards = 4;

static void test_every_add_ends_exactly_once(void)
{
	struct tw_service_config cfg = { 0 };
	pthread_t th[64];
	long adds = 0, ends = 0;
	struct tw_service_stats st;

	cfg.tick = 100000; /* 0.1 ms: many buckets fire during the run */
	cfg.executors = nexecutors;
	cfg.shards = nshards;
	cfg.queue_capacity = 256; /* small: the full-queue path runs too */
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	for (int i = 0; i < POOL; i++) {
		memset(&pool[i], 0, sizeof(pool[i]));
		tw_service_timer_init(&pool[i].t, on_run);
		pool[i].readd = i % 8 == 0;
	}
	ops_per_thread = total_ops / (long)nthreads;
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, producer, (void *)(uintptr_t)(i + 1));
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	CHECK(tw_service_shutdown(svc, hand_back, NULL) >= 0);

	for (int i = 0; i < POOL; i++) {
		struct item *it = &pool[i];
		long end = atomic_load(&it->runs) + atomic_load(&it->stopped) +
			   atomic_load(&it->handed);

		if (end != atomic_load(&it->adds)) {
			fprintf(stderr, "timer %d: %ld adds, %ld runs, %ld stopped, "
				"%ld handed back\n", i, atomic_load(&it->adds),
				atomic_load(&it->runs), atomic_load(&it->stopped),
				atomic_load(&it->handed));
			CHECK(!"an add did not end exactly once");
			break;
		}
		adds += atomic_load(&it->adds);
		ends += end;
	}
	CHECK_EQ(adds, ends);
	CHECK_EQ(atomic_load(&owned_adds),
		 atomic_load(&owned_runs) + atomic_load(&owned_stopped));
	adds += atomic_load(&owned_adds);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, (uint64_t)adds);
	CHECK_EQ(st.ran + st.stopped + st.handed_back, (uint64_t)adds);
	printf("stress: %ld ops on %u threads, %u executors, %u shards: %ld adds = "
	       "%llu ran + %llu stopped + %llu handed back (%llu run by the reaper "
	       "when the queue was full, %llu reaper wake-ups; owned timers: "
	       "%ld ran, %ld stopped by cancel_sync and freed)\n",
	       total_ops, nthreads, nexecutors, nshards, adds,
	       (unsigned long long)st.ran, (unsigned long long)st.stopped,
	       (unsigned long long)st.handed_back, (unsigned long long)st.caller_ran,
	       (unsigned long long)st.wakeups, atomic_load(&owned_runs),
	       atomic_load(&owned_stopped));
	tw_service_destroy(svc);
}

/*
 * A timer never runs beside itself (service.h). Periodic and one-shot
 * timers, rescheduled from every producer thread and from callbacks (of
 * the timer itself and of others), with at least two executors and a
 * small queue (the reaper runs callbacks too when it is full), then
 * 20,000 runs of the callbacks rescheduling alone: each callback counts
 * itself in and out of its timer, and one that finds another run of its
 * timer under way is an overlap. Callbacks last a few yields, so that
 * expiries come due while a run of their timer goes on.
 */
#define NPER 64
#define NONE_SHOT 64

struct solo {
	struct tw_service_periodic p; /* period 0: one-shot */
	atomic_int inside;
	atomic_long runs;
};

static struct solo solos[NPER + NONE_SHOT];
static atomic_long solo_overlaps, solo_runs, solo_handed_back;
static struct tw_service *solo_svc;
static long solo_ops;

static uint64_t solo_seed_of(const void *p)
{
	return (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL | 1;
}

static void solo_run(struct tw_service *s, struct tw_service_timer *t)
{
	struct solo *o = tw_container_of(t, struct solo, p.timer);
	static _Thread_local uint64_t seed;
	int rc = 0;

	if (!seed)
		seed = solo_seed_of(&seed);
	if (atomic_fetch_add(&o->inside, 1))
		atomic_fetch_add(&solo_overlaps, 1);
	atomic_fetch_add(&o->runs, 1);
	atomic_fetch_add(&solo_runs, 1);
	switch (test_rand(&seed) % 4) {
	case 0:
	case 1: /* itself, due at once or soon: its expiry may come now */
		rc = tw_service_reschedule(s, t, tw_service_now(s) +
					   (int64_t)(test_rand(&seed) % 50000));
		break;
	case 2: { /* another timer */
		struct solo *other = &solos[test_rand(&seed) % (NPER + NONE_SHOT)];

		rc = tw_service_reschedule(s, &other->p.timer, tw_service_now(s) +
					   (int64_t)(test_rand(&seed) % 200000));
		break;
	}
	default:
		break;
	}
	/* The executors run what is queued after shutdown began. */
	CHECK(rc >= 0 || rc == TW_ESHUTDOWN);
	for (int i = 0; i < 5; i++)
		sched_yield();
	atomic_fetch_sub(&o->inside, 1);
}

static void *solo_producer(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 7;

	for (long i = 0; i < solo_ops; i++) {
		struct solo *o = &solos[test_rand(&seed) % (NPER + NONE_SHOT)];
		int64_t at = tw_service_now(solo_svc) +
			     (int64_t)(test_rand(&seed) % 300000);

		if (test_rand(&seed) % 16 == 0)
			CHECK(tw_service_cancel(solo_svc, &o->p.timer) >= 0);
		else
			CHECK(tw_service_reschedule(solo_svc, &o->p.timer, at) >= 0);
		if (test_rand(&seed) % 8 == 0)
			sched_yield();
	}
	return NULL;
}

static void solo_hand_back(struct tw_service_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	atomic_fetch_add(&solo_handed_back, 1);
}

#ifdef TW_SHAKE
static atomic_long run_going_on; /* adds that found their timer running */

static void counting_hook(const char *point, const void *obj)
{
	if (!strcmp(point, "add.run_going_on"))
		atomic_fetch_add(&run_going_on, 1);
	sp_hook(point, obj);
}
#endif

static void test_no_timer_runs_beside_itself(void)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service_stats st;
	pthread_t th[64];

	cfg.tick = 100000;
	cfg.executors = nexecutors < 2 ? 2 : nexecutors;
	cfg.shards = nshards;
	cfg.queue_capacity = 16;
	CHECK_EQ(tw_service_create(&solo_svc, &cfg), TW_OK);
	for (int i = 0; i < NPER + NONE_SHOT; i++) {
		memset(&solos[i], 0, sizeof(solos[i]));
		tw_service_periodic_init(&solos[i].p, solo_run,
					 i < NPER ? 100000 + 5000 * i : 0);
	}
	solo_ops = total_ops / 4 / (long)nthreads;
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, solo_producer, (void *)(uintptr_t)(i + 1));
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	/* Then the callbacks alone, for 20,000 runs more: every periodic
	 * timer due now (the producers may have cancelled any), and each
	 * run reschedules itself or another timer. A count of runs, not a
	 * time: periodic timers run for ever, however late. */
	{
		long target = atomic_load(&solo_runs) + 20000;

		for (int i = 0; i < NPER; i++)
			CHECK(tw_service_reschedule(solo_svc, &solos[i].p.timer,
						    tw_service_now(solo_svc)) >= 0);
		while (atomic_load(&solo_runs) < target)
			sched_yield();
	}
	CHECK(tw_service_shutdown(solo_svc, solo_hand_back, NULL) >= 0);
	tw_service_stats(solo_svc, &st);
	CHECK_EQ(atomic_load(&solo_overlaps), 0);
	CHECK_EQ(st.ran, (uint64_t)atomic_load(&solo_runs));
	CHECK_EQ(st.handed_back, (uint64_t)atomic_load(&solo_handed_back));
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	printf("one run at a time: %ld reschedules and cancels on %u threads, "
	       "%u executors: %ld runs of %d timers (%d periodic), %ld "
	       "overlapping"
#ifdef TW_SHAKE
	       ", %ld adds that found their timer's callback running (deferred"
	       " to its end)"
#endif
	       "\n", solo_ops * (long)nthreads, nthreads, cfg.executors,
	       atomic_load(&solo_runs), NPER + NONE_SHOT, NPER,
	       atomic_load(&solo_overlaps)
#ifdef TW_SHAKE
	       , atomic_load(&run_going_on)
#endif
	       );
	tw_service_destroy(solo_svc);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		total_ops = strtol(argv[1], NULL, 10);
	if (argc > 2)
		nthreads = (unsigned)strtoul(argv[2], NULL, 10);
	if (argc > 3)
		nexecutors = (unsigned)strtoul(argv[3], NULL, 10);
	if (argc > 4)
		nshards = (unsigned)strtoul(argv[4], NULL, 10);
	if (nthreads < 1 || nthreads > 64)
		nthreads = 4;
#ifdef TW_SHAKE
	{
		uint64_t seed = argc > 5 ? strtoull(argv[5], NULL, 10) : 1;
		unsigned pct = argc > 6 ? (unsigned)strtoul(argv[6], NULL, 10) : 5;
		struct timespec t0, t1;
		double secs;

		tw__test_set_hook(counting_hook);
		sp_shake(seed ? seed : 1, pct);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		RUN(test_every_add_ends_exactly_once);
		RUN(test_no_timer_runs_beside_itself);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
		printf("shaken: seed %llu, %u%%: %llu test points passed, %llu "
		       "schedule perturbations (%.0f/s) in %.2f s\n",
		       (unsigned long long)seed, pct,
		       (unsigned long long)atomic_load(&sp_hits),
		       (unsigned long long)atomic_load(&sp_perturbed),
		       (double)atomic_load(&sp_perturbed) / secs, secs);
	}
#else
	RUN(test_every_add_ends_exactly_once);
	RUN(test_no_timer_runs_beside_itself);
#endif
	return check_report();
}
