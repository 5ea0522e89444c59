/* SPDX-License-Identifier: MIT */
/*
 * Randomized differential test: seeded random scenarios of add, cancel,
 * reschedule, advance and run-to-next-expiry, with callbacks that add,
 * cancel and reschedule other timers, checked against a reference model
 * that knows nothing of buckets, in both modes. The invariant checker runs
 * after every operation.
 *
 * The model is one line per rule. A timer filed under tick k (kafka:
 * floor(due / tick), exact: ceil(due / tick)) fires in the first advance(now)
 * with k <= floor(now / tick); one that was due when added (exact: due <=
 * now; kafka: the wheel says so, and k must be <= now's tick) fires in the
 * next advance. Within one advance the ready ones come first, in the order
 * they were added, then the rest in non-decreasing k -- except in
 * tw_wheel_advance_unordered(), half of the advances, where only the
 * ready ones must come first. In exact mode some adds and reschedules
 * are windows (tw_wheel_add_range): such a timer fires in no advance
 * whose limit is below ceil(earliest / tick), and in the first one whose
 * limit reaches ceil(latest / tick) at the latest; it is left out of the
 * order (it fires when its bucket pops, anywhere in its window).
 * In a third of the advances callbacks also ask the wheel to stop (as the
 * timer service does at a full batch, wheel/for_service.h): exact mode
 * stops part way, the wheel is checked whole, next_expiry says now, and
 * advances to the same time go on until it no longer stops; the partial
 * advances together must be the one advance of the model, in its order.
 * Kafka mode never stops. In a quarter of the exact-mode wheels the
 * advances leave the drains' shares owed (as a service's wheel with
 * executors does): calls come on the whole wheel, then the shares move,
 * and what they fire counts in that advance.
 *
 * usage: wheel_differential [OPS_PER_MODE [SEED]]  (default 600000, 1)
 */
#include <limits.h>
#include <string.h>

#include "check.h"
/* Unless the amalgamation, which holds it, is included before this
 * file (tests/packaging/amalgamation.sh says so). */
#ifndef TW_TEST_AFTER_AMALGAMATION
#include "wheel/for_service.h"
#endif

#define NTIMERS 192

struct mtimer {
	struct tw_timer timer;
	int id;
	bool pending;      /* the model's view */
	bool ready;        /* due when added: fires on the next advance */
	bool ready_now;    /* ready when the current advance started */
	uint64_t ready_seq;
	int64_t key;
	int64_t latest_key; /* windowed: fired by then; exact: == key */
	bool windowed;
	int action;        /* what its callback does: 0 none, 1..3 below */
};

static struct tw_wheel wheel;
static struct mtimer timers[NTIMERS];
static uint64_t rng_state;
static uint64_t seq;

/* Per advance. */
static int64_t cur_limit;
static bool in_advance;
static bool seen_non_ready;
static uint64_t last_ready_seq;
static int64_t last_key;
static int64_t fired_in_advance;
static bool unordered;     /* this advance is tw_wheel_advance_unordered */
static bool asks_stops;    /* its callbacks ask the wheel to stop */
static long stops;         /* advances that stopped part way, in all */
static long owed_drains;   /* advances that left the drains' shares owed */

static uint64_t rnd(void)
{
	return test_rand(&rng_state);
}

static int64_t rnd_range(int64_t n)
{
	return (int64_t)(rnd() % (uint64_t)n);
}

static int64_t key_of(int64_t due)
{
	int64_t tick = wheel.tick;
	int64_t q = due / tick, r = due % tick;

	if (wheel.mode == TW_MODE_KAFKA)
		return (r != 0 && due < 0) ? q - 1 : q;
	return (r != 0 && due > 0) ? q + 1 : q;
}

static int64_t limit_of(int64_t now)
{
	if (wheel.mode == TW_MODE_EXACT && now == INT64_MAX)
		return key_of(now);
	{
		int64_t q = now / wheel.tick, r = now % wheel.tick;

		return (r != 0 && now < 0) ? q - 1 : q;
	}
}

static int64_t sat_add(int64_t a, int64_t b)
{
	if (b > 0 && a > INT64_MAX - b)
		return INT64_MAX;
	if (b < 0 && a < INT64_MIN - b)
		return INT64_MIN;
	return a + b;
}

