/* SPDX-License-Identifier: MIT */
/*
 * A service timer runs once, in the order of its due time and never
 * early, on a manual service and a virtual clock (every test is
 * deterministic): one poll runs its batch in tick order, a huge expiry
 * is one batch, cancel before and after expiry, reschedule, periodic
 * timers that do not drift (past the end of time they run once; a
 * reinit keeps or changes the period; one cancelled from its own
 * callback stops), callbacks that cancel, free and re-enter, shutdown
 * hands back what is pending, bad input and kafka mode. Windows are in
 * windows.c, the service's threads in executors_and_back_pressure.c, an
 * event loop sleeping the timeout in manual_loop.c.
 */
#define _POSIX_C_SOURCE 200809L

#include "service_jobs.h"

static void test_create_rejects_bad_config(void)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = (struct tw_service *)&cfg;

	CHECK_EQ(tw_service_create(NULL, NULL), TW_EINVAL);
	cfg.tick = -1;
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_EINVAL);
	CHECK(svc == NULL);
	cfg.tick = 0;
	cfg.wheel_size = 1;
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_EINVAL);
	cfg.wheel_size = 0;
	cfg.shards = 5000;
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_EINVAL);
	/* The defaults work, with threads, and shut down cleanly. */
	CHECK_EQ(tw_service_create(&svc, NULL), TW_OK);
	tw_service_destroy(svc);
}

static void test_runs_in_order_never_early(void)
{
	struct tw_service *svc = manual_service(0);
	struct job j[20];
	int64_t due[20];

	for (int i = 0; i < 20; i++) {
		job_init(&j[i], i, 0);
		/* due 1005, 1105, ... in a scrambled order */
		due[i] = 1005 + ((i * 7) % 20) * 100;
		CHECK_EQ(tw_service_add(svc, &j[i].t, due[i]), TW_OK);
	}
	CHECK_EQ(tw_service_count(svc), 20);
	for (int64_t now = 1000; now <= 3100; now += 5) {
		set_clock(now);
		CHECK(tw_service_poll(svc) >= 0);
	}
	CHECK_EQ(atomic_load(&norder), 20);
	for (int i = 0; i < 20; i++) {
		CHECK_EQ(atomic_load(&j[i].runs), 1);
		CHECK(j[i].ran_at >= due[i]);
		CHECK(j[i].ran_at < due[i] + 10);
	}
	for (int i = 1; i < 20; i++)
		CHECK(due[order[i - 1]] <= due[order[i]]);
	tw_service_destroy(svc);
}

static void test_one_poll_runs_its_batch_in_tick_order(void)
{
	struct tw_service *svc = manual_service(0);
	struct job j[64];
	int64_t due[64];

	for (int i = 0; i < 64; i++) {
		job_init(&j[i], i, 0);
		due[i] = 1010 + ((i * 37) % 64) * 10;
		tw_service_add(svc, &j[i].t, due[i]);
	}
	set_clock(5000);
	CHECK_EQ(tw_service_poll(svc), 64); /* one batch, however the adds came in */
	for (int i = 1; i < 64; i++)
		CHECK(due[order[i - 1]] < due[order[i]]);
	tw_service_destroy(svc);
}

/* One poll runs everything due, however many timers that is (65,636
 * here, a number past any fixed batch room): each runs once, and a
 * cancel or a reschedule from a callback still reaches timers of the same
 * expiry that have not run yet. Which of one tick's timers go first is
 * not promised. */
#define BIG_BATCH 65536
static atomic_long big_runs;
static struct job *big_jobs, *big_cancelled, *big_moved;
static int big_cancel_result, big_move_result;

static void on_big(struct tw_service *svc, struct tw_service_timer *t)
{
	atomic_fetch_add(&tw_container_of(t, struct job, t)->runs, 1);
	if (atomic_fetch_add(&big_runs, 1) == 0) {
		/* The first run: the others of this expiry wait for theirs. */
		struct job *self = tw_container_of(t, struct job, t);

		/* Two others (this one is running: nothing else ran). */
		big_cancelled = &big_jobs[self == &big_jobs[0] ? 2 : 0];
		big_moved = &big_jobs[self == &big_jobs[1] ? 2 : 1];
		big_cancel_result = tw_service_cancel(svc, &big_cancelled->t);
		big_move_result = tw_service_reschedule(svc, &big_moved->t, 1100);
	}
}

