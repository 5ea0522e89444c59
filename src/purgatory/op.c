/* SPDX-License-Identifier: MIT */
/*
 * op.c — one delayed operation: its init, the exactly-once claim (the
 * CAS on op->completed that a condition, the timeout, a cancel and
 * shutdown race for), force_complete and safe_try_complete from outside,
 * and its timeout: on_timeout when it fires, drop_timeout when the op
 * completed first (a one-CAS stop that never waits). Its reference
 * counting is core.h's and opstate.h's (a reference from a caller that
 * holds none is taken only unless the count is zero).
 */
#include "core.h"

#if defined(__LP64__)
/* purgatory.h says what each of these bytes is for; keep it true. */
_Static_assert(sizeof(struct tw_delayed_op) == 112,
	       "an op is 112 bytes on LP64");
_Static_assert(sizeof(struct tw_watch) == 24,
	       "a watch entry is 24 bytes on LP64");
#endif

/* The op's timeout is no longer needed: stop it if it is pending, and drop
 * its reference. Never waits: a completion may run on the service's own
 * thread (another op's on_expiration checking this op's key), where
 * waiting for this op's expired timeout, queued behind it in the same
 * batch, would wait for itself. An expired timeout, or
 * one the service's shutdown holds, is left to on_timeout or
 * timeout_handed_back, which find the op completed and drop the reference
 * themselves. */
void tw__pg_drop_timeout(struct tw_purgatory *p, struct tw_delayed_op *op)
{
	if (tw__service_stop_pending(p->svc, &op->timer) == TW_SVC_STOPPED) {
		count_delayed(p, -1);
		op_put(op); /* the timeout's reference */
	}
}

static void on_timeout(struct tw_service *svc, struct tw_service_timer *t);

int tw_op_init(struct tw_delayed_op *op, int64_t timeout,
	       const struct tw_op_ops *ops, pthread_mutex_t *lock)
{
	if (!op || timeout <= 0 || !ops || !ops->try_complete ||
	    !ops->on_complete)
		return TW_EINVAL_BECAUSE("tw_op_init", "%s",
					 !op ? "the op is NULL"
					 : timeout <= 0 ? "timeout must be > 0"
					 : !ops ? "ops is NULL"
					 : !ops->try_complete ? "ops->try_complete is NULL"
							      : "ops->on_complete is NULL");
#ifdef TW_DEBUG
	/* Only the debug build can tell: before its first init the op's
	 * memory may be anything, so its own fields prove nothing. Bit 0 of
	 * the tag: its watch failed (watch.c, debug_watch_failed). */
	uint64_t tag;

	if (tw__debug_get(TW_DBG_OP, op, &tag))
		tw__debug_fail("tw_op_init", op, "%s%s",
			       tag & 1
			       ? "its watch returned TW_ENOMEM, but a call that held "
				 "the op then (a key check trying the ops of a key "
				 "it was on, a completion from another thread) has "
				 "not let go of it yet, and its on_release runs when "
				 "that call does. "
			       : "this op is still held by a purgatory (watched, or "
				 "completed and not yet released). ",
			       "Initialising it now would corrupt its watch lists "
			       "and run its callbacks on the new op. Reuse or free "
			       "an op only from its on_release, or after it.");
#endif
	memset(op, 0, sizeof(*op));
	tw_service_timer_init(&op->timer, on_timeout);
	op->timeout = timeout;
	op->ops = ops;
	op->shared_lock = lock;
	return TW_OK;
}

