/* SPDX-License-Identifier: MIT */
/*
 * The races of issue 13, each driven deterministically through the named
 * test points of the library (tests/stop_points.h): a thread is parked
 * exactly inside the window, the other side acts, and the outcome is
 * checked. Every test here failed (or deadlocked) before its fix; the
 * commit that fixed it says how. Nothing is timed: a bound of seconds only
 * turns a hang into a failure.
 */
#define _POSIX_C_SOURCE 200809L

#include "stop_points.h"

#include "check.h"
#include "virtual_clock.h"


struct job {
	struct tw_service_timer t;
	atomic_int runs;
	atomic_int in_callback, go, finished;
	atomic_int freed;       /* the owner let go of it */
	atomic_int result;
	struct job *other;
	void (*action)(struct tw_service *svc, struct job *self);
};

static void job_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, t);

	atomic_fetch_add(&j->runs, 1);
	if (j->action)
		j->action(svc, j); /* it says when it finished: it may free j */
	else
		atomic_store(&j->finished, 1);
}

static void job_init(struct job *j)
{
	memset(j, 0, sizeof(*j));
	tw_service_timer_init(&j->t, job_run);
}

/* ---- 1: the reaper's lost wake-up ---- */

/* Due now: only a kick makes the sleeping reaper run it (within 2 s). */
static void add_due_now_and_see_it_run(struct tw_service *svc, struct job *j)
{
	CHECK_EQ(tw_service_add(svc, &j->t, 1000), TW_OK);
	for (int ms = 0; ms < 2000 && !atomic_load(&j->runs); ms++) {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
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
	/* An inbox is a stack: the last added is placed, and runs, first. */
	CHECK_EQ(tw_service_add(svc, &y.t, 1000), TW_OK);
	CHECK_EQ(tw_service_add(svc, &x.t, 1000), TW_OK);
	cancelled = sp_arm("cancel_sync.cancelled", &y.t);
	CHECK_EQ(tw_service_poll(svc), 2); /* x then y queued */
	CHECK(sp_wait(cancelled, NULL));
	/* y is IDLE with its old entry queued: add it again, expire it. */
	CHECK_EQ(tw_service_add(svc, &y.t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 0); /* the old entry runs it */
	sp_release(cancelled);
	WAIT_FOR(atomic_load(&x.finished), "cancel_sync waited for itself");
	CHECK_EQ(atomic_load(&x.result), TW_SVC_STOPPED);
	WAIT_FOR(atomic_load(&y.runs) == 1, "the re-added timer never ran");
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&y.runs), 1);
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

/* ---- the purgatory ---- */

struct pop {
	struct tw_delayed_op op;
	struct tw_watch w;
	atomic_int ready, completes, expires, releases, handed;
};

static bool pop_try(struct tw_delayed_op *op)
{
	struct pop *o = tw_container_of(op, struct pop, op);

	return atomic_load(&o->ready) && tw_op_force_complete(op);
}

static void pop_complete(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct pop, op)->completes, 1);
}

static void pop_expire(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct pop, op)->expires, 1);
}

static void pop_release(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct pop, op)->releases, 1);
}

static void pop_hand_back(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct pop, op)->handed, 1);
}

static void pop_init(struct pop *o)
{
	static const struct tw_op_ops pop_ops = { pop_try, pop_complete,
						  pop_expire, pop_release };

	memset(o, 0, sizeof(*o));
	CHECK_EQ(tw_op_init(&o->op, 100, &pop_ops, NULL), TW_OK);
}

static struct tw_purgatory *manual_purgatory(void)
{
	return manual_purgatory_purging(0);
}

static const char key[] = "topic-0";

struct key_check {
	struct tw_purgatory *p;
	struct pop *o;
};

/* Between the op's failed check and its watch: the condition comes true
 * and the key is checked (the op is on no list yet). */
static void condition_then_check(const void *obj, void *arg)
{
	struct key_check *kc = arg;

	(void)obj;
	atomic_store(&kc->o->ready, 1);
	CHECK_EQ(tw_purgatory_check_and_complete(kc->p, key, sizeof(key)), 0);
}

/*
 * A check_and_complete between try_complete_else_watch's check and its
 * watch found nobody to try; the op then waited for its timeout though its
 * condition held. Kafka checks again after watching, and so do we now.
 */
