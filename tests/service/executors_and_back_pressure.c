/* SPDX-License-Identifier: MIT */
/*
 * The timer service with its threads runs every timer once and touches
 * no timer its owner freed: the reaper alone drives expiry, the
 * executors run batches, cancel_sync of a queued timer lets it be freed,
 * a reschedule of a queued timer moves it, a periodic timer running at
 * shutdown is not re-armed, a clock going back is ignored, and a full
 * queue runs callbacks on the reaper with nothing lost -- with generous
 * bounds that only a broken service misses (no latency is asserted here:
 * that is bench/'s job).
 */
#define _POSIX_C_SOURCE 200809L

#include "service_jobs.h"

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* How long a wait for something the test has made happen may last
 * before the test calls it hung: a guard, not a bound on the library
 * (a loaded machine under ThreadSanitizer stalls a thread for seconds). */
#define HANG_MS 60000

static bool wait_for(atomic_int *counter, int value, int timeout_ms)
{
	int64_t end = mono_ms() + timeout_ms;

	while (atomic_load(counter) < value && mono_ms() < end)
		sleep_ms(1);
	return atomic_load(counter) >= value;
}

static void test_reaper_alone_drives_expiry(void)
{
	/* Kafka's SystemTimerReaperTest: 10 / 20 / 30 ms on the real clock. */
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc;
	struct job j[3];
	int64_t due_by[3]; /* at or before each due time: read before its add */
	atomic_int done = 0;

	cfg.executors = 1;
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	for (int i = 0; i < 3; i++) {
		job_init(&j[i], i, 0);
		due_by[i] = tw_service_now(svc) + (i + 1) * 10 * 1000000LL;
		tw_service_add_in(svc, &j[i].t, (i + 1) * 10 * 1000000LL);
	}
	for (int i = 0; i < 3; i++) {
		CHECK(wait_for(&j[i].runs, 1, HANG_MS));
		atomic_fetch_add(&done, atomic_load(&j[i].runs));
	}
	CHECK_EQ(atomic_load(&done), 3);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	/* Read after shutdown joined the executor that wrote it. */
	for (int i = 0; i < 3; i++)
		CHECK(j[i].ran_at >= due_by[i]); /* never early */
	tw_service_destroy(svc); /* closes once */
}

static atomic_int release_gate;
static atomic_int entered;

static void act_block(struct tw_service *svc, struct job *self)
{
	(void)svc;
	(void)self;
	atomic_fetch_add(&entered, 1);
	while (!atomic_load(&release_gate))
		sleep_ms(1);
}

static void *release_later(void *arg)
{
	(void)arg;
	sleep_ms(50);
	atomic_store(&release_gate, 1);
	return NULL;
}

/* Occupy the only executor of a manual service: j (with the given period)
 * expires at 1010 and its callback blocks until release_gate is set. */
static void block_executor(struct tw_service *svc, struct job *j, int id,
			   int64_t period)
{
	atomic_store(&release_gate, 0);
	atomic_store(&entered, 0);
	job_init(j, id, period);
	j->action = act_block;
	tw_service_add(svc, &j->t, 1010);
	set_clock(1010);
	CHECK_EQ(tw_service_poll(svc), 1); /* queued for the executor */
	CHECK(wait_for(&entered, 1, HANG_MS)); /* the executor is busy */
}

static void test_stale_queue_entry_never_touches_freed_timer(void)
{
	/* A timer expires and waits in the executor queue; it is cancelled,
	 * re-added and expires again before the executor gets to it. Its
	 * callback frees it. Only one queue entry may refer to it, or the
	 * second would read freed memory (ASan). */
	struct tw_service *svc = manual_service(1);
	struct job blocker, *heap = malloc(sizeof(*heap));
	pthread_t th;

	atomic_store(&freed, 0);
	job_init(heap, 2, 0);
	heap->action = act_free_self;
	block_executor(svc, &blocker, 1, 0);
	tw_service_add(svc, &heap->t, 1020);
	set_clock(1020);
	CHECK_EQ(tw_service_poll(svc), 1);   /* queued behind the blocker */
	CHECK_EQ(tw_service_cancel(svc, &heap->t), TW_SVC_STOPPED);
	CHECK_EQ(tw_service_add(svc, &heap->t, 1030), TW_OK);
	set_clock(1030);
	tw_service_poll(svc);                /* expires again */
	pthread_create(&th, NULL, release_later, NULL);
	pthread_join(th, NULL);
	CHECK(wait_for(&freed, 1, HANG_MS)); /* ran once, freed itself */
	sleep_ms(20);                      /* a stale entry would run now */
	tw_service_destroy(svc);
	CHECK_EQ(atomic_load(&freed), 1);
}

