/* SPDX-License-Identifier: MIT */
/*
 * What service.h promises of windows, periodic re-arms, tw_service_poll()
 * and tw_service_next_expiry(), checked against a model on manual
 * services and a virtual clock (seeded, the same on every run):
 *  - a window is kept in whole ticks (latest - earliest rounded down to
 *    a multiple of the tick, at most 2^32 - 1 ticks): its timer runs no
 *    earlier than earliest, and by the first tick at or after the
 *    window's end (a poll at that clock or later runs it);
 *  - a periodic timer keeps its window at each re-arm, on its grid: the
 *    run of period k in [due + k * period, that + the window]; a
 *    reschedule(_range) to D, from outside or from its own callback,
 *    starts a new grid at D;
 *  - after a poll, next_expiry is never later than every pending
 *    window's end rounded up to its tick (or the clock, when one is due
 *    already), and pending() agrees with the model;
 *  - windows wider than 2^32 ticks, at INT64_MAX and at INT64_MIN; a
 *    periodic timer whose next due time would pass INT64_MAX stops
 *    after that run;
 *  - a poll returns the number of callbacks it ran (no executors, no
 *    cancels);
 *  - callbacks that add, reschedule and cancel other timers in a poll
 *    that expires hundreds: each call's result is the model's, and no
 *    timer runs early or late.
 * Each randomized part stops at its first break and prints the seed,
 * the clock and the timer's last move.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <string.h>

#include "check.h"
#include "virtual_clock.h"

/* The first multiple of tick at or after x, INT64_MAX where none fits. */
static int64_t tick_ceil(int64_t x, int64_t tick)
{
	int64_t r = x % tick;

	if (r < 0)
		r += tick;
	if (r == 0)
		return x;
	return x > INT64_MAX - (tick - r) ? INT64_MAX : x + (tick - r);
}

/* Where the window [e, l] ends as the service keeps it: l - e rounded
 * down to whole ticks, at most 2^32 - 1 of them (never past l). */
static int64_t window_end(int64_t e, int64_t l, int64_t tick)
{
	uint64_t ticks = ((uint64_t)l - (uint64_t)e) / (uint64_t)tick;

	if (ticks > UINT32_MAX)
		ticks = UINT32_MAX;
	return (int64_t)((uint64_t)e + ticks * (uint64_t)tick);
}

/* The clock by which a poll must have run it. */
static int64_t run_by(int64_t e, int64_t l, int64_t tick)
{
	return tick_ceil(window_end(e, l, tick), tick);
}

static struct tw_service *manual(int64_t tick, int64_t start, unsigned shards,
				 uint32_t wheel_size)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;

	cfg.tick = tick;
	cfg.manual = true;
	cfg.shards = shards;
	cfg.wheel_size = wheel_size;
	cfg.clock.now = virtual_clock;
	set_clock(start);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	return svc;
}

static int64_t now(void)
{
	return atomic_load(&virtual_now);
}

/* A randomized part's first break: said once with its context, counted
 * as a failed CHECK; the part then stops. */
static int broke;
static char context[160];

