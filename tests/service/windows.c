/* SPDX-License-Identifier: MIT */
/*
 * A service timer with a window (tw_service_add_range,
 * tw_service_reschedule_range) runs inside it, on a manual service and a
 * virtual clock, stepped or in one jump; overlapping windows fire
 * together, a reschedule to a window that holds the bucket stays, a
 * periodic timer keeps its window; bad windows are refused, and windows
 * at the ends of time work.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>

#include "service_jobs.h"

#define NWIN 240

static uint64_t win_rng = 0x9E3779B97F4A7C15ULL;

static int64_t win_random(int64_t bound)
{
	return test_rand_below(&win_rng, bound);
}

/* NWIN fresh jobs added with random windows [e, l] from 1001 (a fifth of
 * them exact, the rest up to 4000 units wide: up to five level-1 buckets
 * of the manual service's wheel, 80 units each). */
static void add_windows(struct tw_service *svc, struct job *j, int64_t *e,
			int64_t *l)
{
	for (int i = 0; i < NWIN; i++) {
		job_init(&j[i], i, 0);
		e[i] = 1001 + win_random(6000);
		l[i] = e[i] + (i % 5 ? win_random(4000) : 0);
		CHECK_EQ(tw_service_add_range(svc, &j[i].t, e[i], l[i]), TW_OK);
	}
}

/* Stepped, one clock unit per poll: every job runs once, never before its
 * window's start, never a tick (10) or more after its end; a reschedule
 * half-way moves the ones not run yet to new windows, which hold instead. */
static void test_windows_run_inside_them_stepped(void)
{
	struct tw_service *svc = manual_service(0);
	static struct job j[NWIN];
	int64_t e[NWIN], l[NWIN];
	int resched = 0;

	add_windows(svc, j, e, l);
	for (int64_t now = 1000; now <= 16000; now++) {
		set_clock(now);
		CHECK(tw_service_poll(svc) >= 0);
		if (now == 3500) {
			/* Those still pending move to windows after 4000. */
			for (int i = 0; i < NWIN; i++) {
				int64_t ne, nl;

				if (atomic_load(&j[i].runs))
					continue;
				ne = 4000 + win_random(5000);
				nl = ne + win_random(3000);
				CHECK_EQ(tw_service_reschedule_range(svc, &j[i].t, ne, nl),
					 TW_SVC_STOPPED);
				e[i] = ne;
				l[i] = nl;
				resched++;
			}
		}
	}
	CHECK(resched > NWIN / 4); /* the second half of the test did happen */
	for (int i = 0; i < NWIN; i++) {
		CHECK_EQ(atomic_load(&j[i].runs), 1);
		CHECK(j[i].ran_at >= e[i]);
		CHECK(j[i].ran_at < l[i] + 10);
	}
	CHECK_EQ(tw_service_count(svc), 0);
	tw_service_destroy(svc);
}

/* One jump over many buckets: a job whose window ended before the jump
 * has run, one whose window starts after it has not; then the rest run
 * at the next jump, each once. */
static void test_windows_in_one_jump(void)
{
	struct tw_service *svc = manual_service(0);
	static struct job j[NWIN];
	int64_t e[NWIN], l[NWIN];
	int ran = 0;

	add_windows(svc, j, e, l);
	set_clock(5000);
	CHECK(tw_service_poll(svc) >= 0);
	for (int i = 0; i < NWIN; i++) {
		int runs = atomic_load(&j[i].runs);

		if (l[i] < 5000)
			CHECK_EQ(runs, 1);
		if (e[i] > 5000)
			CHECK_EQ(runs, 0);
		if (runs)
			CHECK(e[i] <= 5000);
		ran += runs;
	}
	CHECK(ran > 0 && ran < NWIN);
	set_clock(20000);
	CHECK(tw_service_poll(svc) >= 0);
	for (int i = 0; i < NWIN; i++)
		CHECK_EQ(atomic_load(&j[i].runs), 1);
	tw_service_destroy(svc);
}

