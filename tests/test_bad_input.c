/* SPDX-License-Identifier: MIT */
/*
 * Every row of docs/bad-input.md: the bad call gets its documented result,
 * and every other timer is intact. Each test keeps "bystanders" pending
 * (timers, service timers, a delayed operation) while the bad calls are
 * made, then checks the structure and lets the bystanders fire: each must
 * run exactly once, at or after its due time.
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

/* ---- the service ---- */


struct svc_bystander {
	struct tw_service_timer timer;
	atomic_int ran;
	int64_t ran_at;
};

static struct svc_bystander sbys[4];
static const int64_t sby_due[4] = { 10, 11, 5000, 1 << 24 };

static void svc_bystander_ran(struct tw_service *svc, struct tw_service_timer *t)
{
	struct svc_bystander *b = tw_container_of(t, struct svc_bystander, timer);

	b->ran_at = tw_service_now(svc);
	atomic_fetch_add(&b->ran, 1);
}

static struct tw_service *manual_service(void)
{
	struct tw_service_config cfg = { .tick = 1, .manual = true };
	struct tw_service *svc = NULL;

	cfg.clock.now = virtual_clock;
	atomic_store(&virtual_now, 0);
	CHECK_EQ(tw_service_create(&svc, &cfg), 0);
	return svc;
}

static void add_svc_bystanders(struct tw_service *svc)
{
	for (int i = 0; i < 4; i++) {
		tw_service_timer_init(&sbys[i].timer, svc_bystander_ran);
		atomic_store(&sbys[i].ran, 0);
		CHECK_EQ(tw_service_add(svc, &sbys[i].timer, sby_due[i]), 0);
	}
}

static void svc_bystanders_intact(struct tw_service *svc, size_t others)
{
	CHECK_EQ(tw_service_count(svc), 4 + others);
	for (int i = 0; i < 4; i++) {
		if (atomic_load(&virtual_now) < sby_due[i])
			atomic_store(&virtual_now, sby_due[i]);
		CHECK(tw_service_poll(svc) >= 1);
		CHECK_EQ(atomic_load(&sbys[i].ran), 1);
		CHECK(sbys[i].ran_at >= sby_due[i]);
	}
}

static void svc_never_runs(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	check_failures++;
	fprintf(stderr, "a service timer that should not run ran\n");
}

/* S1-S4: NULLs, bad configuration, double add, foreign and never-added
 * timers, overflowing delays, a clock that goes back. */
