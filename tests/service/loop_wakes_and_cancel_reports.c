/* SPDX-License-Identifier: MIT */
/*
 * A manual service's loop is woken for what it could not see, and a
 * cancel reports TW_SVC_RUNNING only for a run: two promises of
 * service.h, forced through the test points as in
 * cancels_across_services.c:
 *   - a manual service's loop is woken (tw_service_set_wake) by what its
 *     last question could not see: an executor's re-arm of a periodic
 *     timer (once its run is over, never inside it), an add from another
 *     thread, once per question, never by the polling thread itself;
 *   - what a cancel reports around a runner's claim of a timer it took
 *     into its batch: TW_SVC_RUNNING only for a callback that runs or
 *     ran, never for an expiry a cancel took back -- whether the runner
 *     holds it in its batch, has stored its running mark to claim it, or
 *     has given its lost claim up;
 * and the header's sentence that cancel_sync returns when the callback it
 * waits for adds its timer again. One test can be run alone by naming it:
 *   service_loop_wakes_and_cancel_reports test_an_executors_rearm_wakes_the_loop
 */
#define _POSIX_C_SOURCE 200809L

#include "forced_jobs_quiet.h"

/* Shut down (handed timers handed back), every add ended once, gone. */
static void shut_down_balanced(struct tw_service *svc, int64_t handed)
{
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), handed);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

/* ---- waking the loop ---- */

/* The loop's eventfd: a count of wakes the loop has not read yet. */
struct wake_count {
	atomic_int unread, calls;
};

static void wake_counted(void *arg)
{
	struct wake_count *w = arg;

	atomic_fetch_add(&w->unread, 1);
	atomic_fetch_add(&w->calls, 1);
}

/* The loop reads its wake-up before it asks (service.h says why). */
static void read_wakes(struct wake_count *w)
{
	atomic_store(&w->unread, 0);
}

#define PERIOD 100  /* ten ticks of service()'s clock */
#define ROUNDS 20

struct held_periodic {
	struct tw_service_periodic p;
	atomic_int runs;   /* callbacks started */
	atomic_int go;     /* runs the loop has let return */
};

/* Returns only once the loop has asked its question during this run. */
static void held_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct held_periodic *h = tw_container_of(t, struct held_periodic, p.timer);
	int run = atomic_fetch_add(&h->runs, 1) + 1;

	(void)svc;
	WAIT_FOR(atomic_load(&h->go) >= run, "the loop never let the run return");
}

/*
 * service.h, tw_service_next_expiry() / tw_service_timeout(): a loop that
 * sleeps for what they say misses nothing. A manual service with one
 * executor and a periodic timer: each poll queues the run for the
 * executor; the loop asks while the run is under way (the timer is in no
 * wheel: "nothing pending", -1) and sleeps. A re-arm that told nobody
 * would let the loop sleep past every later run (a loop like this one: 3
 * runs in 3 s instead of about 150). The re-arm calls the loop's wake-up
 * (tw_service_set_wake), once per question, and the loop's next question
 * has the period's due time.
 */
static void test_an_executors_rearm_wakes_the_loop(void)
{
	struct tw_service *svc = service(true, 1);
	struct wake_count w = { 0 };
	struct held_periodic h;
	int64_t now = 1000;

	memset(&h, 0, sizeof(h));
	CHECK_EQ(tw_service_set_wake(svc, wake_counted, &w), TW_OK);
	tw_service_periodic_init(&h.p, held_run, PERIOD);
	CHECK_EQ(tw_service_add(svc, &h.p.timer, now), TW_OK);
	CHECK_EQ(atomic_load(&w.calls), 1); /* another thread's add, for the loop */
	for (int round = 1; round <= ROUNDS; round++) {
		read_wakes(&w);
		CHECK_EQ(tw_service_poll(svc), 1); /* queued for the executor */
		WAIT_FOR(atomic_load(&h.runs) == round, "the executor never ran it");
		/* The run is under way, the timer in no wheel. */
		CHECK_EQ(tw_service_timeout(svc, now), -1);
		atomic_store(&h.go, round);
		/* The loop sleeps "for ever": only the wake-up ends it. */
		WAIT_FOR(atomic_load(&w.unread) > 0,
			 "the executor's re-arm never woke the loop");
		read_wakes(&w);
		CHECK_EQ(tw_service_timeout(svc, now), PERIOD);
		now += PERIOD;
		set_clock(now);
	}
	CHECK_EQ(atomic_load(&h.runs), ROUNDS);
	CHECK_EQ(atomic_load(&w.calls), 1 + ROUNDS); /* one per re-arm */
	CHECK_EQ(tw_service_cancel(svc, &h.p.timer), TW_SVC_STOPPED);
	shut_down_balanced(svc, 0);
}