static void test_cancel_sync_of_queued_timer_allows_free(void)
{
	/* Expired, waiting behind a busy executor: cancel_sync stops it and,
	 * when it returns, nothing in the service refers to it any more. */
	struct tw_service *svc = manual_service(1);
	struct job blocker, *heap = malloc(sizeof(*heap));
	pthread_t th;

	job_init(heap, 2, 0);
	block_executor(svc, &blocker, 1, 0);
	tw_service_add(svc, &heap->t, 1020);
	set_clock(1020);
	CHECK_EQ(tw_service_poll(svc), 1); /* in the queue */
	CHECK_EQ(tw_service_cancel_sync(svc, &heap->t), TW_SVC_STOPPED);
	free(heap); /* allowed now (ASan checks the queue does not touch it) */
	pthread_create(&th, NULL, release_later, NULL);
	pthread_join(th, NULL);
	sleep_ms(20);
	tw_service_destroy(svc);
}

static void act_cancel_sync_other(struct tw_service *svc, struct job *self)
{
	self->result = tw_service_cancel_sync(svc, &self->other->t);
	free(self->other); /* allowed: nothing refers to it any more */
	self->other = NULL;
}

/* caller_ran counts callbacks the polling thread ran because the
 * executors' queue was full (queue_capacity timers waited), and only
 * those: the executor held, a capacity of 1, b and a expire in one poll;
 * b, the older, fills the queue and the poller runs a, which takes b
 * back with cancel_sync. b never ran, and is not counted. */
static void test_caller_ran_counts_only_callbacks_run(void)
{
	struct tw_service *svc = NULL;
	struct tw_service_stats st;
	struct job blocker, a, *b = malloc(sizeof(*b));
	pthread_t th;

	svc = service_queue(true, 1, 1);
	block_executor(svc, &blocker, 1, 0);
	job_init(&a, 3, 0);
	job_init(b, 4, 0);
	a.action = act_cancel_sync_other;
	a.other = b;
	CHECK_EQ(tw_service_add(svc, &b->t, 1020), TW_OK);
	CHECK_EQ(tw_service_add(svc, &a.t, 1025), TW_OK);
	set_clock(1030);
	CHECK_EQ(tw_service_poll(svc), 2); /* a runs on this thread */
	CHECK_EQ(a.result, TW_SVC_STOPPED);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.caller_ran, 1);
	pthread_create(&th, NULL, release_later, NULL);
	pthread_join(th, NULL);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.caller_ran, 1);
	CHECK_EQ(st.ran, 2);
	CHECK_EQ(tw_service_destroy(svc), TW_OK);
}

/* A capacity at or past 2^63 (SIZE_MAX: never full) is one the queue
 * never reaches: five timers due in one poll all go to the executor, and
 * the polling thread runs none of them (caller_ran 0). */
#if SIZE_MAX > UINT32_MAX
static atomic_int capacity_ran;

static void count_capacity_run(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	atomic_fetch_add(&capacity_ran, 1);
}
#endif

