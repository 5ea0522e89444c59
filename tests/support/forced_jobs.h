/* SPDX-License-Identifier: MIT */
/*
 * The fixtures of the tests forced at the test points that follow a
 * callback step by step (tests/service/: cancel_sync_and_teardown.c,
 * claims.c, one_run_at_a_time.c; tests/purgatory/
 * watch_check_and_shutdown.c; the test-point build): the stop points, the
 * virtual clock, and a job (a service timer whose callback counts its
 * runs, says when it is inside and finished, and takes an action of the
 * test's), a thread's call on a service and a job (struct svc_job), the
 * exactly-once count after shutdown (check_balanced), and RUN_SELECTED:
 * with a test's name as the program's argument, only that test runs.
 */
#ifndef TW_TEST_FORCED_JOBS_H
#define TW_TEST_FORCED_JOBS_H

#include "stop_points.h"

#include "check.h"
#include "virtual_clock.h"

struct job {
	struct tw_service_timer t;
	atomic_int runs;
	atomic_int in_callback, go, finished;
	atomic_int freed;       /* the owner let go of it */
	atomic_int result;
	struct job *other;
	void (*action)(struct tw_service *svc, struct job *self);
};

static inline void job_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, t);

	atomic_fetch_add(&j->runs, 1);
	if (j->action)
		j->action(svc, j); /* it says when it finished: it may free j */
	else
		atomic_store(&j->finished, 1);
}

static inline void job_init(struct job *j)
{
	memset(j, 0, sizeof(*j));
	tw_service_timer_init(&j->t, job_run);
}

/* argv[1], where a program takes it: run only the test of that name. */
/* A thread's call on a service and a job, and what it returned. */
struct svc_job {
	struct tw_service *svc;
	struct job *job;
	int64_t result;
};

/* After shutdown: the service's counts, and every add ended exactly once
 * (it ran, was stopped or was handed back). */
static inline void check_balanced(struct tw_service *svc, uint64_t added,
				  uint64_t ran, uint64_t stopped)
{
	struct tw_service_stats st;

	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, added);
	CHECK_EQ(st.ran, ran);
	CHECK_EQ(st.stopped, stopped);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
}

static const char *races_only __attribute__((unused));

#define RUN_SELECTED(test)                                                  \
	do {                                                                \
		if (!races_only || strcmp(races_only, #test) == 0)          \
			RUN(test);                                          \
	} while (0)

/* The end of a main() that ran its tests through RUN_SELECTED. */
static inline int races_report(void)
{
	if (tests_passed + tests_failed == 0) {
		fprintf(stderr, "no test named %s\n", races_only);
		return 2;
	}
	return check_report();
}

#endif