static void test_a_huge_expiry_is_one_batch(void)
{
	struct tw_service *svc = manual_service(0);
	size_t n = BIG_BATCH + 100;
	struct job *j = calloc(n, sizeof(*j));
	struct tw_service_stats st;

	CHECK(j != NULL);
	atomic_store(&big_runs, 0);
	for (size_t i = 0; i < n; i++) {
		tw_service_timer_init(&j[i].t, on_big);
		CHECK_EQ(tw_service_add(svc, &j[i].t, 1015), TW_OK);
	}
	big_jobs = j;
	set_clock(1020);
	/* Dispatched: all n, the two stopped in the batch before they ran
	 * included (they expired with the rest). */
	CHECK_EQ(tw_service_poll(svc), (int64_t)n);
	CHECK_EQ(big_cancel_result, TW_SVC_STOPPED);
	CHECK_EQ(big_move_result, TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&big_runs), (long)n - 2);
	CHECK_EQ(atomic_load(&big_moved->runs), 0);
	CHECK_EQ(tw_service_count(svc), 1);
	set_clock(1100);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&big_runs), (long)n - 1);
	for (size_t i = 0; i < n; i++)
		CHECK_EQ(atomic_load(&j[i].runs), (&j[i] == big_cancelled ? 0 : 1));
	CHECK_EQ(tw_service_count(svc), 0);
	tw_service_shutdown(svc, NULL, NULL);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	tw_service_destroy(svc);
	free(j);
}

static void test_cancel_before_and_after_expiry(void)
{
	struct tw_service *svc = manual_service(0);
	struct job a, b, never;
	struct tw_service_stats st;

	job_init(&a, 1, 0);
	job_init(&b, 2, 0);
	job_init(&never, 3, 0);
	CHECK_EQ(tw_service_cancel(svc, &never.t), TW_SVC_IDLE);
	tw_service_add(svc, &a.t, 1050);
	tw_service_add(svc, &b.t, 1050);
	CHECK_EQ(tw_service_cancel(svc, &a.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &a.t), TW_SVC_IDLE);
	set_clock(1100);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&a.runs), 0);
	CHECK_EQ(atomic_load(&b.runs), 1);
	CHECK_EQ(tw_service_cancel(svc, &b.t), TW_SVC_IDLE); /* already ran */
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 2);
	CHECK_EQ(st.ran, 1);
	CHECK_EQ(st.stopped, 1);
	tw_service_destroy(svc);
}

static void test_reschedule(void)
{
	struct tw_service *svc = manual_service(0);
	struct job a;

	job_init(&a, 1, 0);
	CHECK_EQ(tw_service_reschedule(svc, &a.t, 1500), TW_SVC_IDLE);
	CHECK_EQ(tw_service_reschedule(svc, &a.t, 1200), TW_SVC_STOPPED);
	set_clock(1199);
	CHECK_EQ(tw_service_poll(svc), 0);
	set_clock(1200);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(a.ran_at, 1200);
	set_clock(1600);
	CHECK_EQ(tw_service_poll(svc), 0); /* the 1500 one was replaced */
	CHECK_EQ(atomic_load(&a.runs), 1);
	tw_service_destroy(svc);
}

static void test_periodic_does_not_drift(void)
{
	struct tw_service *svc = manual_service(0);
	struct job p;
	int64_t dues[8];
	int n = 0;

	job_init(&p, 1, 100);
	tw_service_add(svc, &p.t, 1100);
	/* Poll late and unevenly: each run is still due at 1100 + k*100. */
	static const int64_t polls[] = { 1107, 1230, 1299, 1301, 1650, 1650,
					 1651, 1651, 1700 };
	for (size_t i = 0; i < sizeof(polls) / sizeof(polls[0]); i++) {
		int before = atomic_load(&p.runs);

		set_clock(polls[i]);
		tw_service_poll(svc);
		if (atomic_load(&p.runs) > before && n < 8)
			dues[n++] = p.due_seen;
	}
	CHECK_EQ(atomic_load(&p.runs), 7);
	for (int i = 0; i < n; i++)
		CHECK_EQ(dues[i], 1100 + 100 * i);
	CHECK_EQ(tw_service_cancel(svc, &p.t), TW_SVC_STOPPED);
	set_clock(5000);
	CHECK_EQ(tw_service_poll(svc), 0);
	tw_service_destroy(svc);
}