static void broken(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void broken(const char *fmt, ...)
{
	va_list ap;

	if (broke++)
		return;
	check_failures++;
	fprintf(stderr, "%s, clock %" PRId64 ": ", context, now());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- periodic timers with windows, moved from outside and by their own
 * callbacks, the clock moved in five ways ---- */

#define NPER 48

struct per {
	struct tw_service_periodic p;
	int id;
	int64_t period;
	bool pending, moves_itself;
	int64_t due, end, by;  /* the model's window and the clock to run by */
	long made_in;          /* the poll it must be run by, if due */
	long runs;
	char last[120];
};

static struct per per[NPER];
static struct {
	int64_t tick;
	uint64_t rng;
	long poll;
	bool in_poll;
	long ran_in_poll;
} pw;

static int64_t pw_rand(int64_t bound)
{
	return bound > 0 ? test_rand_below(&pw.rng, bound) : 0;
}

static void pw_set(struct per *m, int64_t e, int64_t l, long made_in)
{
	m->pending = true;
	m->due = e;
	m->end = window_end(e, l, pw.tick);
	m->by = tick_ceil(m->end, pw.tick);
	m->made_in = made_in;
}

/* No window, half a period, a period, three, up to four, up to 3 ticks. */
static int64_t pw_width(const struct per *m)
{
	switch (pw_rand(6)) {
	case 0: return 0;
	case 1: return m->period / 2;
	case 2: return m->period;
	case 3: return 3 * m->period;
	case 4: return pw_rand(4 * m->period + 1);
	default: return pw_rand(3 * pw.tick + 1);
	}
}

static void pw_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct per *m = tw_container_of(t, struct per, p.timer);
	int64_t c = now();

	pw.ran_in_poll++;
	if (!pw.in_poll || !m->pending) {
		broken("timer %d ran %s; last: %s", m->id,
		       pw.in_poll ? "with nothing pending" : "outside a poll", m->last);
		return;
	}
	if (c < m->due)
		broken("timer %d ran early: window [%" PRId64 ", %" PRId64 "]; last: %s",
		       m->id, m->due, m->end, m->last);
	m->runs++;
	if (m->moves_itself && pw_rand(2)) {
		/* A new grid from its own callback, due already or not. */
		int64_t e = c + pw_rand(4 * m->period) - m->period;
		int64_t w = pw_width(m);
		int rc = tw_service_reschedule_range(svc, t, e, e + w);

		if (rc != TW_SVC_RUNNING)
			broken("timer %d: reschedule_range from its callback: %d", m->id, rc);
		pw_set(m, e, e + w, pw.poll + 1);
		snprintf(m->last, sizeof(m->last), "its callback at %" PRId64
			 " moved it to [%" PRId64 ", %" PRId64 "]", c, e, e + w);
	} else {
		/* The re-arm: the next period on the grid, the same window. */
		int64_t w = m->end - m->due;

		pw_set(m, m->due + m->period, m->due + m->period + w, pw.poll + 1);
		snprintf(m->last, sizeof(m->last), "ran at %" PRId64 ", re-armed to [%"
			 PRId64 ", %" PRId64 "]", c, m->due, m->end);
	}
}

/* Between polls, one timer moved from outside: reschedule, cancel and
 * add_range, or reschedule_range, to a time before or after the clock. */
static void pw_move(struct tw_service *svc)
{
	struct per *m = &per[pw_rand(NPER)];
	int kind = (int)pw_rand(4);
	int64_t e = now() + pw_rand(3 * m->period + 1) - (kind == 3 ? m->period : 0);
	int64_t w = kind == 0 ? 0 : pw_width(m);
	int want = m->pending ? TW_SVC_STOPPED : TW_SVC_IDLE;
	int rc;

	if (kind == 0) {
		rc = tw_service_reschedule(svc, &m->p.timer, e);
	} else if (kind == 1) {
		rc = tw_service_cancel(svc, &m->p.timer);
		if (tw_service_add_range(svc, &m->p.timer, e, e + w) != TW_OK)
			broken("timer %d: add_range after its cancel failed", m->id);
	} else {
		rc = tw_service_reschedule_range(svc, &m->p.timer, e, e + w);
	}
	if (rc != want)
		broken("timer %d: move %d returned %d, not %d; last: %s", m->id, kind,
		       rc, want, m->last);
	pw_set(m, e, e + w, pw.poll);
	snprintf(m->last, sizeof(m->last), "moved (%d) at %" PRId64 " to [%" PRId64
		 ", %" PRId64 "]", kind, now(), e, e + w);
}

/* The clock's moves: one unit (from 2 before next_expiry, so that the
 * polls walk every unit around the due times), part of a tick, to
 * next_expiry, a jump of up to 200 ticks; mode 0 mixes them. */
static int64_t pw_next_clock(struct tw_service *svc, int mode)
{
	int64_t c = now(), when;

	switch (mode ? mode : 1 + (int)pw_rand(4)) {
	case 1: return tw_service_next_expiry(svc, &when) && when - 2 > c ? when - 2 : c + 1;
	case 2: return c + pw_rand(pw.tick + 1);
	case 3: return tw_service_next_expiry(svc, &when) && when > c ? when : c + 1;
	default: return c + pw_rand(200 * pw.tick);
	}
}

/* After a poll at clock c: every window made before it and due by c has
 * run; the model and the service agree on what is pending; next_expiry
 * comes no later than the first window's end. */
static void pw_after_poll(struct tw_service *svc, int64_t c)
{
	int64_t first = INT64_MAX, when = 0;
	struct per *who = NULL;

	for (int i = 0; i < NPER; i++) {
		struct per *m = &per[i];

		if (!m->pending)
			continue;
		if (m->made_in <= pw.poll && c >= m->by)
			broken("timer %d late: window [%" PRId64 ", %" PRId64 "] to run by %"
			       PRId64 " still pending; last: %s", i, m->due, m->end, m->by, m->last);
		if (!tw_service_timer_pending(&m->p.timer))
			broken("timer %d: pending in the model, not in the service; last: %s",
			       i, m->last);
		if (m->by < first) {
			first = m->by;
			who = m;
		}
	}
	if (who && (!tw_service_next_expiry(svc, &when) || when > (first > c ? first : c)))
		broken("next_expiry %" PRId64 " after timer %d's window [%" PRId64 ", %"
		       PRId64 "] (to run by %" PRId64 "); last: %s", when, who->id, who->due,
		       who->end, who->by, who->last);
}

static const int64_t pw_periods[] = { 1, 2, 3, 7, 32, 33, 100, 1000, 5000 };

static void periodic_windows(uint64_t seed, int64_t tick, int mode, long polls)
{
	struct tw_service *svc = manual(tick, 1000, 1, seed % 2 ? 0 : 8);
	long total = 0;

	memset(&pw, 0, sizeof(pw));
	pw.tick = tick;
	pw.rng = test_rand_seed(seed);
	broke = 0;
	snprintf(context, sizeof(context), "periodic windows: seed %" PRIu64
		 ", tick %" PRId64 ", mode %d", seed, tick, mode);
	for (int i = 0; i < NPER; i++) {
		struct per *m = &per[i];
		int64_t e, w;

		memset(m, 0, sizeof(*m));
		m->id = i;
		/* Every third row off the tick's grid. */
		m->period = pw_periods[i % 9] * tick + ((i / 9) % 3 == 2 ? pw_rand(tick) : 0);
		m->moves_itself = i % 3 == 1;
		tw_service_periodic_init(&m->p, pw_run, m->period);
		w = pw_width(m);
		e = 1005 + pw_rand(2 * m->period + 1);
		CHECK_EQ(tw_service_add_range(svc, &m->p.timer, e, e + w), TW_OK);
		pw_set(m, e, e + w, 0);
		snprintf(m->last, sizeof(m->last), "added [%" PRId64 ", %" PRId64 "]", e, e + w);
	}
	for (pw.poll = 0; pw.poll < polls && !broke; pw.poll++) {
		int64_t c, n;

		if (pw_rand(4) == 0)
			pw_move(svc);
		c = pw_next_clock(svc, mode);
		set_clock(c);
		pw.in_poll = true;
		pw.ran_in_poll = 0;
		n = tw_service_poll(svc);
		pw.in_poll = false;
		if (n != pw.ran_in_poll)
			broken("poll returned %" PRId64 ", ran %ld", n, pw.ran_in_poll);
		pw_after_poll(svc, c);
	}
	for (int i = 0; i < NPER; i++)
		total += per[i].runs;
	CHECK(total > NPER); /* they did run, and more than once */
	tw_service_destroy(svc);
}

static void test_periodic_windows_keep_their_promises(void)
{
	static const int64_t ticks[] = { 1, 7, 10, 1000 };

	for (uint64_t seed = 1; seed <= 3; seed++)
		for (int t = 0; t < 4; t++)
			for (int mode = 0; mode <= 4; mode++)
				periodic_windows(seed, ticks[t], mode, 3000);
}

/* ---- one periodic timer with a window ---- */

/* Its grid: each run in [due, due + span rounded up to a tick], span the
 * window kept in whole ticks; the last due time is the one whose next
 * would pass INT64_MAX. */
static struct {
	int64_t tick, period, span, due;
	long runs;
} grid;

static void grid_start(int64_t tick, int64_t period, int64_t e, int64_t l)
{
	grid.tick = tick;
	grid.period = period;
	grid.span = window_end(e, l, tick) - e;
	grid.due = e;
	grid.runs = 0;
	broke = 0;
	snprintf(context, sizeof(context), "tick %" PRId64 ", period %" PRId64
		 ", window [%" PRId64 ", %" PRId64 "]", tick, period, e, l);
}

static int64_t grid_by(void)
{
	return tick_ceil(grid.due > INT64_MAX - grid.span ? INT64_MAX : grid.due + grid.span,
			 grid.tick);
}

static void grid_run(struct tw_service *svc, struct tw_service_timer *t)
{
	int64_t c = now();

	(void)svc;
	(void)t;
	if (c < grid.due || c > grid_by())
		broken("run %ld at %" PRId64 " outside [%" PRId64 ", %" PRId64 "]",
		       grid.runs, c, grid.due, grid_by());
	grid.runs++;
	grid.due = grid.due > INT64_MAX - grid.period ? INT64_MAX : grid.due + grid.period;
}

/* The clock one unit a poll from just before first: every run on the
 * grid and in its window, none left pending past its window, and
 * next_expiry never after the window's end. */
static void one_periodic(int64_t tick, int64_t period, int64_t width,
			 int64_t first, long polls)
{
	struct tw_service *svc = manual(tick, first - 1, 1, 0);
	struct tw_service_periodic p;

	grid_start(tick, period, first, first + width);
	tw_service_periodic_init(&p, grid_run, period);
	CHECK_EQ(tw_service_add_range(svc, &p.timer, first, first + width), TW_OK);
	for (long i = 0; i < polls && !broke; i++) {
		int64_t c = now() + 1, when = INT64_MAX;

		set_clock(c);
		CHECK(tw_service_poll(svc) >= 0);
		if (c >= grid_by())
			broken("the window from %" PRId64 " still pending", grid.due);
		if (!tw_service_next_expiry(svc, &when) ||
		    when > (grid_by() > c ? grid_by() : c))
			broken("next_expiry %" PRId64 " after %" PRId64, when, grid_by());
	}
	CHECK(grid.runs >= polls / period - 1);
	tw_service_destroy(svc);
}

/* The smallest cases: a window of one unit on a tick of one, re-armed
 * every unit; a window as wide as the period, off the tick's grid (each
 * re-arm once slid to the window's end, and next_expiry named a time
 * past it); a window rounded down to two ticks; the same at a tick of
 * 1000. */
static void test_one_periodic_window(void)
{
	one_periodic(1, 1, 1, 1, 40);
	one_periodic(10, 30, 30, 1005, 400);
	one_periodic(7, 21, 20, 3, 400);
	one_periodic(1000, 5000, 5000, 1617, 40000);
}

/* ---- the edges: wide windows, the ends of time, the poll's count ---- */

static long nran;
static int64_t ran_at;

static void record(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	nran++;
	ran_at = now();
}

/* A window wider than 2^32 ticks is kept as 2^32 - 1: it runs by then
 * (rounded up), never before earliest, and next_expiry says so. */
static void test_windows_wider_than_2_32_ticks(void)
{
	static const int64_t ticks[] = { 1, 7, 1000 };
	static const int64_t widths[] = { 0xFFFFFFFFLL, 0x100000000LL, 0x100000001LL,
					  (int64_t)1 << 40 };

	for (int i = 0; i < 3; i++) {
		for (int j = 0; j < 4; j++) {
			int64_t tick = ticks[i], e = 1000 * tick, l = e + widths[j] * tick;
			int64_t by = run_by(e, l, tick), when = INT64_MAX;
			int64_t probes[] = { e - 1, e + (by - e) / 2, by - 1, by };
			struct tw_service *svc = manual(tick, 0, 1, 0);
			struct tw_service_timer t;

			CHECK_EQ(by, e + 0xFFFFFFFFLL * tick);
			nran = 0;
			tw_service_timer_init(&t, record);
			CHECK_EQ(tw_service_add_range(svc, &t, e, l), TW_OK);
			CHECK(tw_service_next_expiry(svc, &when) && when <= by);
			for (int k = 0; k < 4; k++) {
				set_clock(probes[k]);
				CHECK(tw_service_poll(svc) >= 0);
				CHECK(nran == 0 || ran_at >= e);
			}
			CHECK_EQ(nran, 1);
			tw_service_destroy(svc);
		}
	}
}

/* A periodic timer with such a window: every run in [due, due + 2^32 - 1
 * ticks], due += period, with the clock moved to next_expiry each time. */
static void test_periodic_windows_wider_than_2_32_ticks(void)
{
	static const int64_t rows[][3] = { /* tick, period, width in ticks */
		{ 1, 5, (int64_t)1 << 33 },
		{ 7, 35, 0x100000000LL },
		{ 1000, 3000, (int64_t)1 << 34 },
	};

	for (int i = 0; i < 3; i++) {
		struct tw_service *svc = manual(rows[i][0], 0, 1, 0);
		struct tw_service_periodic p;

		int64_t e = 100 * rows[i][0], l = e + rows[i][2] * rows[i][0];

		grid_start(rows[i][0], rows[i][1], e, l);
		CHECK_EQ(grid.span, 0xFFFFFFFFLL * grid.tick);
		tw_service_periodic_init(&p, grid_run, grid.period);
		CHECK_EQ(tw_service_add_range(svc, &p.timer, e, l), TW_OK);
		for (int step = 0; step < 50 && !broke; step++) {
			int64_t when = INT64_MAX;

			if (!tw_service_next_expiry(svc, &when) || when > grid_by()) {
				broken("next_expiry %" PRId64 " after %" PRId64, when, grid_by());
				break;
			}
			set_clock(when > now() ? when : now() + 1);
			CHECK(tw_service_poll(svc) >= 0);
		}
		CHECK(grid.runs > 0);
		tw_service_destroy(svc);
	}
}

/* The window [INT64_MAX - 50, INT64_MAX] runs once, not before its
 * start, by the clock's INT64_MAX. A periodic timer of 10 ticks near
 * INT64_MAX runs in each window until the one whose due + period passes
 * INT64_MAX, and is then not pending; the clock one unit a poll. */
static void test_windows_at_int64_max(void)
{
	static const int64_t ticks[] = { 1, 7, 1000 };

	for (int i = 0; i < 3; i++) {
		int64_t tick = ticks[i];
		struct tw_service *svc = manual(tick, INT64_MAX - 200, 1, 0);
		struct tw_service_timer t;

		nran = 0;
		tw_service_timer_init(&t, record);
		CHECK_EQ(tw_service_add_range(svc, &t, INT64_MAX - 50, INT64_MAX), TW_OK);
		for (int64_t c = INT64_MAX - 200;; c += c > INT64_MAX - 3 ? 1 : 3) {
			set_clock(c);
			CHECK(tw_service_poll(svc) >= 0);
			CHECK(nran == 0 || ran_at >= INT64_MAX - 50);
			if (c == INT64_MAX)
				break;
		}
		CHECK_EQ(nran, 1);
		tw_service_destroy(svc);

		for (int64_t width = 0; width <= 3; width += 3) {
			struct tw_service_periodic p;
			long want = 0;

			svc = manual(tick, INT64_MAX - 200 * tick, 1, 0);
			grid_start(tick, 10 * tick, INT64_MAX - 95 * tick,
				   INT64_MAX - (95 - width) * tick);
			for (int64_t d = grid.due;; d += grid.period) {
				want++;
				if (d > INT64_MAX - grid.period)
					break;
			}
			tw_service_periodic_init(&p, grid_run, grid.period);
			CHECK_EQ(tw_service_add_range(svc, &p.timer, grid.due,
						      grid.due + grid.span), TW_OK);
			for (int64_t c = INT64_MAX - 200 * tick;; c++) {
				set_clock(c);
				CHECK(tw_service_poll(svc) >= 0);
				if (c == INT64_MAX)
					break;
			}
			CHECK(tw_service_poll(svc) >= 0);
			CHECK_EQ(grid.runs, want);
			CHECK(!tw_service_timer_pending(&p.timer));
			tw_service_destroy(svc);
		}
	}
}

/* Windows just above INT64_MIN (negative clocks, ticks that floor
 * towards it): each runs once, in [earliest, its end rounded up]. */
struct low {
	struct tw_service_timer t;
	long runs;
	int64_t ran_at;
};

static void low_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct low *lo = tw_container_of(t, struct low, t);

	(void)svc;
	lo->runs++;
	lo->ran_at = now();
}