/* A one-shot whose callback, on its first run, adds its own timer again
 * 100 ahead and then waits until the loop has asked its question. */
struct readder {
	struct tw_service_timer t;
	atomic_int runs, readded, go;
};

static void readd_then_hold(struct tw_service *svc, struct tw_service_timer *t)
{
	struct readder *r = tw_container_of(t, struct readder, t);

	if (atomic_fetch_add(&r->runs, 1) == 0) {
		CHECK_EQ(tw_service_add(svc, t, tw_service_now(svc) + PERIOD), TW_OK);
		atomic_store(&r->readded, 1);
		WAIT_FOR(atomic_load(&r->go), "the loop never let the run return");
	}
}

/*
 * service.h, tw_service_set_wake(): a wake is never lost. A manual service
 * with one executor; a callback there adds its own timer again, for later.
 * That add waits for the run's end (it is never filed beside its run), so
 * the loop's question during the run cannot see it -- and the run's end,
 * which files it, must wake the loop (or the loop sleeps past the
 * timer).
 */
static void test_an_add_during_its_run_wakes_the_loop_when_filed(void)
{
	struct tw_service *svc = service(true, 1);
	struct wake_count w = { 0 };
	struct readder r;

	memset(&r, 0, sizeof(r));
	CHECK_EQ(tw_service_set_wake(svc, wake_counted, &w), TW_OK);
	tw_service_timer_init(&r.t, readd_then_hold);
	CHECK_EQ(tw_service_add(svc, &r.t, 1000), TW_OK);
	read_wakes(&w);
	CHECK_EQ(tw_service_poll(svc), 1); /* queued for the executor */
	WAIT_FOR(atomic_load(&r.readded), "the callback never added itself");
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), -1); /* waits for the run's end */
	atomic_store(&r.go, 1);
	WAIT_FOR(atomic_load(&w.unread) > 0,
		 "the run's end filed the add and never woke the loop");
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), PERIOD);
	set_clock(1000 + PERIOD);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.runs) == 2, "the added timer never ran");
	shut_down_balanced(svc, 0);
}

struct adder {
	struct tw_service *svc;
	struct job *a, *b;
};

static void *add_two(void *arg)
{
	struct adder *ad = arg;

	CHECK_EQ(tw_service_add(ad->svc, &ad->a->t, 1050), TW_OK);
	CHECK_EQ(tw_service_add(ad->svc, &ad->b->t, 1030), TW_OK);
	return NULL;
}

/*
 * service.h, tw_service_set_wake(): an add from another thread after the
 * loop's question wakes it, once per question. The loop asked (nothing
 * pending) and sleeps; another thread adds two timers: one wake. The
 * second add found the wake on its way; the loop's next question has both
 * (the earlier, 1030: timeout 30). After that question the next add wakes
 * the loop again.
 */
static void test_an_add_from_another_thread_wakes_the_loop_once_per_question(void)
{
	struct tw_service *svc = service(true, 0);
	struct wake_count w = { 0 };
	struct job a, b, c;
	struct adder ad = { svc, &a, &b };
	struct sp_thread th;

	job_init(&a);
	job_init(&b);
	job_init(&c);
	CHECK_EQ(tw_service_set_wake(svc, wake_counted, &w), TW_OK);
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), -1);
	sp_spawn(&th, add_two, &ad);
	sp_join(&th, "the adding thread");
	CHECK_EQ(atomic_load(&w.unread), 1);
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), 30);
	CHECK_EQ(tw_service_add(svc, &c.t, 1010), TW_OK);
	CHECK_EQ(atomic_load(&w.calls), 2);
	/* tw_service_kick() of a manual service calls the wake-up too, once
	 * per question: the add's wake is still unread. */
	tw_service_kick(svc);
	CHECK_EQ(atomic_load(&w.calls), 2);
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), 10);
	tw_service_kick(svc);
	CHECK_EQ(atomic_load(&w.calls), 3);
	set_clock(1050);
	CHECK_EQ(tw_service_poll(svc), 3);
	CHECK_EQ(atomic_load(&a.runs) + atomic_load(&b.runs) + atomic_load(&c.runs), 3);
	/* Taken away: nothing is called. */
	CHECK_EQ(tw_service_set_wake(svc, NULL, NULL), TW_OK);
	CHECK_EQ(tw_service_timeout(svc, 1050), -1);
	CHECK_EQ(tw_service_add(svc, &a.t, 2000), TW_OK);
	CHECK_EQ(atomic_load(&w.calls), 3);
	shut_down_balanced(svc, 1);
}

