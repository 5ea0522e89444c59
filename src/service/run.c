/* SPDX-License-Identifier: MIT */
/*
 * run.c — what runs the callbacks. A shard's expiry (advance under its
 * mutex: every due timer to the shard's expired list), the batches a
 * runner takes off that list and runs outside every lock, a run's claim
 * and its end (the running mark, one run at a time, a periodic timer's
 * re-arm), the executors and their work list, the reaper's loop and its
 * sleep, a manual service's poll and next_expiry, and the kicks and wakes
 * that keep a sleeping reaper or event loop from missing an add.
 *
 * A worked example: one reaper, no executors, a 1 ms tick, two shards.
 * Thread A adds t1 (due 5 ms) to shard 0 and thread B adds t2 (due 5 ms)
 * to shard 1; each add finds reaper_sees at "never", lowers it to 5 ms and
 * kicks. The reaper wakes, reads the clock (1 ms), advances both wheels
 * (nothing due), leaves reaper_sees = 5 ms on each, and sleeps 4 ms. At
 * 5 ms it advances shard 0: t1 moves to the expired list (QUEUED), the
 * reaper takes it into its batch (TAKEN, slot 0) and lets go of the
 * mutex; it stores running = t1, exchanges slot 0 for NULL (the claim),
 * runs t1's callback and clears running. Had thread A cancelled t1
 * between the take and the claim, its compare-and-swap of slot 0 would
 * have won: TW_SVC_STOPPED, and the reaper's exchange would have found
 * NULL. Then shard 1, the same way.
 */
#include "../posix.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "core.h"

_Thread_local struct tw__svc_thread tw__svc_this_thread TW_SVC_TLS;

TW_HIDDEN void tw__svc_link(struct tw_service *svc, struct shard *s,
			    struct tw_service_timer *t, uint32_t word,
			    int64_t due, uint32_t slack,
			    enum tw__svc_transition tr, bool *kick);

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

/* The clock through the latest-time rule: a time behind the latest
 * one is counted and replaced by it. Only the scanning thread (the reaper
 * or the one poll) reads the clock this way, so latest has one writer. */
int64_t tw__svc_read_clock(struct tw_service *svc)
{
	int64_t now = clock_now(svc), latest = (int64_t)load_u64(&svc->latest);

	if (now < latest) {
		bump(&svc->backwards, 1);
		return latest;
	}
	store_u64(&svc->latest, (uint64_t)now);
	return now;
}

void tw__svc_wake_sync_waiters(struct tw_service *svc)
{
	if (load_u64(&svc->sync_waiters)) {
		pthread_mutex_lock(&svc->idle_mu);
		pthread_cond_broadcast(&svc->idle_cv);
		pthread_mutex_unlock(&svc->idle_mu);
	}
}

/* ---- waking the reaper, or a manual service's loop ---- */

/*
 * A manual service has no reaper: the thread that polls it sleeps in its
 * own event loop for what tw_service_timeout() said. What can make that
 * answer too late is an add it did not see (another thread's, or an
 * executor's re-arm). The first of them after each question wakes the
 * loop: tw_service_next_expiry() arms wake_armed before it looks at the
 * shards, and an add exchanges it after its shard's mutex let go, so an
 * add the question missed finds it armed. The polling thread never wakes
 * its own loop: the loop asks again after the poll.
 */
void tw__svc_wake_loop(struct tw_service *svc)
{
	tw_service_wake_fn *fn;
	void *arg;

	if (THIS_THREAD.scanning == svc || !load_u64(&svc->wake_armed) ||
	    !exchange_u64(&svc->wake_armed, 0))
		return;
	/* Once per question: the function under its lock. */
	pthread_mutex_lock(&svc->reaper_mu);
	fn = svc->wake;
	arg = svc->wake_arg;
	pthread_mutex_unlock(&svc->reaper_mu);
	if (fn)
		fn(arg);
}

void tw__svc_kick(struct tw_service *svc)
{
	if (svc->cfg.manual) {
		tw__svc_wake_loop(svc);
		return;
	}
	pthread_mutex_lock(&svc->reaper_mu);
	svc->kicked = true;
	tw__bell_ring(&svc->reaper_bell, false);
	pthread_mutex_unlock(&svc->reaper_mu);
}

void tw_service_kick(struct tw_service *svc)
{
	if (svc)
		tw__svc_kick(svc);
}

int tw_service_set_wake(struct tw_service *svc, tw_service_wake_fn *wake,
			void *arg)
{
	if (!svc)
		return TW_EINVAL_BECAUSE("tw_service_set_wake", "%s",
					 "the service is NULL");
	if (!svc->cfg.manual)
		return TW_EINVAL_BECAUSE("tw_service_set_wake", "%s",
					 "only a manual service has a loop to "
					 "wake (a reaper wakes itself)");
	pthread_mutex_lock(&svc->reaper_mu);
	svc->wake = wake;
	svc->wake_arg = arg;
	pthread_mutex_unlock(&svc->reaper_mu);
	return TW_OK;
}

/* ---- expiry: the wheel's callback, and batches ---- */

static void run_batch(struct tw_service *svc, unsigned ri);

/* Under the shard's mutex: t (word) into runner ri's batch r at place n
 * (TAKEN); the caller counts r->len and or's word into r->periodic_any.
 * Its callback is read now, while a reinit cannot change it under a run
 * that has started. Inlined into expire() and take_batch_as();
 * tw__svc_take_run() makes the same stores in its own order. */
svc_hot_inline void
take_slot(struct runner *r, unsigned ri, unsigned n, struct tw_service_timer *t,
	  uint32_t word)
{
	t->runner = (uint16_t)ri;
	t->place = (uint16_t)n;
	r->fn[n] = callback_of(t);
	r->periodic[n] = word;
	slot_store(r, n, t);
}