static void test_windows_at_int64_min(void)
{
	static const int64_t ticks[] = { 1, 7, 1000 };
	const int64_t base = INT64_MIN + 10;

	for (int i = 0; i < 3; i++) {
		struct tw_service *svc = manual(ticks[i], base, 1, 0);
		struct low lo[16];
		int64_t e[16], by[16];

		for (int k = 0; k < 16; k++) {
			memset(&lo[k], 0, sizeof(lo[k]));
			tw_service_timer_init(&lo[k].t, low_run);
			e[k] = base + 3 + k * 5;
			by[k] = run_by(e[k], e[k] + k * 3, ticks[i]);
			CHECK_EQ(tw_service_add_range(svc, &lo[k].t, e[k], e[k] + k * 3), TW_OK);
		}
		for (int64_t c = base; c <= by[15]; c++) {
			set_clock(c);
			CHECK(tw_service_poll(svc) >= 0);
			for (int k = 0; k < 16; k++)
				CHECK(lo[k].runs == 1 || c < by[k]);
		}
		for (int k = 0; k < 16; k++) {
			CHECK_EQ(lo[k].runs, 1);
			CHECK(lo[k].ran_at >= e[k] && lo[k].ran_at <= by[k]);
		}
		tw_service_destroy(svc);
	}
}

