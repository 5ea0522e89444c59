/* SPDX-License-Identifier: MIT */
/*
 * purgatory.c — Kafka's DelayedOperationPurgatory.
 *
 * Watch lists. Every key that has operations waiting on it has a list of
 * watch entries (the callers' struct tw_watch, one per op and key) in a
 * hash table split into shards with a mutex each (Kafka uses 512), so
 * producers checking different keys rarely share a lock.
 *
 * Exactly once. tw_op_force_complete() flips op->completed from 0 to 1 with
 * a compare-and-swap: the condition check, the timeout and a cancel race
 * for it and exactly one wins. The winner stops the timeout and (unless
 * it is a cancel) runs on_complete; the timeout then adds on_expiration.
 * Stopping never waits (Kafka's forceComplete does not either): the
 * winner usually holds the op's lock, and a wait for an expired timeout
 * waits for the reaper, whose current callback may want that very lock.
 * So only a pending timeout is stopped (tw__service_stop_pending, one
 * CAS and an unlink); one that already expired runs later, loses the
 * race, and drops its reference; one that the service's shutdown holds
 * is handed back to timeout_handed_back, which does the same.
 *
 * Lazy purge, as Kafka. A completed op's entries stay in the lists of its
 * other keys until that key is checked, or until more than purge_interval
 * ops completed since the last purge, when one thread walks every list.
 * Because entries outlive completion, ops are reference counted: each
 * linked entry, an armed timeout and any call in progress hold a
 * reference, and on_release runs when the last one goes. A call that comes
 * from outside holding none (force_complete, safe_try_complete) gets one
 * only if the count is not zero: zero is final.
 *
 * Purges run where the purgatory has let go of every op lock (after
 * try_complete's section, after a key check's loop, after a timeout), not
 * inside a completion: a purge drops references, and an on_release of an
 * op that shares the caller's lock would run under it.
 *
 * Locks: a shard lock is never held while user code runs (try_complete,
 * on_complete and on_release run after the shard is unlocked, on a
 * snapshot of the ops); an op's lock is taken before a shard lock, never
 * after. An op's own lock is one word in the op (a futex on Linux), not
 * a pthread_mutex_t: 4 bytes instead of 40 in every op, and the same one
 * atomic exchange when nobody else holds it, which is nearly always (two
 * threads meet on an op only when two keys it watches are checked at
 * once). Contended, a thread marks the word and sleeps on it; the holder
 * wakes one sleeper when it lets go.
 *
 * Races closed (issue 13; model/purgatory.pml checks them, and
 * tests/test_races.c forces each): try_complete_else_watch checks again
 * after watching, under the op's lock, so a key check between its first
 * check and its watch is not lost; shutdown waits for the calls under way
 * (counted in stripes) before it walks the lists; claim() takes its
 * reference before the exactly-once CAS, so the op cannot be released
 * under it; and the service's shutdown hands a still-armed timeout (of an
 * op a completer claimed but has not cancelled yet) back to the purgatory,
 * which drops its reference. Issue 28 closed three more (the model checks
 * each, tests/test_promises_purgatory.c forces each): a reference taken
 * from zero ran on_release twice; a completer waited in cancel_sync for
 * an expired timeout whose reaper waited for the completer's lock; a
 * purge inside a completion released another op under the shared lock.
 *
 * Worked example: X and Y share a lock and time out in the same tick.
 * The reaper expires both into one batch and runs X's timeout: claim
 * wins, on_complete(X), on_expiration(X) checks Y's key and waits for the
 * shared lock, which a producer holds in try_complete(Y). The producer's
 * force_complete(Y) wins Y's CAS, finds Y's timeout EXPIRED (not
 * pending), leaves it, runs on_complete(Y) and returns; the lock goes;
 * X's check finds Y completed. Next in the batch, Y's timeout: claim
 * loses, its reference goes, nothing else runs.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* syscall(): the own lock's futex */

#include <sched.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "service_internal.h"
#include "test_point.h"
#include "timingwheel/purgatory.h"

struct tw_watchers {
	struct tw_watchers *next; /* hash chain */
	uint64_t hash;
	size_t len;
	size_t count;
	struct tw_link entries;
	unsigned char key[];
};

struct pshard {
	_Alignas(64) pthread_mutex_t mu;
	struct tw_watchers **table;
	size_t nbuckets;
	size_t nkeys;
};

