/* SPDX-License-Identifier: MIT */
/*
 * Stop points: drive the library's threads through a chosen interleaving.
 *
 * The test build of the library (timingwheel_hooks) calls a hook at each
 * named point of the service's and the purgatory's protocols
 * (src/test_point.h). This harness installs that hook and offers:
 *   sp_arm(point, obj)    the next thread to reach point (with obj, or any
 *                         obj when NULL) parks there;
 *   sp_wait(slot, done)   the test waits until it is parked (false when it
 *                         did not arrive within SP_WAIT_S, or *done says the
 *                         thread finished without passing the point);
 *   sp_release(slot)      let it go on;
 *   sp_on(point, fn, arg) run fn on the arriving thread, once, right there;
 *   sp_shake(seed, pct)   at every point, yield or sleep at random (seeded,
 *                         per thread), PCT-style schedule noise for soaks.
 * A thread that does not finish in time is a deadlock: sp_join() reports it
 * and ends the test binary instead of hanging CI.
 */
#ifndef TW_TEST_STOP_POINTS_H
#define TW_TEST_STOP_POINTS_H

#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_point.h"

#include "check.h"

#define SP_SLOTS 8
/* How long a wait for a thread the test has set going may last before the
 * test calls it hung: a guard, not a bound (a loaded machine under
 * ThreadSanitizer stalls a thread for seconds). */
#define SP_WAIT_S 60

enum { SP_FREE, SP_ARMED, SP_ARRIVED, SP_RELEASED, SP_ACTION };

struct sp_slot {
	const char *point;
	const void *obj;
	int state;
	void (*action)(const void *obj, void *arg);
	void *arg;
};

static pthread_mutex_t sp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sp_cv = PTHREAD_COND_INITIALIZER;
static struct sp_slot sp_slots[SP_SLOTS];
static atomic_int sp_armed;            /* slots in use: the fast path's test */
static atomic_uint_fast64_t sp_seed;   /* 0: no shaking */
static atomic_uint sp_shake_pct;
static atomic_uint_fast64_t sp_hits, sp_perturbed;
static atomic_uint sp_thread_ids;
static _Thread_local uint64_t sp_rng;  /* this thread's shaking state */

static inline uint64_t sp_next_random(void)
{
	/* Reproducible per (seed, thread order): each thread's state is made
	 * from the seed and the order in which it first got here. */
	if (!sp_rng)
		sp_rng = test_rand_seed(atomic_load(&sp_seed) * 0x9E3779B97F4A7C15ULL +
					atomic_fetch_add(&sp_thread_ids, 1));
	return test_rand(&sp_rng);
}

static inline void sp_shake_here(void)
{
	uint64_t r = sp_next_random();

	if (r % 100 >= atomic_load(&sp_shake_pct))
		return;
	atomic_fetch_add_explicit(&sp_perturbed, 1, memory_order_relaxed);
	if ((r >> 8) % 4) {
		sched_yield();
	} else {
		struct timespec ts = { 0, (long)((r >> 16) % 50) * 1000 };

		nanosleep(&ts, NULL);
	}
}

static inline void sp_hook(const char *point, const void *obj)
{
	atomic_fetch_add_explicit(&sp_hits, 1, memory_order_relaxed);
	if (atomic_load_explicit(&sp_seed, memory_order_relaxed))
		sp_shake_here();
	if (!atomic_load(&sp_armed))
		return;
	pthread_mutex_lock(&sp_mu);
	for (int i = 0; i < SP_SLOTS; i++) {
		struct sp_slot *s = &sp_slots[i];

		if ((s->state != SP_ARMED && s->state != SP_ACTION) ||
		    strcmp(s->point, point) || (s->obj && s->obj != obj))
			continue;
		if (s->state == SP_ACTION) {
			void (*fn)(const void *, void *) = s->action;
			void *arg = s->arg;

			s->state = SP_FREE;
			atomic_fetch_sub(&sp_armed, 1);
			pthread_mutex_unlock(&sp_mu);
			fn(obj, arg);
			return;
		}
		s->state = SP_ARRIVED;
		pthread_cond_broadcast(&sp_cv);
		while (s->state != SP_RELEASED)
			pthread_cond_wait(&sp_cv, &sp_mu);
		s->state = SP_FREE;
		atomic_fetch_sub(&sp_armed, 1);
		pthread_cond_broadcast(&sp_cv);
		break;
	}
	pthread_mutex_unlock(&sp_mu);
}

static inline void sp_install(void)
{
	tw__test_set_hook(sp_hook);
}

static inline int sp_take_slot(const char *point, const void *obj, int state)
{
	pthread_mutex_lock(&sp_mu);
	for (int i = 0; i < SP_SLOTS; i++) {
		if (sp_slots[i].state == SP_FREE) {
			sp_slots[i].point = point;
			sp_slots[i].obj = obj;
			sp_slots[i].state = state;
			atomic_fetch_add(&sp_armed, 1);
			pthread_mutex_unlock(&sp_mu);
			return i;
		}
	}
	pthread_mutex_unlock(&sp_mu);
	fprintf(stderr, "stop_points: no free slot for %s\n", point);
	abort();
}

