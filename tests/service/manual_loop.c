/* SPDX-License-Identifier: MIT */
/*
 * An event loop that sleeps tw_service_timeout() and then polls misses
 * nothing and runs nothing early, on a manual service and a virtual
 * clock; a time the service has reached is due at once.
 */
#define _POSIX_C_SOURCE 200809L

#include "service_jobs.h"

/* ---- an event loop that sleeps tw_service_timeout() ----
 *
 * A manual service driven as an epoll loop drives it: at each wake-up the
 * loop adds, cancels and reschedules timers (exact, windowed, periodic),
 * asks tw_service_timeout() how long it may sleep, moves the virtual
 * clock by exactly that much (or, as an I/O event would, by less) and
 * polls. Every exact timer must run at its due time rounded up to the
 * tick, no earlier and no later, so a timeout that slept past a due tick
 * fails; a windowed one inside its window (under a tick past latest);
 * and no timer may be left overdue after a poll, nor the loop told to
 * sleep for ever while one is pending. The timers are spread over the
 * service's shards: the timeout must take the earliest of every shard's
 * wheel, and one that read a single shard would sleep past the others. */

#define LOOP_TIMERS 64
#define LOOP_PERIODIC 8 /* the first ones */
#define LOOP_TICK 10

struct loop_timer {
	union {
		struct tw_service_periodic p; /* p.timer is t */
		struct tw_service_timer t;
	};
	int64_t earliest, latest; /* the window of the add now pending */
	int64_t period;           /* 0: one-shot */
	bool armed;
	long runs;
};

static struct loop_timer loop_timers[LOOP_TIMERS];
static uint64_t loop_rng;
static long loop_runs;

static int64_t loop_random(int64_t bound)
{
	return test_rand_below(&loop_rng, bound);
}

static int64_t up_to_tick(int64_t x)
{
	return (x + LOOP_TICK - 1) / LOOP_TICK * LOOP_TICK; /* x > 0 here */
}

static void loop_fired(struct tw_service *svc, struct tw_service_timer *t)
{
	struct loop_timer *x = tw_container_of(t, struct loop_timer, t);
	int64_t now = tw_service_now(svc);

	CHECK(x->armed);
	CHECK(now >= x->earliest); /* never early */
	if (x->earliest == x->latest)
		CHECK_EQ(now, up_to_tick(x->earliest)); /* nor late */
	else
		CHECK(now < x->latest + LOOP_TICK);
	x->runs++;
	loop_runs++;
	if (x->period) {
		x->earliest += x->period;
		x->latest += x->period;
	} else {
		x->armed = false;
	}
}

/* A delay from one of three scales: the lowest level, a few levels up,
 * far (cascades). */
static int64_t loop_delay(void)
{
	static const int64_t scale[] = { 60, 3000, 400000 };

	return 1 + loop_random(scale[loop_random(3)]);
}

static void loop_op(struct tw_service *svc, int64_t now)
{
	int i = (int)loop_random(LOOP_TIMERS);
	struct loop_timer *x = &loop_timers[i];
	int64_t e = now + loop_delay();
	int64_t l = i < LOOP_PERIODIC || loop_random(3) ? e : e + loop_random(5000);

	if (x->armed && loop_random(2)) {
		CHECK_EQ(tw_service_cancel(svc, &x->t), TW_SVC_STOPPED);
		x->armed = false;
		return;
	}
	if (x->armed)
		CHECK_EQ(e == l ? tw_service_reschedule(svc, &x->t, e)
				: tw_service_reschedule_range(svc, &x->t, e, l),
			 TW_SVC_STOPPED);
	else
		CHECK_EQ(e == l ? tw_service_add(svc, &x->t, e)
				: tw_service_add_range(svc, &x->t, e, l),
			 0);
	x->earliest = e;
	x->latest = l;
	x->armed = true;
}

/* After a poll at now: nothing overdue is left. */
static void loop_nothing_overdue(int64_t now)
{
	for (int i = 0; i < LOOP_TIMERS; i++) {
		const struct loop_timer *x = &loop_timers[i];

		if (!x->armed)
			continue;
		if (x->earliest == x->latest)
			CHECK(up_to_tick(x->earliest) > now);
		else
			CHECK(x->latest + LOOP_TICK > now);
	}
}

static bool loop_any_armed(void)
{
	for (int i = 0; i < LOOP_TIMERS; i++)
		if (loop_timers[i].armed)
			return true;
	return false;
}