static struct job readded;

static void add_another(struct tw_service *svc, struct job *self)
{
	(void)self;
	CHECK_EQ(tw_service_add(svc, &readded.t, 1000), TW_OK); /* due now */
}

/*
 * The polling thread does not wake its own loop: a callback the poll runs
 * adds a timer; the loop asks after the poll and sees it (timeout 0).
 */
static void test_the_polling_thread_does_not_wake_its_own_loop(void)
{
	struct tw_service *svc = service(true, 0);
	struct wake_count w = { 0 };
	struct job a;

	job_init(&a);
	job_init(&readded);
	a.action = add_another;
	CHECK_EQ(tw_service_set_wake(svc, wake_counted, &w), TW_OK);
	CHECK_EQ(tw_service_timeout(svc, 1000), -1);
	CHECK_EQ(tw_service_add(svc, &a.t, 1000), TW_OK);
	CHECK_EQ(atomic_load(&w.calls), 1);
	read_wakes(&w);
	CHECK_EQ(tw_service_timeout(svc, 1000), 0);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&a.runs), 1);
	CHECK_EQ(atomic_load(&w.calls), 1); /* the callback's add: no wake */
	CHECK_EQ(tw_service_timeout(svc, 1000), 0);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&readded.runs), 1);
	shut_down_balanced(svc, 0);
}

static void test_set_wake_refuses_what_has_no_loop(void)
{
	struct tw_service *reaped = service(false, 0);
	struct wake_count w = { 0 };

	CHECK_EQ(tw_service_set_wake(NULL, wake_counted, &w), TW_EINVAL);
	CHECK_EQ(tw_service_set_wake(reaped, wake_counted, &w), TW_EINVAL);
	tw_service_kick(reaped); /* still wakes its reaper, calls nothing */
	CHECK_EQ(atomic_load(&w.calls), 0);
	CHECK_EQ(tw_service_shutdown(reaped, NULL, NULL), 0);
	tw_service_destroy(reaped);
}

/* ---- an expiry a cancel took back is no run ---- */

/* j, due now, polled to the only executor, which parks at point (with
 * obj, or with j's timer when obj is NULL); returns the parked slot. */
static int queued_to_the_executor_parked_at(struct tw_service *svc,
					    struct job *j, const char *point,
					    const void *obj)
{
	int parked;

	job_init(j);
	CHECK_EQ(tw_service_add(svc, &j->t, 1000), TW_OK);
	parked = sp_arm(point, obj ? obj : &j->t);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(sp_wait(parked, NULL));
	return parked;
}

/*
 * service.h: TW_SVC_IDLE "already stopped; nothing was changed",
 * TW_SVC_RUNNING "its callback was running"; a reschedule returns what a
 * cancel would have.
 * Forced: a manual service with one executor; t due now is polled, and the
 * executor takes it into its batch and parks ("executor.took": t TAKEN in
 * its batch slot, no running mark yet). A cancel stops t (TW_SVC_STOPPED:
 * the slot taken back); from then on no call may count that slot as a
 * run: a second cancel, a reschedule and, after the reschedule was
 * cancelled, a third cancel say IDLE, IDLE, STOPPED, IDLE. Released, the
 * executor finds its slot empty; nothing refers to the timer.
 */
static void test_a_timer_stopped_in_an_executors_batch_is_no_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct job j;
	int took;

	took = queued_to_the_executor_parked_at(svc, &j, "executor.took", svc);
	CHECK(tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_reschedule(svc, &j.t, 2000), TW_SVC_IDLE);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_IDLE);
	sp_release(took);
	CHECK_EQ(tw_service_cancel_sync(svc, &j.t), TW_SVC_IDLE);
	CHECK_EQ(atomic_load(&j.runs), 0);
	shut_down_balanced(svc, 0);
}

