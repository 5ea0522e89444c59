/* SPDX-License-Identifier: MIT */
/*
 * The duration helpers (TW_NS, TW_US, TW_MS, TW_S) give int64_t
 * nanoseconds, fractions kept, with no int overflow on the way; the
 * run-time version (tw_version, tw_version_string) is the one the
 * headers were built with.
 */
#include <string.h>

#include "check.h"

/* The duration helpers: int64_t nanoseconds, fractions kept, no int
 * overflow on the way (TW_S(3) computed in int would wrap). */
static void test_duration_helpers(void)
{
	int seconds = 3;

	CHECK(TW_NS(7) == 7);
	CHECK(TW_US(2) == 2000);
	CHECK(TW_MS(30) == 30000000);
	CHECK(TW_S(seconds) == 3000000000LL);
	CHECK(TW_S(1.5) == 1500000000LL);
	CHECK(TW_MS(0.25) == 250000);
	CHECK(TW_S(9223372036LL) == 9223372036000000000LL);
	CHECK(sizeof(TW_MS(1)) == sizeof(int64_t));
}

/* The run-time version is the one the headers were built with here. */
static void test_version(void)
{
	char expect[32];

	CHECK_EQ(tw_version(), TW_VERSION_HEX);
	CHECK(strcmp(tw_version_string(), TW_VERSION_STRING) == 0);
	snprintf(expect, sizeof(expect), "%d.%d.%d", TW_VERSION_MAJOR,
		 TW_VERSION_MINOR, TW_VERSION_PATCH);
	CHECK(strcmp(tw_version_string(), expect) == 0);
	CHECK_EQ(tw_version() >> 16, TW_VERSION_MAJOR);
}

int main(void)
{
	RUN(test_version);
	RUN(test_duration_helpers);
	return check_report();
}
