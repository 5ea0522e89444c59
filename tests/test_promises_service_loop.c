/* SPDX-License-Identifier: MIT */
/*
 * The eighth hostile reading of service.h (docs/review.md, G1 and G2),
 * forced through the test points as in test_promises_service.c:
 *   G1  a manual service's loop is woken (tw_service_set_wake) by what its
 *       last question could not see: an executor's re-arm of a periodic
 *       timer, an add from another thread;
 *   G2  a second cancel of a timer whose stopped entry an executor holds
 *       says IDLE, not RUNNING: no callback ran;
 * the ninth reading's two breaks of those fixes (B1: a give-up between a
 * cancel's two loads of a held slot read as a claim; B2: an executor's
 * re-arm calling the loop's wake inside its run); and the header sentence
 * the eighth reading corrected: cancel_sync returns when the callback it
 * waits for adds its timer again.
 * Each G and B test failed (hung, or answered wrongly) on the code
 * before its fix; test_a_claimed_slot_is_a_run pins what must stay
 * RUNNING, the cancel_sync test what the header now says. One test can be
 * run alone by naming it:
 *   test_promises_service_loop test_an_executors_rearm_wakes_the_loop
 */
#define _POSIX_C_SOURCE 200809L

#include "service_promise_jobs.h"

/* Shut down (handed timers handed back), every add ended once, gone. */
static void shut_down_balanced(struct tw_service *svc, int64_t handed)
{
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), handed);
	check_exactly_once(svc);
	tw_service_destroy(svc);
}

/* ---- G1: waking the loop ---- */

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
 * wheel: "nothing pending", -1) and sleeps. Before tw_service_set_wake the
 * executor's re-arm told nobody (kick() returned at once for a manual
 * service), and the loop slept past every later run (the review's loop:
 * 3 runs in 3 s instead of about 150). Now the re-arm calls the loop's
 * wake-up, once per question, and the loop's next question has the
 * period's due time.
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

/* ---- G2: a slot that holds a stopped entry is no run ---- */

/* j, due now, polled to the only executor, which parks at point with it;
 * returns the parked slot. */
static int queued_to_the_executor_parked_at(struct tw_service *svc,
					    struct job *j, const char *point)
{
	int parked;

	job_init(j);
	CHECK_EQ(tw_service_add(svc, &j->t, 1000), TW_OK);
	parked = sp_arm(point, &j->t);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(sp_wait(parked, NULL));
	return parked;
}

/*
 * service.h: TW_SVC_IDLE "already stopped; nothing was changed",
 * TW_SVC_RUNNING "its callback was running"; a reschedule returns what a
 * cancel would have.
 * Forced: a manual service with one executor; t due now is polled (its
 * entry goes to the queue) and the executor takes the entry and parks
 * (executor.took, its slot holding t). A cancel stops t (STOPPED). Before
 * the fix every later call counted the executor's slot as a run: a second
 * cancel, a reschedule and, after the reschedule was cancelled, a third
 * cancel said TW_SVC_RUNNING, for a callback that never ran (the
 * review's program: 20 times in about a second). Now the slot is tagged
 * SLOT_HELD while its entry is not claimed, and a held slot is a run only
 * once F_ENTRY is gone: IDLE, IDLE, STOPPED, IDLE.
 */
static void test_a_stopped_entry_an_executor_holds_is_no_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct job j;
	int took;

	took = queued_to_the_executor_parked_at(svc, &j, "executor.took");
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_reschedule(svc, &j.t, 2000), TW_SVC_IDLE);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_IDLE);
	sp_release(took);
	/* It gives the entry up; then nothing refers to the timer. */
	CHECK_EQ(tw_service_cancel_sync(svc, &j.t), TW_SVC_IDLE);
	CHECK_EQ(atomic_load(&j.runs), 0);
	shut_down_balanced(svc, 0);
}

/*
 * The same in the claim's own window. Forced: the executor has read t
 * EXPIRED and is about to claim it (execute.claiming, its slot SLOT_HELD);
 * a cancel stops t, and a second cancel must say IDLE, then its claim
 * fails and it gives the entry up (parked once more on the way: IDLE
 * again, the slot SLOT_NO_RUN now).
 */