/* A timer's runner and place as one 32-bit word, as they lie side by side
 * in it (whatever the byte order), so that a loop that takes a run stores
 * both at once and counts the place up in the word by
 * runner_place(0, 1). */
static inline uint32_t runner_place(unsigned runner, unsigned place)
{
	struct { uint16_t runner, place; } both = { (uint16_t)runner, (uint16_t)place };
	uint32_t word;

	memcpy(&word, &both, sizeof(word));
	return word;
}

_Static_assert(offsetof(struct tw_service_timer, place) ==
		       offsetof(struct tw_service_timer, runner) + sizeof(uint16_t),
	       "a timer's place follows its runner");

static inline unsigned place_of(uint32_t word)
{
	struct { uint16_t runner, place; } both;

	memcpy(&both, &word, sizeof(word));
	return both.place;
}

static inline void set_runner_place(struct tw_service_timer *t, uint32_t word)
{
	memcpy(&t->runner, &word, sizeof(word));
}

svc_hot_inline void
take(struct runner *r, unsigned ri, unsigned n, struct tw_service_timer *t,
     uint32_t word)
{
	take_slot(r, ri, n, t, word);
	word_set(t, word, word_with(word, ST_TAKEN, F_RAN, 0), TR_take);
}

/* What becomes of every service timer the wheel fires, under its shard's
 * mutex, inside the scanner's advance (the wheel no longer holds it):
 * through the wheel's callback (tw__svc_fire), or the taker that takes a
 * level-1 bucket's due runs whole (tw__svc_take_run). It joins the
 * shard's expired list for the executors -- or, while s->direct names
 * the scanner's runner, goes straight into the scanner's batch: always
 * without executors, and with them once the executors' list holds
 * queue_capacity timers (the timer that fills it turns direct on, at
 * s->spill_at), where the scanner would run the rest itself anyway. A
 * full batch asks the wheel to stop (wheel/for_service.h), so that each
 * timer is touched while its line is loaded: a million timers due at
 * once are a batch at a time, not a list walked a second time, cold
 * (docs/service.md measures it). Nothing runs here: the scanner runs
 * the batch after the advance returned, stopped or over (scan_shard),
 * so that the mutex is never let go in the middle of an advance. (A
 * wheel's own callbacks may add and cancel during its advance, on its
 * thread; another thread's call must not meet the wheel half advanced,
 * with a bucket half moved or a drain's share half done. A stopped
 * wheel is whole: tw_wheel_check() holds.) What goes onto the list
 * past a full batch is what the wheel fired before it could stop (it
 * stops only where a level-1 bucket fires: a kafka-mode wheel never
 * does); past the capacity, the scanner takes it back from there. */
svc_hot_inline bool expire(struct shard *s, struct tw_service_timer *t)
{
	struct tw_timer *wt = &t->wheel_timer;
	uint32_t word = word_load(t), queued;
	struct runner *r = s->direct;
	uint64_t nexpired;

	if (r) {
		/* Expired and taken by the scanner in one store of the
		 * word. */
		unsigned n = r->len;

		if (n < r->cap) {
			r->len = n + 1;
			r->periodic_any |= word;
			take_slot(r, r->index, n, t, word);
			word_set_two(t, word, word_with(word, ST_QUEUED, 0, 0),
				     word_with(word, ST_TAKEN, F_RAN, 0), TR_expire,
				     TR_take);
			/* A full batch runs before the wheel fires more:
			 * the advance stops here (scan_shard goes on). */
			if (n + 1 == r->cap) {
				tw__wheel_ask_stop(&s->wheel);
				return true;
			}
			return false;
		}
	}
	queued = word_with(word, ST_QUEUED, 0, 0);
	if (s->svc->ahead) {
		struct tw_service *svc = s->svc;
		uint32_t place = svc->ahead_next++ & svc->ahead_mask;

		atomic_store_explicit(&svc->ahead[place], t,
				      memory_order_relaxed);
		t->place = (uint16_t)place;
	}
	list_append(&s->expired, &wt->link);
	nexpired = load_u64(&s->nexpired) + 1;
	store_u64(&s->nexpired, nexpired);
	word_set(t, word, queued, TR_expire);
	/* The executors' list is full: what expires next is the
	 * scanner's. */
	if (nexpired == s->spill_at)
		s->direct = &s->svc->runners[SCANNER(s->svc)];
	return false;
}

void tw__svc_fire(struct tw_wheel *w, struct tw_timer *wt)
{
	(void)expire(tw_container_of(w, struct shard, wheel), svc_timer_of(wt));
}

/* The front of a due run, l, if its timer is due by due_by: taken from
 * the wheel, its successor read into *next (before the take may relink
 * it) and prefetched; else NULL. */
svc_hot_inline struct tw_service_timer *
take_front(struct tw_wheel *w, struct tw_link *l, int64_t due_by,
	   struct tw_link **next)
{
	struct tw_timer *wt = list_timer(l);

	if (wt->due > due_by)
		return NULL;
	*next = l->next;
#if defined(__GNUC__)
	__builtin_prefetch(*next);
#endif
	tw__wheel_taken(w, wt);
	return svc_timer_of(wt);
}

/* The wheel's taker of a level-1 bucket's due runs (wheel/for_service.h):
 * what tw__svc_fire() does for each timer, without a call and an unlink
 * each. Stops at a timer not due by due_by, and after the one that filled
 * the batch. */
