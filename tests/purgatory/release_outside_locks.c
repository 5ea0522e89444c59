/* SPDX-License-Identifier: MIT */
/*
 * on_release runs outside the purgatory's locks, and a key check's walk
 * without the shard lock keeps its place, forced through the test points
 * as in completion_and_release.c: beside shutdown's lock, a purge walk
 * beside a growing shard, and with no memory to defer a reference to
 * after a lock (a purge, a cancel, a shutdown) or to walk a key's list
 * of 300 ops.
 */
#define _POSIX_C_SOURCE 200809L

#include "purgatory_forced_ops.h"

/* ---- on_release outside the purgatory's shutdown lock ---- */

/*
 * purgatory.h: on_release "runs with no lock the purgatory took held: not
 * the purgatory's own". A shutdown that ran the on_release of the ops it
 * handed back while it held its shutdown lock would hang: thread A,
 * holding its lock L around its own call to tw_purgatory_shutdown, waits
 * for that lock, and B's on_release, which takes L, waits for A. A second
 * shutdown waits for the first one's work, not for its on_releases. (A
 * bounded wait stands for the hang: a failure, not a stuck test.)
 */
static pthread_mutex_t release_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int release_started, a_holds_lock, release_got_lock;

static bool never_done(struct tw_delayed_op *op)
{
	(void)op;
	return false;
}

static void nothing(struct tw_delayed_op *op)
{
	(void)op;
}

static void release_takes_the_lock(struct tw_delayed_op *op)
{
	struct timespec until;

	(void)op;
	atomic_store(&release_started, 1);
	WAIT_FOR(atomic_load(&a_holds_lock), "thread A to take its lock");
	nanosleep(&(struct timespec){ 0, 100000000 }, NULL); /* A is inside its
								 shutdown call by now */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60; /* a guard against a hang: A lets go in time */
	if (pthread_mutex_timedlock(&release_lock, &until) == 0) {
		atomic_store(&release_got_lock, 1);
		pthread_mutex_unlock(&release_lock);
	}
}

static void *shutdown_holding_the_lock(void *arg)
{
	WAIT_FOR(atomic_load(&release_started), "on_release to start");
	pthread_mutex_lock(&release_lock);
	atomic_store(&a_holds_lock, 1);
	CHECK_EQ(tw_purgatory_shutdown(arg, NULL), 0);
	pthread_mutex_unlock(&release_lock);
	return NULL;
}

static void test_on_release_runs_outside_the_shutdown_lock(void)
{
	static const struct tw_op_ops ops = { never_done, nothing, NULL,
					      release_takes_the_lock, NULL };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	static struct {
		struct tw_delayed_op op;
		struct tw_watch w;
	} o;
	const void *keys[1] = { "k" };
	size_t lens[1] = { 1 };
	pthread_t a;

	CHECK_EQ(tw_op_init(&o.op, 100000, &ops, NULL), TW_OK);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 1, &o.w), 0);
	pthread_create(&a, NULL, shutdown_holding_the_lock, p);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 1); /* hands the op back */
	pthread_join(a, NULL);
	CHECK_EQ(atomic_load(&release_got_lock), 1);
	tw_purgatory_destroy(p);
}

/* ---- the purge walk beside a growing shard ---- */

/*
 * A walk over every shard that read a shard's table pointer in its loop
 * condition before taking that shard's lock, while a watch of a new key
 * replaces the table under the lock when the shard grows (its 9th key),
 * is a data race (purgatory.h: every call may be made from any thread).
 * Only a purge beside a growing shard shows it: the threaded tests that
 * purge watch 8 keys over 4 shards, and a shard grows at its 9th; the
 * test whose shards grow is single-threaded.
 *
 * Here the purge's on_release of an op of shard s (run after shard s is
 * unlocked, before shard s + 1 is read) waits until another thread has
 * grown shard s + 1. The two threads meet through relaxed atomics only,
 * which order nothing for ThreadSanitizer: the table's read and its write
 * are ordered by nothing but the shard's lock, and TSan reported the read
 * (make tsan) until the walk read the table under the lock.
 */
static atomic_int walk_in_release, shard_grown;

static bool never_try(struct tw_delayed_op *op)
{
	(void)op;
	return false;
}

static void nothing_to_do(struct tw_delayed_op *op)
{
	(void)op;
}

static void release_waits_for_the_grow(struct tw_delayed_op *op)
{
	(void)op;
	atomic_store_explicit(&walk_in_release, 1, memory_order_relaxed);
	while (!atomic_load_explicit(&shard_grown, memory_order_relaxed))
		sched_yield();
}