/* A poll returns how many callbacks it ran: 300 timers, half of them
 * periodic, with windows, the clock moved up to 3 ticks a poll. */
static long counted;

static void count_run(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	counted++;
}

static void test_poll_returns_what_it_ran(void)
{
	static const int64_t ticks[] = { 1, 7, 1000 };
	static struct tw_service_periodic p[300];

	for (int i = 0; i < 3; i++) {
		int64_t tick = ticks[i];
		struct tw_service *svc = manual(tick, 0, 1, 0);
		uint64_t rng = test_rand_seed(5);
		long total = 0;

		for (int k = 0; k < 300; k++) {
			int64_t e = test_rand_below(&rng, 100 * tick);

			if (k % 2)
				tw_service_periodic_init(&p[k], count_run,
							 (1 + test_rand_below(&rng, 50)) * tick);
			else
				tw_service_timer_init(&p[k].timer, count_run);
			CHECK_EQ(tw_service_add_range(svc, &p[k].timer, e,
						      e + test_rand_below(&rng, 20 * tick)), TW_OK);
		}
		for (int k = 0; k < 500; k++) {
			int64_t n;

			set_clock(now() + test_rand_below(&rng, 3 * tick));
			counted = 0;
			n = tw_service_poll(svc);
			CHECK_EQ(n, counted);
			total += counted;
		}
		CHECK(total > 300);
		tw_service_destroy(svc);
	}
}

