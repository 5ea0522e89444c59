/* SPDX-License-Identifier: MIT */
/*
 * state.h — the service timer's state word: its layout, and every change
 * the service makes to it. Nothing outside this file reads the word's
 * bits or writes the word; the rest of the service asks the questions
 * below and makes the transitions below, each named as model/service.pml
 * names it.
 *
 * The word (one 32-bit atomic in the timer):
 *   bits 0-2   the state
 *     IDLE      not pending (its last run may still be going on: F_RAN)
 *     PENDING   in its shard's wheel
 *     QUEUED    expired: on its shard's list of timers waiting to run
 *     TAKEN     expired and taken into a runner's batch (t->runner,
 *               t->place); claimed -- running or run -- once that batch
 *               slot no longer holds it
 *     DEFERRED  added while its callback runs on t->runner: that run's
 *               end files it (one run at a time)
 *     HANDING   on shutdown's list, to be handed back
 *   bit 3      F_PERIODIC  the first member of a struct tw_service_periodic
 *   bit 4      F_RAN       its last expiry went to runner t->runner, whose
 *                          run of it may still be going on
 *   bit 5      F_SHUT      tw_service_timer_shutdown(): every add refused
 *                          until an init or a reinit
 *   bits 6-13  the shard that holds it (fixed by the first add)
 *   bits 14-31 the id of the service that owns it: 0 until the first add
 *              (or a tw_service_timer_bind() before it) claims it, with
 *              the shard, in one compare-and-swap
 *
 * Who writes it. The first add's claim (owner and shard, from 0), and
 * timer_shutdown or reinit of a timer never added, are compare-and-swaps
 * on a word without an owner. Every other change is made under the mutex
 * of the timer's shard, by a plain (relaxed) atomic store: whoever needs
 * the word to decide something holds that mutex, and the few readers
 * without it (tw_service_timer_pending()'s first look, the owner checks
 * that come before taking the mutex) read a snapshot. The runner that
 * claims a taken timer does so in its own batch slot, not in the word
 * (run.c): the word needs no atomic read-modify-write after the claim.
 *
 * The transitions (from -> to; a flag not named is kept):
 *   claim       owner 0 -> owner and shard set (low bits kept)  first add,
 *                                                               bind
 *   add         IDLE -> PENDING, -F_RAN        add, reschedule
 *   defer       IDLE -> DEFERRED (F_RAN kept)  add during its run
 *   stop        PENDING|QUEUED|TAKEN|DEFERRED|HANDING -> IDLE (a taken
 *               timer only while unclaimed)    cancel, reschedule,
 *                                               stop_pending
 *   ran         TAKEN (claimed) -> IDLE        found claimed, under mutex
 *   expire      PENDING -> QUEUED              advance
 *   take        QUEUED -> TAKEN +F_RAN         a runner's batch
 *   rearm       TAKEN (claimed) -> PENDING, -F_RAN   periodic, run's end
 *   place       DEFERRED -> PENDING, -F_RAN    run's end, not due yet
 *   again       DEFERRED -> TAKEN (claimed)    run's end, due: run again
 *   collect     PENDING -> HANDING             shutdown
 *   hand_back   HANDING -> IDLE +F_RAN         shutdown
 *   settle      IDLE+F_RAN -> IDLE             no run is going on
 *   shut        +F_SHUT                        timer_shutdown
 *   reinit      F_PERIODIC as asked, -F_SHUT   reinit
 *
 * Code and model, one machine. In the test-point build (TW_TEST_HOOKS)
 * every transition that changes the word's low six bits reports (which,
 * from, to); transitions.c looks the triple up in the table SPIN derived
 * from model/service.pml (model/service.transitions) and aborts on one
 * the model never makes. In every other build the report is nothing.
 */
#ifndef TW_SERVICE_STATE_H
#define TW_SERVICE_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "timingwheel/service.h"

enum {
	ST_IDLE, ST_PENDING, ST_QUEUED, ST_TAKEN, ST_DEFERRED, ST_HANDING,
	ST_MASK = 7,
	F_PERIODIC = 8,
	F_RAN = 16,
	F_SHUT = 32,
	WORD_LOW = 64, /* the state and the flags: what the model checks */
	SHARD_SHIFT = 6,
	SHARD_BITS = 8,
	OWNER_SHIFT = 14,
};

#define MAX_SHARDS (1u << SHARD_BITS)
#define SHARD_MASK ((MAX_SHARDS - 1) << SHARD_SHIFT)
#define OWNER_MASK (~(uint32_t)0 << OWNER_SHIFT)
#define OWNER_IDS ((1u << (32 - OWNER_SHIFT)) - 1) /* ids 1 .. OWNER_IDS */

