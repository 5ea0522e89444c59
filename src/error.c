/* SPDX-License-Identifier: MIT */
#include "timingwheel/error.h"

const char *tw_strerror(int err)
{
	switch (err) {
	case TW_OK:
		return "success";
	case TW_EINVAL:
		return "invalid argument";
	case TW_ENOMEM:
		return "out of memory";
	case TW_EBUSY:
		return "timer is already pending";
	case TW_ERANGE:
		return "clock would go backwards";
	case TW_EOWNER:
		return "timer is pending in another wheel";
	case TW_EREENTER:
		return "not allowed from inside a timer callback";
	case TW_ECORRUPT:
		return "wheel invariant broken";
	case TW_EOVERFLOW:
		return "due time overflows int64";
	case TW_ESHUTDOWN:
		return "service is shut down";
	case TW_EAGAIN:
		return "could not start a thread";
	case TW_EDEADLK:
		return "would wait for its own callback";
	default:
		return "unknown error";
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
