/* SPDX-License-Identifier: MIT */
/*
 * The races of issue 13 in the timer service, each driven
 * deterministically through the named test points of the library
 * (tests/stop_points.h): a thread is parked exactly inside the window, the
 * other side acts, and the outcome is checked. Every test here failed (or
 * deadlocked) before its fix; the commit that fixed it says how. Nothing
 * is timed: a bound of seconds only turns a hang into a failure. The
 * purgatory's races are in test_races_purgatory.c, a callback running
 * beside itself in test_races_runs.c.
 */
#define _POSIX_C_SOURCE 200809L

#include "races_jobs.h"

/* ---- 1: the reaper's lost wake-up ---- */

/* Due now: only a kick makes the sleeping reaper run it (a lost wake-up
 * leaves it asleep for good, which WAIT_FOR's guard reports). */
static void add_due_now_and_see_it_run(struct tw_service *svc, struct job *j)
{
	CHECK_EQ(tw_service_add(svc, &j->t, 1000), TW_OK);
	WAIT_FOR(atomic_load(&j->runs) == 1, "the kicked reaper never ran it");
	CHECK_EQ(atomic_load(&j->runs), 1);
}

/*
 * A kick that lands between the reaper's "clear kick_pending" and "clear
 * kicked" was erased while kick_pending stayed set, so every later kick
 * returned early and the reaper slept for ever. Parked at the top of its
 * loop, the reaper gets one kick; the add after it must still wake it.
 */
static void test_reaper_keeps_waking_after_a_kick_at_its_loop_top(void)
{
	struct tw_service *svc = service(false, 0);
	struct job a, b;
	int top;

	job_init(&a);
	job_init(&b);
	top = sp_arm("reaper.loop_top", svc);
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
 * A kick that finds kick_pending set only loads it (no exchange on the
 * shared line). That is safe even while the reaper has cleared its flags
 * and not yet drained: the load then reads a later kick's true, and that
 * kick makes the reaper go round again. Parked right after its clear, the
 * reaper is kicked; a timer added then (its own kick stops at the load)
 * must still run, and once the reaper sleeps the next add must wake it.
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

/* ---- 3: cancel_sync racing shutdown's hand-back ---- */

static atomic_int handed, handed_after_free;

static void hand_back_job(struct tw_service_timer *t, void *arg)
{
	struct job *j = tw_container_of(t, struct job, t);

	(void)arg;
	if (atomic_load(&j->freed))
		atomic_fetch_add(&handed_after_free, 1);
	atomic_fetch_add(&handed, 1);
}

struct svc_job {
	struct tw_service *svc;
	struct job *job;
	int64_t result;
};

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
 * Shutdown had moved the timer to IDLE in a private list; a cancel_sync
 * then found it IDLE and returned, the owner freed it, and shutdown handed
 * the freed timer back. Now cancel_sync waits until the hand-back is over.
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
	at_wait = sp_arm("cancel_sync.wait", &j.t);
	sp_spawn(&c, cancel_sync_then_free, &canceller);
	/* Fixed: it waits. Before: it returned at once and freed. */
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

/* ---- 5: cancel_sync on a one-executor service ---- */

static void cancel_other_sync(struct tw_service *svc, struct job *self)
{
	atomic_store(&self->result, tw_service_cancel_sync(svc, &self->other->t));
	atomic_store(&self->finished, 1);
}

/*
 * The only executor runs x, whose callback cancel_syncs y (expired, its
 * entry queued behind x). Meanwhile y is re-added and expires again: its
 * entry is live again, and cancel_sync used to wait for it -- which only
 * this executor could run. A re-added timer is the new add's: there is
 * nothing to wait for.
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

/* ---- 5b: cancel_sync of a callback that is running ---- */

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

/* ---- 6: cancel_sync of a timer from its own callback ---- */

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
 * While x's callback runs, another thread adds x again (it is IDLE, so
 * that is allowed); the callback then cancel_syncs itself and frees x. It
 * used to get TW_EDEADLK with x still in an inbox (the add stopped with no
 * word of it, and the reaper then read freed memory). Now it unlinks x
 * everywhere and says what it stopped.
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