/* ---- callbacks that move other timers in polls that expire hundreds
 * (more than a batch of 64): one shard, no executors, one-shot timers ---- */

#define NBUSY 512

struct busy {
	struct tw_service_timer t;
	int id;
	bool pending;
	int64_t e, l, by;
	long made_in;
	char last[96];
};

static struct busy busy[NBUSY];
static const char *const op_name[] = { "add", "add_range", "reschedule",
				       "reschedule_range", "cancel", "cancel_sync" };

/* An earliest before, at or after the clock; for the ranges, windows of
 * none to 300000 ticks. */
static void busy_window(int op, int64_t *e, int64_t *l)
{
	static const int64_t reach[] = { 3, 64, 5000, 600, 600 };
	static const int64_t width[] = { 1, 4, 64, 4096, 300000, 600 };
	int64_t w = 0;
	int r = (int)pw_rand(6);

	*e = r == 0 ? now() - pw_rand(50 * pw.tick) : now() + pw_rand(reach[r - 1] * pw.tick);
	if (op == 1 || op == 3) {
		r = (int)pw_rand(7);
		w = r == 0 ? 0 : r == 1 ? pw.tick : pw_rand(width[r - 1] * pw.tick);
	}
	*l = *e + w;
}

/* One call on m, its result checked against the model: an add is
 * TW_EBUSY while one is pending; a cancel or reschedule says STOPPED
 * for a pending add, RUNNING from the timer's own callback, else IDLE. */
