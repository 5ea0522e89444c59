/* SPDX-License-Identifier: MIT */
/*
 * The checked build (-DTW_DEBUG=ON, make sanitize) names a caller's
 * mistake at the call that makes it, in the wheel, the service and the
 * purgatory: each mistake below is made in a child process, which must
 * abort at that call with a message naming the call and what to do
 * instead; the same calls made correctly must not be taken for mistakes;
 * and a TW_EINVAL says which argument was refused, and why, without
 * stopping anything. (Without the checked build the first kind crashes
 * later, elsewhere, or hangs.)
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "virtual_clock.h"

static char out[4096];

struct step {
	void (*fn)(void);
};

static void call(void *arg)
{
	((struct step *)arg)->fn();
}

/* Run fn in a child with its stderr captured in out; its exit signal. */
static int in_child(void (*fn)(void))
{
	struct step step = { fn };

	return run_in_child(call, &step, out, sizeof(out));
}

/* fn, made right, ends normally and says nothing (what it said, shown). */
#define EXPECT_CLEAN(fn)                                                      \
	do {                                                                  \
		CHECK_EQ(in_child(fn), 0);                                    \
		if (out[0])                                                   \
			fprintf(stderr, "%s", out);                           \
		CHECK_EQ(out[0], '\0');                                       \
	} while (0)

#define EXPECT_ABORT_NAMING(fn, ...)                                          \
	do {                                                                  \
		const char *const needles_[] = { __VA_ARGS__ };               \
		CHECK_EQ(in_child(fn), SIGABRT);                              \
		for (size_t i_ = 0; i_ < sizeof(needles_) / sizeof(*needles_); i_++) \
			if (!strstr(out, needles_[i_])) {                     \
				fprintf(stderr, "missing \"%s\" in:\n%s\n",   \
					needles_[i_], out);                   \
				CHECK(0);                                     \
			}                                                     \
	} while (0)

/* ---- a service timer initialised while the service holds it ---- */

static void nothing(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	(void)t;
}

static struct tw_service *manual_service(void)
{
	struct tw_service_config cfg = { .manual = true };
	struct tw_service *svc = NULL;

	cfg.clock.now = virtual_clock;
	CHECK_EQ(tw_service_create(&svc, &cfg), 0);
	return svc;
}

static void init_a_pending_timer(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_timer t;

	tw_service_timer_init(&t, nothing);
	CHECK_EQ(tw_service_add(svc, &t, TW_S(1)), 0);
	tw_service_timer_init(&t, nothing); /* the mistake */
}

static void hold_for_ever(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	(void)t;
	for (;;)
		sched_yield(); /* the child ends at the abort */
}

/* Expired, waiting for the one executor, which runs another callback. */
static void init_an_expired_timer(void)
{
	struct tw_service_config cfg = { .manual = true, .executors = 1 };
	struct tw_service *svc = NULL;
	struct tw_service_timer blocker, t;

	cfg.clock.now = virtual_clock;
	set_clock(0);
	CHECK_EQ(tw_service_create(&svc, &cfg), 0);
	tw_service_timer_init(&blocker, hold_for_ever);
	tw_service_timer_init(&t, nothing);
	CHECK_EQ(tw_service_add(svc, &blocker, TW_MS(1)), 0);
	CHECK_EQ(tw_service_add(svc, &t, TW_MS(2)), 0);
	set_clock(TW_MS(1));
	CHECK_EQ(tw_service_poll(svc), 1);
	while (tw_service_timer_pending(&blocker))
		sched_yield(); /* the executor took it, and holds */
	set_clock(TW_MS(2));
	CHECK_EQ(tw_service_poll(svc), 1);
	tw_service_timer_init(&t, nothing); /* the mistake: it waits to run */
}

static void init_a_pending_periodic_timer(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_periodic p;

	tw_service_periodic_init(&p, nothing, 10);
	CHECK_EQ(tw_service_add(svc, &p.timer, TW_S(1)), 0);
	tw_service_periodic_init(&p, nothing, 20); /* the mistake */
}

/* An init from the timer's own callback wipes what keeps its runs apart
 * (an add after it ran the timer beside itself on executors): named. */
static void init_myself(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	tw_service_timer_init(t, nothing); /* the mistake */
}