static void run_event_loop(uint64_t seed, uint32_t wheel_size)
{
	struct tw_service_config cfg = { .manual = true, .tick = LOOP_TICK,
					 .wheel_size = wheel_size };
	struct tw_service *svc;
	int64_t now = 1000, to;
	long sleeps = 0, polls = 0;
	int failures_before = check_failures;

	loop_rng = test_rand_seed(seed);
	loop_runs = 0;
	cfg.clock.now = virtual_clock;
	atomic_store(&virtual_now, now);
	CHECK_EQ(tw_service_create(&svc, &cfg), 0);
	for (int i = 0; i < LOOP_TIMERS; i++) {
		struct loop_timer *x = &loop_timers[i];

		memset(x, 0, sizeof(*x));
		if (i < LOOP_PERIODIC) {
			x->period = 1 + loop_random(700);
			tw_service_periodic_init(&x->p, loop_fired, x->period);
		} else {
			tw_service_timer_init(&x->t, loop_fired);
		}
	}
	for (int round = 0; round < 4000; round++) {
		for (int k = (int)loop_random(4); k > 0; k--)
			loop_op(svc, now);
		to = tw_service_timeout(svc, now);
		if (to < 0) {
			CHECK(!loop_any_armed()); /* never "sleep for ever" early */
			now += 1 + loop_random(1000); /* idle until an event */
		} else {
			/* Mostly the whole timeout; sometimes an I/O event
			 * wakes the loop before it. */
			now += loop_random(4) ? to : loop_random(to + 1);
			sleeps++;
		}
		atomic_store(&virtual_now, now);
		CHECK(tw_service_poll(svc) >= 0);
		polls++;
		loop_nothing_overdue(now);
	}
	/* Stop the periodic ones; the loop alone then runs the rest out. */
	for (int i = 0; i < LOOP_PERIODIC; i++)
		if (loop_timers[i].armed) {
			CHECK_EQ(tw_service_cancel(svc, &loop_timers[i].t),
				 TW_SVC_STOPPED);
			loop_timers[i].armed = false;
		}
	while ((to = tw_service_timeout(svc, now)) >= 0 && polls < 1000000) {
		now += to;
		atomic_store(&virtual_now, now);
		CHECK(tw_service_poll(svc) >= 0);
		polls++;
		loop_nothing_overdue(now);
	}
	CHECK(!loop_any_armed());
	CHECK(loop_runs > 100); /* the loop did run timers */
	CHECK(sleeps > 100);
	CHECK_EQ(tw_service_destroy(svc), 0);
	if (check_failures != failures_before)
		fprintf(stderr, "event loop: seed %llu, wheel size %u\n",
			(unsigned long long)seed, (unsigned)wheel_size);
}

/* A time the service has reached is due at once, whatever its tick: an
 * add, a reschedule or a window at or before the latest time a poll read
 * runs at the next poll, even one that reads the same time, and the
 * service's next expiry is that time; a time after it, in the same tick,
 * waits for the tick. (Exact mode's wheels count in ticks: 1003 and 1006
 * are both in the tick that ends at 1010, and only the first has been
 * reached at 1005.) */
static void test_a_time_the_service_reached_is_due_at_once(void)
{
	struct tw_service *svc = service(true, 0); /* tick 10, clock 1000 */
	struct job j[5];
	int64_t when = 0;

	for (int i = 0; i < 5; i++)
		job_init(&j[i], i, 0);
	set_clock(1005);
	CHECK_EQ(tw_service_poll(svc), 0); /* the service reads 1005 */
	CHECK_EQ(tw_service_add(svc, &j[0].t, 1003), TW_OK);
	CHECK_EQ(tw_service_add(svc, &j[1].t, 1005), TW_OK);
	CHECK_EQ(tw_service_add(svc, &j[2].t, 2000), TW_OK);
	CHECK_EQ(tw_service_reschedule(svc, &j[2].t, 1004), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_add_range(svc, &j[3].t, 1001, 1004), TW_OK);
	CHECK_EQ(tw_service_add(svc, &j[4].t, 1006), TW_OK);
	CHECK(tw_service_next_expiry(svc, &when));
	CHECK_EQ(when, 1005);
	CHECK_EQ(tw_service_timeout(svc, 1005), 0);
	CHECK_EQ(tw_service_poll(svc), 4); /* at 1005 still */
	for (int i = 0; i < 4; i++)
		CHECK_EQ(atomic_load(&j[i].runs), 1);
	CHECK_EQ(atomic_load(&j[4].runs), 0);
	CHECK(tw_service_next_expiry(svc, &when));
	CHECK_EQ(when, 1010);
	set_clock(1009);
	CHECK_EQ(tw_service_poll(svc), 0);
	set_clock(1010);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&j[4].runs), 1);
	tw_service_destroy(svc);
}

