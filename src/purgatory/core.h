/* SPDX-License-Identifier: MIT */
/*
 * core.h — Kafka's DelayedOperationPurgatory: what the purgatory's files
 * share (the purgatory, its shards and watch lists, the op's lock and its
 * references), and the essay. Files (src/purgatory/), each opening with
 * what it owns:
 *   op.c         an op: init, the exactly-once claim, force_complete,
 *                safe_try_complete, its timeout (on_timeout, drop_timeout)
 *   watch.c      the watch lists: the sharded hash table, watch and
 *                try_complete_else_watch, check_and_complete,
 *                cancel_for_key, the one walker over every list, purge
 *   lifecycle.c  create, counts, poll, shutdown and its hand-back, destroy
 *   opstate.h    the op's state (its completed flag, its references, its
 *                release) and every transition of it, as the model names
 *                them; transitions.c checks them against the model's
 *                table in the test-point build
 *
 * Watch lists. Every key that has operations waiting on it has a list of
 * watch entries (the callers' struct tw_watch, one per op and key) in a
 * hash table split into shards with a lock each (Kafka uses 512), so
 * producers checking different keys rarely share a lock. A shard's lock
 * is the library's one-word lock (lock.h), as an op's is: it guards a
 * few lines on every watch and every check and never waits on a
 * condition, and glibc's mutex cost a watch of three keys 160 of its
 * 1,270 instructions. The key's hash, read a word at a time, picks the
 * shard by a multiply and the bucket by a mask: no division.
 *
 * Exactly once. tw_op_force_complete() flips op->completed from 0 to 1 with
 * a compare-and-swap: the condition check, the timeout, a cancel and a
 * watch that failed for want of memory race for it and exactly one wins.
 * The winner stops the timeout and (unless it is a cancel or the failed
 * watch) runs on_complete; the timeout then adds on_expiration. So every
 * op the purgatory saw is completed before it is released.
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
 * linked entry, an armed timeout and any call in progress on one op hold
 * a reference, and on_release runs when the last one goes. A call that
 * comes from outside holding none (force_complete, safe_try_complete)
 * gets one only if the count is not zero: zero is final.
 *
 * Pins. A key check, which tries dozens of ops, takes no reference per
 * op: it pins the key's list instead (walkers, under the shard lock), and
 * while a list is pinned no entry leaves it, so the check walks it
 * without the lock. Whoever would unlink an entry of a pinned list (a
 * check on its way out that is not the last one, a purge, a failed watch
 * taking its entry back) marks the list dirty and leaves it; the last
 * check out unlinks the completed entries: those its walk noted, or,
 * the list dirty, every one. A check that finds a list dirty and pinned
 * waits for the checks in it to leave before it pins it (yielding, for
 * at most a millisecond; not while its thread pins a list itself:
 * watch.c, the gate), so that checks that keep overlapping leave a last
 * one out. So every op ahead
 * of a check's walk keeps the reference of its entry in that list until
 * the check has let go of it, and the check pays per op only its lock.
 * The count and the mark are one word, so that a check that noted
 * nothing lets go with one compare-and-swap and no lock, which a mark
 * made meanwhile fails, and "pinned? then mark" is one swap too: no mark
 * is ever left with no one to take it (model/purgatory.pml asks that of
 * every run). A
 * cancel_for_key that meets a pinned list pins it too and claims its ops
 * in place (watch.c); shutdown does the same for the lists a check still
 * pins after its walk, and marks (or purges) those left with completed
 * entries only, so that every op it hands back is released by the time
 * it returns, or the last check of its keys does (lifecycle.c).
 *
 * Purges run where the purgatory has let go of every op lock (after
 * try_complete's section, after a key check's loop, after a timeout), not
 * inside a completion: a purge drops references, and an on_release of an
 * op that shares the caller's lock would run under it.
 *
 * Locks: a shard lock is never held while user code runs (try_complete,
 * on_complete and on_release run after the shard is unlocked: a key
 * check walks its pinned list without it); an op's lock is taken before
 * a shard lock, never after. Two shard locks are held at once only by a
 * check of several keys (tw_purgatory_check_and_complete_keys), pinning
 * their lists, with no op's lock held, and it takes them in the shards'
 * array order, so no two threads wait for each other's
 * (model/purgatory.pml, scenario 10). An op's own lock is src/lock.h's,
 * one word in the op (a futex on Linux), not a pthread_mutex_t: 4 bytes
 * instead of 40 in every op, a compare-and-swap to take it and a plain
 * store to let go when nobody has waited for it lately, which is nearly
 * always (two threads meet on an op only when two keys it watches are
 * checked at once). Contended, a thread counts itself and sleeps on the
 * word; the holder wakes one sleeper when it lets go.
 *
 * Races closed (model/purgatory.pml checks them, and
 * tests/purgatory/watch_check_and_shutdown.c forces each):
 * try_complete_else_watch checks again after watching, under the op's
 * lock, so a key check between its first
 * check and its watch is not lost; shutdown waits for the calls under way
 * (counted in stripes) before it walks the lists; claim_and_complete()
 * takes its reference before the exactly-once CAS, so the op cannot be
 * released under it; and the service's shutdown hands a still-armed
 * timeout (of an op a completer claimed but has not cancelled yet) back
 * to the purgatory,
 * which drops its reference. Three more (the model checks each,
 * tests/purgatory/completion_and_release.c forces each): no reference is
 * taken from zero, else on_release would run twice; a completer never waits in
 * cancel_sync for an expired timeout, whose reaper may be waiting for the
 * completer's lock; no purge runs inside a completion, where it could
 * release another op under the shared lock. And two at an op's first
 * watch (model scenario 8): a completion from outside decides whether the
 * op is watched through op->purgatory, which the watch names only once it
 * holds a reference (opstate.h).
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
#ifndef TW_PURGATORY_CORE_H
#define TW_PURGATORY_CORE_H

#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* syscall(): the own lock's futex (lock.h) */

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../list.h"
#include "../lock.h"
#include "../service/for_purgatory.h"
#include "../test_point.h"
#include "timingwheel/purgatory.h"
#include "opstate.h"