static void init_from_its_own_callback(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_timer t;

	set_clock(0);
	tw_service_timer_init(&t, init_myself);
	CHECK_EQ(tw_service_add(svc, &t, TW_MS(1)), 0);
	set_clock(TW_MS(1));
	tw_service_poll(svc);
}

/* A plain cancel during a run, of an add made during it: TW_SVC_STOPPED
 * (that add ended), while the callback still runs; an init then is the
 * mistake service.h warns of (only cancel_sync and timer_shutdown wait
 * for the run). */
static atomic_int in_its_run;

static void note_run_then_hold(struct tw_service *s, struct tw_service_timer *t)
{
	atomic_store(&in_its_run, 1);
	hold_for_ever(s, t);
}

static void init_after_a_plain_cancel_during_its_run(void)
{
	struct tw_service_config cfg = { .manual = true, .executors = 1 };
	struct tw_service *svc = NULL;
	static struct tw_service_timer t;

	cfg.clock.now = virtual_clock;
	set_clock(0);
	CHECK_EQ(tw_service_create(&svc, &cfg), 0);
	tw_service_timer_init(&t, note_run_then_hold);
	CHECK_EQ(tw_service_add(svc, &t, TW_MS(1)), 0);
	set_clock(TW_MS(1));
	CHECK_EQ(tw_service_poll(svc), 1);
	while (!atomic_load(&in_its_run))
		sched_yield();
	CHECK_EQ(tw_service_add(svc, &t, TW_S(1)), 0); /* waits for the run */
	CHECK_EQ(tw_service_cancel(svc, &t), TW_SVC_STOPPED);
	tw_service_timer_init(&t, nothing); /* the mistake */
}

static void test_init_of_a_held_timer_is_named(void)
{
	EXPECT_ABORT_NAMING(init_after_a_plain_cancel_during_its_run,
			    "tw_service_timer_init(", "its callback is running");
	EXPECT_ABORT_NAMING(init_a_pending_timer, "tw_service_timer_init(",
			    "pending", "tw_service_timer_reinit()",
			    "tw_service_timer_shutdown()");
	EXPECT_ABORT_NAMING(init_an_expired_timer, "tw_service_timer_init(",
			    "expired, about to run");
	EXPECT_ABORT_NAMING(init_from_its_own_callback, "tw_service_timer_init(",
			    "its callback is running", "tw_service_timer_reinit()");
	EXPECT_ABORT_NAMING(init_a_pending_periodic_timer,
			    "tw_service_periodic_init(", "pending");
}

/* A timer wiped by a memset (its memory reused), which no init check can
 * see, and added again: destroy names it instead of waiting for ever,
 * and says it only found it (the mistake was the earlier memset). */
static void wipe_a_pending_timer_then_destroy(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_timer t;

	tw_service_timer_init(&t, nothing);
	CHECK_EQ(tw_service_add(svc, &t, TW_S(1)), 0);
	memset(&t, 0, sizeof(t)); /* the mistake */
	CHECK_EQ(tw_service_timer_reinit(&t, nothing), 0);
	CHECK_EQ(tw_service_add(svc, &t, TW_S(2)), 0);
	tw_service_destroy(svc);
}

static void test_destroy_names_a_wiped_timer(void)
{
	EXPECT_ABORT_NAMING(wipe_a_pending_timer_then_destroy,
			    "tw_service_destroy(", "overwritten",
			    "tw_service_timer_shutdown()",
			    "found this in the call above",
			    "the mistake is an earlier call");
	CHECK(!strstr(out, "stops at the call that made the mistake"));
}

/* ---- an add of a timer torn down by tw_service_timer_shutdown() ---- */

/* From another thread than its callback: the timer may have been freed
 * since, so the add is the mistake. */
static void add_after_timer_shutdown(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_timer t;

	tw_service_timer_init(&t, nothing);
	CHECK_EQ(tw_service_add(svc, &t, TW_S(1)), 0);
	CHECK_EQ(tw_service_timer_shutdown(svc, &t), TW_SVC_STOPPED);
	tw_service_add(svc, &t, TW_S(2)); /* the mistake */
}

/* Its own callback's re-add after the teardown is what the teardown
 * refuses by design: TW_ESHUTDOWN, nothing named. Then init, and the
 * timer is a fresh one again. */
