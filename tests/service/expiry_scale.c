/* SPDX-License-Identifier: MIT */
/*
 * One expiry of a million timers whose callbacks cancel_sync each other
 * costs time in proportion to the timers, not to their square: a
 * cancel_sync finds the timer it stops where the service keeps it (its
 * shard's expired list, or its place in a runner's batch), without a
 * search. Two ways: the polling thread runs every callback (no
 * executors), and one executor with room for one waiting timer, so that
 * the polling thread runs nearly all of them itself while the executor
 * runs a few. Each callback cancel_syncs its timer's mirror (timer i
 * the timer n - 1 - i): whichever of a pair runs first stops the other,
 * which waits at the far end of the expiry -- the worst case for a
 * cancel_sync that searches for what it stops. A watchdog turns a
 * quadratic expiry (hours at a million timers) into a failure after
 * 60 s.
 *
 * usage: service_expiry_scale [N]   (default 1000000; 100000 under a sanitizer)
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "virtual_clock.h"

/* The sanitizer builds (the checked library beside ASan, or TSan) are
 * 30-100 times slower per timer: they check the same linearity on a
 * tenth of the timers, which a quadratic expiry still cannot finish. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static size_t n = 100000;
#else
static size_t n = 1000000;
#endif

struct item {
	struct tw_service_timer t;
	int result;
	bool ran;
};

static struct item *items;
static atomic_long ran, stopped;

static void on_expire(struct tw_service *svc, struct tw_service_timer *t)
{
	struct item *it = tw_container_of(t, struct item, t);
	size_t i = (size_t)(it - items);

	it->ran = true;
	atomic_fetch_add(&ran, 1);
	if (i != n - 1 - i) {
		it->result = tw_service_cancel_sync(svc, &items[n - 1 - i].t);
		if (it->result == TW_SVC_STOPPED)
			atomic_fetch_add(&stopped, 1);
	}
}

/* What a cancel_sync of a timer whose run went on beside the caller's
 * may return. */
static bool ran_beside(int result)
{
	return result == TW_SVC_IDLE || result == TW_SVC_RUNNING ||
	       result == TW_EDEADLK;
}

static atomic_bool finished;

/* Joined at the end, not detached: a thread still asleep at exit is
 * memory valgrind reports as lost. */
static void *watchdog(void *arg)
{
	struct timespec tenth = { 0, 100000000 };

	(void)arg;
	for (int i = 0; i < 600; i++) {
		if (atomic_load(&finished))
			return NULL;
		nanosleep(&tenth, NULL);
	}
	fprintf(stderr, "service_expiry_scale: one expiry of %zu timers took over "
		"60 s\n", n);
	abort();
}

static void expire_all(unsigned executors)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	struct tw_service_stats st;
	struct timespec ms = { 0, 1000000 };
	int64_t polled;

	cfg.tick = 10;
	cfg.executors = executors;
	cfg.queue_capacity = 1;
	cfg.manual = true;
	cfg.clock.now = virtual_clock;
	set_clock(1000);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	atomic_store(&ran, 0);
	atomic_store(&stopped, 0);
	for (size_t i = 0; i < n; i++) {
		items[i].ran = false;
		items[i].result = -1000;
		tw_service_timer_init(&items[i].t, on_expire);
		CHECK_EQ(tw_service_add(svc, &items[i].t, 1500), TW_OK);
	}
	set_clock(1500);
	/* Dispatched: the timers that expired in it (not those stopped while
	 * still in the wheel): at least half, at most all. */
	polled = tw_service_poll(svc);
	CHECK(polled >= (int64_t)n / 2 && polled <= (int64_t)n);
	/* What the executor holds runs before shutdown returns. */
	for (int wait = 0; wait < 60000 && atomic_load(&ran) + atomic_load(&stopped) <
					      (long)n; wait++)
		nanosleep(&ms, NULL);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(atomic_load(&ran) + atomic_load(&stopped), (long)n);
	CHECK_EQ(st.ran, (uint64_t)atomic_load(&ran));
	CHECK_EQ(st.stopped, (uint64_t)atomic_load(&stopped));
	/* Of each pair (i and its mirror), the first to run stops the
	 * other -- but with the executor, both may have been claimed before
	 * either's callback came: each cancel_sync then found the other run
	 * or running (waiting for it: two such waits are a real ring, and
	 * one of them gets TW_EDEADLK), and both ran. Without executors
	 * that never happens. */
	for (size_t i = 0; i < n - 1 - i; i++) {
		struct item *a = &items[i], *b = &items[n - 1 - i];
		bool one = a->ran != b->ran, both = a->ran && b->ran;
		bool ok = one ? (a->ran ? a : b)->result == TW_SVC_STOPPED
			      : both && executors && ran_beside(a->result) &&
					ran_beside(b->result);

		if (!ok) {
			fprintf(stderr, "pair %zu/%zu: ran %d/%d, results %d/%d\n",
				i, n - 1 - i, a->ran, b->ran, a->result, b->result);
			CHECK(!"a pair that did not end as its cancel_sync said");
			break;
		}
	}
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

static void test_a_million_cancel_syncs_on_the_polling_thread(void)
{
	expire_all(0);
}

static void test_a_million_cancel_syncs_past_a_full_executor(void)
{
	expire_all(1);
}

int main(int argc, char **argv)
{
	pthread_t dog;

	if (argc > 1)
		n = strtoul(argv[1], NULL, 10);
	items = calloc(n, sizeof(*items));
	CHECK(items != NULL);
	CHECK_EQ(pthread_create(&dog, NULL, watchdog, NULL), 0);
	RUN(test_a_million_cancel_syncs_on_the_polling_thread);
	RUN(test_a_million_cancel_syncs_past_a_full_executor);
	atomic_store(&finished, true);
	pthread_join(dog, NULL);
	free(items);
	return check_report();
}
