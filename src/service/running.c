/* SPDX-License-Identifier: MIT */
/*
 * running.c — what runs the callbacks: the reaper's loop (drain, advance,
 * dispatch, sleep until the next expiry or a kick), a manual service's
 * poll, dispatch of an advance's batch to the executor queue (a bounded
 * ring; when it is full the scanning thread runs the callback itself),
 * the executors, and execute: the claim of an expired timer, its
 * callback, a periodic timer's re-arm. Who runs what is kept per thread
 * in running[] (core.h), not in the timer, so that a one-shot callback
 * may free its own timer; the same slots keep a timer's runs one at a
 * time (run_entry).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <time.h>

#include "core.h"

_Thread_local struct tw__svc_thread tw__svc_this_thread;

int64_t tw__svc_monotonic_ns(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wait on cv (its clock is CLOCK_MONOTONIC) for at most rel ns. */
void tw__svc_wait_for_ns(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t rel)
{
	int64_t abs_ns = tw__svc_monotonic_ns(NULL) + rel;
	struct timespec ts = { abs_ns / 1000000000, abs_ns % 1000000000 };

	pthread_cond_timedwait(cv, mu, &ts);
}

void tw__svc_wake_sync_waiters(struct tw_service *svc)
{
	if (atomic_load(&svc->sync_waiters)) {
		pthread_mutex_lock(&svc->idle_mu);
		pthread_cond_broadcast(&svc->idle_cv);
		pthread_mutex_unlock(&svc->idle_mu);
	}
}

/* The slot, other than self, of an executor (or the scanning thread)
 * whose run of t is under way; nslots if none. The hand-back slot runs no
 * callback, nor does a slot tagged SLOT_NO_RUN. The caller holds t's one
 * entry, so a slot tagged SLOT_HELD is no longer waiting to claim one: its
 * claim took the entry before ours was made, and its SLOT_RUN store is a
 * few instructions away. */
static unsigned runner_of(struct tw_service *svc,
			  const struct tw_service_timer *t, unsigned self)
{
	for (unsigned i = 0; i <= svc->nexecutors; i++)
		if (i != self && slot_may_run(slot_value(&svc->running[i]), t))
			return i;
	return svc->nslots;
}

/*
 * One expiry of t, whose entry (F_ENTRY) this thread holds, its slot
 * holding t (SLOT_HELD): run it if nobody cancelled it meanwhile -- or, if
 * another thread's run of t is under way, hand the expiry to that thread
 * (running_hand_over), which runs it when its own run returns. So a
 * timer's runs never overlap: a schedule that came due while its last run
 * went on waits for that run, never less (a reschedule or an add from the
 * callback or from any thread, or a periodic timer's re-arm due before the
 * run that made it returned). Only one entry exists at a time, and only
 * an entry starts a run, so once the slots show no run of t none can start
 * but this one. The slots need looking at only when a second thread may
 * run callbacks (executors): a scanning thread alone runs one at a time.
 * Returns the tag the slot has at the end (running_let_go takes it).
 */