/* Calls of try_complete_else_watch in progress, striped over cache lines
 * by thread so that the count costs no shared line in the common case.
 * Shutdown sets closing, then waits for every stripe to reach zero: an op
 * that passed the closing check is then on its lists, or completed, before
 * shutdown walks them (bug 4: it was neither, and was lost). */
#define ENTRY_STRIPES 16

struct entry_stripe {
	_Alignas(64) atomic_uint active;
};

struct tw_purgatory {
	struct tw_service *svc;
	struct entry_stripe stripes[ENTRY_STRIPES];
	struct pshard *shards;
	unsigned nshards;
	size_t purge_interval;
	atomic_size_t watched;
	atomic_size_t delayed;
	atomic_size_t completed_since_purge;
	atomic_bool purging;
	atomic_bool closing;
	pthread_mutex_t shutdown_mu;
	bool shut_down;
};

/* Ops collected under a shard lock and dealt with after it. Per call, with
 * room for 32 inline, so the common case allocates nothing. */
struct oplist {
	struct tw_delayed_op **ops;
	size_t len, cap;
	struct tw_delayed_op *small[32];
};

static void oplist_init(struct oplist *l)
{
	l->ops = l->small;
	l->len = 0;
	l->cap = sizeof(l->small) / sizeof(l->small[0]);
}

static bool oplist_push(struct oplist *l, struct tw_delayed_op *op)
{
	if (l->len == l->cap) {
		size_t cap = 2 * l->cap;
		struct tw_delayed_op **grown = malloc(cap * sizeof(*grown));

		if (!grown)
			return false;
		memcpy(grown, l->ops, l->len * sizeof(*grown));
		if (l->ops != l->small)
			free(l->ops);
		l->ops = grown;
		l->cap = cap;
	}
	l->ops[l->len++] = op;
	return true;
}

static void oplist_free(struct oplist *l)
{
	if (l->ops != l->small)
		free(l->ops);
	oplist_init(l);
}

#if defined(__LP64__)
/* purgatory.h says what each of these bytes is for; keep it true. */
_Static_assert(sizeof(struct tw_delayed_op) == 112,
	       "an op is 112 bytes on LP64");
_Static_assert(sizeof(struct tw_watch) == 24,
	       "a watch entry is 24 bytes on LP64");
#endif

/* The op's own lock: own_lock is OWN_FREE, OWN_HELD, or OWN_SLEEPERS
 * (held, and someone may sleep on it, so the release must wake one). */
enum { OWN_FREE = 0, OWN_HELD = 1, OWN_SLEEPERS = 2 };

static void own_lock_sleep(unsigned *word)
{
#ifdef __linux__
	/* Returns at once if the word is no longer OWN_SLEEPERS. */
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, OWN_SLEEPERS, NULL, NULL, 0);
#else
	(void)word;
	sched_yield();
#endif
}

static void own_lock_wake_one(unsigned *word)
{
#ifdef __linux__
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
	(void)word;
#endif
}