enum { GROW_KEYS = 9 };

struct grower {
	struct tw_purgatory *p;
	struct tw_delayed_op ops[GROW_KEYS];
	struct tw_watch watches[GROW_KEYS];
	char keys[GROW_KEYS][16];
};

static void *grow_a_shard(void *arg)
{
	struct grower *g = arg;

	while (!atomic_load_explicit(&walk_in_release, memory_order_relaxed))
		sched_yield();
	for (int i = 0; i < GROW_KEYS; i++) {
		const void *k[1] = { g->keys[i] };
		size_t len[1] = { strlen(g->keys[i]) };

		CHECK_EQ(tw_purgatory_try_complete_else_watch(g->p, &g->ops[i], k, len,
							      1, &g->watches[i]),
			 0);
	}
	atomic_store_explicit(&shard_grown, 1, memory_order_relaxed);
	return NULL;
}

/* A key of shard `shard` of p, not yet in use (n counts the tries). */
static void key_in_shard(struct tw_purgatory *p, unsigned shard, unsigned *n,
			 char out[16])
{
	do
		snprintf(out, 16, "key-%u", (*n)++);
	while (shard_index(p, hash_key(out, strlen(out))) != shard);
}

static void test_a_purge_beside_a_growing_shard(void)
{
	static const struct tw_op_ops walked_ops = { never_try, nothing_to_do,
						     nothing_to_do,
						     release_waits_for_the_grow, NULL };
	static const struct tw_op_ops grown_ops = { never_try, nothing_to_do,
						    nothing_to_do, nothing_to_do, NULL };
	static struct grower g;
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct tw_delayed_op walked;
	struct tw_watch w;
	char walked_key[16];
	const void *k[1] = { walked_key };
	size_t len[1];
	unsigned n = 0;
	pthread_t th;

	atomic_store(&walk_in_release, 0);
	atomic_store(&shard_grown, 0);
	key_in_shard(p, 0, &n, walked_key);
	len[0] = strlen(walked_key);
	g.p = p;
	for (int i = 0; i < GROW_KEYS; i++) {
		key_in_shard(p, 1, &n, g.keys[i]);
		CHECK_EQ(tw_op_init(&g.ops[i], 100, &grown_ops, NULL), TW_OK);
	}
	CHECK_EQ(p->shards[1].nbuckets, (size_t)GROW_KEYS - 1); /* grows at the 9th */
	CHECK_EQ(tw_op_init(&walked, 100, &walked_ops, NULL), TW_OK);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &walked, k, len, 1, &w), 0);
	CHECK(tw_op_force_complete(&walked)); /* its entry holds the last reference */
	pthread_create(&th, NULL, grow_a_shard, &g);
	tw_purgatory_purge(p); /* releases walked, then walks shard 1 */
	pthread_join(th, NULL);
	CHECK(p->shards[1].nbuckets > (size_t)GROW_KEYS - 1);
	CHECK_EQ(tw_purgatory_watched(p), (size_t)GROW_KEYS);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), GROW_KEYS);
	tw_purgatory_destroy(p);
	tw_op_destroy(&walked);
	for (int i = 0; i < GROW_KEYS; i++)
		tw_op_destroy(&g.ops[i]);
}

/* ---- no memory to defer a reference to after a lock ---- */

/*
 * A reference dropped under a purgatory lock runs on_release there when it
 * is the last. Three places drop references they must defer: the unlink
 * of a watch entry (purge, key checks, cancel: on_release under the
 * shard lock), cancel_for_key's claimed ops (claimed, they must be handed
 * back or completed) and shutdown's handed-back timeouts (on_release
 * under the shutdown lock and the service's). Collected on a list that
 * grows, they would be dropped in place or lost when it cannot grow;
 * entries are chained through their own links and the handed-back
 * timeouts through their ops, and no list of ops is left to grow. Here
 * every allocation the purgatory asks for fails (fail_all),
 * and on_release records whether the shard's or the shutdown's lock was
 * held.
 */
static struct tw_purgatory *oom_p;
static atomic_int oom_releases, oom_under_lock, oom_handed, oom_completes;

/* Every allocation the purgatory asks for fails (each TW_TEST_FAIL
 * point). */
static bool fail_all(const char *point, const void *obj)
{
	(void)point;
	(void)obj;
	return true;
}