size_t tw__svc_take_run(struct tw_wheel *w, struct tw_bucket *b, int64_t due_by)
{
	struct shard *s = tw_container_of(w, struct shard, wheel);
	struct tw_link *head = &b->head, *l = head->next, *next;
	struct runner *r = s->direct;
	struct tw_service_timer *t;
	size_t n = 0;

	if (r && r->len < r->cap) {
		/* Into the scanner's batch (expire()'s first case), its
		 * length and index kept in registers for the run: the
		 * place counted in the word of runner and place that each
		 * timer takes in one store (take_slot()'s two). */
		size_t len = r->len;
		unsigned ri = r->index;
		uint32_t where = runner_place(ri, (unsigned)len),
			 full = runner_place(ri, r->cap);
		const uint32_t next_place = runner_place(0, 1);
		uintptr_t periodic_any = 0;

		while (l != head && (t = take_front(w, l, due_by, &next)) != NULL) {
			uint32_t word = word_load(t);

			periodic_any |= word;
			set_runner_place(t, where);
			r->fn[len] = callback_of(t);
			r->periodic[len] = word;
			slot_store(r, len, t);
			word_set_two(t, word, word_with(word, ST_QUEUED, 0, 0),
				     word_with(word, ST_TAKEN, F_RAN, 0), TR_expire,
				     TR_take);
			l = next;
			len++;
			where += next_place;
			if (where == full) {
				tw__wheel_ask_stop(w);
				break;
			}
		}
		/* The length from the word, not from len: the loop then
		 * keeps one index, which its stores address through. */
		len = place_of(where);
		n = len - r->len;
		r->len = (unsigned)len;
		r->periodic_any |= periodic_any;
		tw__wheel_cut_run(b, l, n);
		return n;
	}
	/* Onto the expired list (expire()'s second case: for the executors,
	 * or past a full batch), the run spliced there whole: its links in
	 * the bucket are already the list's, from first to last. Its count
	 * stored once; the run ends where the list reaches the queue's
	 * capacity (spill_at), after which the scanner takes what expires
	 * (the next run, with direct set). */
	struct tw_service *svc = s->svc;
	struct tw_link *first = l, *last = NULL;
	uint64_t nexpired = load_u64(&s->nexpired), spill_at = s->spill_at;
	_Atomic(struct tw_service_timer *) *ahead = svc->ahead;
	uint32_t place = svc->ahead_next, mask = svc->ahead_mask;

	while (l != head && (t = take_front(w, l, due_by, &next)) != NULL) {
		uint32_t word = word_load(t);

		if (ahead) {
			atomic_store_explicit(&ahead[place & mask], t,
					      memory_order_relaxed);
			t->place = (uint16_t)(place & mask);
			place++;
		}
		word_set(t, word, word_with(word, ST_QUEUED, 0, 0), TR_expire);
		n++;
		last = l;
		l = next;
		if (++nexpired == spill_at) {
			s->direct = &svc->runners[SCANNER(svc)];
			break;
		}
	}
	if (n) {
		struct tw_link *tail = s->expired.prev;

		tw__wheel_cut_run(b, l, n);
		first->prev = tail;
		tail->next = first;
		last->next = &s->expired;
		s->expired.prev = last;
		svc->ahead_next = place;
		store_u64(&s->nexpired, nexpired);
	}
	return n;
}

/* A prefetch, for writing (a take writes it), of the timer at place in
 * the service's queue ring (svc->ahead and its mask), whatever it holds
 * now. */
static inline void prefetch_ahead(_Atomic(struct tw_service_timer *) *ahead,
				  uint32_t mask, uint32_t place)
{
#if defined(__GNUC__)
	__builtin_prefetch(atomic_load_explicit(&ahead[place & mask],
						memory_order_relaxed),
			   1);
#else
	(void)ahead;
	(void)mask;
	(void)place;
#endif
}

/* Under s->mu: up to `most` of the shard's expired timers into runner
 * ri's batch, oldest first: each taken as it is passed, and the run of
 * them cut off the list once, at the end. ring: the service has the
 * queue's ring (svc->ahead: it has executors), a constant in each copy
 * (take_batch), not a test in the loop. */
svc_hot_inline unsigned take_batch_as(struct tw_service *svc, struct shard *s,
				      unsigned ri, unsigned most, bool ring)
{
	struct runner *r = &svc->runners[ri];
	struct tw_link *head = &s->expired, *link = head->next;
	/* Read once: the loop's stores through timers could alias them. */
	_Atomic(struct tw_service_timer *) *ahead = svc->ahead;
	uint32_t mask = svc->ahead_mask;
	uintptr_t periodic_any = 0;
	unsigned n = 0;

	if (ring && link != head) {
		/* The first AHEAD after the first: the loop then keeps AHEAD
		 * in flight. */
		uint32_t place = svc_timer_of(list_timer(link))->place;

		for (uint32_t k = 1; k <= AHEAD && k < most; k++)
			prefetch_ahead(ahead, mask, place + k);
	}
	while (n < most && link != head) {
		struct tw_link *next = link->next;
		struct tw_service_timer *t = svc_timer_of(list_timer(link));

		if (ring)
			prefetch_ahead(ahead, mask, t->place + AHEAD);
#if defined(__GNUC__)
		else
			__builtin_prefetch(next, 1); /* take writes it */
#endif
		uint32_t word = word_load(t);

		link->next = link->prev = NULL; /* off the list, as unlinked */
		periodic_any |= word;
		take(r, ri, n, t, word);
		n++;
		link = next;
	}
	head->next = link;
	link->prev = head;
	r->len = n;
	r->periodic_any |= periodic_any;
	bump(&s->nexpired, -(int64_t)n);
	return n;
}

static unsigned take_batch(struct tw_service *svc, struct shard *s, unsigned ri,
			   unsigned most)
{
	/* Nothing waits: the common case of the scanner without executors,
	 * whose batches the advance fills (its list is only what an
	 * advance could not stop for). */
	if (s->expired.next == &s->expired)
		return 0;
	return svc->ahead ? take_batch_as(svc, s, ri, most, true)
			  : take_batch_as(svc, s, ri, most, false);
}

/* Whether due has come (the run's end asks it of a deferred add). */
static bool due_now(struct tw_service *svc, int64_t due)
{
	int64_t now = clock_now(svc), latest = (int64_t)load_u64(&svc->latest);

	return due <= (now > latest ? now : latest);
}