static inline int sp_arm(const char *point, const void *obj)
{
	return sp_take_slot(point, obj, SP_ARMED);
}

static inline void sp_on(const char *point, const void *obj,
		  void (*fn)(const void *obj, void *arg), void *arg)
{
	int i = sp_take_slot(point, obj, SP_ACTION);

	pthread_mutex_lock(&sp_mu);
	sp_slots[i].action = fn;
	sp_slots[i].arg = arg;
	pthread_mutex_unlock(&sp_mu);
}

/* Disarm an sp_on() action that never ran (a point the code may not
 * reach). */
static inline void sp_forget(const char *point, const void *obj)
{
	pthread_mutex_lock(&sp_mu);
	for (int i = 0; i < SP_SLOTS; i++)
		if (sp_slots[i].state == SP_ACTION && sp_slots[i].obj == obj &&
		    !strcmp(sp_slots[i].point, point)) {
			sp_slots[i].state = SP_FREE;
			atomic_fetch_sub(&sp_armed, 1);
		}
	pthread_mutex_unlock(&sp_mu);
}

/* Until the slot's thread is parked; false if it is not within SP_WAIT_S,
 * or if *done (when given) says its thread finished without arriving. */
static inline bool sp_wait(int slot, atomic_int *done)
{
	struct timespec deadline;
	bool arrived;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += SP_WAIT_S;
	pthread_mutex_lock(&sp_mu);
	while (sp_slots[slot].state == SP_ARMED && !(done && atomic_load(done))) {
		struct timespec step;

		/* Re-check *done every millisecond: it is not signalled. */
		clock_gettime(CLOCK_REALTIME, &step);
		step.tv_nsec += 1000000;
		if (step.tv_nsec >= 1000000000) {
			step.tv_sec++;
			step.tv_nsec -= 1000000000;
		}
		if (step.tv_sec > deadline.tv_sec ||
		    (step.tv_sec == deadline.tv_sec && step.tv_nsec > deadline.tv_nsec))
			break;
		pthread_cond_timedwait(&sp_cv, &sp_mu, &step);
	}
	arrived = sp_slots[slot].state == SP_ARRIVED;
	pthread_mutex_unlock(&sp_mu);
	return arrived;
}

static inline void sp_release(int slot)
{
	pthread_mutex_lock(&sp_mu);
	if (sp_slots[slot].state == SP_ARRIVED) {
		sp_slots[slot].state = SP_RELEASED;
		pthread_cond_broadcast(&sp_cv);
	} else if (sp_slots[slot].state == SP_ARMED) {
		sp_slots[slot].state = SP_FREE; /* never reached: disarm */
		atomic_fetch_sub(&sp_armed, 1);
	}
	pthread_mutex_unlock(&sp_mu);
}

static inline void sp_shake(uint64_t seed, unsigned pct)
{
	atomic_store(&sp_shake_pct, pct);
	atomic_store(&sp_seed, seed);
}

/* ---- threads that must end ---- */

struct sp_thread {
	pthread_t id;
	void *(*fn)(void *);
	void *arg;
	atomic_int done;
};

static void *sp_thread_main(void *arg)
{
	struct sp_thread *t = arg;
	void *r = t->fn(t->arg);

	atomic_store(&t->done, 1);
	return r;
}

static inline void sp_spawn(struct sp_thread *t, void *(*fn)(void *), void *arg)
{
	t->fn = fn;
	t->arg = arg;
	atomic_init(&t->done, 0);
	if (pthread_create(&t->id, NULL, sp_thread_main, t)) {
		perror("pthread_create");
		abort();
	}
}

/* Join, or report a deadlock and end the binary (a hung thread cannot be
 * cleaned up, and a test that hangs would stall CI). */
static inline void sp_join(struct sp_thread *t, const char *what)
{
	for (int ms = 0; !atomic_load(&t->done); ms++) {
		struct timespec ts = { 0, 1000000 };

		if (ms > SP_WAIT_S * 1000) {
			fprintf(stderr, "DEADLOCK: %s did not finish in %d s\n",
				what, SP_WAIT_S);
			printf("0 passed, 1 failed\n");
			fflush(NULL);
			_exit(1);
		}
		nanosleep(&ts, NULL);
	}
	pthread_join(t->id, NULL);
}

/* Wait for cond, or report a deadlock and end the binary (the counts are
 * check.h's: include it too). */
#define WAIT_FOR(cond, what)                                                 \
	do {                                                                 \
		int ms_ = 0;                                                 \
		while (!(cond)) {                                            \
			struct timespec ts_ = { 0, 1000000 };                \
			if (++ms_ > SP_WAIT_S * 1000) {                      \
				fprintf(stderr, "%s:%d: DEADLOCK: %s\n",     \
					__FILE__, __LINE__, what);           \
				printf("%d passed, %d failed\n", tests_passed, \
				       tests_failed + 1);                    \
				fflush(NULL);                                \
				_exit(1);                                    \
			}                                                    \
			nanosleep(&ts_, NULL);                               \
		}                                                            \
	} while (0)

#endif