static void test_service_bad_input(void)
{
	struct tw_service *svc, *other, *none = (struct tw_service *)1;
	struct tw_service_config bad = { 0 };
	struct tw_service_timer t, foreign, no_fn;
	struct tw_service_stats st;

	CHECK_EQ(tw_service_create(NULL, NULL), TW_EINVAL);
	bad.wheel_size = 1;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);
	CHECK(none == NULL);
	bad.wheel_size = 0, bad.inboxes = 5000;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);
	bad.inboxes = 0, bad.tick = -1;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);
	bad.tick = 0, bad.executors = 5000;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);
	bad.executors = 0, bad.wheel_size = TW_WHEEL_SIZE_MAX + 1;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);

	svc = manual_service();
	other = manual_service();
	add_svc_bystanders(svc);
	tw_service_timer_init(&t, svc_never_runs);
	tw_service_timer_init(&foreign, svc_never_runs);
	tw_service_timer_init(&no_fn, NULL);
	tw_service_timer_init(NULL, NULL); /* nothing happens */

	CHECK_EQ(tw_service_add(NULL, &t, 5), TW_EINVAL);
	CHECK_EQ(tw_service_add(svc, NULL, 5), TW_EINVAL);
	CHECK_EQ(tw_service_add(svc, &no_fn, 5), TW_EINVAL);
	CHECK_EQ(tw_service_add_in(NULL, &t, 5), TW_EINVAL);
	CHECK_EQ(tw_service_reschedule(NULL, &t, 5), TW_EINVAL);
	CHECK_EQ(tw_service_cancel(NULL, &t), TW_EINVAL);
	CHECK_EQ(tw_service_cancel(svc, NULL), TW_EINVAL);
	CHECK_EQ(tw_service_cancel_sync(NULL, &t), TW_EINVAL);
	CHECK_EQ(tw_service_poll(NULL), TW_EINVAL);
	CHECK_EQ(tw_service_shutdown(NULL, NULL, NULL), TW_EINVAL);
	CHECK_EQ(tw_service_now(NULL), 0);
	CHECK_EQ(tw_service_count(NULL), 0);
	tw_service_stats(NULL, &st);
	CHECK_EQ(st.added, 0);
	tw_service_stats(svc, NULL);
	tw_service_kick(NULL);
	tw_service_destroy(NULL);

	CHECK_EQ(tw_service_cancel(svc, &t), TW_SVC_IDLE);      /* never added */
	CHECK_EQ(tw_service_cancel_sync(svc, &t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_add(svc, &t, 100000), 0);
	CHECK_EQ(tw_service_add(svc, &t, 20), TW_EBUSY);         /* twice */
	CHECK_EQ(tw_service_add(other, &foreign, 30), 0);
	CHECK_EQ(tw_service_cancel(svc, &foreign), TW_EOWNER);   /* foreign */
	CHECK_EQ(tw_service_add(svc, &foreign, 30), TW_EOWNER);
	CHECK_EQ(tw_service_reschedule(svc, &foreign, 30), TW_EOWNER);
	CHECK_EQ(tw_service_count(other), 1);
	atomic_store(&virtual_now, 5);
	CHECK_EQ(tw_service_add_in(svc, &no_fn, 5), TW_EINVAL);
	CHECK_EQ(tw_service_cancel(svc, &t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_add_in(svc, &t, INT64_MAX), TW_EOVERFLOW); /* overflow */
	CHECK_EQ(tw_service_add(svc, &t, INT64_MAX), 0);         /* the end of time is fine */
	CHECK_EQ(tw_service_poll(svc), 0);
	atomic_store(&virtual_now, 4);                             /* backwards */
	CHECK_EQ(tw_service_poll(svc), TW_ERANGE);
	CHECK_EQ(tw_service_now(svc), 4);
	atomic_store(&virtual_now, 5);
	svc_bystanders_intact(svc, 1);
	CHECK_EQ(tw_service_cancel(svc, &t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(other, &foreign), TW_SVC_STOPPED);
	tw_service_destroy(other);
	tw_service_destroy(svc);
}

/* S5: from inside a callback: shutdown, destroy's shutdown, poll and
 * cancel_sync of itself. */
static int64_t svc_cb_results[3];

static void svc_reenters(struct tw_service *svc, struct tw_service_timer *t)
{
	svc_cb_results[0] = tw_service_shutdown(svc, NULL, NULL);
	svc_cb_results[1] = tw_service_poll(svc);
	svc_cb_results[2] = tw_service_cancel_sync(svc, t);
}

static void test_service_calls_from_a_callback(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_timer t;

	add_svc_bystanders(svc);
	tw_service_timer_init(&t, svc_reenters);
	CHECK_EQ(tw_service_add(svc, &t, 3), 0);
	atomic_store(&virtual_now, 3);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(svc_cb_results[0], TW_EREENTER);
	CHECK_EQ(svc_cb_results[1], TW_EREENTER);
	/* It does not wait for itself; it says the callback is running. */
	CHECK_EQ(svc_cb_results[2], TW_SVC_RUNNING);
	svc_bystanders_intact(svc, 0);
	tw_service_destroy(svc);
}

/* S6: calls after shutdown. */
static int handed_back;

static void count_hand_back(struct tw_service_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	handed_back++;
}

static void test_service_after_shutdown(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_timer t;

	add_svc_bystanders(svc);
	tw_service_timer_init(&t, svc_never_runs);
	handed_back = 0;
	CHECK_EQ(tw_service_shutdown(svc, count_hand_back, NULL), 4);
	CHECK_EQ(handed_back, 4); /* the bystanders come back, none runs */
	CHECK_EQ(tw_service_add(svc, &t, 5), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_add_in(svc, &t, 5), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_reschedule(svc, &t, 5), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_poll(svc), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_cancel(svc, &t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_shutdown(svc, count_hand_back, NULL), 0);
	CHECK_EQ(handed_back, 4);
	CHECK_EQ(tw_service_count(svc), 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(atomic_load(&sbys[i].ran), 0);
	tw_service_destroy(svc);
}

/* ---- the purgatory ---- */

struct op {
	struct tw_delayed_op base;
	struct tw_watch watch[2];
	atomic_int completes, expirations;
	bool ready;
};

static bool op_ready(struct tw_delayed_op *d)
{
	struct op *o = tw_container_of(d, struct op, base);

	return o->ready && tw_op_force_complete(d);
}

static void op_completed(struct tw_delayed_op *d)
{
	atomic_fetch_add(&tw_container_of(d, struct op, base)->completes, 1);
}

static void op_expired(struct tw_delayed_op *d)
{
	atomic_fetch_add(&tw_container_of(d, struct op, base)->expirations, 1);
}

static const struct tw_op_ops bystander_ops = { op_ready, op_completed,
						op_expired, NULL };
static const struct tw_op_ops plain_ops = { op_ready, op_completed, NULL, NULL };
static const struct tw_op_ops no_condition = { NULL, op_completed, NULL, NULL };
static const struct tw_op_ops no_completion = { op_ready, NULL, NULL, NULL };

/* P1-P4: bad operations, bad keys, NULLs, calls after shutdown. */
static void test_purgatory_bad_input(void)
{
	struct tw_purgatory_config cfg = { .service = { .tick = 1, .manual = true } };
	struct tw_purgatory *p, *none = (struct tw_purgatory *)1;
	struct op bystander = { 0 }, bad = { 0 };
	static char long_key[TW_KEY_MAX + 1];
	const void *keys[2] = { "k", long_key };
	size_t lens[2] = { 1, TW_KEY_MAX + 1 };
	size_t zero = 0;

	cfg.service.clock.now = virtual_clock;
	atomic_store(&virtual_now, 0);
	CHECK_EQ(tw_purgatory_create(NULL, &cfg), TW_EINVAL);
	cfg.shards = 70000;
	CHECK_EQ(tw_purgatory_create(&none, &cfg), TW_EINVAL);
	CHECK(none == NULL);
	cfg.shards = 0;
	CHECK_EQ(tw_purgatory_create(&p, &cfg), 0);

	/* The bystander waits on "k" for 100. */
	CHECK_EQ(tw_op_init(&bystander.base, 100, &bystander_ops, NULL), 0);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bystander.base, keys, lens, 1,
						      bystander.watch), 0);

	CHECK_EQ(tw_op_init(NULL, 10, &plain_ops, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 0, &plain_ops, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, -1, &plain_ops, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 10, &no_condition, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 10, &no_completion, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 10, NULL, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 10, &plain_ops, NULL), 0);
	/* Keys: none, empty, too long, NULL. */
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens, 0, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, &zero, 1, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens, 2, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, NULL, lens, 1, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens, 1, NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, NULL, 1, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, NULL, keys, lens, 1, bad.watch), TW_EINVAL);
	{
		const void *null_key[1] = { NULL };

		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, null_key, lens, 1,
							      bad.watch), TW_EINVAL);
	}
	CHECK_EQ(tw_purgatory_try_complete_else_watch(NULL, &bad.base, keys, lens, 1, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(p, "", 0), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(p, long_key, TW_KEY_MAX + 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(NULL, "k", 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_cancel_for_key(p, NULL, 1, NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(p, long_key, TW_KEY_MAX), 0); /* long is fine */
	CHECK(!tw_op_force_complete(NULL));
	CHECK(!tw_op_is_completed(NULL));
	CHECK(!tw_op_safe_try_complete(NULL));
	CHECK_EQ(tw_purgatory_watched(NULL), 0);
	CHECK_EQ(tw_purgatory_delayed(NULL), 0);
	CHECK_EQ(tw_purgatory_poll(NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_shutdown(NULL, NULL), TW_EINVAL);
	tw_purgatory_purge(NULL);
	tw_purgatory_destroy(NULL);
	tw_op_destroy(NULL);
	CHECK(!tw_op_is_completed(&bad.base));

	/* P6: the bystander watched a second time (issue 25: accepted, it was
	 * linked twice): TW_EBUSY, nothing changed. */
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bystander.base, keys, lens, 1,
						      bystander.watch), TW_EBUSY);

	/* The bystander is intact: still watched, completes by its key. */
	CHECK_EQ(tw_purgatory_watched(p), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	bystander.ready = true;
	CHECK_EQ(tw_purgatory_check_and_complete(p, "k", 1), 1);
	CHECK_EQ(atomic_load(&bystander.completes), 1);
	atomic_store(&virtual_now, 1000);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(atomic_load(&bystander.expirations), 0);

	/* After shutdown: refused, nothing watched. */
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens, 1, bad.watch),
		 TW_ESHUTDOWN);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	tw_purgatory_destroy(p);
	tw_op_destroy(&bystander.base);
	tw_op_destroy(&bad.base);
}

/* E1: every value a call returns has its own description (the cancels'
 * results included: tw_strerror(2) was "unknown error"); a negative value
 * that is no code is "unknown", a positive one a count. */
static void test_error_strings(void)
{
	static const int codes[] = { TW_OK, TW_EINVAL, TW_ENOMEM, TW_EBUSY,
		TW_ERANGE, TW_EOWNER, TW_EREENTER, TW_ECORRUPT, TW_EOVERFLOW,
		TW_ESHUTDOWN, TW_EAGAIN, TW_EDEADLK, TW_SVC_STOPPED,
		TW_SVC_RUNNING };
	const size_t n = sizeof(codes) / sizeof(codes[0]);

	for (size_t i = 0; i < n; i++) {
		CHECK(tw_strerror(codes[i]) != NULL);
		CHECK(strcmp(tw_strerror(codes[i]), "unknown error") != 0);
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(tw_strerror(codes[i]), tw_strerror(codes[j])) != 0);
	}
	/* The wheel's cancel and the service's agree on 0 and 1. */
	CHECK(TW_SVC_IDLE == 0 && TW_SVC_STOPPED == 1);
	CHECK(strstr(tw_strerror(TW_SVC_STOPPED), "stopped") != NULL);
	CHECK(strstr(tw_strerror(TW_EDEADLK), "cycle") != NULL);
	/* A text true for every layer that returns the code: TW_EOWNER
	 * comes from the wheel's calls and the service's, TW_ESHUTDOWN
	 * from the service's and the purgatory's (each said only one). */
	CHECK(strstr(tw_strerror(TW_EOWNER), "wheel") != NULL);
	CHECK(strstr(tw_strerror(TW_EOWNER), "service") != NULL);
	CHECK(strstr(tw_strerror(TW_ESHUTDOWN), "service") != NULL);
	CHECK(strstr(tw_strerror(TW_ESHUTDOWN), "purgatory") != NULL);
	CHECK(strcmp(tw_strerror(3), "not an error (a count)") == 0);
	CHECK(strcmp(tw_strerror(INT32_MAX), "not an error (a count)") == 0);
	CHECK(strcmp(tw_strerror(TW_EDEADLK - 1), "unknown error") == 0);
	CHECK(strcmp(tw_strerror(INT32_MIN), "unknown error") == 0);
}

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

