/* SPDX-License-Identifier: MIT */
/**
 * @file
 * The purgatory: Kafka's DelayedOperationPurgatory in C.
 *
 * A delayed operation is a request that cannot answer yet (a produce with
 * acks=all waits until every in-sync replica has the message). It waits on
 * one or more keys until a condition holds, or until its timeout. Whoever
 * gets there first — a key check, the timeout, or a cancel — completes it,
 * exactly once:
 *
 * | how it ends                          | what runs                           |
 * |--------------------------------------|-------------------------------------|
 * | completed by its condition           | on_complete(op)                     |
 * | timed out                            | on_complete(op), then on_expiration(op) |
 * | cancelled (cancel_for_key, shutdown) | handed back to the caller, no callback |
 * | its watch failed (TW_ENOMEM)         | no callback: the call's return says it |
 *
 * Lifetime. Completed operations are removed from the watch lists of their
 * keys lazily, as Kafka does: when the key is checked, or by a purge once
 * about purge_interval watched operations completed since the last one
 * (each thread counts its own and adds them to the total every
 * thirty-second of the interval, so the purge may come up to half an
 * interval later; at once for an interval under 64). Completed here means
 * every way an op ends, cancels included. The purge runs in the
 * purgatory's own calls (a watch, a key check, a cancel_for_key, a
 * timeout, tw_op_safe_try_complete()), never in tw_op_force_complete(),
 * which may run under your lock: ops completed only by
 * tw_op_force_complete() from outside are purged at the next of those
 * calls that it accepts (one refused -- TW_EBUSY, TW_EINVAL -- changes
 * nothing, and purges nothing; a watch that fails with TW_ENOMEM purges
 * nothing either), or by tw_purgatory_purge(). So an operation's
 * memory may still be referenced after it completed; on_release(op) (if
 * its struct tw_op_ops has one) says when the purgatory holds no
 * reference any more, and from then on the caller may free it. It runs
 * exactly once per op the purgatory saw, however the op ended (completed,
 * expired, handed back by cancel_for_key or shutdown, or let go of by a
 * watch that failed: so free a handed-back op in on_release, not in
 * hand_back, and a failed one in on_release too). It runs with no lock
 * the purgatory took held: not the purgatory's own, and not the op's lock,
 * own or shared (the purgatory lets go of them first, purges included).
 * One exception: a purgatory call made from a shutdown's hand_back that
 * lets go of an op's last reference runs that on_release there, under
 * the shutdown's own lock, which a second tw_purgatory_shutdown() waits
 * for; do not call shutdown holding a lock an on_release takes while
 * another thread's shutdown may be handing back.
 * Only a lock that a caller holds around its own call may be held then:
 * a tw_op_force_complete() from outside, under a shared lock, may run
 * on_release of the op it completes under that lock. on_release may call
 * tw_op_destroy() and free the op, and must not call the purgatory.
 * Watch entries (struct tw_watch, one per key) are the caller's memory
 * too, usually embedded in the operation.
 *
 * Thread-safety: every function may be called from any thread, callbacks
 * included, except tw_purgatory_shutdown() and tw_purgatory_poll()
 * (TW_EREENTER) and tw_purgatory_destroy() (nothing happens) from a
 * callback the purgatory runs, those whose page says "not under an
 * op's lock" from code holding one, tw_purgatory_try_complete_else_watch()
 * under its own op's lock and tw_purgatory_shutdown() under any op's
 * lock. An operation's
 * try_complete runs under its lock (its own, or one the caller shares
 * between operations), never on two threads at once.
 */
#ifndef TIMINGWHEEL_PURGATORY_H
#define TIMINGWHEEL_PURGATORY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timingwheel/error.h"
#include "timingwheel/service.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what this header declares
 * is its exported API. */
#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility push(default)
#endif

struct tw_purgatory;
struct tw_delayed_op;
struct tw_watchers; /* private: one key's watch list */

/**
 * Check the condition; if it holds, call tw_op_force_complete(op) and
 * return what it returned. Runs under the op's lock.
 * @param op the operation
 * @return true if this call completed it
 */
