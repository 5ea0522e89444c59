/*
 * service.c — Kafka's SystemTimer: the wheel made safe for many threads.
 *
 * Structure. Timers are spread over `shards` independent wheels, each under
 * its own mutex; a timer's shard is a hash of its address, so every thread
 * finds it without shared state. (Kafka guards one wheel with a read-write
 * lock plus a lock per bucket; our wheel is single-threaded by design, and
 * a mutex per shard gives producers on different shards no shared lock at
 * all. One shard is the single-global-lock design; docs/service.md has the
 * measurements that chose the default.)
 *
 * The reaper (Kafka's ExpiredOperationReaper) loops: read the clock, advance
 * every shard to it, dispatch what expired, then sleep until the earliest
 * next expiry of any shard. It never ticks: with nothing pending it sleeps
 * until kicked. An add that makes a shard's next expiry earlier than the
 * reaper's deadline kicks it. While the reaper scans, its deadline reads
 * INT64_MAX, so every add during a scan kicks and no wake-up is lost.
 *
 * Each shard expires its timers in tick order; the scan merges the shards'
 * runs, so a batch is in tick order whatever shards its timers hash to.
 * Dispatch hands each expired timer to the executor queue (a bounded ring).
 * When the ring is full the reaper runs the callback itself: back-pressure
 * on expiry instead of unbounded memory or a lost timer. Lock order: a
 * shard lock may be held when the queue lock is taken, never the reverse.
 *
 * Exactly once. A timer's state (idle, pending, queued) changes only under
 * its shard's lock:
 *   add        idle    -> pending            (else TW_EBUSY)
 *   expiry     pending -> queued             (reaper, inside advance)
 *   execute    queued  -> idle, then run     (anything else: skip it)
 *   cancel     pending -> idle: STOPPED; queued -> idle: STOPPED
 * so a timer runs only if no cancel won the race under the lock, and every
 * cancel that reports STOPPED took the state away from the executor. A
 * timer has at most one entry in a batch or the queue (dispatching): if it
 * is cancelled, re-added and expires again before that entry is consumed,
 * the same entry runs it, so no second entry can outlive a callback that
 * frees the timer.
 *
 * Who is running what is kept per thread (running[]), not in the timer, so
 * a one-shot callback may free its own timer: after the callback returns
 * the service only touches its own slot. cancel_sync waits on the shard's
 * condition variable until no slot holds the timer.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timingwheel/service.h"

enum { ST_IDLE, ST_PENDING, ST_QUEUED };

#define MAX_SHARDS 1024

struct shard {
	_Alignas(64) pthread_mutex_t mu; /* shards on separate cache lines */
	pthread_cond_t idle;      /* a callback of this shard finished */
	struct tw_wheel wheel;
	struct tw_service *svc;
};

struct tw_service {
	struct tw_service_config cfg;
	struct shard *shards;
	unsigned nshards;
	atomic_bool closing;
	bool shut_down;
	pthread_mutex_t shutdown_mu;

	/* The reaper. */
	pthread_t reaper;
	bool reaper_started;
	pthread_mutex_t reaper_mu;
	pthread_cond_t reaper_cv;
	bool kicked, stop_reaper;
	_Atomic int64_t deadline;
	pthread_mutex_t scan_mu;  /* one scanner at a time: reaper or poll */

	/* The executors and their bounded queue. */
	pthread_t *executors;
	unsigned nexecutors, nexecutors_started;
	pthread_mutex_t q_mu;
	pthread_cond_t q_cv;
	struct tw_service_timer **ring;
	size_t ring_cap, ring_head, ring_len;
	bool stop_executors;
	/* running[i]: the timer executor i runs; running[nexecutors]: the
	 * scanning thread's. */
	_Atomic(struct tw_service_timer *) *running;
	struct tw_service_timer **runs; /* per shard, while scanning */
	struct tw_service_timer *batch_rest; /* rest of the batch being
						 dispatched (scanning thread) */

