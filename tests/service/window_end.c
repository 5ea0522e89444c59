/* SPDX-License-Identifier: MIT */
/*
 * A window ends where service.h says, under one tick after latest:
 * tw_service_add_range()'s window, as service.h states it: a timer runs
 * no earlier than earliest and no later than the first tick at or after
 * latest (under one tick after it, as a timer added at latest), and
 * tw_service_next_expiry() is never later than that either.
 *
 * A manual service on a clock only the test moves, driven as an event
 * loop drives one: ask next_expiry, move the clock there, poll, until
 * the timer ran. Windows at random (seeded), on ticks from 1 to 1000,
 * on both sides of 0, and one whose end falls inside a tick
 * ([520291, 607583] at a tick of 1000 runs at 608000, 417 after latest,
 * which a promise of "no later than latest" would break), and one wider
 * than INT64_MAX.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "virtual_clock.h"

static int64_t ran_at;
static int runs;

static void record_run(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	ran_at = atomic_load(&virtual_now);
	runs++;
}

/* The first multiple of tick at or after x (x >= 0 or not). */
static int64_t tick_ceil(int64_t x, int64_t tick)
{
	int64_t q = x / tick;

	if (q * tick < x)
		q++;
	return q * tick;
}

/* A manual service of that tick on the virtual clock, set to start, and
 * no run recorded yet (NULL if it cannot be made: a failed check). */
static struct tw_service *manual_at(int64_t tick, int64_t start)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;

	cfg.tick = tick;
	cfg.manual = true;
	cfg.clock.now = virtual_clock;
	set_clock(start);
	ran_at = INT64_MIN;
	runs = 0;
	if (tw_service_create(&svc, &cfg) != TW_OK) {
		CHECK(!"create");
		return NULL;
	}
	return svc;
}

/* Add [earliest, latest] at clock `start`, poll as an event loop would
 * until it ran, and check each answer against the header's bound. */
static void one_window(int64_t tick, int64_t start, int64_t earliest,
		       int64_t latest)
{
	struct tw_service *svc = manual_at(tick, start);
	struct tw_service_timer t;
	int64_t bound = tick_ceil(latest, tick);
	int steps = 0;

	if (!svc)
		return;
	tw_service_timer_init(&t, record_run);
	CHECK_EQ(tw_service_add_range(svc, &t, earliest, latest), TW_OK);
	while (runs == 0 && steps++ < 1000) {
		int64_t when;

		if (!tw_service_next_expiry(svc, &when)) {
			CHECK(!"nothing pending before the timer ran");
			break;
		}
		if (when > bound) {
			fprintf(stderr, "tick %" PRId64 " [%" PRId64 ", %" PRId64
				"]: next_expiry %" PRId64 " after %" PRId64 "\n",
				tick, earliest, latest, when, bound);
			CHECK(when <= bound);
		}
		if (when > atomic_load(&virtual_now))
			set_clock(when);
		CHECK(tw_service_poll(svc) >= 0);
	}
	CHECK_EQ(runs, 1);
	if (ran_at < earliest || ran_at > bound || ran_at - latest >= tick) {
		fprintf(stderr, "tick %" PRId64 " [%" PRId64 ", %" PRId64
			"]: ran at %" PRId64 "\n", tick, earliest, latest, ran_at);
		CHECK(ran_at >= earliest);
		CHECK(ran_at <= bound);
	}
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

static void test_window_end_inside_a_tick(void)
{
	one_window(1000, 0, 520291, 607583);
	CHECK_EQ(ran_at, 608000); /* after latest, but under one tick */
}

static void test_windows_end_under_one_tick_after_latest(void)
{
	static const int64_t ticks[] = { 1, 3, 10, 64, 1000 };
	uint64_t seed = 0x5eedf6;

	for (int i = 0; i < 4000; i++) {
		int64_t tick = ticks[test_rand(&seed) % 5];
		int64_t start = (int64_t)(test_rand(&seed) % 200000) - 100000;
		int64_t earliest = start + (int64_t)(test_rand(&seed) % 50000);
		int64_t width = (int64_t)(test_rand(&seed) %
					  (test_rand(&seed) % 2 ? 50 * tick : 100000));

		one_window(tick, start, earliest, earliest + width);
	}
}

/* A window wider than INT64_MAX (its ends on both sides of 0), of whole
 * ticks: it ends at latest, not at INT64_MAX. A timer pending after it
 * and rescheduled into it does not stay where it was: it runs inside the
 * window, and next_expiry is never after latest. (Tick 2^32, so that the
 * window is 2^31 ticks, within the 2^32 - 1 a window keeps.) */
static void test_a_window_wider_than_int64_max_ends_at_latest(void)
{
	const int64_t tick = INT64_C(1) << 32, start = -(INT64_C(1) << 62);
	const int64_t earliest = start + (INT64_C(1) << 40);
	const int64_t latest = (INT64_C(1) << 62) + (INT64_C(1) << 40);
	struct tw_service *svc = manual_at(tick, start);
	struct tw_service_timer t;
	int64_t when = INT64_MIN;

	if (!svc)
		return;
	tw_service_timer_init(&t, record_run);
	CHECK_EQ(tw_service_add(svc, &t, latest + (INT64_C(1) << 40)), TW_OK);
	CHECK_EQ(tw_service_reschedule_range(svc, &t, earliest, latest),
		 TW_SVC_STOPPED);
	CHECK(tw_service_next_expiry(svc, &when));
	CHECK(when <= latest);
	set_clock(latest);
	CHECK(tw_service_poll(svc) >= 0);
	CHECK_EQ(runs, 1);
	CHECK(ran_at >= earliest && ran_at <= latest);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

int main(void)
{
	RUN(test_window_end_inside_a_tick);
	RUN(test_a_window_wider_than_int64_max_ends_at_latest);
	RUN(test_windows_end_under_one_tick_after_latest);
	return check_report();
}