static int64_t random_due(void)
{
	int64_t now = tw_wheel_now(&wheel);
	int64_t tick = wheel.tick;

	switch (rnd_range(16)) {
	case 0:
		return sat_add(now, -rnd_range(5 * tick + 1)); /* past */
	case 1:
		return now; /* due now */
	case 2:
		return INT64_MAX - rnd_range(3);
	case 3:
		return sat_add(now, (int64_t)(rnd() >> (1 + rnd_range(62))));
	case 4:
	case 5:
		return sat_add(now, rnd_range(tick * 1000 + 1));
	default:
		return sat_add(now, rnd_range(tick * 40 + 1));
	}
}

/* A window's width: none, a few ticks, a share of a level, or huge. */
static int64_t random_width(void)
{
	int64_t tick = wheel.tick;

	switch (rnd_range(6)) {
	case 0:
		return 0;
	case 1:
		return rnd_range(3 * tick + 1);
	case 2:
		return rnd_range(tick * 100 + 1);
	case 3:
		return rnd_range(tick * 5000 + 1);
	case 4:
		return (int64_t)(rnd() >> (1 + rnd_range(62)));
	default:
		return rnd_range(tick * 40000 + 1);
	}
}

/* A window whose latest lies within two buckets of a level's reach (the
 * end of the range its buckets hold), holding none to a few of that
 * level's pops: where a window is filed in the level's last bucket, or in
 * none of it. *due gets earliest; returns the width. */
static int64_t window_near_a_reach(int64_t *due)
{
	struct tw_level_info li;
	unsigned level = 1 + (unsigned)rnd_range(tw_wheel_levels(&wheel));
	int64_t reach, latest;

	tw_wheel_level_info(&wheel, level, &li);
	if (li.unbounded || li.tick > INT64_MAX / 8)
		return 0;
	reach = sat_add(li.current_time, li.interval);
	latest = sat_add(reach, rnd_range(4 * li.tick + 1) - 2 * li.tick);
	*due = sat_add(latest, -rnd_range(3 * li.tick + 1));
	return latest - *due;
}

/* Model + wheel together: every change goes through these. */
static void model_add(struct mtimer *m, int64_t due, bool reschedule)
{
	unsigned level = 0; /* set by tw_timer_where(), checked */
	int rc;

	if (reschedule) {
		rc = tw_wheel_reschedule(&wheel, &m->timer, due);
		CHECK_EQ(rc, m->pending ? 1 : 0);
	} else {
		rc = tw_wheel_add(&wheel, &m->timer, due);
		CHECK_EQ(rc, m->pending ? TW_EBUSY : TW_OK);
		if (m->pending)
			return;
	}
	m->pending = true;
	m->key = key_of(due);
	m->latest_key = m->key;
	m->windowed = false;
	m->ready_now = false;
	CHECK_EQ(tw_timer_where(&wheel, &m->timer, &level, NULL), TW_OK);
	m->ready = level == TW_LEVEL_READY;
	if (wheel.mode == TW_MODE_EXACT)
		CHECK_EQ(m->ready, due <= tw_wheel_now(&wheel));
	else if (m->ready)
		CHECK(m->key <= limit_of(tw_wheel_now(&wheel)));
	m->ready_seq = seq++;
}

/* A window [due, due + width]; width 0 is a plain add. */
static void model_add_range(struct mtimer *m, int64_t due, int64_t width,
			    bool reschedule)
{
	int64_t latest = sat_add(due, width), kept;
	bool was_pending = m->pending;
	unsigned level = 0; /* set by tw_timer_where(), checked */
	int rc;

	if (reschedule) {
		rc = tw_wheel_reschedule_range(&wheel, &m->timer, due, latest);
		CHECK_EQ(rc, m->pending ? 1 : 0);
	} else {
		rc = tw_wheel_add_range(&wheel, &m->timer, due, latest);
		CHECK_EQ(rc, m->pending ? TW_EBUSY : TW_OK);
		if (m->pending)
			return;
	}
	kept = tw_timer_due(&m->timer);
	m->pending = true;
	m->ready_now = false;
	CHECK_EQ(tw_timer_where(&wheel, &m->timer, &level, NULL), TW_OK);
	m->ready = level == TW_LEVEL_READY;
	if (kept != due) {
		/* An exact timer whose tick is inside the new window stays,
		 * with its own due time, and a window that no coarse bucket
		 * fits is filed at its aligned tick: either fires there, as
		 * an exact one. */
		CHECK(!m->ready);
		CHECK(kept > due && key_of(kept) <= key_of(latest));
		m->key = key_of(kept);
		m->latest_key = m->key;
		m->windowed = false;
	} else {
		m->key = key_of(due);
		m->latest_key = key_of(latest);
		m->windowed = latest != due;
		/* Due already: ready, unless it stayed where it was, in a
		 * bucket that fires inside the new window. */
		if (m->ready)
			CHECK(due <= tw_wheel_now(&wheel));
		else if (due <= tw_wheel_now(&wheel))
			CHECK(reschedule && was_pending);
	}
	m->ready_seq = seq++;
}

