/* SPDX-License-Identifier: MIT */
/*
 * A timer is claimed once: by a runner or by a cancel, never both; by one
 * service, never two. The claims of the timer service, each forced
 * through the named test points of the library
 * (tests/support/stop_points.h) as in cancel_sync_and_teardown.c:
 *   - a runner's claim of a timer it took into its batch: it stores its
 *     running mark, then exchanges its batch slot for NULL, while a cancel
 *     compares-and-swaps the same slot (src/service/core.h). A cancel
 *     before the exchange wins (TW_SVC_STOPPED, no run, the runner never
 *     touches the timer again); after it, the run is under way
 *     (TW_SVC_RUNNING, and cancel_sync waits for it); a reschedule while
 *     the scanner holds the timer in its batch ends that expiry;
 *   - a service's claim of a timer at its first add: owner and shard in
 *     one compare-and-swap of the state word, so that two services racing
 *     for a timer leave it in one (the other gets TW_EOWNER), an owner id
 *     is never one a live service holds, and an add that claimed before
 *     shutdown and files after it is refused.
 * Nothing is timed: a bound of seconds only turns a hang into a failure.
 */
#define _POSIX_C_SOURCE 200809L

#include "forced_jobs.h"
#include "service/core.h"

static void *shutdown_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_shutdown(sj->svc, NULL, NULL);
	return NULL;
}

/* ---- shutdown and a first add between its claim and its filing ---- */

static void *add_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_add(sj->svc, &sj->job->t, 9000);
	return NULL;
}

/*
 * Shutdown closes each shard under its mutex, and an add decides under
 * the same mutex: an add that claimed its timer before shutdown began and
 * reaches its shard after the close is refused (TW_ESHUTDOWN), and
 * shutdown neither waits for it nor hands anything back for it. Forced:
 * the first add of j is parked right after its claim ("add.claimed", no
 * lock held); a whole shutdown runs (it would hang here if it waited for
 * the add); the add goes on. Nothing was added, nothing handed back, and
 * the accounting balances.
 */