/*
 * The same in the claim's own window. Forced: the executor has stored its
 * running mark on t and is about to exchange its batch slot ("run.claiming").
 * A cancel wins the slot (TW_SVC_STOPPED); the callback will never run, so
 * a second cancel must say IDLE, though the mark is still there.
 * Released, the claim fails and the executor lets go of its mark
 * ("run.lost"); a cancel and a cancel_sync say IDLE.
 */
static void test_a_claim_a_cancel_beat_is_no_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct job j;
	int claiming, lost;

	claiming = queued_to_the_executor_parked_at(svc, &j, "run.claiming", NULL);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_IDLE);
	lost = sp_arm("run.lost", &j.t);
	sp_release(claiming); /* its claim fails */
	CHECK(sp_wait(lost, NULL));
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_IDLE);
	sp_release(lost);
	CHECK_EQ(tw_service_cancel_sync(svc, &j.t), TW_SVC_IDLE);
	CHECK_EQ(atomic_load(&j.runs), 0);
	shut_down_balanced(svc, 0);
}

/* A cancel or cancel_sync on another thread, and what it returned. */
struct cancel_call {
	struct tw_service *svc;
	struct tw_service_timer *t;
	atomic_int result;
};

static void *cancel_call(void *arg)
{
	struct cancel_call *c = arg;

	atomic_store(&c->result, tw_service_cancel(c->svc, c->t));
	return NULL;
}

static void *cancel_sync_call(void *arg)
{
	struct cancel_call *c = arg;

	atomic_store(&c->result, tw_service_cancel_sync(c->svc, c->t));
	return NULL;
}

/* Told by the test when the callback may return. */
static atomic_int callback_go;

static void wait_for_go(struct tw_service *svc, struct job *self)
{
	(void)svc;
	(void)self;
	WAIT_FOR(atomic_load(&callback_go), "the test never let the callback return");
}

/*
 * What must stay RUNNING: a claim that went through is a run.
 * Forced, one executor: (1) parked right after its claim of a one-shot
 * ("run.claimed", the callback next), a cancel says RUNNING; (2) while the
 * callback runs, t is added again -- deferred to the run's end, so a poll
 * dispatches nothing -- and cancelled (STOPPED: the deferred add ends);
 * another cancel still says RUNNING, for the callback still runs; a
 * cancel_sync waits for it and says RUNNING.
 */
static void test_a_claimed_slot_is_a_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct cancel_call call = { svc, NULL, -1000 };
	struct sp_thread th;
	struct job j;
	int claimed, waiting;

	call.t = &j.t;
	job_init(&j);
	j.action = wait_for_go;
	atomic_store(&callback_go, 0);
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	claimed = sp_arm("run.claimed", &j.t);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(sp_wait(claimed, NULL));
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_RUNNING);
	sp_release(claimed);
	WAIT_FOR(atomic_load(&j.runs) == 1, "the callback never started");
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	CHECK(tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_poll(svc), 0); /* deferred to the run's end */
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_RUNNING);
	/* It waits for the run: the callback is let go only once the
	 * cancel_sync waits, or a run over first would make it IDLE. */
	waiting = sp_arm("cancel_sync.wait", &j.t);
	sp_spawn(&th, cancel_sync_call, &call);
	CHECK(sp_wait(waiting, &th.done));
	atomic_store(&callback_go, 1);
	sp_release(waiting);
	sp_join(&th, "cancel_sync");
	CHECK_EQ(atomic_load(&call.result), TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&j.finished), 1);
	CHECK_EQ(atomic_load(&j.runs), 1);
	shut_down_balanced(svc, 0);
}

/* Adds its timer again, due now, on its first run (deferred to the run's
 * end, which starts the next run at once). */
static void readd_due_now(struct tw_service *svc, struct job *self)
{
	if (atomic_load(&self->runs) == 1)
		CHECK_EQ(tw_service_add(svc, &self->t, 1000), TW_OK);
}