int tw_op_set_tolerance(struct tw_delayed_op *op, int64_t tolerance)
{
	if (!op || tolerance < 0)
		return TW_EINVAL_BECAUSE("tw_op_set_tolerance", "%s",
					 !op ? "the op is NULL"
					     : "the tolerance must be >= 0");
	/* Watched (or its watch failed, which released it, or it completed
	 * unwatched): its timeout may be armed, and next_due its due time. */
	if (op_purgatory_word(op))
		return TW_EBUSY;
	op_tolerance_store(op, tolerance);
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

/*
 * The purgatory that watches the op, seen by a call from outside that
 * holds no reference (opstate.h, op->purgatory): a watch that is
 * starting is waited out (its next two steps: no lock, no user code), so
 * a watched op is never found with no reference yet. For a claim
 * (mark_never), an op nobody watches is marked never watched in the same
 * step, so no watch can start under the claim; NULL then stands for it.
 */
static struct tw_purgatory *watched_by(struct tw_delayed_op *op, bool mark_never)
{
	struct tw_purgatory *p = op_purgatory_word(op);

	for (;;) {
		if (p == OP_WATCH_STARTING) {
			TW_TEST_POINT("outside.watch_starting", op);
			sched_yield();
			p = op_purgatory_word(op);
			continue;
		}
		if (p || !mark_never)
			break;
		if (tr_mark_never(op, &p)) {
			p = OP_NEVER_WATCHED;
			break;
		}
	}
	return p == OP_NEVER_WATCHED ? NULL : p;
}

/* Win the race to complete, and run on_complete (a cancel or shutdown
 * claims with tr_claim alone and hands the op back instead). The
 * reference comes first: once the CAS succeeds, every other holder may see
 * the op completed and drop its own (a key check unlinks the entries, the
 * timeout runs and puts), and a reference taken after the CAS could come
 * after on_release. No purge here: a claim usually runs in try_complete,
 * under the caller's lock, and a purge may release another op that shares
 * that lock, whose on_release may take it; the purgatory's own calls purge
 * once they let go of the op's lock. */
static bool claim_and_complete(struct tw_delayed_op *op)
{
	/* NULL: never watched. Then nothing else refers to the op, and it
	 * takes no reference and has no on_release to run (a put of its own
	 * would run on_release of an op the purgatory never saw, under the
	 * caller's lock, and a later watch would run it again). */
	struct tw_purgatory *p = watched_by(op, true);

	if (p && !tr_ref_get_unless_zero(op))
		return false;
	TW_TEST_POINT("force_complete.held", op);
	if (!tr_claim(op)) {
		if (p)
			op_put(op);
		return false;
	}
	TW_TEST_POINT("force_complete.claimed", op);
	if (p) {
		tw__pg_drop_timeout(p, op);
		if (OP_LOAD(op->linked))
			count_completion(p);
	}
	op->ops->on_complete(op);
	if (p)
		op_put(op);
	return true;
}

bool tw_op_force_complete(struct tw_delayed_op *op)
{
	if (!op)
		return false;
	return claim_and_complete(op);
}

/* A reference across the locked section: if try_complete completes the op
 * and every other reference goes meanwhile, on_release runs after the
 * unlock (it may free the op, lock included), never under the lock.
 *
 * An op that no purgatory watched at the first look is looked at again
 * under the lock: a watch may have started since, completed the op by
 * its own try_complete and still hold its reference, and this
 * try_complete's force_complete would then take one and drop it after
 * the watch let go of its own: the last, with on_release under the lock
 * taken here. Under the lock no watch can complete the op, so the second
 * look decides: watched, this call holds a reference too. */
bool tw_op_safe_try_complete(struct tw_delayed_op *op)
{
	struct tw_purgatory *p;
	bool done, held;

	if (!op || !op->ops)
		return false;
	p = watched_by(op, false);
	TW_TEST_POINT("safe_try.looked", op);
	held = p != NULL; /* one the purgatory never saw has no references
			     to keep */
	if (held && !tr_ref_get_unless_zero(op))
		return false; /* completed, and on its way out */
	lock_op(op);
	if (!held) {
		/* A watch's steps before its lock take no lock: waited out
		 * here, under this one, as a claim waits them out. */
		p = watched_by(op, false);
		held = p != NULL;
		if (held && !tr_ref_get_unless_zero(op)) {
			unlock_op(op);
			return false;
		}
	}
	calling_begin();
	done = op->ops->try_complete(op);
	unlock_op(op);
	if (held)
		op_put(op);
	calling_end();
	/* After the unlock, and not through the op: the put may have
	 * released it. */
	if (held)
		pg_maybe_purge(p);
	return done;
}

/* The timeout's own claim: its reference keeps the op alive (no other to
 * take), and its timer is the one running (nothing to stop: a stop would
 * take the service's lock to find it not pending). */
static bool claim_by_timeout(struct tw_purgatory *p, struct tw_delayed_op *op)
{
	if (!tr_claim(op))
		return false;
	TW_TEST_POINT("force_complete.claimed", op);
	if (OP_LOAD(op->linked))
		count_completion(p);
	op->ops->on_complete(op);
	return true;
}

static void on_timeout(struct tw_service *svc, struct tw_service_timer *t)
{
	struct tw_delayed_op *op = tw_container_of(t, struct tw_delayed_op, timer);

	struct tw_purgatory *p = op_purgatory(op);

	(void)svc;
	count_delayed(p, -1);
	if (claim_by_timeout(p, op) && op->ops->on_expiration)
		op->ops->on_expiration(op);
	op_put(op); /* the timeout's reference */
	pg_maybe_purge(p);
}