/*
 * A run is over (its callback returned); t is the timer, which a one-shot
 * callback may have freed unless rearm or a deferred add says otherwise.
 * Without executors, and with nothing to re-arm, the runner only clears
 * its mark. Otherwise it clears it by compare-and-swap: a RUN_AGAIN tag
 * means an add came during the run (DEFERRED), and the timer is alive
 * (cancel_sync waits for this mark). Then, under the shard's mutex, the
 * timer is filed -- or, on an executor, when due already and no other
 * expired timer waits (others_wait), run again at once here (*fn); a
 * periodic timer nobody touched during its run is re-armed at its due
 * time plus its period, the same way. Returns whether to run t again.
 */
static __attribute__((noinline)) bool
run_end_locked(struct tw_service *svc, unsigned ri, struct tw_service_timer *t,
	       bool rearm, tw_service_fn **fn, bool *periodic);

/* Inlined into run: the common end, a one-shot timer's, is a store or a
 * compare-and-swap of the mark; the rest takes the shard's mutex. */
svc_hot_inline bool
run_end(struct tw_service *svc, unsigned ri, struct tw_service_timer *t,
	bool rearm, tw_service_fn **fn, bool *periodic)
{
	struct runner *r = &svc->runners[ri];
	struct tw_service_timer *expect = t;

	if (!rearm) {
		if (!svc->nexecutors) {
			mark_store(r, NULL);
			return false;
		}
		if (mark_cas(r, &expect, NULL))
			return false;
		TW_TEST_POINT("run.again", t);
	}
	return run_end_locked(svc, ri, t, rearm, fn, periodic);
}

static uint64_t waiting(struct tw_service *svc);

/* Whether an expired timer other than t waits for a runner: one left in
 * this runner's batch after t's place, or one in the executors' list. A
 * timer due again at its run's end runs again at once only where none
 * does. Otherwise it is filed, due, for the next scan, behind them: a
 * timer that keeps coming due during its own run (a callback that adds
 * it again due at once, a period shorter than its run) would else hold
 * its executor from every other timer for as long as it kept at it. */
static bool others_wait(struct tw_service *svc, struct runner *r,
			const struct tw_service_timer *t)
{
	for (unsigned i = t->place + 1u; i < r->len; i++)
		if (slot_load(r, i))
			return true;
	return waiting(svc) != 0;
}

static __attribute__((noinline)) bool
run_end_locked(struct tw_service *svc, unsigned ri, struct tw_service_timer *t,
	       bool rearm, tw_service_fn **fn, bool *periodic)
{
	struct runner *r = &svc->runners[ri];
	bool again = false, kick = false, filed = false;
	struct shard *s;
	uint32_t word;

	/* t is alive: a periodic timer its callback did not cancel, or one
	 * an add is waiting for (its shard never changes while held). */
	s = shard_of(svc, word_load(t));
	shard_lock(s);
	word = word_load(t);
	if (word_state(word) == ST_DEFERRED) {
		/* The scanning thread runs it at its next scan, not in this
		 * one: a callback that adds its own timer due at once would
		 * otherwise keep a poll (or the reaper's scan) going. So
		 * does an executor where another timer waits: behind it. */
		if (ri != SCANNER(svc) && due_now(svc, t->wheel_timer.due) &&
		    !others_wait(svc, r, t)) {
			/* Its add ends in the run that follows, here: taken
			 * and claimed by this runner at once (its batch slot
			 * was emptied by the claim of the run now over). */
			set_grid(t, word, t->wheel_timer.due);
			word_set(t, word, word_with(word, ST_TAKEN, 0, 0), TR_again);
			*fn = callback_of(t);
			*periodic = word_has(word, F_PERIODIC);
			again = true;
		} else {
			tw__svc_link(svc, s, t, word, t->wheel_timer.due, t->slack,
				     TR_place, &kick);
			filed = true;
		}
	} else if (rearm && word_state(word) == ST_TAKEN && t->runner == ri &&
		   !taken_unclaimed(svc, t)) {
		/* Nobody touched it during its run: its next period. */
		int64_t period = period_of(periodic_of(t)), due = grid_of(t);

		if (s->closed || word_has(word, F_SHUT) || period <= 0 ||
		    due > INT64_MAX - period) {
			/* Its last run: shutdown, a teardown, or no time left
			 * to run at. */
			word_set(t, word, word_with(word, ST_IDLE, 0, 0), TR_ran);
		} else if (svc->nexecutors && ri != SCANNER(svc) &&
			   due_now(svc, due + period) && !others_wait(svc, r, t)) {
			/* Its next period came during the run: it runs again
			 * at once, here, as it would have waited for this run
			 * on any other executor (a new add; still TAKEN and
			 * claimed by this runner). On the scanning thread --
			 * the one runner without executors, the queue's
			 * overflow with them -- and on an executor where
			 * another timer waits, the wheel has it run at the
			 * next scan, as a deferred add above. */
			t->wheel_timer.due = due + period;
			periodic_of(t)->due = due + period;
			bump(&s->added, 1);
			*fn = callback_of(t);
			*periodic = true;
			again = true;
		} else {
			tw__svc_link(svc, s, t, word, due + period, t->slack,
				     TR_rearm, &kick);
			filed = true;
		}
	}
	mark_store(r, again ? t : NULL);
	shard_unlock(s);
	/* A manual loop did not see what this run's end filed (nor, for a
	 * deferred add, what the add made: it waited for this end). */
	if (kick)
		tw__svc_kick(svc);
	else if (filed && svc->cfg.manual)
		tw__svc_wake_loop(svc);
	return again;
}

/* Run t, which this runner has claimed, with the callback it was taken
 * with; then every run an add during it asks for (run_end). The thread's
 * current_svc and runner are the batch's (run_batch). */