static void test_an_add_that_claimed_before_shutdown_is_refused_after(void)
{
	struct tw_service *svc = service(true, 0);
	struct job j;
	struct svc_job adder = { svc, &j, -1000 }, down = { svc, &j, -1000 };
	struct sp_thread a, d;
	struct tw_service_stats st;
	int claimed;

	job_init(&j);
	claimed = sp_arm("add.claimed", &j.t);
	sp_spawn(&a, add_thread, &adder);
	CHECK(sp_wait(claimed, &a.done));
	sp_spawn(&d, shutdown_thread, &down);
	sp_join(&d, "shutdown beside an add that claimed its timer");
	CHECK_EQ(down.result, 0);
	sp_release(claimed);
	sp_join(&a, "add");
	CHECK_EQ(adder.result, TW_ESHUTDOWN);
	CHECK(!tw_service_timer_pending(&j.t));
	CHECK_EQ(atomic_load(&j.runs), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 0);
	CHECK_EQ(st.handed_back, 0);
	CHECK_EQ(tw_service_add(svc, &j.t, 9000), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

/* ---- the claim: a cancel and a runner race for a batch slot ---- */

static atomic_int claim_runs; /* runs of the timers the claim tests free */

static void count_claim_run(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	atomic_fetch_add(&claim_runs, 1);
}

/* t due now, expired by a poll on a thread of its own (sp_join it) and
 * taken into a runner's batch: the poll's own thread without executors,
 * the only executor with one. Returns once that runner is parked at point
 * with t (its slot). */
static int taken_by_a_runner_parked_at(struct tw_service *svc,
				       struct tw_service_timer *t,
				       const char *point, struct poller *pl,
				       struct sp_thread *th)
{
	int slot;

	CHECK_EQ(tw_service_add(svc, t, 1000), TW_OK);
	slot = sp_arm(point, t);
	pl->svc = svc;
	pl->result = -1000;
	sp_spawn(th, poll_thread, pl);
	CHECK(sp_wait(slot, NULL));
	return slot;
}

/*
 * The claim (core.h): a runner stores its running mark, then exchanges its
 * batch slot for NULL; a cancel compares-and-swaps the same slot from the
 * timer to NULL. Forced: the runner is parked between its mark and its
 * exchange ("run.claiming"); a cancel from another thread wins the slot:
 * TW_SVC_STOPPED, the timer is no longer pending, and the owner frees it
 * there and then. Released, the runner finds its slot empty: the callback
 * never runs, and the runner never touches the timer (ASan sees any
 * touch of the freed memory). Without executors (the poll's thread is the
 * runner) and with one (the executor is).
 */
static void a_cancel_before_the_claim_wins(unsigned executors)
{
	struct tw_service *svc = service(true, executors);
	struct tw_service_timer *t = malloc(sizeof(*t));
	struct poller pl;
	struct sp_thread th;
	struct tw_service_stats st;
	int claiming;

	atomic_store(&claim_runs, 0);
	tw_service_timer_init(t, count_claim_run);
	claiming = taken_by_a_runner_parked_at(svc, t, "run.claiming", &pl, &th);
	CHECK(tw_service_timer_pending(t)); /* taken, not claimed */
	CHECK_EQ(tw_service_cancel(svc, t), TW_SVC_STOPPED);
	CHECK(!tw_service_timer_pending(t));
	free(t);
	sp_release(claiming);
	sp_join(&th, "the poll");
	CHECK_EQ(pl.result, 1); /* that poll expired it */
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&claim_runs), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 1);
	CHECK_EQ(st.ran, 0);
	CHECK_EQ(st.stopped, 1);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

static void test_a_cancel_before_the_claim_wins_the_scanners_slot(void)
{
	a_cancel_before_the_claim_wins(0);
}

static void test_a_cancel_before_the_claim_wins_an_executors_slot(void)
{
	a_cancel_before_the_claim_wins(1);
}

struct sync_call {
	struct tw_service *svc;
	struct tw_service_timer *t;
	struct job *watched;     /* its finished flag, read on return */
	bool free_it;            /* free t once the call returned */
	atomic_int result, finished_at_return;
};

static void *cancel_sync_call(void *arg)
{
	struct sync_call *c = arg;
	int rc = tw_service_cancel_sync(c->svc, c->t);

	if (c->watched)
		atomic_store(&c->finished_at_return,
			     atomic_load(&c->watched->finished));
	if (c->free_it)
		free(c->t); /* cancel_sync returned: nothing refers to it */
	atomic_store(&c->result, rc);
	return NULL;
}

/*
 * The same race won by the cancel inside cancel_sync, from another thread,
 * while the runner's mark is stored: the call stops the timer
 * (TW_SVC_STOPPED) and returns at once -- a timer taken back before its
 * claim is no run, whatever the runner's mark says, and the runner, whose
 * claim then fails, never touches it -- and the timer is freed while the
 * runner is still parked. The callback never runs (and ASan sees no
 * touch after the free).
 */
static void test_cancel_sync_beats_a_runner_at_its_claim(void)
{
	struct tw_service *svc = service(true, 1);
	struct tw_service_timer *t = malloc(sizeof(*t));
	struct sync_call c = { svc, t, NULL, true, -1000, -1 };
	struct poller pl;
	struct sp_thread th, cs;
	int claiming, waiting;

	atomic_store(&claim_runs, 0);
	tw_service_timer_init(t, count_claim_run);
	claiming = taken_by_a_runner_parked_at(svc, t, "run.claiming", &pl, &th);
	sp_join(&th, "the poll");
	CHECK_EQ(pl.result, 1);
	waiting = sp_arm("cancel_sync.wait", t);
	sp_spawn(&cs, cancel_sync_call, &c);
	/* It returns while the runner is parked with its mark: no wait. */
	sp_join(&cs, "cancel_sync");
	sp_forget("cancel_sync.wait", t);
	(void)waiting;
	sp_release(claiming);
	CHECK_EQ(atomic_load(&c.result), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&claim_runs), 0);
	check_balanced(svc, 1, 0, 1);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

/*
 * The runner wins: parked right after its exchange ("run.claimed"), the
 * callback next. The timer is no longer pending; a cancel says
 * TW_SVC_RUNNING (too late), and a cancel_sync from another thread waits
 * for the callback: it returns TW_SVC_RUNNING once the callback has
 * finished, and the callback ran once.
 */
static void test_a_cancel_after_the_claim_is_too_late_and_cancel_sync_waits(void)
{
	struct tw_service *svc = service(true, 1);
	struct job j;
	struct sync_call c = { svc, &j.t, &j, false, -1000, -1 };
	struct poller pl;
	struct sp_thread th, cs;
	int claimed, waiting;

	job_init(&j);
	claimed = taken_by_a_runner_parked_at(svc, &j.t, "run.claimed", &pl, &th);
	sp_join(&th, "the poll");
	CHECK_EQ(pl.result, 1);
	CHECK(!tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_cancel(svc, &j.t), TW_SVC_RUNNING);
	waiting = sp_arm("cancel_sync.wait", &j.t);
	sp_spawn(&cs, cancel_sync_call, &c);
	CHECK(sp_wait(waiting, &cs.done));
	sp_release(waiting);
	CHECK_EQ(atomic_load(&cs.done), 0);
	CHECK_EQ(atomic_load(&j.runs), 0);
	sp_release(claimed);
	sp_join(&cs, "cancel_sync");
	CHECK_EQ(atomic_load(&c.result), TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&c.finished_at_return), 1);
	CHECK_EQ(atomic_load(&j.runs), 1);
	CHECK_EQ(tw_service_cancel_sync(svc, &j.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, 1, 1, 0);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

/* ---- a window rescheduled out of the scanner's batch ---- */

/*
 * j, due 1100, expires in a poll at 1700 and is taken into the scanner's
 * batch; the scanner is parked there, the shard's mutex let go
 * ("scan.batch"). A reschedule to the window [3000, 3500] takes its slot
 * back (TW_SVC_STOPPED: that expiry ends there) and files the new window.
 * The expiry the poll made must not run, nor may the new window fire
 * before 3000 (never early); it fires once, by 3500 and a tick.
 */
static void test_a_window_rescheduled_out_of_the_scanners_batch_never_fires_early(void)
{
	struct tw_service *svc = service(true, 0);
	struct job j;
	struct poller poller = { svc, -1000 };
	struct sp_thread p;
	int batch;

	job_init(&j);
	CHECK_EQ(tw_service_add(svc, &j.t, 1100), TW_OK);
	atomic_store(&virtual_now, 1700);
	batch = sp_arm("scan.batch", svc);
	sp_spawn(&p, poll_thread, &poller);
	CHECK(sp_wait(batch, &p.done));
	CHECK(tw_service_timer_pending(&j.t)); /* taken, not claimed */
	CHECK_EQ(tw_service_reschedule_range(svc, &j.t, 3000, 3500), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_count(svc), 1);
	sp_release(batch);
	sp_join(&p, "poll");
	CHECK_EQ(poller.result, 1); /* that poll expired it */
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
	check_balanced(svc, 2, 1, 1);
	tw_service_destroy(svc);
}

/* A poll parked at its first "scan.batch" (the shard's mutex let go
 * to run a batch), the shard's wheel whole there (tw_wheel_check);
 * *stopped (unless NULL): whether its advance had stopped. Returns the
 * armed point. */
static int poll_parked_at_a_batch(struct tw_service *svc, struct shard *s,
				  struct poller *poller, struct sp_thread *p,
				  bool *stopped)
{
	char why[256] = "";
	int batch = sp_arm("scan.batch", svc);

	sp_spawn(p, poll_thread, poller);
	CHECK(sp_wait(batch, &p->done));
	shard_lock(s);
	if (stopped)
		*stopped = tw__wheel_stopped(&s->wheel);
	if (tw_wheel_check(&s->wheel, why, sizeof(why)) != 0) {
		fprintf(stderr, "the shard's wheel at scan.batch: %s\n", why);
		CHECK(0);
	}
	shard_unlock(s);
	return batch;
}

/*
 * Without executors the scanner runs what an advance expired once the
 * advance is over or has stopped at a full batch, a batch a lock hold:
 * when it lets go of the shard's mutex to run one ("scan.batch"), the
 * shard's wheel is whole -- its advance ended or stopped, its invariants
 * holding (tw_wheel_check) -- for whatever other threads add, move or
 * cancel there. 3 * BATCH + 5 timers due by the poll and one after it:
 * each of the first runs once in that poll, however many batches they
 * take; a window rescheduled there from another thread, off a timer
 * still to run (still in the wheel: the advance stopped at the first
 * batch, so the poll expired one fewer), is filed in a whole wheel, runs
 * in no batch of the poll and never before its start. The scan's first
 * batch holds FIRST_BATCH timers, so that its first callback waits for
 * that many takes, not BATCH.
 */
static void test_a_full_batch_runs_after_the_advance(void)
{
	enum { N = 3 * BATCH + 5 };
	struct tw_service *svc = service(true, 0);
	static struct job j[N];
	struct job late;
	struct poller poller = { svc, -1000 };
	struct sp_thread p;
	struct shard *s;
	int batch;

	for (int i = 0; i < N; i++) {
		job_init(&j[i]);
		CHECK_EQ(tw_service_add(svc, &j[i].t, 1010 + 2 * i), TW_OK);
	}
	job_init(&late);
	CHECK_EQ(tw_service_add(svc, &late.t, 5000), TW_OK);
	s = &svc->shards[word_shard(word_load(&j[0].t))];
	atomic_store(&virtual_now, 1700);
	batch = poll_parked_at_a_batch(svc, s, &poller, &p, NULL);
	CHECK_EQ(svc->runners[SCANNER(svc)].len, FIRST_BATCH);
	/* The last timer, not in the first batch: moved to [3000, 3500]. */
	CHECK_EQ(tw_service_reschedule_range(svc, &j[N - 1].t, 3000, 3500),
		 TW_SVC_STOPPED);
	sp_release(batch);
	sp_join(&p, "poll");
	CHECK_EQ(poller.result, N - 1);
	for (int i = 0; i < N - 1; i++)
		CHECK_EQ(atomic_load(&j[i].runs), 1);
	CHECK_EQ(atomic_load(&j[N - 1].runs), 0);
	CHECK_EQ(atomic_load(&late.runs), 0);
	for (int64_t now = 1700; now < 3000; now += 7) {
		atomic_store(&virtual_now, now);
		CHECK(tw_service_poll(svc) >= 0);
	}
	CHECK_EQ(atomic_load(&j[N - 1].runs), 0);
	atomic_store(&virtual_now, 3510);
	CHECK(tw_service_poll(svc) >= 0);
	CHECK_EQ(atomic_load(&j[N - 1].runs), 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 1);
	check_balanced(svc, N + 2, N, 1); /* and late handed back */
	tw_service_destroy(svc);
}

/*
 * Timers due in one tick: the scanner's advance fires a batch of them and
 * stops in the middle of their level-1 bucket, the rest left there in a
 * whole wheel (tw_wheel_check) while the batch runs with the mutex let go
 * ("scan.batch"); then the advance goes on. Meanwhile another thread
 * cancels one of the rest, reschedules another and adds a timer already
 * due: the cancelled one never runs, the rescheduled one runs at its new
 * time and never before, the one added waits for the next advance (as a
 * timer added during an advance does), and the rest run once each in
 * that poll, in the order they were added.
 */
static atomic_int run_seq;

static void record_order(struct tw_service *svc, struct job *self)
{
	(void)svc;
	atomic_store(&self->result, atomic_fetch_add(&run_seq, 1));
	atomic_store(&self->finished, 1);
}

static void test_a_full_batch_stops_the_advance_inside_a_bucket(void)
{
	enum { N = 3 * BATCH + 5, CANCELLED = 2 * BATCH, MOVED = N - 1 };
	struct tw_service *svc = service(true, 0);
	static struct job j[N];
	struct job added;
	struct poller poller = { svc, -1000 };
	struct sp_thread p;
	struct shard *s;
	bool stopped;
	int batch, last = -1;

	atomic_store(&run_seq, 0);
	for (int i = 0; i < N; i++) {
		job_init(&j[i]);
		j[i].action = record_order;
		CHECK_EQ(tw_service_add(svc, &j[i].t, 1010), TW_OK);
	}
	job_init(&added);
	s = &svc->shards[word_shard(word_load(&j[0].t))];
	atomic_store(&virtual_now, 1700);
	batch = poll_parked_at_a_batch(svc, s, &poller, &p, &stopped);
	CHECK(stopped);
	CHECK_EQ(tw_service_cancel(svc, &j[CANCELLED].t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_reschedule(svc, &j[MOVED].t, 3000), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_add(svc, &added.t, 1500), TW_OK);
	sp_release(batch);
	sp_join(&p, "poll");
	CHECK_EQ(poller.result, N - 2);
	for (int i = 0; i < N; i++) {
		if (i == CANCELLED || i == MOVED) {
			CHECK_EQ(atomic_load(&j[i].runs), 0);
			continue;
		}
		CHECK_EQ(atomic_load(&j[i].runs), 1);
		CHECK(atomic_load(&j[i].result) > last);
		last = atomic_load(&j[i].result);
	}
	CHECK_EQ(atomic_load(&added.runs), 0);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&added.runs), 1);
	atomic_store(&virtual_now, 2999);
	CHECK_EQ(tw_service_poll(svc), 0);
	atomic_store(&virtual_now, 3000);
	CHECK_EQ(tw_service_poll(svc), 1);
	CHECK_EQ(atomic_load(&j[MOVED].runs), 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	check_balanced(svc, N + 2, N, 2);
	tw_service_destroy(svc);
}

/*
 * Owner ids wrap after 2^18 - 1 services; a new service must never get the
 * id of one still alive, or each passes the other's owner checks (a cancel
 * on the new one would stop the old one's timer, and neither's accounting
 * would balance). The hook stands for the wrap: the next id to hand out is
 * the live service's.
 */
static void test_a_wrapped_owner_id_skips_live_services(void)
{
	struct tw_service *a = service(true, 0), *b;
	struct job j, k;
	uint32_t id_a;

	job_init(&j);
	job_init(&k);
	CHECK_EQ(tw_service_add(a, &j.t, 5000), TW_OK);
	id_a = j.t.state >> OWNER_SHIFT; /* the owner's id (state.h) */
	CHECK(id_a != 0);
	tw__test_service_next_id(id_a - 1);
	b = service(true, 0);
	CHECK_EQ(tw_service_cancel(b, &j.t), TW_EOWNER);
	CHECK_EQ(tw_service_add(b, &k.t, 5000), TW_OK);
	CHECK(k.t.state >> OWNER_SHIFT != 0);
	CHECK(k.t.state >> OWNER_SHIFT != id_a);
	CHECK_EQ(tw_service_cancel(a, &k.t), TW_EOWNER);
	CHECK_EQ(tw_service_shutdown(b, NULL, NULL), 1);
	CHECK_EQ(tw_service_shutdown(a, NULL, NULL), 1);
	tw_service_destroy(b);
	tw_service_destroy(a);
}

struct add_from {
	struct tw_service *svc;
	struct job *job;
};

static void *add_from_a_new_thread(void *arg)
{
	struct add_from *af = arg;

	CHECK_EQ(tw_service_add(af->svc, &af->job->t, 5000), TW_OK);
	return NULL;
}

/*
 * After the ids wrap, a timer of a destroyed service carries the id a new
 * service holds (the header: reuse a timer with another service only after
 * a fresh init). It must not take the new service for its own where its
 * shard is not one of the new service's: it indexed past the new
 * service's shards (ASan: heap-buffer-overflow in the add). A has 256 shards, and of two timers added from
 * two threads one sits past shard 0; B has one shard and A's id.
 */
static void test_a_destroyed_services_timer_is_another_services_after_a_wrap(void)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *a = NULL, *b = NULL;
	struct job j[2], *stale;
	struct add_from af;
	pthread_t th;
	uint32_t id_a;

	cfg.manual = true;
	cfg.shards = 256;
	cfg.clock.now = virtual_clock;
	CHECK_EQ(tw_service_create(&a, &cfg), TW_OK);
	job_init(&j[0]);
	job_init(&j[1]);
	CHECK_EQ(tw_service_add(a, &j[0].t, 5000), TW_OK);
	af.svc = a;
	af.job = &j[1];
	pthread_create(&th, NULL, add_from_a_new_thread, &af);
	pthread_join(th, NULL);
	stale = word_shard(j[0].t.state) ? &j[0] : &j[1];
	CHECK(word_shard(stale->t.state) != 0);
	id_a = stale->t.state >> OWNER_SHIFT;
	CHECK_EQ(tw_service_shutdown(a, NULL, NULL), 2); /* stale stays as it was */
	CHECK_EQ(tw_service_destroy(a), TW_OK);
	tw__test_service_next_id(id_a - 1);
	cfg.shards = 1;
	CHECK_EQ(tw_service_create(&b, &cfg), TW_OK);
	CHECK_EQ(tw_service_add(b, &stale->t, 6000), TW_EOWNER);
	CHECK_EQ(tw_service_reschedule(b, &stale->t, 6000), TW_EOWNER);
	CHECK_EQ(tw_service_cancel(b, &stale->t), TW_EOWNER);
	CHECK_EQ(tw_service_cancel_sync(b, &stale->t), TW_EOWNER);
	CHECK_EQ(tw_service_timer_shutdown(b, &stale->t), TW_EOWNER);
	CHECK_EQ(tw_service_shutdown(b, NULL, NULL), 0);
	tw_service_destroy(b);
}

/* ---- two services racing for a timer's first add ---- */

struct first_add {
	struct tw_service *svc;
	struct job *job;
	bool reschedule;
	int result;
	bool bind; /* the thread's call: tw_service_timer_bind() instead */
};

static int first_add(struct tw_service *svc, struct job *j, bool reschedule)
{
	return reschedule ? tw_service_reschedule(svc, &j->t, 2000)
			  : tw_service_add(svc, &j->t, 2000);
}

static void *first_add_thread(void *arg)
{
	struct first_add *f = arg;

	f->result = f->bind ? tw_service_timer_bind(f->svc, &f->job->t)
			    : first_add(f->svc, f->job, f->reschedule);
	return NULL;
}

/*
 * A timer joins the service whose first add claims it: the owner and the
 * shard go into its state word in one compare-and-swap. Forced: the first
 * add of a fresh timer on s1 is parked before its claim ("add.claiming",
 * the word read without an owner); the timer is added on s2, which claims
 * it; s1's claim then fails and finds s2's id: TW_EOWNER. The timer is in
 * s2's wheel only, and s2's shutdown hands it back. As an add and as a
 * reschedule (which reports TW_SVC_IDLE for a timer that was not pending),
 * and with a bind parked on s1 (bind: it races a first add as two first
 * adds do).
 */
static void two_services_race_for_a_first_add(bool reschedule, bool bind)
{
	struct tw_service *s1 = service(true, 0), *s2 = service(true, 0);
	struct job j;
	struct first_add f = { s1, &j, reschedule, -1000, bind };
	struct sp_thread th;
	int claiming;

	job_init(&j);
	claiming = sp_arm("add.claiming", &j.t);
	sp_spawn(&th, first_add_thread, &f);
	CHECK(sp_wait(claiming, &th.done));
	CHECK_EQ(first_add(s2, &j, reschedule), reschedule ? TW_SVC_IDLE : TW_OK);
	sp_release(claiming);
	sp_join(&th, "the first call on s1");
	CHECK_EQ(f.result, TW_EOWNER);
	CHECK(tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_count(s1), 0);
	CHECK_EQ(tw_service_count(s2), 1);
	CHECK_EQ(tw_service_cancel(s1, &j.t), TW_EOWNER);
	CHECK_EQ(tw_service_add(s1, &j.t, 2000), TW_EOWNER);
	CHECK_EQ(tw_service_shutdown(s1, NULL, NULL), 0);
	CHECK_EQ(tw_service_shutdown(s2, NULL, NULL), 1);
	check_balanced(s1, 0, 0, 0);
	check_balanced(s2, 1, 0, 0);
	tw_service_destroy(s1);
	tw_service_destroy(s2);
}

static void test_a_timer_joins_one_service_only(void)
{
	two_services_race_for_a_first_add(false, false);
}

static void test_a_timer_rescheduled_on_two_services_joins_one(void)
{
	two_services_race_for_a_first_add(true, false);
}

#ifndef TW_DEBUG /* its one test does not run in the debug build */
static void *timer_shutdown_thread(void *arg)
{
	struct svc_job *sj = arg;

	sj->result = tw_service_timer_shutdown(sj->svc, &sj->job->t);
	return NULL;
}
#endif

/*
 * A failed call changes nothing, and a race looks like some serial order.
 * A first add that claimed its timer, then met its teardown
 * (tw_service_timer_shutdown() from another thread, between the claim and
 * the shard's mutex), is refused (TW_ESHUTDOWN) and gives the claim back:
 * the timer ends as the serial order "teardown, then add" leaves it, torn
 * down and owned by no service, so that another service's calls on it
 * answer as they would in that order (an add TW_ESHUTDOWN, a cancel
 * TW_SVC_IDLE) and, after a reinit, its add takes it. Forced: the add is
 * parked right after its claim ("add.claimed"), the teardown runs whole,
 * the add goes on. As an add and as a reschedule. The debug build
 * (TW_DEBUG) stops at an add of a torn-down timer from any thread but its
 * callback's, which this is (refuse_shut), so there the test has nothing
 * to run.
 */
static void a_first_add_torn_down_after_its_claim_gives_it_back(bool reschedule)
{
#ifndef TW_DEBUG
	struct tw_service *a = service(true, 0), *b = service(true, 0);
	struct job j;
	struct first_add adder = { a, &j, reschedule, -1000, false };
	struct svc_job down = { a, &j, -1000 };
	struct sp_thread at, dt;
	struct tw_service_stats st;
	int claimed;

	job_init(&j);
	claimed = sp_arm("add.claimed", &j.t);
	sp_spawn(&at, first_add_thread, &adder);
	CHECK(sp_wait(claimed, &at.done));
	sp_spawn(&dt, timer_shutdown_thread, &down);
	sp_join(&dt, "timer_shutdown beside an add that claimed its timer");
	CHECK_EQ(down.result, TW_SVC_IDLE);
	sp_release(claimed);
	sp_join(&at, "add");
	CHECK_EQ(adder.result, TW_ESHUTDOWN);
	CHECK(!tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_add(b, &j.t, 9000), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_cancel(b, &j.t), TW_SVC_IDLE);
	CHECK_EQ(tw_service_timer_reinit(&j.t, job_run), TW_OK);
	CHECK_EQ(tw_service_add(b, &j.t, 9000), TW_OK);
	CHECK_EQ(tw_service_cancel(b, &j.t), TW_SVC_STOPPED);
	tw_service_stats(a, &st);
	CHECK_EQ(st.added, 0);
	CHECK_EQ(atomic_load(&j.runs), 0);
	CHECK_EQ(tw_service_destroy(a), TW_OK);
	CHECK_EQ(tw_service_destroy(b), TW_OK);
#else
	(void)reschedule;
#endif
}

static void test_a_first_add_torn_down_after_its_claim_gives_it_back(void)
{
	a_first_add_torn_down_after_its_claim_gives_it_back(false);
}

static void test_a_first_reschedule_torn_down_after_its_claim_gives_it_back(void)
{
	a_first_add_torn_down_after_its_claim_gives_it_back(true);
}

/*
 * A first add to a service already shut down claims nothing: it is
 * refused (TW_ESHUTDOWN) before its compare-and-swap, so that no other
 * service's call on the timer ever meets a claim that is about to be
 * given back (in every serial order the timer was never the shut-down
 * service's). Forced: the add is armed to park right after a claim
 * ("add.claimed"), where it would hold one; it must finish without
 * arriving there, and another service then adds the timer (before the
 * fix it parked there, and that add got TW_EOWNER). As an add and as a
 * reschedule.
 */
static void a_first_add_to_a_shut_down_service_claims_nothing(bool reschedule)
{
	struct tw_service *a = service(true, 0), *b = service(true, 0);
	struct job j;
	struct first_add late = { a, &j, reschedule, -1000, false };
	struct sp_thread th;
	int claimed;
	bool parked;

	job_init(&j);
	CHECK_EQ(tw_service_shutdown(a, NULL, NULL), 0);
	claimed = sp_arm("add.claimed", &j.t);
	sp_spawn(&th, first_add_thread, &late);
	parked = sp_wait(claimed, &th.done);
	CHECK(!parked);
	/* Disarmed before b's add, which would park there itself. */
	if (!parked)
		sp_release(claimed);
	CHECK_EQ(first_add(b, &j, reschedule), reschedule ? TW_SVC_IDLE : TW_OK);
	if (parked)
		sp_release(claimed);
	sp_join(&th, "the first add on a shut-down service");
	CHECK_EQ(late.result, TW_ESHUTDOWN);
	CHECK_EQ(tw_service_count(b), 1);
	CHECK_EQ(tw_service_cancel(b, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&j.runs), 0);
	CHECK_EQ(tw_service_destroy(a), TW_OK);
	CHECK_EQ(tw_service_destroy(b), TW_OK);
}

static void test_a_first_add_to_a_shut_down_service_claims_nothing(void)
{
	a_first_add_to_a_shut_down_service_claims_nothing(false);
}

static void test_a_first_reschedule_on_a_shut_down_service_claims_nothing(void)
{
	a_first_add_to_a_shut_down_service_claims_nothing(true);
}

/*
 * Only the call whose compare-and-swap claimed a timer gives the claim
 * back. A first add parked before its claim ("add.claiming", the word read
 * without an owner) while another add of the same service claims and
 * files the timer, a cancel stops it and the service shuts down: the
 * parked add's own claim then fails on a word its service owns, it goes
 * on to the closed shard and is refused (TW_ESHUTDOWN), and changes
 * nothing: the timer stays its service's, as in the serial order (add,
 * cancel, shutdown, the refused add), so another service's calls on it
 * get TW_EOWNER.
 */
static void test_a_first_add_that_lost_its_claim_gives_back_nothing(void)
{
	struct tw_service *a = service(true, 0), *b = service(true, 0);
	struct job j;
	struct first_add late = { a, &j, false, -1000, false };
	struct sp_thread th;
	int claiming;

	job_init(&j);
	claiming = sp_arm("add.claiming", &j.t);
	sp_spawn(&th, first_add_thread, &late);
	CHECK(sp_wait(claiming, &th.done));
	CHECK_EQ(tw_service_add(a, &j.t, 2000), TW_OK);
	CHECK_EQ(tw_service_cancel(a, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_shutdown(a, NULL, NULL), 0);
	sp_release(claiming);
	sp_join(&th, "the add that lost its claim");
	CHECK_EQ(late.result, TW_ESHUTDOWN);
	CHECK_EQ(tw_service_cancel(b, &j.t), TW_EOWNER);
	CHECK_EQ(tw_service_add(b, &j.t, 2000), TW_EOWNER);
	CHECK_EQ(atomic_load(&j.runs), 0);
	CHECK_EQ(tw_service_destroy(a), TW_OK);
	CHECK_EQ(tw_service_destroy(b), TW_OK);
}

/* ---- a timer bound before its first add ---- */

static void count_hit(const void *obj, void *arg)
{
	(void)obj;
	atomic_fetch_add((atomic_int *)arg, 1);
}

/*
 * tw_service_timer_bind() makes the first add's claim ahead of it: the
 * claim's compare-and-swap ("add.claiming" is where it starts) runs in
 * the bind, once, and never in the adds that follow; a second bind by the
 * same service changes nothing. Bound, the timer is its service's as if
 * added: another service's bind and add get TW_EOWNER. A service shut
 * down binds nothing, its own timer included (a free one stays free for
 * another), and NULLs are TW_EINVAL. Serial: no thread is parked.
 */
static void test_a_bound_timer_is_claimed_by_its_bind_not_by_its_add(void)
{
	struct tw_service *a = service(true, 0), *b = service(true, 0);
	struct job j, free_timer;
	atomic_int claims = 0;

	job_init(&j);
	job_init(&free_timer);
	CHECK_EQ(tw_service_timer_bind(NULL, &j.t), TW_EINVAL);
	CHECK_EQ(tw_service_timer_bind(a, NULL), TW_EINVAL);
	sp_on("add.claiming", &j.t, count_hit, &claims);
	CHECK_EQ(tw_service_timer_bind(a, &j.t), TW_OK);
	CHECK_EQ(atomic_load(&claims), 1);
	CHECK_EQ(tw_service_timer_bind(a, &j.t), TW_OK);
	CHECK(!tw_service_timer_pending(&j.t));
	CHECK_EQ(tw_service_timer_bind(b, &j.t), TW_EOWNER);
	CHECK_EQ(tw_service_add(b, &j.t, 2000), TW_EOWNER);
	CHECK_EQ(tw_service_add(a, &j.t, 2000), TW_OK);
	CHECK_EQ(tw_service_cancel(a, &j.t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_add(a, &j.t, 2000), TW_OK);
	CHECK_EQ(atomic_load(&claims), 1);
	sp_forget("add.claiming", &j.t);
	CHECK_EQ(tw_service_count(a), 1);
	CHECK_EQ(tw_service_shutdown(a, NULL, NULL), 1);
	CHECK_EQ(tw_service_timer_bind(a, &j.t), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_timer_bind(a, &free_timer.t), TW_ESHUTDOWN);
	CHECK_EQ(tw_service_add(b, &free_timer.t, 2000), TW_OK);
	CHECK_EQ(tw_service_cancel(b, &free_timer.t), TW_SVC_STOPPED);
	check_balanced(a, 2, 0, 1);
	check_balanced(b, 1, 0, 1);
	CHECK_EQ(atomic_load(&j.runs), 0);
	CHECK_EQ(tw_service_destroy(a), TW_OK);
	CHECK_EQ(tw_service_destroy(b), TW_OK);
}

/* A bind parked before its claim ("add.claiming") loses to another
 * service's first add: TW_EOWNER, and the timer is in that service's
 * wheel only (two_services_race_for_a_first_add). */
static void test_a_bind_that_loses_to_another_services_add_binds_nothing(void)
{
	two_services_race_for_a_first_add(false, true);
}

int main(int argc, char **argv)
{
	races_only = argc > 1 ? argv[1] : NULL;
	sp_install();
	RUN_SELECTED(test_a_cancel_before_the_claim_wins_the_scanners_slot);
	RUN_SELECTED(test_a_cancel_before_the_claim_wins_an_executors_slot);
	RUN_SELECTED(test_cancel_sync_beats_a_runner_at_its_claim);
	RUN_SELECTED(test_a_cancel_after_the_claim_is_too_late_and_cancel_sync_waits);
	RUN_SELECTED(test_a_window_rescheduled_out_of_the_scanners_batch_never_fires_early);
	RUN_SELECTED(test_a_full_batch_runs_after_the_advance);
	RUN_SELECTED(test_a_full_batch_stops_the_advance_inside_a_bucket);
	RUN_SELECTED(test_a_timer_joins_one_service_only);
	RUN_SELECTED(test_a_timer_rescheduled_on_two_services_joins_one);
	RUN_SELECTED(test_a_wrapped_owner_id_skips_live_services);
	RUN_SELECTED(test_a_destroyed_services_timer_is_another_services_after_a_wrap);
	RUN_SELECTED(test_an_add_that_claimed_before_shutdown_is_refused_after);
	RUN_SELECTED(test_a_first_add_torn_down_after_its_claim_gives_it_back);
	RUN_SELECTED(test_a_first_reschedule_torn_down_after_its_claim_gives_it_back);
	RUN_SELECTED(test_a_first_add_that_lost_its_claim_gives_back_nothing);
	RUN_SELECTED(test_a_first_add_to_a_shut_down_service_claims_nothing);
	RUN_SELECTED(test_a_first_reschedule_on_a_shut_down_service_claims_nothing);
	RUN_SELECTED(test_a_bound_timer_is_claimed_by_its_bind_not_by_its_add);
	RUN_SELECTED(test_a_bind_that_loses_to_another_services_add_binds_nothing);
	return races_report();
}