static void busy_op(struct tw_service *svc, struct busy *m, bool own, long made_in)
{
	int op = (int)pw_rand(6), rc, want;
	int64_t e, l;

	if (pw.in_poll && op == 5 && !own)
		op = 4; /* a callback waits for no other timer */
	busy_window(op, &e, &l);
	switch (op) {
	case 0: rc = tw_service_add(svc, &m->t, e); break;
	case 1: rc = tw_service_add_range(svc, &m->t, e, l); break;
	case 2: rc = tw_service_reschedule(svc, &m->t, e); break;
	case 3: rc = tw_service_reschedule_range(svc, &m->t, e, l); break;
	case 4: rc = tw_service_cancel(svc, &m->t); break;
	default: rc = tw_service_cancel_sync(svc, &m->t); break;
	}
	if (op <= 1)
		want = m->pending ? TW_EBUSY : TW_OK;
	else
		want = m->pending ? TW_SVC_STOPPED : own ? TW_SVC_RUNNING : TW_SVC_IDLE;
	if (rc != want)
		broken("timer %d: %s returned %d, not %d; last: %s", m->id, op_name[op],
		       rc, want, m->last);
	if (op >= 2)
		m->pending = false; /* the add it had, if any, ended */
	if (op <= 1 ? rc == TW_OK : op <= 3) {
		m->pending = true;
		m->e = e;
		m->l = l;
		m->by = run_by(e, l, pw.tick);
		m->made_in = made_in;
	}
	snprintf(m->last, sizeof(m->last), "%s%s [%" PRId64 ", %" PRId64 "] at %"
		 PRId64, own ? "its callback's " : "", op_name[op], e, l, now());
}