static void test_a_capacity_past_int64_max_is_never_full(void)
{
#if SIZE_MAX > UINT32_MAX
	const size_t capacities[2] = { SIZE_MAX, (size_t)1 << 63 };

	for (int c = 0; c < 2; c++) {
		struct tw_service *svc = NULL;
		struct tw_service_timer t[5];
		struct tw_service_stats st;

		atomic_store(&capacity_ran, 0);
		svc = service_queue(true, 1, capacities[c]);
		for (int i = 0; i < 5; i++) {
			tw_service_timer_init(&t[i], count_capacity_run);
			CHECK_EQ(tw_service_add(svc, &t[i], 1010), TW_OK);
		}
		set_clock(1020);
		CHECK_EQ(tw_service_poll(svc), 5);
		CHECK(wait_for(&capacity_ran, 5, HANG_MS));
		tw_service_stats(svc, &st);
		CHECK_EQ(st.caller_ran, 0);
		CHECK_EQ(st.ran, 5);
		CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
		CHECK_EQ(tw_service_destroy(svc), TW_OK);
	}
#endif
}

static void test_cancel_sync_from_callback_takes_back_batch_entry(void)
{
	/* a and b expire in the same poll; callbacks run on the polling
	 * thread. a's callback cancel_syncs b, which waits in the rest of
	 * the batch, and frees it: b must not run, and the batch must not
	 * touch it again (ASan). */
	struct tw_service *svc = manual_service(0);
	struct job a, *b = malloc(sizeof(*b));

	job_init(&a, 1, 0);
	job_init(b, 2, 0);
	a.action = act_cancel_sync_other;
	a.other = b;
	tw_service_add(svc, &a.t, 1010);
	tw_service_add(svc, &b->t, 1020);
	set_clock(1020);
	/* Both expired in this poll (dispatched); b was taken back from
	 * the batch before its turn, and never ran. */
	CHECK_EQ(tw_service_poll(svc), 2);
	CHECK_EQ(a.result, TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&norder), 1);
	CHECK_EQ(order[0], 1);
	tw_service_destroy(svc);
}

static void test_reschedule_of_queued_timer(void)
{
	/* Expired and waiting behind a busy executor: a reschedule stops
	 * that run (STOPPED) and the timer runs once, at its new time. */
	struct tw_service *svc = manual_service(1);
	struct job blocker, a;
	pthread_t th;

	job_init(&a, 2, 0);
	block_executor(svc, &blocker, 1, 0);
	tw_service_add(svc, &a.t, 1020);
	set_clock(1020);
	CHECK_EQ(tw_service_poll(svc), 1); /* a waits in the queue */
	CHECK_EQ(tw_service_add(svc, &a.t, 1500), TW_EBUSY);
	CHECK_EQ(tw_service_reschedule(svc, &a.t, 1100), TW_SVC_STOPPED);
	pthread_create(&th, NULL, release_later, NULL);
	pthread_join(th, NULL);
	sleep_ms(20); /* the stale entry is consumed, and must not run a */
	CHECK_EQ(atomic_load(&a.runs), 0);
	set_clock(1100);
	tw_service_poll(svc);
	CHECK(wait_for(&a.runs, 1, HANG_MS));
	CHECK(a.ran_at >= 1100);
	sleep_ms(20);
	CHECK_EQ(atomic_load(&a.runs), 1);
	tw_service_destroy(svc);
}

static struct tw_service *shutting;
static atomic_llong shutdown_result;

static void *shut_down_now(void *arg)
{
	(void)arg;
	atomic_store(&shutdown_result,
		     tw_service_shutdown(shutting, hand_back, &nhanded));
	return NULL;
}

static void test_periodic_running_at_shutdown_is_not_rearmed(void)
{
	/* A periodic callback still running when shutdown starts: it
	 * finishes (shutdown waits for it), it is not re-armed, and so it is
	 * not handed back either -- its run was its end. */
	struct tw_service *svc = manual_service(1);
	struct job p, probe;
	struct tw_service_stats st;
	pthread_t th;

	nhanded = 0;
	job_init(&probe, 2, 0);
	block_executor(svc, &p, 1, 100);
	shutting = svc;
	pthread_create(&th, NULL, shut_down_now, NULL);
	while (tw_service_add(svc, &probe.t, 5000) == TW_OK) {
		tw_service_cancel(svc, &probe.t);
		sleep_ms(1);
	}
	atomic_store(&release_gate, 1);
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&shutdown_result), 0);
	CHECK_EQ(nhanded, 0);
	CHECK_EQ(atomic_load(&p.runs), 1);
	CHECK_EQ(tw_service_cancel(svc, &p.t), TW_SVC_IDLE);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.ran, 1);
	CHECK_EQ(st.handed_back, 0);
	tw_service_destroy(svc);
}