static void test_purgatory_check_between_check_and_watch_is_not_lost(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct key_check kc = { p, &o };
	const void *keys[1] = { key };
	size_t lens[1] = { sizeof(key) };

	pop_init(&o);
	sp_on("watch.checked", &o.op, condition_then_check, &kc);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 1, &o.w), 1);
	CHECK(tw_op_is_completed(&o.op));
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	atomic_store(&virtual_now, 2000);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(atomic_load(&o.expires), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/* The second key's watch list cannot be allocated. */
static const char key1[] = "topic-1";

static bool fail_key1(const char *point, const void *obj)
{
	return strcmp(point, "watchers.alloc") == 0 && obj == key1;
}

/* After the failed watch let go of the op's lock, before it takes back
 * its first entry: someone forces the op, and a check of the first key
 * drops the completed entry from its list. */
static void force_then_check(const void *obj, void *arg)
{
	struct key_check *kc = arg;

	(void)obj;
	CHECK(tw_op_force_complete(&kc->o->op));
	CHECK_EQ(tw_purgatory_check_and_complete(kc->p, key, sizeof(key)), 0);
}

/*
 * A watch that fails half-way (out of memory on its second key) takes back
 * the entries it made. One of them may be gone already: the op is not
 * completed by that call, but any thread may force it, and a key check
 * then unlinks its entries. Taking it back again dereferenced the entry's
 * list pointer, which that unlink had cleared (a crash); now the entry's
 * own link says whether it is still in a list.
 */
static void test_a_failed_watch_takes_back_only_entries_still_linked(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct tw_watch ws[2];
	struct key_check kc = { p, &o };
	const void *keys[2] = { key, key1 };
	size_t lens[2] = { sizeof(key), sizeof(key1) };

	pop_init(&o);
	tw__test_set_fail(fail_key1);
	sp_on("watch.failed", &o.op, force_then_check, &kc);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 2, ws),
		 TW_ENOMEM);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(atomic_load(&o.releases), 1); /* every reference went */
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(atomic_load(&o.handed), 0);
	tw_op_destroy(&o.op);
}

struct watcher {
	struct tw_purgatory *p;
	struct pop *o;
	int result;
};

static void *watch_thread(void *arg)
{
	struct watcher *w = arg;
	const void *keys[1] = { key };
	size_t lens[1] = { sizeof(key) };

	w->result = tw_purgatory_try_complete_else_watch(w->p, &w->o->op, keys,
							 lens, 1, &w->o->w);
	return NULL;
}

/*
 * The second review of the headers: a watch that failed had run the op's
 * on_release (the purgatory let go of it), yet the header let the op be
 * watched again, and that watch's end ran on_release a second time. A
 * second watch of an op, racing or after one that failed, or after one
 * whose op a key check completed, now gets TW_EBUSY: one watch per
 * tw_op_init. The racing pair is forced: the first watch is parked
 * right after it claimed the op.
 */
static void test_one_watch_per_init(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o, r, c;
	struct tw_watch ws[2];
	const void *keys[2] = { key, key1 };
	size_t lens[2] = { sizeof(key), sizeof(key1) };

	/* after a failed watch: refused, and on_release ran once */
	pop_init(&o);
	tw__test_set_fail(fail_key1);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 2, ws),
		 TW_ENOMEM);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 2, ws),
		 TW_EBUSY);
	CHECK_EQ(tw_purgatory_watched(p), 0);

	/* completed by a key check while still on another key's list */
	pop_init(&c);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &c.op, keys, lens, 2, ws), 0);
	atomic_store(&c.ready, 1);
	CHECK_EQ(tw_purgatory_check_and_complete(p, key, sizeof(key)), 1);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &c.op, keys, lens, 2, ws),
		 TW_EBUSY);

	/* a second watch while the first is inside its call */
	pop_init(&r);
	{
		struct sp_thread first;
		struct tw_watch w2;
		int parked = sp_arm("watch.open", &r.op);
		struct watcher wa = { p, &r, 0 };

		sp_spawn(&first, watch_thread, &wa);
		CHECK(sp_wait(parked, &first.done));
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &r.op, keys, lens, 1,
							      &w2),
			 TW_EBUSY);
		sp_release(parked);
		sp_join(&first, "the first watch");
		CHECK_EQ(wa.result, 0);
	}
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 1); /* r */
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(atomic_load(&c.releases), 1);
	CHECK_EQ(atomic_load(&r.releases), 1);
	tw_op_destroy(&o.op);
	tw_op_destroy(&c.op);
	tw_op_destroy(&r.op);
}

struct pshut {
	struct tw_purgatory *p;
	int64_t result;
};

