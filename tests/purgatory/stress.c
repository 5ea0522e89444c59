/* SPDX-License-Identifier: MIT */
/*
 * Every op ends exactly once, under stress: producer threads watch
 * operations on one to three of a few keys, acker threads make keys'
 * conditions true and check them, timeouts of a few milliseconds race
 * both, and a cancel_for_key now and then claims what waits on a key;
 * shutdown ends it all. Afterwards:
 *
 *   every op ended exactly once: completed by its condition, expired, or
 *   handed back (by cancel_for_key or shutdown), never two, never none;
 *   on_release ran exactly once per op, and no callback came after it.
 *
 * Built as purgatory_stress_shaken (TW_SHAKE) it shakes the schedule at
 * the protocol's named points, as service_stress_shaken does.
 *
 * usage: purgatory_stress [OPS_PER_THREAD [THREADS [SEED [PERCENT]]]]
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#ifdef TW_SHAKE
#include "stop_points.h"
#endif

#define KEYS 8
#define MAX_WATCH 3

struct sop {
	struct tw_delayed_op op;
	struct tw_watch w[MAX_WATCH];
	int nkeys;
	int key[MAX_WATCH];
	long need[MAX_WATCH];  /* acks each key must reach */
	atomic_int completes, expires, handed, releases, after_release;
	int watch_result;
};

static atomic_long acks[KEYS];
static char key_names[KEYS][8];
static struct tw_purgatory *pg;
static long ops_per_thread = 20000;
static unsigned nthreads = 2;
static atomic_int producers_left;

static struct sop *of(struct tw_delayed_op *op)
{
	return tw_container_of(op, struct sop, op);
}

static bool sop_try(struct tw_delayed_op *op)
{
	struct sop *o = of(op);

	for (int i = 0; i < o->nkeys; i++)
		if (atomic_load(&acks[o->key[i]]) < o->need[i])
			return false;
	return tw_op_force_complete(op);
}

static void note(struct sop *o, atomic_int *what)
{
	if (atomic_load(&o->releases))
		atomic_fetch_add(&o->after_release, 1);
	atomic_fetch_add(what, 1);
}

static void sop_complete(struct tw_delayed_op *op)
{
	note(of(op), &of(op)->completes);
}

static void sop_expire(struct tw_delayed_op *op)
{
	note(of(op), &of(op)->expires);
}

static void sop_hand_back(struct tw_delayed_op *op)
{
	note(of(op), &of(op)->handed);
}

static void sop_release(struct tw_delayed_op *op)
{
	atomic_fetch_add(&of(op)->releases, 1);
}

static const struct tw_op_ops sop_ops = { sop_try, sop_complete, sop_expire,
					  sop_release, NULL };

static void *producer(void *arg)
{
	struct sop *ops = arg;
	uint64_t seed = (uint64_t)(uintptr_t)arg | 1;

	for (long n = 0; n < ops_per_thread; n++) {
		struct sop *o = &ops[n];
		const void *keys[MAX_WATCH];
		size_t lens[MAX_WATCH];

		o->nkeys = 1 + (int)(test_rand(&seed) % MAX_WATCH);
		for (int i = 0; i < o->nkeys; i++) {
			o->key[i] = (int)((test_rand(&seed) % KEYS + (uint64_t)i) % KEYS);
			o->need[i] = atomic_load(&acks[o->key[i]]) + 1 +
				     (long)(test_rand(&seed) % 3);
			keys[i] = key_names[o->key[i]];
			lens[i] = strlen(key_names[o->key[i]]);
		}
		tw_op_init(&o->op, 1000000 * (1 + (int64_t)(test_rand(&seed) % 4)),
			   &sop_ops, NULL);
		/* A third with a tolerance of up to 2 ms. */
		if (test_rand(&seed) % 3 == 0)
			CHECK_EQ(tw_op_set_tolerance(&o->op, (int64_t)(test_rand(&seed) %
								      2000000)),
				 TW_OK);
		o->watch_result = tw_purgatory_try_complete_else_watch(
			pg, &o->op, keys, lens, (size_t)o->nkeys, o->w);
	}
	atomic_fetch_sub(&producers_left, 1);
	return NULL;
}

