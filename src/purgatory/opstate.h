/* SPDX-License-Identifier: MIT */
/*
 * opstate.h — an op's state: its exactly-once flag (op->completed), its
 * reference count (op->refs), the beginning of its on_release, its owner
 * word (op->purgatory: who may hold references), and every change the
 * purgatory makes to them, each one atomic step named as
 * model/purgatory.pml names it. Nothing outside this file changes any of
 * these fields (tw_op_init's memset excepted: the op is not shared yet);
 * the rest of the purgatory makes the transitions below.
 *
 * Not one word. The service timer's state is one word that each
 * transition swaps whole (service/state.h). An op's is two ints of the
 * public struct, each changed by its own atomic: the flag by a CAS, the
 * count by adds and subtracts. Merging them into one word would change
 * the public struct and cost a CAS loop on every reference, so instead
 * the code and the model both compute, at each change, the same small
 * abstract word:
 *   bits 0-1  the count: OP_ZERO, OP_ONE, OP_MANY (two or more)
 *   bit 2     OP_COMPLETED   the flag is set
 *   bit 3     OP_RELEASED    on_release has begun
 *   bits 4-5  the owner word, in the owner's own steps only (below)
 * Why these and no more: the rules worth holding the code to are about
 * zero and one, not about how many. A reference is never taken from
 * ZERO (a count at zero is on its way to on_release: taking one would
 * run on_release twice), but by the op's first watch; a put
 * never starts at ZERO; the last put (ONE -> ZERO) is the only way to
 * release; release happens once, from ZERO; completed goes 0 -> 1 once,
 * by a claim that holds a reference (never at ZERO); and nothing happens
 * to a RELEASED op. The exact count (one per watched key, per call) is
 * unbounded in C and small in the model; MANY keeps the table finite and
 * equal on both sides.
 *
 * How the code computes the word at a change: the field the atomic
 * changes is read from what the atomic returned (exact); the other field
 * is loaded just after (it cannot go back: the flag only rises, and a
 * claim's caller holds a reference across its load, so the count it
 * reads is not ZERO unless the protocol is broken). RELEASED is 0 before
 * every step the code makes: after on_release the op's memory may be
 * gone, so the code keeps no bit for it; a step on a released op shows
 * as a step from ZERO, which only ref_first may take.
 *
 * The transitions (from -> to; the bits not named are kept):
 *   ref_first            ZERO -> ONE: try_complete_else_watch's own
 *                        reference, the op's first (nobody else can see
 *                        the op before it)
 *   ref_get              ONE|MANY -> MANY: a holder of a reference takes
 *                        another (a watch entry, the timeout,
 *                        a claimed op kept for its hand-back)
 *   ref_get_unless_zero  ONE|MANY -> MANY: a caller that holds none
 *                        (force_complete, safe_try_complete from outside);
 *                        at ZERO it fails, and that is no step
 *   ref_put              MANY -> MANY|ONE, ONE -> ZERO
 *   release              ZERO -> ZERO+RELEASED: on_release begins (after
 *                        the last put, as the model's two steps)
 *   claim                -COMPLETED -> +COMPLETED: the exactly-once CAS
 * and the owner word's, each with the word above in bits 0-3 (the count
 * and the flag, as they are at the step: nothing else changes them while
 * the owner is NONE or STARTING) and op->purgatory in bits 4-5:
 *   watch_start          NONE -> STARTING: the first watch claims the op
 *   watch_name           STARTING -> WATCHED: it names the purgatory, once
 *                        it holds its first reference (ONE, not ZERO)
 *   mark_never           NONE -> NEVER: a completion from outside claims
 *                        an op nobody watches
 *   watch_refused        STARTING -> NONE: a watch refused once it claimed
 *                        the op (a tolerance on a kafka-mode purgatory)
 *                        gives it back, before its first reference
 * The other steps leave bits 4-5 clear: each is made while the op is
 * WATCHED (ref_first while STARTING), which the owner's rows pin down.
 * Every call that changes a field is a step, even one that leaves the
 * abstract word as it was (MANY -> MANY): the model's table has those
 * rows too, so nothing is skipped. An op the purgatory never saw
 * (op->purgatory NULL) has no references and nothing racing it; its claim
 * is no step of the model's op and is not reported.
 *
 * Code and model, one machine: in the test-point build (TW_TEST_HOOKS)
 * each step reports (which, from, to) to transitions.c, which looks it up
 * in the table SPIN derived from model/purgatory.pml
 * (model/purgatory.transitions) and aborts on a step the model never
 * makes (docs/model.md). In every other build the report is nothing: the
 * atomics are the ones the purgatory made before, and nothing is loaded.
 */
