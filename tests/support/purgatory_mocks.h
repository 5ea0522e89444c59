/* SPDX-License-Identifier: MIT */
/*
 * The fixtures of the purgatory's contract tests (tests/purgatory/:
 * complete_expire_purge.c, many_threads.c, timeouts_and_tolerance.c): a
 * mock op (its condition a count of keys checked, what completed or
 * expired it), a purgatory with its own service, a watch on n keys, a key
 * check, and the real clock in nanoseconds for the threaded ones.
 */
#ifndef TW_TEST_PURGATORY_MOCKS_H
#define TW_TEST_PURGATORY_MOCKS_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "../../src/lock.h"
#include "virtual_clock.h"

#define MS 1000000LL /* the service clock is in nanoseconds */

struct mock {
	struct tw_delayed_op op;
	struct tw_watch watches[3];
	atomic_bool completable;
	atomic_int attempts_left; /* > 0: complete after that many tries */
	atomic_int completes, expirations, releases, tries;
	bool lock_was_held;
	int64_t added_at, completed_at;
};

static inline int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static inline bool mock_try(struct tw_delayed_op *op)
{
	struct mock *m = tw_container_of(op, struct mock, op);

	atomic_fetch_add(&m->tries, 1);
	/* Runs under the op's lock: a shared one's trylock from the holder
	 * fails; the own lock's word says held. */
	if (op->shared_lock) {
		m->lock_was_held = pthread_mutex_trylock(op->shared_lock) == EBUSY;
		if (!m->lock_was_held)
			pthread_mutex_unlock(op->shared_lock);
	} else {
		m->lock_was_held =
			tw__lock_is_held(&op->own_lock);
	}
	if (atomic_load(&m->attempts_left) > 0 &&
	    atomic_fetch_sub(&m->attempts_left, 1) == 1)
		atomic_store(&m->completable, true);
	if (!atomic_load(&m->completable))
		return false;
	return tw_op_force_complete(op);
}

static inline void mock_complete(struct tw_delayed_op *op)
{
	struct mock *m = tw_container_of(op, struct mock, op);

	m->completed_at = now_ns();
	atomic_fetch_add(&m->completes, 1);
}

static inline void mock_expire(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct mock, op)->expirations, 1);
}

static inline void mock_release(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct mock, op)->releases, 1);
}

static const struct tw_op_ops mock_ops = { mock_try, mock_complete, mock_expire,
					   mock_release, NULL };

static inline void mock_init(struct mock *m, int64_t timeout)
{
	memset(m, 0, sizeof(*m));
	CHECK_EQ(tw_op_init(&m->op, timeout, &mock_ops, NULL), TW_OK);
}

static inline struct tw_purgatory *new_purgatory(size_t purge_interval)
{
	struct tw_purgatory_config cfg = { 0 };
	struct tw_purgatory *p = NULL;

	cfg.purge_interval = purge_interval;
	cfg.service.executors = 1;
	CHECK_EQ(tw_purgatory_create(&p, &cfg), TW_OK);
	return p;
}

/* Watch m on the named keys ("k1", "k2", ...). */
static inline int watch_on(struct tw_purgatory *p, struct mock *m, int nkeys,
		    const char *k0, const char *k1, const char *k2)
{
	const void *keys[3] = { k0, k1, k2 };
	size_t lens[3] = { strlen(k0), k1 ? strlen(k1) : 0, k2 ? strlen(k2) : 0 };

	m->added_at = now_ns();
	return tw_purgatory_try_complete_else_watch(p, &m->op, keys, lens,
						    (size_t)nkeys, m->watches);
}

static inline int64_t check(struct tw_purgatory *p, const char *key)
{
	return tw_purgatory_check_and_complete(p, key, strlen(key));
}

#endif