static void run(struct tw_service *svc, unsigned ri, struct tw_service_timer *t,
		tw_service_fn *fn, bool periodic)
{
	struct runner *r = &svc->runners[ri];
	struct tw__svc_thread *self = &THIS_THREAD;
	bool again;

	do {
		self->current = t;
		self->rearm = periodic;
		fn(svc, t); /* a one-shot timer may be freed from here on */
		self->current = NULL;
		bump(&r->ran, 1);
		if (ri == SCANNER(svc) && svc->nexecutors)
			bump(&r->caller_ran, 1);
		again = run_end(svc, ri, t, self->rearm, &fn, &periodic);
		TW_TEST_POINT("run.over", t);
	} while (again);
	tw__svc_wake_sync_waiters(svc);
}

/* A run's end decided: t runs again (fn, periodic), or its waiters are
 * told it is over. */
static void run_over(struct tw_service *svc, unsigned ri,
		     struct tw_service_timer *t, bool again, tw_service_fn *fn,
		     bool periodic)
{
	TW_TEST_POINT("run.over", t);
	if (again)
		run(svc, ri, t, fn, periodic);
	else
		tw__svc_wake_sync_waiters(svc);
}

/* The rest of run() after a periodic timer's callback. */
static __attribute__((noinline)) void
run_on(struct tw_service *svc, unsigned ri, struct tw_service_timer *t)
{
	tw_service_fn *fn = NULL;
	bool periodic = false, again = run_end(svc, ri, t, true, &fn, &periodic);

	run_over(svc, ri, t, again, fn, periodic);
}

/* The rest of a one-shot run with executors whose mark an add tagged
 * during it (RUN_AGAIN): run_end past its compare-and-swap. */
static __attribute__((noinline)) void
run_again(struct tw_service *svc, unsigned ri, struct tw_service_timer *t)
{
	tw_service_fn *fn = NULL;
	bool periodic = false, again;

	TW_TEST_POINT("run.again", t);
	again = run_end_locked(svc, ri, t, false, &fn, &periodic);
	run_over(svc, ri, t, again, fn, periodic);
}

/* A claim that found its slot emptied by a cancel. The mark may have
 * drawn an add meanwhile (deferred to this "run"'s end): end it as a
 * run, which files that add. */
static __attribute__((noinline)) void
run_lost(struct tw_service *svc, unsigned ri, struct tw_service_timer *t)
{
	tw_service_fn *fn = NULL;
	bool periodic = false;

	if (run_end(svc, ri, t, false, &fn, &periodic))
		run(svc, ri, t, fn, periodic);
	else
		tw__svc_wake_sync_waiters(svc);
	TW_TEST_POINT("run.lost", t);
}

/* Run runner ri's batch: claim each timer still in its slot and run it.
 * The loop is run() for the common timer, a one-shot one, whose end is
 * its mark cleared (a store without executors, a compare-and-swap with
 * them); every other end goes through run_on or run_again. The batch's
 * length, and what the service's runners are, do not change while it
 * runs (only this thread takes into it). Its timers' lines are in this
 * thread's cache: it took them (the wheel's callback or take_batch wrote
 * each). Compiled once without executors and twice with them (an
 * executor's batch, the scanner's), so that the loop asks neither per
 * timer. */
svc_hot_inline void run_batch_as(struct tw_service *svc, unsigned ri,
				 bool executors, bool caller, bool periodic)
{
	struct runner *r = &svc->runners[ri];
	struct tw__svc_thread *self = &THIS_THREAD;
	unsigned len = r->len;

	self->current_svc = svc;
	self->runner = ri;
	/* A batch with no periodic timer: no run re-arms (a cancel from a
	 * callback only ever clears rearm). */
	if (!periodic)
		self->rearm = 0;
	for (unsigned i = 0; i < len; i++) {
		struct tw_service_timer *t = slot_load(r, i);
		tw_service_fn *fn;

		if (!t)
			continue; /* taken back by a cancel */
		/* The mark before the claim: a cancel that finds the slot
		 * claimed sees the run in running (core.h). */
		mark_store(r, t);
		TW_TEST_POINT("run.claiming", t);
		if (slot_claim(r, i) != t) {
			run_lost(svc, ri, t);
			continue;
		}
		TW_TEST_POINT("run.claimed", t);
		fn = r->fn[i];
		self->current = t;
		if (periodic)
			self->rearm = r->periodic[i] & F_PERIODIC;
		fn(svc, t); /* a one-shot timer may be freed from here on */
		self->current = NULL;
		bump(&r->ran, 1);
		if (caller)
			bump(&r->caller_ran, 1);
		if (periodic && self->rearm) {
			run_on(svc, ri, t);
			continue;
		}
		/* run_end of a one-shot timer, inline. */
		if (!executors) {
			mark_store(r, NULL);
		} else {
			struct tw_service_timer *expect = t;

			if (!mark_cas(r, &expect, NULL)) {
				run_again(svc, ri, t);
				continue;
			}
		}
		TW_TEST_POINT("run.over", t);
		tw__svc_wake_sync_waiters(svc);
	}
	self->current_svc = NULL;
	r->len = 0;
	r->periodic_any = 0;
}

/* Each copy a function of its own, so that each loop has the registers
 * to itself (inlined side by side, the loop without executors spilled
 * its timer around the callback). caller: the scanner's batch with
 * executors (the queue's overflow), whose runs caller_ran counts too.
 * The copies without a periodic timer in the batch (periodic_any 0, the
 * common batch) neither store nor test a re-arm per run. */
static __attribute__((noinline)) void run_batch_alone(struct tw_service *svc,
						      unsigned ri)
{
	run_batch_as(svc, ri, false, false, false);
}

static __attribute__((noinline)) void run_batch_alone_periodic(struct tw_service *svc,
							       unsigned ri)
{
	run_batch_as(svc, ri, false, false, true);
}