static int readd_rc = -1000;

static void tear_down_then_readd(struct tw_service *s, struct tw_service_timer *t)
{
	CHECK_EQ(tw_service_timer_shutdown(s, t), TW_SVC_RUNNING);
	readd_rc = tw_service_add_in(s, t, TW_MS(1));
}

static void readd_from_the_torn_down_callback(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_timer t;

	set_clock(0);
	tw_service_timer_init(&t, tear_down_then_readd);
	CHECK_EQ(tw_service_add(svc, &t, TW_MS(1)), 0);
	set_clock(TW_MS(1));
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(readd_rc, TW_ESHUTDOWN);
	tw_service_timer_init(&t, nothing);
	CHECK_EQ(tw_service_add(svc, &t, TW_MS(5)), 0);
	tw_service_destroy(svc);
}

static void test_add_after_timer_shutdown_is_named(void)
{
	EXPECT_ABORT_NAMING(add_after_timer_shutdown, "tw_service_add(",
			    "tw_service_timer_shutdown()", "tw_service_timer_init()");
	EXPECT_CLEAN(readd_from_the_torn_down_callback);
}

/* The right ways to reuse a timer are not mistakes. */
static void reuse_done_right(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_timer *t = malloc(sizeof(*t));

	CHECK(t != NULL);
	tw_service_timer_init(t, nothing);
	/* after cancel_sync */
	CHECK_EQ(tw_service_add(svc, t, TW_S(1)), 0);
	CHECK(tw_service_poll(svc) >= 0);
	CHECK_EQ(tw_service_cancel_sync(svc, t), TW_SVC_STOPPED);
	tw_service_timer_init(t, nothing);
	/* after its callback ran */
	CHECK_EQ(tw_service_add(svc, t, TW_MS(5)), 0);
	set_clock(TW_MS(10));
	CHECK_EQ(tw_service_poll(svc), 1);
	tw_service_timer_init(t, nothing);
	/* after a plain cancel that stopped it before any run */
	CHECK_EQ(tw_service_add(svc, t, TW_S(1)), 0);
	CHECK_EQ(tw_service_cancel(svc, t), TW_SVC_STOPPED);
	tw_service_timer_init(t, nothing);
	/* after shutdown handed it back */
	CHECK_EQ(tw_service_add(svc, t, TW_S(1)), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	tw_service_timer_init(t, nothing);
	tw_service_destroy(svc);
	/* a tombstone of a destroyed service: its memory is the caller's */
	svc = manual_service();
	CHECK_EQ(tw_service_add(svc, t, TW_S(1)), 0);
	CHECK(tw_service_poll(svc) >= 0);
	CHECK_EQ(tw_service_cancel(svc, t), TW_SVC_STOPPED);
	tw_service_destroy(svc);
	tw_service_timer_init(t, nothing);
	free(t);
}

/* hand_back gets a timer the service no longer holds (service.h): it may
 * initialise it. */
static void init_in_hand_back(struct tw_service_timer *t, void *arg)
{
	(void)arg;
	tw_service_timer_init(t, nothing);
}

static void init_from_hand_back(void)
{
	struct tw_service *svc = manual_service();
	struct tw_service_timer t;

	tw_service_timer_init(&t, nothing);
	CHECK_EQ(tw_service_add(svc, &t, TW_S(1)), 0);
	CHECK_EQ(tw_service_shutdown(svc, init_in_hand_back, NULL), 1);
	tw_service_destroy(svc);
}

/* A callback that tore its timer down may free it as its last act, and
 * the memory may then be a new timer's, initialised by another thread
 * while that callback returns. Here the same storage plays both: to the
 * service, that is what freed memory reused at once looks like. */
static struct tw_service_timer torn_timer;
static atomic_int torn_down, reused_now;

static void tear_down_then_linger(struct tw_service *s, struct tw_service_timer *t)
{
	CHECK_EQ(tw_service_timer_shutdown(s, t), TW_SVC_RUNNING);
	atomic_store(&torn_down, 1); /* "free(t)": its last act on it */
	while (!atomic_load(&reused_now))
		sched_yield();
}

static void reuse_while_the_torn_down_callback_returns(void)
{
	struct tw_service_config cfg = { .manual = true, .executors = 1 };
	struct tw_service *svc = NULL;

	cfg.clock.now = virtual_clock;
	CHECK_EQ(tw_service_create(&svc, &cfg), 0);
	tw_service_timer_init(&torn_timer, tear_down_then_linger);
	CHECK_EQ(tw_service_add(svc, &torn_timer, TW_MS(1)), 0);
	set_clock(TW_MS(1));
	CHECK_EQ(tw_service_poll(svc), 1); /* to the executor */
	while (!atomic_load(&torn_down))
		sched_yield();
	tw_service_timer_init(&torn_timer, nothing); /* the new timer */
	atomic_store(&reused_now, 1);
	CHECK_EQ(tw_service_add(svc, &torn_timer, TW_MS(5)), 0);
	CHECK_EQ(tw_service_destroy(svc), 0);
}

static void test_reuse_done_right_is_not_a_mistake(void)
{
	set_clock(0);
	EXPECT_CLEAN(reuse_done_right);
	EXPECT_CLEAN(init_from_hand_back);
	set_clock(0);
	EXPECT_CLEAN(reuse_while_the_torn_down_callback_returns);
}

/* ---- a purgatory op initialised while the purgatory holds it ---- */

static bool never(struct tw_delayed_op *op)
{
	(void)op;
	return false;
}

static bool always(struct tw_delayed_op *op)
{
	(void)op;
	return true;
}

static void on_complete(struct tw_delayed_op *op)
{
	(void)op;
}

static const struct tw_op_ops waits = { .try_complete = never,
					.on_complete = on_complete };
static const struct tw_op_ops done_at_once = { .try_complete = always,
					       .on_complete = on_complete };

static struct tw_purgatory *manual_purgatory(void)
{
	struct tw_purgatory_config cfg = { .service = { .manual = true } };
	struct tw_purgatory *p = NULL;

	cfg.service.clock.now = virtual_clock;
	CHECK_EQ(tw_purgatory_create(&p, &cfg), 0);
	return p;
}

/* Initialise op with ops and watch it on key "k"; what the watch returned. */
static int init_and_watch(struct tw_purgatory *p, struct tw_delayed_op *op,
			  const struct tw_op_ops *ops, struct tw_watch *w)
{
	const void *key = "k";
	size_t len = 1;

	CHECK_EQ(tw_op_init(op, TW_S(1), ops, NULL), 0);
	return tw_purgatory_try_complete_else_watch(p, op, &key, &len, 1, w);
}

static void init_a_watched_op(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct tw_delayed_op op;
	struct tw_watch w;

	CHECK_EQ(init_and_watch(p, &op, &waits, &w), 0);
	tw_op_init(&op, TW_S(1), &waits, NULL); /* the mistake */
}

static void test_init_of_a_watched_op_is_named(void)
{
	EXPECT_ABORT_NAMING(init_a_watched_op, "tw_op_init(",
			    "still held by a purgatory", "on_release");
}

/* Released (completed at once, no other reference): the op is the
 * caller's again, and so is one whose purgatory is gone. */
static void op_reuse_done_right(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct tw_delayed_op op;
	struct tw_watch w;

	CHECK_EQ(init_and_watch(p, &op, &done_at_once, &w), 1);
	CHECK_EQ(init_and_watch(p, &op, &waits, &w), 0); /* released: reusable */
	tw_purgatory_destroy(p); /* hands it back: released */
	CHECK_EQ(tw_op_init(&op, TW_S(1), &waits, NULL), 0);
}

static void test_op_reuse_done_right_is_not_a_mistake(void)
{
	EXPECT_CLEAN(op_reuse_done_right);
}

/* ---- a wheel entered from a second thread ---- */

static struct tw_wheel wheel;
static struct tw_timer first, second, nested;
static pthread_barrier_t inside, leave;

static void on_first(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
	pthread_barrier_wait(&inside); /* the other thread may come in now */
	pthread_barrier_wait(&leave);
}

static void *second_thread(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&inside);
	tw_wheel_add(&wheel, &second, 100); /* the mistake */
	pthread_barrier_wait(&leave);
	return NULL;
}