typedef bool tw_op_try_complete_fn(struct tw_delayed_op *op);
/**
 * A callback about an operation (on_complete, on_expiration, on_release,
 * hand-back).
 * @param op the operation
 */
typedef void tw_op_fn(struct tw_delayed_op *op);

/** One key an operation watches: 24 bytes on LP64. Private fields;
 *  provide one per key. */
struct tw_watch {
	struct tw_link link;      /**< position in the key's list; next is
				       NULL when it is in none */
	struct tw_delayed_op *op; /**< the operation watching */
};

/**
 * What a kind of operation does: one table, usually static const, shared by
 * every op of that kind (where Kafka subclasses DelayedOperation, whose
 * methods live once in the class, not in each object).
 */
struct tw_op_ops {
	tw_op_try_complete_fn *try_complete; /**< the condition (required) */
	tw_op_fn *on_complete;   /**< runs once when it completes (required).
				      Not the place to free the op: its
				      watch entries and its timeout may still
				      refer to it; free it in on_release */
	tw_op_fn *on_expiration; /**< after on_complete when it timed out; may
				      be NULL */
	tw_op_fn *on_release;    /**< the purgatory let go of it (see the top
				      of this file); may be NULL */
	/**
	 * A look at the condition without the op's lock; may be NULL. A key
	 * check (tw_purgatory_check_and_complete) calls it first and, when
	 * it returns false, skips the op: no lock taken, no try_complete.
	 * It must return true whenever try_complete could complete the op
	 * given everything that happened before the check was called (so a
	 * check made after the condition came true still completes the op);
	 * it may return true when try_complete will not. It runs on the
	 * checking thread, with no lock held, possibly beside try_complete
	 * or another call of itself on another thread: read what it needs
	 * with atomics (an acquire load of a flag the completing side sets
	 * before its check). Nothing else calls it: a watch and
	 * tw_op_safe_try_complete() take the lock and call try_complete.
	 * The point is the common check, where most ops on the key are not
	 * ready: each costs a read of the op, not its lock's two atomic
	 * instructions.
	 */
	tw_op_try_complete_fn *may_complete;
};

/**
 * A delayed operation (Kafka's DelayedOperation). Embed it; all fields are
 * private. 112 bytes on LP64:
 *  - 64: its timeout, a one-shot service timer;
 *  -  8: its kind's callbacks (struct tw_op_ops);
 *  -  8: the caller's lock it runs under, if it shares one;
 *  -  8: the purgatory (the timeout finds its counters through it);
 *  -  8: the timeout, armed when the op is first watched;
 *  -  4: its own lock when it shares none: one word that a contended
 *    locker sleeps on (a futex), not a 40-byte pthread_mutex_t: two
 *    threads seldom want one op at once;
 *  - 12: the exactly-once flag, the purgatory's references, and how many
 *    watch entries are still in lists.
 */
struct tw_delayed_op {
	struct tw_service_timer timer; /**< the timeout (private) */
	const struct tw_op_ops *ops;   /**< what it does */
	pthread_mutex_t *shared_lock;  /**< the caller's lock it runs under;
					    NULL: its own_lock */
	struct tw_purgatory *purgatory;/**< set when first watched */
	int64_t timeout;               /**< clock units (ns by default) */
	/* Atomic, through the compiler's builtins in src/purgatory/, not
	 * <stdatomic.h> types, which C++ cannot include. */
	unsigned own_lock;             /**< 0 free; otherwise held or
					    waited for (src/lock.h) */
	int completed;                 /**< the exactly-once flag */
	int refs;                      /**< the purgatory's references */
	int linked;                    /**< watch entries still in lists */
};