static __attribute__((noinline)) void run_batch_executor(struct tw_service *svc,
							 unsigned ri)
{
	run_batch_as(svc, ri, true, false, false);
}

static __attribute__((noinline)) void run_batch_executor_periodic(struct tw_service *svc,
								  unsigned ri)
{
	run_batch_as(svc, ri, true, false, true);
}

/* The queue's overflow: rare, one copy. */
static __attribute__((noinline)) void run_batch_overflow(struct tw_service *svc,
							 unsigned ri)
{
	run_batch_as(svc, ri, true, true, true);
}

static void run_batch(struct tw_service *svc, unsigned ri)
{
	bool periodic = svc->runners[ri].periodic_any & F_PERIODIC;

	if (!svc->nexecutors)
		(periodic ? run_batch_alone_periodic : run_batch_alone)(svc, ri);
	else if (ri == SCANNER(svc))
		run_batch_overflow(svc, ri);
	else
		(periodic ? run_batch_executor_periodic : run_batch_executor)(svc, ri);
}

/* ---- the executors' work list ---- */

/* Expired timers waiting for a runner, all shards. */
static uint64_t waiting(struct tw_service *svc)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < svc->nshards; i++)
		n += load_u64(&svc->shards[i].nexpired);
	return n;
}

/* Under s->mu: put the shard on the executors' list (once). True when it
 * went on: then an executor is to be woken, by wake_executor() once the
 * caller has let go of s->mu. Woken with the shard's lock still held, the
 * executor met it at once, in its take, and slept on it: a wake-up, a
 * barrier and a second wake-up more per hand-off (perf's futex and
 * membarrier events at 20,000 purgatory requests a second). */
static bool post(struct tw_service *svc, struct shard *s)
{
	if (s->posted)
		return false;
	s->posted = true;
	pthread_mutex_lock(&svc->work_mu);
	s->work_next = NULL;
	if (svc->work_tail)
		svc->work_tail->work_next = s;
	else
		svc->work_head = s;
	svc->work_tail = s;
	pthread_mutex_unlock(&svc->work_mu);
	return true;
}

/* With no lock held (the shard's, or work_mu: rung under it, the woken
 * executor met that one held instead). No wake-up is lost: an executor
 * looks at the list and counts itself a sleeper under work_mu, where
 * post() linked the shard (bell.h). */
static void wake_executor(struct tw_service *svc, bool *posted)
{
	if (*posted)
		tw__bell_ring(&svc->work_bell, false);
	*posted = false;
}

/* An executor's batch: its share of what waits, at least one and at most
 * BATCH. A callback delays the rest of its batch, so a few expiries are
 * spread over the executors one each (two callbacks that wait for each
 * other still run side by side); a big expiry goes a BATCH at a time. */
static unsigned share(struct tw_service *svc)
{
	/* A quarter of an even split: a callback that blocks holds back a
	 * few batch-mates, not a fair share of the whole list. */
	uint64_t each = waiting(svc) / (4 * (uint64_t)svc->nexecutors);

	return each < 1 ? 1 : each > BATCH ? BATCH : (unsigned)each;
}

void *tw__svc_executor_main(void *arg)
{
	struct tw_service *svc = ((struct tw__svc_executor_arg *)arg)->svc;
	unsigned index = ((struct tw__svc_executor_arg *)arg)->index;

	free(arg);
	for (;;) {
		struct shard *s;
		bool more;

		pthread_mutex_lock(&svc->work_mu);
		while (!svc->work_head && !svc->stop_executors)
			tw__bell_wait(&svc->work_bell, &svc->work_mu, -1);
		s = svc->work_head;
		if (s) {
			svc->work_head = s->work_next;
			if (!svc->work_head)
				svc->work_tail = NULL;
		}
		pthread_mutex_unlock(&svc->work_mu);
		if (!s)
			break;
		shard_lock(s);
		take_batch(svc, s, index, share(svc));
		s->posted = false;
		/* More: the next executor helps. */
		more = !list_empty(&s->expired) && post(svc, s);
		shard_unlock(s);
		wake_executor(svc, &more);
		TW_TEST_POINT("executor.took", svc);
		run_batch(svc, index);
	}
	return NULL;
}

/* ---- scanning ---- */

/* Under s->mu: whether a timer is pending in s, and in *next its next
 * expiry (INT64_MAX if none), which the reaper (reaper) leaves in
 * reaper_sees for the adds to compare with. */
static bool shard_next(struct shard *s, bool reaper, int64_t *next)
{
	int64_t when;
	bool pending = wheel_next_expiry(s, &when);

	*next = pending ? when : INT64_MAX;
	if (reaper) {
		s->reaper_sees = *next;
		s->reaper_idle = !pending;
	}
	return pending;
}

/*
 * Advance shard s to now under its mutex and deal with what expired:
 * without executors the scanner runs it all, a batch per lock hold, as
 * the advance expires it; with executors what expires goes on their list
 * and the shard on their work list until queue_capacity timers wait, and
 * the scanner runs the rest itself the same way (back-pressure). *next
 * gets the shard's next expiry, which the reaper leaves in reaper_sees
 * (INT64_MAX with *pending false: nothing is). */
