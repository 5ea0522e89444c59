/* SPDX-License-Identifier: MIT */
/*
 * Every service row of docs/bad-input.md, as the wheel's in
 * tests/wheel/bad_input.c: the bad call gets its documented result and
 * the bystanders (service timers kept pending meanwhile) run exactly
 * once; calls from a callback, after shutdown, and the destroy of a
 * service that lost a timer (S8) included.
 */

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "virtual_clock.h"

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
	bad.wheel_size = 0, bad.shards = 5000;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);
	bad.shards = 0, bad.tick = -1;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);
	bad.tick = 0, bad.executors = 5000;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);
	bad.executors = 0, bad.wheel_size = TW_WHEEL_SIZE_MAX + 1;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);
	/* Not a mode: a bad parameter, not an allocation that failed. */
	bad.wheel_size = 0, bad.mode = (enum tw_mode)7;
	CHECK_EQ(tw_service_create(&none, &bad), TW_EINVAL);
	CHECK(none == NULL);

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
	{
		/* A service with a reaper is not polled: its reaper and the
		 * poll would both be its scanner (and lose timers). */
		struct tw_service *reaped = NULL;

		CHECK_EQ(tw_service_create(&reaped, NULL), TW_OK);
		CHECK_EQ(tw_service_poll(reaped), TW_EINVAL);
		CHECK_EQ(tw_service_destroy(reaped), TW_OK);
	}
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
	/* A NULL timer is TW_EINVAL before the sum is looked at. */
	CHECK_EQ(tw_service_add_in(svc, NULL, INT64_MAX), TW_EINVAL);
	CHECK_EQ(tw_service_reschedule_in(svc, NULL, INT64_MAX), TW_EINVAL);
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
	/* A call that fails changes nothing: the refused adds and the
	 * reschedule left t no service's, and another service takes it. */
	{
		struct tw_service_config cfg = { .tick = 1, .manual = true };
		struct tw_service *live = NULL;

		cfg.clock.now = virtual_clock;
		CHECK_EQ(tw_service_create(&live, &cfg), 0);
		CHECK_EQ(tw_service_add(live, &t, 5), TW_OK);
		CHECK_EQ(tw_service_cancel(live, &t), TW_SVC_STOPPED);
		CHECK_EQ(tw_service_reschedule(svc, &t, 5), TW_EOWNER);
		CHECK_EQ(tw_service_destroy(live), 0);
	}
	CHECK_EQ(tw_service_count(svc), 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(atomic_load(&sbys[i].ran), 0);
	tw_service_destroy(svc);
}

/* S8: a timer wiped while its service holds it. The release build cannot
 * see the init (the timer's memory before its first init may be
 * anything); the checked build names tw_service_timer_init() at the call
 * (tests/library/checked_build.c), so here it is wiped by a memset
 * (memory reused) that no build can see. A shutdown that followed the
 * wiped links would crash on a bucket that links a wiped timer, and loop
 * for ever on one that links the timer twice (wiped, then added again).
 * destroy returns TW_ECORRUPT (the checked build aborts naming the
 * timer), and always returns, whether a poll ran between the add and the
 * wipe or not. */
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
	WIPED_ADDED,               /* wiped once added */
	WIPED_ADDED_READDED,       /* then added again: linked twice */
	WIPED_POLLED,              /* wiped after a poll */
	WIPED_POLLED_READDED,      /* then added again */
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
	if (c == WIPED_POLLED || c == WIPED_POLLED_READDED)
		CHECK_EQ(tw_service_poll(svc), 0);
	wipe(&t);
	if (c == WIPED_ADDED_READDED || c == WIPED_POLLED_READDED)
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
			 * library returns at once. */
			alarm(120);
#ifdef TW_DEBUG
			close(STDERR_FILENO); /* the abort's message: checked_build.c's */
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
	RUN(test_service_bad_input);
	RUN(test_service_calls_from_a_callback);
	RUN(test_service_after_shutdown);
	RUN(test_destroy_of_a_service_that_lost_a_timer);
	return check_report();
}
