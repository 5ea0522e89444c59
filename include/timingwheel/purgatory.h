/*
 * The purgatory: Kafka's DelayedOperationPurgatory in C.
 *
 * A delayed operation is a request that cannot answer yet (a produce with
 * acks=all waits until every in-sync replica has the message). It waits on
 * one or more keys until a condition holds, or until its timeout. Whoever
 * gets there first — a key check, the timeout, or a cancel — completes it,
 * exactly once:
 *
 *   completed by its condition:  on_complete(op)
 *   timed out:                    on_complete(op), then on_expiration(op)
 *   cancelled (cancel_for_key,
 *   shutdown):                    handed back to the caller, no callback
 *
 * Lifetime. Completed operations are removed from the watch lists of their
 * keys lazily, as Kafka does: when the key is checked, or by a purge once
 * more than purge_interval completed entries linger. So an operation's
 * memory may still be referenced after it completed; on_release(op) (if
 * set) says when the purgatory holds no reference any more, and from then
 * on the caller may free it (on_release must not call the purgatory).
 * Watch entries (struct tw_watch, one per key) are the caller's memory
 * too, usually embedded in the operation.
 *
 * Thread-safety: every function may be called from any thread. An
 * operation's try_complete runs under its lock (its own, or one the caller
 * shares between operations), never on two threads at once.
 */
#ifndef TIMINGWHEEL_PURGATORY_H
#define TIMINGWHEEL_PURGATORY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timingwheel/error.h"
#include "timingwheel/service.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tw_purgatory;
struct tw_delayed_op;
struct tw_watchers; /* private: one key's watch list */

/* Check the condition; if it holds, call tw_op_force_complete(op) and
 * return what it returned. Runs under the op's lock. */
typedef bool tw_op_try_complete_fn(struct tw_delayed_op *op);
typedef void tw_op_fn(struct tw_delayed_op *op);

/* One key an operation watches. Private fields; provide one per key. */
struct tw_watch {
	struct tw_link link;
	struct tw_delayed_op *op;
	struct tw_watchers *list; /* NULL when not linked */
};

struct tw_delayed_op {
	struct tw_service_timer timer; /* the timeout (private) */
	tw_op_try_complete_fn *try_complete;
	tw_op_fn *on_complete;
	tw_op_fn *on_expiration;       /* may be NULL */
	tw_op_fn *on_release;          /* may be NULL */
	pthread_mutex_t *lock;         /* own_lock, or the caller's */
	pthread_mutex_t own_lock;
	struct tw_purgatory *purgatory;
	int64_t timeout;               /* clock units (ns by default) */
	atomic_int completed;
	atomic_int refs;
	atomic_int linked;             /* watch entries still in lists */
};

/*
 * Prepare an operation. timeout > 0 (clock units of the purgatory's
 * service); try_complete and on_complete are required; lock may be NULL
 * (the op's own). Returns 0 or TW_EINVAL.
 */
int tw_op_init(struct tw_delayed_op *op, int64_t timeout,
	       tw_op_try_complete_fn *try_complete, tw_op_fn *on_complete,
	       tw_op_fn *on_expiration, pthread_mutex_t *lock);

/* Release the op's own lock (after on_release, or if it was never used). */
void tw_op_destroy(struct tw_delayed_op *op);

/*
 * Complete the operation if nobody has: cancel its timeout and run
 * on_complete. Returns true for the one caller that completed it.
 */
bool tw_op_force_complete(struct tw_delayed_op *op);

bool tw_op_is_completed(const struct tw_delayed_op *op);

/* try_complete under the op's lock (Kafka's safeTryComplete). */
bool tw_op_safe_try_complete(struct tw_delayed_op *op);

struct tw_purgatory_config {
	struct tw_service_config service; /* its own timer service (zeros: the
					     defaults, 1 ms tick) */
	unsigned shards;            /* watch-list shards; 0: 512 (Kafka's) */
	size_t purge_interval;      /* 0: 1000 (Kafka's default) */
};

int tw_purgatory_create(struct tw_purgatory **out,
			const struct tw_purgatory_config *cfg);

/*
 * Kafka's tryCompleteElseWatch: complete the op now if its condition holds;
 * otherwise watch it on every key (watches[i] for keys[i], lens[i] bytes,
 * 0 < lens[i] <= TW_KEY_MAX), and arm its timeout. The watching happens
 * under the op's lock right after the failed check, so a key check that
 * comes in between cannot be lost. Returns 1 if completed now, 0 if it
 * waits, or TW_EINVAL (no keys, a key empty or too long) / TW_ENOMEM /
 * TW_ESHUTDOWN (then nothing was watched).
 */
#define TW_KEY_MAX 4096
int tw_purgatory_try_complete_else_watch(struct tw_purgatory *p,
					 struct tw_delayed_op *op,
					 const void *const *keys,
					 const size_t *lens, size_t nkeys,
					 struct tw_watch *watches);

/* Try every op watched on the key; drop completed ones from its list.
 * Returns how many this call completed. */
int64_t tw_purgatory_check_and_complete(struct tw_purgatory *p,
					const void *key, size_t len);

/*
 * Stop every uncompleted op watched on the key: each is claimed (it will
 * not complete or expire), its timeout cancelled, and handed to hand_back.
 * Returns how many.
 */
int64_t tw_purgatory_cancel_for_key(struct tw_purgatory *p, const void *key,
				    size_t len, tw_op_fn *hand_back);

/* Watch entries in the lists, completed-but-not-yet-purged included. */
size_t tw_purgatory_watched(struct tw_purgatory *p);
/* Operations waiting for their timeout (not completed). */
size_t tw_purgatory_delayed(struct tw_purgatory *p);
/* Remove every completed entry from every list now. */
void tw_purgatory_purge(struct tw_purgatory *p);

/*
 * Refuse new operations, claim every uncompleted one and hand it back,
 * then stop the purgatory's service, waiting for timeouts that are running.
 * Returns how many were handed back.
 */
int64_t tw_purgatory_shutdown(struct tw_purgatory *p, tw_op_fn *hand_back);
void tw_purgatory_destroy(struct tw_purgatory *p);

#ifdef __cplusplus
}
#endif

#endif
