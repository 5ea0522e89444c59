/* SPDX-License-Identifier: MIT */
/*
 * service.h's promises with threads at them: a manual service on a
 * virtual clock that a poller thread moves 0 to 20000 ticks a poll, two
 * producers each owning 64 one-shot timers (add, add_range, reschedule,
 * reschedule_range, cancel, cancel_sync; windows of every width up to
 * 2^40 units) and a third thread that cancels and reschedules any timer;
 * without executors, then with two. A lock per timer orders each call
 * and its result with the callback's look at the model:
 *  - never early: a run's clock is at or after its add's earliest;
 *  - no run of an add that a call reported ended (STOPPED), no two runs
 *    at once, IDLE only with nothing pending and nothing running,
 *    STOPPED and EBUSY only with an add pending;
 *  - cancel_sync returns after the callback finished;
 *  - without executors, an add that returned before a poll started and
 *    is due by that poll's clock (its window's end rounded up to the
 *    tick) has run when the poll returns;
 *  - at the end every add ran, was stopped or handed back, and the
 *    stats balance and count the runs the callbacks saw.
 * And a reschedule of a periodic timer from another thread while its
 * callback runs, due during the run: without executors it runs at the
 * next poll, not in the same one, and its next periods count from the
 * reschedule's earliest.
 * A fixed count of operations, so that it ends soon under TSan and
 * valgrind too.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <string.h>

#include "check.h"
#include "virtual_clock.h"

#define NT 128
#define HIST 6
#define PACE 16
#define CLOCKS (1 << 16) /* the clocks of the latest polls, by number */

struct add {
	int64_t gen, e, l, by;
	int64_t first_poll; /* the first poll that started after it returned */
	int op;
};

struct owned {
	struct tw_service_timer t;
	int id;
	pthread_mutex_t mu;
	atomic_int syncing;    /* a cancel_sync holds mu and waits for us */
	bool pending, started, in_run;
	struct add add, run;   /* the pending add; one a call saw start */
	int64_t ended[4];      /* the latest adds a call reported ended */
	int64_t gens;
	long runs;
	char hist[HIST][112];
	int nhist;
};

static struct owned T[NT];
static struct tw_service *svc;
static int64_t tick;
static unsigned executors;
static atomic_int broke, producers_done;
static atomic_llong polls_started, polls_done;
static _Atomic int64_t poll_clock[CLOCKS];
static pthread_mutex_t print_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *const op_name[] = { "add", "add_range", "reschedule",
				       "reschedule_range", "cancel", "cancel_sync" };

static int64_t now(void)
{
	return atomic_load(&virtual_now);
}

/* The clock by which a poll must have run the window [e, l]: l - e
 * rounded down to whole ticks (at most 2^32 - 1), rounded up to a tick. */
static int64_t run_by(int64_t e, int64_t l)
{
	uint64_t ticks = ((uint64_t)l - (uint64_t)e) / (uint64_t)tick;
	int64_t end, r;

	if (ticks > UINT32_MAX)
		ticks = UINT32_MAX;
	end = (int64_t)((uint64_t)e + ticks * (uint64_t)tick);
	r = end % tick;
	if (r < 0)
		r += tick;
	if (r == 0)
		return end;
	return end > INT64_MAX - (tick - r) ? INT64_MAX : end + (tick - r);
}

static void note(struct owned *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct owned *m, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->hist[m->nhist++ % HIST], sizeof(m->hist[0]), fmt, ap);
	va_end(ap);
}

/* A break: the first three are said with the timer's history and
 * counted as failed CHECKs. */
static void broken(struct owned *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void broken(struct owned *m, const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&broke, 1) >= 3)
		return;
	pthread_mutex_lock(&print_mu);
	check_failures++;
	fprintf(stderr, "executors %u, clock %" PRId64 ", polls %lld started, %lld done, timer %d: ",
		executors, now(), atomic_load(&polls_started), atomic_load(&polls_done), m->id);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n  its last calls and runs:\n");
	for (int i = m->nhist > HIST ? m->nhist - HIST : 0; i < m->nhist; i++)
		fprintf(stderr, "    %s\n", m->hist[i % HIST]);
	pthread_mutex_unlock(&print_mu);
}

/* The callback's way into the model: the lock, or, while a cancel_sync
 * that holds it waits for this run, the model as it stands (that thread
 * writes nothing until the run returns). */