static void own_lock_acquire(unsigned *word)
{
	unsigned seen = OWN_FREE;

	if (__atomic_compare_exchange_n(word, &seen, OWN_HELD, false,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	/* Whoever takes it from here on takes it as OWN_SLEEPERS: it cannot
	 * know whether another sleeper is left, so its release wakes one
	 * (at worst a wake-up nobody needed). */
	if (seen != OWN_SLEEPERS)
		seen = __atomic_exchange_n(word, OWN_SLEEPERS, __ATOMIC_ACQUIRE);
	while (seen != OWN_FREE) {
		own_lock_sleep(word);
		seen = __atomic_exchange_n(word, OWN_SLEEPERS, __ATOMIC_ACQUIRE);
	}
}

static void own_lock_release(unsigned *word)
{
	/* The op stays alive across this: every caller holds a reference
	 * (or owns an op the purgatory never saw). */
	if (__atomic_exchange_n(word, OWN_FREE, __ATOMIC_RELEASE) == OWN_SLEEPERS)
		own_lock_wake_one(word);
}

static void lock_op(struct tw_delayed_op *op)
{
	if (op->shared_lock)
		pthread_mutex_lock(op->shared_lock);
	else
		own_lock_acquire(&op->own_lock);
}

static void unlock_op(struct tw_delayed_op *op)
{
	if (op->shared_lock)
		pthread_mutex_unlock(op->shared_lock);
	else
		own_lock_release(&op->own_lock);
}

/* The op's counters are plain ints in the public struct (C++ cannot see
 * <stdatomic.h> types); these are their atomic accessors, sequentially
 * consistent as the atomic_int operations they replace. */
#define OP_LOAD(field) __atomic_load_n(&(field), __ATOMIC_SEQ_CST)
#define OP_ADD(field, n) __atomic_fetch_add(&(field), (n), __ATOMIC_SEQ_CST)
#define OP_SUB(field, n) __atomic_fetch_sub(&(field), (n), __ATOMIC_SEQ_CST)

static bool op_claim_flag(struct tw_delayed_op *op)
{
	int expected = 0;

	return __atomic_compare_exchange_n(&op->completed, &expected, 1, false,
					   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* ---- references ---- */

/* A reference taken by a holder of another one: the count is not zero. */
static void op_get(struct tw_delayed_op *op)
{
	OP_ADD(op->refs, 1);
}

/*
 * A reference taken by a caller that holds none (a force_complete or
 * safe_try_complete from outside), only unless the count is zero. Zero
 * means the last reference went and on_release is due or running: the
 * op is on its way out, and a plain increment would bring the count back
 * to life, to reach zero again at this caller's put, and run on_release a
 * second time (issue 28, item 1). Only for an op the purgatory saw: one
 * it never saw has no references and no on_release to run.
 */
static bool op_get_unless_released(struct tw_delayed_op *op)
{
	int n = OP_LOAD(op->refs);

	do {
		if (n == 0)
			return false;
	} while (!__atomic_compare_exchange_n(&op->refs, &n, n + 1, false,
					      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return true;
}

static void op_put(struct tw_delayed_op *op)
{
	if (OP_SUB(op->refs, 1) != 1)
		return;
	TW_TEST_POINT("op_put.last", op);
	if (op->ops->on_release)
		op->ops->on_release(op);
}

/* The op's timeout is no longer needed: stop it if it is pending, and drop
 * its reference. Never waits (issue 28, item 2): an expired timeout, or
 * one the service's shutdown holds, is left to on_timeout or
 * timeout_handed_back, which find the op completed and drop the reference
 * themselves. */
static void drop_timeout(struct tw_purgatory *p, struct tw_delayed_op *op)
{
	if (tw__service_stop_pending(p->svc, &op->timer) == TW_SVC_STOPPED) {
		atomic_fetch_sub(&p->delayed, 1);
		op_put(op); /* the timeout's reference */
	}
}

/* Drop the references collected under a lock, now that it is released. */
static void put_all(struct oplist *puts)
{
	for (size_t i = 0; i < puts->len; i++)
		op_put(puts->ops[i]);
	oplist_free(puts);
}

/* ---- the hash table ---- */

static uint64_t hash_key(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h ^ (h >> 29);
}

static struct pshard *shard_for(struct tw_purgatory *p, uint64_t h)
{
	return &p->shards[h % p->nshards];
}

static struct tw_watchers **slot_for(struct pshard *sh, uint64_t h)
{
	return &sh->table[(h >> 16) % sh->nbuckets];
}

static struct tw_watchers *find(struct pshard *sh, uint64_t h, const void *key,
				size_t len)
{
	for (struct tw_watchers *ws = *slot_for(sh, h); ws; ws = ws->next)
		if (ws->hash == h && ws->len == len && !memcmp(ws->key, key, len))
			return ws;
	return NULL;
}

static void grow(struct pshard *sh)
{
	size_t n = sh->nbuckets * 2;
	struct tw_watchers **table = calloc(n, sizeof(*table));

	if (!table)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < sh->nbuckets; i++) {
		while (sh->table[i]) {
			struct tw_watchers *ws = sh->table[i];

			sh->table[i] = ws->next;
			ws->next = table[(ws->hash >> 16) % n];
			table[(ws->hash >> 16) % n] = ws;
		}
	}
	free(sh->table);
	sh->table = table;
	sh->nbuckets = n;
}

static struct tw_watchers *find_or_add(struct pshard *sh, uint64_t h,
				       const void *key, size_t len)
{
	struct tw_watchers *ws = find(sh, h, key, len), **slot;

	if (ws)
		return ws;
	ws = TW_TEST_FAIL("watchers.alloc", key) ? NULL
						   : malloc(sizeof(*ws) + len);
	if (!ws)
		return NULL;
	ws->hash = h;
	ws->len = len;
	ws->count = 0;
	list_init(&ws->entries);
	memcpy(ws->key, key, len);
	if (sh->nkeys >= sh->nbuckets)
		grow(sh);
	slot = slot_for(sh, h);
	ws->next = *slot;
	*slot = ws;
	sh->nkeys++;
	return ws;
}

static void remove_if_empty(struct pshard *sh, struct tw_watchers *ws)
{
	struct tw_watchers **pp = slot_for(sh, ws->hash);

	if (ws->count)
		return;
	while (*pp != ws)
		pp = &(*pp)->next;
	*pp = ws->next;
	sh->nkeys--;
	free(ws);
}

/* Validate a key and find its shard; NULL if the key is not acceptable. */
static struct pshard *locate(struct tw_purgatory *p, const void *key, size_t len,
			     uint64_t *h)
{
	if (!p || !key || len == 0 || len > TW_KEY_MAX)
		return NULL;
	*h = hash_key(key, len);
	return shard_for(p, *h);
}

/* Under the shard lock; the op's reference is dropped later. */
static void unlink_entry(struct tw_purgatory *p, struct tw_watchers *ws,
			 struct tw_watch *w, struct oplist *puts)
{
	list_unlink(&w->link); /* leaves link.next NULL: in no list */
	ws->count--;
	OP_SUB(w->op->linked, 1);
	atomic_fetch_sub(&p->watched, 1);
	if (!oplist_push(puts, w->op))
		op_put(w->op); /* out of memory: drop it here instead */
}

/* Unlink the completed entries of one list. */
static void drop_completed(struct tw_purgatory *p, struct tw_watchers *ws,
			   struct oplist *puts)
{
	struct tw_link *l = ws->entries.next;

	while (l != &ws->entries) {
		struct tw_watch *w = tw_container_of(l, struct tw_watch, link);

		l = l->next;
		if (OP_LOAD(w->op->completed))
			unlink_entry(p, ws, w, puts);
	}
}

/* ---- operations ---- */

static void on_timeout(struct tw_service *svc, struct tw_service_timer *t);

int tw_op_init(struct tw_delayed_op *op, int64_t timeout,
	       const struct tw_op_ops *ops, pthread_mutex_t *lock)
{
	if (!op || timeout <= 0 || !ops || !ops->try_complete ||
	    !ops->on_complete)
		return TW_EINVAL;
	memset(op, 0, sizeof(*op));
	tw_service_timer_init(&op->timer, on_timeout);
	op->timeout = timeout;
	op->ops = ops;
	op->shared_lock = lock;
	return TW_OK;
}

void tw_op_destroy(struct tw_delayed_op *op)
{
	(void)op; /* the own lock is a word: nothing to release */
}

bool tw_op_is_completed(const struct tw_delayed_op *op)
{
	if (!op)
		return false;
	return __atomic_load_n(&op->completed, __ATOMIC_SEQ_CST) != 0;
}

static void maybe_purge(struct tw_purgatory *p);

/* Win the race to complete (or, with run_callback false, to cancel). The
 * reference comes first: once the CAS succeeds, every other holder may see
 * the op completed and drop its own (a key check unlinks the entries, the
 * timeout runs and puts), and a reference taken after the CAS could come
 * after on_release. No purge here: a claim usually runs in try_complete,
 * under the caller's lock, and a purge may release another op that shares
 * it (issue 28, item 3); the purgatory's own calls purge once they let go
 * of the op's lock. */
static bool claim(struct tw_delayed_op *op, bool run_callback)
{
	/* NULL: never watched. Then nothing else refers to the op, and it
	 * takes no reference and has no on_release to run (the second
	 * review: a claim's own put ran on_release of an op the purgatory
	 * never saw, under the caller's lock, and a later watch ran it
	 * again). */
	struct tw_purgatory *p = op->purgatory;

	if (p && !op_get_unless_released(op))
		return false;
	if (!op_claim_flag(op)) {
		if (p)
			op_put(op);
		return false;
	}
	TW_TEST_POINT("force_complete.claimed", op);
	if (p) {
		drop_timeout(p, op);
		if (OP_LOAD(op->linked))
			atomic_fetch_add(&p->completed_since_purge, 1);
	}
	if (run_callback)
		op->ops->on_complete(op);
	if (p)
		op_put(op);
	return true;
}

bool tw_op_force_complete(struct tw_delayed_op *op)
{
	if (!op)
		return false;
	return claim(op, true);
}

/* The caller holds a reference across it (see tw_op_safe_try_complete). */
static bool try_complete_referenced(struct tw_delayed_op *op)
{
	bool done;

	lock_op(op);
	done = op->ops->try_complete(op);
	unlock_op(op);
	return done;
}

/* A reference across the locked section: if try_complete completes the op
 * and every other reference goes meanwhile, on_release runs after the
 * unlock (it may free the op, lock included), never under the lock. */
bool tw_op_safe_try_complete(struct tw_delayed_op *op)
{
	bool done, held;

	if (!op || !op->ops)
		return false;
	held = op->purgatory != NULL; /* one the purgatory never saw has no
					 references to keep */
	if (held && !op_get_unless_released(op))
		return false; /* completed, and on its way out */
	done = try_complete_referenced(op);
	if (held) {
		struct tw_purgatory *p = op->purgatory;

		op_put(op);
		/* After the unlock, and not through the op: the put may
		 * have released it. */
		maybe_purge(p);
	}
	return done;
}

static void on_timeout(struct tw_service *svc, struct tw_service_timer *t)
{
	struct tw_delayed_op *op = tw_container_of(t, struct tw_delayed_op, timer);

	struct tw_purgatory *p = op->purgatory;

	(void)svc;
	atomic_fetch_sub(&p->delayed, 1);
	if (claim(op, true) && op->ops->on_expiration)
		op->ops->on_expiration(op);
	op_put(op); /* the timeout's reference */
	maybe_purge(p);
}

/* ---- the purgatory ---- */

int tw_purgatory_create(struct tw_purgatory **out,
			const struct tw_purgatory_config *cfg)
{
	struct tw_purgatory *p;
	struct tw_service_config scfg = { 0 };
	int rc;

	if (!out)
		return TW_EINVAL;
	*out = NULL;
	/* Its stripes are cache-line aligned: calloc promises only 16. */
	p = aligned_alloc(_Alignof(struct tw_purgatory), sizeof(*p));
	if (!p)
		return TW_ENOMEM;
	memset(p, 0, sizeof(*p));
	if (cfg)
		scfg = cfg->service;
	p->nshards = cfg && cfg->shards ? cfg->shards : 512;
	p->purge_interval = cfg && cfg->purge_interval ? cfg->purge_interval : 1000;
	if (p->nshards > 65536) {
		free(p);
		return TW_EINVAL;
	}
	pthread_mutex_init(&p->shutdown_mu, NULL);
	p->shards = aligned_alloc(64, p->nshards * sizeof(*p->shards));
	if (!p->shards) {
		free(p);
		return TW_ENOMEM;
	}
	for (unsigned i = 0; i < p->nshards; i++) {
		struct pshard *sh = &p->shards[i];

		memset(sh, 0, sizeof(*sh));
		pthread_mutex_init(&sh->mu, NULL);
		sh->nbuckets = 8;
		sh->table = calloc(sh->nbuckets, sizeof(*sh->table));
		if (!sh->table) {
			p->nshards = i + 1;
			tw_purgatory_destroy(p);
			return TW_ENOMEM;
		}
	}
	rc = tw_service_create(&p->svc, &scfg);
	if (rc) {
		tw_purgatory_destroy(p);
		return rc;
	}
	*out = p;
	return TW_OK;
}

static _Thread_local unsigned tls_stripe; /* 0: not yet chosen */
static atomic_uint stripes_handed;

/* A call's way in: NULL once shutdown began. seq_cst on both sides (the
 * count here, closing there) so that shutdown sees the count or this call
 * sees closing. */
static struct entry_stripe *enter(struct tw_purgatory *p)
{
	struct entry_stripe *st;

	if (!tls_stripe)
		tls_stripe = atomic_fetch_add(&stripes_handed, 1) % ENTRY_STRIPES + 1;
	st = &p->stripes[tls_stripe - 1];
	atomic_fetch_add(&st->active, 1);
	if (atomic_load(&p->closing)) {
		atomic_fetch_sub(&st->active, 1);
		return NULL;
	}
	return st;
}

static void leave(struct entry_stripe *st)
{
	atomic_fetch_sub_explicit(&st->active, 1, memory_order_release);
}

/* Watch op on one key, under the op's lock. */
static int watch(struct tw_purgatory *p, struct tw_delayed_op *op,
		 const void *key, size_t len, struct tw_watch *w)
{
	uint64_t h = hash_key(key, len);
	struct pshard *sh = shard_for(p, h);
	struct tw_watchers *ws;

	pthread_mutex_lock(&sh->mu);
	ws = find_or_add(sh, h, key, len);
	if (!ws) {
		pthread_mutex_unlock(&sh->mu);
		return TW_ENOMEM;
	}
	w->op = op;
	list_append(&ws->entries, &w->link);
	ws->count++;
	op_get(op);
	OP_ADD(op->linked, 1);
	atomic_fetch_add(&p->watched, 1);
	pthread_mutex_unlock(&sh->mu);
	return TW_OK;
}

/* Take back an entry of a watch that failed half-way, if it is still in
 * its key's list: the op is not completed by this call, but another thread
 * may have forced it, and a key check since then may have unlinked the
 * entry already. An entry does not say which list it is in (8 bytes per
 * entry saved); its key does, and this is the rare path. */
static void unwatch(struct tw_purgatory *p, struct tw_watch *w,
		    const void *key, size_t len)
{
	uint64_t h = hash_key(key, len);
	struct pshard *sh = shard_for(p, h);
	struct oplist puts;

	oplist_init(&puts);
	pthread_mutex_lock(&sh->mu);
	if (w->link.next) {
		struct tw_watchers *ws = find(sh, h, key, len);

		unlink_entry(p, ws, w, &puts);
		remove_if_empty(sh, ws);
	}
	pthread_mutex_unlock(&sh->mu);
	put_all(&puts);
}

int tw_purgatory_try_complete_else_watch(struct tw_purgatory *p,
					 struct tw_delayed_op *op,
					 const void *const *keys,
					 const size_t *lens, size_t nkeys,
					 struct tw_watch *watches)
{
	struct entry_stripe *stripe;
	bool done;
	int rc = TW_OK;
	size_t i;

	if (!p || !op || !keys || !lens || !watches || nkeys == 0)
		return TW_EINVAL;
	for (i = 0; i < nkeys; i++)
		if (!keys[i] || lens[i] == 0 || lens[i] > TW_KEY_MAX)
			return TW_EINVAL;
	stripe = enter(p);
	if (!stripe)
		return TW_ESHUTDOWN;
	if (tw_op_is_completed(op)) {
		leave(stripe);
		return TW_EINVAL; /* completed before it was ever watched */
	}
	TW_TEST_POINT("watch.open", op);
	op->purgatory = p;
	op_get(op); /* this call's reference */

	/* Kafka's safeTryCompleteOrElse: check, watch, check again, all
	 * under the op's lock. A key check that ran between the first check
	 * and the watch saw no entry of this op (bug 2): the second check
	 * sees the condition it was checking for. */
	lock_op(op);
	done = op->ops->try_complete(op);
	TW_TEST_POINT("watch.checked", op);
	for (i = 0; !done && i < nkeys && rc == TW_OK; i++)
		rc = watch(p, op, keys[i], lens[i], &watches[i]);
	if (!done && rc == TW_OK)
		done = op->ops->try_complete(op);
	unlock_op(op);
	if (rc) {
		TW_TEST_POINT("watch.failed", op);
		while (i-- > 1)
			unwatch(p, &watches[i - 1], keys[i - 1], lens[i - 1]);
		op_put(op);
		leave(stripe);
		return rc;
	}
	if (!done && !tw_op_is_completed(op)) {
		atomic_fetch_add(&p->delayed, 1);
		op_get(op); /* the timeout's reference */
		rc = tw_service_add_in(p->svc, &op->timer, op->timeout);
		/* A timeout the clock cannot reach (now + timeout overflows):
		 * the end of time, not no timeout (the op would then wait for
		 * its condition alone, and delayed() would not count it). */
		if (rc == TW_EOVERFLOW)
			rc = tw_service_add(p->svc, &op->timer, INT64_MAX);
		if (rc != TW_OK) {
			rc = TW_OK; /* not armed: undo its count and reference */
			atomic_fetch_sub(&p->delayed, 1);
			op_put(op);
		} else if (tw_op_is_completed(op)) {
			/* Completed before its timeout was armed. */
			drop_timeout(p, op);
		}
	}
	leave(stripe);
	op_put(op);
	maybe_purge(p);
	return done ? 1 : 0;
}

int64_t tw_purgatory_check_and_complete(struct tw_purgatory *p,
					const void *key, size_t len)
{
	uint64_t h;
	struct pshard *sh;
	struct tw_watchers *ws;
	struct oplist snapshot, puts;
	int64_t completed = 0;

	sh = locate(p, key, len, &h);
	if (!sh)
		return TW_EINVAL;
	oplist_init(&snapshot);
	oplist_init(&puts);
	pthread_mutex_lock(&sh->mu);
	ws = find(sh, h, key, len);
	if (ws) {
		drop_completed(p, ws, &puts);
		for (struct tw_link *l = ws->entries.next; l != &ws->entries;
		     l = l->next) {
			struct tw_delayed_op *op =
				tw_container_of(l, struct tw_watch, link)->op;

			if (oplist_push(&snapshot, op))
				op_get(op);
		}
		remove_if_empty(sh, ws);
	}
	pthread_mutex_unlock(&sh->mu);
	put_all(&puts);

	/* try_complete runs with no shard lock held: it may call back. The
	 * snapshot's reference keeps each op alive across its locked section
	 * (model/purgatory.pml's checker takes no other), so the public
	 * safe_try_complete's own get and put, two atomic operations on a
	 * line other threads write, are left out. */
	for (size_t i = 0; i < snapshot.len; i++) {
		struct tw_delayed_op *op = snapshot.ops[i];

		if (!tw_op_is_completed(op) && try_complete_referenced(op))
			completed++;
	}
	if (completed)
		maybe_purge(p);
	if (completed) {
		pthread_mutex_lock(&sh->mu);
		ws = find(sh, h, key, len);
		if (ws) {
			drop_completed(p, ws, &puts);
			remove_if_empty(sh, ws);
		}
		pthread_mutex_unlock(&sh->mu);
		put_all(&puts);
	}
	put_all(&snapshot);
	return completed;
}

/* Claim the uncompleted ops of one list (unlinking all its entries) into
 * claimed; the caller hands them back. */
static void claim_list(struct tw_purgatory *p, struct tw_watchers *ws,
		       struct oplist *claimed, struct oplist *puts)
{
	while (!list_empty(&ws->entries)) {
		struct tw_watch *w =
			tw_container_of(ws->entries.next, struct tw_watch, link);
		struct tw_delayed_op *op = w->op;

		if (op_claim_flag(op)) {
			/* Keep a reference: its entry's goes below. */
			op_get(op);
			if (!oplist_push(claimed, op))
				op_put(op); /* out of memory: claimed, not handed back */
		}
		unlink_entry(p, ws, w, puts);
	}
}

/* Cancel the timeouts of claimed ops and hand them back. */
static int64_t hand_back_claimed(struct tw_purgatory *p, struct oplist *claimed,
				 tw_op_fn *hand_back)
{
	int64_t n = 0;

	for (size_t i = 0; i < claimed->len; i++) {
		struct tw_delayed_op *op = claimed->ops[i];

		drop_timeout(p, op);
		n++;
		if (hand_back)
			hand_back(op);
	}
	put_all(claimed);
	return n;
}

int64_t tw_purgatory_cancel_for_key(struct tw_purgatory *p, const void *key,
				    size_t len, tw_op_fn *hand_back)
{
	uint64_t h;
	struct pshard *sh;
	struct tw_watchers *ws;
	struct oplist claimed, puts;
	int64_t n;

	sh = locate(p, key, len, &h);
	if (!sh)
		return TW_EINVAL;
	oplist_init(&claimed);
	oplist_init(&puts);
	pthread_mutex_lock(&sh->mu);
	ws = find(sh, h, key, len);
	if (ws) {
		claim_list(p, ws, &claimed, &puts);
		remove_if_empty(sh, ws);
	}
	pthread_mutex_unlock(&sh->mu);
	n = hand_back_claimed(p, &claimed, hand_back);
	put_all(&puts);
	return n;
}

size_t tw_purgatory_watched(struct tw_purgatory *p)
{
	if (!p)
		return 0;
	return atomic_load(&p->watched);
}

size_t tw_purgatory_delayed(struct tw_purgatory *p)
{
	if (!p)
		return 0;
	return atomic_load(&p->delayed);
}

void tw_purgatory_purge(struct tw_purgatory *p)
{
	for (unsigned i = 0; p && i < p->nshards; i++) {
		struct pshard *sh = &p->shards[i];
		struct oplist puts;

		oplist_init(&puts);
		pthread_mutex_lock(&sh->mu);
		for (size_t b = 0; b < sh->nbuckets; b++) {
			struct tw_watchers *ws = sh->table[b];

			while (ws) {
				struct tw_watchers *next = ws->next;

				drop_completed(p, ws, &puts);
				remove_if_empty(sh, ws);
				ws = next;
			}
		}
		pthread_mutex_unlock(&sh->mu);
		put_all(&puts);
	}
}

/* Kafka's purge: once enough completed ops may linger in lists, one thread
 * walks them all. */
static void maybe_purge(struct tw_purgatory *p)
{
	bool expected = false;

	if (atomic_load(&p->completed_since_purge) <= p->purge_interval)
		return;
	if (!atomic_compare_exchange_strong(&p->purging, &expected, true))
		return;
	atomic_store(&p->completed_since_purge, 0);
	tw_purgatory_purge(p);
	atomic_store(&p->purging, false);
}

int64_t tw_purgatory_poll(struct tw_purgatory *p)
{
	if (!p)
		return TW_EINVAL;
	return tw_service_poll(p->svc);
}

struct timeout_hand_back {
	struct tw_purgatory *p;
	tw_op_fn *hand_back;
	int64_t n;
};

/* The service's shutdown found an op's timeout armed: it will never run.
 * Its op is normally completed already (see tw_purgatory_shutdown); were
 * it not, it is claimed and handed back here, so it still ends once. */
static void timeout_handed_back(struct tw_service_timer *t, void *arg)
{
	struct tw_delayed_op *op = tw_container_of(t, struct tw_delayed_op, timer);
	struct timeout_hand_back *ctx = arg;

	atomic_fetch_sub(&ctx->p->delayed, 1);
	if (op_claim_flag(op)) {
		ctx->n++;
		if (ctx->hand_back)
			ctx->hand_back(op);
	}
	op_put(op); /* the timeout's reference */
}

int64_t tw_purgatory_shutdown(struct tw_purgatory *p, tw_op_fn *hand_back)
{
	struct timeout_hand_back ctx;
	struct oplist claimed;
	int64_t n;

	if (!p)
		return TW_EINVAL;
	pthread_mutex_lock(&p->shutdown_mu);
	if (p->shut_down) {
		pthread_mutex_unlock(&p->shutdown_mu);
		return 0;
	}
	atomic_store(&p->closing, true);
	for (unsigned i = 0; i < ENTRY_STRIPES; i++)
		while (atomic_load_explicit(&p->stripes[i].active,
					    memory_order_acquire)) {
			TW_TEST_POINT("purgatory.shutdown.wait", p);
			sched_yield();
		}
	oplist_init(&claimed);
	for (unsigned i = 0; i < p->nshards; i++) {
		struct pshard *sh = &p->shards[i];
		struct oplist puts;

		oplist_init(&puts);
		pthread_mutex_lock(&sh->mu);
		for (size_t b = 0; b < sh->nbuckets; b++) {
			while (sh->table[b]) {
				struct tw_watchers *ws = sh->table[b];

				claim_list(p, ws, &claimed, &puts);
				remove_if_empty(sh, ws);
			}
		}
		pthread_mutex_unlock(&sh->mu);
		put_all(&puts);
	}
	n = hand_back_claimed(p, &claimed, hand_back);
	/* Wait for any timeout callback still running. A timeout still armed
	 * here belongs to an op a completer has claimed but whose timeout it
	 * has not cancelled yet; the service hands it back, and its
	 * reference is dropped there (it leaked, and on_release never ran:
	 * found by model/purgatory.pml). */
	ctx.p = p;
	ctx.hand_back = hand_back;
	ctx.n = 0;
	tw_service_shutdown(p->svc, timeout_handed_back, &ctx);
	n += ctx.n;
	p->shut_down = true;
	pthread_mutex_unlock(&p->shutdown_mu);
	return n;
}

void tw_purgatory_destroy(struct tw_purgatory *p)
{
	if (!p)
		return;
	if (p->svc) {
		tw_purgatory_shutdown(p, NULL);
		tw_service_destroy(p->svc);
	}
	/* A watch that raced shutdown may have linked entries after its
	 * walk (its op is completed by then): drop them too. */
	for (unsigned i = 0; i < p->nshards && p->shards[i].table; i++) {
		struct pshard *sh = &p->shards[i];
		struct oplist puts;

		oplist_init(&puts);
		for (size_t b = 0; b < sh->nbuckets; b++) {
			while (sh->table[b]) {
				struct tw_watchers *ws = sh->table[b];

				while (!list_empty(&ws->entries))
					unlink_entry(p, ws,
						     tw_container_of(ws->entries.next,
								     struct tw_watch, link),
						     &puts);
				remove_if_empty(sh, ws);
			}
		}
		put_all(&puts);
	}
	for (unsigned i = 0; i < p->nshards; i++) {
		free(p->shards[i].table);
		pthread_mutex_destroy(&p->shards[i].mu);
	}
	free(p->shards);
	pthread_mutex_destroy(&p->shutdown_mu);
	free(p);
}