static void *purgatory_shutdown_thread(void *arg)
{
	struct pshut *s = arg;

	s->result = tw_purgatory_shutdown(s->p, pop_hand_back);
	return NULL;
}

/*
 * An op that had passed the "closing" check watched after shutdown had
 * walked the lists: it was then never completed, expired or handed back.
 * Shutdown now waits for such calls to finish before it walks.
 */
static void test_purgatory_shutdown_waits_for_a_watch_in_flight(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct watcher w = { p, &o, -1000 };
	struct pshut s = { p, -1000 };
	struct sp_thread wt, st;
	int open, waiting;

	pop_init(&o);
	open = sp_arm("watch.open", &o.op);
	sp_spawn(&wt, watch_thread, &w);
	CHECK(sp_wait(open, &wt.done));
	waiting = sp_arm("purgatory.shutdown.wait", p);
	sp_spawn(&st, purgatory_shutdown_thread, &s);
	sp_wait(waiting, &st.done); /* before the fix it just finished */
	sp_release(open);
	sp_join(&wt, "try_complete_else_watch");
	sp_release(waiting);
	sp_join(&st, "purgatory shutdown");
	CHECK_EQ(w.result, 0);
	CHECK_EQ(s.result, 1);
	CHECK_EQ(atomic_load(&o.handed), 1);
	CHECK(tw_op_is_completed(&o.op));
	CHECK_EQ(atomic_load(&o.completes), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

struct forcer {
	struct pop *o;
	int releases_seen_at_complete;
	bool result;
};

static void *force_thread(void *arg)
{
	struct forcer *f = arg;

	f->result = tw_op_force_complete(&f->o->op);
	return NULL;
}

/*
 * tw_op_force_complete() from outside try_complete took a reference only
 * after its claim: in between, the op's last references could go (its
 * entry purged, its timeout run) and on_release ran before on_complete.
 */
static void test_force_complete_holds_the_op_across_its_claim(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct forcer f = { &o, 0, false };
	struct sp_thread ft;
	const void *keys[1] = { key };
	size_t lens[1] = { sizeof(key) };
	int claimed;

	pop_init(&o);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 1, &o.w), 0);
	claimed = sp_arm("force_complete.claimed", &o.op);
	sp_spawn(&ft, force_thread, &f);
	CHECK(sp_wait(claimed, &ft.done));
	/* Completed now: the key check drops its entry, the timeout runs. */
	CHECK_EQ(tw_purgatory_check_and_complete(p, key, sizeof(key)), 0);
	atomic_store(&virtual_now, 2000);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(atomic_load(&o.releases), 0); /* the forcer still holds it */
	sp_release(claimed);
	sp_join(&ft, "force_complete");
	CHECK(f.result);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.expires), 0);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

struct checker_args {
	struct tw_purgatory *p;
	int64_t result;
};

static void *check_key_thread(void *arg)
{
	struct checker_args *c = arg;

	c->result = tw_purgatory_check_and_complete(c->p, key, sizeof(key));
	return NULL;
}

/*
 * Found by model/purgatory.pml: a key check has claimed the op and not yet
 * cancelled its timeout when shutdown runs. Shutdown does not claim it
 * (it is completed), and the service's own shutdown then handed the armed
 * timeout back to nobody: the timeout's reference leaked and on_release
 * never ran. The purgatory now takes that hand-back and drops it.
 */
static void test_purgatory_shutdown_drops_the_reference_of_a_claimed_ops_timeout(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct checker_args c = { p, -1000 };
	struct sp_thread ct;
	const void *keys[1] = { key };
	size_t lens[1] = { sizeof(key) };
	int claimed;

	pop_init(&o);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 1, &o.w), 0);
	atomic_store(&o.ready, 1);
	claimed = sp_arm("force_complete.claimed", &o.op);
	sp_spawn(&ct, check_key_thread, &c);
	CHECK(sp_wait(claimed, &ct.done));
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 0);
	sp_release(claimed);
	sp_join(&ct, "check_and_complete");
	CHECK_EQ(c.result, 1);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.handed), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/* ---- a timer's callback never runs beside itself ---- */

/*
 * A periodic timer whose runs the test holds: run n returns only once go
 * reaches n. The counts live apart from the timer, which one test frees
 * from its callback.
 */