	atomic_uint_fast64_t added, ran, stopped, handed_back, caller_ran,
		backwards, wakeups;
};

/* The timer this thread is running the callback of, and the list that the
 * wheel callback fills while this thread scans. */
static _Thread_local struct tw_service_timer *tls_current;
static _Thread_local struct tw_service_timer *tls_batch;
static _Thread_local struct tw_service *tls_scanning; /* its scanner */

#define COUNT(svc, field) \
	atomic_fetch_add_explicit(&(svc)->field, 1, memory_order_relaxed)

static int64_t monotonic_ns(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t clock_now(const struct tw_service *svc)
{
	return svc->cfg.clock.now(svc->cfg.clock.arg);
}

static struct shard *shard_of(const struct tw_service *svc,
			      const struct tw_service_timer *t)
{
	uint64_t h = (uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15ULL;

	return &svc->shards[(h >> 32) % svc->nshards];
}

/*
 * running[] slots are relaxed atomics: a slot is written under the lock of
 * the running timer's shard, and read under the lock of the shard of the
 * timer asked about, so only a read for the same timer must be ordered with
 * the write -- and that one is, by the shared lock. All access goes through
 * these two (tests/helgrind.supp names them: helgrind does not model C11
 * atomics, ThreadSanitizer does).
 */
static inline struct tw_service_timer *
running_load(_Atomic(struct tw_service_timer *) *slot)
{
	return atomic_load_explicit(slot, memory_order_relaxed);
}

static inline void running_store(_Atomic(struct tw_service_timer *) *slot,
				 struct tw_service_timer *t)
{
	atomic_store_explicit(slot, t, memory_order_relaxed);
}

static bool is_running(const struct tw_service *svc,
		       const struct tw_service_timer *t)
{
	for (unsigned i = 0; i <= svc->nexecutors; i++)
		if (running_load(&svc->running[i]) == t)
			return true;
	return false;
}

/* ---- waking the reaper ---- */

static void kick(struct tw_service *svc)
{
	pthread_mutex_lock(&svc->reaper_mu);
	svc->kicked = true;
	pthread_cond_signal(&svc->reaper_cv);
	pthread_mutex_unlock(&svc->reaper_mu);
}

static void kick_if_earlier(struct tw_service *svc, bool have, int64_t when)
{
	if (have && !svc->cfg.manual && when < atomic_load(&svc->deadline))
		kick(svc);
}

/* ---- expiry ---- */

/* The tick a timer fires at, as the wheel files it (mode-aware). */
static int64_t fire_key(const struct tw_service *svc, int64_t due)
{
	int64_t tick = svc->cfg.tick;
	int64_t q = due / tick, r = due % tick;

	if (svc->cfg.mode == TW_MODE_KAFKA)
		return (r != 0 && due < 0) ? q - 1 : q;
	return (r != 0 && due > 0) ? q + 1 : q;
}

/* The wheel callback, under the shard lock, on the scanning thread. */
static void on_expire(struct tw_wheel *w, struct tw_timer *wt)
{
	struct tw_service_timer *t =
		tw_container_of(wt, struct tw_service_timer, wheel_timer);

	t->state = ST_QUEUED;
	/* Expired again while an earlier entry still waits in the queue
	 * (cancelled and re-added meanwhile): that entry will run it. A
	 * second entry could outlive a callback that frees the timer. */
	if (t->dispatching)
		return;
	t->dispatching = 1;
	/* Recorded here, under the lock: a cancel and re-add may rewrite
	 * the due time while the batch is merged. */
	t->batch_key = fire_key(tw_container_of(w, struct shard, wheel)->svc,
				wt->due);
	t->batch_next = tls_batch;
	tls_batch = t;
}

/* Run one expired timer if nobody cancelled it meanwhile. */
static void execute(struct tw_service *svc, struct tw_service_timer *t,
		    _Atomic(struct tw_service_timer *) *slot)
{
	struct shard *sh = shard_of(svc, t);
	int64_t period, next_due;
	bool have;
	int64_t when = 0;

	pthread_mutex_lock(&sh->mu);
	t->dispatching = 0; /* this was its one entry */
	if (t->state != ST_QUEUED) {
		pthread_cond_broadcast(&sh->idle); /* cancel_sync may wait */
		pthread_mutex_unlock(&sh->mu);
		return; /* stopped by cancel */
	}
	t->state = ST_IDLE;
	t->stop_rearm = 0;
	running_store(slot, t);
	period = t->period;
	next_due = t->wheel_timer.due;
	pthread_mutex_unlock(&sh->mu);

	tls_current = t;
	t->fn(svc, t); /* a one-shot timer may be freed from here on */
	tls_current = NULL;
	COUNT(svc, ran);

	pthread_mutex_lock(&sh->mu);
	running_store(slot, NULL);
	pthread_cond_broadcast(&sh->idle);
	have = false;
	if (period > 0 && t->state == ST_IDLE && !t->stop_rearm &&
	    !atomic_load(&svc->closing)) {
		/* From the due time, not from now: no drift. */
		next_due = next_due > INT64_MAX - period ? INT64_MAX : next_due + period;
		t->state = ST_PENDING;
		tw_wheel_add(&sh->wheel, &t->wheel_timer, next_due);
		COUNT(svc, added);
		have = tw_wheel_next_expiry(&sh->wheel, &when);
	}
	pthread_mutex_unlock(&sh->mu);
	kick_if_earlier(svc, have, when);
}

/* Merge two lists ordered by fire tick; ties keep a before b (stable). */
static struct tw_service_timer *merge(struct tw_service_timer *a,
				      struct tw_service_timer *b)
{
	struct tw_service_timer head, *tail = &head;

	while (a && b) {
		struct tw_service_timer **from =
			b->batch_key < a->batch_key ? &b : &a;

		tail->batch_next = *from;
		tail = *from;
		*from = (*from)->batch_next;
	}
	tail->batch_next = a ? a : b;
	return head.batch_next;
}

/* Each shard expired its timers in tick order; merge the shards' runs so
 * that the whole batch is, whatever shards the timers hash to. */
static struct tw_service_timer *merge_runs(struct tw_service *svc)
{
	for (unsigned width = 1; width < svc->nshards; width *= 2)
		for (unsigned i = 0; i + width < svc->nshards; i += 2 * width)
			svc->runs[i] = merge(svc->runs[i], svc->runs[i + width]);
	return svc->runs[0];
}

/* Hand expired timers to the executors, or run them here. The rest of
 * the batch stays in svc->batch_rest, where a callback run here may take
 * a timer out (cancel_sync). */
static int64_t dispatch(struct tw_service *svc, struct tw_service_timer *batch)
{
	_Atomic(struct tw_service_timer *) *own = &svc->running[svc->nexecutors];
	int64_t n = 0;

	svc->batch_rest = batch;
	while (svc->batch_rest) {
		struct tw_service_timer *t = svc->batch_rest;
		bool queued = false;

		svc->batch_rest = t->batch_next;
		n++;
		if (svc->nexecutors) {
			pthread_mutex_lock(&svc->q_mu);
			if (svc->ring_len < svc->ring_cap && !svc->stop_executors) {
				svc->ring[(svc->ring_head + svc->ring_len++) %
					  svc->ring_cap] = t;
				pthread_cond_signal(&svc->q_cv);
				queued = true;
			}
			pthread_mutex_unlock(&svc->q_mu);
			if (!queued)
				COUNT(svc, caller_ran);
		}
		if (!queued)
			execute(svc, t, own);
	}
	return n;
}

/* Take a timer's one queue entry away (cancel_sync; under its shard
 * lock). Only the scanning thread touches svc->batch_rest. */
static bool take_entry(struct tw_service *svc, struct tw_service_timer *t)
{
	bool found = false;

	if (tls_scanning == svc) {
		for (struct tw_service_timer **pp = &svc->batch_rest; *pp;
		     pp = &(*pp)->batch_next) {
			if (*pp == t) {
				*pp = t->batch_next;
				return true;
			}
		}
	}
	pthread_mutex_lock(&svc->q_mu);
	for (size_t i = 0; i < svc->ring_len && !found; i++) {
		size_t slot = (svc->ring_head + i) % svc->ring_cap;

		if (svc->ring[slot] == t) {
			svc->ring[slot] = NULL; /* the executor skips it */
			found = true;
		}
	}
	pthread_mutex_unlock(&svc->q_mu);
	return found;
}

/* Advance every shard to now and return the earliest next expiry. What
 * expired is left in tick order in svc->runs[0] (only the scanning thread,
 * under scan_mu, touches runs). */
static int64_t scan(struct tw_service *svc, int64_t now)
{
	int64_t next = INT64_MAX;

	for (unsigned i = 0; i < svc->nshards; i++) {
		struct shard *sh = &svc->shards[i];
		struct tw_service_timer *reversed, *run = NULL;
		int64_t when, at = now;

		tls_batch = NULL;
		pthread_mutex_lock(&sh->mu);
		if (at < tw_wheel_now(&sh->wheel)) {
			COUNT(svc, backwards);
			at = tw_wheel_now(&sh->wheel);
		}
		tw_wheel_advance(&sh->wheel, at);
		if (tw_wheel_next_expiry(&sh->wheel, &when) && when < next)
			next = when;
		pthread_mutex_unlock(&sh->mu);
		/* on_expire pushed newest first. */
		for (reversed = tls_batch; reversed;) {
			struct tw_service_timer *t = reversed;

			reversed = t->batch_next;
			t->batch_next = run;
			run = t;
		}
		svc->runs[i] = run;
	}
	tls_batch = NULL;
	merge_runs(svc);
	return next;
}

static void wait_until(struct tw_service *svc, int64_t next)
{
	struct timespec ts;
	int64_t rel, abs_ns;

	if (next == INT64_MAX) {
		pthread_cond_wait(&svc->reaper_cv, &svc->reaper_mu);
		return;
	}
	/* The clock may be injected: sleep its distance as nanoseconds. */
	rel = next - clock_now(svc);
	if (rel <= 0)
		return;
	if (rel > 3600 * 1000000000LL)
		rel = 3600 * 1000000000LL;
	abs_ns = monotonic_ns(NULL) + rel;
	ts.tv_sec = abs_ns / 1000000000;
	ts.tv_nsec = abs_ns % 1000000000;
	pthread_cond_timedwait(&svc->reaper_cv, &svc->reaper_mu, &ts);
}

static void *reaper_main(void *arg)
{
	struct tw_service *svc = arg;

	for (;;) {
		int64_t next;

		atomic_store(&svc->deadline, INT64_MAX);
		pthread_mutex_lock(&svc->reaper_mu);
		if (svc->stop_reaper) {
			pthread_mutex_unlock(&svc->reaper_mu);
			break;
		}
		svc->kicked = false;
		pthread_mutex_unlock(&svc->reaper_mu);

		pthread_mutex_lock(&svc->scan_mu);
		tls_scanning = svc;
		next = scan(svc, clock_now(svc));
		dispatch(svc, svc->runs[0]);
		tls_scanning = NULL;
		pthread_mutex_unlock(&svc->scan_mu);

		pthread_mutex_lock(&svc->reaper_mu);
		if (!svc->kicked && !svc->stop_reaper) {
			atomic_store(&svc->deadline, next);
			wait_until(svc, next);
		}
		pthread_mutex_unlock(&svc->reaper_mu);
		COUNT(svc, wakeups);
	}
	return NULL;
}

struct executor_arg {
	struct tw_service *svc;
	unsigned index;
};

static void *executor_main(void *arg)
{
	struct tw_service *svc = ((struct executor_arg *)arg)->svc;
	unsigned index = ((struct executor_arg *)arg)->index;

	free(arg);
	for (;;) {
		struct tw_service_timer *t;

		pthread_mutex_lock(&svc->q_mu);
		while (svc->ring_len == 0 && !svc->stop_executors)
			pthread_cond_wait(&svc->q_cv, &svc->q_mu);
		if (svc->ring_len == 0) {
			pthread_mutex_unlock(&svc->q_mu);
			break;
		}
		t = svc->ring[svc->ring_head];
		svc->ring_head = (svc->ring_head + 1) % svc->ring_cap;
		svc->ring_len--;
		pthread_mutex_unlock(&svc->q_mu);
		if (t) /* NULL: taken back by cancel_sync */
			execute(svc, t, &svc->running[index]);
	}
	return NULL;
}

/* ---- public API ---- */

void tw_service_timer_init(struct tw_service_timer *t, tw_service_fn *fn,
			   int64_t period)
{
	if (!t)
		return;
	memset(t, 0, sizeof(*t));
	tw_timer_init(&t->wheel_timer, on_expire);
	t->fn = fn;
	t->period = period > 0 ? period : 0;
}

static void free_service(struct tw_service *svc)
{
	if (svc->shards) {
		for (unsigned i = 0; i < svc->nshards; i++) {
			tw_wheel_destroy(&svc->shards[i].wheel);
			pthread_mutex_destroy(&svc->shards[i].mu);
			pthread_cond_destroy(&svc->shards[i].idle);
		}
	}
	free(svc->shards);
	free(svc->executors);
	free(svc->ring);
	free(svc->running);
	free(svc->runs);
	pthread_mutex_destroy(&svc->shutdown_mu);
	pthread_mutex_destroy(&svc->reaper_mu);
	pthread_cond_destroy(&svc->reaper_cv);
	pthread_mutex_destroy(&svc->scan_mu);
	pthread_mutex_destroy(&svc->q_mu);
	pthread_cond_destroy(&svc->q_cv);
	free(svc);
}

static int start_threads(struct tw_service *svc)
{
	for (unsigned i = 0; i < svc->cfg.executors; i++) {
		struct executor_arg *arg = malloc(sizeof(*arg));

		if (!arg)
			return TW_ENOMEM;
		arg->svc = svc;
		arg->index = i;
		if (pthread_create(&svc->executors[i], NULL, executor_main, arg)) {
			free(arg);
			return TW_EAGAIN;
		}
		svc->nexecutors_started++;
	}
	if (!svc->cfg.manual) {
		if (pthread_create(&svc->reaper, NULL, reaper_main, svc))
			return TW_EAGAIN;
		svc->reaper_started = true;
	}
	return TW_OK;
}

int tw_service_create(struct tw_service **out, const struct tw_service_config *cfg)
{
	struct tw_service *svc;
	pthread_condattr_t attr;
	int64_t start;
	int rc;

	if (!out)
		return TW_EINVAL;
	*out = NULL;
	svc = calloc(1, sizeof(*svc));
	if (!svc)
		return TW_ENOMEM;
	if (cfg)
		svc->cfg = *cfg;
	if (!svc->cfg.tick)
		svc->cfg.tick = 1000000;
	if (!svc->cfg.wheel_size)
		svc->cfg.wheel_size = 20;
	if (!svc->cfg.shards)
		svc->cfg.shards = 4;
	if (!svc->cfg.queue_capacity)
		svc->cfg.queue_capacity = 4096;
	if (!svc->cfg.clock.now)
		svc->cfg.clock.now = monotonic_ns;
	if (svc->cfg.tick < 1 || svc->cfg.shards > MAX_SHARDS ||
	    svc->cfg.executors > 4096 ||
	    svc->cfg.wheel_size < TW_WHEEL_SIZE_MIN ||
	    svc->cfg.wheel_size > TW_WHEEL_SIZE_MAX) {
		free(svc);
		return TW_EINVAL;
	}
	svc->nshards = svc->cfg.shards;
	svc->nexecutors = svc->cfg.executors;

	pthread_mutex_init(&svc->shutdown_mu, NULL);
	pthread_mutex_init(&svc->reaper_mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&svc->reaper_cv, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&svc->scan_mu, NULL);
	pthread_mutex_init(&svc->q_mu, NULL);
	pthread_cond_init(&svc->q_cv, NULL);
	atomic_init(&svc->deadline, INT64_MAX);
	atomic_init(&svc->closing, false);

	svc->running = calloc(svc->nexecutors + 1, sizeof(*svc->running));
	svc->ring = calloc(svc->cfg.queue_capacity, sizeof(*svc->ring));
	svc->ring_cap = svc->cfg.queue_capacity;
	svc->executors = calloc(svc->nexecutors + 1, sizeof(*svc->executors));
	svc->shards = aligned_alloc(64, svc->nshards * sizeof(*svc->shards));
	svc->runs = calloc(svc->nshards, sizeof(*svc->runs));
	if (!svc->running || !svc->ring || !svc->executors || !svc->shards ||
	    !svc->runs) {
		free(svc->shards);
		svc->shards = NULL;
		free_service(svc);
		return TW_ENOMEM;
	}
	start = clock_now(svc);
	for (unsigned i = 0; i < svc->nshards; i++) {
		struct shard *sh = &svc->shards[i];

		memset(sh, 0, sizeof(*sh));
		pthread_mutex_init(&sh->mu, NULL);
		pthread_cond_init(&sh->idle, NULL);
		sh->svc = svc;
		rc = tw_wheel_init(&sh->wheel, svc->cfg.tick, svc->cfg.wheel_size,
				   start, svc->cfg.mode);
		if (rc) {
			svc->nshards = i + 1;
			free_service(svc);
			return rc;
		}
	}
	rc = start_threads(svc);
	if (rc) {
		tw_service_destroy(svc);
		return rc;
	}
	*out = svc;
	return TW_OK;
}

/* add, under the shard lock. */
static int add_locked(struct tw_service *svc, struct shard *sh,
		      struct tw_service_timer *t, int64_t due)
{
	if (atomic_load(&svc->closing))
		return TW_ESHUTDOWN;
	if (t->state != ST_IDLE)
		return TW_EBUSY;
	t->svc = svc;
	t->stop_rearm = 0;
	t->state = ST_PENDING;
	tw_wheel_add(&sh->wheel, &t->wheel_timer, due);
	COUNT(svc, added);
	return TW_OK;
}

/* cancel, under the shard lock. */
static int cancel_locked(struct tw_service *svc, struct tw_service_timer *t)
{
	bool running = is_running(svc, t);
	int result;

	if (t->state == ST_PENDING) {
		tw_wheel_cancel(&shard_of(svc, t)->wheel, &t->wheel_timer);
		result = TW_SVC_STOPPED;
	} else if (t->state == ST_QUEUED) {
		result = TW_SVC_STOPPED; /* execute() will skip it */
	} else {
		result = running ? TW_SVC_RUNNING : TW_SVC_IDLE;
	}
	t->state = ST_IDLE;
	if (running)
		t->stop_rearm = 1;
	if (result == TW_SVC_STOPPED)
		COUNT(svc, stopped);
	return result;
}

static bool owned_elsewhere(const struct tw_service *svc,
			    const struct tw_service_timer *t)
{
	return t->svc && t->svc != svc;
}

static int add_or_reschedule(struct tw_service *svc, struct tw_service_timer *t,
			     int64_t due, bool reschedule)
{
	struct shard *sh;
	int64_t when = 0;
	bool have;
	int rc, result = TW_SVC_IDLE;

	if (!svc || !t || !t->fn)
		return TW_EINVAL;
	sh = shard_of(svc, t);
	pthread_mutex_lock(&sh->mu);
	if (owned_elsewhere(svc, t)) {
		rc = TW_EOWNER;
	} else if (atomic_load(&svc->closing)) {
		rc = TW_ESHUTDOWN;
	} else {
		if (reschedule)
			result = cancel_locked(svc, t);
		rc = add_locked(svc, sh, t, due);
	}
	have = rc == TW_OK && tw_wheel_next_expiry(&sh->wheel, &when);
	pthread_mutex_unlock(&sh->mu);
	kick_if_earlier(svc, have, when);
	if (rc)
		return rc;
	return reschedule ? result : TW_OK;
}

int tw_service_add(struct tw_service *svc, struct tw_service_timer *t, int64_t due)
{
	return add_or_reschedule(svc, t, due, false);
}

int tw_service_add_in(struct tw_service *svc, struct tw_service_timer *t,
		      int64_t delay)
{
	int64_t now;

	if (!svc)
		return TW_EINVAL;
	now = clock_now(svc);
	if (delay > 0 && now > INT64_MAX - delay)
		return TW_EOVERFLOW;
	if (delay < 0)
		delay = 0;
	return add_or_reschedule(svc, t, now + delay, false);
}

int tw_service_reschedule(struct tw_service *svc, struct tw_service_timer *t,
			  int64_t due)
{
	return add_or_reschedule(svc, t, due, true);
}

/* cancel_sync, under the shard lock: an expired timer may still have its
 * entry in the batch or the queue. Take it back, so that afterwards
 * nothing refers to the timer. An entry still on its way from the reaper
 * lands in the queue soon; retry rather than wait for an executor to
 * consume it (this thread may be the only executor). */
static void wait_unreferenced(struct tw_service *svc, struct shard *sh,
			      struct tw_service_timer *t)
{
	for (;;) {
		struct timespec ts;

		if (t->dispatching && take_entry(svc, t))
			t->dispatching = 0;
		if (!is_running(svc, t) && !t->dispatching)
			return;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&sh->idle, &sh->mu, &ts);
	}
}

static int cancel(struct tw_service *svc, struct tw_service_timer *t, bool sync)
{
	struct shard *sh;
	int result;

	if (!svc || !t)
		return TW_EINVAL;
	sh = shard_of(svc, t);
	pthread_mutex_lock(&sh->mu);
	if (owned_elsewhere(svc, t)) {
		pthread_mutex_unlock(&sh->mu);
		return TW_EOWNER;
	}
	result = cancel_locked(svc, t);
	if (sync && tls_current == t)
		result = TW_EDEADLK;
	else if (sync)
		wait_unreferenced(svc, sh, t);
	pthread_mutex_unlock(&sh->mu);
	return result;
}

int tw_service_cancel(struct tw_service *svc, struct tw_service_timer *t)
{
	return cancel(svc, t, false);
}

int tw_service_cancel_sync(struct tw_service *svc, struct tw_service_timer *t)
{
	return cancel(svc, t, true);
}

int64_t tw_service_poll(struct tw_service *svc)
{
	int64_t now, n;

	if (!svc)
		return TW_EINVAL;
	if (tls_scanning || tls_current)
		return TW_EREENTER;
	if (atomic_load(&svc->closing))
		return TW_ESHUTDOWN;
	pthread_mutex_lock(&svc->scan_mu);
	now = clock_now(svc);
	pthread_mutex_lock(&svc->shards[0].mu);
	n = now < tw_wheel_now(&svc->shards[0].wheel) ? TW_ERANGE : 0;
	pthread_mutex_unlock(&svc->shards[0].mu);
	if (n == 0) {
		tls_scanning = svc;
		scan(svc, now);
		n = dispatch(svc, svc->runs[0]);
		tls_scanning = NULL;
	}
	pthread_mutex_unlock(&svc->scan_mu);
	return n;
}

void tw_service_kick(struct tw_service *svc)
{
	if (svc && !svc->cfg.manual)
		kick(svc);
}

int64_t tw_service_now(const struct tw_service *svc)
{
	if (!svc)
		return 0;
	return clock_now(svc);
}

size_t tw_service_count(struct tw_service *svc)
{
	size_t n = 0;

	for (unsigned i = 0; svc && i < svc->nshards; i++) {
		pthread_mutex_lock(&svc->shards[i].mu);
		n += tw_wheel_count(&svc->shards[i].wheel);
		pthread_mutex_unlock(&svc->shards[i].mu);
	}
	return n;
}

void tw_service_stats(struct tw_service *svc, struct tw_service_stats *out)
{
	if (!out)
		return;
	if (!svc) {
		memset(out, 0, sizeof(*out));
		return;
	}
	out->added = atomic_load(&svc->added);
	out->ran = atomic_load(&svc->ran);
	out->stopped = atomic_load(&svc->stopped);
	out->handed_back = atomic_load(&svc->handed_back);
	out->caller_ran = atomic_load(&svc->caller_ran);
	out->clock_backwards = atomic_load(&svc->backwards);
	out->wakeups = atomic_load(&svc->wakeups);
}

/* Shutdown collects the timers to hand back here (wheel callback). */
static _Thread_local struct tw_service_timer *tls_handed;

static void collect_pending(struct tw_wheel *w, struct tw_timer *wt)
{
	struct tw_service_timer *t =
		tw_container_of(wt, struct tw_service_timer, wheel_timer);

	(void)w;
	t->state = ST_IDLE;
	t->batch_next = tls_handed;
	tls_handed = t;
}

static void stop_threads(struct tw_service *svc)
{
	if (svc->reaper_started) {
		pthread_mutex_lock(&svc->reaper_mu);
		svc->stop_reaper = true;
		pthread_cond_signal(&svc->reaper_cv);
		pthread_mutex_unlock(&svc->reaper_mu);
		pthread_join(svc->reaper, NULL);
		svc->reaper_started = false;
	}
	/* Expired timers already in the queue run: the executors drain it
	 * before they exit (the queue lock is never held while a shard lock
	 * is taken, so cancel_sync may take the queue lock under one). */
	pthread_mutex_lock(&svc->q_mu);
	svc->stop_executors = true;
	pthread_cond_broadcast(&svc->q_cv);
	pthread_mutex_unlock(&svc->q_mu);
	for (unsigned i = 0; i < svc->nexecutors_started; i++)
		pthread_join(svc->executors[i], NULL);
	svc->nexecutors_started = 0;
}

int64_t tw_service_shutdown(struct tw_service *svc,
			    tw_service_hand_back_fn *hand_back, void *arg)
{
	int64_t n = 0;

	if (!svc)
		return TW_EINVAL;
	if (tls_current || tls_scanning)
		return TW_EREENTER;
	pthread_mutex_lock(&svc->shutdown_mu);
	if (svc->shut_down) {
		pthread_mutex_unlock(&svc->shutdown_mu);
		return 0;
	}
	/* Serialise with pollers, then refuse adds from here on. */
	pthread_mutex_lock(&svc->scan_mu);
	atomic_store(&svc->closing, true);
	pthread_mutex_unlock(&svc->scan_mu);
	tls_handed = NULL;
	stop_threads(svc);
	for (unsigned i = 0; i < svc->nshards; i++) {
		pthread_mutex_lock(&svc->shards[i].mu);
		tw_wheel_drain(&svc->shards[i].wheel, collect_pending);
		pthread_mutex_unlock(&svc->shards[i].mu);
	}
	while (tls_handed) {
		struct tw_service_timer *t = tls_handed;

		tls_handed = t->batch_next;
		n++;
		COUNT(svc, handed_back);
		if (hand_back)
			hand_back(t, arg);
	}
	svc->shut_down = true;
	pthread_mutex_unlock(&svc->shutdown_mu);
	return n;
}

void tw_service_destroy(struct tw_service *svc)
{
	if (!svc)
		return;
	tw_service_shutdown(svc, NULL, NULL);
	free_service(svc);
}