static void busy_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct busy *m = tw_container_of(t, struct busy, t);

	if (!m->pending) {
		broken("timer %d ran with nothing pending; last: %s", m->id, m->last);
		return;
	}
	if (now() < m->e)
		broken("timer %d ran early, before %" PRId64 "; last: %s", m->id, m->e, m->last);
	m->pending = false;
	for (int k = (int)pw_rand(3); k > 0; k--) {
		int j = (int)pw_rand(NBUSY);

		busy_op(svc, &busy[j], j == m->id, pw.poll + 1);
	}
}

static void busy_polls(uint64_t seed, long polls)
{
	struct tw_service *svc = manual(7, 37000000, 1, 0);
	long full = 0;

	memset(&pw, 0, sizeof(pw));
	pw.tick = 7;
	pw.rng = test_rand_seed(seed);
	broke = 0;
	snprintf(context, sizeof(context), "busy polls: seed %" PRIu64, seed);
	for (int i = 0; i < NBUSY; i++) {
		memset(&busy[i], 0, sizeof(busy[i]));
		busy[i].id = i;
		tw_service_timer_init(&busy[i].t, busy_run);
		while (!busy[i].pending)
			busy_op(svc, &busy[i], false, 0);
	}
	for (pw.poll = 0; pw.poll < polls && !broke; pw.poll++) {
		int64_t c, n, first = INT64_MAX, when = INT64_MAX;

		for (int i = 0; i < NBUSY; i++)
			if (!busy[i].pending && pw_rand(2))
				busy_op(svc, &busy[i], false, pw.poll);
		c = now() + pw_rand(400 * pw.tick) + pw_rand(pw.tick);
		set_clock(c);
		pw.in_poll = true;
		n = tw_service_poll(svc);
		pw.in_poll = false;
		full += n > 64;
		for (int i = 0; i < NBUSY; i++) {
			struct busy *m = &busy[i];

			if (!m->pending)
				continue;
			if (m->made_in <= pw.poll && c >= m->by)
				broken("timer %d late: to run by %" PRId64 "; last: %s", i, m->by, m->last);
			if (!tw_service_timer_pending(&m->t))
				broken("timer %d: pending in the model only; last: %s", i, m->last);
			first = m->by < first ? m->by : first;
		}
		if (first < INT64_MAX &&
		    (!tw_service_next_expiry(svc, &when) || when > (first > c ? first : c)))
			broken("next_expiry %" PRId64 " after %" PRId64, when, first);
	}
	CHECK(full > polls / 2); /* the polls did fill their batches */
	tw_service_destroy(svc);
}

static void test_callbacks_move_others_in_full_polls(void)
{
	for (uint64_t seed = 1; seed <= 3; seed++)
		busy_polls(seed, 1000);
}

int main(void)
{
	RUN(test_periodic_windows_keep_their_promises);
	RUN(test_one_periodic_window);
	RUN(test_windows_wider_than_2_32_ticks);
	RUN(test_periodic_windows_wider_than_2_32_ticks);
	RUN(test_windows_at_int64_max);
	RUN(test_windows_at_int64_min);
	RUN(test_poll_returns_what_it_ran);
	RUN(test_callbacks_move_others_in_full_polls);
	return check_report();
}