#ifndef TW_PURGATORY_OPSTATE_H
#define TW_PURGATORY_OPSTATE_H

#include <stdbool.h>
#include <stdint.h>

#include "../debug.h"
#include "../test_point.h"
#include "timingwheel/purgatory.h"

/* The op's counters are plain ints in the public struct (C++ cannot see
 * <stdatomic.h> types); these are their atomic accessors, sequentially
 * consistent as the atomic_int operations they replace. */
#define OP_LOAD(field) __atomic_load_n(&(field), __ATOMIC_SEQ_CST)

/*
 * op->purgatory: who may hold references to the op. NULL after
 * tw_op_init; then, once per init, one of two ways:
 *   NULL -> OP_WATCH_STARTING -> the purgatory (tr_watch_start,
 *     tr_watch_name): its first watch claims the op with a
 *     compare-and-swap, takes its first reference, and only then names the
 *     purgatory. A completion from outside that finds STARTING waits for
 *     the watch's next two steps (no lock, no user code between), so it
 *     never finds a watched op with no reference yet (if it did, it would
 *     take none, do nothing and return false for an op it should have
 *     completed). A watch refused between the two (a tolerance on a
 *     kafka-mode purgatory, read only once claimed) gives the claim back,
 *     STARTING -> NULL (tr_watch_refused), and the waiter finds the op
 *     nobody's.
 *   NULL -> OP_NEVER_WATCHED (tr_mark_never): a completion from outside
 *     claimed it before any watch; a watch after that is refused. The
 *     same compare-and-swap decides it, so a completion that took the op
 *     for never watched cannot have a watch start under it (which would
 *     release the op while the completion still ran on_complete).
 * Atomic: completions on other threads read it while a watch runs (a
 * plain store and load would be a data race).
 */
#define OP_WATCH_STARTING ((struct tw_purgatory *)(uintptr_t)1)
#define OP_NEVER_WATCHED ((struct tw_purgatory *)(uintptr_t)2)

static inline struct tw_purgatory *op_purgatory_word(const struct tw_delayed_op *op)
{
	return __atomic_load_n(&op->purgatory, __ATOMIC_ACQUIRE);
}

/* The purgatory that watches the op, or NULL (not watched, not yet or
 * never). */
static inline struct tw_purgatory *op_purgatory(const struct tw_delayed_op *op)
{
	struct tw_purgatory *p = op_purgatory_word(op);

	return p == OP_WATCH_STARTING || p == OP_NEVER_WATCHED ? NULL : p;
}
#define OP_ADD(field, n) __atomic_fetch_add(&(field), (n), __ATOMIC_SEQ_CST)
#define OP_SUB(field, n) __atomic_fetch_sub(&(field), (n), __ATOMIC_SEQ_CST)

enum { OP_ZERO, OP_ONE, OP_MANY, OP_COMPLETED = 4, OP_RELEASED = 8 };
/* op->purgatory in the owner's steps (bits 4-5). */
enum {
	OP_OWNER_NONE = 0, OP_OWNER_STARTING = 16, OP_OWNER_WATCHED = 32,
	OP_OWNER_NEVER = 48
};

/* The transitions, as model/purgatory.pml names them (the table's names). */
enum tw__pg_op_transition {
	OPT_ref_first, OPT_ref_get, OPT_ref_get_unless_zero, OPT_ref_put,
	OPT_release, OPT_claim, OPT_watch_start, OPT_watch_name,
	OPT_mark_never, OPT_watch_refused,
	OPT_COUNT
};

#ifdef TW_TEST_HOOKS
/* transitions.c: abort unless the model makes this step. */
void tw__pg_op_transition(enum tw__pg_op_transition tr, unsigned from,
			  unsigned to);

/* The abstract word of a count and a flag (a negative count, a put too
 * many, is ZERO: the put from ZERO is what the table refuses). */
static inline unsigned op_word(int refs, int completed, bool released)
{
	return (refs <= 0 ? OP_ZERO : refs == 1 ? OP_ONE : OP_MANY) |
	       (completed ? OP_COMPLETED : 0) | (released ? OP_RELEASED : 0);
}

