/* SPDX-License-Identifier: MIT */
/*
 * A threaded user of an installed instrumented variant (tests/packaging/
 * install_variant.sh): four threads add timers to one service, cancel
 * every other one with cancel_sync and free it, while two executors run
 * the rest (which free themselves); then shutdown. Built with the variant's own flags
 * (pkg-config timingwheel-tsan, find_package(timingwheel-tsan)), it must
 * run without a sanitizer report, and every timer must end exactly once.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <timingwheel/timingwheel.h>

enum { THREADS = 4, PER_THREAD = 2000 };

struct job {
	struct tw_service_timer timer;
	int payload; /* written by its thread, read by the callback */
};

static struct tw_service *svc;
static atomic_long ran, stopped, handed_back;

static void ran_one(struct tw_service_timer *t)
{
	if (tw_container_of(t, struct job, timer)->payload != 42)
		abort();
	atomic_fetch_add(&ran, 1);
}

/* Nobody else refers to this one: it may free itself as its last act. */
static void on_due_and_free(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	ran_one(t);
	free(tw_container_of(t, struct job, timer));
}

/* Its producer cancel_syncs it and frees it then, whatever happened. */
static void on_due(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	ran_one(t);
}

static void on_hand_back(struct tw_service_timer *t, void *arg)
{
	(void)arg;
	atomic_fetch_add(&handed_back, 1);
	free(tw_container_of(t, struct job, timer));
}

static void *producer(void *arg)
{
	(void)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		struct job *j = malloc(sizeof(*j));

		if (!j)
			abort();
		j->payload = 42;
		tw_service_timer_init(&j->timer, i % 2 ? on_due : on_due_and_free);
		if (tw_service_add_in(svc, &j->timer, TW_US(i % 200)))
			abort();
		/* Every other one: after cancel_sync it is not pending and its
		 * callback is not running, whatever cancel_sync says; STOPPED
		 * means it never ran. */
		if (i % 2) {
			if (tw_service_cancel_sync(svc, &j->timer) == TW_SVC_STOPPED)
				atomic_fetch_add(&stopped, 1);
			free(j);
		}
	}
	return NULL;
}

int main(void)
{
	struct tw_service_config cfg = { .executors = 2 };
	pthread_t th[THREADS];
	long total;

	if (tw_service_create(&svc, &cfg))
		return 1;
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, producer, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	tw_service_shutdown(svc, on_hand_back, NULL);
	tw_service_destroy(svc);
	total = atomic_load(&ran) + atomic_load(&stopped) + atomic_load(&handed_back);
	printf("threads: %ld ran, %ld stopped, %ld handed back of %d\n",
	       atomic_load(&ran), atomic_load(&stopped), atomic_load(&handed_back),
	       THREADS * PER_THREAD);
	return total == THREADS * PER_THREAD ? 0 : 1;
}
