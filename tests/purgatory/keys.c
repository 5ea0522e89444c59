/* SPDX-License-Identifier: MIT */
/*
 * Keys are bytes with a length (purgatory.h): the hash table finds a key's
 * list by its hash (a word at a time, src/purgatory/core.h) and confirms it
 * with key_equal, which reads words, overlapping halves and three single
 * bytes, never the bytes one by one. So every length from 1 to 40 is
 * compared here with one byte changed at each position, and watched: a
 * check of a key completes its ops and no other key's, in a purgatory of
 * one shard whose buckets grow under thousands of keys (where chains and
 * collisions happen). And the hash spreads keys that differ in a digit or
 * two, the usual names, over the shards and a shard's buckets: no shard
 * and no bucket chain far past what a random spread gives. A shard's
 * spare list (core.h) holds its first short key, and the next one once
 * that key's list is gone, beside allocated lists.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "purgatory/core.h"

#define LONGEST 40

static void test_every_length_and_position_compares(void)
{
	unsigned char a[LONGEST], b[LONGEST];

	for (size_t len = 1; len <= LONGEST; len++) {
		for (size_t i = 0; i < len; i++)
			a[i] = (unsigned char)(i * 37 + len);
		memcpy(b, a, len);
		CHECK(key_equal(a, b, len));
		CHECK_EQ(hash_key(a, len), hash_key(b, len));
		for (size_t at = 0; at < len; at++) {
			b[at] ^= 0x01;
			CHECK(!key_equal(a, b, len));
			CHECK(hash_key(a, len) != hash_key(b, len));
			b[at] ^= 0x81; /* the top bit too */
			CHECK(!key_equal(a, b, len));
			b[at] ^= 0x80;
		}
	}
	/* The length is in the hash: a key and the same key with zero bytes
	 * after it are two keys. */
	memset(a, 0, sizeof(a));
	for (size_t len = 1; len < LONGEST; len++)
		CHECK(hash_key(a, len) != hash_key(a, len + 1));
}

struct kop {
	struct tw_delayed_op op;
	struct tw_watch watch;
	bool ready;
	int completions;
};

static bool kop_try(struct tw_delayed_op *op)
{
	struct kop *k = tw_container_of(op, struct kop, op);

	return k->ready && tw_op_force_complete(op);
}

static void kop_complete(struct tw_delayed_op *op)
{
	tw_container_of(op, struct kop, op)->completions++;
}

static const struct tw_op_ops kop_ops = { .try_complete = kop_try,
					  .on_complete = kop_complete };

#define NKEYS 4000

/* Key i: LONGEST bytes, most of them shared with its neighbours, cut to a
 * length from 1 to LONGEST; keys of one length differ in a few bytes. */
static size_t key_of(int i, unsigned char out[LONGEST])
{
	size_t len = (size_t)(i % LONGEST) + 1;

	memset(out, 'k', LONGEST);
	out[len - 1] = (unsigned char)(i / LONGEST);
	out[len / 2] ^= (unsigned char)((i / LONGEST) >> 8);
	return len;
}

static void test_each_check_finds_its_own_key_only(void)
{
	struct tw_purgatory_config cfg = { .shards = 1 };
	struct tw_purgatory *p = NULL;
	struct kop *ops = calloc(NKEYS, sizeof(*ops));
	unsigned char key[LONGEST];

	CHECK(ops != NULL);
	CHECK_EQ(tw_purgatory_create(&p, &cfg), TW_OK);
	for (int i = 0; i < NKEYS; i++) {
		const void *keys[1] = { key };
		size_t lens[1] = { key_of(i, key) };

		CHECK_EQ(tw_op_init(&ops[i].op, 1000000000, &kop_ops, NULL), TW_OK);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &ops[i].op, keys,
							      lens, 1, &ops[i].watch),
			 0);
	}
	CHECK_EQ(tw_purgatory_watched(p), (size_t)NKEYS);
	CHECK(p->shards[0].nkeys == NKEYS); /* no two keys taken for one */
	for (int i = 0; i < NKEYS; i += 7) {
		size_t len = key_of(i, key);

		ops[i].ready = true;
		CHECK_EQ(tw_purgatory_check_and_complete(p, key, len), 1);
		CHECK_EQ(ops[i].completions, 1);
		CHECK_EQ(tw_purgatory_check_and_complete(p, key, len), 0);
	}
	for (int i = 0; i < NKEYS; i++)
		CHECK_EQ(ops[i].completions, i % 7 == 0);
	tw_purgatory_shutdown(p, NULL);
	tw_purgatory_destroy(p);
	free(ops);
}