static void act_move_clock_to_115(struct tw_service *svc, struct job *self)
{
	(void)svc;
	(void)self;
	set_clock(115); /* the callback took 15 */
}

/* The same when the time was reached by a later shard of the poll: shard
 * 0 is advanced at 100, its callback moves the clock to 115, and shard 1
 * reads 115. A timer added to shard 0 due at 112 is due at once (the
 * service's time is 115), though shard 0's wheel was last advanced to
 * 100: it runs at the next poll, and the next expiry is 115 -- in both
 * modes, with a tick of 10 and of 1 (a wheel in the service's own time).
 * So is a window there whose earliest the service reached, added or
 * rescheduled (exact mode: kafka mode has no windows), where shard 0's
 * wheel, at 100, would file [105, 400] at a tick of its own inside it. */
static void a_later_shard_read(enum tw_mode mode, int64_t tick)
{
	struct tw_service_config cfg = { .tick = tick, .shards = 2, .manual = true,
					 .mode = mode, .clock.now = virtual_clock };
	struct tw_service *svc = NULL;
	struct job mover, late, win, moved;
	int64_t when = 0;
	int failures_before = check_failures;
	bool windows = mode == TW_MODE_EXACT;

	set_clock(100);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	job_init(&mover, 0, 0);
	job_init(&late, 1, 0);
	job_init(&win, 2, 0);
	job_init(&moved, 3, 0);
	mover.action = act_move_clock_to_115;
	CHECK_EQ(tw_service_add(svc, &mover.t, 100), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(tw_service_now(svc), 115);
	set_clock(114);
	CHECK_EQ(tw_service_poll(svc), TW_ERANGE); /* the service is at 115 */
	set_clock(115);
	CHECK_EQ(tw_service_add(svc, &late.t, 112), TW_OK); /* mover's shard */
	if (windows) {
		CHECK_EQ(tw_service_add_range(svc, &win.t, 105, 400), TW_OK);
		CHECK_EQ(tw_service_reschedule_range(svc, &moved.t, 105, 400),
			 TW_SVC_IDLE);
	}
	CHECK(tw_service_next_expiry(svc, &when));
	CHECK_EQ(when, 115);
	CHECK_EQ(tw_service_timeout(svc, 115), 0);
	CHECK_EQ(tw_service_poll(svc), windows ? 3 : 1);
	CHECK_EQ(atomic_load(&late.runs), 1);
	CHECK_EQ(late.ran_at, 115);
	if (windows) {
		CHECK_EQ(atomic_load(&win.runs), 1);
		CHECK_EQ(win.ran_at, 115);
		CHECK_EQ(atomic_load(&moved.runs), 1);
		CHECK_EQ(moved.ran_at, 115);
	}
	tw_service_destroy(svc);
	if (check_failures != failures_before)
		fprintf(stderr, "  in %s mode, tick %lld\n",
			mode == TW_MODE_KAFKA ? "kafka" : "exact", (long long)tick);
}

static void test_a_time_a_later_shard_read_is_due_at_once(void)
{
	a_later_shard_read(TW_MODE_EXACT, 10);
	a_later_shard_read(TW_MODE_EXACT, 1);
	a_later_shard_read(TW_MODE_KAFKA, 10);
	a_later_shard_read(TW_MODE_KAFKA, 1);
}

static void test_an_event_loop_sleeping_the_timeout_misses_nothing(void)
{
	int64_t when = 7;

	for (uint64_t seed = 1; seed <= 6; seed++)
		run_event_loop(seed, seed % 2 ? 8 : 64);
	CHECK_EQ(tw_service_timeout(NULL, 0), -1);
	CHECK(!tw_service_next_expiry(NULL, &when));
	CHECK_EQ(when, 7);
}

int main(void)
{
	RUN(test_a_time_the_service_reached_is_due_at_once);
	RUN(test_a_time_a_later_shard_read_is_due_at_once);
	RUN(test_an_event_loop_sleeping_the_timeout_misses_nothing);
	return check_report();
}