/* Add p at due; it runs there and again one period later (still pending
 * after that); then cancel it. */
static void check_two_periodic_runs(struct tw_service *svc, struct job *p,
				    int64_t due, int64_t period)
{
	CHECK_EQ(tw_service_add(svc, &p->t, due), TW_OK);
	set_clock(due);
	CHECK_EQ(tw_service_poll(svc), 1);
	set_clock(due + period);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(p->due_seen, due + period);
	CHECK(tw_service_timer_pending(&p->t)); /* re-armed */
	CHECK_EQ(tw_service_cancel(svc, &p->t), TW_SVC_STOPPED);
}

/* The period lives beside the timer (struct tw_service_periodic): a plain
 * reinit keeps it, a periodic reinit changes it or, with 0, makes the timer
 * one-shot; neither touches a pending timer. */
/* A period that would run past INT64_MAX: that run is the timer's last.
 * Its next due time was held at INT64_MAX, so once the clock read it the
 * timer ran at every poll (5 runs in 5 polls) and a loop on
 * tw_service_timeout spun. */
static void test_periodic_past_the_end_of_time_runs_once(void)
{
	struct tw_service *svc = manual_service(0);
	struct job p;
	int64_t when;

	set_clock(INT64_MAX - 10);
	job_init(&p, 1, 100);
	CHECK_EQ(tw_service_add(svc, &p.t, INT64_MAX - 5), TW_OK);
	set_clock(INT64_MAX);
	for (int i = 0; i < 5; i++)
		CHECK(tw_service_poll(svc) >= 0);
	CHECK_EQ(atomic_load(&p.runs), 1);
	CHECK(!tw_service_timer_pending(&p.t));
	CHECK(!tw_service_next_expiry(svc, &when));
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

/* now + delay past either end of the int64 range is refused, as the
 * wheel's tw_wheel_add_in refuses it (at INT64_MIN a delay of -5 was
 * taken as due now). */
static void test_add_in_refuses_a_sum_past_either_end(void)
{
	struct tw_service *svc = manual_service(0);
	struct job a;

	job_init(&a, 1, 0);
	set_clock(INT64_MIN);
	CHECK_EQ(tw_service_add_in(svc, &a.t, -5), TW_EOVERFLOW);
	CHECK(!tw_service_timer_pending(&a.t));
	set_clock(INT64_MAX);
	CHECK_EQ(tw_service_add_in(svc, &a.t, 5), TW_EOVERFLOW);
	CHECK(!tw_service_timer_pending(&a.t));
	set_clock(1000);
	CHECK_EQ(tw_service_add_in(svc, &a.t, -5), TW_OK); /* due now */
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&a.runs), 1);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

/* reschedule_in: now + delay, pending or not, with what a reschedule
 * returns; a sum past the int64 range changes nothing. */
static void test_reschedule_in_moves_to_now_plus_delay(void)
{
	struct tw_service *svc = manual_service(0);
	struct job a;

	job_init(&a, 1, 0);
	set_clock(1000);
	CHECK_EQ(tw_service_reschedule_in(svc, &a.t, 500), TW_SVC_IDLE);
	set_clock(1200);
	CHECK_EQ(tw_service_reschedule_in(svc, &a.t, 100), TW_SVC_STOPPED);
	set_clock(1299);
	CHECK_EQ(tw_service_poll(svc), 0);
	set_clock(1300);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(a.ran_at, 1300);
	CHECK_EQ(tw_service_reschedule_in(svc, &a.t, 50), TW_SVC_IDLE);
	CHECK_EQ(tw_service_reschedule_in(NULL, &a.t, 20), TW_EINVAL);
	CHECK_EQ(tw_service_reschedule_in(svc, NULL, 20), TW_EINVAL);
	set_clock(INT64_MAX - 10);
	CHECK_EQ(tw_service_reschedule_in(svc, &a.t, 20), TW_EOVERFLOW);
	CHECK(tw_service_timer_pending(&a.t)); /* still at 1350 */
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&a.runs), 2);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