static void test_reaper_ignores_a_clock_going_back(void)
{
	/* The reaper reads an injected clock that jumps back: it counts it,
	 * keeps the wheel's time, and a timer still runs only once the clock
	 * is past its due time again. */
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc;
	struct tw_service_stats st;
	struct job a, first;
	int64_t end;

	cfg.tick = 10;
	cfg.clock.now = virtual_clock;
	atomic_store(&virtual_now, 1000);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	job_init(&a, 1, 0);
	job_init(&first, 2, 0);
	set_clock(2000);
	tw_service_add(svc, &first.t, 2000);
	CHECK(wait_for(&first.runs, 1, HANG_MS)); /* the wheel is at 2000 */
	tw_service_add(svc, &a.t, 2500);
	set_clock(1500); /* back */
	end = mono_ms() + HANG_MS;
	do {
		tw_service_kick(svc);
		sleep_ms(1);
		tw_service_stats(svc, &st);
	} while (st.clock_backwards == 0 && mono_ms() < end);
	CHECK(st.clock_backwards > 0);
	sleep_ms(20);
	CHECK_EQ(atomic_load(&a.runs), 0);
	set_clock(2500);
	tw_service_kick(svc);
	CHECK(wait_for(&a.runs, 1, HANG_MS));
	CHECK(a.ran_at >= 2500);
	tw_service_destroy(svc);
}

static void test_full_queue_runs_on_reaper_nothing_lost(void)
{
	struct tw_service *svc;
	struct job j[10];
	struct tw_service_stats st;
	int total = 0;

	svc = service_queue(true, 1, 2);
	atomic_store(&release_gate, 0);
	atomic_store(&entered, 0);
	job_init(&j[0], 0, 0);
	j[0].action = act_block;
	tw_service_add(svc, &j[0].t, 1010);
	set_clock(1010);
	tw_service_poll(svc);
	CHECK(wait_for(&entered, 1, HANG_MS)); /* the executor is busy */
	for (int i = 1; i < 10; i++) {
		job_init(&j[i], i, 0);
		tw_service_add(svc, &j[i].t, 1020);
	}
	set_clock(1020);
	/* The executor stays blocked for the whole poll (which never waits
	 * for it: a full queue runs the rest on the polling thread), so the
	 * split is exact; a gate opened by another thread's timer made it
	 * depend on that thread's 50 ms being longer than the poll. */
	CHECK_EQ(tw_service_poll(svc), 9);
	atomic_store(&release_gate, 1);
	tw_service_shutdown(svc, NULL, NULL);
	for (int i = 0; i < 10; i++)
		total += atomic_load(&j[i].runs);
	tw_service_stats(svc, &st);
	/* 2 waited in the queue, 7 ran on the polling thread. */
	CHECK_EQ(st.caller_ran, 7);
	CHECK_EQ(total + (int)st.handed_back, 10);
	CHECK_EQ(st.ran + st.handed_back, 10);
	tw_service_destroy(svc);
}

/* A big expiry with the executors' queue full runs on the polling thread
 * a batch at a time as the advance expires it: the advance stops at a
 * full batch (as without executors), so the first callback runs while
 * the rest still wait in the wheel, each timer touched once, and the
 * queue holds no more than its capacity. Held executor, a capacity of 4,
 * 1000 timers due in one tick: the first callback on the poller sees
 * 1000 - 4 - 64 (a batch) still in the wheel; after the poll, 4 wait for
 * the executor and the poller ran the other 996. */
#define BIG_EXPIRY 1000
static atomic_int in_wheel_at_first_run;