/**
 * Prepare an operation: a new one, or one whose on_release has run (reuse
 * an op only from its on_release, or after it). Initialising an op the
 * purgatory still holds corrupts its watch lists; the debug build
 * (TW_DEBUG) stops at such a call and names it, the release build cannot
 * tell (before its first init an op's memory may be anything).
 * @param op the operation
 * @param timeout > 0, in clock units of the purgatory's service; one
 *        past the end of time (now + timeout past INT64_MAX) times out at
 *        INT64_MAX, when the clock reads it (a real clock never does; an
 *        injected one may, and then the op expires as any other)
 * @param ops its callbacks; the table must outlive the op (a static const
 *            one does)
 * @param lock a lock shared with other operations, initialised by the
 *        caller and alive until every op that shares it is released, or
 *        NULL for its own
 * @retval 0 success
 * @retval TW_EINVAL NULL op or ops, timeout <= 0, no try_complete or
 *         on_complete
 * @par Thread safety
 *      The op's owner, before anyone else sees it.
 */
int tw_op_init(struct tw_delayed_op *op, int64_t timeout,
	       const struct tw_op_ops *ops, pthread_mutex_t *lock);

/**
 * Let the op's timeout fire anywhere from timeout to timeout + tolerance
 * after its watch, never earlier (a service window: tw_service_add_range(),
 * whose end, as every due time of the service, is rounded up to its tick:
 * under one tick after timeout + tolerance at the latest).
 * Timeouts whose windows overlap are filed once, in one coarse bucket, and
 * expire in one wake-up of the reaper instead of cascading down the wheel
 * one by one: a broker holding many requests with long timeouts that
 * mostly complete first asks for less work. Call it after tw_op_init()
 * (which sets 0: exact) and before the watch.
 * @param op the operation
 * @param tolerance clock units the timeout may come late, >= 0
 * @retval 0 success
 * @retval TW_EINVAL NULL op or tolerance < 0 (nothing changed). A
 *         tolerance > 0 on a purgatory whose service is in TW_MODE_KAFKA
 *         makes the watch return TW_EINVAL (Kafka has no windows)
 * @retval TW_EBUSY the op was watched (even by a watch that failed with
 *         TW_ENOMEM), or completed by tw_op_force_complete(), since its
 *         tw_op_init (its timeout may be armed). A watch refused for its
 *         arguments (TW_EINVAL) did not watch it
 * @par Thread safety
 *      The op's owner, before it is watched.
 */
int tw_op_set_tolerance(struct tw_delayed_op *op, int64_t tolerance);

/**
 * End the op's life as far as the library is concerned (after on_release,
 * or if it was never watched); on_release itself may call it. Its own
 * lock is a plain word today, so there is nothing to release; call it
 * anyway, so that a later version may keep something there.
 * @param op the operation (NULL: nothing happens)
 * @par Thread safety
 *      The op's owner, once the purgatory let go of it.
 */
void tw_op_destroy(struct tw_delayed_op *op);

/**
 * Complete the operation if nobody has: stop its timeout and run
 * on_complete (Kafka's forceComplete). It never waits for a callback: a
 * timeout that is pending is stopped; one that has just expired runs
 * later, finds the op completed, and runs no callback. (It does wait for
 * the first two steps of a watch of the op that another thread has just
 * begun: no lock and no user code lie between them.)
 *
 * From try_complete the op is always alive. From anywhere else the op's
 * memory must be valid when the call starts: free the op only once
 * on_release has run and your own calls on it have returned (for example:
 * count your calls in progress on the op, and free it when on_release has
 * run and that count is zero). Do not call holding a lock that your
 * on_release takes: the call may drop the last reference and run
 * on_release itself. A call that comes after the
 * purgatory's last reference went (on_release is due or running) does
 * nothing and returns false: the count never comes back from zero, so
 * on_release never runs twice. Otherwise the call holds its own
 * reference, so the op stays alive until it returns, whoever completes
 * it meanwhile, a watch of the op racing this call included. An op never
 * watched takes no references: completing it runs on_complete only (it
 * has no on_release, and it cannot be watched afterwards: a watch racing
 * the completion either watched it first, or gets TW_EINVAL).
 * @param op the operation
 * @return true for the one caller that completed it; false for everyone
 *         else, for an op on its way to on_release, and for NULL
 * @par Thread safety
 *      Any thread; usually from try_complete, under the op's lock.
 */