static bool enter(struct owned *m)
{
	for (;;) {
		if (pthread_mutex_trylock(&m->mu) == 0)
			return true;
		if (atomic_load(&m->syncing))
			return false;
		sched_yield();
	}
}

static void leave(struct owned *m, bool locked)
{
	if (locked)
		pthread_mutex_unlock(&m->mu);
}

static bool ended(const struct owned *m, int64_t gen)
{
	for (int i = 0; i < 4; i++)
		if (m->ended[i] == gen)
			return true;
	return false;
}

static void end_add(struct owned *m)
{
	memmove(&m->ended[1], &m->ended[0], 3 * sizeof(m->ended[0]));
	m->ended[0] = m->add.gen;
	m->pending = false;
}

static void on_run(struct tw_service *s, struct tw_service_timer *t)
{
	struct owned *m = tw_container_of(t, struct owned, t);
	int64_t c = now();
	bool locked = enter(m);
	struct add a;

	(void)s;
	if (m->in_run)
		broken(m, "two runs at once");
	if (m->started) {
		a = m->run;
		m->started = false;
	} else if (m->pending) {
		a = m->add;
		m->pending = false;
	} else {
		broken(m, "ran at %" PRId64 " with no add pending", c);
		leave(m, locked);
		return;
	}
	if (ended(m, a.gen))
		broken(m, "ran add %" PRId64 ", which a call reported ended", a.gen);
	if (c < a.e)
		broken(m, "ran early at %" PRId64 ": %s [%" PRId64 ", %" PRId64 "]", c,
		       op_name[a.op], a.e, a.l);
	m->runs++;
	m->in_run = true;
	note(m, "ran add %" PRId64 " at %" PRId64, a.gen, c);
	leave(m, locked);
	sched_yield(); /* a run that takes a while: cancel_sync waits for it */
	locked = enter(m);
	m->in_run = false;
	leave(m, locked);
}

static int64_t pick_earliest(uint64_t *rng)
{
	static const int64_t reach[] = { 10, 3000, 1000, 1000 };
	int r = (int)test_rand_below(rng, 5);

	if (r == 0)
		return now() - test_rand_below(rng, 100 * tick);
	return now() + test_rand_below(rng, reach[r - 1] * tick);
}

static int64_t pick_width(uint64_t *rng)
{
	static const int64_t upto[] = { 64, 2000, 100000, 3 };

	switch (test_rand_below(rng, 9)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return tick - 1;
	case 3: return tick;
	case 7: return (int64_t)1 << 40;
	default: return test_rand_below(rng, upto[test_rand_below(rng, 4)] * tick);
	}
}

/* What a cancel (or a reschedule's cancel) returned, against the model;
 * done: the polls that had returned before the call, the last at clock
 * done_at. */
static void account(struct owned *m, int rc, int op, int64_t done, int64_t done_at)
{
	if (rc == TW_SVC_STOPPED) {
		if (!m->pending) {
			broken(m, "%s returned STOPPED with no add pending", op_name[op]);
			return;
		}
		if (executors == 0 && m->add.first_poll <= done && m->add.by <= done_at)
			broken(m, "%s stopped add %" PRId64 ", which poll %" PRId64
			       " should have run (to run by %" PRId64 ")", op_name[op],
			       m->add.gen, done, m->add.by);
		end_add(m);
	} else if (rc == TW_SVC_RUNNING) {
		if (m->pending) {
			/* The pending add started; its run will take the lock. */
			if (m->started)
				broken(m, "%s: RUNNING with a second run started", op_name[op]);
			m->run = m->add;
			m->started = true;
			m->pending = false;
		}
	} else if (rc == TW_SVC_IDLE) {
		if (m->pending || m->started || m->in_run) {
			broken(m, "%s returned IDLE with an add pending (%d) or running (%d, %d)",
			       op_name[op], m->pending, m->started, m->in_run);
			if (m->pending)
				end_add(m);
			m->started = false;
		}
	} else {
		broken(m, "%s returned %d", op_name[op], rc);
	}
}

/* Call op on m, with [e, e + w] for an add or a reschedule, its lock
 * held; the model learns what it did. */