static void test_periodic_reinit_keeps_or_changes_the_period(void)
{
	struct tw_service *svc = manual_service(0);
	struct job p;

	CHECK_EQ(sizeof(struct tw_service_periodic),
		 sizeof(struct tw_service_timer) + 2 * sizeof(int64_t));
	job_init(&p, 1, 100);
	CHECK_EQ(tw_service_add(svc, &p.t, 1100), TW_OK);
	CHECK_EQ(tw_service_periodic_reinit(&p.p, on_run, 30), TW_EBUSY);
	CHECK_EQ(tw_service_timer_reinit(&p.t, on_run), TW_EBUSY);
	CHECK_EQ(tw_service_periodic_reinit(NULL, on_run, 30), TW_EINVAL);
	CHECK_EQ(tw_service_cancel(svc, &p.t), TW_SVC_STOPPED);

	/* A new callback only: still every 100. */
	CHECK_EQ(tw_service_timer_reinit(&p.t, on_run), TW_OK);
	check_two_periodic_runs(svc, &p, 1200, 100);

	/* A new period: every 30 from the next add. */
	CHECK_EQ(tw_service_periodic_reinit(&p.p, on_run, 30), TW_OK);
	check_two_periodic_runs(svc, &p, 1410, 30);

	/* Period 0: one run, no re-arm. */
	CHECK_EQ(tw_service_periodic_reinit(&p.p, on_run, 0), TW_OK);
	CHECK_EQ(tw_service_add(svc, &p.t, 1500), TW_OK);
	set_clock(1500);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(!tw_service_timer_pending(&p.t));
	set_clock(2000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(atomic_load(&p.runs), 5);
	tw_service_destroy(svc);
}

static void act_cancel_self(struct tw_service *svc, struct job *self)
{
	self->result = tw_service_cancel_sync(svc, &self->t);
}

static void test_periodic_cancelled_from_its_callback(void)
{
	struct tw_service *svc = manual_service(0);
	struct job p;

	job_init(&p, 1, 50);
	p.action = act_cancel_self;
	tw_service_add(svc, &p.t, 1050);
	set_clock(1050);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(p.result, TW_SVC_RUNNING); /* not waiting for itself */
	set_clock(2000);
	CHECK_EQ(tw_service_poll(svc), 0); /* and it is not re-armed */
	CHECK_EQ(atomic_load(&p.runs), 1);
	CHECK_EQ(tw_service_count(svc), 0);
	tw_service_destroy(svc);
}

static void act_cancel_other(struct tw_service *svc, struct job *self)
{
	self->result = tw_service_cancel(svc, &self->other->t);
}

static void act_reenter(struct tw_service *svc, struct job *self)
{
	CHECK_EQ(tw_service_poll(svc), TW_EREENTER);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), TW_EREENTER);
	CHECK_EQ(tw_service_cancel(svc, &self->t), TW_SVC_RUNNING);
}

static void test_callbacks_cancel_free_and_reenter(void)
{
	struct tw_service *svc = manual_service(0);
	struct job a, b, c, *heap = malloc(sizeof(*heap));

	job_init(&a, 1, 0);
	job_init(&b, 2, 0);
	job_init(&c, 3, 0);
	job_init(heap, 4, 0);
	a.action = act_cancel_other;
	a.other = &b; /* due in the same poll, a tick later: not yet run */
	c.action = act_reenter;
	heap->action = act_free_self;
	tw_service_add(svc, &a.t, 1010);
	tw_service_add(svc, &b.t, 1020);
	tw_service_add(svc, &c.t, 1030);
	tw_service_add(svc, &heap->t, 1040);
	set_clock(1040);
	tw_service_poll(svc);
	CHECK_EQ(a.result, TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&b.runs), 0);
	CHECK_EQ(atomic_load(&c.runs), 1);
	tw_service_destroy(svc);
}

static void test_shutdown_hands_back_pending(void)
{
	struct tw_service *svc = manual_service(0);
	struct job j[10];
	struct tw_service_stats st;
	int seen[10] = { 0 };

	for (int i = 0; i < 10; i++) {
		job_init(&j[i], i, i == 9 ? 100 : 0);
		tw_service_add(svc, &j[i].t, 1000 + 100 * i);
	}
	set_clock(1250);
	CHECK_EQ(tw_service_poll(svc), 3);        /* 0, 1, 2 ran */
	CHECK_EQ(tw_service_cancel(svc, &j[3].t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j[4].t), TW_SVC_STOPPED);
	nhanded = 0;
	CHECK_EQ(tw_service_shutdown(svc, hand_back, &nhanded), 5);
	CHECK_EQ(nhanded, 5);
	for (int i = 0; i < nhanded; i++)
		seen[handed[i]]++;
	for (int i = 0; i < 10; i++)
		CHECK_EQ(seen[i], i >= 5);
	/* Exactly one ending each: ran 3 + stopped 2 + handed back 5. */
	tw_service_stats(svc, &st);
	CHECK_EQ(st.ran + st.stopped + st.handed_back, st.added);
	/* After shutdown: adds refused, nothing else changes. */
	CHECK_EQ(tw_service_add(svc, &j[0].t, 5000), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_reschedule(svc, &j[1].t, 5000), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_poll(svc), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_shutdown(svc, hand_back, &nhanded), 0);
	CHECK_EQ(nhanded, 5);
	tw_service_destroy(svc);
}