bool tw_op_force_complete(struct tw_delayed_op *op);

/**
 * Whether it completed (by condition, timeout or cancel; a watch that
 * failed with TW_ENOMEM claims it too).
 * @param op the operation
 * @return true once completed; false for NULL
 * @par Thread safety
 *      Any thread.
 */
bool tw_op_is_completed(const struct tw_delayed_op *op);

/**
 * try_complete under the op's lock (Kafka's safeTryComplete). The op's
 * memory must be valid when the call starts, as for
 * tw_op_force_complete() from outside; an op whose last reference has
 * gone is not tried.
 * @param op an initialised operation
 * @return what try_complete returned; false for NULL and for an op on its
 *         way to on_release
 * @par Thread safety
 *      Any thread; not while holding the op's lock.
 */
bool tw_op_safe_try_complete(struct tw_delayed_op *op);

/** How to build a purgatory; zeros give the defaults. */
struct tw_purgatory_config {
	struct tw_service_config service; /**< its own timer service (zeros: the
					       defaults: CLOCK_MONOTONIC
					       nanoseconds, a 1 ms tick) */
	unsigned shards;            /**< watch-list shards; 0: 512 (Kafka's) */
	size_t purge_interval;      /**< completions between purges (see
					 Lifetime above); 0: 1000 (Kafka's
					 default) */
};

/**
 * Create a purgatory and start its timer service.
 * @param[out] out the new purgatory (NULL on failure)
 * @param cfg the configuration, or NULL for the defaults
 * @retval 0 success
 * @retval TW_EINVAL NULL out, shards > 65536 or a bad service configuration
 * @retval TW_ENOMEM allocation failed
 * @retval TW_EAGAIN a thread could not start, or 2^18 - 1 services are
 *         alive at once (tw_service_create())
 * @par Thread safety
 *      Any thread.
 */
int tw_purgatory_create(struct tw_purgatory **out,
			const struct tw_purgatory_config *cfg);

/** The longest key, in bytes. */
#define TW_KEY_MAX 4096
/** The most keys one op may watch (tw_purgatory_try_complete_else_watch). */
#define TW_WATCH_KEYS_MAX 65536

