/* SPDX-License-Identifier: MIT */
/*
 * cancel_sync returns when service.h says and reports what happened, the
 * reaper loses no wake-up, and shutdown runs nothing behind a caller's
 * back -- in the races around cancel_sync, the reaper and shutdown, each
 * driven deterministically through the named test points of the library
 * (tests/support/stop_points.h): a thread is parked at one step of the
 * protocol (src/service/core.h) -- the reaper's loop, cancel_sync's cancel
 * and its wait, shutdown's hand-back and drain -- the other side acts, and
 * the outcome is checked against what service.h promises: when
 * cancel_sync returns and what it reports, TW_EDEADLK only for a cycle of
 * waits, a reinit right after a plain cancel, a wake-up never lost,
 * nothing run behind shutdown's back. Nothing is timed: a bound of
 * seconds only turns a hang into a failure. A runner's claim and a
 * service's claim of a timer are in claims.c; one run at a time (adds
 * deferred to a run's end, timer_shutdown of a running timer) in
 * one_run_at_a_time.c. One test can be run alone by naming it:
 *   service_cancel_sync_and_teardown test_cancel_sync_waits_for_a_running_callback
 */
#define _POSIX_C_SOURCE 200809L

#include "forced_jobs.h"

/* ---- the reaper's lost wake-up ---- */

/* Due now: only a kick makes the sleeping reaper run it (a lost wake-up
 * leaves it asleep for good, which WAIT_FOR's guard reports). */
static void add_due_now_and_see_it_run(struct tw_service *svc, struct job *j)
{
	CHECK_EQ(tw_service_add(svc, &j->t, 1000), TW_OK);
	WAIT_FOR(atomic_load(&j->runs) == 1, "the kicked reaper never ran it");
	CHECK_EQ(atomic_load(&j->runs), 1);
}

static void *kick_thread(void *svc)
{
	tw_service_kick(svc);
	return NULL;
}

/*
 * A kick that lands at the top of the reaper's loop, before it clears its
 * flag, is used up by that round; it must not leave the reaper deaf to
 * later kicks (a lost wake-up sleeps for ever). Parked at the top of its
 * loop, the reaper gets one kick and a timer due now is added; both
 * timers, that one and one added once it sleeps, must run.
 */
static void test_reaper_keeps_waking_after_a_kick_at_its_loop_top(void)
{
	struct tw_service *svc = service(false, 0);
	struct sp_thread kicker;
	struct job a, b;
	int sleeping, top;

	job_init(&a);
	job_init(&b);
	/* First the reaper on its way to sleep (parked where it decides,
	 * past its clear): a kick that met a new reaper between the top of
	 * its first round and its clear was used up by that round, and the
	 * reaper slept with nothing to wake it (a loaded machine under TSan
	 * is that slow). The kick comes from a thread of its own: a reaper
	 * that reaches its first sleep first parks there holding reaper_mu,
	 * which the kick takes (the test's own kick hung there, 1 run in
	 * about 600 under TSan beside two busy loops). */
	sleeping = sp_arm("reaper.sleeping", svc);
	sp_spawn(&kicker, kick_thread, svc);
	CHECK(sp_wait(sleeping, NULL));
	top = sp_arm("reaper.loop_top", svc);
	sp_release(sleeping);
	sp_join(&kicker, "the first kick");
	tw_service_kick(svc);
	CHECK(sp_wait(top, NULL));
	CHECK_EQ(tw_service_add(svc, &a.t, 1000), TW_OK); /* kicks */
	sp_release(top);
	WAIT_FOR(atomic_load(&a.runs) == 1, "the first timer never ran");
	add_due_now_and_see_it_run(svc, &b);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), atomic_load(&b.runs) ? 0 : 1);
	tw_service_destroy(svc);
}

/*
 * A kick sets the reaper's flag, which the reaper clears at the top of its
 * loop and reads again before it sleeps: a kick (and an add's own kick)
 * that lands after the clear and before the scan must still make it go
 * round. Parked right after its clear, the reaper is kicked and a timer
 * due now is added; the timer must run, and once the reaper sleeps the
 * next add must wake it.
 */
