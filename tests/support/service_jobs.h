/* SPDX-License-Identifier: MIT */
/*
 * The fixtures of the timer service's contract tests (tests/service/:
 * add_cancel_reschedule.c, windows.c, manual_loop.c,
 * executors_and_back_pressure.c): a job (a service timer or periodic
 * timer with what its runs saw, and an action its callback takes), the
 * order jobs ran in, a manual service on the virtual clock
 * (virtual_clock.h: tick 10, 8 buckets, the clock at 1000), a job that
 * frees itself and a hand_back that notes the ids.
 */
#ifndef TW_TEST_SERVICE_JOBS_H
#define TW_TEST_SERVICE_JOBS_H

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "virtual_clock.h"

struct job {
	union {                          /* p.timer is t: periodic jobs */
		struct tw_service_periodic p;
		struct tw_service_timer t;
	};
	int id;
	atomic_int runs;
	int64_t ran_at;   /* clock at the last run */
	int64_t due_seen; /* periodic jobs: its period's due time at the
			     last run (the grid, which the wheel's own
			     due time, in ticks, does not keep) */
	void (*action)(struct tw_service *svc, struct job *self);
	struct job *other;
	int result;
};

static int order[256];
static atomic_int norder;

static inline void on_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, t);
	int n = atomic_fetch_add(&norder, 1);

	if (n < 256)
		order[n] = j->id;
	j->ran_at = tw_service_now(svc);
	j->due_seen = j->p.due; /* one-shot jobs: 0, from job_init */
	atomic_fetch_add(&j->runs, 1);
	if (j->action)
		j->action(svc, j);
}

static inline void job_init(struct job *j, int id, int64_t period)
{
	memset(j, 0, sizeof(*j));
	j->id = id;
	if (period > 0)
		tw_service_periodic_init(&j->p, on_run, period);
	else
		tw_service_timer_init(&j->t, on_run);
}

static inline struct tw_service *manual_service(unsigned executors)
{
	atomic_store(&norder, 0);
	return service(true, executors);
}
static atomic_int freed;

static inline void act_free_self(struct tw_service *svc, struct job *self)
{
	(void)svc;
	free(self);
	atomic_fetch_add(&freed, 1);
}

static int handed[64];
static int nhanded;

static inline void hand_back(struct tw_service_timer *t, void *arg)
{
	CHECK(arg == (void *)&nhanded);
	if (nhanded < 64)
		handed[nhanded++] = tw_container_of(t, struct job, t)->id;
}

#endif
