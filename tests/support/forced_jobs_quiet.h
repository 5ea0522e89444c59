/* SPDX-License-Identifier: MIT */
/*
 * The fixtures of the service's tests forced at the test points that
 * check counts and park quietly (tests/service/: cancels_across_services.c,
 * runs_and_reinits.c, loop_wakes_and_cancel_reports.c; the test-point
 * build): the stop points, the virtual clock, a job (a service timer that
 * counts its runs and takes an action of the test's, on another timer
 * and maybe another service), the exactly-once check of a service's
 * counts, a park the harness cannot see through (quiet_*), a check that
 * freed memory was poisoned, and RUN_SELECTED (with an argument, only the
 * test of that name).
 */
#ifndef TW_TEST_FORCED_JOBS_QUIET_H
#define TW_TEST_FORCED_JOBS_QUIET_H

#include "stop_points.h"

#include "check.h"
#include "virtual_clock.h"

struct job {
	struct tw_service_timer t;
	atomic_int runs;
	atomic_int finished;
	atomic_int result;
	struct job *other;             /* what its callback cancels ... */
	struct tw_service *other_svc;  /* ... and in which service */
	void (*action)(struct tw_service *svc, struct job *self);
};

static inline void job_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, t);

	atomic_fetch_add(&j->runs, 1);
	if (j->action)
		j->action(svc, j);
	atomic_store(&j->finished, 1);
}

static inline void job_init(struct job *j)
{
	memset(j, 0, sizeof(*j));
	tw_service_timer_init(&j->t, job_run);
	atomic_store(&j->result, -1000);
}

/* Every add ended in exactly one of the three ways (after shutdown). */
static inline void check_exactly_once(struct tw_service *svc)
{
	struct tw_service_stats st;

	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
}

/*
 * A park the test point harness cannot see through: the thread spins on a
 * relaxed flag instead of waiting on sp_mu. sp_arm's mutex would order the
 * parked thread's later reads after everything the test did meanwhile, and
 * ThreadSanitizer would then see no race where the library has one; with
 * relaxed flags only the library's own synchronisation orders them.
 */
static const char *quiet_point;
static const void *quiet_obj;
static atomic_int quiet_arrived, quiet_go;

static inline void quiet_hook(const char *point, const void *obj)
{
	if (obj == quiet_obj && strcmp(point, quiet_point) == 0 &&
	    !atomic_load_explicit(&quiet_go, memory_order_relaxed)) {
		atomic_store_explicit(&quiet_arrived, 1, memory_order_relaxed);
		while (!atomic_load_explicit(&quiet_go, memory_order_relaxed))
			sched_yield();
		return;
	}
	sp_hook(point, obj);
}

static inline void quiet_arm(const char *point, const void *obj)
{
	quiet_point = point;
	quiet_obj = obj;
	atomic_store(&quiet_arrived, 0);
	atomic_store(&quiet_go, 0);
	tw__test_set_hook(quiet_hook); /* publishes point and obj */
}

static inline void quiet_wait(const char *what)
{
	WAIT_FOR(atomic_load_explicit(&quiet_arrived, memory_order_relaxed), what);
}

static inline void quiet_release(void)
{
	atomic_store_explicit(&quiet_go, 1, memory_order_relaxed);
}

/* After the parked thread was joined (the join orders everything). */
static inline void quiet_disarm(void)
{
	sp_install();
}


#define POISON 0x84 /* a state word of 0x84848484 reads as DEFERRED (4) */

static inline bool all_poison(const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != POISON)
			return false;
	return true;
}

static const char *only; /* argv[1]: run just this test */

#define RUN_SELECTED(test)                                                  \
	do {                                                                \
		if (!only || strcmp(only, #test) == 0)                      \
			RUN(test);                                          \
	} while (0)

#endif