static void model_cancel(struct mtimer *m)
{
	CHECK_EQ(tw_wheel_cancel(&wheel, &m->timer), m->pending ? 1 : 0);
	m->pending = false;
	CHECK(!tw_timer_pending(&m->timer));
}

static void on_fire(struct tw_wheel *w, struct tw_timer *t)
{
	struct mtimer *m = tw_container_of(t, struct mtimer, timer);
	struct mtimer *other = &timers[rnd_range(NTIMERS)];

	CHECK(in_advance);
	CHECK(w == &wheel);
	CHECK(m->pending);
	CHECK(!tw_timer_pending(t));
	/* Due in this advance, in order. */
	if (m->ready_now) {
		CHECK(!seen_non_ready);
		CHECK(m->ready_seq >= last_ready_seq);
		last_ready_seq = m->ready_seq;
	} else {
		CHECK(!m->ready);
		CHECK(m->key <= cur_limit); /* never before earliest */
		seen_non_ready = true;
		if (!m->windowed) {
			CHECK(unordered || m->key >= last_key);
			last_key = m->key;
		}
	}
	if (wheel.mode == TW_MODE_EXACT)
		CHECK(tw_timer_due(t) <= tw_wheel_now(w)); /* never early */
	m->pending = false;
	fired_in_advance++;
	if (asks_stops && rnd_range(4) == 0)
		tw__wheel_ask_stop(w);

	switch (m->action) {
	case 1:
		model_add(other, random_due(), true);
		break;
	case 2:
		model_cancel(other);
		break;
	case 3:
		model_add(m, sat_add(tw_wheel_now(w), rnd_range(3 * w->tick)), false);
		break;
	default:
		break;
	}
}

static int64_t model_count(void);

/* Up to two calls on the wheel between the parts of an advance, as
 * another thread of the service makes them between its batches or
 * before the drains' shares, each followed by the checker: an add, a
 * cancel or a windowed add, and with kinds 4 also a next_expiry. What
 * they make due waits for the next advance (ready), as a callback's
 * does. Whether any came. */
static bool calls_between(int64_t kinds)
{
	bool any = false;

	for (int k = (int)rnd_range(3); k > 0; k--) {
		struct mtimer *m = &timers[rnd_range(NTIMERS)];
		int64_t when = 0;

		any = true;
		switch (rnd_range(kinds)) {
		case 0:
			model_add(m, random_due(), m->pending);
			break;
		case 1:
			model_cancel(m);
			break;
		case 3:
			CHECK_EQ(tw_wheel_next_expiry(&wheel, &when),
				 model_count() > 0);
			break;
		default:
			model_add_range(m, random_due(), random_width(),
					m->pending);
			break;
		}
		CHECK_WHEEL(&wheel);
	}
	return any;
}