static bool held(pthread_mutex_t *mu)
{
	if (pthread_mutex_trylock(mu))
		return true;
	pthread_mutex_unlock(mu);
	return false;
}

static bool oom_try(struct tw_delayed_op *op)
{
	(void)op;
	return false;
}

static void oom_complete(struct tw_delayed_op *op)
{
	(void)op;
	atomic_fetch_add(&oom_completes, 1);
}

static void oom_release(struct tw_delayed_op *op)
{
	bool locked = held(&oom_p->shutdown_mu);

	(void)op;
	for (unsigned i = 0; i < oom_p->nshards; i++)
		locked |= tw__lock_is_held(&oom_p->shards[i].mu);
	atomic_fetch_add(&oom_releases, 1);
	if (locked)
		atomic_fetch_add(&oom_under_lock, 1);
}

static void oom_hand_back(struct tw_delayed_op *op)
{
	(void)op;
	atomic_fetch_add(&oom_handed, 1);
}

static const struct tw_op_ops oom_ops = { oom_try, oom_complete, oom_complete,
					  oom_release, NULL };

static void oom_watch(struct tw_delayed_op *op, struct tw_watch *w)
{
	const void *k[1] = { "topic-0" };
	size_t len[1] = { 7 };

	oom_p = manual_purgatory_purging(0);
	atomic_store(&oom_releases, 0);
	atomic_store(&oom_under_lock, 0);
	atomic_store(&oom_handed, 0);
	atomic_store(&oom_completes, 0);
	CHECK_EQ(tw_op_init(op, 100, &oom_ops, NULL), TW_OK);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(oom_p, op, k, len, 1, w), 0);
}

static void test_a_purge_without_memory_releases_outside_the_shard_lock(void)
{
	struct tw_delayed_op op;
	struct tw_watch w;

	oom_watch(&op, &w);
	CHECK(tw_op_force_complete(&op)); /* its entry holds the last reference */
	tw__test_set_fail(fail_all);
	tw_purgatory_purge(oom_p);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	CHECK_EQ(atomic_load(&oom_under_lock), 0);
	CHECK_EQ(tw_purgatory_watched(oom_p), 0);
	tw_purgatory_destroy(oom_p);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	tw_op_destroy(&op);
}

static void test_a_cancel_without_memory_hands_back_what_it_claims(void)
{
	struct tw_delayed_op op;
	struct tw_watch w;

	oom_watch(&op, &w);
	tw__test_set_fail(fail_all);
	CHECK_EQ(tw_purgatory_cancel_for_key(oom_p, "topic-0", 7, oom_hand_back), 1);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&oom_handed), 1);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	CHECK_EQ(atomic_load(&oom_under_lock), 0);
	CHECK_EQ(tw_purgatory_delayed(oom_p), 0);
	tw_purgatory_destroy(oom_p);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	CHECK_EQ(atomic_load(&oom_completes), 0);
	tw_op_destroy(&op);
}

static void *force_op_thread(void *arg)
{
	CHECK(tw_op_force_complete(arg));
	return NULL;
}

static void *shutdown_thread(void *arg)
{
	CHECK_EQ(tw_purgatory_shutdown(arg, oom_hand_back), 0);
	return NULL;
}

/* The model's completer between its claim and its cancel: the service's
 * shutdown holds the op's timeout, so the completer's cancel leaves its
 * reference to the hand-back, and the completer's own goes first. */
static void test_a_shutdown_without_memory_releases_outside_its_lock(void)
{
	struct tw_delayed_op op;
	struct tw_watch w;
	struct sp_thread completer, closer;
	int claimed, handing;

	oom_watch(&op, &w);
	claimed = sp_arm("force_complete.claimed", &op);
	sp_spawn(&completer, force_op_thread, &op);
	CHECK(sp_wait(claimed, &completer.done));
	tw_purgatory_purge(oom_p); /* the entry's reference goes */
	CHECK_EQ(atomic_load(&oom_releases), 0);
	handing = sp_arm("shutdown.hand_back", &op.timer);
	sp_spawn(&closer, shutdown_thread, oom_p);
	CHECK(sp_wait(handing, &closer.done));
	sp_release(claimed); /* its cancel cannot stop the timeout */
	sp_join(&completer, "force_complete");
	CHECK_EQ(atomic_load(&oom_releases), 0); /* the timeout's is the last */
	tw__test_set_fail(fail_all);
	sp_release(handing);
	sp_join(&closer, "shutdown");
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&oom_completes), 1);
	CHECK_EQ(atomic_load(&oom_handed), 0);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	CHECK_EQ(atomic_load(&oom_under_lock), 0);
	tw_purgatory_destroy(oom_p);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	tw_op_destroy(&op);
}

