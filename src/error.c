/* SPDX-License-Identifier: MIT */
/*
 * error.c — what every module shares and none owns: the text of each
 * result code (tw_strerror) and the library's version at run time.
 *
 * One switch over every value a call can return, error.h's errors and
 * service.h's cancel results alike, in a file of its own because the
 * codes are shared: TW_EOWNER comes from the wheel and the service,
 * TW_ESHUTDOWN from the service and the purgatory, so each text names
 * every layer that returns its code instead of living beside one of
 * them. A text must hold for every call that returns its value: 0 is
 * every call's success, a cancel's "nothing was pending" and a count of
 * none; 1 and 2 are the cancels' results and also counts; TW_ECORRUPT
 * comes from the wheel's check, drain and destroy and from the service's
 * shutdown and destroy, and names the mistake that causes it.
 * tests/library/error_texts.c checks that every code has a text of its
 * own and that each fits its calls.
 *
 * tw_version() and tw_version_string() say what the library was built
 * as, so a program can compare it with the TW_VERSION_HEX it was compiled
 * against (version.h).
 */
#include "timingwheel/error.h"
#include "timingwheel/service.h" /* the cancels' results */

const char *tw_strerror(int err)
{
	switch (err) {
	case TW_OK: /* also TW_SVC_IDLE, the wheel cancel's 0, a count of 0 */
		return "success";
	case TW_SVC_STOPPED: /* also the wheel cancel's 1, a count of 1 */
		return "stopped: it was pending and will not run (from a cancel; "
		       "from any other call, a count)";
	case TW_SVC_RUNNING: /* also a count of 2 */
		return "too late to stop: its callback was running (from a "
		       "cancel; from any other call, a count)";
	case TW_EINVAL:
		return "invalid argument";
	case TW_ENOMEM:
		return "out of memory";
	case TW_EBUSY:
		return "already pending (a timer) or watched (an operation)";
	case TW_ERANGE:
		return "clock would go backwards";
	case TW_EOWNER:
		return "timer belongs to another wheel or service";
	case TW_EREENTER:
		return "not allowed from inside a timer callback";
	case TW_ECORRUPT:
		return "corrupted: a timer was initialised or freed while still "
		       "pending (cancel it first; a service timer: "
		       "tw_service_timer_shutdown), or the wheel is not initialised";
	case TW_EOVERFLOW:
		return "due time overflows int64";
	case TW_ESHUTDOWN:
		return "service or purgatory is shut down, or the timer torn down "
		       "(tw_service_timer_shutdown)";
	case TW_EAGAIN:
		return "could not start a thread";
	case TW_EDEADLK:
		return "cancel_sync would close a cycle of waits";
	case TW_EDEADLK_STOPPED:
		return "cancel_sync would close a cycle of waits; its cancel "
		       "stopped an add, which will not run";
	default:
		return err > 0 ? "not an error (a count)" : "unknown error";
	}
}

unsigned tw_version(void)
{
	return TW_VERSION_HEX;
}

const char *tw_version_string(void)
{
	return TW_VERSION_STRING;
}
