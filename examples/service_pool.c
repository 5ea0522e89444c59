/* SPDX-License-Identifier: MIT */
/*
 * Request deadlines in a thread pool, on the timer service.
 *
 * WORKERS threads each handle requests. Every request gets a deadline timer
 * when it starts; if the work is done first, the worker cancels the timer
 * (tw_service_cancel_sync, so the request may be freed at once), otherwise
 * the timer's callback, on one of the service's executor threads, answers
 * "timed out". Exactly one of the two answers each request: they race for
 * it with one compare-and-swap, and the service's exactly-once contract
 * (the callback runs, or cancel says it stopped it) is what makes the
 * accounting close. A periodic timer prints progress; shutdown hands it
 * back.
 *
 *     service_pool [REQUESTS_PER_WORKER]    (default 200)
 *
 * Exit status 0 when every request was answered exactly once and no
 * deadline fired early; 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <timingwheel/timingwheel.h>

enum { WORKERS = 4, DEADLINE_MS = 5, MAX_WORK_MS = 10 };

enum answer { UNANSWERED, DONE, TIMED_OUT };

struct request {
	atomic_int answer;
	int64_t deadline;
	struct tw_service_timer timeout;
};

static struct tw_service *svc;
static atomic_long answered_done, answered_timeout, double_answers, early;

static void on_deadline(struct tw_service *s, struct tw_service_timer *t)
{
	struct request *r = tw_container_of(t, struct request, timeout);
	int expected = UNANSWERED;

	if (tw_service_now(s) < r->deadline)
		early++;
	if (atomic_compare_exchange_strong(&r->answer, &expected, TIMED_OUT))
		answered_timeout++; /* "504 Gateway Timeout" */
	else
		double_answers++;   /* cannot happen: cancel_sync said STOPPED */
}

static void *worker(void *arg)
{
	long count = (long)(intptr_t)arg;
	unsigned seed = (unsigned)(uintptr_t)&count;

	for (long i = 0; i < count; i++) {
		struct request r = { .answer = UNANSWERED };
		struct timespec work = { 0, (long)TW_MS(rand_r(&seed) % MAX_WORK_MS) };
		int expected = UNANSWERED;
		int rc;

		tw_service_timer_init(&r.timeout, on_deadline);
		r.deadline = tw_service_now(svc) + TW_MS(DEADLINE_MS);
		if (tw_service_add(svc, &r.timeout, r.deadline))
			abort();
		nanosleep(&work, NULL); /* the request's work */

		/* Stopped: the callback will never run, so the answer is ours.
		 * Otherwise it ran (and answered); either way, once cancel_sync
		 * returns, r may go out of scope. */
		rc = tw_service_cancel_sync(svc, &r.timeout);
		if (rc == TW_SVC_STOPPED &&
		    atomic_compare_exchange_strong(&r.answer, &expected, DONE))
			answered_done++;
		else if (rc == TW_SVC_STOPPED)
			double_answers++;
	}
	return NULL;
}

static void on_progress(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	(void)t;
	printf("  progress: %ld done, %ld timed out\n", (long)answered_done,
	       (long)answered_timeout);
}

static void on_hand_back(struct tw_service_timer *t, void *arg)
{
	(void)t;
	++*(int *)arg;
}

int main(int argc, char **argv)
{
	long per_worker = argc > 1 ? atol(argv[1]) : 200;
	struct tw_service_config cfg = { .tick = TW_MS(1), .executors = 2 };
	struct tw_service_periodic progress;
	struct tw_service_stats stats;
	pthread_t threads[WORKERS];
	int handed_back = 0;
	long total;

	if (per_worker < 1 || per_worker > 1000000) {
		fprintf(stderr, "usage: service_pool [REQUESTS_PER_WORKER]\n");
		return 2;
	}
	if (tw_service_create(&svc, &cfg))
		return 1;
	tw_service_periodic_init(&progress, on_progress, TW_MS(250));
	tw_service_add_in(svc, &progress.timer, TW_MS(250));

	for (int i = 0; i < WORKERS; i++)
		pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)per_worker);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(threads[i], NULL);

	/* The periodic timer is pending, so shutdown gives it back -- unless
	 * it is due at that very moment: then its last run ends it (a run
	 * during shutdown does not re-arm). Either way every add ended once,
	 * and the counters say so. */
	tw_service_shutdown(svc, on_hand_back, &handed_back);
	tw_service_stats(svc, &stats);
	tw_service_destroy(svc);

	total = per_worker * WORKERS;
	printf("service_pool: %ld requests: %ld done in time, %ld timed out, "
	       "%ld answered twice, %ld deadlines early; %d timer handed back; "
	       "service: %llu added, %llu ran, %llu stopped\n",
	       total, (long)answered_done, (long)answered_timeout,
	       (long)double_answers, (long)early, handed_back,
	       (unsigned long long)stats.added, (unsigned long long)stats.ran,
	       (unsigned long long)stats.stopped);
	return answered_done + answered_timeout == total && double_answers == 0 &&
		       early == 0 && handed_back <= 1 &&
		       stats.added == stats.ran + stats.stopped +
					      (uint64_t)handed_back
		       ? 0 : 1;
}
