/* SPDX-License-Identifier: MIT */
/*
 * state.h — the service timer's state word: its layout, and every change
 * the protocol makes to it. Nothing outside this file reads the word's
 * bits or changes the word; the rest of the service asks the questions
 * below (word_state, word_has, word_owner) and makes the transitions
 * below, each one atomic step named as model/service.pml names it.
 *
 * The word (one 32-bit atomic in the timer):
 *   bits 0-2   the state
 *     IDLE      not pending
 *     ADDING    a producer is writing the due time (others wait or skip)
 *     PENDING   pending: in the wheel, or in an inbox on its way there
 *     EXPIRED   fired; its entry waits in a dispatch batch or the queue
 *     RUNNING   a periodic timer's callback runs; it re-arms afterwards
 *   bit 3      F_INBOX    an inbox holds it; the wheel owner will look at
 *                         its state
 *   bit 4      F_ENTRY    a dispatch batch, the executor queue or
 *                         shutdown's list holds an entry for it
 *   bit 5      F_PERIODIC it is the first member of a struct
 *                         tw_service_periodic (execute reads the period
 *                         behind it and picks RUNNING in its claim)
 *   bit 6      F_TOMB     cancelled from PENDING: the wheel may still
 *                         link it (a tombstone) until the wheel owner
 *                         unlinks it and clears this
 *   bits 7-31  the id of the service that owns it: 0 until the first
 *              add claims it in the same CAS that takes it to ADDING
 *              (a pointer would cost 8 more bytes a timer)
 *
 * The transitions (from -> to; a flag not named is kept):
 *   add           IDLE|PENDING|EXPIRED|RUNNING -> ADDING, owner set
 *                 (an add only from IDLE|RUNNING; a reschedule from any)
 *   publish       ADDING -> PENDING +F_INBOX             add, re-arm
 *   rearm         RUNNING -> ADDING (IDLE once closing)   executor
 *   apply         -F_INBOX -F_TOMB, after the wheel matched the state
 *   clear_tomb    -F_TOMB, after the wheel owner unlinked it
 *   expire        PENDING (no F_INBOX) -> EXPIRED +F_ENTRY   wheel owner
 *   execute       EXPIRED -> IDLE (one-shot) | RUNNING (periodic),
 *                 -F_ENTRY; any other state: -F_ENTRY (a cancel won)
 *   release_entry -F_ENTRY, not EXPIRED: cancel_sync took the entry
 *                 back, or shutdown let go of a timer a cancel stopped
 *   reinit        IDLE -> IDLE, F_PERIODIC as the caller says
 *   cancel        PENDING -> IDLE +F_TOMB; EXPIRED|RUNNING -> IDLE;
 *                 only while the owner is the caller's service
 *   stop_pending  PENDING (no F_ENTRY) -> IDLE +F_TOMB   the purgatory
 *   collect       PENDING -> PENDING +F_ENTRY            shutdown
 *   hand_back     PENDING +F_ENTRY -> IDLE -F_ENTRY      shutdown
 * Each is one CAS (or one atomic and-not), so of two racing calls exactly
 * one wins. The guards (which states a transition starts from) are the
 * callers' decisions and stay in their loops; what a transition writes is
 * decided here, once.
 *
 * Code and model, one machine. In the test-point build (TW_TEST_HOOKS)
 * every transition that changes the word reports (which, from, to) with
 * the owner's bits masked off; transitions.c looks the triple up in the
 * table SPIN derived from model/service.pml (model/service.transitions:
 * every triple the model makes, in its scenarios and from every word) and
 * aborts on one the model never makes. So a race test, a stress test or
 * the soak that drives the C code into a step the model does not have
 * fails at that step (docs/model.md). In every other build the report is
 * nothing.
 */
#ifndef TW_SERVICE_STATE_H
#define TW_SERVICE_STATE_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "timingwheel/service.h"

enum {
	ST_IDLE, ST_ADDING, ST_PENDING, ST_EXPIRED, ST_RUNNING,
	ST_MASK = 7,
	F_INBOX = 8,
	F_ENTRY = 16,
	F_PERIODIC = 32,
	F_TOMB = 64,
	OWNER_SHIFT = 7,
};