static void test_a_kick_that_finds_one_pending_loses_no_timer(void)
{
	struct tw_service *svc = service(false, 0);
	struct job a, b;
	int cleared;

	job_init(&a);
	job_init(&b);
	cleared = sp_arm("reaper.cleared", svc);
	tw_service_kick(svc);
	CHECK(sp_wait(cleared, NULL));
	tw_service_kick(svc); /* pending again, the reaper not yet scanning */
	CHECK_EQ(tw_service_add(svc, &a.t, 1000), TW_OK); /* due now */
	sp_release(cleared);
	WAIT_FOR(atomic_load(&a.runs) == 1, "the timer added under a pending kick never ran");
	add_due_now_and_see_it_run(svc, &b);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/* ---- cancel_sync racing shutdown's hand-back ---- */

static atomic_int handed, handed_after_free;

static void hand_back_job(struct tw_service_timer *t, void *arg)
{
	struct job *j = tw_container_of(t, struct job, t);

	(void)arg;
	if (atomic_load(&j->freed))
		atomic_fetch_add(&handed_after_free, 1);
	atomic_fetch_add(&handed, 1);
}

static void *shutdown_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_shutdown(sj->svc, hand_back_job, NULL);
	return NULL;
}

/* cancel_sync said the timer may be freed: from here anything in the
 * service still using it reads garbage. */
static void *cancel_sync_then_free(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_cancel_sync(sj->svc, &sj->job->t);
	memset(&sj->job->t, 0xa5, sizeof(sj->job->t));
	atomic_store(&sj->job->freed, 1);
	return NULL;
}

/*
 * Shutdown moves the timer to IDLE in a private list before it hands it
 * back; a cancel_sync that found it IDLE and returned would let the owner
 * free it, and shutdown hand the freed timer back. cancel_sync waits
 * until the hand-back is over.
 */
static void test_cancel_sync_waits_for_shutdowns_hand_back(void)
{
	struct tw_service *svc = service(true, 0);
	struct job j;
	struct svc_job down = { svc, &j, 0 }, canceller = { svc, &j, 0 };
	struct sp_thread s, c;
	int at_hand_back, at_wait;

	job_init(&j);
	atomic_store(&handed, 0);
	atomic_store(&handed_after_free, 0);
	CHECK_EQ(tw_service_add(svc, &j.t, 5000), TW_OK);
	at_hand_back = sp_arm("shutdown.hand_back", &j.t);
	sp_spawn(&s, shutdown_thread, &down);
	CHECK(sp_wait(at_hand_back, &s.done));
	/* Taken for its hand_back (service.h): that add has ended, and a
	 * plain cancel and pending say so; the hand_back still comes. */
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_IDLE);
	CHECK(!tw_service_timer_pending(&j.t));
	at_wait = sp_arm("cancel_sync.wait", &j.t);
	sp_spawn(&c, cancel_sync_then_free, &canceller);
	/* It waits: a return at once would free the timer under shutdown. */
	CHECK(sp_wait(at_wait, &c.done));
	sp_release(at_wait);
	sp_release(at_hand_back);
	sp_join(&s, "shutdown");
	sp_join(&c, "cancel_sync");
	CHECK_EQ(down.result, 1);
	CHECK_EQ(atomic_load(&handed), 1);
	CHECK_EQ(atomic_load(&handed_after_free), 0);
	CHECK_EQ(canceller.result, TW_SVC_IDLE); /* shutdown claimed it */
	tw_service_destroy(svc);
}

/* ---- a hand-back that gives its timer to another service ---- */

static struct tw_service *other_service;

/* The timer's callback on the other service: it cancels itself (a run
 * going on: TW_SVC_RUNNING) and holds until the test lets it go. */
static void cancel_myself_and_hold(struct tw_service *svc, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, t);

	atomic_store(&j->result, tw_service_cancel(svc, t));
	atomic_store(&j->in_callback, 1);
	while (!atomic_load(&j->go))
		sched_yield();
	atomic_store(&j->finished, 1);
}

/* A hand_back may initialise its timer (service.h): this one makes it
 * the other service's, due now. */
static void give_to_the_other_service(struct tw_service_timer *t, void *arg)
{
	(void)arg;
	tw_service_timer_init(t, cancel_myself_and_hold);
	CHECK_EQ(tw_service_add(other_service, t, 1000), TW_OK);
}

static void *shutdown_giving_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_shutdown(sj->svc, give_to_the_other_service, NULL);
	return NULL;
}

static void *cancel_sync_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_cancel_sync(sj->svc, &sj->job->t);
	return NULL;
}