/* S8: a timer wiped while its service holds it. The release build cannot
 * see the init (the timer's memory before its first init may be
 * anything); the debug build names tw_service_timer_init() at the call
 * (test_debug), so here it is wiped by a memset (memory reused) that no
 * build can see. Either way shutdown used to follow the wiped links: an
 * inbox entry pushed again after the wipe links to itself and the drain
 * looped for ever, so did a wheel bucket that links it twice, and a
 * bucket that links a wiped timer crashed. destroy now returns
 * TW_ECORRUPT (the debug build aborts naming the timer), and always
 * returns. */
static void noop_cb(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	(void)t;
}

static void wipe(struct tw_service_timer *t)
{
#ifdef TW_DEBUG
	memset(t, 0, sizeof(*t));
	CHECK_EQ(tw_service_timer_reinit(t, noop_cb), 0);
#else
	tw_service_timer_init(t, noop_cb); /* the mistake, as a user makes it */
#endif
}

enum wipe_case {
	WIPED_IN_INBOX,            /* then destroyed: silently lost before */
	WIPED_IN_INBOX_READDED,    /* a cycle in the inbox: hung before */
	WIPED_IN_WHEEL,            /* a bucket links a zeroed timer: crashed */
	WIPED_IN_WHEEL_READDED,    /* linked twice: hung before */
	WIPED_CASES
};