static int64_t scan_shard(struct tw_service *svc, struct shard *s, int64_t now,
			  int64_t *next, bool *pending, bool reaper)
{
	int64_t n = 0;
	unsigned me = SCANNER(svc);
	bool posted = false; /* an executor to wake once s->mu is let go */

	shard_lock(s);
	if (!svc->nexecutors) {
		/* The scanner runs what expires as it expires (tw__svc_fire):
		 * an advance fills a batch and stops (for_service.h), the
		 * batch runs with the mutex let go, and the advance goes on,
		 * so that each timer's line is loaded once. The first batch
		 * is small (FIRST_BATCH), each next one twice as large. */
		struct runner *r = &svc->runners[me];
		bool stopped;

		r->cap = FIRST_BATCH;
		do {
			int64_t fired;

			s->direct = r;
			fired = advance_wheel(s, now);
			s->direct = NULL;
			if (fired > 0)
				n += fired;
			stopped = tw__wheel_stop_end(&s->wheel);
			/* The batch the advance filled, then what it put on
			 * the expired list (an advance stops only in a
			 * level-1 bucket or between pops), a batch a lock
			 * hold, oldest first. */
			while (r->len || take_batch(svc, s, me, r->cap)) {
				shard_unlock(s);
				TW_TEST_POINT("scan.batch", svc);
				run_batch(svc, me);
				shard_lock(s);
				r->cap = r->cap < BATCH / 2 ? r->cap * 2 : BATCH;
			}
		} while (stopped);
		*pending = shard_next(s, reaper, next);
		shard_unlock(s);
		return n;
	}
	for (;;) {
		/* The list's room: the timers of every shard's list count
		 * (a capacity this count cannot reach sets no spill_at). */
		uint64_t waits = waiting(svc), capacity = svc->cfg.queue_capacity;
		uint64_t before = load_u64(&s->nexpired);
		int64_t fired;
		bool stopped;

		if (waits >= capacity)
			s->direct = &svc->runners[me];
		else if (capacity - waits <= UINT64_MAX - before)
			s->spill_at = before + (capacity - waits);
		fired = advance_wheel(s, now);
		s->direct = NULL;
		s->spill_at = 0;
		if (fired > 0)
			n += fired;
		stopped = tw__wheel_stop_end(&s->wheel);
		if (load_u64(&s->nexpired) != before)
			posted |= post(svc, s);
		/* Past the capacity: the batch the advance filled, with the
		 * mutex let go (the wheel stopped, or its advance is over);
		 * then the advance goes on. */
		if (svc->runners[me].len) {
			shard_unlock(s);
			wake_executor(svc, &posted);
			TW_TEST_POINT("scan.batch", svc);
			run_batch(svc, me);
			shard_lock(s);
		}
		if (!stopped)
			break;
	}
	/* The drains' shares (exact mode): the reaper leaves them for its
	 * drain_pass() while executors take what fired; otherwise now. */
	if (reaper && load_u64(&s->nexpired))
		svc->drains_left |= tw__wheel_drains_owed(&s->wheel);
	else if (tw__wheel_run_drains(&s->wheel) > 0 && !list_empty(&s->expired))
		posted |= post(svc, s);
	*pending = shard_next(s, reaper, next);
	for (;;) {
		/* What a wheel that could not stop put on the list past the
		 * capacity (which may be as large as SIZE_MAX: compared, not
		 * subtracted first), oldest first. */
		uint64_t waits = waiting(svc), capacity = svc->cfg.queue_capacity;
		uint64_t over = waits > capacity ? waits - capacity : 0;

		if (!over ||
		    !take_batch(svc, s, me, over < BATCH ? (unsigned)over : BATCH))
			break;
		shard_unlock(s);
		wake_executor(svc, &posted);
		TW_TEST_POINT("scan.batch", svc);
		run_batch(svc, me);
		shard_lock(s);
	}
	shard_unlock(s);
	wake_executor(svc, &posted);
	return n;
}

/* Every shard, each at a fresh time from the clock (callbacks run here
 * take time); the earliest next expiry in *next, and in *pending whether
 * any timer is (*next is INT64_MAX both when none is and when the first
 * is due at the end of time). */
static int64_t scan(struct tw_service *svc, int64_t now, int64_t *next,
		    bool *pending, bool reaper)
{
	int64_t n = 0;

	*next = INT64_MAX;
	*pending = false;
	for (unsigned i = 0; i < svc->nshards; i++) {
		int64_t when;
		bool any;

		if (i)
			now = tw__svc_read_clock(svc);
		n += scan_shard(svc, &svc->shards[i], now, &when, &any, reaper);
		if (when < *next)
			*next = when;
		*pending |= any;
	}
	return n;
}

#define MAX_SLEEP_NS (3600 * 1000000000LL)

/* How long the reaper leaves the drains' shares to the executors' takes
 * at most: a quarter of a tick, and never more than this. */
#define DRAIN_WAIT_NS 250000

/*
 * The drains' shares a scan left owed (exact mode, with executors: the
 * wheel's tw__wheel_defer_drains). An advance ends with them, a level's
 * timers moved down, each a cache miss -- about 165 us a tick with 500
 * timers due a tick among a million -- and with the shard's mutex held:
 * an executor woken for what fired met that mutex and waited for them
 * all (the first callback after a tick boundary a median 432-458 us
 * late, 267-272 us with the shares moved here; docs/service.md, The
 * reaper). So the reaper waits a little (DRAIN_WAIT_NS, a quarter of a
 * tick at most; less if a kick or shutdown comes, none if the executors
 * have taken everything already) and then moves them. *next and *pending
 * become the shards' next expiry after the shares, which reaper_sees
 * keeps per shard. A timer the shares fire (the wheel's moves rarely
 * fire one) goes to the executors as an advance's does.
 */
static void drain_pass(struct tw_service *svc, int64_t *next, bool *pending)
{
	int64_t wait = svc->cfg.tick / 4;

	if (!svc->drains_left)
		return;
	svc->drains_left = false;
	if (wait > DRAIN_WAIT_NS)
		wait = DRAIN_WAIT_NS;
	pthread_mutex_lock(&svc->reaper_mu);
	if (!svc->kicked && !svc->stop_reaper && wait > 0 && waiting(svc))
		tw__bell_wait(&svc->reaper_bell, &svc->reaper_mu, wait);
	pthread_mutex_unlock(&svc->reaper_mu);
	TW_TEST_POINT("reaper.drains", svc);
	*next = INT64_MAX;
	*pending = false;
	for (unsigned i = 0; i < svc->nshards; i++) {
		struct shard *s = &svc->shards[i];
		bool posted = false, any;
		int64_t when;

		shard_lock(s);
		if (tw__wheel_run_drains(&s->wheel) > 0 && !list_empty(&s->expired))
			posted = post(svc, s);
		any = shard_next(s, true, &when);
		shard_unlock(s);
		if (any && when < *next)
			*next = when;
		*pending |= any;
		wake_executor(svc, &posted);
	}
}

