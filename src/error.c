/* SPDX-License-Identifier: MIT */
#include "timingwheel/error.h"
#include "timingwheel/service.h" /* the cancels' results */

const char *tw_strerror(int err)
{
	switch (err) {
	case TW_OK: /* also TW_SVC_IDLE and the wheel cancel's 0 */
		return "success (or: nothing to cancel)";
	case TW_SVC_STOPPED: /* and the wheel cancel's 1 */
		return "stopped: it was pending and will not run";
	case TW_SVC_RUNNING:
		return "too late to stop: its callback was running";
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
		return "wheel invariant broken";
	case TW_EOVERFLOW:
		return "due time overflows int64";
	case TW_ESHUTDOWN:
		return "service or purgatory is shut down";
	case TW_EAGAIN:
		return "could not start a thread";
	case TW_EDEADLK:
		return "cancel_sync would close a cycle of waits";
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