/* ---- 7: two callbacks that cancel_sync each other ---- */

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

/* ---- 8: re-initialising a timer after a plain cancel ---- */

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
 * x expired and its entry waits behind a busy executor; a plain cancel
 * stops it but the entry stays (only cancel_sync takes it back).
 * tw_service_timer_init() there wiped the flag that says so, and the
 * re-added x got a second entry: two runs, the second one possibly on
 * freed memory. tw_service_timer_reinit() keeps that bookkeeping.
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
	CHECK_EQ(tw_service_poll(svc), 1); /* x's entry is queued */
	CHECK_EQ(tw_service_cancel(svc, &x.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_timer_reinit(&x.t, second_fn), TW_OK);
	CHECK_EQ(tw_service_add(svc, &x.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 0); /* the queued entry runs it */
	/* Not while it is pending: that would race the executor. */
	CHECK_EQ(tw_service_timer_reinit(&x.t, second_fn), TW_EBUSY);
	CHECK_EQ(tw_service_timer_reinit(NULL, second_fn), TW_EINVAL);
	atomic_store(&blocker.go, 1);
	WAIT_FOR(atomic_load(&x.runs) == 1, "the re-added timer never ran");
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&x.runs), 1);
	tw_service_destroy(svc);
}

/* ---- shutdown and a producer inside an add ---- */

static void *add_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_add(sj->svc, &sj->job->t, 9000);
	return NULL;
}

/*
 * An add that entered before shutdown set closing finishes its push, and
 * shutdown waits for it (the counts entered and added say it is inside),
 * then hands the timer back: nothing pushed behind shutdown's back, and
 * the add is counted once (added == handed back).
 */
static void test_shutdown_waits_for_an_add_inside(void)
{
	struct tw_service *svc = service(true, 0);
	struct job j;
	struct svc_job adder = { svc, &j, -1000 }, down = { svc, &j, 0 };
	struct sp_thread a, d;
	struct tw_service_stats st;
	int inside, waiting;

	job_init(&j);
	atomic_store(&handed, 0);
	atomic_store(&handed_after_free, 0);
	inside = sp_arm("add.owner_checked", &j.t);
	sp_spawn(&a, add_thread, &adder);
	CHECK(sp_wait(inside, &a.done));
	waiting = sp_arm("shutdown.producer_inside", svc);
	sp_spawn(&d, shutdown_thread, &down);
	CHECK(sp_wait(waiting, &d.done)); /* not done: it waits for the add */
	sp_release(inside);
	sp_join(&a, "add");
	sp_release(waiting);
	sp_join(&d, "shutdown");
	CHECK_EQ(adder.result, TW_OK);
	CHECK_EQ(down.result, 1);
	CHECK_EQ(atomic_load(&handed), 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 1);
	CHECK_EQ(st.handed_back, 1);
	CHECK_EQ(tw_service_add(svc, &j.t, 9000), TW_ESHUTDOWN);
	tw_service_destroy(svc);
}

/* ---- tombstones: a plain cancel leaves the timer linked ---- */

/*
 * apply() (the wheel owner draining an inbox) used to take down the
 * timer's inbox flag and then unlink it: a cancel_sync in between found a
 * cancelled timer with no flag, returned, and its owner freed a timer the
 * wheel still linked. The wheel owner is parked inside apply, after the
 * unlink and before the flags go: a cancel_sync must see them and go for
 * wheel_mu (the point before its lock), not return.
 */