/* A key check's walk and its way out, forced inline into the two checks
 * that share them (one key, several keys), as the wheel's hot_inline and
 * the service's svc_hot_inline are: out of line, a check of a key with
 * three ops cost 50 instructions more (402.8 against 352.5, make
 * bench-instr-purgatory). Plain inline in the coverage build. */
#if defined(__GNUC__) && !defined(TW_COVERAGE)
#define pg_hot_inline static inline __attribute__((always_inline))
#else
#define pg_hot_inline static inline
#endif

/* Shared between the purgatory's files, hidden from the library's users
 * and named tw__pg_* (service/core.h says why). */
#define TW_PG_HIDDEN __attribute__((visibility("hidden")))

/*
 * A key's list. Its first fields are the ones every watch and every check
 * of the key writes (the entries' head, the pins, the dirty mark) and
 * reads (len, hash): in a shard's spare list (below) they share the
 * shard lock's cache line. The key's bytes follow a malloc'd list; the
 * spare's are in its shard's second line, read only.
 */
struct tw_watchers {
	struct tw_link entries;   /* struct tw_watch */
	/* The pins: key checks (and claims) in progress on the list
	 * (watch.c), in the low 31 bits: pins nest (a hand_back that
	 * cancels the key again pins it again), and a count that wrapped
	 * to 0 would free a list still in use. PIN_DIRTY: an unlink waits
	 * for the last one out. One word, so that a check that lets go of
	 * its pin without the lock cannot miss a mark made after it looked
	 * (watch.c, walk_done). */
	atomic_uint walkers;
	uint16_t len;             /* at most TW_KEY_MAX; 0: a spare not in use */
	uint64_t hash;
	struct tw_watchers *next; /* hash chain */
	unsigned char *key;
};

#define PIN_DIRTY 0x80000000u

_Static_assert(TW_KEY_MAX <= UINT16_MAX, "a list's len holds any key's length");

/* The longest key a shard's spare list holds. */
#define SPARE_KEY_MAX 40