/* Overlapping windows fire in one poll (one wake-up of a reaper): 30
 * jobs due from 1100 to 1129, each with a window to 1700, run together at
 * the one pop of a coarse bucket inside all of them; exact, they run in 4
 * (at 1100, 1110, 1120 and 1130: never early, under a tick late). */
static void test_overlapping_windows_fire_together(void)
{
	for (int windowed = 0; windowed < 2; windowed++) {
		struct tw_service *svc = manual_service(0);
		struct job j[30];
		int polls_that_ran = 0;

		for (int i = 0; i < 30; i++) {
			job_init(&j[i], i, 0);
			CHECK_EQ(tw_service_add_range(svc, &j[i].t, 1100 + i,
						      windowed ? 1700 : 1100 + i),
				 TW_OK);
		}
		for (int64_t now = 1000; now <= 1800; now++) {
			set_clock(now);
			polls_that_ran += tw_service_poll(svc) > 0;
		}
		for (int i = 0; i < 30; i++) {
			CHECK_EQ(atomic_load(&j[i].runs), 1);
			CHECK(j[i].ran_at >= 1100 + i);
		}
		CHECK_EQ(polls_that_ran, windowed ? 1 : 4);
		for (int i = 1; windowed && i < 30; i++)
			CHECK_EQ(j[i].ran_at, j[0].ran_at);
		tw_service_destroy(svc);
	}
}

/* A reschedule to a window that still holds the time the timer's bucket
 * fires at leaves it there -- an exact timer (1100, pushed to [1050,
 * 1700]: re-aligned in its bucket, it runs inside the window, once) and a
 * windowed one whose window's start has passed (pushed at 1200 to [1150,
 * 1700]: it runs at its bucket's pop, not at once). */
static void test_reschedule_to_a_window_that_holds_the_bucket_stays(void)
{
	for (int windowed = 0; windowed < 2; windowed++) {
		struct tw_service *svc = manual_service(0);
		struct job a;

		job_init(&a, 1, 0);
		if (windowed)
			CHECK_EQ(tw_service_add_range(svc, &a.t, 1100, 1700), TW_OK);
		else
			CHECK_EQ(tw_service_add(svc, &a.t, 1100), TW_OK);
		CHECK_EQ(tw_service_poll(svc), 0); /* placed */
		if (windowed) {
			set_clock(1200);
			CHECK_EQ(tw_service_poll(svc), 0); /* its bucket pops later */
		}
		CHECK_EQ(tw_service_reschedule_range(svc, &a.t, windowed ? 1150 : 1050,
						     1700),
			 TW_SVC_STOPPED);
		for (int64_t now = tw_service_now(svc); now <= 1800; now++) {
			set_clock(now);
			CHECK(tw_service_poll(svc) >= 0);
		}
		CHECK_EQ(atomic_load(&a.runs), 1);
		if (windowed)
			CHECK(a.ran_at > 1200 && a.ran_at <= 1700); /* at the pop */
		else
			CHECK(a.ran_at >= 1050 && a.ran_at <= 1700);
		tw_service_destroy(svc);
	}
}

/* A periodic timer keeps its window: every run k in [1100 + 1000 k,
 * 1400 + 1000 k + a tick), due times without drift. */
static void test_periodic_keeps_its_window(void)
{
	struct tw_service *svc = manual_service(0);
	struct job p;
	int64_t last = -1;
	int runs = 0;

	job_init(&p, 1, 1000);
	CHECK_EQ(tw_service_add_range(svc, &p.t, 1100, 1400), TW_OK);
	for (int64_t now = 1000; now <= 5500; now++) {
		set_clock(now);
		tw_service_poll(svc);
		if (atomic_load(&p.runs) > runs) {
			runs = atomic_load(&p.runs);
			CHECK(p.ran_at >= 1100 + 1000 * (runs - 1));
			CHECK(p.ran_at < 1410 + 1000 * (runs - 1));
			CHECK(p.ran_at != last);
			last = p.ran_at;
		}
	}
	CHECK_EQ(runs, 5);
	CHECK_EQ(tw_service_cancel(svc, &p.t), TW_SVC_STOPPED);
	tw_service_destroy(svc);
}