#define OWNER_MASK (~(uint32_t)0 << OWNER_SHIFT)
#define OWNER_IDS ((1u << (32 - OWNER_SHIFT)) - 1) /* ids 1 .. OWNER_IDS */

/* The transitions, as model/service.pml names them (the table's names). */
enum tw__svc_transition {
	TR_add, TR_publish, TR_rearm, TR_apply, TR_clear_tomb, TR_expire,
	TR_execute, TR_release_entry, TR_reinit, TR_cancel, TR_stop_pending,
	TR_collect, TR_hand_back,
	TR_COUNT
};

#ifdef TW_TEST_HOOKS
/* transitions.c: abort unless the model makes this step (if the word
 * changed). */
void tw__svc_transition(enum tw__svc_transition tr, uint32_t from, uint32_t to);
#define TRANSITION_CHECK(tr, from, to) tw__svc_transition(TR_##tr, from, to)
#else
#define TRANSITION_CHECK(tr, from, to) ((void)0)
#endif
#ifdef TW_DEBUG
/* lifecycle.c: the debug build's table of the timers a service holds
 * (src/debug.h), brought up to date after each step from the step's own
 * words, never by reading the timer again (its owner may free it the
 * moment the step lets go of it). */
void tw__svc_debug_step(const struct tw_service_timer *t, uint32_t from,
			uint32_t to);
#define DEBUG_STEP(t, from, to) tw__svc_debug_step(t, from, to)
#else
#define DEBUG_STEP(t, from, to) ((void)0)
#endif
/* After each transition, in the function that made it (its timer is t). */
#define TRANSITION(tr, from, to)                                              \
	(TRANSITION_CHECK(tr, from, to), DEBUG_STEP(t, from, to))

/* ---- reading the word ---- */

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

/* A timer that is, or may be about to be, pending: what a reinit refuses
 * and what tw_service_timer_pending() reports. */
static inline bool word_live(uint32_t word)
{
	unsigned s = word_state(word);

	return s == ST_ADDING || s == ST_PENDING || s == ST_EXPIRED;
}

/* A timer the service still holds in any way: pending or on its way, its
 * callback running, or an inbox, an entry or the wheel (a tombstone) still
 * referring to it. Freeing or initialising it then is a mistake. */
static inline bool word_held(uint32_t word)
{
	return word_state(word) != ST_IDLE ||
	       word_has(word, F_INBOX | F_ENTRY | F_TOMB);
}

/* The word once no producer is between taking the timer (ADDING) and
 * publishing its due time: a few instructions, unless it was preempted. */
static inline uint32_t word_settled(const struct tw_service_timer *t,
				    uint32_t old)
{
	while (word_state(old) == ST_ADDING) {
		sched_yield();
		old = word_load(t);
	}
	return old;
}

/* The word of a fresh timer (tw_service_timer_init, periodic_init): not a
 * transition, the timer is not shared yet. */
static inline void word_init(struct tw_service_timer *t, bool periodic)
{
	t->state = periodic ? F_PERIODIC : 0;
}

/* ---- the transitions ----
 * Each takes the word the caller last read (*old) and tries once; on
 * failure *old is the word found, for the caller's loop to look at again.
 */