/*
 * service.h, enum tw_cancel_result: a run starts when its runner takes
 * the timer, an instant before the call -- for an add made during the
 * timer's run, as soon as that run returns. Forced: the executor parks
 * between run 1's end, which took the deferred add's run, and run 2's
 * call ("run.over" with run 1 returned). The run has started: pending
 * says false, a cancel RUNNING, an add waits for the run's end (a cancel
 * stops it: STOPPED); run 2 runs once, and nothing after it.
 */
static void test_an_add_during_its_run_starts_its_run_at_the_runs_end(void)
{
	struct tw_service *svc = service(true, 1);
	struct job j;
	int over;

	job_init(&j);
	j.action = readd_due_now;
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	over = sp_arm("run.over", &j.t);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(sp_wait(over, NULL));
	CHECK_EQ(atomic_load(&j.runs), 1);
	CHECK_EQ(atomic_load(&j.finished), 1); /* run 1 returned */
	CHECK(!tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_RUNNING);
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK); /* after run 2 */
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	sp_release(over);
	{
		/* RUNNING, or IDLE if run 2 was over first: either way over. */
		int rc = tw_service_cancel_sync(svc, &j.t);

		CHECK(rc == TW_SVC_RUNNING || rc == TW_SVC_IDLE);
	}
	CHECK_EQ(atomic_load(&j.runs), 2);
	CHECK_EQ(tw_service_poll(svc), 0);
	shut_down_balanced(svc, 0);
	CHECK_EQ(atomic_load(&j.runs), 2);
}

/* ---- the same two promises, at the edges of a run ---- */

/*
 * A cancel decides under the shard's mutex, from the state word and the
 * running mark of the runner that took the timer; the mark is cleared
 * without that mutex. Forced: the executor parks before its claim
 * ("run.claiming"); a cancel stops t; a second cancel, on another thread,
 * parks before it locks the shard ("cancel.locking"); the executor's claim
 * fails and it lets go of its mark ("run.lost"); the second cancel goes
 * on: IDLE.
 */
static void test_a_cancel_after_a_lost_claim_is_no_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct cancel_call call = { svc, NULL, -1000 };
	struct sp_thread th;
	struct job j;
	int claiming, locking, lost;

	call.t = &j.t;
	claiming = queued_to_the_executor_parked_at(svc, &j, "run.claiming", NULL);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	locking = sp_arm("cancel.locking", &j.t);
	sp_spawn(&th, cancel_call, &call);
	CHECK(sp_wait(locking, &th.done));
	lost = sp_arm("run.lost", &j.t);
	sp_release(claiming);
	CHECK(sp_wait(lost, NULL)); /* the claim failed, the mark is gone */
	sp_release(locking);
	sp_join(&th, "the second cancel");
	CHECK_EQ(atomic_load(&call.result), TW_SVC_IDLE);
	sp_release(lost);
	CHECK_EQ(tw_service_cancel_sync(svc, &j.t), TW_SVC_IDLE);
	CHECK_EQ(atomic_load(&j.runs), 0);
	shut_down_balanced(svc, 0);
}

static atomic_int in_wake, wake_go;

static void slow_wake(void *arg)
{
	(void)arg;
	atomic_store(&in_wake, 1);
	WAIT_FOR(atomic_load(&wake_go), "the test never let the wake return");
}

static void count_run(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
}

/*
 * An executor's re-arm calls the loop's wake function once its run is
 * over, its running mark cleared -- not inside the run, where a wake that
 * takes time (a slow eventfd write, uv_async_send under load) would make
 * a cancel after the callback returned say RUNNING, and a cancel_sync
 * wait for the user's wake function (a deadlock if that function waits
 * for the caller). Forced: the wake blocks; meanwhile a cancel stops the
 * re-armed add (STOPPED), a second says IDLE, and a cancel_sync on another
 * thread returns IDLE at once.
 */