static void __attribute__((format(printf, 1, 2))) fail_at(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	CHECK(!"a periodic window's run or next_expiry off its grid");
}

/* A periodic timer with a window stays on its grid: run k inside
 * [due0 + k period, due0 + k period + the window in whole ticks], its end
 * under one tick late; and after every poll tw_service_next_expiry() is
 * at or before the pending window's end rounded up to its tick. Ticks of
 * 1 and 10, periods of 1 to 5000 ticks (some with a part of a tick),
 * windows of none, half, one and three periods; the clock moves one unit
 * per poll. */
static void test_periodic_windows_stay_on_their_grid(void)
{
	static const int64_t ticks[] = { 1, 10 };
	static const int64_t periods[] = { 1, 2, 3, 7, 32, 33, 100, 1000, 5000 };

	for (unsigned ti = 0; ti < 2; ti++) {
		for (unsigned pi = 0; pi < sizeof(periods) / sizeof(periods[0]); pi++) {
			for (int wi = 0; wi < 4; wi++) {
				int64_t tick = ticks[ti];
				int64_t period = periods[pi] * tick + (pi % 3 == 1 ? tick / 2 : 0);
				int64_t window = wi == 0 ? 0 : wi == 1 ? period / 2
						 : wi == 2 ? period : 3 * period;
				int64_t width = window / tick * tick; /* whole ticks */
				int64_t due0 = 1006 * tick + (ti ? 6 : 0);
				struct tw_service_config cfg = { 0 };
				struct tw_service *svc = NULL;
				struct job p;
				int runs = 0;

				cfg.tick = tick;
				cfg.wheel_size = 8;
				cfg.manual = true;
				cfg.clock.now = virtual_clock;
				set_clock(1000 * tick);
				CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
				job_init(&p, 1, period);
				CHECK_EQ(tw_service_add_range(svc, &p.t, due0, due0 + window), TW_OK);
				for (int64_t now = 1000 * tick; runs < 12; now++) {
					int64_t due = due0 + runs * period, when = 0;

					set_clock(now);
					CHECK(tw_service_poll(svc) >= 0);
					if (atomic_load(&p.runs) > runs) {
						runs = atomic_load(&p.runs);
						if (!(p.ran_at >= due && p.ran_at < due + width + tick))
							fail_at("tick %lld period %lld window %lld: run %d "
								"due %lld ran at %lld\n", (long long)tick,
								(long long)period, (long long)window, runs,
								(long long)due, (long long)p.ran_at);
						due += period;
					}
					/* The next run's window ends at due + width. */
					CHECK(tw_service_next_expiry(svc, &when));
					if (!(when <= (due + width + tick - 1) / tick * tick))
						fail_at("tick %lld period %lld window %lld: "
							"next_expiry %lld after the window [%lld, %lld]\n",
							(long long)tick, (long long)period, (long long)window,
							(long long)when, (long long)due, (long long)(due + width));
					if (check_failures)
						break;
				}
				CHECK_EQ(tw_service_cancel(svc, &p.t), TW_SVC_STOPPED);
				tw_service_destroy(svc);
			}
		}
	}
}

/* Bad windows change nothing; a kafka-mode service refuses windows but
 * takes earliest == latest as tw_service_add. */