/*
 * Shutdown hands the still-armed timeouts back under the service's lock
 * and drops their references after it; a shutdown that took room for
 * each reference first would return TW_ENOMEM with more than a fixed
 * list holds (128) and no memory. Those references are chained through
 * their ops, and shutdown needs no memory at all: 136 ops armed,
 * every allocation failing, all handed back, every on_release outside
 * the purgatory's locks; destroy the same.
 */
enum { ARMED_N = 136 };

static void test_a_shutdown_of_136_armed_ops_needs_no_memory(void)
{
	static struct tw_delayed_op ops[ARMED_N];
	static struct tw_watch ws[ARMED_N];
	const void *k[1] = { "topic-0" };
	size_t len[1] = { 7 };

	for (int destroy = 0; destroy < 2; destroy++) {
		oom_watch(&ops[0], &ws[0]);
		for (int i = 1; i < ARMED_N; i++) {
			CHECK_EQ(tw_op_init(&ops[i], 100, &oom_ops, NULL), TW_OK);
			CHECK_EQ(tw_purgatory_try_complete_else_watch(oom_p, &ops[i], k, len,
								      1, &ws[i]),
				 0);
		}
		CHECK_EQ(tw_purgatory_delayed(oom_p), (size_t)ARMED_N);
		tw__test_set_fail(fail_all);
		if (destroy) {
			tw_purgatory_destroy(oom_p);
			tw__test_set_fail(NULL);
		} else {
			CHECK_EQ(tw_purgatory_shutdown(oom_p, oom_hand_back), ARMED_N);
			tw__test_set_fail(NULL);
			CHECK_EQ(atomic_load(&oom_handed), ARMED_N);
			CHECK_EQ(tw_purgatory_watched(oom_p), 0);
			CHECK_EQ(tw_purgatory_delayed(oom_p), 0);
			CHECK_EQ(atomic_load(&oom_releases), ARMED_N);
			tw_purgatory_destroy(oom_p);
		}
		CHECK_EQ(atomic_load(&oom_releases), ARMED_N);
		CHECK_EQ(atomic_load(&oom_under_lock), 0);
		CHECK_EQ(atomic_load(&oom_completes), 0);
		for (int i = 0; i < ARMED_N; i++)
			tw_op_destroy(&ops[i]);
	}
}

/*
 * The same where the service's shutdown itself hands back every armed
 * timeout: 136 ops, each claimed by a force_complete that has not yet
 * stopped its timeout (the model's completer between its claim and its
 * cancel; here nested on one thread: each force, at its claim, forces the
 * next), and then, inside the innermost, a shutdown with no memory. The
 * service hands back 136 armed timeouts; their references go after its
 * locks, and each force's own is the op's last.
 */
static struct tw_delayed_op nested_ops[ARMED_N];
static struct tw_watch nested_ws[ARMED_N];
static int nested_claimed;
static int64_t nested_shutdown = 99;

static void force_the_next(const void *obj, void *arg)
{
	(void)obj;
	(void)arg;
	if (++nested_claimed < ARMED_N) {
		sp_on("force_complete.claimed", &nested_ops[nested_claimed],
		      force_the_next, NULL);
		CHECK(tw_op_force_complete(&nested_ops[nested_claimed]));
		return;
	}
	CHECK_EQ(tw_purgatory_delayed(oom_p), (size_t)ARMED_N); /* all armed */
	tw__test_set_fail(fail_all);
	nested_shutdown = tw_purgatory_shutdown(oom_p, oom_hand_back);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&oom_releases), 0); /* each force holds its op */
}