/*
 * A shard. Most shards hold one key or none (512 shards, and a key's
 * list lives while ops wait on it), so each has one list of its own, the
 * spare, used before any is allocated: the lock, the list's head and
 * its pins are then one cache line, which the watching and the checking
 * threads pass back and forth once per key instead of three times (the
 * shard's line, the table's, the list's). The spare is in the table's
 * chains like any other list, so every walk finds it.
 */
struct pshard {
	_Alignas(64) unsigned mu; /* lock.h: pshard_lock() */
	struct tw_watchers spare;
	/* Entries in the shard's lists: written under mu (a load and a
	 * store, no locked instruction), read by tw_purgatory_watched()
	 * without it. */
	atomic_size_t watched;
	struct tw_watchers **table;
	size_t nbuckets;
	size_t nkeys;
	unsigned char spare_key[SPARE_KEY_MAX];
};

_Static_assert(offsetof(struct pshard, watched) + sizeof(atomic_size_t) <= 64,
	       "the lock and the spare list's head share a cache line");

/*
 * What every call counts, striped over cache lines by thread, so that no
 * count is a line that the watching and the checking threads pass back
 * and forth (one such line, written by both at every watch, completion
 * and unlink, cost more than the pins save). Each thread counts on its
 * own stripe (two threads may share one: the counts are atomic), and a
 * reader sums the stripes:
 *   active       calls of try_complete_else_watch in progress, to their
 *                last put and purge. Shutdown sets closing, then waits
 *                for every stripe to reach zero: an op that passed the
 *                closing check is then on its lists, or completed, before
 *                shutdown walks them (else it would be neither, and
 *                lost), and no watch still walks the lists or holds a
 *                reference once shutdown returns;
 *   delayed      timeouts armed less those stopped or run (a stripe may
 *                go below zero: one thread arms, another stops);
 *   completions  completions of watched ops not yet added to
 *                completed_since_purge, which a stripe does every
 *                purge_flush of them.
 */
#define ENTRY_STRIPES 16

struct entry_stripe {
	_Alignas(64) atomic_uint active;
	atomic_long delayed;
	atomic_size_t completions;
};

struct tw_purgatory {
	/* Read by every call, written only at create and shutdown. */
	struct tw_service *svc;
	struct pshard *shards;
	unsigned nshards;
	size_t purge_interval;
	size_t purge_flush;
	atomic_bool closing;
	bool kafka_mode;  /* its service files timers as Kafka does: no windows */
	bool shut_down;
	pthread_mutex_t shutdown_mu;
	/* Written by the completions: a line of their own. */
	_Alignas(64) atomic_size_t completed_since_purge;
	atomic_bool purging;
	struct entry_stripe stripes[ENTRY_STRIPES];
};

/* This thread's stripe: chosen at its first call, the same in every
 * purgatory. initial-exec: a load at a fixed offset from the thread
 * pointer, where the shared library's default model calls
 * __tls_get_addr at every count (4 bytes of the static TLS that glibc
 * keeps for libraries loaded later, if the library is dlopen()ed). */
#define TW_PG_TLS __attribute__((tls_model("initial-exec")))
TW_PG_HIDDEN extern _Thread_local unsigned tw__pg_tls_stripe TW_PG_TLS; /* 0: none yet */
TW_PG_HIDDEN extern atomic_uint tw__pg_stripes_handed;
/* This thread's purgatory calls in progress that run an op's callbacks
 * and go on using the purgatory after them (a watch, a key check, a
 * cancel of a key, a purge, a safe_try_complete, a shutdown), in any
 * purgatory. A shutdown, a destroy or a poll from one of those callbacks
 * is refused (TW_EREENTER; a destroy does nothing): a poll would run
 * other ops' timeouts under the lock of the op whose callback it is,
 * which their callbacks may take; a watch's shutdown would wait for that
 * very watch (its stripe's active count), a shutdown's for its own lock,
 * and a destroy would free the purgatory under the call that runs the
 * callback. tw_op_force_complete() does not count: after on_complete
 * it touches only the op, so a shutdown or a destroy from the
 * on_complete of one made outside those calls is safe, and the count
 * would cost every completion made inside a try_complete two
 * instructions. */
TW_PG_HIDDEN extern _Thread_local unsigned tw__pg_tls_calling TW_PG_TLS;
/* The lists this thread pins now (its key checks' walks, a claim in
 * place): a check it makes meanwhile, from a callback, does not wait at
 * the gate (watch.c) for pins that include its own. */