struct runs {
	atomic_int started, finished;
	atomic_int inside, overlaps; /* runs under way; a run that found one */
	atomic_int go;
	atomic_int handed;           /* expiries handed to the running thread */
	atomic_int resched_rc;       /* run 1's reschedule of itself */
	atomic_int cancel_rc;        /* run 2's cancel of itself */
	atomic_int freed;
	int64_t resched_to;          /* run 1 reschedules itself there (0: no) */
	bool cancel_on_run2;         /* run 2 cancels its timer and frees it */
	int64_t at[8];               /* the clock when run n + 1 started */
};

struct pjob {
	struct tw_service_periodic p;
	struct runs *r;
};

static void pjob_run(struct tw_service *svc, struct tw_service_timer *t)
{
	struct pjob *j = tw_container_of(t, struct pjob, p.timer);
	struct runs *r = j->r;
	int n = atomic_fetch_add(&r->started, 1) + 1;

	if (atomic_fetch_add(&r->inside, 1))
		atomic_fetch_add(&r->overlaps, 1);
	if (n <= 8)
		r->at[n - 1] = atomic_load(&virtual_now);
	if (n == 1 && r->resched_to)
		atomic_store(&r->resched_rc,
			     tw_service_reschedule(svc, t, r->resched_to));
	if (n == 2 && r->cancel_on_run2) {
		/* Its last act: stop itself and free itself (service.h). */
		atomic_store(&r->cancel_rc, tw_service_cancel(svc, t));
		atomic_fetch_sub(&r->inside, 1);
		atomic_fetch_add(&r->finished, 1);
		memset(j, 0x5a, sizeof(*j));
		free(j);
		atomic_store(&r->freed, 1);
		return;
	}
	while (atomic_load(&r->go) < n)
		sched_yield();
	atomic_fetch_sub(&r->inside, 1);
	atomic_fetch_add(&r->finished, 1);
}

static struct pjob *pjob_new(struct runs *r, int64_t period)
{
	struct pjob *j = malloc(sizeof(*j));

	CHECK(j != NULL);
	tw_service_periodic_init(&j->p, pjob_run, period);
	j->r = r;
	return j;
}

static void note_handed(const void *obj, void *arg)
{
	(void)obj;
	atomic_store(&((struct runs *)arg)->handed, 1);
}

/* Run 1 of j (due 1000) under way on an executor; then j rescheduled to
 * d2 (from the test, or from run 1 itself), the clock moved to d2 and
 * polled: the expiry of that reschedule is dispatched while run 1 still
 * runs. Returns when the other executor took it (and handed it over, or,
 * before, ran it). */
static void second_expiry_during_run_1(struct tw_service *svc, struct pjob *j,
				       struct runs *r, int64_t d2,
				       bool from_callback)
{
	sp_on("execute.handed_over", &j->p.timer, note_handed, r);
	if (from_callback)
		r->resched_to = d2;
	CHECK_EQ(tw_service_add(svc, &j->p.timer, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r->started) == 1, "run 1 never started");
	if (from_callback) {
		WAIT_FOR(atomic_load(&r->resched_rc) != 0,
			 "run 1 never rescheduled itself");
		CHECK_EQ(atomic_load(&r->resched_rc), TW_SVC_RUNNING);
	} else {
		/* Its run is under way: the re-arm after it will not happen. */
		CHECK_EQ(tw_service_reschedule(svc, &j->p.timer, d2), TW_SVC_RUNNING);
	}
	atomic_store(&virtual_now, d2);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r->handed) || atomic_load(&r->started) == 2 ||
		 atomic_load(&r->freed),
		 "the second expiry was neither run nor handed over");
	sp_forget("execute.handed_over", &j->p.timer);
	/* It waits for run 1 to return. */
	CHECK_EQ(atomic_load(&r->handed), 1);
	CHECK_EQ(atomic_load(&r->started), 1);
	CHECK_EQ(atomic_load(&r->overlaps), 0);
}

/*
 * The review's periodic timer (period 100, a run that lasts into the
 * next, two executors), rescheduled during a run to D1 + 50. The
 * reschedule's expiry ran on the other executor beside the run; the
 * run's re-arm, which saw that run's RUNNING, re-armed it too, and two
 * chains of runs went on, twice a period, for ever. Now the expiry waits
 * for run 1 and runs on its thread; the reschedule replaced run 1's
 * re-arm (TW_SVC_RUNNING: not re-armed), so the runs are at 1050 and then
 * every 100 from there: one per period, one at a time.
 */