/* The transitions, as model/service.pml names them (the table's names). */
enum tw__svc_transition {
	TR_claim, TR_add, TR_defer, TR_stop, TR_ran, TR_expire, TR_take,
	TR_rearm, TR_place, TR_again, TR_collect, TR_hand_back, TR_settle,
	TR_shut, TR_reinit,
	TR_COUNT
};

#ifdef TW_TEST_HOOKS
/* transitions.c: abort unless the model makes this step (if the low bits
 * changed). */
void tw__svc_transition(enum tw__svc_transition tr, uint32_t from, uint32_t to);
#define TRANSITION_CHECK(tr, from, to) tw__svc_transition(tr, from, to)
#else
#define TRANSITION_CHECK(tr, from, to) ((void)0)
#endif
#ifdef TW_DEBUG
/* lifecycle.c: the debug build's table of the timers a service holds
 * (src/debug.h), brought up to date from the step's own words. */
void tw__svc_debug_step(const struct tw_service_timer *t, uint32_t from,
			uint32_t to);
#define DEBUG_STEP(t, from, to) tw__svc_debug_step(t, from, to)
#else
#define DEBUG_STEP(t, from, to) ((void)0)
#endif

/* ---- what the word says ---- */

static inline uint32_t word_load(const struct tw_service_timer *t)
{
	return __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
}

static inline unsigned word_state(uint32_t word)
{
	return word & ST_MASK;
}

static inline bool word_has(uint32_t word, uint32_t flags)
{
	return (word & flags) != 0;
}

static inline uint32_t word_owner(uint32_t word)
{
	return word & OWNER_MASK;
}

static inline unsigned word_shard(uint32_t word)
{
	return (word & SHARD_MASK) >> SHARD_SHIFT;
}

/* A word whose add has not ended: what tw_service_timer_pending() says
 * (a TAKEN timer only while its batch slot still holds it: run.c). */
static inline bool word_waits(uint32_t word)
{
	unsigned s = word_state(word);

	return s == ST_PENDING || s == ST_QUEUED || s == ST_DEFERRED ||
	       s == ST_HANDING;
}

/* The word of a fresh timer (tw_service_timer_init, periodic_init): not a
 * transition, the timer is not shared yet. */
static inline void word_init(struct tw_service_timer *t, bool periodic)
{
	t->state = periodic ? F_PERIODIC : 0;
}

/* ---- the transitions ---- */

/* A compare-and-swap on a word no service owns yet (claim, and shut or
 * reinit of a timer never added); on failure *old is the word found. */
static inline bool word_cas(struct tw_service_timer *t, uint32_t *old,
			    uint32_t next, enum tw__svc_transition tr)
{
	uint32_t from = *old;

	if (!__atomic_compare_exchange_n(&t->state, old, next, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return false;
	TRANSITION_CHECK(tr, from, next);
	DEBUG_STEP(t, from, next);
	(void)from;
	(void)tr;
	return true;
}

/* Under the shard's mutex: the word becomes next (tr names the step). */
static inline void word_set(struct tw_service_timer *t, uint32_t from,
			    uint32_t next, enum tw__svc_transition tr)
{
	__atomic_store_n(&t->state, next, __ATOMIC_RELEASE);
	TRANSITION_CHECK(tr, from, next);
	DEBUG_STEP(t, from, next);
	(void)from;
	(void)tr;
}

/* Under the shard's mutex: two steps in one store (the word between
 * them, mid, is never seen: nobody reads the word without the mutex but
 * for a snapshot both steps' words answer alike). */
static inline void word_set_two(struct tw_service_timer *t, uint32_t from,
				uint32_t mid, uint32_t next,
				enum tw__svc_transition tr1,
				enum tw__svc_transition tr2)
{
	__atomic_store_n(&t->state, next, __ATOMIC_RELEASE);
	TRANSITION_CHECK(tr1, from, mid);
	TRANSITION_CHECK(tr2, mid, next);
	DEBUG_STEP(t, from, next);
	(void)from;
	(void)mid;
	(void)tr1;
	(void)tr2;
}

/* The word with its state replaced and the given flags set and cleared. */
static inline uint32_t word_with(uint32_t word, unsigned state, uint32_t set,
				 uint32_t clear)
{
	return ((word & ~(uint32_t)ST_MASK & ~clear) | state | set);
}

#endif