TW_PG_HIDDEN extern _Thread_local unsigned tw__pg_tls_pins TW_PG_TLS;

static inline void calling_begin(void)
{
	tw__pg_tls_calling++;
}

static inline void calling_end(void)
{
	tw__pg_tls_calling--;
}

/* Inside one of the purgatory's callbacks, or one a service runs. */
static inline bool in_a_callback(void)
{
	return tw__pg_tls_calling || tw__service_in_callback();
}

static inline struct entry_stripe *my_stripe(struct tw_purgatory *p)
{
	if (!tw__pg_tls_stripe)
		tw__pg_tls_stripe = atomic_fetch_add(&tw__pg_stripes_handed, 1) %
				    ENTRY_STRIPES + 1;
	return &p->stripes[tw__pg_tls_stripe - 1];
}

static inline void count_delayed(struct tw_purgatory *p, long n)
{
	atomic_fetch_add_explicit(&my_stripe(p)->delayed, n, memory_order_relaxed);
}

/* A watched op completed: once purge_flush have on this stripe, they go
 * to completed_since_purge, which maybe_purge reads; so the purge comes
 * after purge_interval completions, less than ENTRY_STRIPES * purge_flush
 * later (create makes purge_flush a thirty-second of the interval: half
 * an interval at most; 1, at once, for an interval under 64). */
static inline void count_completion(struct tw_purgatory *p)
{
	struct entry_stripe *st = my_stripe(p);

	/* An exchange, not a subtraction of what this thread saw: two
	 * threads that share the stripe would move some completions twice. */
	if (atomic_fetch_add_explicit(&st->completions, 1, memory_order_relaxed) + 1 >=
	    p->purge_flush)
		atomic_fetch_add(&p->completed_since_purge,
				 atomic_exchange_explicit(&st->completions, 0,
							  memory_order_relaxed));
}

/* Under the shard's lock. */
static inline void count_watched(struct pshard *sh, long n)
{
	atomic_store_explicit(&sh->watched,
			      atomic_load_explicit(&sh->watched, memory_order_relaxed) +
				      (size_t)n,
			      memory_order_relaxed);
}

/*
 * An op's tolerance (tw_op_set_tolerance) waits in its timer's wheel due
 * time until the first watch arms the timeout, whose add writes the due
 * time there: the timer is idle until then, and no service reads it.
 * The op has no byte to spare for a field of its own (112 bytes, 184 per
 * watched op with three keys: the figure docs/purgatory.md gives), and
 * the service timer keeps its window in ticks, which are not known before
 * the watch names the purgatory.
 */
static inline void op_tolerance_store(struct tw_delayed_op *op, int64_t tolerance)
{
	op->timer.wheel_timer.due = tolerance;
}

static inline int64_t op_tolerance(const struct tw_delayed_op *op)
{
	return op->timer.wheel_timer.due;
}

/* op->timeout, likewise, is read once, when the watch arms the timeout;
 * after the service's shutdown has handed that timeout back, shutdown
 * chains the op through it (lifecycle.c), which needs no memory. */

/* Watch entries unlinked under a shard lock, each holding a reference to
 * its op that is dropped once the lock is released. They are chained
 * through their own links, so collecting them needs no memory and cannot
 * fail: an unlinked entry's link.next is NULL (in no list: unwatch reads
 * that) and its link.prev is free, an entry is unlinked once per watch,
 * and its reference keeps it valid (the caller keeps its watches until
 * on_release) until the chain drops that reference. The chain pointer's
 * low bit marks an entry whose op the collector claimed, holding a second
 * reference (cancel_for_key, shutdown): an op is claimed once, so it is
 * marked on one entry of one chain. */
struct entry_chain {
	struct tw_watch *head, *tail; /* in the order they were unlinked */
};

_Static_assert(_Alignof(struct tw_watch) >= 2, "the claim mark is bit 0");

static inline void chain_init(struct entry_chain *c)
{
	c->head = c->tail = NULL;
}