static void test_a_rearms_wake_comes_after_its_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct tw_service_periodic p;
	struct cancel_call call = { svc, &p.timer, -1000 };
	struct sp_thread th;

	atomic_store(&in_wake, 0);
	atomic_store(&wake_go, 0);
	tw_service_periodic_init(&p, count_run, 100);
	CHECK_EQ(tw_service_add(svc, &p.timer, 1000), TW_OK); /* no wake yet */
	CHECK_EQ(tw_service_set_wake(svc, slow_wake, NULL), TW_OK);
	CHECK_EQ(tw_service_timeout(svc, 1000), 0);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&in_wake), "the re-arm never woke the loop");
	CHECK_EQ(tw_service_cancel(svc, &p.timer), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &p.timer), TW_SVC_IDLE);
	sp_spawn(&th, cancel_sync_call, &call);
	sp_join(&th, "cancel_sync while the wake runs");
	CHECK_EQ(atomic_load(&call.result), TW_SVC_IDLE);
	atomic_store(&wake_go, 1);
	shut_down_balanced(svc, 0);
}

/* ---- cancel_sync and a callback that adds its timer again ---- */

static atomic_int readd_now, readd_result;

static void readd_then_wait(struct tw_service *svc, struct job *self)
{
	WAIT_FOR(atomic_load(&readd_now), "the test never let it re-add");
	atomic_store(&readd_result, tw_service_add(svc, &self->t, 5000));
	wait_for_go(svc, self);
}

/*
 * service.h, tw_service_cancel_sync(): "If the timer is added again while
 * this call waits -- by another thread, or by the very callback it waits
 * for -- the call returns: the timer belongs to that add now, its callback
 * may still be running". Forced: another thread's cancel_sync waits
 * (cancel_sync.wait) for the running callback, which then adds its own
 * timer again (deferred to the run's end) and blocks. The call returns
 * TW_SVC_RUNNING while the callback still runs; the new add is pending,
 * filed at the run's end, and a cancel_sync stops it.
 */
static void test_cancel_sync_returns_when_the_callback_adds_its_timer_again(void)
{
	struct tw_service *svc = service(true, 1);
	struct cancel_call call = { svc, NULL, -1000 };
	struct sp_thread th;
	struct job j;
	int waiting;

	job_init(&j);
	j.action = readd_then_wait;
	call.t = &j.t;
	atomic_store(&readd_now, 0);
	atomic_store(&readd_result, -1000);
	atomic_store(&callback_go, 0);
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&j.runs) == 1, "the callback never started");
	waiting = sp_arm("cancel_sync.wait", &j.t);
	sp_spawn(&th, cancel_sync_call, &call);
	CHECK(sp_wait(waiting, &th.done));
	atomic_store(&readd_now, 1);
	WAIT_FOR(atomic_load(&readd_result) != -1000, "the callback never re-added");
	CHECK_EQ(atomic_load(&readd_result), TW_OK);
	sp_release(waiting);
	sp_join(&th, "cancel_sync");
	CHECK_EQ(atomic_load(&call.result), TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&j.finished), 0); /* the callback still runs */
	CHECK(tw_service_timer_pending(&j.t));
	atomic_store(&callback_go, 1);
	WAIT_FOR(atomic_load(&j.finished), "the callback never returned");
	CHECK_EQ(tw_service_cancel_sync(svc, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&j.runs), 1);
	shut_down_balanced(svc, 0);
}

int main(int argc, char **argv)
{
	only = argc > 1 ? argv[1] : NULL;
	sp_install();
	RUN_SELECTED(test_an_executors_rearm_wakes_the_loop);
	RUN_SELECTED(test_an_add_during_its_run_wakes_the_loop_when_filed);
	RUN_SELECTED(test_an_add_from_another_thread_wakes_the_loop_once_per_question);
	RUN_SELECTED(test_the_polling_thread_does_not_wake_its_own_loop);
	RUN_SELECTED(test_set_wake_refuses_what_has_no_loop);
	RUN_SELECTED(test_a_timer_stopped_in_an_executors_batch_is_no_run);
	RUN_SELECTED(test_a_claim_a_cancel_beat_is_no_run);
	RUN_SELECTED(test_a_claimed_slot_is_a_run);
	RUN_SELECTED(test_an_add_during_its_run_starts_its_run_at_the_runs_end);
	RUN_SELECTED(test_cancel_sync_returns_when_the_callback_adds_its_timer_again);
	RUN_SELECTED(test_a_cancel_after_a_lost_claim_is_no_run);
	RUN_SELECTED(test_a_rearms_wake_comes_after_its_run);
	if (tests_passed + tests_failed == 0) {
		fprintf(stderr, "no test named %s\n", only);
		return 2;
	}
	return check_report();
}