static void reschedule_during_a_run(bool from_callback)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 100);

	second_expiry_during_run_1(svc, j, &r, 1050, from_callback);
	atomic_store(&r.go, 100); /* run 1 returns, then run 2 runs */
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 2 never ran");
	CHECK_EQ(r.at[1], 1050);
	CHECK_EQ(tw_service_count(svc), 1);
	for (int k = 1; k <= 3; k++) {
		/* D1 + k * 100: nothing (the re-arm of run 1 was replaced) */
		atomic_store(&virtual_now, 1000 + 100 * k);
		CHECK_EQ(tw_service_poll(svc), 0);
		atomic_store(&virtual_now, 1050 + 100 * k);
		CHECK_EQ(tw_service_poll(svc), 1);
		WAIT_FOR(atomic_load(&r.finished) == 2 + k, "a period's run never ran");
		CHECK_EQ(atomic_load(&r.started), 2 + k);
		CHECK_EQ(tw_service_count(svc), 1);
	}
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	tw_service_destroy(svc);
	free(j);
}

static void test_a_reschedule_during_a_run_waits_for_the_run(void)
{
	reschedule_during_a_run(false);
}

static void test_a_reschedule_from_the_callback_waits_for_the_run(void)
{
	reschedule_during_a_run(true);
}

/*
 * Period 400, rescheduled during run 1 to D2 = D1 + 200. Run 2 (at D2)
 * ran beside run 1; run 1 returned first and re-armed the timer at its
 * own D1 + 400, reading run 2's RUNNING as its own: the third run came at
 * 1400, not D2 + 400 = 1600. Now run 2 waits for run 1, whose re-arm the
 * reschedule replaced, and re-arms at D2 + 400.
 */
static void test_a_reschedule_during_a_run_sets_the_next_period(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 400);

	second_expiry_during_run_1(svc, j, &r, 1200, false);
	atomic_store(&r.go, 1); /* run 1 returns first */
	WAIT_FOR(atomic_load(&r.finished) == 1, "run 1 never returned");
	WAIT_FOR(atomic_load(&r.started) == 2, "run 2 never ran");
	atomic_store(&r.go, 2);
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 2 never returned");
	CHECK_EQ(r.at[1], 1200);
	atomic_store(&r.go, 100);
	atomic_store(&virtual_now, 1400); /* D1 + 400 */
	CHECK_EQ(tw_service_poll(svc), 0);
	atomic_store(&virtual_now, 1600); /* D2 + 400 */
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.finished) == 3, "run 3 never ran");
	CHECK_EQ(r.at[2], 1600);
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	tw_service_destroy(svc);
	free(j);
}

/*
 * Run 2 cancels its own timer and frees it, as service.h allows. It ran
 * beside run 1, whose executor then re-armed the freed timer (ASan: a
 * heap use after free in the re-arm). Now run 2 runs after run 1 returned
 * and its re-arm found the reschedule's expiry; nothing touches the timer
 * after run 2's free.
 */