static inline void chain_push(struct entry_chain *c, struct tw_watch *w,
			      bool claimed)
{
	w->link.prev = (struct tw_link *)(uintptr_t)claimed;
	if (c->tail)
		c->tail->link.prev = (struct tw_link *)((uintptr_t)w |
							((uintptr_t)c->tail->link.prev & 1));
	else
		c->head = w;
	c->tail = w;
}

static inline struct tw_watch *chain_next(const struct tw_watch *w, bool *claimed)
{
	uintptr_t v = (uintptr_t)w->link.prev;

	*claimed = v & 1;
	return (struct tw_watch *)(v & ~(uintptr_t)1);
}

/* The op's own lock (lock.h); the op stays alive across its release:
 * every caller holds a reference, a pin of a list the op is on, or owns
 * an op the purgatory never saw. */
static inline void lock_op(struct tw_delayed_op *op)
{
	if (op->shared_lock)
		pthread_mutex_lock(op->shared_lock);
	else
		tw__lock_acquire(&op->own_lock);
}

static inline void unlock_op(struct tw_delayed_op *op)
{
	if (op->shared_lock)
		pthread_mutex_unlock(op->shared_lock);
	else
		tw__lock_release(&op->own_lock);
}

/* The op's condition checked under its lock; the caller holds a reference
 * across it (a key check's pin, safe_try_complete's own). Inline: a
 * key check runs it for every op on the key's list. */
static inline bool try_complete_locked(struct tw_delayed_op *op)
{
	bool done;

	lock_op(op);
	done = op->ops->try_complete(op);
	unlock_op(op);
	return done;
}

/* ---- references (their transitions are opstate.h's) ---- */

/* Drop a reference; the last one releases the op. */
static inline void op_put(struct tw_delayed_op *op)
{
	if (!tr_ref_put(op))
		return;
	TW_TEST_POINT("op_put.last", op);
	tr_release(op);
	if (op->ops->on_release)
		op->ops->on_release(op);
}

/* Drop a chain's references (a claimed op's two), now that no lock is
 * held. Each entry's successor and op are read before its puts: the last
 * one may release the op, and the entry with it. */
static inline void chain_put_all(struct entry_chain *c)
{
	struct tw_watch *w = c->head;

	chain_init(c);
	while (w) {
		bool claimed;
		struct tw_watch *next = chain_next(w, &claimed);
		struct tw_delayed_op *op = w->op;

		if (claimed)
			op_put(op);
		op_put(op);
		w = next;
	}
}

/* ---- the hash table's addressing ---- */

/* 8 bytes of a key as one word, in the machine's order (the hash needs
 * no particular one: it is never stored or sent). */
static inline uint64_t key_word(const unsigned char *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
	return w;
}

static inline uint64_t key_half(const unsigned char *p)
{
	uint32_t w;

	memcpy(&w, p, sizeof(w));
	return w;
}

/* One multiply folds a word in: it carries every input bit into the
 * product's high half, and the shift brings the high half back down, so
 * the low bits (the bucket) depend on the whole word as the high (the
 * shard) do. */
static inline uint64_t hash_fold(uint64_t h, uint64_t w)
{
	uint64_t x = (h ^ w) * 0x9e3779b97f4a7c15ULL;

	return x ^ (x >> 32);
}

/*
 * A key's hash, a word at a time: Kafka's keys (a topic and a partition,
 * a group's id) are a few words long, and every watch and every check
 * hashes each of its keys, so a byte at a time (FNV-1a, 3 instructions a
 * byte) was an eighth of a watch's instructions. The tail of 1 to 7
 * bytes is read as two overlapping halves or three bytes, not byte by
 * byte; the length seeds the hash, so keys that differ only by trailing
 * zero bytes differ. Both the shard (its high half) and the bucket in the
 * shard (its low bits) come from it, so a last fold of nothing mixes the
 * tail's bits into both: without it, keys such as "key-0" to "key-99999"
 * filled a shard's buckets 23 times as unevenly as random (chi-squared
 * per degree of freedom; with it, about 1 for those keys, for 8-byte and
 * 4-byte integers, for topic-partition names and for 27-byte keys).
 */