static void call_op(struct owned *m, int op, int64_t e, int64_t w)
{
	int64_t l, done, done_at, started;
	int rc;

	if (op == 0 || op == 2)
		w = 0;
	l = e > INT64_MAX - w ? INT64_MAX : e + w;
	done = atomic_load(&polls_done);
	done_at = atomic_load(&poll_clock[done % CLOCKS]);
	switch (op) {
	case 0: rc = tw_service_add(svc, &m->t, e); break;
	case 1: rc = tw_service_add_range(svc, &m->t, e, l); break;
	case 2: rc = tw_service_reschedule(svc, &m->t, e); break;
	case 3: rc = tw_service_reschedule_range(svc, &m->t, e, l); break;
	case 4: rc = tw_service_cancel(svc, &m->t); break;
	default:
		atomic_store(&m->syncing, 1);
		rc = tw_service_cancel_sync(svc, &m->t);
		atomic_store(&m->syncing, 0);
		break;
	}
	started = atomic_load(&polls_started);
	note(m, "%s [%" PRId64 ", %" PRId64 "] -> %d (polls done %" PRId64 ")",
	     op_name[op], e, l, rc, done);
	if (op <= 1 && rc == TW_EBUSY && !m->pending)
		broken(m, "%s returned EBUSY with no add pending", op_name[op]);
	else if (op <= 1 && rc == TW_OK && m->pending)
		account(m, TW_SVC_RUNNING, op, done, done_at); /* it must have started */
	else if (op <= 1 && rc != TW_OK && rc != TW_EBUSY)
		broken(m, "%s returned %d", op_name[op], rc);
	else if (op >= 2)
		account(m, rc, op, done, done_at);
	if (op == 5 && rc >= 0 && (m->in_run || m->started))
		broken(m, "cancel_sync returned %d while its callback still runs", rc);
	if (op <= 1 ? rc == TW_OK : op <= 3 && rc >= 0) {
		m->add.gen = ++m->gens;
		m->add.e = e;
		m->add.l = l;
		m->add.op = op;
		m->add.by = run_by(e, l);
		m->add.first_poll = started + 1;
		m->pending = true;
	}
}

/* One call on m, picked at random, under its lock. */
static void call(struct owned *m, uint64_t *rng, bool adds_too)
{
	int64_t e = pick_earliest(rng), w = pick_width(rng);
	int op;

	pthread_mutex_lock(&m->mu);
	if (!adds_too)
		op = 2 + (int)test_rand_below(rng, 4);
	else if (!m->pending && !m->started && test_rand_below(rng, 10) < 8)
		op = (int)test_rand_below(rng, 2);
	else if (test_rand_below(rng, 10) < 6)
		op = 2 + (int)test_rand_below(rng, 4);
	else
		op = (int)test_rand_below(rng, 6);
	call_op(m, op, e, w);
	pthread_mutex_unlock(&m->mu);
}

struct producer {
	int id;
	long ops;
	uint64_t seed;
};

/* Producers 0 and 1 on their own 64 timers; 2 on any timer, with no
 * add of its own. */
static void *produce(void *arg)
{
	struct producer *p = arg;
	uint64_t rng = test_rand_seed(p->seed);

	long long poll = -1;

	for (long i = 0; i < p->ops && atomic_load(&broke) < 3; i++) {
		/* At most PACE calls a poll, so that calls and polls mix. */
		if (i % PACE == 0) {
			while (atomic_load(&polls_started) == poll)
				sched_yield();
			poll = atomic_load(&polls_started);
		}
		if (p->id < 2)
			call(&T[p->id * 64 + test_rand_below(&rng, 64)], &rng, true);
		else
			call(&T[test_rand_below(&rng, NT)], &rng, false);
	}
	atomic_fetch_add(&producers_done, 1);
	return NULL;
}

/* After poll k at clock c, without executors: every add that returned
 * before it started and is due by c has run, and none started is left. */
static void none_late(int64_t k, int64_t c)
{
	for (int i = 0; i < NT; i++) {
		struct owned *m = &T[i];

		pthread_mutex_lock(&m->mu);
		if (m->pending && m->add.first_poll <= k && m->add.by <= c)
			broken(m, "add %" PRId64 " (%s [%" PRId64 ", %" PRId64 "], to run by %"
			       PRId64 ") still pending after poll %" PRId64 " at %" PRId64,
			       m->add.gen, op_name[m->add.op], m->add.e, m->add.l,
			       m->add.by, k, c);
		if (m->started)
			broken(m, "add %" PRId64 " started and not run by poll %" PRId64,
			       m->run.gen, k);
		pthread_mutex_unlock(&m->mu);
	}
}