static void test_bad_input(void)
{
	struct tw_service *svc = manual_service(0), *other = manual_service(0);
	struct job a;
	struct tw_service_timer no_fn;

	job_init(&a, 1, 0);
	tw_service_timer_init(&no_fn, NULL);
	CHECK_EQ(tw_service_add(NULL, &a.t, 5), TW_EINVAL);
	CHECK_EQ(tw_service_add(svc, NULL, 5), TW_EINVAL);
	CHECK_EQ(tw_service_add(svc, &no_fn, 5), TW_EINVAL);
	CHECK_EQ(tw_service_cancel(NULL, &a.t), TW_EINVAL);
	CHECK_EQ(tw_service_cancel_sync(svc, NULL), TW_EINVAL);
	CHECK_EQ(tw_service_poll(NULL), TW_EINVAL);
	CHECK_EQ(tw_service_add(svc, &a.t, 2000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &a.t, 3000), TW_EBUSY);
	CHECK_EQ(tw_service_add(other, &a.t, 3000), TW_EOWNER);
	CHECK_EQ(tw_service_cancel(other, &a.t), TW_EOWNER);
	CHECK_EQ(tw_service_add_in(svc, &no_fn, 5), TW_EINVAL);
	CHECK_EQ(tw_service_cancel(svc, &a.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_add_in(svc, &a.t, INT64_MAX), TW_EOVERFLOW);
	CHECK(!tw_timer_pending(&a.t.wheel_timer));
	/* A clock that goes backwards: poll refuses, nothing changes. */
	CHECK_EQ(tw_service_add(svc, &a.t, 1500), TW_OK);
	set_clock(1400);
	CHECK_EQ(tw_service_poll(svc), 0);
	set_clock(1300);
	CHECK_EQ(tw_service_poll(svc), TW_ERANGE);
	CHECK_EQ(tw_service_count(svc), 1);
	set_clock(1500);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(strcmp(tw_strerror(TW_ESHUTDOWN), "unknown error") != 0);
	tw_service_destroy(svc);
	tw_service_destroy(other);
}

/* A reschedule of a timer without a callback is refused (TW_EINVAL) and
 * changes nothing, whether no service owns the timer yet (it stays
 * unclaimed: another service may still take it) or this one does and a
 * reinit took its callback away (it is not filed, nothing is counted).
 * The check that a pending timer's reschedule skips is still made for
 * every other timer. */
static void test_reschedule_without_a_callback_is_refused(void)
{
	struct tw_service *svc = manual_service(0), *other = manual_service(0);
	struct tw_service_timer no_fn;
	struct tw_service_stats st;
	struct job a;

	tw_service_timer_init(&no_fn, NULL);
	CHECK_EQ(tw_service_reschedule(svc, &no_fn, 1500), TW_EINVAL);
	CHECK_EQ(tw_service_timer_reinit(&no_fn, on_run), TW_OK);
	CHECK_EQ(tw_service_add(other, &no_fn, 1500), TW_OK);
	CHECK_EQ(tw_service_cancel(other, &no_fn), TW_SVC_STOPPED);

	job_init(&a, 1, 0);
	CHECK_EQ(tw_service_add(svc, &a.t, 1500), TW_OK);
	CHECK_EQ(tw_service_cancel(svc, &a.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_timer_reinit(&a.t, NULL), TW_OK);
	CHECK_EQ(tw_service_reschedule(svc, &a.t, 1200), TW_EINVAL);
	CHECK_EQ(tw_service_add(svc, &a.t, 1200), TW_EINVAL);
	CHECK_EQ(tw_service_count(svc), 0);
	CHECK_EQ(tw_service_timer_reinit(&a.t, on_run), TW_OK);
	CHECK_EQ(tw_service_reschedule(svc, &a.t, 1200), TW_SVC_IDLE);
	set_clock(1200);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&a.runs), 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 2);
	CHECK_EQ(st.stopped, 1);
	CHECK_EQ(st.ran, 1);
	tw_service_destroy(svc);
	tw_service_destroy(other);
}