static inline void op_refs_step(enum tw__pg_op_transition tr,
				struct tw_delayed_op *op, int from, int to)
{
	int completed = OP_LOAD(op->completed);

	tw__pg_op_transition(tr, op_word(from, completed, false),
			     op_word(to, completed, false));
}

/* A put's step, with the flag its caller loaded before the put: after a
 * put that was not the last, another thread's last put may release the
 * op and free it, so nothing of the op may be read then (a load of the flag
 * after the put is a use after free in the test-point build). A claim
 * between that load and the put makes the step one from an uncompleted
 * op, which the model makes too. */
static inline void op_put_step(int from, int to, int completed)
{
	tw__pg_op_transition(OPT_ref_put, op_word(from, completed, false),
			     op_word(to, completed, false));
}

static inline void op_claim_step(struct tw_delayed_op *op, int was)
{
	int refs;

	if (!op_purgatory(op))
		return; /* never watched: not the model's op */
	refs = OP_LOAD(op->refs);
	tw__pg_op_transition(OPT_claim, op_word(refs, was, false),
			     op_word(refs, 1, false));
}

static inline void op_release_step(struct tw_delayed_op *op)
{
	int completed = OP_LOAD(op->completed);

	tw__pg_op_transition(OPT_release, op_word(0, completed, false),
			     op_word(0, completed, true));
}

/* The count and the flag at an owner step, loaded while nobody else
 * changes them: the owner is NONE or STARTING (before the step that
 * leaves it, or just after the one that enters STARTING). */
static inline unsigned op_owner_counts(struct tw_delayed_op *op)
{
	return op_word(OP_LOAD(op->refs), OP_LOAD(op->completed), false);
}

static inline void op_owner_step(enum tw__pg_op_transition tr,
				 unsigned counts, unsigned from, unsigned to)
{
	tw__pg_op_transition(tr, counts | from, counts | to);
}