/*
 * A cancel_sync on A waits for A's shutdown to hand the timer back; the
 * hand_back makes it B's, and B's callback of it runs, cancels itself and
 * holds. The waiter must return once the hand_back has, without taking
 * B's word for A's: it read B's runner as one of A's and cleared the
 * mark of B's run going on, so that a cancel_sync on B returned at once,
 * the callback still running (or, where B's runner was past A's, read
 * beyond A's runners).
 */
static void test_cancel_sync_leaves_a_timer_handed_to_another_service_alone(void)
{
	struct tw_service *a = service(true, 0);
	struct job j;
	struct svc_job down = { a, &j, -1 }, on_a = { a, &j, -1 }, on_b;
	struct sp_thread s, x, y;
	int at_hand_back, at_wait;

	other_service = service(false, 1);
	job_init(&j);
	CHECK_EQ(tw_service_add(a, &j.t, 5000), TW_OK);
	at_hand_back = sp_arm("shutdown.hand_back", &j.t);
	sp_spawn(&s, shutdown_giving_thread, &down);
	CHECK(sp_wait(at_hand_back, &s.done));
	at_wait = sp_arm("cancel_sync.wait", &j.t);
	sp_spawn(&x, cancel_sync_thread, &on_a);
	CHECK(sp_wait(at_wait, &x.done)); /* it waits for the hand-back */
	sp_release(at_hand_back);
	WAIT_FOR(atomic_load(&j.in_callback), "the other service never ran the timer");
	sp_join(&s, "shutdown");
	sp_release(at_wait);
	sp_join(&x, "cancel_sync on A");
	CHECK_EQ(on_a.result, TW_SVC_IDLE); /* handed back */
	on_b = (struct svc_job){ other_service, &j, -1 };
	sp_spawn(&y, cancel_sync_thread, &on_b);
	nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	CHECK(!atomic_load(&y.done)); /* it waits for the callback */
	atomic_store(&j.go, 1);
	sp_join(&y, "cancel_sync on B");
	CHECK_EQ(on_b.result, TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&j.result), TW_SVC_RUNNING);
	CHECK_EQ(down.result, 1);
	tw_service_destroy(other_service);
	tw_service_destroy(a);
}

/* A hand_back that initialises its timer (and, told so, adds it to the
 * other service, due later), then holds until the test lets it return. */
static atomic_int reinit_and_add, reinitialised, hand_back_go, hand_back_over;

static void reinit_then_hold(struct tw_service_timer *t, void *arg)
{
	(void)arg;
	tw_service_timer_init(t, job_run);
	if (atomic_load(&reinit_and_add))
		CHECK_EQ(tw_service_add(other_service, t, 9000), TW_OK);
	atomic_store(&reinitialised, 1);
	while (!atomic_load(&hand_back_go))
		sched_yield();
	atomic_store(&hand_back_over, 1);
}

static void *shutdown_reinit_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_shutdown(sj->svc, reinit_then_hold, NULL);
	return NULL;
}

static void *cancel_sync_then_look(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_cancel_sync(sj->svc, &sj->job->t);
	atomic_store(&sj->job->finished, atomic_load(&hand_back_over));
	return NULL;
}

/*
 * The same wait, the hand_back's init (and add elsewhere) made before the
 * waiter's first look: parked between its cancel (IDLE: being handed
 * back) and its wait, the cancel_sync finds the word no longer its
 * service's, which it took for a timer never added there and returned,
 * the hand_back still running. It must wait by its service's runners'
 * marks as it does when the init comes during the wait.
 */
static void test_cancel_sync_waits_for_a_hand_back_that_initialises_its_timer(void)
{
	for (int add = 0; add <= 1; add++) {
		struct tw_service *a = service(true, 0);
		struct job j;
		struct svc_job down = { a, &j, -1 }, on_a = { a, &j, -1 };
		struct sp_thread s, x;
		int at_hand_back, cancelled, at_wait;

		other_service = service(true, 0);
		atomic_store(&reinit_and_add, add);
		atomic_store(&reinitialised, 0);
		atomic_store(&hand_back_go, 0);
		atomic_store(&hand_back_over, 0);
		job_init(&j);
		CHECK_EQ(tw_service_add(a, &j.t, 5000), TW_OK);
		at_hand_back = sp_arm("shutdown.hand_back", &j.t);
		sp_spawn(&s, shutdown_reinit_thread, &down);
		CHECK(sp_wait(at_hand_back, &s.done));
		cancelled = sp_arm("cancel_sync.cancelled", &j.t);
		sp_spawn(&x, cancel_sync_then_look, &on_a);
		CHECK(sp_wait(cancelled, &x.done));
		sp_release(at_hand_back);
		WAIT_FOR(atomic_load(&reinitialised), "the hand_back never ran");
		at_wait = sp_arm("cancel_sync.wait", &j.t);
		sp_release(cancelled);
		CHECK(sp_wait(at_wait, &x.done)); /* it waits: the hand_back runs */
		atomic_store(&hand_back_go, 1);
		sp_release(at_wait);
		sp_join(&s, "shutdown");
		sp_join(&x, "cancel_sync");
		CHECK_EQ(on_a.result, TW_SVC_IDLE);
		CHECK_EQ(atomic_load(&j.finished), 1); /* after the hand_back */
		CHECK_EQ(down.result, 1);
		CHECK_EQ(tw_service_shutdown(other_service, NULL, NULL), add);
		tw_service_destroy(other_service);
		tw_service_destroy(a);
	}
}