static int wipe_and_destroy(enum wipe_case c)
{
	struct tw_service *svc = service(true, 0);
	struct tw_service_timer t, bystander;

	tw_service_timer_init(&t, noop_cb);
	tw_service_timer_init(&bystander, noop_cb);
	CHECK_EQ(tw_service_add(svc, &bystander, 5000), 0);
	CHECK_EQ(tw_service_add(svc, &t, 3000), 0);
	if (c == WIPED_IN_WHEEL || c == WIPED_IN_WHEEL_READDED)
		CHECK_EQ(tw_service_poll(svc), 0); /* placed in the wheel */
	wipe(&t);
	if (c == WIPED_IN_INBOX_READDED || c == WIPED_IN_WHEEL_READDED)
		CHECK_EQ(tw_service_add(svc, &t, 4000), 0);
	return tw_service_destroy(svc);
}

static void test_destroy_of_a_service_that_lost_a_timer(void)
{
	for (int c = 0; c < WIPED_CASES; c++) {
		int status;
		pid_t pid;

		fflush(stdout); /* the child's exit() flushes its copy */
		fflush(stderr);
		pid = fork();

		CHECK(pid >= 0);
		if (pid == 0) {
			/* A hang fails the test instead of stopping it; the
			 * fixed library returns at once. */
			alarm(120);
#ifdef TW_DEBUG
			close(STDERR_FILENO); /* the abort's message is test_debug's */
#endif
			/* exit(), not _exit(): a coverage build writes what
			 * the child ran (the paths only a wiped timer takes) */
			exit(wipe_and_destroy((enum wipe_case)c) == TW_ECORRUPT
				     ? 0 : 1);
		}
		CHECK_EQ(waitpid(pid, &status, 0), pid);
#ifdef TW_DEBUG
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
#else
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fprintf(stderr, "case %d: %s %d\n", c,
				WIFSIGNALED(status) ? "signal" : "exit",
				WIFSIGNALED(status) ? WTERMSIG(status)
						    : WEXITSTATUS(status));
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
	}
	/* Used right, the same service balances and destroy says so. */
	{
		struct tw_service *svc = service(true, 0);
		struct tw_service_timer t;

		tw_service_timer_init(&t, noop_cb);
		CHECK_EQ(tw_service_add(svc, &t, 3000), 0);
		CHECK_EQ(tw_service_poll(svc), 0);
		CHECK_EQ(tw_service_cancel_sync(svc, &t), TW_SVC_STOPPED);
		tw_service_timer_init(&t, noop_cb);
		CHECK_EQ(tw_service_add(svc, &t, 4000), 0);
		CHECK_EQ(tw_service_destroy(svc), 0);
		CHECK_EQ(tw_service_destroy(NULL), TW_EINVAL);
	}
}

int main(void)
{
	RUN(test_version);
	RUN(test_error_strings);
	RUN(test_duration_helpers);
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
	RUN(test_service_bad_input);
	RUN(test_service_calls_from_a_callback);
	RUN(test_service_after_shutdown);
	RUN(test_destroy_of_a_service_that_lost_a_timer);
	RUN(test_purgatory_bad_input);
	return check_report();
}