static void *acker(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 7919 + 1;

	while (atomic_load(&producers_left) > 0) {
		int k = (int)(test_rand(&seed) % KEYS);

		atomic_fetch_add(&acks[k], 1);
		if (test_rand(&seed) % 64 == 0)
			tw_purgatory_cancel_for_key(pg, key_names[k],
						    strlen(key_names[k]), sop_hand_back);
		else
			tw_purgatory_check_and_complete(pg, key_names[k],
							strlen(key_names[k]));
	}
	return NULL;
}

static void test_every_op_ends_exactly_once(void)
{
	struct tw_purgatory_config cfg = { 0 };
	pthread_t prod[16], ack[16];
	struct sop *ops[16];
	long completed = 0, expired = 0, handed = 0, refused = 0;

	cfg.service.executors = 1;
	cfg.shards = 4;
	cfg.purge_interval = 64;
	CHECK_EQ(tw_purgatory_create(&pg, &cfg), TW_OK);
	for (int k = 0; k < KEYS; k++) {
		snprintf(key_names[k], sizeof(key_names[k]), "key%d", k);
		atomic_store(&acks[k], 0);
	}
	atomic_store(&producers_left, (int)nthreads);
	for (unsigned i = 0; i < nthreads; i++) {
		ops[i] = calloc((size_t)ops_per_thread, sizeof(struct sop));
		pthread_create(&prod[i], NULL, producer, ops[i]);
		pthread_create(&ack[i], NULL, acker, (void *)(uintptr_t)(i + 1));
	}
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(prod[i], NULL);
		pthread_join(ack[i], NULL);
	}
	CHECK(tw_purgatory_shutdown(pg, sop_hand_back) >= 0);
	tw_purgatory_destroy(pg);

	for (unsigned i = 0; i < nthreads; i++) {
		for (long n = 0; n < ops_per_thread; n++) {
			struct sop *o = &ops[i][n];
			int c = atomic_load(&o->completes), e = atomic_load(&o->expires),
			    h = atomic_load(&o->handed), r = atomic_load(&o->releases);

			if (o->watch_result < 0) {
				refused++;
				continue;
			}
			if (c + h != 1 || e > c || r != 1 ||
			    atomic_load(&o->after_release)) {
				fprintf(stderr, "op %u/%ld: %d completed, %d expired, "
					"%d handed back, %d releases, %d after release\n",
					i, n, c, e, h, r, atomic_load(&o->after_release));
				CHECK(!"an op did not end exactly once");
				i = nthreads;
				break;
			}
			completed += c - e;
			expired += e;
			handed += h;
			tw_op_destroy(&o->op);
		}
	}
	for (unsigned i = 0; i < nthreads; i++)
		free(ops[i]);
	printf("purgatory stress: %ld ops on %u threads: %ld completed by their "
	       "condition, %ld expired, %ld handed back, %ld refused\n",
	       ops_per_thread * (long)nthreads, nthreads, completed, expired,
	       handed, refused);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		ops_per_thread = strtol(argv[1], NULL, 10);
	if (argc > 2)
		nthreads = (unsigned)strtoul(argv[2], NULL, 10);
	if (nthreads < 1 || nthreads > 16)
		nthreads = 2;
	if (ops_per_thread < 1)
		ops_per_thread = 1;
#ifdef TW_SHAKE
	{
		uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
		unsigned pct = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 10) : 5;

		sp_install();
		sp_shake(seed ? seed : 1, pct);
		RUN(test_every_op_ends_exactly_once);
		printf("shaken: seed %llu, %u%%: %llu test points passed, %llu "
		       "schedule perturbations\n", (unsigned long long)seed, pct,
		       (unsigned long long)atomic_load(&sp_hits),
		       (unsigned long long)atomic_load(&sp_perturbed));
	}
#else
	RUN(test_every_op_ends_exactly_once);
#endif
	return check_report();
}