static void wheel_from_two_threads(void)
{
	pthread_t th;

	pthread_barrier_init(&inside, NULL, 2);
	pthread_barrier_init(&leave, NULL, 2);
	CHECK_EQ(tw_wheel_init(&wheel, 1, 64, 0, TW_MODE_EXACT), 0);
	tw_timer_init(&first, on_first);
	tw_timer_init(&second, on_first);
	CHECK_EQ(tw_wheel_add(&wheel, &first, 5), 0);
	pthread_create(&th, NULL, second_thread, NULL);
	tw_wheel_advance(&wheel, 10);
	pthread_join(th, NULL);
}

static void nothing_on_wheel(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
}

static void on_nested(struct tw_wheel *w, struct tw_timer *t)
{
	(void)t;
	/* From a callback, on the wheel's own thread: allowed. */
	CHECK_EQ(tw_wheel_add(w, &second, tw_wheel_now(w) + 5), 0);
}

static void *next_owner(void *arg)
{
	(void)arg;
	CHECK_EQ(tw_wheel_advance(&wheel, 20), 1); /* fires second */
	return NULL;
}

static void wheel_handed_over_and_nested(void)
{
	pthread_t th;

	CHECK_EQ(tw_wheel_init(&wheel, 1, 64, 0, TW_MODE_EXACT), 0);
	tw_timer_init(&nested, on_nested);
	tw_timer_init(&second, nothing_on_wheel);
	CHECK_EQ(tw_wheel_add(&wheel, &nested, 5), 0);
	CHECK_EQ(tw_wheel_advance(&wheel, 10), 1);
	/* Another thread may use it once this one is out (a hand-over:
	 * pthread_create and join order the two). */
	pthread_create(&th, NULL, next_owner, NULL);
	pthread_join(th, NULL);
	CHECK_EQ(tw_wheel_destroy(&wheel), 0);
}

