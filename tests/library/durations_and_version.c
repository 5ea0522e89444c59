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

/* A fraction is rounded to the nearest nanosecond, not truncated: most
 * decimal fractions are a hair under their value in binary (0.3 is
 * 0.29999999999999998...), so a truncated TW_MS(0.3) was 299,999 ns --
 * on i386's extended precision for two values in five of these, on
 * x86-64 for one in sixty. And an integer stays exact, and a constant
 * where it was one. */
enum { THIRTY_MS = TW_MS(30) };
_Static_assert(TW_S(2) == 2000000000LL, "an integer's duration is a constant");

static void test_fractions_round_to_the_nearest_nanosecond(void)
{
	volatile double tenth_ms, hundredth_s;
	long wrong = 0;

	for (int64_t k = -100000; k <= 100000; k++) {
		tenth_ms = (double)k / 10;
		hundredth_s = (double)k / 100;
		wrong += TW_MS(tenth_ms) != k * 100000;
		wrong += TW_S(hundredth_s) != k * 10000000;
		wrong += TW_US(tenth_ms) != k * 100;
	}
	CHECK_EQ(wrong, 0);
	CHECK_EQ(TW_MS(0.3), 300000);
	CHECK_EQ(TW_S(0.06), 60000000);
	CHECK_EQ(TW_MS(-4.1), -4100000);
	CHECK_EQ(TW_S(1.0000000004), 1000000000);
	CHECK_EQ(TW_S(1.0000000006), 1000000001);
	CHECK_EQ(THIRTY_MS, 30000000);
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
	RUN(test_fractions_round_to_the_nearest_nanosecond);
	return check_report();
}
