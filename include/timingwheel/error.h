/* SPDX-License-Identifier: MIT */
/**
 * @file
 * Error codes shared by every timingwheel module.
 *
 * Like libuv, functions return 0 (or a non-negative count) on success and a
 * negative TW_E* code on failure. A call that fails changes nothing, but
 * where its documentation says what it did: TW_ECORRUPT (a misuse broke
 * the structure; destroy, drain and shutdown still free and hand back what
 * they can reach) and TW_ENOMEM from an init (the object is left
 * unusable) or from tw_purgatory_try_complete_else_watch() (the op is
 * claimed and released).
 */
#ifndef TIMINGWHEEL_ERROR_H
#define TIMINGWHEEL_ERROR_H

#include "timingwheel/version.h" /* so that every header has the version */

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what this header declares
 * is its exported API. */
#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility push(default)
#endif

/** The result codes: 0 for success, negative for an error. */
enum tw_error {
	TW_OK = 0,        /**< success */
	TW_EINVAL = -1,   /**< a NULL pointer, a missing callback, a bad parameter */
	TW_ENOMEM = -2,   /**< allocation failed (the wheel allocates only in init) */
	TW_EBUSY = -3,    /**< the timer is already pending (use reschedule),
			       or the operation already watched */
	TW_ERANGE = -4,   /**< the clock would go backwards */
	TW_EOWNER = -5,   /**< the timer belongs to another wheel (it is pending
			       there) or another service (its first add
			       claimed it) */
	TW_EREENTER = -6, /**< called from inside a callback where that is not allowed */
	TW_ECORRUPT = -7, /**< a broken invariant (tw_wheel_check()), or a
			       timer's links or counts that a drain, destroy
			       or shutdown cannot follow: almost always a
			       timer initialised or freed while pending */
	TW_EOVERFLOW = -8,/**< now + delay does not fit in an int64_t (the
			       add_in calls of the wheel and the service;
			       nothing changed) */
	TW_ESHUTDOWN = -9,/**< the service or the purgatory is shut down */
	TW_EAGAIN = -10,  /**< a thread could not be started */
	TW_EDEADLK = -11, /**< cancel_sync would close a cycle of waits (callbacks
			       that cancel_sync each other); from a timer's own
			       callback cancel_sync returns TW_SVC_RUNNING */
	TW_EDEADLK_STOPPED = -12 /**< TW_EDEADLK, where the cancel the call
			       made first stopped an add: that add will not
			       run (count it as TW_SVC_STOPPED), and the
			       call did not wait */
};

/**
 * Describe any value a timingwheel call returns.
 * @param err a TW_E* code, or a non-negative result (any int is accepted)
 * @return a short constant English description, never NULL, true of
 *         every call that returns the value: 0 is "success"; 1 and 2 are
 *         the cancels' results and also counts, and the text says both
 *         (1: the TW_SVC_STOPPED of tw_service_cancel() and the 1 of
 *         tw_wheel_cancel(), it was pending and will not run; 2:
 *         TW_SVC_RUNNING); TW_ECORRUPT names the likely mistake. Any
 *         other positive value is a count ("not an error"), and a
 *         negative value that is not a TW_E* is "unknown error".
 * @par Thread safety
 *      Any thread.
 */
const char *tw_strerror(int err);

#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