static void test_a_wheel_entered_by_a_second_thread_is_named(void)
{
	EXPECT_ABORT_NAMING(wheel_from_two_threads, "tw_wheel_add(",
			    "inside a call on another thread", "timer service");
}

static void test_nested_calls_on_the_wheels_thread_are_not_a_mistake(void)
{
	EXPECT_CLEAN(wheel_handed_over_and_nested);
}

/* ---- a wheel changed from its observer ---- */

static struct tw_timer watched_timer, other_timer;

/* on_event gets a const wheel and "must not change the wheel"
 * (inspect.h); this one does, through the caller's own pointer, when the
 * second timer is placed. */
static void changing_observer(void *arg, const struct tw_wheel *w,
			      const struct tw_event *ev)
{
	(void)w;
	if (ev->kind == TW_EV_PLACED && ev->timer == &other_timer)
		tw_wheel_cancel((struct tw_wheel *)arg, &watched_timer);
}

static void reading_observer(void *arg, const struct tw_wheel *w,
			     const struct tw_event *ev)
{
	int64_t when;

	(void)arg;
	(void)ev;
	/* Reading it is what an observer is for. */
	(void)tw_wheel_next_expiry(w, &when);
	(void)tw_wheel_count(w);
}

static const struct tw_observer changing = { changing_observer, &wheel };
static const struct tw_observer reading = { reading_observer, &wheel };

/* The wheel observed by o, the watched timer added, then the other one
 * (whose placing the changing observer answers with a cancel). */
static void add_both_observed(const struct tw_observer *o)
{
	CHECK_EQ(tw_wheel_init(&wheel, 1, 64, 0, TW_MODE_EXACT), 0);
	tw_timer_init(&watched_timer, nothing_on_wheel);
	tw_timer_init(&other_timer, nothing_on_wheel);
	tw_wheel_set_observer(&wheel, o);
	CHECK_EQ(tw_wheel_add(&wheel, &watched_timer, 5000), 0);
	CHECK_EQ(tw_wheel_add(&wheel, &other_timer, 6000), 0);
}

static void wheel_changed_by_its_observer(void)
{
	add_both_observed(&changing); /* the second add is the mistake */
}

static void wheel_read_by_its_observer(void)
{
	add_both_observed(&reading);
	CHECK_EQ(tw_wheel_cancel(&wheel, &watched_timer), 1);
	CHECK_EQ(tw_wheel_advance(&wheel, 7000), 1);
	/* Out of on_event, a change is fine again. */
	CHECK_EQ(tw_wheel_add(&wheel, &watched_timer, 8000), 0);
	CHECK_EQ(tw_wheel_destroy(&wheel), 0);
}