static void act_note_wheel(struct tw_service *svc, struct job *self)
{
	int expected = -1;

	(void)self;
	atomic_compare_exchange_strong(&in_wheel_at_first_run, &expected,
				       (int)tw_service_count(svc));
}

static void test_a_full_queue_runs_the_rest_as_it_expires(void)
{
	struct tw_service *svc;
	struct job blocker, *j = calloc(BIG_EXPIRY, sizeof(*j));
	struct tw_service_stats st;
	int total = 0;

	svc = service_queue(true, 1, 4);
	block_executor(svc, &blocker, 1, 0);
	atomic_store(&in_wheel_at_first_run, -1);
	for (int i = 0; i < BIG_EXPIRY; i++) {
		job_init(&j[i], i, 0);
		j[i].action = act_note_wheel;
		CHECK_EQ(tw_service_add(svc, &j[i].t, 1020), TW_OK);
	}
	set_clock(1020);
	CHECK_EQ(tw_service_poll(svc), BIG_EXPIRY);
	CHECK_EQ(atomic_load(&in_wheel_at_first_run), BIG_EXPIRY - 4 - 64);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.caller_ran, BIG_EXPIRY - 4);
	CHECK_EQ(tw_service_count(svc), 0);
	atomic_store(&release_gate, 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	for (int i = 0; i < BIG_EXPIRY; i++)
		total += atomic_load(&j[i].runs);
	CHECK_EQ(total, BIG_EXPIRY);
	tw_service_destroy(svc);
	free(j);
}

/* A timer taken past a full queue is the polling thread's: a cancel_sync
 * from the callback before it in the same batch takes it back from that
 * batch (TW_SVC_STOPPED) and it never runs, though an executor exists.
 * Held executor, a capacity of 1: q fills the queue, a and b go into the
 * poller's batch, and a cancel_syncs b and frees it (ASan). */
static void test_a_cancel_sync_takes_back_what_a_full_queue_left_the_poller(void)
{
	struct tw_service *svc;
	struct job blocker, q, a, *b = malloc(sizeof(*b));
	struct tw_service_stats st;

	svc = service_queue(true, 1, 1);
	block_executor(svc, &blocker, 1, 0);
	job_init(&q, 2, 0);
	job_init(&a, 3, 0);
	job_init(b, 4, 0);
	a.action = act_cancel_sync_other;
	a.other = b;
	CHECK_EQ(tw_service_add(svc, &q.t, 1020), TW_OK);
	CHECK_EQ(tw_service_add(svc, &a.t, 1030), TW_OK);
	CHECK_EQ(tw_service_add(svc, &b->t, 1030), TW_OK);
	set_clock(1030);
	CHECK_EQ(tw_service_poll(svc), 3);
	CHECK_EQ(a.result, TW_SVC_STOPPED);
	CHECK_EQ(atomic_load(&a.runs), 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.caller_ran, 1);
	atomic_store(&release_gate, 1);
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	CHECK_EQ(atomic_load(&q.runs), 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.ran, 3); /* the blocker, q and a */
	CHECK_EQ(st.stopped, 1);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	tw_service_destroy(svc);
}

/* A callback the polling thread runs (the executors' queue full) that
 * adds its own timer again, due at once, ends the poll all the same: the
 * add waits for the run's end, then for the next poll, which runs it once
 * more. So does a periodic timer whose run outlasts its period (the
 * callback moves the virtual clock past it). Held executor, a capacity of
 * 1: q fills the queue, a runs on the poller, ten times at most. */
static void act_readd_due(struct tw_service *svc, struct job *self)
{
	if (atomic_load(&self->runs) < 10)
		self->result = tw_service_add(svc, &self->t, tw_service_now(svc));
}

static void act_outlast_period(struct tw_service *svc, struct job *self)
{
	(void)svc;
	if (atomic_load(&self->runs) < 10)
		set_clock(atomic_load(&virtual_now) + 100);
}