static unsigned run_entry(struct tw_service *svc, struct tw_service_timer *t,
			  unsigned slot_index)
{
	_Atomic(struct tw_service_timer *) *slot = &svc->running[slot_index];
	unsigned tag = SLOT_HELD, want;
	tw_service_fn *fn;
	int64_t period, due;
	uint32_t old;
	bool rearm_after;

	old = word_load(t);
	for (;;) {
		if (word_state(old) == ST_EXPIRED && svc->nexecutors) {
			unsigned r = runner_of(svc, t, slot_index);

			if (r < svc->nslots) {
				TW_TEST_POINT("execute.runner_found", t);
				/* Ours is no run from here, so that r's
				 * claim of what it is handed need not wait
				 * for this slot to let go (runner_of takes
				 * a SLOT_HELD slot for a claim about to be
				 * marked). */
				if (tag != SLOT_NO_RUN)
					running_tag(slot, t, tag = SLOT_NO_RUN);
				if (running_hand_over(&svc->running[r], t)) {
					TW_TEST_POINT("execute.handed_over", t);
					return tag; /* the entry is r's now */
				}
				/* r let go, or has claimed and not yet
				 * stored SLOT_RUN: look again */
				sched_yield();
				old = word_load(t);
				continue;
			}
		}
		/* Which slot tag goes with the CAS below: SLOT_HELD if it may
		 * claim (seq_cst, before the CAS: a cancel that finds the
		 * timer IDLE after it sees the slot), SLOT_NO_RUN if it only
		 * gives the entry up (a cancel stopped it: the slot is no run
		 * while it does, review G2). */
		want = word_state(old) == ST_EXPIRED ? SLOT_HELD : SLOT_NO_RUN;
		if (tag != want)
			running_tag(slot, t, tag = want);
		/* Read before the claim, while the timer is EXPIRED and
		 * reinit refuses it: once the CAS below takes EXPIRED away, a
		 * cancel finds it IDLE and the owner may reinit it at once
		 * (tw_service_timer_reinit: "safe right after a plain
		 * cancel"). Read after, the run that had started would take
		 * the new callback, racing the reinit's writes. If the CAS
		 * wins, any later reinit read our CAS first: these reads come
		 * before its writes. */
		fn = callback_of(t);
		period = word_has(old, F_PERIODIC) ? period_of(periodic_of(t)) : 0;
		TW_TEST_POINT("execute.claiming", t);
		if (tr_execute(t, &old))
			break;
	}
	TW_TEST_POINT("execute.claimed", t);
	if (word_state(old) != ST_EXPIRED)
		return tag; /* stopped by cancel: the entry is given up */
	running_claimed(slot, t);
	due = __atomic_load_n(&t->next_due, __ATOMIC_RELAXED);

	THIS_THREAD.current = t;
	THIS_THREAD.current_svc = svc;
	THIS_THREAD.slot = slot_index;
	THIS_THREAD.rearm = period > 0;
	fn(svc, t); /* a one-shot timer may be freed from here on */
	rearm_after = THIS_THREAD.rearm;
	THIS_THREAD.current = NULL;
	THIS_THREAD.current_svc = NULL;
	COUNT(svc, ran);
	/* A callback the scanning thread ran because the executors' queue
	 * was full: counted where it ran, not where dispatch gave up on the
	 * queue (the entry may have been taken back, or its timer stopped). */
	if (slot_index == svc->nexecutors && svc->nexecutors)
		COUNT(svc, caller_ran);

	/* From the due time, not from now: no drift. Not if the callback
	 * cancelled its own timer: it may have freed it since, and a
	 * cancelled periodic timer is not re-armed anyway.
	 * RUNNING here is this run's own (no other run of t can have
	 * started); anything else means an add, a reschedule or a cancel
	 * came during the run, and what it asked for stands. */
	if (rearm_after) {
		THIS_THREAD.in_run_tail = true;
		tw__svc_rearm(svc, t, due > INT64_MAX - period ? due : due + period,
			      due > INT64_MAX - period);
		THIS_THREAD.in_run_tail = false;
	}
	return SLOT_RUN;
}

/* Run one expired timer, and whatever expiry of it other threads hand
 * over meanwhile (run_entry); then let go of the slot. This consumes the
 * timer's entry (F_ENTRY). The caller has stored t in the slot already
 * (SLOT_HELD), where it took the entry: an executor under q_mu, as it
 * takes the entry off the ring (executor_main says why). */
static void execute(struct tw_service *svc, struct tw_service_timer *t,
		    unsigned slot_index)
{
	_Atomic(struct tw_service_timer *) *slot = &svc->running[slot_index];

	while (!running_let_go(slot, t, run_entry(svc, t, slot_index)))
		;
	tw__svc_wake_sync_waiters(svc); /* cancel_sync may wait for the entry */
	if (THIS_THREAD.wake_owed) {
		/* A re-arm's wake of a manual loop, owed since its kick
		 * (wake_loop): the run is over, and t is not touched. */
		THIS_THREAD.wake_owed = NULL;
		TW_TEST_POINT("execute.waking", svc);
		tw__svc_call_wake(svc);
	}
	/* The run and all it was handed are over: a cancel_sync from now on
	 * finds the timer idle. Only the address is passed on (a one-shot
	 * timer may be freed by now). */
	TW_TEST_POINT("execute.let_go", t);
}

