/* SPDX-License-Identifier: MIT */
/*
 * bell.h — where the reaper sleeps until its next expiry or a kick, and an
 * executor until work is posted: a condition variable whose sleeper takes
 * its mutex back the ordinary way.
 *
 * Why not pthread_cond_wait: glibc's takes the mutex back after a wake-up
 * marked as contended, whether or not anyone else wants it, so the
 * unlock that follows is a futex wake-up call that wakes nobody. That is
 * one system call more per sleep of the reaper and per hand-off to an
 * executor, where a system call is the dearest thing either does (perf's
 * futex events, 20,000 purgatory requests a second with one executor:
 * 4,579 such calls in 4,574 sleeps of the reaper, 4,566 in as many of the
 * executor).
 *
 * On Linux a bell is two counts: rings, the word a sleeper sleeps on (a
 * futex), and sleepers. A sleeper, its mutex held and its condition
 * found false, notes rings, counts itself, lets go of the mutex and
 * sleeps unless rings moved; a ring adds one to rings and wakes a sleeper
 * if one is counted. No ring is lost: the thread that makes the condition
 * true does so under the mutex and rings afterwards (holding it or not),
 * so a sleeper that found the condition false noted rings and counted
 * itself before that change; the ring then either moves rings before the
 * sleeper's futex looks (which returns at once) or finds it counted and
 * wakes it. A sleeper may wake for a ring meant for another, or for none
 * (a signal): every caller looks at its condition again. Elsewhere a bell
 * is a condition variable on CLOCK_MONOTONIC.
 */
#ifndef TW_SERVICE_BELL_H
#define TW_SERVICE_BELL_H

#include "../futex.h"
#include "../test_point.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct tw__bell {
#ifdef __linux__
	_Atomic uint32_t rings;
	_Atomic uint32_t sleepers;
#else
	pthread_cond_t cv;
#endif
};

static inline void tw__bell_init(struct tw__bell *b)
{
#ifdef __linux__
	atomic_init(&b->rings, 0);
	atomic_init(&b->sleepers, 0);
#else
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cv, &attr);
	pthread_condattr_destroy(&attr);
#endif
}

static inline void tw__bell_destroy(struct tw__bell *b)
{
#ifdef __linux__
	(void)b;
#else
	pthread_cond_destroy(&b->cv);
#endif
}

/* With mu held and the caller's condition found false: sleep until a
 * ring, for at most rel_ns (below 0: no limit). Returns with mu held. */
static inline void tw__bell_wait(struct tw__bell *b, pthread_mutex_t *mu,
				 int64_t rel_ns)
{
#ifdef __linux__
	uint32_t seen = atomic_load_explicit(&b->rings, memory_order_relaxed);

	atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
	pthread_mutex_unlock(mu);
	TW_TEST_POINT("bell.counted", b);
	tw__futex_wait(&b->rings, seen, rel_ns);
	atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
	pthread_mutex_lock(mu);
#else
	struct timespec now, until;
	int64_t abs_ns;

	if (rel_ns < 0) {
		pthread_cond_wait(&b->cv, mu);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	abs_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec + rel_ns;
	until.tv_sec = abs_ns / 1000000000;
	until.tv_nsec = abs_ns % 1000000000;
	pthread_cond_timedwait(&b->cv, mu, &until);
#endif
}

/* After the condition changed under the sleepers' mutex: wake one
 * sleeper, or every one. */
static inline void tw__bell_ring(struct tw__bell *b, bool all)
{
#ifdef __linux__
	atomic_fetch_add_explicit(&b->rings, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&b->sleepers, memory_order_seq_cst))
		tw__futex_wake(&b->rings, all ? INT_MAX : 1);
#else
	if (all)
		pthread_cond_broadcast(&b->cv);
	else
		pthread_cond_signal(&b->cv);
#endif
	TW_TEST_POINT("bell.rung", b);
}

#endif