static void watch_one(struct tw_purgatory *p, struct kop *k, const char *key,
		      size_t len)
{
	const void *keys[1] = { key };
	size_t lens[1] = { len };

	CHECK_EQ(tw_op_init(&k->op, 1000000000, &kop_ops, NULL), TW_OK);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &k->op, keys, lens, 1,
						      &k->watch),
		 0);
}

static void complete_one(struct tw_purgatory *p, struct kop *k, const char *key,
			 size_t len)
{
	k->ready = true;
	CHECK_EQ(tw_purgatory_check_and_complete(p, key, len), 1);
	CHECK_EQ(k->completions, 1);
}

static void test_a_shards_spare_list_is_taken_again(void)
{
	struct tw_purgatory_config cfg = { .shards = 1 };
	struct tw_purgatory *p = NULL;
	struct kop a = { 0 }, b = { 0 }, longer = { 0 }, c = { 0 }, a2 = { 0 };
	char long_key[SPARE_KEY_MAX + 1];
	struct pshard *sh;

	memset(long_key, 'L', sizeof(long_key));
	CHECK_EQ(tw_purgatory_create(&p, &cfg), TW_OK);
	sh = &p->shards[0];
	CHECK_EQ(sh->spare.len, 0);
	watch_one(p, &a, "a", 1); /* the spare */
	watch_one(p, &b, "bb", 2); /* allocated: the spare is taken */
	CHECK_EQ(sh->spare.len, 1);
	complete_one(p, &a, "a", 1);
	CHECK_EQ(sh->spare.len, 0); /* a's list is gone, the spare free */
	/* Too long for the spare: allocated, the spare left free. */
	watch_one(p, &longer, long_key, sizeof(long_key));
	CHECK_EQ(sh->spare.len, 0);
	watch_one(p, &c, "ccc", 3);
	CHECK_EQ(sh->spare.len, 3);
	watch_one(p, &a2, "a", 1); /* a again, now allocated */
	CHECK_EQ(sh->nkeys, 4);
	CHECK_EQ(tw_purgatory_watched(p), (size_t)4);
	/* Each key finds its own op and no other, wherever its list is. */
	CHECK_EQ(tw_purgatory_check_and_complete(p, "ccc", 3), 0);
	complete_one(p, &a2, "a", 1);
	complete_one(p, &longer, long_key, sizeof(long_key));
	complete_one(p, &c, "ccc", 3);
	CHECK_EQ(sh->spare.len, 0);
	complete_one(p, &b, "bb", 2);
	CHECK_EQ(sh->nkeys, 0);
	CHECK_EQ(tw_purgatory_watched(p), (size_t)0);
	tw_purgatory_shutdown(p, NULL);
	tw_purgatory_destroy(p);
}

/* The longest chain of one shard's table after n keys, and the fullest of
 * 512 shards: a random spread of 100,000 keys over 512 shards has its
 * fullest near 240 (mean 195); a table of 131,072 buckets (the shard grows
 * to keep a key a bucket) its longest chain near 8. Generous bounds: a
 * hash that left the bucket bits uneven (the first version of this one,
 * before its last fold, made chains of 23 of "key-N") fails them. */
static void test_names_spread_over_shards_and_buckets(void)
{
	enum { N = 100000, SHARDS = 512 };
	struct tw_purgatory fake = { .nshards = SHARDS };
	unsigned *per_shard = calloc(SHARDS, sizeof(*per_shard));
	size_t nbuckets = 131072;
	unsigned *per_bucket = calloc(nbuckets, sizeof(*per_bucket));
	unsigned fullest = 0, longest = 0;
	char name[32];

	CHECK(per_shard && per_bucket);
	for (int i = 0; i < N; i++) {
		int len = snprintf(name, sizeof(name), "key-%d", i);
		uint64_t h = hash_key(name, (size_t)len);
		unsigned s = shard_index(&fake, h);
		size_t b = bucket_index(h, nbuckets);

		CHECK(s < SHARDS);
		if (++per_shard[s] > fullest)
			fullest = per_shard[s];
		if (++per_bucket[b] > longest)
			longest = per_bucket[b];
	}
	CHECK(fullest < 300);
	CHECK(longest <= 12);
	free(per_shard);
	free(per_bucket);
}

int main(void)
{
	RUN(test_every_length_and_position_compares);
	RUN(test_each_check_finds_its_own_key_only);
	RUN(test_a_shards_spare_list_is_taken_again);
	RUN(test_names_spread_over_shards_and_buckets);
	return check_report();
}