static void poller_run_that_readds_due(int64_t period)
{
	struct tw_service *svc;
	struct job blocker, q, a;
	struct tw_service_stats st;

	svc = service_queue(true, 1, 1);
	block_executor(svc, &blocker, 1, 0);
	job_init(&q, 2, 0);
	job_init(&a, 3, period);
	a.action = period ? act_outlast_period : act_readd_due;
	CHECK_EQ(tw_service_add(svc, &q.t, 1020), TW_OK);
	CHECK_EQ(tw_service_add(svc, &a.t, 1030), TW_OK);
	set_clock(1030);
	CHECK_EQ(tw_service_poll(svc), 2); /* q queued, a run here */
	CHECK_EQ(atomic_load(&a.runs), 1);
	CHECK_EQ(a.result, TW_OK);
	CHECK(tw_service_timer_pending(&a.t));
	CHECK_EQ(tw_service_poll(svc), 1); /* a again, once */
	CHECK_EQ(atomic_load(&a.runs), 2);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.caller_ran, 2);
	atomic_store(&release_gate, 1);
	CHECK_EQ(tw_service_shutdown(svc, hand_back, &nhanded), 1);
	CHECK_EQ(atomic_load(&q.runs), 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	tw_service_destroy(svc);
}

static void test_a_poller_run_that_adds_its_timer_due_ends_the_poll(void)
{
	poller_run_that_readds_due(0);
	poller_run_that_readds_due(10);
}

/* tw_service_timer_pending() follows one add from start to end, and a
 * reschedule of a pending timer counts as stopping the add it replaces. */
static void test_pending_and_what_stopped_counts(void)
{
	struct tw_service *svc = manual_service(1);
	struct tw_service_stats st;
	struct job a, blocker;

	job_init(&a, 1, 0);
	job_init(&blocker, 2, 0);
	CHECK(!tw_service_timer_pending(NULL));
	CHECK(!tw_service_timer_pending(&a.t));
	CHECK_EQ(tw_service_add(svc, &a.t, 1100), TW_OK);
	CHECK(tw_service_timer_pending(&a.t));
	CHECK_EQ(tw_service_reschedule(svc, &a.t, 1200), TW_SVC_STOPPED);
	CHECK(tw_service_timer_pending(&a.t));
	CHECK_EQ(tw_service_cancel(svc, &a.t), TW_SVC_STOPPED);
	CHECK(!tw_service_timer_pending(&a.t));
	CHECK_EQ(tw_service_add(svc, &a.t, 1000), TW_OK);
	set_clock(1000);
	CHECK_EQ(tw_service_poll(svc), 1);
	tw_service_shutdown(svc, NULL, NULL); /* the executor ran it */
	CHECK(!tw_service_timer_pending(&a.t));
	CHECK_EQ(atomic_load(&a.runs), 1);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, 3);
	CHECK_EQ(st.stopped, 2); /* the reschedule's and the cancel's */
	CHECK_EQ(st.ran, 1);
	CHECK_EQ(st.added, st.ran + st.stopped + st.handed_back);
	tw_service_destroy(svc);
}

int main(void)
{
	RUN(test_pending_and_what_stopped_counts);
	RUN(test_reaper_alone_drives_expiry);
	RUN(test_stale_queue_entry_never_touches_freed_timer);
	RUN(test_cancel_sync_of_queued_timer_allows_free);
	RUN(test_cancel_sync_from_callback_takes_back_batch_entry);
	RUN(test_caller_ran_counts_only_callbacks_run);
	RUN(test_a_capacity_past_int64_max_is_never_full);
	RUN(test_reschedule_of_queued_timer);
	RUN(test_periodic_running_at_shutdown_is_not_rearmed);
	RUN(test_reaper_ignores_a_clock_going_back);
	RUN(test_full_queue_runs_on_reaper_nothing_lost);
	RUN(test_a_full_queue_runs_the_rest_as_it_expires);
	RUN(test_a_cancel_sync_takes_back_what_a_full_queue_left_the_poller);
	RUN(test_a_poller_run_that_adds_its_timer_due_ends_the_poll);
	return check_report();
}