static void one_poll(int64_t k, int64_t c)
{
	atomic_store(&poll_clock[k % CLOCKS], c);
	set_clock(c);
	atomic_store(&polls_started, k);
	CHECK(tw_service_poll(svc) >= 0);
	atomic_store(&polls_done, k);
	if (executors == 0)
		none_late(k, c);
}

static void run(unsigned nexec, unsigned shards, uint64_t seed, long ops)
{
	struct tw_service_config cfg = { 0 };
	struct producer p[3] = { { 0, ops, seed }, { 1, ops, seed + 1 },
				 { 2, ops / 4, seed + 2 } };
	struct tw_service_stats st;
	uint64_t rng = test_rand_seed(seed);
	pthread_t th[3];
	int64_t k = 0, c, handed;
	long runs = 0;

	tick = 7;
	executors = nexec;
	atomic_store(&broke, 0);
	atomic_store(&producers_done, 0);
	atomic_store(&polls_started, 0);
	atomic_store(&polls_done, 0);
	atomic_store(&poll_clock[0], 37000000);
	set_clock(37000000);
	cfg.tick = tick;
	cfg.manual = true;
	cfg.executors = nexec;
	cfg.shards = shards;
	cfg.clock.now = virtual_clock;
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	for (int i = 0; i < NT; i++) {
		memset(&T[i], 0, sizeof(T[i]));
		T[i].id = i;
		pthread_mutex_init(&T[i].mu, NULL);
		tw_service_timer_init(&T[i].t, on_run);
	}
	for (int i = 0; i < 3; i++)
		CHECK_EQ(pthread_create(&th[i], NULL, produce, &p[i]), 0);
	while (atomic_load(&producers_done) < 3) {
		/* Up to 2000 ticks; some polls find the timers gathered for a
		 * while, some jump 20000 ticks. */
		int64_t step = test_rand_below(&rng, 2001);

		if (test_rand_below(&rng, 8) == 0)
			step = 0;
		if (test_rand_below(&rng, 16) == 0)
			step = 20000;
		one_poll(++k, now() + step * tick + test_rand_below(&rng, tick));
		sched_yield(); /* the producers' calls come between polls too */
	}
	for (int i = 0; i < 3; i++)
		CHECK_EQ(pthread_join(th[i], NULL), 0);
	/* An add of every timer, due now: EBUSY where one is pending, which
	 * the polls below run; TW_OK otherwise, run by them, or (made while
	 * a run goes on) after that run, itself counted. So each timer runs
	 * at least once, whoever won the races above. */
	for (int i = 0; i < NT; i++) {
		pthread_mutex_lock(&T[i].mu);
		call_op(&T[i], 0, now(), 0);
		pthread_mutex_unlock(&T[i].mu);
	}
	/* Past every window's end (2^40 units and more at most): all run. */
	c = now() + ((int64_t)1 << 43);
	for (int j = 0; j < 3; j++, c += 1 << 20)
		one_poll(++k, c);
	handed = tw_service_shutdown(svc, NULL, NULL);
	tw_service_stats(svc, &st);
	for (int i = 0; i < NT; i++) {
		runs += T[i].runs;
		CHECK(executors || !T[i].pending);
		pthread_mutex_destroy(&T[i].mu);
	}
	CHECK(handed >= 0);
	CHECK_EQ(st.added, st.ran + st.stopped + (uint64_t)handed);
	CHECK_EQ(st.ran, runs);
	/* Polls and runs did happen: the producers wait for a poll every
	 * PACE calls, and every timer ran at least once (the adds above).
	 * How many more run is the scheduler's: with executors the producers
	 * stop most timers before an executor claims them (3,000-12,000 runs
	 * of some 55,000 adds on an idle 2-core VM; 466 once under a CI's
	 * parallel tests, 97 with each executor's wake-up delayed 20 ms). */
	CHECK(k > 1000 && runs >= NT);
	printf("executors %u, shards %u: %" PRId64 " polls, %ld runs, %" PRIu64
	       " adds, %" PRIu64 " stopped\n", nexec, shards, k, runs, st.added, st.stopped);
	tw_service_destroy(svc);
}

/* ---- a reschedule from another thread while the callback runs ---- */

static struct {
	sem_t in_run, go_on;
	bool hold;
	int runs;
	int64_t ran_at[64];
} during;