static void test_a_shutdown_handed_136_armed_timeouts_needs_no_memory(void)
{
	const void *k[1] = { "topic-0" };
	size_t len[1] = { 7 };

	oom_watch(&nested_ops[0], &nested_ws[0]);
	for (int i = 1; i < ARMED_N; i++) {
		CHECK_EQ(tw_op_init(&nested_ops[i], 100, &oom_ops, NULL), TW_OK);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(oom_p, &nested_ops[i], k,
							      len, 1, &nested_ws[i]),
			 0);
	}
	nested_claimed = 0;
	sp_on("force_complete.claimed", &nested_ops[0], force_the_next, NULL);
	CHECK(tw_op_force_complete(&nested_ops[0]));
	CHECK_EQ(nested_claimed, ARMED_N);
	CHECK_EQ(nested_shutdown, 0); /* all completed: none to hand back */
	CHECK_EQ(atomic_load(&oom_completes), ARMED_N);
	CHECK_EQ(atomic_load(&oom_handed), 0);
	CHECK_EQ(atomic_load(&oom_releases), ARMED_N);
	CHECK_EQ(atomic_load(&oom_under_lock), 0);
	CHECK_EQ(tw_purgatory_delayed(oom_p), 0);
	CHECK_EQ(tw_purgatory_watched(oom_p), 0);
	tw_purgatory_destroy(oom_p);
	CHECK_EQ(atomic_load(&oom_releases), ARMED_N);
	for (int i = 0; i < ARMED_N; i++)
		tw_op_destroy(&nested_ops[i]);
}

/*
 * A key check tries every op watched on its key, whatever the allocator
 * does. A check that copied its key's ops somewhere first would, with no
 * memory, leave the ops past what it could hold untried, to their
 * timeouts (Kafka's common case is a long list: one partition, many
 * produce requests). The check walks the list itself and allocates
 * nothing: 300 ops whose condition holds, checked with every allocation
 * failing, all complete.
 */
static void test_a_key_check_of_300_ops_needs_no_memory(void)
{
	enum { N = 300 };
	static struct gop ops[N];
	struct tw_purgatory *p = manual_purgatory_purging(0);

	for (int i = 0; i < N; i++) {
		gop_init(&ops[i], p, "topic-0", NULL);
		CHECK_EQ(gop_watch(&ops[i]), 0);
		atomic_store(&ops[i].ready, 1);
	}
	tw__test_set_fail(fail_all);
	CHECK_EQ(check_key(p, "topic-0"), N);
	tw__test_set_fail(NULL);
	for (int i = 0; i < N; i++)
		CHECK_EQ(atomic_load(&ops[i].completes), 1);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	tw_purgatory_destroy(p);
	for (int i = 0; i < N; i++) {
		CHECK_EQ(atomic_load(&ops[i].expires), 0);
		CHECK_EQ(atomic_load(&ops[i].releases), 1);
		tw_op_destroy(&ops[i].op);
	}
}

/* ---- a key check walks a long list without its lock ---- */

/*
 * A check walks its key's list without the shard lock, its place kept by
 * pointers into the list, which its pin keeps there (watch.c, struct
 * key_walk), and notes up to 8 completed entries for its way out (more,
 * and the last check out drops every completed one). Here 300 ops watch
 * the key, their condition true, and a check on another thread is parked
 * with its list pinned and its walk not begun (the point "check.walk"),
 * while the list changes: every op is cancelled, another check walks
 * through it, ops are watched after it began, the ops at its start are
 * completed and purged. Each time every op ends exactly once, the check
 * ends, and the key's list is freed once the last pin is out.
 */
static const char ckey[] = "partition-0";
enum { LONG_N = 300, MIDDLE = 128 };
static struct gop long_ops[LONG_N];
static atomic_llong long_result;
static atomic_int long_handed;

static void *check_ckey(void *arg)
{
	atomic_store(&long_result, check_key(arg, ckey));
	return NULL;
}

static void count_hand_back(struct tw_delayed_op *op)
{
	(void)op;
	atomic_fetch_add(&long_handed, 1);
}

static struct tw_purgatory *long_start(struct sp_thread *checker, int *parked)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);

	atomic_store(&long_result, -99);
	atomic_store(&long_handed, 0);
	for (int i = 0; i < LONG_N; i++) {
		gop_init(&long_ops[i], p, ckey, NULL);
		CHECK_EQ(gop_watch(&long_ops[i]), 0);
		atomic_store(&long_ops[i].ready, 1);
	}
	*parked = sp_arm("check.walk", ckey);
	sp_spawn(checker, check_ckey, p);
	CHECK(sp_wait(*parked, &checker->done));
	return p;
}

/* Every op ended once (completed or handed back), none expired, the list
 * is gone; then every op is released once. */