#define OP_REFS_STEP(tr, op, from, to) op_refs_step(OPT_##tr, op, from, to)
#define OP_PUT_FLAG(op) OP_LOAD((op)->completed)
#define OP_PUT_STEP(from, to, completed) op_put_step(from, to, completed)
#define OP_CLAIM_STEP(op, was) op_claim_step(op, was)
#define OP_RELEASE_STEP(op) op_release_step(op)
#define OP_OWNER_COUNTS(op) op_owner_counts(op)
#define OP_OWNER_STEP(tr, counts, from, to) \
	op_owner_step(OPT_##tr, counts, OP_OWNER_##from, OP_OWNER_##to)
#else
#define OP_REFS_STEP(tr, op, from, to) ((void)0)
#define OP_PUT_FLAG(op) 0
#define OP_PUT_STEP(from, to, completed) ((void)(completed))
#define OP_CLAIM_STEP(op, was) ((void)0)
#define OP_RELEASE_STEP(op) ((void)0)
#define OP_OWNER_COUNTS(op) 0u
#define OP_OWNER_STEP(tr, counts, from, to) ((void)(counts))
#endif

/* ---- the transitions ---- */

/* try_complete_else_watch's own reference: the op's first. From here to
 * its on_release the purgatory holds the op (the debug build's table,
 * src/debug.h: an init in between is a mistake it names). */
static inline void tr_ref_first(struct tw_delayed_op *op, struct tw_purgatory *p)
{
	int old = OP_ADD(op->refs, 1);

	OP_REFS_STEP(ref_first, op, old, old + 1);
	(void)old;
	(void)p;
#ifdef TW_DEBUG
	tw__debug_set(TW_DBG_OP, op, true, (uint64_t)(uintptr_t)p);
#endif
}

/* A reference taken by a holder of another one: the count is not zero. */
static inline void tr_ref_get(struct tw_delayed_op *op)
{
	int old = OP_ADD(op->refs, 1);

	OP_REFS_STEP(ref_get, op, old, old + 1);
	(void)old;
}

/* n references at once (a watch's entries, one per key, taken before the
 * first is linked: one locked instruction, not n): the model's ref_get,
 * by a holder of another. */
static inline void tr_ref_get_n(struct tw_delayed_op *op, int n)
{
	int old = OP_ADD(op->refs, n);

	OP_REFS_STEP(ref_get, op, old, old + n);
	(void)old;
}

/*
 * A reference taken by a caller that holds none (a force_complete or
 * safe_try_complete from outside), only unless the count is zero. Zero
 * means the last reference went and on_release is due or running: the
 * op is on its way out, and a plain increment would bring the count back
 * to life, to reach zero again at this caller's put, and run on_release a
 * second time. Only for an op the purgatory saw: one it never saw has no
 * references and no on_release to run.
 */
static inline bool tr_ref_get_unless_zero(struct tw_delayed_op *op)
{
	int n = OP_LOAD(op->refs);

	do {
		if (n == 0)
			return false;
	} while (!__atomic_compare_exchange_n(&op->refs, &n, n + 1, false,
					      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	OP_REFS_STEP(ref_get_unless_zero, op, n, n + 1);
	return true;
}

/* Drop a reference; true if it was the last (the caller releases). */
static inline bool tr_ref_put(struct tw_delayed_op *op)
{
	int completed = OP_PUT_FLAG(op); /* before: see op_put_step */
	int old;

	TW_TEST_POINT("op_put.loaded", op);
	old = OP_SUB(op->refs, 1);

	TW_TEST_POINT("op_put.decremented", op);
	OP_PUT_STEP(old, old - 1, completed);
	return old == 1;
}

/* on_release begins: no field changes (the op may be freed by it), but
 * it is the model's step, reported before the op is handed to it. */
static inline void tr_release(struct tw_delayed_op *op)
{
	OP_RELEASE_STEP(op);
#ifdef TW_DEBUG
	tw__debug_set(TW_DBG_OP, op, false, 0);
#endif
	(void)op;
}

/* The exactly-once flag: of the condition, the timeout, a cancel and
 * shutdown, exactly one wins the CAS. */
static inline bool tr_claim(struct tw_delayed_op *op)
{
	int was = 0;

	if (!__atomic_compare_exchange_n(&op->completed, &was, 1, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return false;
	OP_CLAIM_STEP(op, was);
	(void)was;
	return true;
}

/* The first watch claims the op (NONE -> STARTING), in one step: of two
 * racing watches one fails, and so does a watch after a completion from
 * outside (NEVER) or after a watch that failed (its on_release has run).
 * False, with *seen the word found, if the op was not NONE. */
static inline bool tr_watch_start(struct tw_delayed_op *op,
				  struct tw_purgatory **seen)
{
	*seen = NULL;
	if (!__atomic_compare_exchange_n(&op->purgatory, seen,
					 OP_WATCH_STARTING, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return false;
	OP_OWNER_STEP(watch_start, OP_OWNER_COUNTS(op), NONE, STARTING);
	return true;
}

/* The watch names the purgatory (STARTING -> WATCHED), only once it holds
 * its first reference (tr_ref_first): from here on a completion from
 * outside takes a reference of its own. The step is reported before the
 * store, while nothing else can change the count. */
static inline void tr_watch_name(struct tw_delayed_op *op,
				 struct tw_purgatory *p)
{
	OP_OWNER_STEP(watch_name, OP_OWNER_COUNTS(op), STARTING, WATCHED);
	__atomic_store_n(&op->purgatory, p, __ATOMIC_RELEASE);
}

/* A watch refused once it claimed the op (STARTING -> NONE): a tolerance
 * on a kafka-mode purgatory, which only the claimer reads (the tolerance
 * waits in the timer's due time, which the claimer's arming overwrites:
 * core.h). No reference was taken; a completion from outside that waits
 * on STARTING then finds the op nobody's, and a later watch may claim it. */
static inline void tr_watch_refused(struct tw_delayed_op *op)
{
	OP_OWNER_STEP(watch_refused, OP_OWNER_COUNTS(op), STARTING, NONE);
	__atomic_store_n(&op->purgatory, NULL, __ATOMIC_RELEASE);
}

/* A completion from outside claims an op nobody watches
 * (NONE -> NEVER), in the same compare-and-swap that decides it is not
 * watched, so no watch can start under the completion. False, with *seen
 * the word found, if the op was not NONE. The count and the flag are
 * loaded before: once NEVER, another completion may set the flag. */
static inline bool tr_mark_never(struct tw_delayed_op *op,
				 struct tw_purgatory **seen)
{
	unsigned counts = OP_OWNER_COUNTS(op);

	*seen = NULL;
	if (!__atomic_compare_exchange_n(&op->purgatory, seen,
					 OP_NEVER_WATCHED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return false;
	OP_OWNER_STEP(mark_never, counts, NONE, NEVER);
	(void)counts;
	return true;
}

#endif