static void test_bad_windows(void)
{
	struct tw_service_config cfg = { .tick = 10, .wheel_size = 8, .manual = true,
					 .mode = TW_MODE_KAFKA };
	struct tw_service *svc = manual_service(0), *kafka = NULL;
	struct job a, b;

	job_init(&a, 1, 0);
	job_init(&b, 2, 0);
	CHECK_EQ(tw_service_add_range(NULL, &a.t, 1100, 1200), TW_EINVAL);
	CHECK_EQ(tw_service_add_range(svc, NULL, 1100, 1200), TW_EINVAL);
	CHECK_EQ(tw_service_add_range(svc, &a.t, 1200, 1199), TW_EINVAL);
	CHECK(!tw_service_timer_pending(&a.t));
	CHECK_EQ(tw_service_add_range(svc, &a.t, INT64_MAX, INT64_MIN), TW_EINVAL);
	/* The widest window there is: accepted, and it never runs early. */
	CHECK_EQ(tw_service_add_range(svc, &b.t, 1300, INT64_MAX), TW_OK);
	CHECK_EQ(tw_service_add_range(svc, &a.t, 1500, 1500), TW_OK);
	CHECK_EQ(tw_service_reschedule_range(svc, &a.t, 1600, 1599), TW_EINVAL);
	CHECK_EQ(tw_service_reschedule_range(svc, &a.t, 1600, 1500), TW_EINVAL);
	set_clock(1299);
	CHECK_EQ(tw_service_poll(svc), 0);
	set_clock(1500);
	tw_service_poll(svc);
	CHECK_EQ(atomic_load(&a.runs), 1); /* at 1500: the bad reschedules changed nothing */
	CHECK_EQ(a.ran_at, 1500);
	CHECK_EQ(tw_service_cancel(svc, &b.t), atomic_load(&b.runs) ? TW_SVC_IDLE
								   : TW_SVC_STOPPED);
	CHECK(atomic_load(&b.runs) == 0 || b.ran_at >= 1300);
	tw_service_destroy(svc);

	cfg.clock.now = virtual_clock;
	set_clock(1000);
	CHECK_EQ(tw_service_create(&kafka, &cfg), TW_OK);
	job_init(&a, 1, 0);
	CHECK_EQ(tw_service_add_range(kafka, &a.t, 1100, 1200), TW_EINVAL);
	CHECK_EQ(tw_service_reschedule_range(kafka, &a.t, 1100, 1200), TW_EINVAL);
	CHECK(!tw_service_timer_pending(&a.t));
	CHECK_EQ(tw_service_add_range(kafka, &a.t, 1100, 1100), TW_OK);
	set_clock(1100);
	CHECK_EQ(tw_service_poll(kafka), 1);
	tw_service_destroy(kafka);
}

/* Windows at the ends of the clock: the widest window there is (2^64 - 1
 * units) on a service whose tick times it overflows, and a periodic
 * timer re-armed at INT64_MAX whose window would end past it; both are
 * taken, neither runs early. */
static void test_windows_at_the_ends_of_time(void)
{
	struct tw_service_config cfg = { .tick = (int64_t)1 << 40, .manual = true };
	struct tw_service *svc = NULL;
	struct job a, p;

	cfg.clock.now = virtual_clock;
	set_clock(1000);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	job_init(&a, 1, 0);
	CHECK_EQ(tw_service_add_range(svc, &a.t, INT64_MIN, INT64_MAX), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1); /* due long ago */
	tw_service_destroy(svc);

	svc = manual_service(0);
	job_init(&p, 2, INT64_MAX - 1000);
	CHECK_EQ(tw_service_add_range(svc, &p.t, 1100, 1400), TW_OK);
	for (int64_t now = 1000; now <= 1500; now++) {
		set_clock(now);
		tw_service_poll(svc);
	}
	CHECK_EQ(atomic_load(&p.runs), 1);
	CHECK(p.ran_at >= 1100 && p.ran_at < 1410);
	/* 1100 + period passes INT64_MAX: that run was its last. */
	CHECK(!tw_service_timer_pending(&p.t));
	set_clock(1000000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_cancel(svc, &p.t), TW_SVC_IDLE);
	tw_service_destroy(svc);
}

int main(void)
{
	RUN(test_windows_run_inside_them_stepped);
	RUN(test_windows_in_one_jump);
	RUN(test_overlapping_windows_fire_together);
	RUN(test_periodic_keeps_its_window);
	RUN(test_periodic_windows_stay_on_their_grid);
	RUN(test_reschedule_to_a_window_that_holds_the_bucket_stays);
	RUN(test_bad_windows);
	RUN(test_windows_at_the_ends_of_time);
	return check_report();
}