static void model_advance(int64_t now)
{
	int64_t rc, expected_min = 0, expected_max = 0;
	bool drained = false; /* handed back while stopped */
	bool touched = false; /* called between its parts */

	cur_limit = limit_of(now);
	for (int i = 0; i < NTIMERS; i++) {
		struct mtimer *m = &timers[i];

		m->ready_now = m->pending && m->ready;
		if (m->pending && (m->ready || m->latest_key <= cur_limit))
			expected_min++;
		if (m->pending && (m->ready || m->key <= cur_limit))
			expected_max++;
	}
	in_advance = true;
	seen_non_ready = false;
	last_ready_seq = 0;
	last_key = INT64_MIN;
	fired_in_advance = 0;
	unordered = rnd_range(2);
	asks_stops = rnd_range(3) == 0;
	rc = unordered ? tw_wheel_advance_unordered(&wheel, now)
		       : tw_wheel_advance(&wheel, now);
	while (tw__wheel_stop_end(&wheel)) {
		int64_t when = 0;

		CHECK(wheel.mode == TW_MODE_EXACT);
		stops++;
		in_advance = false;
		CHECK_WHEEL(&wheel);
		CHECK(tw_wheel_next_expiry(&wheel, &when));
		CHECK_EQ(when, tw_wheel_now(&wheel));
		if (rnd_range(64) == 0) {
			/* A drain of a stopped wheel hands back every pending
			 * timer, the rest of the firing bucket's too, and
			 * leaves a whole wheel that is not stopped. */
			CHECK_EQ(tw_wheel_drain(&wheel, NULL), model_count());
			for (int i = 0; i < NTIMERS; i++)
				timers[i].pending = false;
			CHECK(!tw__wheel_stopped(&wheel));
			CHECK_WHEEL(&wheel);
			drained = true;
			break;
		}
		/* Calls while stopped, as another thread of the service
		 * makes them between its batches: what they make due waits
		 * for the next advance (ready), as a callback's does. */
		touched |= calls_between(3);
		in_advance = true;
		rc += unordered ? tw_wheel_advance_unordered(&wheel, now)
				: tw_wheel_advance(&wheel, now);
	}
	if (tw__wheel_drains_owed(&wheel)) {
		/* The drains' shares left owed (a service's wheel with
		 * executors, for_service.h): the wheel is whole, calls come
		 * meanwhile from other threads, and what the shares fire
		 * counts in this advance. */
		owed_drains++;
		in_advance = false;
		CHECK_WHEEL(&wheel);
		touched |= calls_between(4);
		in_advance = true;
		rc += tw__wheel_run_drains(&wheel);
		CHECK(!tw__wheel_drains_owed(&wheel));
		CHECK_WHEEL(&wheel);
	}
	asks_stops = false;
	in_advance = false;
	CHECK_EQ(rc, fired_in_advance);
	/* Everything due fired (callbacks may have cancelled some first, and
	 * in kafka mode added some that were due too). */
	for (int i = 0; i < NTIMERS; i++) {
		struct mtimer *m = &timers[i];

		if (m->pending && m->ready_now)
			CHECK(!"a ready timer survived an advance");
		if (m->pending && !m->ready && m->latest_key <= cur_limit)
			CHECK(!"a due timer survived an advance");
	}
	/* Callbacks off and nothing called while stopped: the count is
	 * known. */
	if (!timers[0].action && !drained && !touched) {
		CHECK(fired_in_advance >= expected_min);
		CHECK(fired_in_advance <= expected_max);
	}
}

static int64_t model_count(void)
{
	int64_t n = 0;

	for (int i = 0; i < NTIMERS; i++)
		n += timers[i].pending;
	return n;
}

static long scenarios; /* run so far */

