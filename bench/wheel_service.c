/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L

#include "wheel_service.h"
#include "bench_util.h"

#include <time.h>

static void *reaper(void *arg)
{
	struct wheel_service *ws = arg;

	pthread_mutex_lock(&ws->mu);
	while (!ws->stop) {
		int64_t when;

		/* Callbacks run here, under the lock: the simplest contract,
		 * and the cheapest firing. */
		tw_wheel_advance(&ws->wheel, bench_now_ns());
		if (tw_wheel_next_expiry(&ws->wheel, &when)) {
			struct timespec ts = { (time_t)(when / 1000000000),
					       (long)(when % 1000000000) };

			ws->sleeping_until = when;
			pthread_cond_timedwait(&ws->cv, &ws->mu, &ts);
		} else {
			ws->sleeping_until = INT64_MAX;
			pthread_cond_wait(&ws->cv, &ws->mu);
		}
	}
	pthread_mutex_unlock(&ws->mu);
	return NULL;
}

int wheel_service_init(struct wheel_service *ws, bool threaded)
{
	pthread_condattr_t attr;
	int rc = tw_wheel_init(&ws->wheel, 1000000, 64, bench_now_ns(),
			       TW_MODE_EXACT);

	if (rc)
		return rc;
	ws->stop = false;
	ws->threaded = threaded;
	ws->sleeping_until = INT64_MAX;
	pthread_mutex_init(&ws->mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&ws->cv, &attr);
	pthread_condattr_destroy(&attr);
	if (threaded)
		pthread_create(&ws->reaper, NULL, reaper, ws);
	return 0;
}

void wheel_service_destroy(struct wheel_service *ws)
{
	if (ws->threaded) {
		pthread_mutex_lock(&ws->mu);
		ws->stop = true;
		pthread_cond_signal(&ws->cv);
		pthread_mutex_unlock(&ws->mu);
		pthread_join(ws->reaper, NULL);
	}
	tw_wheel_destroy(&ws->wheel);
	pthread_mutex_destroy(&ws->mu);
	pthread_cond_destroy(&ws->cv);
}

int wheel_service_add(struct wheel_service *ws, struct tw_timer *t, int64_t due)
{
	int rc;

	pthread_mutex_lock(&ws->mu);
	rc = tw_wheel_add(&ws->wheel, t, due);
	if (rc == 0 && ws->threaded && due < ws->sleeping_until)
		pthread_cond_signal(&ws->cv);
	pthread_mutex_unlock(&ws->mu);
	return rc;
}

int wheel_service_cancel(struct wheel_service *ws, struct tw_timer *t)
{
	int rc;

	pthread_mutex_lock(&ws->mu);
	rc = tw_wheel_cancel(&ws->wheel, t);
	pthread_mutex_unlock(&ws->mu);
	return rc;
}

int wheel_service_reschedule(struct wheel_service *ws, struct tw_timer *t,
			     int64_t due)
{
	int rc;

	pthread_mutex_lock(&ws->mu);
	rc = tw_wheel_reschedule(&ws->wheel, t, due);
	if (rc >= 0 && ws->threaded && due < ws->sleeping_until)
		pthread_cond_signal(&ws->cv);
	pthread_mutex_unlock(&ws->mu);
	return rc;
}

size_t wheel_service_count(struct wheel_service *ws)
{
	size_t n;

	pthread_mutex_lock(&ws->mu);
	n = tw_wheel_count(&ws->wheel);
	pthread_mutex_unlock(&ws->mu);
	return n;
}