/**
 * Kafka's tryCompleteElseWatch. **Once this returns, the op may already be
 * released** -- its on_release run, where you may free it -- whatever it
 * returned: completed now (1), or watched (0) and completed by another
 * thread since. Do not touch the op after the call unless something you
 * hold keeps its on_release from running. (Another thread's completion
 * never releases it while the call runs: the call holds a reference until
 * its last step, and that step may run on_release itself.)
 *
 * Complete the op now if its condition holds;
 * otherwise watch it on every key, check once more, and arm its timeout.
 * The check, the watch and the second check all happen under the op's
 * lock, as in Kafka's safeTryCompleteOrElse: a key check that ran between
 * the first check and the watch (and so found no entry of this op) is
 * covered by the second check, so a condition that came true is never
 * left waiting for the timeout.
 * @param p the purgatory
 * @param op an initialised operation, not yet watched
 * @param keys nkeys keys (byte strings; the purgatory copies what it
 *        keeps, so they need not outlive the call)
 * @param lens their lengths, each 1..TW_KEY_MAX
 * @param nkeys 1..TW_WATCH_KEYS_MAX
 * @param watches nkeys watch entries, the caller's memory (usually in op)
 * @retval 1 completed now. By the first check, before any entry was
 *         linked: if nothing else held it, its on_release has run too by
 *         the time this returns (an op freed there must not be touched
 *         after 1). By the second: its entries, linked by this call, stay
 *         on the keys' lists until a check of those keys, a purge, a
 *         tw_purgatory_cancel_for_key() of one of them or the shutdown
 *         takes them off, and on_release runs then
 * @retval 0 it waits
 * @retval TW_EINVAL a NULL pointer, no keys or more than
 *         TW_WATCH_KEYS_MAX, a key empty or too long, an
 *         op already completed by a tw_op_force_complete() before its
 *         watch, or being completed by one under way on another thread
 *         (tw_op_is_completed() may say false an instant longer, and its
 *         on_complete runs on that thread), a
 *         tolerance (tw_op_set_tolerance()) on a kafka-mode purgatory
 * @retval TW_EBUSY the op was watched since its tw_op_init: an op is
 *         watched once per tw_op_init (a second watch, racing the first or
 *         after it, even after one that failed with TW_ENOMEM, gets this);
 *         nothing changed. A watch refused for its arguments (TW_EINVAL: a
 *         bad key, a tolerance on a kafka-mode purgatory) or with
 *         TW_ESHUTDOWN took nothing in and does not count: the op may be
 *         watched after it
 * @retval TW_ENOMEM a key's list could not be allocated. The op is not
 *         watched, and it never completes: the failing call claims it, as
 *         a cancel does, so no on_complete or on_expiration runs for it
 *         (a completion from another thread that claimed it first, a
 *         force_complete or a cancel of a key it was briefly on, makes the
 *         call return 0 instead: watched, and completed or handed back
 *         since). The purgatory lets go of it, and its on_release runs
 *         once, as for every op it saw: before the call returns, unless
 *         another call holds a reference to it then (a key check of a key
 *         it was briefly on, still trying the ops ahead of it; a
 *         tw_op_force_complete() or tw_op_safe_try_complete() from another
 *         thread; a cancel or a purge that took its entry off a list);
 *         then on the thread of the last of those, when it lets go, after
 *         this call returned. This call does not wait for that: the other
 *         call may be running user code (another op's try_complete or
 *         on_complete, a hand_back) that waits for a lock this call's
 *         caller holds. So, as after any
 *         return, free the op or initialise it again only in on_release
 *         (the debug build, TW_DEBUG, stops at a tw_op_init before it and
 *         names this case). Watch it again only after a new tw_op_init
 * @retval TW_ESHUTDOWN the purgatory is shut down (whatever else the call
 *         would have answered, TW_EBUSY included -- but for bad arguments,
 *         checked first: a NULL pointer, no keys or more than
 *         TW_WATCH_KEYS_MAX, a key empty or too long get TW_EINVAL)
 * (on an error the op's timeout is not armed, and the op is on no list --
 * but after TW_ENOMEM an entry on a list that a key check was walking
 * stays there, counted by tw_purgatory_watched(), until that check ends
 * and unlinks it: a walk in progress never loses an entry under it)
 * @par Thread safety
 *      Any thread, but not under op's lock (op->lock): the call takes it
 *      for both checks, and a pthread mutex taken twice by one thread
 *      waits for ever -- nor from the on_complete of an op that shares
 *      that lock, which runs under it. (A recursive lock would not wait,
 *      but the call may run on_release, which may free the op and its
 *      lock, before it returns.)
 */
int tw_purgatory_try_complete_else_watch(struct tw_purgatory *p,
					 struct tw_delayed_op *op,
					 const void *const *keys,
					 const size_t *lens, size_t nkeys,
					 struct tw_watch *watches);

/**
 * Try every op watched on the key when the call begins (one watched since
 * is tried by its own watch, once it is on the key's list); drop completed
 * ones from its list (Kafka's checkAndComplete). It allocates nothing,
 * however many ops watch the key: it walks the key's list in place,
 * pinned, without holding its shard's lock. Where other checks of the key
 * are walking it with completed ops to drop, it first waits for them to
 * leave (yielding, no lock held, about a millisecond at most), so that
 * the last of them drops those ops even when checks never stop coming.
 * @param p the purgatory
 * @param key the key
 * @param len its length, 1..TW_KEY_MAX
 * @return how many this call completed, or TW_EINVAL (NULL, bad length)
 * @par Thread safety
 *      Any thread; not under an op's lock.
 */
int64_t tw_purgatory_check_and_complete(struct tw_purgatory *p,
					const void *key, size_t len);

