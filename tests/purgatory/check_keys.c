/* SPDX-License-Identifier: MIT */
/*
 * tw_purgatory_check_and_complete_keys(): several keys checked in one
 * call, their lists pinned under their shards' locks, taken in the
 * shards' order, then walked side by side (src/purgatory/watch.c,
 * check_group). It must do
 * what a check of each key in turn does: every ready op watching one of
 * the keys completes, once, and no other (a key named twice, more keys
 * than one group of four, keys sharing a shard, a list of more ops than
 * a walk notes for its way out); refuse bad input before it checks
 * anything; and two such calls naming two keys in opposite orders must
 * not wait for each other: the forced test parks one holding its first
 * shard's lock (the point "check.locking") while the other starts
 * (model/purgatory.pml scenario 10; its mutation 27, shards locked in the
 * keys' order, is the deadlock this test would hang in).
 */
#define _POSIX_C_SOURCE 200809L

#include "purgatory_forced_ops.h"

#define NKEYS 24
#define NOPS 600

static char names[NKEYS][16];

static void name_keys(void)
{
	for (int i = 0; i < NKEYS; i++)
		snprintf(names[i], sizeof(names[i]), "part-%d", i);
}

/* Op i watches keys i % NKEYS and, for odd i, (i * 7) % NKEYS too. */
static int nwatched(int i)
{
	return i % 2 ? 2 : 1;
}

static int watched_key(int i, int j)
{
	return j == 0 ? i % NKEYS : (i * 7) % NKEYS;
}

struct mop {
	struct tw_delayed_op op;
	struct tw_watch w[2];
	atomic_int ready, completes, releases;
};

static bool mop_try(struct tw_delayed_op *op)
{
	struct mop *m = tw_container_of(op, struct mop, op);

	return atomic_load(&m->ready) && tw_op_force_complete(op);
}

static void mop_complete(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct mop, op)->completes, 1);
}

static void mop_release(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct mop, op)->releases, 1);
}

static const struct tw_op_ops mop_ops = { .try_complete = mop_try,
					  .on_complete = mop_complete,
					  .on_release = mop_release };

static void watch_all(struct tw_purgatory *p, struct mop *m, int n)
{
	for (int i = 0; i < n; i++) {
		const void *keys[2];
		size_t lens[2];

		for (int j = 0; j < nwatched(i); j++) {
			keys[j] = names[watched_key(i, j)];
			lens[j] = strlen(names[watched_key(i, j)]);
		}
		CHECK_EQ(tw_op_init(&m[i].op, 1000000000, &mop_ops, NULL), TW_OK);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &m[i].op, keys, lens,
							      (size_t)nwatched(i),
							      m[i].w),
			 0);
	}
}

/* Random sets of keys, some named twice, up to 9 (three groups): the
 * call completes exactly the ready ops that watch one of them, once
 * each, and says how many. */
static void test_as_each_key_checked_in_turn(void)
{
	static struct mop m[NOPS];
	struct tw_purgatory *p = manual_purgatory_purging(0);
	bool done[NOPS] = { false };
	uint64_t seed = 11;

	memset(m, 0, sizeof(m));
	watch_all(p, m, NOPS);
	for (int round = 0; round < 60; round++) {
		const void *keys[9];
		size_t lens[9], n = 1 + (size_t)test_rand_below(&seed, 9);
		bool named[NKEYS] = { false };
		int64_t expect = 0;

		for (int i = 0; i < NOPS; i++)
			if (test_rand_below(&seed, 8) == 0)
				atomic_store(&m[i].ready, 1);
		for (size_t k = 0; k < n; k++) {
			int key = (int)test_rand_below(&seed, NKEYS);

			named[key] = true;
			keys[k] = names[key];
			lens[k] = strlen(names[key]);
		}
		for (int i = 0; i < NOPS; i++) {
			bool hit = false;

			for (int j = 0; j < nwatched(i); j++)
				hit |= named[watched_key(i, j)];
			if (hit && atomic_load(&m[i].ready) && !done[i]) {
				done[i] = true;
				expect++;
			}
		}
		CHECK_EQ(tw_purgatory_check_and_complete_keys(p, keys, lens, n), expect);
		for (int i = 0; i < NOPS; i++)
			CHECK_EQ(atomic_load(&m[i].completes), done[i] ? 1 : 0);
	}
	tw_purgatory_shutdown(p, NULL);
	tw_purgatory_destroy(p);
	for (int i = 0; i < NOPS; i++) {
		CHECK_EQ(atomic_load(&m[i].releases), 1);
		CHECK(atomic_load(&m[i].completes) <= 1);
		tw_op_destroy(&m[i].op);
	}
}

/* 300 ready ops on one key, more than a walk notes for its way out (8),
 * checked with a second key: every op completes, every entry goes. */
static void test_a_long_list(void)
{
	enum { LONG = 300 };
	static struct mop m[LONG];
	struct tw_purgatory *p = manual_purgatory_purging(0);
	const void *keys[2] = { "long", "other" };
	size_t lens[2] = { 4, 5 };

	memset(m, 0, sizeof(m));
	for (int i = 0; i < LONG; i++) {
		CHECK_EQ(tw_op_init(&m[i].op, 1000000000, &mop_ops, NULL), TW_OK);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &m[i].op, keys, lens,
							      1, m[i].w),
			 0);
		atomic_store(&m[i].ready, 1);
	}
	CHECK_EQ(tw_purgatory_check_and_complete_keys(p, keys, lens, 2), LONG);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	for (int i = 0; i < LONG; i++)
		CHECK_EQ(atomic_load(&m[i].completes), 1);
	tw_purgatory_destroy(p);
	for (int i = 0; i < LONG; i++)
		tw_op_destroy(&m[i].op);
}

