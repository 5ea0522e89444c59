/* SPDX-License-Identifier: MIT */
/*
 * debug.h — the debug build's object tracker (-DTW_DEBUG=ON; make sanitize
 * uses it): a newcomer's mistakes named at the call that makes them, not
 * seconds later as a crash in the reaper or a process that never exits.
 *
 * The anchor is the kernel's DEBUG_OBJECTS: the library keeps, beside the
 * objects, a table of the ones it holds (a service timer that is pending,
 * expired or a tombstone still linked; a timer pending in a wheel; a
 * purgatory op from its first watch until its on_release; a wheel inside
 * one of its calls),
 * keyed by address. A call that would break one of them -- an init of a
 * timer the service still holds, a wheel entered from a second thread
 * while a first is inside it -- finds its object in the table and aborts
 * with a message that names the call, the object and what to do instead.
 * The table, not the object, is asked first because the object's memory
 * may be anything before its init (fresh from malloc); the object's own
 * fields are read only to confirm what the table says.
 *
 * In every other build these are empty: no table, no lock, no branch.
 */
#ifndef TW_DEBUG_H
#define TW_DEBUG_H

#include <stdbool.h>
#include <stdint.h>

#include "timingwheel/error.h"

#ifdef TW_DEBUG

/* What a tracked object is (one table, several kinds of object). */
enum tw__debug_kind {
	TW_DBG_SVC_TIMER,
	TW_DBG_WHEEL_USER,
	TW_DBG_OP,
	TW_DBG_WHEEL_TIMER, /* pending in a wheel of the caller's; tag: the wheel */
	TW_DBG_WHEEL_OBSERVED /* a wheel whose observer's on_event runs now */
};

/* Print "timingwheel: CALL(OBJ): why" and abort. */
void tw__debug_fail(const char *call, const void *obj, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

/* The same for a mistake found after the call that made it (a timer's
 * memory overwritten while a service held it, seen at shutdown): the
 * footer says CALL only found it, and how to find the call that made it. */
void tw__debug_fail_found_late(const char *call, const void *obj,
			       const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

/* Track obj (tag: its owner, for a later forget) or stop tracking it. */
void tw__debug_set(enum tw__debug_kind kind, const void *obj, bool tracked,
		   uint64_t tag);
/* Whether obj is tracked; its tag in *tag. */
bool tw__debug_get(enum tw__debug_kind kind, const void *obj, uint64_t *tag);
/* Stop tracking every object of this kind with this tag (a service's
 * timers when it is destroyed: their memory is the user's again). */
void tw__debug_forget(enum tw__debug_kind kind, uint64_t tag);

/* A call on a single-threaded wheel begins and ends: a second thread that
 * comes in while a first is inside is the mistake (a callback's call from
 * inside advance, on the same thread, is not). */
void tw__debug_wheel_enter(const void *wheel, const char *call);
void tw__debug_wheel_leave(const void *wheel);
#define TW_DEBUG_WHEEL_ENTER(w, call) tw__debug_wheel_enter(w, call)
#define TW_DEBUG_WHEEL_LEAVE(w) tw__debug_wheel_leave(w)
/* The wheel's observer runs (on_event, which must not change the wheel:
 * a changing call from it is named at its enter). */
#define TW_DEBUG_WHEEL_OBSERVED(w, on) tw__debug_set(TW_DBG_WHEEL_OBSERVED, w, on, 0)

/* A TW_EINVAL that says which argument and why, on stderr, and is
 * returned (the call goes on failing as documented; nothing aborts). */
int tw__debug_einval(const char *call, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define TW_EINVAL_BECAUSE(call, ...) tw__debug_einval(call, __VA_ARGS__)

#else

#define TW_DEBUG_WHEEL_ENTER(w, call) ((void)0)
#define TW_DEBUG_WHEEL_LEAVE(w) ((void)0)
#define TW_DEBUG_WHEEL_OBSERVED(w, on) ((void)0)
/* The reason is not even evaluated: the same code as a bare TW_EINVAL. */
#define TW_EINVAL_BECAUSE(call, ...) TW_EINVAL

#endif
#endif