/**
 * tw_purgatory_check_and_complete() of each of nkeys keys in one call: a
 * request that touched several keys (a produce to several partitions)
 * checks them together. The keys' lists are walked side by side, an entry
 * of each in turn, so that the cache misses of walking one list (each
 * entry's address is in the one before) overlap with the others' (up to
 * four keys at a time, each list as it was when its four began). A key
 * may appear twice; an op watching several of the keys completes once.
 * It completes what calls for each key in turn would, but for an op whose
 * condition this call's own completions make true (an on_complete that
 * readies another op) or that is watched meanwhile: one whose entry its
 * key's walk had passed, or linked after that walk began, waits for the
 * next check of its keys, where calls in turn might have completed it.
 * Check such keys again after the call.
 * @param p the purgatory
 * @param keys the keys
 * @param lens their lengths, each 1..TW_KEY_MAX
 * @param nkeys how many, at least 1
 * @return how many this call completed, or TW_EINVAL (NULL, no keys, a
 *         bad length: nothing is checked)
 * @par Thread safety
 *      Any thread; not under an op's lock.
 */
int64_t tw_purgatory_check_and_complete_keys(struct tw_purgatory *p,
					     const void *const *keys,
					     const size_t *lens, size_t nkeys);

/**
 * Stop every uncompleted op watched on the key: each is claimed (it will
 * not complete or expire), its timeout stopped (one that has just expired
 * runs later and finds it claimed), and handed to hand_back.
 * @param p the purgatory
 * @param key the key
 * @param len its length, 1..TW_KEY_MAX
 * @param hand_back receives each claimed op (may be NULL)
 * @return how many were handed back, or TW_EINVAL (NULL, bad length)
 * @par Thread safety
 *      Any thread; not under an op's lock.
 */
int64_t tw_purgatory_cancel_for_key(struct tw_purgatory *p, const void *key,
				    size_t len, tw_op_fn *hand_back);

/**
 * Watch entries in the lists (Kafka's watched()).
 * @param p the purgatory
 * @return entries, completed-but-not-yet-purged included (0 for NULL)
 * @par Thread safety
 *      Any thread.
 */
size_t tw_purgatory_watched(struct tw_purgatory *p);

/**
 * Operations waiting for their timeout (Kafka's numDelayed()).
 * @param p the purgatory
 * @return timeouts armed and not yet stopped or run (0 for NULL): an op
 *         completed just after its timeout expired is counted until that
 *         timeout has run
 * @par Thread safety
 *      Any thread.
 */
size_t tw_purgatory_delayed(struct tw_purgatory *p);

/**
 * Remove every completed entry from every list now, but for a list a key
 * check is walking (this thread's own check too, when called from its
 * may_complete): its completed entries stay until a check of that key or
 * a later purge takes them off.
 * @param p the purgatory (NULL: nothing happens)
 * @par Thread safety
 *      Any thread; not under an op's lock.
 */
void tw_purgatory_purge(struct tw_purgatory *p);

/**
 * Expire the operations whose timeout is due, for a purgatory whose service
 * is manual (cfg.service.manual: no reaper thread, e.g. on a virtual clock
 * in tests, or driven from an event loop, which sleeps for
 * tw_purgatory_timeout() between polls).
 * @param p the purgatory
 * @return how many timeouts were dispatched, or TW_EINVAL (NULL, or a
 *         purgatory with a reaper: it polls itself), TW_ERANGE
 *         (the clock went backwards), TW_EREENTER or TW_ESHUTDOWN, as
 *         tw_service_poll(); TW_EREENTER also from every callback where
 *         tw_purgatory_shutdown() is refused (nothing changes)
 * @par Thread safety
 *      Any thread but the purgatory's callbacks; one poll at a time.
 */
int64_t tw_purgatory_poll(struct tw_purgatory *p);