static void test_cancel_sync_sees_a_timer_apply_is_unlinking(void)
{
	struct tw_service *svc = service(true, 0);
	struct job j;
	struct poller poller = { svc, 0 };
	struct svc_job canceller = { svc, &j, 0 };
	struct sp_thread p, c;
	int in_apply, locking;

	job_init(&j);
	CHECK_EQ(tw_service_add(svc, &j.t, 5000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 0);                  /* placed */
	CHECK_EQ(tw_service_reschedule(svc, &j.t, 6000), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_STOPPED); /* in an inbox */
	in_apply = sp_arm("apply.unlinked", &j.t);
	sp_spawn(&p, poll_thread, &poller);
	CHECK(sp_wait(in_apply, &p.done));
	locking = sp_arm("cancel_sync.unlink", &j.t);
	sp_spawn(&c, cancel_sync_then_free, &canceller);
	/* Before the fix: it found no flag and returned (c.done). */
	CHECK(sp_wait(locking, &c.done));
	sp_release(locking);
	sp_release(in_apply);
	sp_join(&p, "poll");
	sp_join(&c, "cancel_sync");
	CHECK_EQ(poller.result, 0);
	CHECK_EQ(canceller.result, TW_SVC_IDLE); /* the plain cancel stopped it */
	CHECK_EQ(tw_service_count(svc), 0);
	atomic_store(&virtual_now, 7000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/*
 * apply reads a timer's due time and its window in two loads; a reschedule
 * that lands between them leaves it a torn pair: the old due time with the
 * new window, [1100, 1600] here where the timer now wants [3000, 3500].
 * The wheel may file it there, and the same poll's advance (to 1700)
 * reaches that bucket -- but the reschedule found F_INBOX down and pushed
 * the timer again, so the wheel passes over it until the next drain
 * places it right. Loaded before apply takes F_INBOX down (the order
 * apply must not have), the reschedule pushes nothing, the torn window
 * stays, and the timer runs at 1700, 1300 units early.
 */
static void test_a_window_torn_by_a_reschedule_never_fires(void)
{
	struct tw_service *svc = service(true, 0);
	struct job j;
	struct poller poller = { svc, 0 };
	struct sp_thread p;
	int between;

	job_init(&j);
	CHECK_EQ(tw_service_add(svc, &j.t, 1100), TW_OK);
	atomic_store(&virtual_now, 1700);
	between = sp_arm("apply.due_read", &j.t);
	sp_spawn(&p, poll_thread, &poller);
	CHECK(sp_wait(between, &p.done));
	CHECK_EQ(tw_service_reschedule_range(svc, &j.t, 3000, 3500), TW_SVC_STOPPED);
	sp_release(between);
	sp_join(&p, "poll");
	CHECK_EQ(poller.result, 0);
	CHECK_EQ(atomic_load(&j.runs), 0);
	for (int64_t now = 1700; now < 3000; now++) {
		atomic_store(&virtual_now, now);
		CHECK(tw_service_poll(svc) >= 0);
	}
	CHECK_EQ(atomic_load(&j.runs), 0);
	atomic_store(&virtual_now, 3510);
	CHECK(tw_service_poll(svc) >= 0);
	CHECK_EQ(atomic_load(&j.runs), 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/*
 * Owner ids wrap after 2^25 - 1 services; a new service must never get the
 * id of one still alive, or each passes the other's owner checks (the
 * second review of the headers: after 2^25 services made and destroyed
 * beside a live one, a cancel on the new one stopped the old one's timer
 * and neither's accounting balanced). The hook stands for the wrap: the
 * next id to hand out is the live service's.
 */
static void test_a_wrapped_owner_id_skips_live_services(void)
{
	struct tw_service *a = service(true, 0), *b;
	struct job j, k;
	uint32_t id_a;

	job_init(&j);
	job_init(&k);
	CHECK_EQ(tw_service_add(a, &j.t, 5000), TW_OK);
	id_a = j.t.state >> 7; /* the owner's id: bits 7-31 (src/service/state.h) */
	tw__test_service_next_id(id_a - 1);
	b = service(true, 0);
	CHECK_EQ(tw_service_cancel(b, &j.t), TW_EOWNER);
	CHECK_EQ(tw_service_add(b, &k.t, 5000), TW_OK);
	CHECK(k.t.state >> 7 != id_a);
	CHECK_EQ(tw_service_cancel(a, &k.t), TW_EOWNER);
	CHECK_EQ(tw_service_shutdown(b, NULL, NULL), 1);
	CHECK_EQ(tw_service_shutdown(a, NULL, NULL), 1);
	tw_service_destroy(b);
	tw_service_destroy(a);
}

/*
 * A plain cancel only flips the state word: the timer stays in its bucket
 * (a tombstone) until the wheel meets it. Count leaves it out,
 * cancel_sync unlinks it before it lets the owner free it, and a re-add
 * places it again.
 */
static void test_a_tombstone_is_uncounted_and_unlinked_by_cancel_sync(void)
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
	/* left stays a tombstone: a cascade drops it before its due time */
	CHECK_EQ(tw_service_cancel(svc, &left.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_count(svc), 3);
	CHECK_EQ(tw_service_cancel(svc, &heap->t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &a.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_cancel(svc, &a.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_count(svc), 1);
	CHECK_EQ(tw_service_add(svc, &a.t, 4000), TW_OK); /* the tombstone lives */
	CHECK_EQ(tw_service_count(svc), 2);
	CHECK_EQ(tw_service_cancel_sync(svc, &heap->t), TW_SVC_IDLE);
	memset(heap, 0xa5, sizeof(*heap));
	free(heap); /* ASan: any later touch of it is reported */
	CHECK_EQ(tw_service_count(svc), 2);
	atomic_store(&virtual_now, 6000);
	CHECK_EQ(tw_service_poll(svc), 2);  /* a and b; the tombstones are gone */
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

/* ---- suspected: one fresh timer rescheduled on two services ---- */

struct resched {
	struct tw_service *svc;
	struct job *job;
	int result;
};

static void *reschedule_thread(void *arg)
{
	struct resched *r = arg;

	r->result = tw_service_reschedule(r->svc, &r->job->t, 2000);
	return NULL;
}

static void test_a_timer_joins_one_service_only(void)
{
	struct tw_service *s1 = service(true, 0), *s2 = service(true, 0);
	struct job j;
	struct resched r = { s1, &j, -1000 };
	struct sp_thread th;
	int checked, r2;

	job_init(&j);
	checked = sp_arm("add.owner_checked", &j.t);
	sp_spawn(&th, reschedule_thread, &r);
	CHECK(sp_wait(checked, &th.done));
	r2 = tw_service_reschedule(s2, &j.t, 2000);
	sp_release(checked);
	sp_join(&th, "reschedule");
	/* Exactly one of them owns it now. */
	CHECK((r.result == TW_EOWNER) != (r2 == TW_EOWNER));
	CHECK_EQ(tw_service_count(s1) + tw_service_count(s2), 1);
	CHECK_EQ(tw_service_shutdown(s1, NULL, NULL) +
			 tw_service_shutdown(s2, NULL, NULL), 1);
	tw_service_destroy(s1);
	tw_service_destroy(s2);
}

/* ---- suspected: a poll that passed the closing check ---- */


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

int main(void)
{
	sp_install();
	RUN(test_reaper_keeps_waking_after_a_kick_at_its_loop_top);
	RUN(test_a_kick_that_finds_one_pending_loses_no_timer);
	RUN(test_cancel_sync_waits_for_shutdowns_hand_back);
	RUN(test_cancel_sync_waits_for_a_running_callback);
	RUN(test_cancel_sync_does_not_wait_for_a_readded_timer);
	RUN(test_cancel_sync_of_self_unlinks_and_reports);
	RUN(test_cancel_sync_cycle_is_an_error_not_a_hang);
	RUN(test_reinit_after_plain_cancel_runs_once);
	RUN(test_shutdown_waits_for_an_add_inside);
	RUN(test_cancel_sync_sees_a_timer_apply_is_unlinking);
	RUN(test_a_window_torn_by_a_reschedule_never_fires);
	RUN(test_a_tombstone_is_uncounted_and_unlinked_by_cancel_sync);
	RUN(test_a_timer_joins_one_service_only);
	RUN(test_a_wrapped_owner_id_skips_live_services);
	RUN(test_no_poll_once_shutdown_began);
	return check_report();
}