/* ---- a question about a timer racing its service's destroy ---- */

static void *pending_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_timer_pending(&sj->job->t);
	return NULL;
}

static void *destroy_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_destroy(sj->svc);
	return NULL;
}

/*
 * tw_service_timer_pending() takes no service ("any thread"): for a timer
 * whose run is over (its word still TAKEN) it finds the service by the
 * timer's owner id and looks at its runner's slot. A destroy on another
 * thread between that lookup and that look freed the service under it (a
 * use after free; a crash in the release build). Parked between the two,
 * the question must outlast the destroy that starts meanwhile.
 */
static void test_pending_outlasts_a_racing_destroy(void)
{
	struct tw_service *svc = service(true, 0);
	struct job j;
	struct svc_job asker = { svc, &j, -1 }, destroyer = { svc, &j, -1 };
	struct sp_thread a, d;
	int found;

	job_init(&j);
	set_clock(1000);
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1); /* ran: its word stays TAKEN */
	found = sp_arm("pending.found", &j.t);
	sp_spawn(&a, pending_thread, &asker);
	CHECK(sp_wait(found, &a.done));
	sp_spawn(&d, destroy_thread, &destroyer);
	/* Time for the destroy to free the service, if it does not wait. */
	nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	sp_release(found);
	sp_join(&a, "pending");
	sp_join(&d, "destroy");
	CHECK_EQ(asker.result, 0); /* it ran: not pending */
	CHECK_EQ(destroyer.result, TW_OK);
}

/*
 * The same question, its timer added again and expired meanwhile: parked
 * at that point, the timer's run over (word TAKEN), it is added again and
 * polled while the only executor is held at the end of the last run, so
 * it waits in the executors' queue (QUEUED), its place an index in their
 * ring. The question must say pending, from the word read again under the
 * shard's mutex (read without it, the place was taken for a batch slot:
 * false, or a read past the runner).
 */