static void run_scenario(enum tw_mode mode, long ops, bool callbacks)
{
	static const int64_t ticks[] = { 1, 2, 3, 10, 1000 };
	static const uint32_t sizes[] = { 2, 3, 4, 8, 20, 64, 100, 256 };
	int64_t start;

	int64_t tick = ticks[rnd_range(5)];

	switch (rnd_range(6)) {
	case 0:
		start = 0;
		break;
	case 1:
		start = -(int64_t)(rnd() >> 2);
		break;
	case 2:
		start = INT64_MIN + rnd_range(1000);
		break;
	case 3:
		/* Near the end of time, any distance before it: windows and
		 * due times saturate at INT64_MAX there. */
		start = INT64_MAX - (int64_t)(rnd() >> (1 + rnd_range(63)));
		break;
	case 4:
		/* A few ticks either side of a power of two ticks before the
		 * end: every level's reach is one (exact mode's sizes are
		 * powers of two), so the last buckets a level can hold are
		 * near. */
		start = sat_add(tick << rnd_range(tick > 1 ? 53 : 63),
				rnd_range(64 * tick + 1) - 32 * tick);
		start = INT64_MAX - (start < 0 ? 0 : start);
		break;
	default:
		start = (int64_t)(rnd() >> 3);
		break;
	}
	CHECK_EQ(tw_wheel_init(&wheel, tick, sizes[rnd_range(8)], start, mode),
		 TW_OK);
	/* Every other wheel allows its callbacks' stops to cut a level-1
	 * bucket's fires short (a service's wheel); the others stop at the
	 * end of that bucket. Not drawn from rng: the scenarios stay what
	 * each seed made them. */
	if (scenarios % 2)
		tw__wheel_allow_stops(&wheel);
	/* Every other pair of them leaves the drains' shares for later, as a
	 * service's wheel with executors does. */
	if (scenarios++ % 4 >= 2)
		tw__wheel_defer_drains(&wheel, true);
	for (int i = 0; i < NTIMERS; i++) {
		memset(&timers[i], 0, sizeof(timers[i]));
		timers[i].id = i;
		tw_timer_init(&timers[i].timer, on_fire);
		timers[i].action = callbacks ? (int)rnd_range(4) : 0;
	}
	timers[0].action = callbacks ? 1 : 0;

	for (long op = 0; op < ops && !check_failures; op++) {
		struct mtimer *m = &timers[rnd_range(NTIMERS)];
		int64_t now = tw_wheel_now(&wheel), when;

		switch (rnd_range(10)) {
		case 0:
		case 1:
		case 2:
			if (mode == TW_MODE_EXACT && rnd_range(12) == 0) {
				int64_t due = random_due(), width;

				width = window_near_a_reach(&due);
				model_add_range(m, due, width, false);
			} else if (mode == TW_MODE_EXACT && rnd_range(4) == 0) {
				model_add_range(m, random_due(), random_width(), false);
			} else {
				model_add(m, random_due(), false);
			}
			break;
		case 3:
		case 4:
			model_cancel(m);
			break;
		case 5:
			if (mode == TW_MODE_EXACT && rnd_range(2))
				model_add_range(m, random_due(), random_width(),
						rnd_range(2));
			else
				model_add(m, random_due(), true);
			break;
		case 6:
			model_advance(now);
			break;
		case 7:
			model_advance(sat_add(now, rnd_range(wheel.tick * 8)));
			break;
		case 8:
			if (tw_wheel_next_expiry(&wheel, &when)) {
				CHECK(when >= now);
				/* An event loop that sleeps until then misses
				 * no timer's last tick (exact mode: kafka's
				 * clock lags, by design). */
				for (int i = 0; i < NTIMERS && mode == TW_MODE_EXACT; i++)
					if (timers[i].pending && !timers[i].ready)
						CHECK(limit_of(when) <= timers[i].latest_key);
				model_advance(when);
			}
			break;
		default:
			if (rnd_range(200) == 0)
				model_advance(now == INT64_MAX ? now
							       : INT64_MAX - rnd_range(2));
			else
				model_advance(sat_add(now, (int64_t)(rnd() >> (20 + rnd_range(44)))));
			break;
		}
		CHECK_EQ(tw_wheel_count(&wheel), model_count());
		CHECK_WHEEL(&wheel);
	}
	tw_wheel_destroy(&wheel);
}

static long ops_per_mode = 600000;

static void run_mode(enum tw_mode mode)
{
	long done = 0;

	while (done < ops_per_mode && !check_failures) {
		long n = 2000 + rnd_range(20000);

		run_scenario(mode, n, rnd_range(2));
		done += n;
	}
}

static void test_exact_mode_matches_model(void)
{
	run_mode(TW_MODE_EXACT);
	printf("  %ld advances stopped part way, %ld left the drains' shares "
	       "owed (tests/wheel/big_buckets.c drains big buckets)\n",
	       stops, owed_drains);
	if (ops_per_mode >= 100000)
		CHECK(stops > 0);
}

static void test_kafka_mode_matches_model(void)
{
	run_mode(TW_MODE_KAFKA);
}

int main(int argc, char **argv)
{
	uint64_t seed = 1;

	if (argc > 1)
		ops_per_mode = strtol(argv[1], NULL, 10);
	if (argc > 2)
		seed = strtoull(argv[2], NULL, 10);
	rng_state = test_rand_seed(seed);
	printf("differential: %ld operations per mode, seed %llu\n", ops_per_mode,
	       (unsigned long long)seed);
	RUN(test_exact_mode_matches_model);
	RUN(test_kafka_mode_matches_model);
	return check_report();
}