/* How far ahead of the timer it runs the scanning thread (or an
 * executor) starts loading the next ones. The batch was filled a whole
 * advance ago, so its timers are out of the cache by the time they run:
 * firing a million timers at once spent most of its time waiting for
 * each one's line in turn. */
#define PREFETCH_AHEAD 8

/* The lines execute() touches: the callback, the state word, the due
 * time (a timer need not sit on one cache line). NULL: a slot
 * cancel_sync took back (its members' addresses are not to be formed). */
static inline void prefetch_timer(const struct tw_service_timer *t)
{
#if defined(__GNUC__)
	if (t) {
		__builtin_prefetch(&t->wheel_timer.fn, 1);
		__builtin_prefetch(&t->next_due, 1);
	}
#else
	(void)t;
#endif
}

/* Hand the batch to the executors, a ring's worth per lock, or run a
 * timer here when the ring is full. The rest of the batch stays in
 * svc->batch, where a callback run here may take a timer out
 * (cancel_sync leaves NULL). */
static int64_t dispatch(struct tw_service *svc)
{
	int64_t n = 0;

	while (svc->batch_pos < svc->batch_len) {
		struct tw_service_timer *t;

		if (svc->nexecutors) {
			size_t queued = 0;

			pthread_mutex_lock(&svc->q_mu);
			while (svc->batch_pos < svc->batch_len &&
			       svc->ring_len < svc->ring_cap &&
			       !svc->stop_executors) {
				t = svc->batch[svc->batch_pos++];
				if (!t)
					continue;
				svc->ring[(svc->ring_head + svc->ring_len++) %
					  svc->ring_cap] = t;
				queued++;
			}
			if (queued)
				pthread_cond_broadcast(&svc->q_cv);
			pthread_mutex_unlock(&svc->q_mu);
			n += (int64_t)queued;
			if (svc->batch_pos == svc->batch_len)
				break;
		}
		if (svc->batch_pos + PREFETCH_AHEAD < svc->batch_len)
			prefetch_timer(svc->batch[svc->batch_pos + PREFETCH_AHEAD]);
		t = svc->batch[svc->batch_pos++];
		if (!t)
			continue;
		n++;
		running_tag(&svc->running[svc->nexecutors], t, SLOT_HELD);
		execute(svc, t, svc->nexecutors);
	}
	svc->batch_len = svc->batch_pos = 0;
	/* A big expiry's room goes back; what stays covers the usual ones.
	 * A shrink that fails leaves the bigger array, which still works. */
	if (svc->batch_cap > BATCH_KEEP) {
		struct tw_service_timer **kept =
			realloc(svc->batch, BATCH_KEEP * sizeof(*kept));

		if (kept) {
			svc->batch = kept;
			svc->batch_cap = BATCH_KEEP;
		}
	}
	return n;
}

#define MAX_SLEEP_NS (3600 * 1000000000LL)

/* Tests see the reaper's decision at "reaper.sleeping", before it sleeps:
 * what it chose is exact, how often a busy machine woke it is not. */
static void reaper_decided(struct tw_service *svc, int64_t sleep_ns)
{
#ifdef TW_TEST_HOOKS
	atomic_store(&svc->test_sleep_ns, sleep_ns);
	TW_TEST_POINT("reaper.sleeping", svc);
#else
	(void)svc;
	(void)sleep_ns;
#endif
}

static void wait_until(struct tw_service *svc, int64_t next)
{
	int64_t now, rel;

	if (next == INT64_MAX) {
		reaper_decided(svc, -1);
		pthread_cond_wait(&svc->reaper_cv, &svc->reaper_mu);
		return;
	}
	/* The clock may be injected: sleep its distance as nanoseconds. An
	 * injected clock may be anywhere in the int64 range, so next - now
	 * need not fit (it overflowed into a negative "due already", and
	 * the reaper spun): compare before subtracting. */
	now = clock_now(svc);
	if (next <= now) {
		reaper_decided(svc, 0);
		return;
	}
	rel = now < 0 && next > INT64_MAX + now ? MAX_SLEEP_NS : next - now;
	if (rel > MAX_SLEEP_NS)
		rel = MAX_SLEEP_NS;
	reaper_decided(svc, rel);
	tw__svc_wait_for_ns(&svc->reaper_cv, &svc->reaper_mu, rel);
}