static inline bool word_cas(struct tw_service_timer *t, uint32_t *old,
			    uint32_t next)
{
	return __atomic_compare_exchange_n(&t->state, old, next, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

#define DEFINE_CAS_TRANSITION(name, next_of)                                  \
	static inline bool tr_##name(struct tw_service_timer *t, uint32_t *old) \
	{                                                                     \
		uint32_t from = *old, next = next_of;                         \
		if (!word_cas(t, old, next))                                  \
			return false;                                         \
		TRANSITION(name, from, next);                                 \
		(void)from;                                                   \
		return true;                                                  \
	}

/* A claim and a state change in one CAS: two services adding the same
 * fresh timer at once cannot both win. */
static inline bool tr_add(struct tw_service_timer *t, uint32_t *old,
			  uint32_t owner_bits)
{
	uint32_t from = *old, next = (from & ~ST_MASK) | ST_ADDING | owner_bits;

	if (!word_cas(t, old, next))
		return false;
	TRANSITION(add, from, next);
	return true;
}

/* ADDING -> PENDING +F_INBOX. Only flags can change under an ADDING word
 * (its producer is the only one who moves its state), so this retries
 * until it lands; returns the word it replaced: without F_INBOX, the
 * caller pushes the timer (it set the flag). */
static inline uint32_t tr_publish(struct tw_service_timer *t)
{
	uint32_t old = word_load(t), next;

	do
		next = (old & ~ST_MASK) | ST_PENDING | F_INBOX;
	while (!word_cas(t, &old, next));
	TRANSITION(publish, old, next);
	return old;
}

static inline bool tr_rearm(struct tw_service_timer *t, uint32_t *old,
			    bool closing)
{
	uint32_t from = *old,
		 next = (from & ~ST_MASK) | (closing ? ST_IDLE : ST_ADDING);

	if (!word_cas(t, old, next))
		return false;
	TRANSITION(rearm, from, next);
	return true;
}

DEFINE_CAS_TRANSITION(apply, from & ~(uint32_t)(F_INBOX | F_TOMB))
DEFINE_CAS_TRANSITION(expire, (from & ~ST_MASK) | ST_EXPIRED | F_ENTRY)
/* EXPIRED: claimed to run; anything else: a cancel won, and this only
 * gives up the entry. */
DEFINE_CAS_TRANSITION(execute,
	word_state(from) == ST_EXPIRED
		? (from & ~(uint32_t)(ST_MASK | F_ENTRY)) |
			  (from & F_PERIODIC ? ST_RUNNING : ST_IDLE)
		: from & ~(uint32_t)F_ENTRY)
DEFINE_CAS_TRANSITION(release_entry, from & ~(uint32_t)F_ENTRY)
DEFINE_CAS_TRANSITION(cancel,
	(from & ~ST_MASK) | ST_IDLE |
		(word_state(from) == ST_PENDING ? F_TOMB : 0))
DEFINE_CAS_TRANSITION(stop_pending, (from & ~ST_MASK) | ST_IDLE | F_TOMB)
DEFINE_CAS_TRANSITION(collect, from | F_ENTRY)
DEFINE_CAS_TRANSITION(hand_back,
	(from & ~(uint32_t)(ST_MASK | F_ENTRY)) | ST_IDLE)

/* periodic: 1 sets F_PERIODIC, 0 clears it, -1 keeps it. */
static inline bool tr_reinit(struct tw_service_timer *t, uint32_t *old,
			     int periodic)
{
	uint32_t from = *old,
		 next = periodic < 0 ? from
		      : periodic   ? from | F_PERIODIC
				   : from & ~(uint32_t)F_PERIODIC;

	if (!word_cas(t, old, next))
		return false;
	TRANSITION(reinit, from, next);
	return true;
}

/* -F_TOMB whatever the rest of the word is (a cancel may set it again at
 * any time); returns the word before. */
static inline uint32_t tr_clear_tomb(struct tw_service_timer *t)
{
	uint32_t from = __atomic_fetch_and(&t->state, ~(uint32_t)F_TOMB,
					   __ATOMIC_ACQ_REL);

	TRANSITION(clear_tomb, from, from & ~(uint32_t)F_TOMB);
	return from;
}

/* -F_ENTRY whatever the rest of the word is: from shutdown's thread, for
 * a timer on its own list (nobody else consumes that entry). */
static inline void tr_release_entry_now(struct tw_service_timer *t)
{
	uint32_t from = __atomic_fetch_and(&t->state, ~(uint32_t)F_ENTRY,
					   __ATOMIC_ACQ_REL);

	TRANSITION(release_entry, from, from & ~(uint32_t)F_ENTRY);
	(void)from;
}

#undef DEFINE_CAS_TRANSITION

#endif
