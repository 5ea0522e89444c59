/* SPDX-License-Identifier: MIT */
/*
 * Every wheel row of docs/bad-input.md: the bad call gets its documented
 * result, and every other timer is intact. Each test keeps "bystanders"
 * pending while the bad calls are made, then checks the structure and
 * lets the bystanders fire: each must run exactly once, at or after its
 * due time. The service's rows are in tests/service/bad_input.c, the
 * purgatory's in tests/purgatory/bad_input.c, the error texts (E1) in
 * tests/library/error_texts.c.
 */

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "virtual_clock.h"

/* ---- the wheel ---- */

#define NBYSTANDERS 6

struct bystander {
	struct tw_timer timer;
	int fired;
	int64_t fired_at;
};

static struct bystander bys[NBYSTANDERS];
static const int64_t by_due[NBYSTANDERS] = { 3, 50, 51, 999, 40000, 1 << 30 };

static void bystander_fired(struct tw_wheel *w, struct tw_timer *t)
{
	struct bystander *b = tw_container_of(t, struct bystander, timer);

	b->fired++;
	b->fired_at = tw_wheel_now(w);
}

static void add_bystanders(struct tw_wheel *w)
{
	for (int i = 0; i < NBYSTANDERS; i++) {
		bys[i].fired = 0;
		tw_timer_init(&bys[i].timer, bystander_fired);
		CHECK_EQ(tw_wheel_add(w, &bys[i].timer, by_due[i]), 0);
	}
}

/* The structure is sound, nothing was lost, and each bystander fires once,
 * never early. */
static void bystanders_intact(struct tw_wheel *w, size_t others_pending)
{
	CHECK_WHEEL(w);
	CHECK_EQ(tw_wheel_count(w), NBYSTANDERS + others_pending);
	for (int i = 0; i < NBYSTANDERS; i++)
		CHECK(tw_timer_pending(&bys[i].timer));
	for (int i = 0; i < NBYSTANDERS; i++) {
		CHECK(tw_wheel_advance(w, by_due[i]) >= 1);
		CHECK_EQ(bys[i].fired, 1);
		CHECK(bys[i].fired_at >= by_due[i]);
	}
	CHECK_WHEEL(w);
}

static void never_runs(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
	check_failures++;
	fprintf(stderr, "a timer that should not run ran\n");
}

