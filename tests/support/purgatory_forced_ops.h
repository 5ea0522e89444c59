/* SPDX-License-Identifier: MIT */
/*
 * The fixtures of the purgatory's tests forced at the test points
 * (tests/purgatory/: completion_and_release.c, completion_during_a_watch.c,
 * release_outside_locks.c; the test-point build): the stop points, the
 * virtual clock, a gop (an op that counts its completions, expirations
 * and releases, with hooks of the test's), the threads that check a key,
 * poll or try to complete, and RUN_IF (with an argument, only the tests
 * whose name contains it).
 */
#ifndef TW_TEST_PURGATORY_FORCED_OPS_H
#define TW_TEST_PURGATORY_FORCED_OPS_H

/* The shards' tables (which shard a key is in, whether one grew); first,
 * for it names the feature macros its futex needs. */
#include "purgatory/core.h"

#include "stop_points.h"

#include "check.h"
#include "virtual_clock.h"

struct gop {
	struct tw_delayed_op op;
	struct tw_watch w;
	const char *key;
	struct tw_purgatory *p;
	struct gop *other;
	pthread_mutex_t *lock; /* the shared lock, if any: on_release tries it */
	atomic_int ready, completes, expires, releases;
	atomic_int release_blocks, in_release, release_go;
	atomic_int released_under_lock;
	atomic_int try_parks, in_try, try_go;
	void (*on_expiration)(struct gop *self);
};

static inline bool gop_try(struct tw_delayed_op *op)
{
	struct gop *o = tw_container_of(op, struct gop, op);

	if (!atomic_load(&o->ready))
		return false;
	if (atomic_load(&o->try_parks)) {
		atomic_store(&o->in_try, 1);
		WAIT_FOR(atomic_load(&o->try_go), "try_complete's go");
	}
	return tw_op_force_complete(op);
}

static inline void gop_complete(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct gop, op)->completes, 1);
}

static inline void gop_expire(struct tw_delayed_op *op)
{
	struct gop *o = tw_container_of(op, struct gop, op);

	atomic_fetch_add(&o->expires, 1);
	if (o->on_expiration)
		o->on_expiration(o);
}

static inline void gop_release(struct tw_delayed_op *op)
{
	struct gop *o = tw_container_of(op, struct gop, op);
	int n = atomic_fetch_add(&o->releases, 1) + 1;

	/* An on_release that takes its op's lock first would hang if its own
	 * thread held it: try it instead, and count. */
	if (o->lock) {
		if (pthread_mutex_trylock(o->lock) == 0)
			pthread_mutex_unlock(o->lock);
		else
			atomic_fetch_add(&o->released_under_lock, 1);
	}
	if (n == 1 && atomic_load(&o->release_blocks)) {
		atomic_store(&o->in_release, 1);
		WAIT_FOR(atomic_load(&o->release_go), "on_release's go");
	}
}

static const struct tw_op_ops gop_ops = { gop_try, gop_complete, gop_expire,
					  gop_release, NULL };

static inline void gop_init(struct gop *o, struct tw_purgatory *p, const char *key,
		     pthread_mutex_t *lock)
{
	memset(o, 0, sizeof(*o));
	o->p = p;
	o->key = key;
	o->lock = lock;
	CHECK_EQ(tw_op_init(&o->op, 100, &gop_ops, lock), TW_OK);
}

static inline int gop_watch(struct gop *o)
{
	const void *keys[1] = { o->key };
	size_t lens[1] = { strlen(o->key) };

	return tw_purgatory_try_complete_else_watch(o->p, &o->op, keys, lens, 1,
						    &o->w);
}

/* Keys with a list, over every shard (each read under its lock). */
static inline size_t keys_listed(struct tw_purgatory *p)
{
	size_t n = 0;

	for (unsigned i = 0; i < p->nshards; i++) {
		pshard_lock(&p->shards[i]);
		n += p->shards[i].nkeys;
		pshard_unlock(&p->shards[i]);
	}
	return n;
}

static inline int64_t check_key(struct tw_purgatory *p, const char *key)
{
	return tw_purgatory_check_and_complete(p, key, strlen(key));
}

static inline void *check_key_thread(void *arg)
{
	struct gop *o = arg;

	CHECK_EQ(check_key(o->p, o->key), 0);
	return NULL;
}

static inline void *poll_purgatory_thread(void *arg)
{
	CHECK(tw_purgatory_poll(arg) >= 0);
	return NULL;
}

static inline void *safe_try_thread(void *arg)
{
	struct gop *o = arg;

	CHECK(tw_op_safe_try_complete(&o->op));
	return NULL;
}

/* With an argument, only the tests whose name contains it (a hang ends
 * the binary: run the others alone). */
#define RUN_IF(test)                                                        \
	do {                                                                \
		if (argc < 2 || strstr(#test, argv[1]))                     \
			RUN(test);                                          \
	} while (0)

#endif