static void test_a_run_that_frees_its_timer_has_no_run_beside_it(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob *j = pjob_new(&r, 100);

	r.cancel_on_run2 = true;
	second_expiry_during_run_1(svc, j, &r, 1000, false);
	CHECK_EQ(atomic_load(&r.freed), 0);
	atomic_store(&r.go, 1);
	WAIT_FOR(atomic_load(&r.freed), "run 2 never ran");
	CHECK_EQ(atomic_load(&r.cancel_rc), TW_SVC_RUNNING);
	WAIT_FOR(atomic_load(&r.finished) == 2, "run 1 never returned");
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	atomic_store(&virtual_now, 2000);
	CHECK_EQ(tw_service_poll(svc), 0);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/*
 * A one-shot timer too: its callback re-adds it due now and goes on. The
 * re-add's expiry waits for the callback to return, then runs on its
 * thread; a cancel_sync from the second run takes nothing it has to wait
 * for.
 */
static atomic_int os_started, os_inside, os_overlaps, os_go, os_readded;

static void oneshot_readd(struct tw_service *svc, struct tw_service_timer *t)
{
	int n = atomic_fetch_add(&os_started, 1) + 1;

	if (atomic_fetch_add(&os_inside, 1))
		atomic_fetch_add(&os_overlaps, 1);
	if (n == 1) {
		CHECK_EQ(tw_service_add(svc, t, 1000), TW_OK);
		atomic_store(&os_readded, 1);
	}
	while (atomic_load(&os_go) < n)
		sched_yield();
	atomic_fetch_sub(&os_inside, 1);
}

static void test_a_one_shot_readded_by_its_callback_waits_for_it(void)
{
	struct tw_service *svc = service(true, 2);
	struct tw_service_timer t;
	struct runs r = { 0 };

	tw_service_timer_init(&t, oneshot_readd);
	sp_on("execute.handed_over", &t, note_handed, &r);
	CHECK_EQ(tw_service_add(svc, &t, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&os_readded), "run 1 never re-added it");
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.handed) || atomic_load(&os_started) == 2,
		 "the re-add's expiry was neither run nor handed over");
	sp_forget("execute.handed_over", &t);
	CHECK_EQ(atomic_load(&os_started), 1);
	atomic_store(&os_go, 2);
	WAIT_FOR(atomic_load(&os_started) == 2 && !atomic_load(&os_inside),
		 "the re-add never ran");
	CHECK_EQ(atomic_load(&os_overlaps), 0);
	CHECK_EQ(tw_service_cancel_sync(svc, &t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
}

/*
 * From its own callback, a cancel_sync of a timer whose next expiry was
 * handed to this thread (it waits in the thread's own slot) takes it back
 * instead of waiting for itself.
 */
static atomic_int cs_rc;

static void cancel_sync_after_handover(struct tw_service *svc,
				       struct tw_service_timer *t)
{
	struct runs *r = &((struct pjob *)tw_container_of(
		t, struct pjob, p.timer))->r[0];
	int n = atomic_fetch_add(&r->started, 1) + 1;

	while (atomic_load(&r->go) < n)
		sched_yield();
	if (n == 1)
		atomic_store(&cs_rc, tw_service_cancel_sync(svc, t));
	atomic_fetch_add(&r->finished, 1);
}

static void test_a_cancel_sync_from_the_callback_takes_back_a_handed_expiry(void)
{
	struct tw_service *svc = service(true, 2);
	struct runs r = { 0 };
	struct pjob j;

	tw_service_periodic_init(&j.p, cancel_sync_after_handover, 100);
	j.r = &r;
	sp_on("execute.handed_over", &j.p.timer, note_handed, &r);
	CHECK_EQ(tw_service_add(svc, &j.p.timer, 1000), TW_OK);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.started) == 1, "run 1 never started");
	CHECK_EQ(tw_service_reschedule(svc, &j.p.timer, 1000), TW_SVC_RUNNING);
	CHECK_EQ(tw_service_poll(svc), 1);
	WAIT_FOR(atomic_load(&r.handed) || atomic_load(&r.started) == 2,
		 "the expiry was neither run nor handed over");
	sp_forget("execute.handed_over", &j.p.timer);
	CHECK_EQ(atomic_load(&r.handed), 1);
	atomic_store(&r.go, 1);
	WAIT_FOR(atomic_load(&r.finished) == 1, "the cancel_sync never returned");
	/* it stopped the reschedule's add, whose expiry was its own thread's */
	CHECK_EQ(atomic_load(&cs_rc), TW_SVC_STOPPED);
	atomic_store(&r.go, 100);
	CHECK_EQ(tw_service_cancel_sync(svc, &j.p.timer), TW_SVC_IDLE);
	CHECK_EQ(atomic_load(&r.started), 1);
	CHECK(!tw_service_timer_pending(&j.p.timer));
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	{
		struct tw_service_stats st;

		tw_service_stats(svc, &st);
		CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	}
	tw_service_destroy(svc);
}

int main(void)
{
	sp_install();
	RUN(test_reaper_keeps_waking_after_a_kick_at_its_loop_top);
	RUN(test_a_kick_that_finds_one_pending_loses_no_timer);
	RUN(test_cancel_sync_waits_for_shutdowns_hand_back);
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
	RUN(test_purgatory_check_between_check_and_watch_is_not_lost);
	RUN(test_a_failed_watch_takes_back_only_entries_still_linked);
	RUN(test_one_watch_per_init);
	RUN(test_purgatory_shutdown_waits_for_a_watch_in_flight);
	RUN(test_force_complete_holds_the_op_across_its_claim);
	RUN(test_purgatory_shutdown_drops_the_reference_of_a_claimed_ops_timeout);
	RUN(test_a_reschedule_during_a_run_waits_for_the_run);
	RUN(test_a_reschedule_from_the_callback_waits_for_the_run);
	RUN(test_a_reschedule_during_a_run_sets_the_next_period);
	RUN(test_a_run_that_frees_its_timer_has_no_run_beside_it);
	RUN(test_a_one_shot_readded_by_its_callback_waits_for_it);
	RUN(test_a_cancel_sync_from_the_callback_takes_back_a_handed_expiry);
	return check_report();
}