/* A timer never initialised (zeroed memory) is refused by reinit, which
 * only gives a prepared timer a new callback: with a callback alone an
 * add would have returned 0 for a timer the wheel never filed, that never
 * ran (a shutdown then found the accounting short). Initialised, the same
 * memory is added, runs, and reinit takes it. */
static void test_reinit_refuses_a_timer_never_initialised(void)
{
	struct tw_service *svc = manual_service(0);
	struct tw_service_stats st;
	struct job z;

	memset(&z, 0, sizeof(z));
	CHECK_EQ(tw_service_timer_reinit(&z.t, on_run), TW_EINVAL);
	CHECK_EQ(tw_service_periodic_reinit(&z.p, on_run, 100), TW_EINVAL);
	CHECK_EQ(tw_service_add(svc, &z.t, 1500), TW_EINVAL); /* no callback */
	CHECK_EQ(tw_service_count(svc), 0);
	job_init(&z, 7, 0);
	CHECK_EQ(tw_service_timer_reinit(&z.t, on_run), TW_OK);
	CHECK_EQ(tw_service_add(svc, &z.t, 1500), TW_OK);
	CHECK(tw_service_timer_pending(&z.t));
	set_clock(1500);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&z.runs), 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 1);
	CHECK_EQ(st.ran, 1);
	tw_service_destroy(svc);
}

/* Kafka mode on a virtual clock that starts below zero: a timer may run up
 * to a tick early (never more), as Kafka's; add_in with a negative delay
 * is due at once. */
static void test_kafka_mode_and_negative_times(void)
{
	struct tw_service_config cfg = { .tick = 10, .wheel_size = 8, .manual = true,
					 .mode = TW_MODE_KAFKA };
	static const int64_t due[4] = { -995, -991, -900, 5 };
	struct tw_service *svc = NULL;
	struct job j[4], now_job;
	bool some_early = false;

	cfg.clock.now = virtual_clock;
	set_clock(-1000);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	for (int i = 0; i < 4; i++) {
		job_init(&j[i], i, 0);
		CHECK_EQ(tw_service_add(svc, &j[i].t, due[i]), TW_OK);
	}
	job_init(&now_job, 9, 0);
	CHECK_EQ(tw_service_add_in(svc, &now_job.t, -50), TW_OK);
	/* -995 and -991 share the tick that starts at -1000: due now. */
	CHECK_EQ(tw_service_poll(svc), 3);
	CHECK_EQ(atomic_load(&now_job.runs), 1);
	for (int64_t t = -1000; t <= 20; t++) {
		set_clock(t);
		CHECK(tw_service_poll(svc) >= 0);
	}
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(atomic_load(&j[i].runs), 1);
		CHECK(j[i].ran_at > due[i] - 10);     /* less than a tick early */
		CHECK(j[i].ran_at <= due[i]);         /* and not late: polled every unit */
		some_early |= j[i].ran_at < due[i];
	}
	CHECK(some_early); /* Kafka's rounding is really in effect */
	tw_service_destroy(svc);
}

int main(void)
{
	RUN(test_create_rejects_bad_config);
	RUN(test_runs_in_order_never_early);
	RUN(test_one_poll_runs_its_batch_in_tick_order);
	RUN(test_a_huge_expiry_is_one_batch);
	RUN(test_cancel_before_and_after_expiry);
	RUN(test_reschedule);
	RUN(test_periodic_does_not_drift);
	RUN(test_periodic_past_the_end_of_time_runs_once);
	RUN(test_add_in_refuses_a_sum_past_either_end);
	RUN(test_reschedule_in_moves_to_now_plus_delay);
	RUN(test_periodic_reinit_keeps_or_changes_the_period);
	RUN(test_periodic_cancelled_from_its_callback);
	RUN(test_callbacks_cancel_free_and_reenter);
	RUN(test_shutdown_hands_back_pending);
	RUN(test_bad_input);
	RUN(test_reschedule_without_a_callback_is_refused);
	RUN(test_reinit_refuses_a_timer_never_initialised);
	RUN(test_kafka_mode_and_negative_times);
	return check_report();
}