/* Tests see the reaper's decision at "reaper.sleeping", before it sleeps:
 * what it chose is exact, how often a busy machine woke it is not. */
static void reaper_decided(struct tw_service *svc, int64_t sleep_ns)
{
#ifdef TW_TEST_HOOKS
	store_u64(&svc->test_sleep_ns, (uint64_t)sleep_ns);
	TW_TEST_POINT("reaper.sleeping", svc);
#else
	(void)svc;
	(void)sleep_ns;
#endif
}

/* Under reaper_mu: sleep until next on the service's clock, from a
 * time that went through the latest-time rule (a time behind would
 * make the sleep too long). Until kicked when nothing is pending; a timer
 * pending at the end of time (due at INT64_MAX, or a tick boundary past
 * it) is due when an injected clock reads INT64_MAX, so the reaper looks
 * at the clock then, an hour at a time at most. */
static void wait_until(struct tw_service *svc, int64_t next, bool pending)
{
	int64_t now, rel;

	if (next == INT64_MAX && !pending) {
		reaper_decided(svc, -1);
		tw__bell_wait(&svc->reaper_bell, &svc->reaper_mu, -1);
		return;
	}
	now = tw__svc_read_clock(svc);
	if (next <= now) {
		reaper_decided(svc, 0);
		return;
	}
	/* An injected clock may be anywhere in the int64 range: next - now
	 * need not fit. */
	rel = now < 0 && next > INT64_MAX + now ? MAX_SLEEP_NS : next - now;
	if (rel > MAX_SLEEP_NS)
		rel = MAX_SLEEP_NS;
	reaper_decided(svc, rel);
	tw__bell_wait(&svc->reaper_bell, &svc->reaper_mu, rel);
}

void *tw__svc_reaper_main(void *arg)
{
	struct tw_service *svc = arg;

#ifdef __linux__
	/* Its sleeps end at the tick its timers fire at: with no timer
	 * slack, not Linux's default 50 us that the kernel may add to each
	 * to wake it with others (the lateness of every timer it runs,
	 * docs/service.md). It sleeps once a due tick, slack or none. */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
	THIS_THREAD.scanning = svc;
	for (;;) {
		int64_t next;
		bool pending;

		TW_TEST_POINT("reaper.loop_top", svc);
		pthread_mutex_lock(&svc->reaper_mu);
		if (svc->stop_reaper) {
			pthread_mutex_unlock(&svc->reaper_mu);
			break;
		}
		svc->kicked = false;
		pthread_mutex_unlock(&svc->reaper_mu);
		TW_TEST_POINT("reaper.cleared", svc);

		scan(svc, tw__svc_read_clock(svc), &next, &pending, true);
		if (svc->nexecutors)
			drain_pass(svc, &next, &pending);

		pthread_mutex_lock(&svc->reaper_mu);
		if (!svc->kicked && !svc->stop_reaper)
			wait_until(svc, next, pending);
		pthread_mutex_unlock(&svc->reaper_mu);
		bump(&svc->wakeups, 1);
	}
	THIS_THREAD.scanning = NULL;
	return NULL;
}

int64_t tw_service_poll(struct tw_service *svc)
{
	int64_t now, n, next;
	bool pending;

	if (!svc)
		return TW_EINVAL_BECAUSE("tw_service_poll", "%s",
					 "the service is NULL");
	if (!svc->cfg.manual)
		return TW_EINVAL_BECAUSE("tw_service_poll", "%s",
					 "only a manual service is polled (its "
					 "reaper runs this one)");
	if (tw__service_in_callback())
		return TW_EREENTER;
	TW_TEST_POINT("poll.enter", svc);
	/* Under scan_mu, which shutdown holds while it sets closing: a poll
	 * cannot run timers shutdown is about to hand back. */
	pthread_mutex_lock(&svc->scan_mu);
	if (svc->closing) {
		pthread_mutex_unlock(&svc->scan_mu);
		return TW_ESHUTDOWN;
	}
	now = clock_now(svc);
	if (now < (int64_t)load_u64(&svc->latest)) {
		bump(&svc->backwards, 1);
		pthread_mutex_unlock(&svc->scan_mu);
		return TW_ERANGE;
	}
	store_u64(&svc->latest, (uint64_t)now);
	THIS_THREAD.scanning = svc;
	n = scan(svc, now, &next, &pending, false);
	THIS_THREAD.scanning = NULL;
	pthread_mutex_unlock(&svc->scan_mu);
	return n;
}

bool tw_service_next_expiry(struct tw_service *svc, int64_t *when)
{
	bool any = false;

	if (!svc || !when)
		return false;
	/* Before the look: an add it misses wakes the loop. */
	if (svc->cfg.manual)
		store_u64(&svc->wake_armed, 1);
	for (unsigned i = 0; i < svc->nshards; i++) {
		struct shard *s = &svc->shards[i];
		int64_t w;

		shard_lock(s);
		if (wheel_next_expiry(s, &w) && (!any || w < *when)) {
			*when = w;
			any = true;
		}
		shard_unlock(s);
	}
	return any;
}

int64_t tw_service_timeout(struct tw_service *svc, int64_t now)
{
	int64_t when = 0;
	bool any = tw_service_next_expiry(svc, &when);

	return tw__timeout_until(any, when, now);
}