static void test_a_wheel_changed_by_its_observer_is_named(void)
{
	EXPECT_ABORT_NAMING(wheel_changed_by_its_observer, "tw_wheel_cancel(",
			    "observer", "must not change the wheel");
	EXPECT_CLEAN(wheel_read_by_its_observer);
}

/* ---- a wheel timer initialised while it is pending ---- */

static struct tw_timer reused;

static void init_a_pending_wheel_timer(void)
{
	CHECK_EQ(tw_wheel_init(&wheel, 1, 64, 0, TW_MODE_EXACT), 0);
	tw_timer_init(&reused, nothing_on_wheel);
	CHECK_EQ(tw_wheel_add(&wheel, &reused, 5000), 0);
	tw_timer_init(&reused, nothing_on_wheel); /* the mistake */
	tw_wheel_advance(&wheel, 10000); /* where a release build may crash */
}

static void init_a_pending_windowed_timer(void)
{
	CHECK_EQ(tw_wheel_init(&wheel, 1, 64, 0, TW_MODE_EXACT), 0);
	tw_timer_init(&reused, nothing_on_wheel);
	CHECK_EQ(tw_wheel_add_range(&wheel, &reused, 5000, 6000), 0);
	tw_timer_init(&reused, nothing_on_wheel); /* the mistake */
}

static void reinit_itself(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	tw_timer_init(t, nothing_on_wheel); /* no longer pending: fine */
}

/* Every way a timer stops being pending makes its init right again. */
static void wheel_timer_reuse_done_right(void)
{
	CHECK_EQ(tw_wheel_init(&wheel, 1, 64, 0, TW_MODE_KAFKA), 0);
	tw_timer_init(&reused, reinit_itself);
	CHECK_EQ(tw_wheel_add(&wheel, &reused, 5), 0);
	CHECK_EQ(tw_wheel_advance(&wheel, 10), 1); /* in its callback */
	tw_timer_init(&reused, nothing_on_wheel); /* after it fired */
	CHECK_EQ(tw_wheel_add(&wheel, &reused, 500), 0);
	CHECK_EQ(tw_wheel_reschedule(&wheel, &reused, 700), 1);
	CHECK_EQ(tw_wheel_cancel(&wheel, &reused), 1);
	tw_timer_init(&reused, nothing_on_wheel); /* after a cancel */
	CHECK_EQ(tw_wheel_add(&wheel, &reused, 500), 0);
	CHECK_EQ(tw_wheel_drain(&wheel, NULL), 1);
	tw_timer_init(&reused, nothing_on_wheel); /* after a drain */
	CHECK_EQ(tw_wheel_add(&wheel, &reused, 500), 0);
	CHECK_EQ(tw_wheel_destroy(&wheel), 0);
	tw_timer_init(&reused, nothing_on_wheel); /* after destroy */
}

static void test_init_of_a_pending_wheel_timer_is_named(void)
{
	EXPECT_ABORT_NAMING(init_a_pending_wheel_timer, "tw_timer_init(",
			    "pending in wheel", "tw_wheel_cancel()");
	EXPECT_ABORT_NAMING(init_a_pending_windowed_timer, "tw_timer_init(",
			    "pending in wheel");
	EXPECT_CLEAN(wheel_timer_reuse_done_right);
}

/* ---- a TW_EINVAL that says which argument ---- */