static void long_finish(struct tw_purgatory *p)
{
	int completes = 0;

	for (int i = 0; i < LONG_N; i++) {
		completes += atomic_load(&long_ops[i].completes);
		CHECK_EQ(atomic_load(&long_ops[i].expires), 0);
	}
	CHECK_EQ(completes + atomic_load(&long_handed), LONG_N);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(keys_listed(p), 0);
	tw_purgatory_destroy(p);
	for (int i = 0; i < LONG_N; i++) {
		CHECK(atomic_load(&long_ops[i].completes) <= 1);
		CHECK_EQ(atomic_load(&long_ops[i].releases), 1);
		tw_op_destroy(&long_ops[i].op);
	}
}

static void test_a_long_walk_beside_a_cancel(void)
{
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = long_start(&checker, &parked);

	/* every op, all ahead of its walk */
	CHECK_EQ(tw_purgatory_cancel_for_key(p, ckey, strlen(ckey), count_hand_back),
		 LONG_N);
	CHECK_EQ(keys_listed(p), 1); /* kept by the check's pin */
	sp_release(parked);
	sp_join(&checker, "the check");
	CHECK_EQ(atomic_load(&long_result), 0); /* all claimed by the cancel */
	long_finish(p);
}

static void test_a_long_walk_beside_another(void)
{
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = long_start(&checker, &parked);

	/* Another check completes every op and leaves first: it marks the
	 * list, and the parked check, the last out, drops the entries. */
	CHECK_EQ(check_key(p, ckey), LONG_N);
	sp_release(parked);
	sp_join(&checker, "the check");
	CHECK_EQ(atomic_load(&long_result), 0);
	long_finish(p);
}

static void test_a_long_walk_meets_ops_completed_elsewhere(void)
{
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = long_start(&checker, &parked);

	/* Two ops in the middle of its walk complete elsewhere; a purge
	 * meets the check's pin and leaves their entries to the check, which
	 * passes them and, the last one out, drops them. */
	CHECK(tw_op_force_complete(&long_ops[MIDDLE].op));
	CHECK(tw_op_force_complete(&long_ops[MIDDLE + 1].op));
	tw_purgatory_purge(p);
	CHECK_EQ(tw_purgatory_watched(p), (size_t)LONG_N);
	sp_release(parked);
	sp_join(&checker, "the check");
	CHECK_EQ(atomic_load(&long_result), LONG_N - 2);
	long_finish(p);
}

/* Ops watched after the check began go after its end: it does not try
 * them (their own watch checked them), and so it ends however fast the
 * key is watched. Here 100 are watched while it is parked, their
 * condition comes true only after their watch, and the check leaves them
 * to the next one. */
enum { LATE_N = 100 };
static struct gop late[LATE_N];

static void test_a_long_walk_leaves_later_watches(void)
{
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = long_start(&checker, &parked);

	for (int i = 0; i < LATE_N; i++) {
		gop_init(&late[i], p, ckey, NULL);
		CHECK_EQ(gop_watch(&late[i]), 0);
		atomic_store(&late[i].ready, 1);
	}
	sp_release(parked);
	sp_join(&checker, "the check");
	CHECK_EQ(atomic_load(&long_result), LONG_N);
	for (int i = 0; i < LATE_N; i++)
		CHECK_EQ(atomic_load(&late[i].completes), 0);
	CHECK_EQ(tw_purgatory_watched(p), (size_t)LATE_N);
	CHECK_EQ(check_key(p, ckey), LATE_N);
	long_finish(p);
	for (int i = 0; i < LATE_N; i++) {
		CHECK_EQ(atomic_load(&late[i].completes), 1);
		CHECK_EQ(atomic_load(&late[i].releases), 1);
		tw_op_destroy(&late[i].op);
	}
}

int main(int argc, char **argv)
{
	sp_install();
	RUN_IF(test_on_release_runs_outside_the_shutdown_lock);
	RUN_IF(test_a_purge_beside_a_growing_shard);
	RUN_IF(test_a_purge_without_memory_releases_outside_the_shard_lock);
	RUN_IF(test_a_cancel_without_memory_hands_back_what_it_claims);
	RUN_IF(test_a_shutdown_without_memory_releases_outside_its_lock);
	RUN_IF(test_a_shutdown_of_136_armed_ops_needs_no_memory);
	RUN_IF(test_a_shutdown_handed_136_armed_timeouts_needs_no_memory);
	RUN_IF(test_a_key_check_of_300_ops_needs_no_memory);
	RUN_IF(test_a_long_walk_beside_a_cancel);
	RUN_IF(test_a_long_walk_beside_another);
	RUN_IF(test_a_long_walk_meets_ops_completed_elsewhere);
	RUN_IF(test_a_long_walk_leaves_later_watches);
	return check_report();
}