static void test_a_claim_a_cancel_beat_is_no_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct job j;
	int claiming, giving_up;

	claiming = queued_to_the_executor_parked_at(svc, &j, "execute.claiming");
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_IDLE);
	giving_up = sp_arm("execute.claiming", &j.t);
	sp_release(claiming); /* its claim fails: it goes round again */
	CHECK(sp_wait(giving_up, NULL));
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_IDLE);
	sp_release(giving_up);
	CHECK_EQ(tw_service_cancel_sync(svc, &j.t), TW_SVC_IDLE);
	CHECK_EQ(atomic_load(&j.runs), 0);
	shut_down_balanced(svc, 0);
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
 * What the tags must not lose: a slot whose claim went through is a run.
 * Forced, one executor: (1) parked right after its claim of a one-shot
 * (execute.claimed, before it stores SLOT_RUN), a cancel says RUNNING;
 * (2) while the callback runs, t is added again, polled (its new entry
 * waits in the queue: the only executor is busy) and cancelled
 * (STOPPED); another cancel still says RUNNING -- the word says IDLE with
 * an entry, and the executor's slot is the run, not that entry.
 */
static void test_a_claimed_slot_is_a_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct job j;
	int claimed;

	job_init(&j);
	j.action = wait_for_go;
	atomic_store(&callback_go, 0);
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	claimed = sp_arm("execute.claimed", &j.t);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK(sp_wait(claimed, NULL));
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_RUNNING);
	sp_release(claimed);
	WAIT_FOR(atomic_load(&j.runs) == 1, "the callback never started");
	CHECK_EQ(tw_service_add(svc, &j.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_RUNNING);
	atomic_store(&callback_go, 1);
	/* It waits for the run (and takes the stopped entry back). */
	CHECK_EQ(tw_service_cancel_sync(svc, &j.t), TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&j.runs), 1);
	shut_down_balanced(svc, 0);
}

/* ---- the ninth reading: the same two promises, harder ---- */

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

/*
 * G2 again (the ninth reading, B1: 1 in about 150,000 iterations of its
 * program). A cancel that reads a SLOT_HELD slot and then a word without
 * F_ENTRY took that for a claim; but the slot's thread may have given the
 * entry up between the two loads (SLOT_NO_RUN, then the CAS that clears
 * F_ENTRY). Forced: the executor parks before its claim; a cancel stops
 * t; a second cancel, on another thread, parks right after it read the
 * held slot (cancel.held_slot); the executor's claim fails, it gives the
 * entry up and lets go of the slot; the second cancel goes on: IDLE (it
 * said RUNNING, with the word read alone).
 */
static void test_a_give_up_between_a_cancels_loads_is_no_run(void)
{
	struct tw_service *svc = service(true, 1);
	struct cancel_call call = { svc, NULL, -1000 };
	struct sp_thread th;
	struct job j;
	int claiming, held, let_go;

	call.t = &j.t;
	claiming = queued_to_the_executor_parked_at(svc, &j, "execute.claiming");
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED);
	held = sp_arm("cancel.held_slot", &j.t);
	sp_spawn(&th, cancel_call, &call);
	CHECK(sp_wait(held, &th.done));
	let_go = sp_arm("execute.let_go", &j.t);
	sp_release(claiming);
	CHECK(sp_wait(let_go, NULL)); /* given up, the slot empty */
	sp_release(held);
	sp_join(&th, "the second cancel");
	CHECK_EQ(atomic_load(&call.result), TW_SVC_IDLE);
	sp_release(let_go);
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
 * The ninth reading, B2: an executor's re-arm called the loop's wake
 * function inside its run, its slot still marked run. A wake that takes
 * time (a slow eventfd write, uv_async_send under load) made a cancel
 * after the callback returned say RUNNING, and a cancel_sync wait for the
 * user's wake function (a deadlock if that function waits for the
 * caller). Now the wake is made once the slot let go. Forced: the wake
 * blocks; meanwhile a cancel stops the re-armed add (STOPPED), a second
 * says IDLE, and a cancel_sync on another thread returns IDLE at once.
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
 * timer again and blocks. The call returns TW_SVC_RUNNING while the
 * callback still runs; the new add is pending (a cancel stops it).
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
	RUN_SELECTED(test_an_add_from_another_thread_wakes_the_loop_once_per_question);
	RUN_SELECTED(test_the_polling_thread_does_not_wake_its_own_loop);
	RUN_SELECTED(test_set_wake_refuses_what_has_no_loop);
	RUN_SELECTED(test_a_stopped_entry_an_executor_holds_is_no_run);
	RUN_SELECTED(test_a_claim_a_cancel_beat_is_no_run);
	RUN_SELECTED(test_a_claimed_slot_is_a_run);
	RUN_SELECTED(test_cancel_sync_returns_when_the_callback_adds_its_timer_again);
	RUN_SELECTED(test_a_give_up_between_a_cancels_loads_is_no_run);
	RUN_SELECTED(test_a_rearms_wake_comes_after_its_run);
	if (tests_passed + tests_failed == 0) {
		fprintf(stderr, "no test named %s\n", only);
		return 2;
	}
	return check_report();
}