static inline uint64_t hash_key(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = hash_fold(len, 0x243f6a8885a308d3ULL), tail;

	for (; len > 8; len -= 8, p += 8)
		h = hash_fold(h, key_word(p));
	if (len == 8)
		tail = key_word(p);
	else if (len >= 4)
		tail = key_half(p) << 32 | key_half(p + len - 4);
	else
		tail = (uint64_t)p[0] << 16 | (uint64_t)p[len / 2] << 8 | p[len - 1];
	return hash_fold(hash_fold(h, tail), 0);
}

/* Whether a list's key is key (len bytes; the hashes matched, so this
 * is nearly always yes): a word at a time inline, where a call of memcmp
 * cost a fifth of a lookup. */
static inline bool key_equal(const unsigned char *a, const unsigned char *b,
			     size_t len)
{
	for (; len > 8; len -= 8, a += 8, b += 8)
		if (key_word(a) != key_word(b))
			return false;
	if (len == 8)
		return key_word(a) == key_word(b);
	if (len >= 4)
		return key_half(a) == key_half(b) &&
		       key_half(a + len - 4) == key_half(b + len - 4);
	return a[0] == b[0] && a[len / 2] == b[len / 2] && a[len - 1] == b[len - 1];
}

/* The shard, from the hash's high half, by a multiply, not a division:
 * any number of shards, no 20-cycle divide on every key call. */
static inline unsigned shard_index(const struct tw_purgatory *p, uint64_t h)
{
	return (unsigned)(((h >> 32) * (uint64_t)p->nshards) >> 32);
}

static inline struct pshard *shard_for(struct tw_purgatory *p, uint64_t h)
{
	return &p->shards[shard_index(p, h)];
}

/* A shard's buckets are a power of two (8, doubled as it grows). */
static inline size_t bucket_index(uint64_t h, size_t nbuckets)
{
	return (size_t)h & (nbuckets - 1);
}

static inline struct tw_watchers **slot_for(struct pshard *sh, uint64_t h)
{
	return &sh->table[bucket_index(h, sh->nbuckets)];
}

static inline void pshard_lock(struct pshard *sh)
{
	tw__lock_acquire(&sh->mu);
}

static inline void pshard_unlock(struct pshard *sh)
{
	tw__lock_release(&sh->mu);
}

/* An action on one key's list, under its shard lock; the references it
 * drops go on puts, dropped after the unlock. */
typedef void tw__pg_list_fn(struct tw_purgatory *p, struct pshard *sh,
			    struct tw_watchers *ws, struct entry_chain *puts,
			    void *arg);

/* op.c */
TW_PG_HIDDEN void tw__pg_drop_timeout(struct tw_purgatory *p,
				      struct tw_delayed_op *op);
/* watch.c */
TW_PG_HIDDEN void tw__pg_walk_lists(struct tw_purgatory *p, bool lock,
				    tw__pg_list_fn *fn, void *arg);
TW_PG_HIDDEN void tw__pg_claim_list(struct tw_purgatory *p,
				    struct pshard *sh, struct tw_watchers *ws,
				    struct entry_chain *puts, void *left);
TW_PG_HIDDEN int64_t tw__pg_claim_pinned_lists(struct tw_purgatory *p,
					       tw_op_fn *hand_back,
					       struct entry_chain *puts);
TW_PG_HIDDEN void tw__pg_unlink_all(struct tw_purgatory *p,
				    struct pshard *sh, struct tw_watchers *ws,
				    struct entry_chain *puts, void *unused);
TW_PG_HIDDEN int64_t tw__pg_hand_back_claimed(struct tw_purgatory *p,
					      struct entry_chain *claimed,
					      tw_op_fn *hand_back);
TW_PG_HIDDEN void tw__pg_maybe_purge(struct tw_purgatory *p);

/* A purge if one is due: the look at the count inline, for nearly every
 * call finds none due; each of the purgatory's own calls ends with it,
 * whatever the call did, so that completions counted elsewhere (a
 * force_complete from outside, which never purges) are purged by the
 * next call. */
static inline void pg_maybe_purge(struct tw_purgatory *p)
{
	if (atomic_load_explicit(&p->completed_since_purge, memory_order_relaxed) >
	    p->purge_interval)
		tw__pg_maybe_purge(p);
}

#endif