static void test_pending_of_a_timer_added_again_while_asked(void)
{
	struct tw_service *svc = service(true, 1);
	struct job j;
	struct svc_job asker = { svc, &j, -1 };
	struct sp_thread a;
	int over, found;

	job_init(&j);
	set_clock(1000);
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	over = sp_arm("run.over", &j.t);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(sp_wait(over, NULL)); /* ran; the executor held */
	found = sp_arm("pending.found", &j.t);
	sp_spawn(&a, pending_thread, &asker);
	CHECK(sp_wait(found, &a.done));
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1); /* queued for the held executor */
	sp_release(found);
	sp_join(&a, "pending");
	CHECK_EQ(asker.result, 1);
	sp_release(over);
	WAIT_FOR(atomic_load(&j.runs) == 2, "the add again never ran");
	CHECK_EQ(tw_service_cancel_sync(svc, &j.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/* ---- cancel_sync on a one-executor service ---- */

static void cancel_other_sync(struct tw_service *svc, struct job *self)
{
	atomic_store(&self->result, tw_service_cancel_sync(svc, &self->other->t));
	atomic_store(&self->finished, 1);
}

/*
 * The only executor runs x, whose callback cancel_syncs y (expired, taken
 * into the same batch behind x: the cancel takes its batch slot back).
 * Meanwhile y is re-added and expires again, waiting for this very
 * executor; cancel_sync must not wait for that expiry, which only this
 * executor could run. A re-added timer is the new add's: there is nothing
 * to wait for.
 */
static void test_cancel_sync_does_not_wait_for_a_readded_timer(void)
{
	struct tw_service *svc = service(true, 1);
	struct job x, y;
	int cancelled;

	job_init(&x);
	job_init(&y);
	x.action = cancel_other_sync;
	x.other = &y;
	atomic_store(&x.result, -1000);
	/* One thread's adds due at one tick expire in the order added. */
	CHECK_EQ(tw_service_add(svc, &x.t, 1000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &y.t, 1000), TW_OK);
	cancelled = sp_arm("cancel_sync.cancelled", &y.t);
	CHECK_EQ(tw_service_poll(svc), 2); /* x then y queued */
	CHECK(sp_wait(cancelled, NULL));
	/* y is IDLE, stopped before its turn: add it again, expire it. */
	CHECK_EQ(tw_service_add(svc, &y.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	sp_release(cancelled);
	WAIT_FOR(atomic_load(&x.finished), "cancel_sync waited for itself");
	CHECK_EQ(atomic_load(&x.result), TW_SVC_STOPPED);
	WAIT_FOR(atomic_load(&y.runs) == 1, "the re-added timer never ran");
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&y.runs), 1);
	tw_service_destroy(svc);
}

/* ---- cancel_sync of a callback that is running ---- */

static void run_until_go(struct tw_service *svc, struct job *self)
{
	(void)svc;
	atomic_store(&self->in_callback, 1);
	while (!atomic_load(&self->go))
		sched_yield();
	atomic_store(&self->finished, 1);
}

/* At "cancel_sync.wait", on the cancelling thread: only now may the
 * callback end. */
static void let_the_callback_end(const void *obj, void *arg)
{
	(void)obj;
	atomic_store(&((struct job *)arg)->go, 1);
}

/*
 * The only executor runs x's callback; a cancel_sync of x from another
 * thread says it was running and returns only once the callback has
 * ended. The callback is let go when cancel_sync is about to wait, so
 * the outcome does not depend on how long either thread was off the CPU
 * (a version on the real clock let it go 50 ms after the cancel began,
 * and a cancelling thread preempted for longer found x IDLE).
 */
static void test_cancel_sync_waits_for_a_running_callback(void)
{
	struct tw_service *svc = service(true, 1);
	struct job x;

	job_init(&x);
	x.action = run_until_go;
	CHECK_EQ(tw_service_add(svc, &x.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1); /* queued for the executor */
	WAIT_FOR(atomic_load(&x.in_callback), "the executor never ran x");
	sp_on("cancel_sync.wait", &x.t, let_the_callback_end, &x);
	CHECK_EQ(tw_service_cancel_sync(svc, &x.t), TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&x.finished), 1); /* it waited for the end */
	CHECK_EQ(tw_service_cancel_sync(svc, &x.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&x.runs), 1);
	tw_service_destroy(svc);
}

/* ---- cancel_sync of a timer from its own callback ---- */

static atomic_int self_result;

static void cancel_self_and_free(struct tw_service *svc, struct job *self)
{
	atomic_store(&self->in_callback, 1);
	while (!atomic_load(&self->go))
		sched_yield();
	atomic_store(&self_result, tw_service_cancel_sync(svc, &self->t));
	atomic_fetch_add(&self->finished, 1);
	free(self); /* a one-shot callback may free its timer as its last act */
}

/*
 * While x's callback runs on the only executor, another thread adds x
 * again: the add is deferred to the run's end (one run at a time). The
 * callback then cancel_syncs itself -- which stops that deferred add
 * (TW_SVC_STOPPED) and does not wait for itself -- and frees x, as
 * service.h allows a one-shot callback after cancel_sync. Nothing in the
 * service may touch x after that: not the run's end, not a poll, not
 * shutdown (ASan sees any touch).
 */
static void test_cancel_sync_of_self_unlinks_and_reports(void)
{
	struct tw_service *svc = service(true, 1);
	struct job *x = malloc(sizeof(*x));
	struct tw_service_stats st;

	job_init(x);
	x->action = cancel_self_and_free;
	atomic_store(&self_result, -1000);
	CHECK_EQ(tw_service_add(svc, &x->t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&x->in_callback), "the callback never ran");
	CHECK_EQ(tw_service_add(svc, &x->t, 1050), TW_OK);
	atomic_store(&x->go, 1);
	WAIT_FOR(atomic_load(&self_result) != -1000, "cancel_sync(self) hung");
	CHECK_EQ(atomic_load(&self_result), TW_SVC_STOPPED);
	/* x is freed: nothing in the service may touch it (ASan would say). */
	atomic_store(&virtual_now, 1100);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_count(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 2);
	CHECK_EQ(st.ran, 1);
	CHECK_EQ(st.stopped, 1);
	tw_service_destroy(svc);
}

/* ---- two callbacks that cancel_sync each other ---- */

static atomic_int both_running;

static void meet_then_cancel_other(struct tw_service *svc, struct job *self)
{
	atomic_fetch_add(&both_running, 1);
	while (atomic_load(&both_running) < 2)
		sched_yield();
	atomic_store(&self->result, tw_service_cancel_sync(svc, &self->other->t));
	atomic_store(&self->finished, 1);
}

static void test_cancel_sync_cycle_is_an_error_not_a_hang(void)
{
	struct tw_service *svc = service(true, 2);
	struct job a, b;
	int ra, rb;

	job_init(&a);
	job_init(&b);
	a.action = b.action = meet_then_cancel_other;
	a.other = &b;
	b.other = &a;
	atomic_store(&both_running, 0);
	CHECK_EQ(tw_service_add(svc, &a.t, 1000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &b.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 2);
	WAIT_FOR(atomic_load(&a.finished) && atomic_load(&b.finished),
		 "two callbacks cancel_sync each other");
	ra = atomic_load(&a.result);
	rb = atomic_load(&b.result);
	/* At least one sees the cycle; the other may wait for it to end. */
	CHECK(ra == TW_EDEADLK || rb == TW_EDEADLK);
	CHECK(ra == TW_EDEADLK || ra == TW_SVC_RUNNING);
	CHECK(rb == TW_EDEADLK || rb == TW_SVC_RUNNING);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/* ---- re-initialising a timer after a plain cancel ---- */

static void block_until_go(struct tw_service *svc, struct job *self)
{
	(void)svc;
	atomic_store(&self->in_callback, 1);
	while (!atomic_load(&self->go))
		sched_yield();
	atomic_store(&self->finished, 1);
}

static void second_fn(struct tw_service *svc, struct tw_service_timer *t)
{
	job_run(svc, t);
}

/*
 * x expired and waits on its shard's expired list behind a busy executor;
 * a plain cancel unlinks it (TW_SVC_STOPPED), and tw_service_timer_reinit()
 * gives it a new callback right after (service.h: "Safe right after a
 * plain tw_service_cancel()"). Re-added and expired again, it is refused
 * a reinit while it waits to run (TW_EBUSY: that would race the
 * executor), and runs once, with the new callback.
 */
static void test_reinit_after_plain_cancel_runs_once(void)
{
	struct tw_service *svc = service(true, 1);
	struct job blocker, x;

	job_init(&blocker);
	blocker.action = block_until_go;
	job_init(&x);
	CHECK_EQ(tw_service_add(svc, &blocker.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&blocker.in_callback), "the blocker never ran");
	CHECK_EQ(tw_service_add(svc, &x.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1); /* x waits for the executor */
	CHECK(tw_service_timer_pending(&x.t));
	CHECK_EQ(tw_service_cancel(svc, &x.t), TW_SVC_STOPPED);
	CHECK(!tw_service_timer_pending(&x.t));
	CHECK_EQ(tw_service_timer_reinit(&x.t, second_fn), TW_OK);
	CHECK_EQ(tw_service_add(svc, &x.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1); /* a new expiry: the stopped one left nothing */
	/* Not while it is pending: that would race the executor. */
	CHECK_EQ(tw_service_timer_reinit(&x.t, second_fn), TW_EBUSY);
	CHECK_EQ(tw_service_timer_reinit(NULL, second_fn), TW_EINVAL);
	atomic_store(&blocker.go, 1);
	WAIT_FOR(atomic_load(&x.runs) == 1, "the re-added timer never ran");
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&x.runs), 1);
	tw_service_destroy(svc);
}

/*
 * A cancel unlinks a pending timer from its shard's wheel at once, under
 * the shard's mutex: count leaves it out, a second cancel finds it IDLE,
 * a re-add files it again, a cancel_sync of it returns at once and the
 * owner may free it (ASan sees any later touch), and a poll past the
 * stopped timers' due time runs only the live ones.
 */
static void test_a_cancel_unlinks_the_timer_at_once(void)
{
	struct tw_service *svc = service(true, 0);
	struct job *heap = malloc(sizeof(*heap));
	struct job a, b, left;
	struct tw_service_stats st;

	job_init(heap);
	job_init(&a);
	job_init(&b);
	job_init(&left);
	CHECK_EQ(tw_service_add(svc, &heap->t, 5000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &a.t, 5000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &b.t, 5000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &left.t, 5000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_count(svc), 4);
	CHECK_EQ(tw_service_cancel(svc, &left.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_count(svc), 3);
	CHECK_EQ(tw_service_cancel(svc, &heap->t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &a.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &a.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_count(svc), 1);
	CHECK_EQ(tw_service_add(svc, &a.t, 4000), TW_OK); /* filed again */
	CHECK_EQ(tw_service_count(svc), 2);
	CHECK_EQ(tw_service_cancel_sync(svc, &heap->t), TW_SVC_IDLE);
	memset(heap, 0xa5, sizeof(*heap));
	free(heap); /* ASan: any later touch of it is reported */
	CHECK_EQ(tw_service_count(svc), 2);
	atomic_store(&virtual_now, 6000);
	CHECK_EQ(tw_service_poll(svc), 2);  /* a and b, nothing stopped */
	CHECK_EQ(atomic_load(&a.runs), 1);
	CHECK_EQ(atomic_load(&b.runs), 1);
	CHECK_EQ(atomic_load(&left.runs), 0);
	CHECK_EQ(tw_service_count(svc), 0);
	CHECK_EQ(tw_service_cancel_sync(svc, &left.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 5);
	CHECK_EQ(st.ran, 2);
	CHECK_EQ(st.stopped, 3);
	tw_service_destroy(svc);
}

/* ---- a poll that passed the closing check ---- */
/*
 * A poll that had read "not closing" went on after shutdown had begun: it
 * could expire a timer shutdown meant to hand back and run its callback
 * after shutdown returned.
 */
static void test_no_poll_once_shutdown_began(void)
{
	struct tw_service *svc = service(true, 0);
	struct job j;
	struct poller pl = { svc, -1000 };
	struct svc_job down = { svc, &j, -1000 };
	struct sp_thread p, s;
	int entered, draining;

	job_init(&j);
	atomic_store(&handed, 0);
	atomic_store(&handed_after_free, 0);
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK); /* due now */
	entered = sp_arm("poll.enter", svc);
	sp_spawn(&p, poll_thread, &pl);
	CHECK(sp_wait(entered, &p.done));
	draining = sp_arm("shutdown.drain", svc);
	sp_spawn(&s, shutdown_thread, &down);
	CHECK(sp_wait(draining, &s.done));
	sp_release(entered);
	sp_join(&p, "poll");
	sp_release(draining);
	sp_join(&s, "shutdown");
	CHECK_EQ(pl.result, TW_ESHUTDOWN);
	CHECK_EQ(atomic_load(&j.runs), 0);
	CHECK_EQ(down.result, 1); /* handed back, not run behind its back */
	tw_service_destroy(svc);
}

int main(int argc, char **argv)
{
	races_only = argc > 1 ? argv[1] : NULL;
	sp_install();
	RUN_SELECTED(test_reaper_keeps_waking_after_a_kick_at_its_loop_top);
	RUN_SELECTED(test_a_kick_that_finds_one_pending_loses_no_timer);
	RUN_SELECTED(test_cancel_sync_waits_for_shutdowns_hand_back);
	RUN_SELECTED(test_pending_outlasts_a_racing_destroy);
	RUN_SELECTED(test_pending_of_a_timer_added_again_while_asked);
	RUN_SELECTED(test_cancel_sync_leaves_a_timer_handed_to_another_service_alone);
	RUN_SELECTED(test_cancel_sync_waits_for_a_hand_back_that_initialises_its_timer);
	RUN_SELECTED(test_cancel_sync_waits_for_a_running_callback);
	RUN_SELECTED(test_cancel_sync_does_not_wait_for_a_readded_timer);
	RUN_SELECTED(test_cancel_sync_of_self_unlinks_and_reports);
	RUN_SELECTED(test_cancel_sync_cycle_is_an_error_not_a_hang);
	RUN_SELECTED(test_reinit_after_plain_cancel_runs_once);
	RUN_SELECTED(test_a_cancel_unlinks_the_timer_at_once);
	RUN_SELECTED(test_no_poll_once_shutdown_began);
	return races_report();
}