/* B1: NULL pointers, to every wheel function. */
static void test_null_pointers_wheel(void)
{
	struct tw_wheel w;
	struct tw_timer t;
	struct tw_level_info li;
	struct tw_bucket_info bi;
	unsigned level, slot;
	int64_t when = 77;

	CHECK_EQ(tw_wheel_init(NULL, 1, 8, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, 8, 0, TW_MODE_EXACT), 0);
	add_bystanders(&w);
	tw_timer_init(&t, never_runs);
	tw_timer_init(NULL, never_runs); /* nothing happens */
	CHECK_EQ(tw_wheel_destroy(NULL), TW_EINVAL);
	CHECK_EQ(tw_wheel_drain(NULL, NULL), TW_EINVAL);
	CHECK_EQ(tw_wheel_add(NULL, &t, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_add(&w, NULL, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_in(NULL, &t, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_in(&w, NULL, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_cancel(NULL, &t), TW_EINVAL);
	CHECK_EQ(tw_wheel_cancel(&w, NULL), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule(NULL, &t, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule(&w, NULL, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_advance(NULL, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_advance_unordered(NULL, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_range(NULL, &t, 5, 9), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_range(&w, NULL, 5, 9), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule_range(NULL, &t, 5, 9), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule_range(&w, NULL, 5, 9), TW_EINVAL);
	CHECK(!tw_wheel_next_expiry(NULL, &when));
	CHECK(!tw_wheel_next_expiry(&w, NULL));
	CHECK_EQ(when, 77);
	CHECK_EQ(tw_wheel_timeout(NULL, 0), -1);
	CHECK_EQ(tw_wheel_now(NULL), 0);
	CHECK_EQ(tw_wheel_count(NULL), 0);
	CHECK_EQ(tw_wheel_levels(NULL), 0);
	CHECK_EQ(tw_wheel_level_info(NULL, 1, &li), TW_EINVAL);
	CHECK_EQ(tw_wheel_level_info(&w, 1, NULL), TW_EINVAL);
	CHECK_EQ(tw_wheel_bucket_info(NULL, 1, 0, &bi), TW_EINVAL);
	CHECK_EQ(tw_wheel_bucket_info(&w, 1, 0, NULL), TW_EINVAL);
	CHECK_EQ(tw_wheel_ready_info(NULL, &bi), TW_EINVAL);
	CHECK_EQ(tw_wheel_ready_info(&w, NULL), TW_EINVAL);
	CHECK(tw_bucket_next(NULL) == NULL);
	CHECK_EQ(tw_wheel_queue_snapshot(NULL, NULL, 0), 0);
	CHECK_EQ(tw_timer_where(NULL, &bys[0].timer, &level, &slot), TW_EINVAL);
	CHECK_EQ(tw_timer_where(&w, NULL, &level, &slot), TW_EINVAL);
	CHECK_EQ(tw_wheel_check(NULL, NULL, 0), TW_ECORRUPT);
	tw_wheel_set_observer(NULL, NULL); /* nothing happens */
	/* where: the out pointers are optional */
	CHECK_EQ(tw_timer_where(&w, &bys[1].timer, NULL, NULL), 0);
	/* snapshot: max 0 only counts */
	CHECK_EQ(tw_wheel_queue_snapshot(&w, NULL, 0), tw_wheel_queue_snapshot(&w, NULL, 0));
	/* A NULL out, whatever max: the length, nothing written. */
	CHECK_EQ(tw_wheel_queue_snapshot(&w, NULL, 5), tw_wheel_queue_snapshot(&w, NULL, 0));
	bystanders_intact(&w, 0);
	tw_wheel_destroy(&w);
}

/* B1: a wheel that was never initialised (all zeros) is refused by every
 * reader instead of being read. */
static void test_uninitialised_wheel(void)
{
	struct tw_wheel zero;
	struct tw_level_info li;
	struct tw_bucket_info bi;
	struct tw_queue_entry q[2];
	int64_t when = 5;

	memset(&zero, 0, sizeof(zero));
	CHECK_EQ(tw_wheel_level_info(&zero, 1, &li), TW_EINVAL);
	CHECK_EQ(tw_wheel_bucket_info(&zero, 1, 0, &bi), TW_EINVAL);
	CHECK_EQ(tw_wheel_ready_info(&zero, &bi), TW_EINVAL);
	CHECK_EQ(tw_wheel_queue_snapshot(&zero, q, 2), 0);
	CHECK(!tw_wheel_next_expiry(&zero, &when));
	CHECK_EQ(when, 5);
	CHECK_EQ(tw_wheel_check(&zero, NULL, 0), TW_ECORRUPT);
}

/* Every way into the wheel refuses an uninitialised one and a timer with
 * no callback, the window calls and the unordered advance included. */
static void test_uninitialised_wheel_refused_by_every_call(void)
{
	struct tw_wheel zero, w;
	struct tw_timer t, no_fn;

	memset(&zero, 0, sizeof(zero));
	tw_timer_init(&t, never_runs);
	tw_timer_init(&no_fn, NULL);
	CHECK_EQ(tw_wheel_add(&zero, &t, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_in(&zero, &t, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule(&zero, &t, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_range(&zero, &t, 5, 9), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule_range(&zero, &t, 5, 9), TW_EINVAL);
	CHECK_EQ(tw_wheel_advance(&zero, 5), TW_EINVAL);
	CHECK_EQ(tw_wheel_advance_unordered(&zero, 5), TW_EINVAL);
	CHECK(!tw_timer_pending(&t));
	CHECK_EQ(tw_wheel_init(&w, 1, 64, 100, TW_MODE_EXACT), 0);
	CHECK_EQ(tw_wheel_add_in(&w, &no_fn, 5), TW_EINVAL);
	/* A bad timer is TW_EINVAL before a sum that overflows is looked at. */
	CHECK_EQ(tw_wheel_add_in(&w, NULL, INT64_MAX), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_in(&w, &no_fn, INT64_MAX), TW_EINVAL);
	CHECK_EQ(tw_wheel_add_range(&w, &no_fn, 200, 300), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule_range(&w, &no_fn, 200, 300), TW_EINVAL);
	CHECK_EQ(tw_wheel_advance_unordered(&w, 99), TW_ERANGE);
	CHECK_EQ(tw_wheel_count(&w), 0);
	CHECK_EQ(tw_wheel_drain(&zero, NULL), TW_EINVAL);
	CHECK_EQ(tw_wheel_destroy(&zero), 0); /* destroyed or never made: nothing to do */
	{
		struct tw_queue_entry q[4];

		/* an empty queue: nothing to copy into the room given */
		CHECK_EQ(tw_wheel_queue_snapshot(&w, q, 4), 0);
	}
	/* A drain with no hand-back function unlinks and counts. */
	CHECK_EQ(tw_wheel_add(&w, &t, 500), TW_OK);
	CHECK_EQ(tw_wheel_drain(&w, NULL), 1);
	CHECK(!tw_timer_pending(&t));
	CHECK_EQ(tw_wheel_count(&w), 0);
	tw_wheel_destroy(&w);
}

/* A snapshot into less room than the queue has copies what fits, in pop
 * order, and says how long the queue is. */
static void test_snapshot_into_small_room(void)
{
	struct tw_wheel w;
	struct tw_queue_entry q[2];
	size_t n;

	CHECK_EQ(tw_wheel_init(&w, 1, 8, 0, TW_MODE_EXACT), 0);
	add_bystanders(&w);
	n = tw_wheel_queue_snapshot(&w, NULL, 0);
	CHECK(n > 2);
	CHECK_EQ(tw_wheel_queue_snapshot(&w, q, 2), n);
	CHECK(q[0].expiration <= q[1].expiration);
	CHECK_EQ(q[0].expiration, 3);
	bystanders_intact(&w, 0);
	tw_wheel_destroy(&w);
}

/* B2: parameters out of range at init; the wheel is not touched. */
static void test_bad_wheel_parameters(void)
{
	struct tw_wheel w;
	struct tw_level_info li;
	struct tw_bucket_info bi;

	CHECK_EQ(tw_wheel_init(&w, 0, 8, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, -5, 8, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, 1, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, 0, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, TW_WHEEL_SIZE_MAX + 1, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, 8, 0, (enum tw_mode)7), TW_EINVAL);
	/* The limits themselves are accepted. */
	CHECK_EQ(tw_wheel_init(&w, INT64_MAX, TW_WHEEL_SIZE_MIN, INT64_MIN, TW_MODE_KAFKA), 0);
	tw_wheel_destroy(&w);
	CHECK_EQ(tw_wheel_init(&w, 1, 8, 0, TW_MODE_EXACT), 0);
	add_bystanders(&w);
	/* Levels and slots that do not exist. */
	CHECK_EQ(tw_wheel_level_info(&w, 0, &li), TW_EINVAL);
	CHECK_EQ(tw_wheel_level_info(&w, tw_wheel_levels(&w) + 1, &li), TW_EINVAL);
	CHECK_EQ(tw_wheel_bucket_info(&w, 1, 8, &bi), TW_EINVAL);
	bystanders_intact(&w, 0);
	tw_wheel_destroy(&w);
}

/* B3: a timer added twice; one without a callback. */
static void test_timer_added_twice(void)
{
	struct tw_wheel w;
	struct tw_timer t, no_fn;

	CHECK_EQ(tw_wheel_init(&w, 1, 8, 0, TW_MODE_EXACT), 0);
	add_bystanders(&w);
	tw_timer_init(&t, never_runs);
	tw_timer_init(&no_fn, NULL);
	CHECK_EQ(tw_wheel_add(&w, &t, INT64_MAX), 0);
	CHECK_EQ(tw_wheel_add(&w, &t, 7), TW_EBUSY);
	CHECK_EQ(tw_timer_due(&t), INT64_MAX); /* where it was */
	CHECK_EQ(tw_wheel_add(&w, &no_fn, 7), TW_EINVAL);
	CHECK_EQ(tw_wheel_reschedule(&w, &no_fn, 7), TW_EINVAL);
	CHECK(!tw_timer_pending(&no_fn));
	bystanders_intact(&w, 1);
	CHECK_EQ(tw_wheel_cancel(&w, &t), 1);
	tw_wheel_destroy(&w);
}

/* B4: cancelling a timer never added; one owned by another wheel. */
static void test_cancel_never_added_or_foreign(void)
{
	struct tw_wheel w, other;
	struct tw_timer never, foreign;
	unsigned level, slot;

	CHECK_EQ(tw_wheel_init(&w, 1, 8, 0, TW_MODE_EXACT), 0);
	CHECK_EQ(tw_wheel_init(&other, 1, 8, 0, TW_MODE_EXACT), 0);
	add_bystanders(&w);
	tw_timer_init(&never, never_runs);
	tw_timer_init(&foreign, never_runs);
	CHECK_EQ(tw_wheel_cancel(&w, &never), 0);
	CHECK_EQ(tw_wheel_cancel(&w, &never), 0);
	CHECK_EQ(tw_wheel_add(&other, &foreign, 20), 0);
	CHECK_EQ(tw_wheel_cancel(&w, &foreign), TW_EOWNER);
	CHECK_EQ(tw_wheel_reschedule(&w, &foreign, 30), TW_EOWNER);
	CHECK_EQ(tw_timer_where(&w, &foreign, &level, &slot), TW_EINVAL);
	CHECK_EQ(tw_timer_due(&foreign), 20);
	CHECK_EQ(tw_wheel_count(&other), 1);
	CHECK_WHEEL(&other);
	bystanders_intact(&w, 0);
	CHECK_EQ(tw_wheel_cancel(&other, &foreign), 1);
	tw_wheel_destroy(&other);
	tw_wheel_destroy(&w);
}

static int plain_fired;

static void count_fire(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
	plain_fired++;
}

/* B5: due times and delays at the ends of int64. */
static void test_due_times_that_overflow(void)
{
	struct tw_wheel w;
	struct tw_timer late, early_, far;

	CHECK_EQ(tw_wheel_init(&w, 1, 20, 0, TW_MODE_EXACT), 0);
	add_bystanders(&w);
	tw_timer_init(&late, never_runs);
	tw_timer_init(&early_, count_fire);
	tw_timer_init(&far, never_runs);
	CHECK_EQ(tw_wheel_add(&w, &late, INT64_MAX), 0);
	CHECK_EQ(tw_wheel_add_in(&w, &far, INT64_MAX), 0); /* now is 0: fits */
	CHECK_EQ(tw_timer_due(&far), INT64_MAX);
	CHECK_EQ(tw_wheel_add(&w, &early_, INT64_MIN), 0); /* due: next advance */
	CHECK_EQ(tw_wheel_timeout(&w, 0), 0);
	CHECK_EQ(tw_wheel_advance(&w, 0), 1);
	CHECK_EQ(plain_fired, 1);
	bystanders_intact(&w, 2);
	CHECK_EQ(tw_wheel_cancel(&w, &late), 1);
	CHECK_EQ(tw_wheel_cancel(&w, &far), 1);
	tw_wheel_destroy(&w);
}

/* B6: a clock that goes backwards. */
static void test_clock_backwards_wheel(void)
{
	struct tw_wheel w;

	CHECK_EQ(tw_wheel_init(&w, 1, 8, 100, TW_MODE_EXACT), 0);
	add_bystanders(&w); /* 3 and 50 are due already: next advance */
	CHECK_EQ(tw_wheel_advance(&w, 99), TW_ERANGE);
	CHECK_EQ(tw_wheel_advance(&w, INT64_MIN), TW_ERANGE);
	CHECK_EQ(tw_wheel_now(&w), 100);
	CHECK_EQ(bys[0].fired, 0);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 100), 3); /* 3, 50, 51 */
	for (int i = 0; i < 3; i++)
		CHECK_EQ(bys[i].fired, 1);
	CHECK_EQ(tw_wheel_advance(&w, 1 << 30), 3);
	tw_wheel_destroy(&w);
}

/* B7: calls a callback may not make, and a callback that frees itself. */
static struct tw_wheel *cb_wheel;
static int64_t cb_results[3], cb_unordered;

static void reenters(struct tw_wheel *w, struct tw_timer *t)
{
	cb_results[0] = tw_wheel_advance(w, tw_wheel_now(w) + 1);
	cb_unordered = tw_wheel_advance_unordered(w, tw_wheel_now(w) + 1);
	cb_results[1] = tw_wheel_destroy(w);
	cb_results[2] = tw_wheel_drain(w, NULL);
	free(t); /* its last act: the wheel never touches it again */
}

static void test_callback_reentry_and_self_free(void)
{
	struct tw_wheel w;
	struct tw_timer *t = malloc(sizeof(*t));

	CHECK(t != NULL);
	cb_wheel = &w;
	CHECK_EQ(tw_wheel_init(&w, 1, 8, 0, TW_MODE_EXACT), 0);
	add_bystanders(&w);
	tw_timer_init(t, reenters);
	CHECK_EQ(tw_wheel_add(&w, t, 2), 0);
	CHECK_EQ(tw_wheel_advance(&w, 2), 1);
	CHECK_EQ(cb_results[0], TW_EREENTER);
	CHECK_EQ(cb_unordered, TW_EREENTER);
	CHECK_EQ(cb_results[1], TW_EREENTER);
	CHECK_EQ(cb_results[2], TW_EREENTER);
	bystanders_intact(&w, 0);
	tw_wheel_destroy(&w);
}

/* B7 for a drain's hand_back, which is a callback too: the calls refused
 * from a callback are refused from it (a destroy there freed the buckets
 * the drain was walking; a drain there handed back the timers the
 * hand_back added again, and one that re-added its own timer recursed
 * until the stack ran out). What a hand_back may do -- add, cancel -- it
 * still does. */
static int64_t hb_results[4];
static struct tw_timer *hb_other;
static int hb_calls;

static void reenters_from_hand_back(struct tw_wheel *w, struct tw_timer *t)
{
	if (hb_calls++ == 0) {
		hb_results[0] = tw_wheel_advance(w, tw_wheel_now(w) + 1);
		hb_results[1] = tw_wheel_advance_unordered(w, tw_wheel_now(w) + 1);
		hb_results[2] = tw_wheel_drain(w, reenters_from_hand_back);
		hb_results[3] = tw_wheel_destroy(w);
		/* Allowed: the timer handed back is added again (it stays
		 * pending), the other one, not yet handed back, cancelled. */
		CHECK_EQ(tw_wheel_add(w, t, 500), 0);
		CHECK_EQ(tw_wheel_cancel(w, hb_other), 1);
	}
}

static void test_hand_back_reentry(void)
{
	struct tw_wheel w;
	struct tw_timer t[2];

	CHECK_EQ(tw_wheel_init(&w, 1, 8, 0, TW_MODE_EXACT), 0);
	tw_timer_init(&t[0], never_runs);
	tw_timer_init(&t[1], never_runs);
	CHECK_EQ(tw_wheel_add(&w, &t[0], 10), 0);
	CHECK_EQ(tw_wheel_add(&w, &t[1], 20), 0);
	hb_other = &t[1];
	CHECK_EQ(tw_wheel_drain(&w, reenters_from_hand_back), 1);
	CHECK_EQ(hb_calls, 1);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(hb_results[i], TW_EREENTER);
	CHECK(tw_timer_pending(&t[0]));
	CHECK(!tw_timer_pending(&t[1]));
	CHECK_EQ(tw_wheel_count(&w), 1);
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 0), 0);
	CHECK_EQ(tw_wheel_destroy(&w), 0);
	CHECK(!tw_timer_pending(&t[0]));
}

/* B9: a pending timer initialised again (its memory reused) and added
 * again, into the bucket it was in. The release build cannot see the init;
 * the checked build names it at the call (tests/library/checked_build.c).
 * The bucket's list then runs from the timers before it to it, at the
 * end, and skips the timers after it: a drain that walked it as it is
 * would hand back part of the wheel and call that all of it. drain and
 * destroy say TW_ECORRUPT, after handing back the timers before the first
 * whose links do not agree (t[1]: its successor's prev is the wiped
 * timer's new predecessor). */
#ifndef TW_DEBUG
static size_t handed_back;

static void count_hand_back(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
	handed_back++;
}
#endif

static void test_a_timer_initialised_again_and_added_again(void)
{
#ifndef TW_DEBUG
	for (int destroy = 0; destroy <= 1; destroy++) {
		struct tw_wheel w;
		struct tw_timer t[5];

		CHECK_EQ(tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT), 0);
		for (int i = 0; i < 5; i++) {
			tw_timer_init(&t[i], never_runs);
			CHECK_EQ(tw_wheel_add(&w, &t[i], 10), 0);
		}
		tw_timer_init(&t[2], never_runs); /* the mistake */
		CHECK_EQ(tw_wheel_add(&w, &t[2], 10), 0);
		if (destroy) {
			CHECK_EQ(tw_wheel_destroy(&w), TW_ECORRUPT);
			continue;
		}
		handed_back = 0;
		CHECK_EQ(tw_wheel_drain(&w, count_hand_back), TW_ECORRUPT);
		/* Stopped at t[1], whose successor does not lead back. */
		CHECK_EQ(handed_back, 1);
		CHECK(!tw_timer_pending(&t[0]));
		/* What is left is not walked again: counted as nothing. */
		CHECK_EQ(tw_wheel_count(&w), 0);
		CHECK_EQ(tw_wheel_destroy(&w), TW_ECORRUPT);
	}
#endif
}

int main(void)
{
	RUN(test_null_pointers_wheel);
	RUN(test_uninitialised_wheel);
	RUN(test_uninitialised_wheel_refused_by_every_call);
	RUN(test_snapshot_into_small_room);
	RUN(test_bad_wheel_parameters);
	RUN(test_timer_added_twice);
	RUN(test_cancel_never_added_or_foreign);
	RUN(test_due_times_that_overflow);
	RUN(test_clock_backwards_wheel);
	RUN(test_callback_reentry_and_self_free);
	RUN(test_hand_back_reentry);
	RUN(test_a_timer_initialised_again_and_added_again);
	return check_report();
}