/**
 * For an event loop driving a manual purgatory: when its next timeout is
 * due (tw_service_next_expiry() of its service, with the same promise:
 * never later than the next timeout armed before the call, so a loop
 * that sleeps until then and polls misses none of those). A watch from
 * another thread after the call arms a timeout the answer cannot know,
 * and the purgatory has no wake-up of its own to call: a loop that lets
 * other threads watch ops must wake itself when they do (or poll at the
 * shortest timeout its ops may have). It may be earlier, as the
 * service's is: in TW_MODE_KAFKA a stopped timeout's bucket still
 * expires, so the answer may name a time after every timeout was stopped
 * (the loop then polls, nothing expires, and it asks again).
 * @param p the purgatory
 * @param[out] when the due time, in its service's clock units
 * @return false if no timeout is armed (in TW_MODE_KAFKA: nor a stopped
 *         one's bucket left to expire) (or NULL p or when)
 * @par Thread safety
 *      Any thread.
 */
bool tw_purgatory_next_expiry(struct tw_purgatory *p, int64_t *when);

/**
 * How long an event loop may sleep before its next tw_purgatory_poll()
 * (tw_service_timeout() of its service: in clock units, rounded up to the
 * loop's unit by the caller).
 * @param p the purgatory
 * @param now a reading of its service's clock: cfg.service.clock's now(),
 *        or, by default, CLOCK_MONOTONIC in nanoseconds
 * @return -1 where tw_purgatory_next_expiry() says false (or NULL p),
 *         otherwise max(0, next expiry - now)
 * @par Thread safety
 *      Any thread.
 */
int64_t tw_purgatory_timeout(struct tw_purgatory *p, int64_t now);

/**
 * Refuse new operations, wait for the try_complete_else_watch calls
 * already under way (so none of their ops is missed), claim every
 * uncompleted op and hand it back, then stop the purgatory's service,
 * waiting for timeouts that are running. A handed-back op still gets its
 * on_release (when the purgatory's last reference goes): free it there,
 * not in hand_back. That is during this call, or, for an op on a key
 * whose list a key check or a tw_purgatory_cancel_for_key() on another
 * thread holds meanwhile (walking it, or handing back what it claimed),
 * when the last of those calls returns, or, for an op that a
 * tw_op_force_complete() or tw_op_safe_try_complete() on another thread
 * holds meanwhile (each holds a reference of its own), when that call
 * returns; never later. A try_complete_else_watch under way is waited
 * for to its end, the purge it may make included.
 * It allocates nothing, so it cannot fail for want of memory, however
 * many ops are watched or armed.
 * @param p the purgatory
 * @param hand_back receives each uncompleted op (may be NULL)
 * @return how many were handed back, or TW_EINVAL (NULL), or TW_EREENTER
 *         (called from a callback: nothing changes)
 * @par Thread safety
 *      Any thread that holds no op's lock (it waits for a watch under
 *      way, which may be waiting for that lock), but not a callback's:
 *      from one that a service runs
 *      (a timeout's, anything on a reaper, an executor or a poll), or
 *      one that a purgatory call runs on this thread and goes on from
 *      -- a watch's, a key check's, a cancel_for_key's, a purge's, a
 *      safe_try_complete's, a shutdown's hand_back or on_release --
 *      it is refused (TW_EREENTER), in any purgatory. The on_complete
 *      of a tw_op_force_complete() made outside those may call it.
 */
int64_t tw_purgatory_shutdown(struct tw_purgatory *p, tw_op_fn *hand_back);

/**
 * Shut down if needed, then free the purgatory (ops are the caller's).
 * No call may be made on the purgatory during or after its destroy, nor
 * on one of its ops: a tw_op_force_complete() or
 * tw_op_safe_try_complete() on another thread must have returned before
 * the destroy starts (each may use the purgatory until it returns).
 * @param p the purgatory (NULL: nothing happens)
 * @par Thread safety
 *      Any thread but a callback's: from one where
 *      tw_purgatory_shutdown() is refused nothing happens (the
 *      purgatory would be freed under the call that runs it).
 */
void tw_purgatory_destroy(struct tw_purgatory *p);

#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