/* Bad input checks nothing: a ready op stays watched. */
static void test_bad_input_checks_nothing(void)
{
	static struct mop m[1];
	struct tw_purgatory *p = manual_purgatory_purging(0);
	char long_key[TW_KEY_MAX + 1];
	const void *keys[3] = { "a", "b", "c" };
	size_t lens[3] = { 1, 1, 1 };
	const void *with_null[2] = { "a", NULL };

	memset(m, 0, sizeof(m));
	memset(long_key, 'k', sizeof(long_key));
	CHECK_EQ(tw_op_init(&m[0].op, 1000000000, &mop_ops, NULL), TW_OK);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &m[0].op, keys, lens, 1,
						      m[0].w),
		 0);
	atomic_store(&m[0].ready, 1);
	CHECK_EQ(tw_purgatory_check_and_complete_keys(NULL, keys, lens, 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete_keys(p, NULL, lens, 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete_keys(p, keys, NULL, 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete_keys(p, keys, lens, 0), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete_keys(p, with_null, lens, 2), TW_EINVAL);
	lens[2] = 0;
	CHECK_EQ(tw_purgatory_check_and_complete_keys(p, keys, lens, 3), TW_EINVAL);
	keys[2] = long_key;
	lens[2] = sizeof(long_key);
	CHECK_EQ(tw_purgatory_check_and_complete_keys(p, keys, lens, 3), TW_EINVAL);
	CHECK_EQ(atomic_load(&m[0].completes), 0);
	CHECK_EQ(tw_purgatory_watched(p), 1);
	CHECK_EQ(tw_purgatory_check_and_complete_keys(p, keys, lens, 1), 1);
	CHECK_EQ(atomic_load(&m[0].completes), 1);
	tw_purgatory_destroy(p);
	tw_op_destroy(&m[0].op);
}

/* Two keys in different shards, the first's before the second's. */
static void keys_in_two_shards(struct tw_purgatory *p, char a[16], char b[16])
{
	unsigned n = 0, sa, sb;

	do {
		snprintf(a, 16, "left-%u", n++);
		snprintf(b, 16, "right-%u", n++);
		sa = shard_index(p, hash_key(a, strlen(a)));
		sb = shard_index(p, hash_key(b, strlen(b)));
	} while (sa >= sb);
}

struct pair_call {
	struct tw_purgatory *p;
	const void *keys[2];
	size_t lens[2];
	int64_t result;
};

static void *check_pair(void *arg)
{
	struct pair_call *c = arg;

	c->result = tw_purgatory_check_and_complete_keys(c->p, c->keys, c->lens, 2);
	return NULL;
}

/* One call names A then B and stops holding its first shard's lock; a
 * second names B then A. Locked in the shards' order, the second waits
 * for the first's shard and both finish; locked in the keys' order, the
 * second would hold B's shard and wait for A's, the first B's for ever
 * (sp_join reports the deadlock). Each op completes once. */
static void test_opposite_orders_do_not_wait_for_each_other(void)
{
	static struct mop m[2];
	struct tw_purgatory *p = manual_purgatory_purging(0);
	char a[16], b[16];
	struct pair_call first = { .p = p }, second = { .p = p };
	struct sp_thread t1, t2;
	int parked;

	memset(m, 0, sizeof(m));
	keys_in_two_shards(p, a, b);
	first.keys[0] = second.keys[1] = a;
	first.keys[1] = second.keys[0] = b;
	first.lens[0] = second.lens[1] = strlen(a);
	first.lens[1] = second.lens[0] = strlen(b);
	for (int i = 0; i < 2; i++) {
		const void *k[1] = { i ? b : a };
		size_t l[1] = { strlen(i ? b : a) };

		CHECK_EQ(tw_op_init(&m[i].op, 1000000000, &mop_ops, NULL), TW_OK);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &m[i].op, k, l, 1,
							      m[i].w),
			 0);
		atomic_store(&m[i].ready, 1);
	}
	parked = sp_arm("check.locking", a);
	sp_spawn(&t1, check_pair, &first);
	CHECK(sp_wait(parked, &t1.done));
	sp_spawn(&t2, check_pair, &second);
	/* Give the second call time to reach the locks. */
	nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	sp_release(parked);
	sp_join(&t1, "the first call (A, B)");
	sp_join(&t2, "the second call (B, A)");
	CHECK_EQ(first.result + second.result, 2);
	CHECK_EQ(atomic_load(&m[0].completes), 1);
	CHECK_EQ(atomic_load(&m[1].completes), 1);
	tw_purgatory_destroy(p);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(atomic_load(&m[i].releases), 1);
		tw_op_destroy(&m[i].op);
	}
}

int main(void)
{
	sp_install();
	name_keys();
	RUN(test_as_each_key_checked_in_turn);
	RUN(test_a_long_list);
	RUN(test_bad_input_checks_nothing);
	RUN(test_opposite_orders_do_not_wait_for_each_other);
	return check_report();
}