static void bad_arguments(void)
{
	struct tw_wheel w;
	struct tw_timer t;
	struct tw_service_timer st;
	struct tw_service *svc;
	struct tw_service_config cfg = { .shards = 5000 };

	CHECK_EQ(tw_wheel_init(&w, 0, 64, 0, TW_MODE_EXACT), TW_EINVAL);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_EINVAL);
	CHECK_EQ(tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT), 0);
	tw_timer_init(&t, NULL);
	CHECK_EQ(tw_wheel_add(&w, &t, 5), TW_EINVAL);
	tw_wheel_destroy(&w);
	/* A NULL service or purgatory, each call saying which. */
	tw_service_timer_init(&st, nothing);
	CHECK_EQ(tw_service_add_in(NULL, &st, 5), TW_EINVAL);
	CHECK_EQ(tw_service_reschedule_in(NULL, &st, 5), TW_EINVAL);
	CHECK_EQ(tw_service_cancel(NULL, &st), TW_EINVAL);
	CHECK_EQ(tw_service_cancel_sync(NULL, &st), TW_EINVAL);
	CHECK_EQ(tw_service_timer_shutdown(NULL, &st), TW_EINVAL);
	CHECK_EQ(tw_service_shutdown(NULL, NULL, NULL), TW_EINVAL);
	CHECK_EQ(tw_service_poll(NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(NULL, "k", 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_cancel_for_key(NULL, "k", 1, NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(NULL, NULL, 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_poll(NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_shutdown(NULL, NULL), TW_EINVAL);
	/* A purgatory's configuration: its own fields, then its service's. */
	{
		struct tw_purgatory *p = NULL;
		struct tw_purgatory_config pcfg = { .shards = 70000 };

		CHECK_EQ(tw_purgatory_create(NULL, NULL), TW_EINVAL);
		CHECK_EQ(tw_purgatory_create(&p, &pcfg), TW_EINVAL);
		pcfg.shards = 0;
		pcfg.service.tick = -1;
		CHECK_EQ(tw_purgatory_create(&p, &pcfg), TW_EINVAL);
		CHECK(p == NULL);
	}
}

static void test_einval_says_which_argument_and_goes_on(void)
{
	CHECK_EQ(in_child(bad_arguments), 0); /* refused, not aborted */
	CHECK(strstr(out, "tw_wheel_init: TW_EINVAL: tick must be at least 1, not 0"));
	CHECK(strstr(out, "tw_service_create: TW_EINVAL: cfg.shards must be at most 256"));
	CHECK(strstr(out, "tw_wheel_add: TW_EINVAL: the timer has no callback"));
	CHECK(strstr(out, "tw_service_add_in: TW_EINVAL: the service is NULL"));
	CHECK(strstr(out, "tw_service_reschedule_in: TW_EINVAL: the service is NULL"));
	CHECK(strstr(out, "tw_service_cancel: TW_EINVAL: the service is NULL"));
	CHECK(strstr(out, "tw_service_cancel_sync: TW_EINVAL: the service is NULL"));
	CHECK(strstr(out, "tw_service_timer_shutdown: TW_EINVAL: the service is NULL"));
	CHECK(strstr(out, "tw_service_shutdown: TW_EINVAL: the service is NULL"));
	CHECK(strstr(out, "tw_service_poll: TW_EINVAL: the service is NULL"));
	CHECK(strstr(out, "tw_purgatory_check_and_complete: TW_EINVAL: the purgatory is NULL"));
	CHECK(strstr(out, "tw_purgatory_cancel_for_key: TW_EINVAL: the purgatory is NULL"));
	CHECK(strstr(out, "tw_purgatory_poll: TW_EINVAL: the purgatory is NULL"));
	CHECK(strstr(out, "tw_purgatory_shutdown: TW_EINVAL: the purgatory is NULL"));
	CHECK(strstr(out, "tw_purgatory_create: TW_EINVAL: out is NULL"));
	CHECK(strstr(out, "tw_purgatory_create: TW_EINVAL: cfg.shards must be at most 65536, not 70000"));
	CHECK(strstr(out, "tw_service_create: TW_EINVAL: cfg.tick"));
	CHECK(strstr(out, "tw_purgatory_create: TW_EINVAL: cfg.service was refused"));
}

int main(void)
{
	RUN(test_init_of_a_held_timer_is_named);
	RUN(test_destroy_names_a_wiped_timer);
	RUN(test_add_after_timer_shutdown_is_named);
	RUN(test_reuse_done_right_is_not_a_mistake);
	RUN(test_init_of_a_watched_op_is_named);
	RUN(test_op_reuse_done_right_is_not_a_mistake);
	RUN(test_a_wheel_entered_by_a_second_thread_is_named);
	RUN(test_nested_calls_on_the_wheels_thread_are_not_a_mistake);
	RUN(test_init_of_a_pending_wheel_timer_is_named);
	RUN(test_a_wheel_changed_by_its_observer_is_named);
	RUN(test_einval_says_which_argument_and_goes_on);
	return check_report();
}