void *tw__svc_reaper_main(void *arg)
{
	struct tw_service *svc = arg;

	for (;;) {
		int64_t next;

		TW_TEST_POINT("reaper.loop_top", svc);
		pthread_mutex_lock(&svc->reaper_mu);
		if (svc->stop_reaper) {
			pthread_mutex_unlock(&svc->reaper_mu);
			break;
		}
		/* Both kick flags at once, under the lock (see kick()). */
		svc->kicked = false;
		atomic_store(&svc->kick_pending, false);
		/* While it scans, every add due before forever kicks. seq_cst,
		 * before the drain: push() explains the pairing. */
		atomic_store(&svc->deadline, INT64_MAX);
		pthread_mutex_unlock(&svc->reaper_mu);
		TW_TEST_POINT("reaper.cleared", svc);

		pthread_mutex_lock(&svc->scan_mu);
		THIS_THREAD.scanning = svc;
		tw__svc_scan(svc, clock_now(svc), &next);
		dispatch(svc);
		THIS_THREAD.scanning = NULL;
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

void *tw__svc_executor_main(void *arg)
{
	struct tw_service *svc = ((struct tw__svc_executor_arg *)arg)->svc;
	unsigned index = ((struct tw__svc_executor_arg *)arg)->index;

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
		if (svc->ring_len > PREFETCH_AHEAD)
			prefetch_timer(svc->ring[(svc->ring_head + PREFETCH_AHEAD) %
						 svc->ring_cap]);
		/* The entry goes from the ring to this slot in one step under
		 * q_mu, so a cancel_sync that took q_mu and did not find it
		 * in the ring finds it here. Stored after the unlock, it was
		 * in neither for a moment; a waiter's ring check then took the
		 * scanning thread for its holder, and a callback the scanning
		 * thread ran itself (a full queue) got TW_EDEADLK with no cycle
		 * of waits, waiting on nobody but this executor. */
		if (t) /* NULL: taken back by cancel_sync */
			running_tag(&svc->running[index], t, SLOT_HELD);
		pthread_mutex_unlock(&svc->q_mu);
		if (t) {
			TW_TEST_POINT("executor.took", t);
			execute(svc, t, index);
		}
	}
	return NULL;
}

int64_t tw_service_poll(struct tw_service *svc)
{
	int64_t now, n, next;

	if (!svc)
		return TW_EINVAL;
	if (THIS_THREAD.scanning || THIS_THREAD.current)
		return TW_EREENTER;
	if (atomic_load(&svc->closing))
		return TW_ESHUTDOWN;
	TW_TEST_POINT("poll.enter", svc);
	pthread_mutex_lock(&svc->scan_mu);
	/* Again under scan_mu, which shutdown holds while it sets closing: a
	 * poll that got past the check above could otherwise expire timers
	 * shutdown is about to hand back, and run them after it returned. */
	if (atomic_load(&svc->closing)) {
		pthread_mutex_unlock(&svc->scan_mu);
		return TW_ESHUTDOWN;
	}
	now = clock_now(svc);
	pthread_mutex_lock(&svc->wheel_mu);
	n = now < tw_wheel_now(&svc->wheel) ? TW_ERANGE : 0;
	pthread_mutex_unlock(&svc->wheel_mu);
	if (n == 0) {
		/* Everything due at this clock reading, however many: an
		 * advance whose batch could not grow (no memory) leaves the
		 * rest due now, so scan again until none was left (a manual
		 * service has no call that says to poll again). Only a
		 * deferral repeats, so a callback that adds timers due now
		 * cannot keep the loop going on its own. */
		THIS_THREAD.scanning = svc;
		do {
			svc->deferred = false;
			tw__svc_scan(svc, now, &next);
			TW_TEST_POINT("poll.scanned", svc);
			n += dispatch(svc);
		} while (svc->deferred);
		THIS_THREAD.scanning = NULL;
	}
	pthread_mutex_unlock(&svc->scan_mu);
	return n;
}