static void during_run(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	(void)t;
	if (during.runs < 64)
		during.ran_at[during.runs] = now();
	during.runs++;
	if (during.hold) {
		during.hold = false;
		sem_post(&during.in_run);
		sem_wait(&during.go_on);
	}
}

/* A periodic timer's run is held on the polling thread while the main
 * thread reschedules it to [c + offset, + width] (width < 0: plain
 * tw_service_reschedule()). TW_SVC_RUNNING; no re-arm after that run;
 * due during the run, it does not run again in that poll but at the
 * next one (next_expiry answers now), late by what was left of the run;
 * not due, inside its window. Then its periods follow on the grid from
 * the reschedule's earliest, each inside its window. */
static void reschedule_during_run(int64_t tk, int64_t period, int64_t offset,
				  int64_t width)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service_periodic p;
	struct poller poller = { NULL, -1 };
	pthread_t th;
	int64_t d0 = 1005 * tk, c = d0 + 2 * tk, e = c + offset;
	int64_t w = width < 0 ? 0 : width, when = INT64_MAX;
	int rc;

	tick = tk;
	cfg.tick = tick;
	cfg.manual = true;
	cfg.shards = 1;
	cfg.clock.now = virtual_clock;
	set_clock(1000 * tick);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	poller.svc = svc;
	memset(&during, 0, sizeof(during));
	during.hold = true;
	CHECK_EQ(sem_init(&during.in_run, 0, 0), 0);
	CHECK_EQ(sem_init(&during.go_on, 0, 0), 0);
	tw_service_periodic_init(&p, during_run, period);
	CHECK_EQ(tw_service_add_range(svc, &p.timer, d0, d0 + 2 * tick), TW_OK);
	set_clock(c);
	CHECK_EQ(pthread_create(&th, NULL, poll_thread, &poller), 0);
	sem_wait(&during.in_run);
	if (width < 0)
		rc = tw_service_reschedule(svc, &p.timer, e);
	else
		rc = tw_service_reschedule_range(svc, &p.timer, e, e + w);
	sem_post(&during.go_on);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(rc, TW_SVC_RUNNING);
	CHECK_EQ(poller.result, 1);
	CHECK_EQ(during.runs, 1); /* not again in the poll it ran in */
	CHECK(tw_service_timer_pending(&p.timer));
	CHECK(tw_service_next_expiry(svc, &when));
	CHECK(when <= (e <= c ? c : run_by(e, e + w)));
	if (e <= c) {
		/* The next poll, at the same clock, runs it. */
		CHECK_EQ(tw_service_poll(svc), 1);
		CHECK_EQ(during.runs, 2);
	}
	for (int64_t t = c + 1; t < c + 6 * period + 10 * tick; t++) {
		int64_t due;

		set_clock(t);
		CHECK(tw_service_poll(svc) >= 0);
		due = e + (during.runs - 1) * period;
		CHECK(t < run_by(due, due + w)); /* not still pending */
	}
	/* Run 0 is the held one; run 1 the reschedule's; run k at e + (k - 1)
	 * periods. */
	CHECK(during.runs >= 6);
	for (int k = 1; k < during.runs && k < 64; k++) {
		int64_t due = e + (k - 1) * period;

		CHECK(during.ran_at[k] >= due);
		if (k > 1 || e > c)
			CHECK(during.ran_at[k] <= run_by(due, due + w));
	}
	tw_service_destroy(svc);
	sem_destroy(&during.in_run);
	sem_destroy(&during.go_on);
}

static void test_reschedule_during_the_run_waits_for_the_next_poll(void)
{
	reschedule_during_run(1, 10, -3, 0);
	reschedule_during_run(1, 10, -3, 4);
	reschedule_during_run(7, 70, -7, 35);
	reschedule_during_run(10, 100, 0, 15);
	reschedule_during_run(1, 10, -3, -1);
	reschedule_during_run(7, 70, 14, 21); /* not due during the run */
}

static void test_without_executors(void)
{
	run(0, 1, 1, 40000);
	run(0, 0, 2, 40000);
}

static void test_with_two_executors(void)
{
	run(2, 0, 3, 40000);
}

int main(void)
{
	RUN(test_without_executors);
	RUN(test_with_two_executors);
	RUN(test_reschedule_during_the_run_waits_for_the_next_poll);
	return check_report();
}
