/*
 * Error codes shared by every timingwheel module.
 *
 * Like libuv, functions return 0 (or a non-negative count) on success and a
 * negative TW_E* code on failure. A call that fails changes nothing.
 */
#ifndef TIMINGWHEEL_ERROR_H
#define TIMINGWHEEL_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum tw_error {
	TW_OK = 0,
	TW_EINVAL = -1,   /* a NULL pointer, a missing callback, a bad parameter */
	TW_ENOMEM = -2,   /* allocation failed (only tw_wheel_init allocates) */
	TW_EBUSY = -3,    /* the timer is already pending; use reschedule */
	TW_ERANGE = -4,   /* the clock would go backwards */
	TW_EOWNER = -5,   /* the timer is pending in a different wheel */
	TW_EREENTER = -6, /* advance/destroy called from inside a callback */
	TW_ECORRUPT = -7, /* tw_wheel_check found a broken invariant */
	TW_EOVERFLOW = -8,/* now + delay does not fit in an int64_t */
	TW_ESHUTDOWN = -9,/* the service is shut down */
	TW_EAGAIN = -10,  /* a thread could not be started */
	TW_EDEADLK = -11  /* cancel_sync from the timer's own callback */
};

/* A short constant English description of a TW_E* code (never NULL). */
const char *tw_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
