/* SPDX-License-Identifier: MIT */
/*
 * lifecycle.c — a timer's and a service's beginning and end: timer init
 * and reinit, tw_service_create (defaults, owner ids, threads), shutdown
 * (refuse adds, wait for producers inside, stop the threads, collect what
 * is pending on a private list and hand each back in turn), destroy, and
 * the statistics.
 *
 * A timer joins the first service that adds it: the owner's id lives in
 * the state word, and the add's CAS to ADDING writes it. Ids wrap after
 * 2^25 - 1 services; a timer is reused with another service only after a
 * fresh tw_service_timer_init(), which clears it.
 */
#define _POSIX_C_SOURCE 200809L

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"

/*
 * Owner ids: 2^25 - 1 of them, in the state word's top bits. Handed out in
 * turn, and after they wrap, never one a live service holds: two live
 * services with one id would pass each other's owner checks, so a cancel
 * on the wrong service would stop a timer (2^25 services made and
 * destroyed beside a long-lived one are enough to wrap). The live ids are
 * few (one per service): a list under a mutex, taken only by create and
 * destroy.
 */
static pthread_mutex_t ids_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t ids_next;           /* 0 .. OWNER_IDS - 1: the next to try */
static uint32_t *ids_live;
static size_t ids_nlive, ids_cap;

#ifdef TW_TEST_HOOKS
/* Tests: make the next id the one after `id` (a wrap, without 2^25
 * creates). */
void tw__test_service_next_id(uint32_t id)
{
	pthread_mutex_lock(&ids_mu);
	ids_next = id % OWNER_IDS;
	pthread_mutex_unlock(&ids_mu);
}

/* Tests: how long the reaper chose to sleep at its last "reaper.sleeping"
 * (running.c). */
int64_t tw__test_service_sleep_ns(const struct tw_service *svc)
{
	return atomic_load(&((struct tw_service *)svc)->test_sleep_ns);
}
#endif

static bool id_live(uint32_t id)
{
	for (size_t i = 0; i < ids_nlive; i++)
		if (ids_live[i] == id)
			return true;
	return false;
}

/* An id no live service holds, or 0 (every one is held, or no memory). */
static uint32_t id_take(void)
{
	uint32_t id = 0;

	pthread_mutex_lock(&ids_mu);
	if (ids_nlive == ids_cap) {
		size_t cap = ids_cap ? 2 * ids_cap : 16;
		uint32_t *grown = realloc(ids_live, cap * sizeof(*grown));

		if (!grown)
			goto out;
		ids_live = grown;
		ids_cap = cap;
	}
	for (uint32_t tries = 0; tries < OWNER_IDS; tries++) {
		uint32_t candidate = ids_next + 1;

		ids_next = (ids_next + 1) % OWNER_IDS;
		if (!id_live(candidate)) {
			id = candidate;
			ids_live[ids_nlive++] = id;
			break;
		}
	}
out:
	pthread_mutex_unlock(&ids_mu);
	return id;
}

static void id_give_back(uint32_t id)
{
	pthread_mutex_lock(&ids_mu);
	for (size_t i = 0; i < ids_nlive; i++)
		if (ids_live[i] == id) {
			ids_live[i] = ids_live[--ids_nlive];
			break;
		}
	if (ids_nlive == 0) { /* nothing left behind at exit */
		free(ids_live);
		ids_live = NULL;
		ids_cap = 0;
	}
	pthread_mutex_unlock(&ids_mu);
}

#if defined(__LP64__)
/* service.h says what each of these bytes is for; keep it true. */
_Static_assert(sizeof(struct tw_service_timer) == 64,
	       "a one-shot service timer is 64 bytes on LP64");
#endif
/* running[] keeps a tag in a slot's two low bits (core.h). */
_Static_assert(_Alignof(struct tw_service_timer) >= 4,
	       "a service timer's address has two low bits free");

/* ---- timers ---- */

#ifdef TW_DEBUG
/* The debug build's table (src/debug.h) holds every timer a service holds,
 * tagged with that service's id: a step that takes a timer in or lets go
 * of it says so here. Only an add takes a free timer in, and nothing can
 * let go of it until its producer publishes it, after this report; so
 * reports that cross can only leave a held timer out of the table (a
 * mistake missed), never a free one in it (a false alarm). */
void tw__svc_debug_step(const struct tw_service_timer *t, uint32_t from,
			uint32_t to)
{
	if (word_held(from) != word_held(to))
		tw__debug_set(TW_DBG_SVC_TIMER, t, word_held(to), word_owner(to));
}

/* An init of a timer the service still holds wipes its links and its
 * state under the service's feet: the reaper crashes on it seconds later,
 * or a shutdown waits for it for ever. The table says held; the
 * word, read now (the timer is the caller's memory), confirms it. */
static void refuse_init_of_held(const char *call, const struct tw_service_timer *t)
{
	uint64_t owner;
	uint32_t word;

	if (!tw__debug_get(TW_DBG_SVC_TIMER, t, &owner))
		return;
	word = word_load(t);
	if (!word_held(word) || word_owner(word) != owner)
		return;
	tw__debug_fail(call, t,
		       "this timer is still held by service #%u (%s). Initialising "
		       "it now would corrupt that service. To change its callback "
		       "after a cancel, use tw_service_timer_reinit() (or "
		       "tw_service_periodic_reinit()); to reuse or free it, call "
		       "tw_service_cancel_sync() first, which returns once the "
		       "service has let go of it.",
		       (unsigned)(owner >> OWNER_SHIFT),
		       word_state(word) == ST_PENDING || word_state(word) == ST_ADDING
			       ? "pending"
		       : word_state(word) == ST_EXPIRED ? "expired, about to run"
		       : word_state(word) == ST_RUNNING ? "its callback is running"
							: "a plain cancel left it linked in the wheel");
}
#else
#define refuse_init_of_held(call, t) ((void)0)
#endif

void tw_service_timer_init(struct tw_service_timer *t, tw_service_fn *fn)
{
	if (!t)
		return;
	refuse_init_of_held("tw_service_timer_init", t);
	memset(t, 0, sizeof(*t));
	set_callback(t, fn);
}

/* F_PERIODIC is set only here and in tw_service_periodic_reinit(): it also
 * says that the timer is the first member of a struct tw_service_periodic,
 * so that execute may read the period behind it. */
void tw_service_periodic_init(struct tw_service_periodic *p, tw_service_fn *fn,
			      int64_t period)
{
	if (!p)
		return;
	refuse_init_of_held("tw_service_periodic_init", &p->timer);
	tw_service_timer_init(&p->timer, fn);
	p->period = period > 0 ? period : 0;
	word_init(&p->timer, period > 0);
}

bool tw_service_timer_pending(const struct tw_service_timer *t)
{
	return t && word_live(word_load(t));
}

/* Only the callback (and a periodic timer's period) change: the wheel
 * links, the inbox link and the flags may still be the service's (a plain
 * cancel leaves the unlinking to the reaper, and an expired entry to its
 * executor), and wiping them would make a re-initialised timer run twice
 * (the wheel or an executor would still find it where it was). The CAS
 * publishes the new fields with the flag it writes. */
static int reinit(struct tw_service_timer *t, tw_service_fn *fn,
		  struct tw_service_periodic *p, int64_t period)
{
	uint32_t old;

	if (!t)
		return TW_EINVAL;
	old = word_load(t);
	if (word_state(old) != ST_IDLE)
		return TW_EBUSY;
	/* While it is IDLE no service thread claims it; a run that claimed
	 * it before read both fields first (execute). */
	set_callback(t, fn);
	if (p)
		set_period(p, period);
	do {
		if (word_state(old) != ST_IDLE)
			return TW_EBUSY; /* an add raced its owner: misuse */
	} while (!tr_reinit(t, &old, p ? period > 0 : -1));
	return TW_OK;
}

int tw_service_timer_reinit(struct tw_service_timer *t, tw_service_fn *fn)
{
	return reinit(t, fn, NULL, 0);
}

int tw_service_periodic_reinit(struct tw_service_periodic *p, tw_service_fn *fn,
			       int64_t period)
{
	return p ? reinit(&p->timer, fn, p, period) : TW_EINVAL;
}

/* ---- a service ---- */

static void free_service(struct tw_service *svc)
{
#ifdef TW_DEBUG
	/* What it still held (tombstones, say) is the caller's memory again. */
	tw__debug_forget(TW_DBG_SVC_TIMER, svc->owner_bits);
#endif
	if (svc->wheel.buckets)
		tw_wheel_destroy(&svc->wheel);
	id_give_back(svc->owner_bits >> OWNER_SHIFT);
	free(svc->inboxes);
	free(svc->executors);
	free(svc->ring);
	free(svc->batch);
	free(svc->running);
	pthread_mutex_destroy(&svc->shutdown_mu);
	pthread_mutex_destroy(&svc->wheel_mu);
	pthread_mutex_destroy(&svc->scan_mu);
	pthread_mutex_destroy(&svc->reaper_mu);
	pthread_cond_destroy(&svc->reaper_cv);
	pthread_mutex_destroy(&svc->q_mu);
	pthread_cond_destroy(&svc->q_cv);
	pthread_mutex_destroy(&svc->idle_mu);
	pthread_cond_destroy(&svc->idle_cv);
	free(svc);
}

static int start_threads(struct tw_service *svc)
{
	for (unsigned i = 0; i < svc->cfg.executors; i++) {
		struct tw__svc_executor_arg *arg = malloc(sizeof(*arg));

		if (!arg)
			return TW_ENOMEM;
		arg->svc = svc;
		arg->index = i;
		if (pthread_create(&svc->executors[i], NULL,
				   tw__svc_executor_main, arg)) {
			free(arg);
			return TW_EAGAIN;
		}
		svc->nexecutors_started++;
	}
	if (!svc->cfg.manual) {
		if (pthread_create(&svc->reaper, NULL, tw__svc_reaper_main, svc))
			return TW_EAGAIN;
		svc->reaper_started = true;
	}
	return TW_OK;
}

/* The caller's configuration (none: every default) with each 0 made its
 * default, into *c; TW_EINVAL for a value the service cannot run with. */
static int settle_config(struct tw_service_config *c,
			 const struct tw_service_config *cfg)
{
	if (cfg)
		*c = *cfg;
	if (!c->tick)
		c->tick = 1000000;
	/* Kafka's 20 in kafka mode; exact mode's fastest, 64 (wheel.h). */
	if (!c->wheel_size)
		c->wheel_size = c->mode == TW_MODE_KAFKA ? 20 : 64;
	if (!c->inboxes)
		c->inboxes = 8;
	if (!c->queue_capacity)
		c->queue_capacity = 4096;
	if (!c->clock.now)
		c->clock.now = tw__svc_monotonic_ns;
	if (c->tick < 1 || c->inboxes > MAX_INBOXES || c->executors > 4096 ||
	    c->wheel_size < TW_WHEEL_SIZE_MIN ||
	    c->wheel_size > TW_WHEEL_SIZE_MAX)
		return TW_EINVAL_BECAUSE("tw_service_create",
			"%s", c->tick < 1 ? "cfg.tick must be at least 1 (0: 1 ms)"
			: c->inboxes > MAX_INBOXES ? "cfg.inboxes must be at most 1024"
			: c->executors > 4096 ? "cfg.executors must be at most 4096"
			: "cfg.wheel_size must be in [2, 65536] (0: the default)");
	return TW_OK;
}

/* The owner id every timer this service adds carries in its state word. */
static int take_owner_id(struct tw_service *svc)
{
	uint32_t id = id_take();

	if (!id)
		return TW_EAGAIN; /* 2^25 - 1 live services, or no memory */
	svc->owner_bits = id << OWNER_SHIFT;
	return TW_OK;
}

/* Locks, condition variables and atomics: nothing here can fail, and
 * free_service destroys them all. The two timed waits (reaper_cv,
 * idle_cv) run on CLOCK_MONOTONIC, the clock tw__svc_wait_for_ns reads
 * their deadlines on. */
static void init_sync(struct tw_service *svc)
{
	pthread_condattr_t attr;

	pthread_mutex_init(&svc->shutdown_mu, NULL);
	pthread_mutex_init(&svc->wheel_mu, NULL);
	pthread_mutex_init(&svc->scan_mu, NULL);
	pthread_mutex_init(&svc->reaper_mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&svc->reaper_cv, &attr);
	pthread_cond_init(&svc->idle_cv, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&svc->q_mu, NULL);
	pthread_cond_init(&svc->q_cv, NULL);
	pthread_mutex_init(&svc->idle_mu, NULL);
	atomic_init(&svc->deadline, INT64_MAX);
	atomic_init(&svc->closing, false);
	atomic_init(&svc->handing_back, false);
	atomic_init(&svc->kick_pending, false);
	atomic_init(&svc->sync_waiters, 0);
}

/* Every array the service will ever need but the batch's growth: the
 * running slots (one per executor, the scanning thread's and the
 * hand-back's), the executors' queue, their thread ids, the inboxes and
 * the batch's first room. TW_ENOMEM if any is missing (the caller frees
 * what was made). */
static int alloc_parts(struct tw_service *svc)
{
	svc->ninboxes = svc->cfg.inboxes;
	svc->nexecutors = svc->cfg.executors;
	svc->nslots = svc->nexecutors + 2;
	svc->running = calloc(svc->nslots, sizeof(*svc->running));
	svc->ring = calloc(svc->cfg.queue_capacity, sizeof(*svc->ring));
	svc->ring_cap = svc->cfg.queue_capacity;
	svc->executors = calloc(svc->nexecutors + 1, sizeof(*svc->executors));
	svc->inboxes = aligned_alloc(64, svc->ninboxes * sizeof(*svc->inboxes));
	/* The batch's first room, made here: an advance always has room for
	 * BATCH_MIN expiries, so a scan makes progress however short of
	 * memory the process is (it grows the batch when it can; without any
	 * room a poll, or the reaper, would defer the same timer for ever). */
	svc->batch = malloc(BATCH_MIN * sizeof(*svc->batch));
	svc->batch_cap = BATCH_MIN;
	if (!svc->running || !svc->ring || !svc->executors ||
	    !svc->inboxes || !svc->batch)
		return TW_ENOMEM;
	for (unsigned i = 0; i < svc->ninboxes; i++) {
		struct inbox *ib = &svc->inboxes[i];

		memset(ib, 0, sizeof(*ib));
		atomic_init(&ib->entered, 0);
		atomic_init(&ib->added, 0);
		atomic_init(&ib->stopped, 0);
		atomic_init(&ib->tombed, 0);
	}
	return TW_OK;
}

/* The service's one wheel, starting at the clock's reading now, with the
 * service's hooks: it fires every timer through one function (each
 * timer's fn is its callback) and asks before it files a tombstone again. */
static int init_wheel(struct tw_service *svc)
{
	int rc = tw_wheel_init(&svc->wheel, svc->cfg.tick, svc->cfg.wheel_size,
			       clock_now(svc), svc->cfg.mode);

	if (rc)
		return rc;
	svc->wheel.expire = tw__svc_on_expire;
	svc->wheel.drop = tw__svc_drop_tombstone;
	return TW_OK;
}

/* Each step undoes only what came before it: a bad configuration or no
 * owner id frees the bare structure, a failed allocation or wheel
 * everything made so far (free_service), and a thread that would not
 * start stops those that did (tw_service_destroy). */
int tw_service_create(struct tw_service **out, const struct tw_service_config *cfg)
{
	struct tw_service *svc;
	int rc;

	if (!out)
		return TW_EINVAL_BECAUSE("tw_service_create", "out is NULL");
	*out = NULL;
	svc = calloc(1, sizeof(*svc));
	if (!svc)
		return TW_ENOMEM;
	rc = settle_config(&svc->cfg, cfg);
	if (rc == TW_OK)
		rc = take_owner_id(svc);
	if (rc) {
		free(svc);
		return rc;
	}
	init_sync(svc);
	rc = alloc_parts(svc);
	if (rc == TW_OK)
		rc = init_wheel(svc);
	if (rc) {
		free_service(svc);
		return rc;
	}
	rc = start_threads(svc);
	if (rc) {
		tw_service_destroy(svc);
		return rc;
	}
	*out = svc;
	return TW_OK;
}

int64_t tw_service_now(const struct tw_service *svc)
{
	if (!svc)
		return 0;
	return clock_now(svc);
}

void tw_service_stats(struct tw_service *svc, struct tw_service_stats *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!svc)
		return;
	out->added = atomic_load(&svc->added);
	for (unsigned i = 0; i < svc->ninboxes; i++) {
		out->added += atomic_load(&svc->inboxes[i].added);
		out->stopped += atomic_load(&svc->inboxes[i].stopped) +
				atomic_load(&svc->inboxes[i].tombed);
	}
	out->ran = atomic_load(&svc->ran);
	out->handed_back = atomic_load(&svc->handed_back);
	out->caller_ran = atomic_load(&svc->caller_ran);
	out->clock_backwards = atomic_load(&svc->backwards);
	out->wakeups = atomic_load(&svc->wakeups);
}

/* ---- shutdown ---- */

/* PENDING -> PENDING + F_ENTRY: from here until its turn the timer is on
 * shutdown's private list, still pending, so that a cancel may still stop
 * it (then it is not handed back: one end each), and F_ENTRY (then the
 * hand-back slot) keeps a racing cancel_sync waiting until shutdown is
 * past it; returning at once would let its caller free a timer that is
 * about to be handed back. The timer stays PENDING, not IDLE (claimed for
 * the hand-back), so that a hand_back that cancel_syncs another timer
 * still on the list can stop it: were it claimed, the cancel_sync would
 * wait for that timer's hand-back, which comes only after its own
 * returns -- for ever. */
static void collect_pending(struct tw_wheel *w, struct tw_timer *wt)
{
	struct tw_service_timer *t =
		tw_container_of(wt, struct tw_service_timer, wheel_timer);
	uint32_t old = word_load(t);

	do {
		if (word_state(old) != ST_PENDING) {
			/* a cancel claimed it (unlinked now, by the drain) */
			if (word_has(old, F_TOMB))
				tw__svc_clear_tomb(tw_container_of(
					w, struct tw_service, wheel), t);
			return;
		}
	} while (!tr_collect(t, &old));
	/* The inbox link is free: the inboxes are drained and closed (no
	 * producer is inside, none can enter, the threads are stopped). */
	t->inbox_next = THIS_THREAD.handed;
	THIS_THREAD.handed = t;
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
	 * before they exit. */
	pthread_mutex_lock(&svc->q_mu);
	svc->stop_executors = true;
	pthread_cond_broadcast(&svc->q_cv);
	pthread_mutex_unlock(&svc->q_mu);
	for (unsigned i = 0; i < svc->nexecutors_started; i++)
		pthread_join(svc->executors[i], NULL);
	svc->nexecutors_started = 0;
}

/* One timer off shutdown's list: handed back (true) unless a cancel
 * stopped it first, then let go of. */
static bool hand_back_one(struct tw_service *svc, struct tw_service_timer *t,
			  _Atomic(struct tw_service_timer *) *slot)
{
	uint32_t old;

	/* The slot first: a cancel that finds the timer IDLE without
	 * F_ENTRY then sees the hand-back under way in it. */
	running_store(slot, t);
	old = word_load(t);
	do {
		if (word_state(old) != ST_PENDING)
			break;
	} while (!tr_hand_back(t, &old));
	if (word_state(old) == ST_PENDING)
		return true;
	/* A cancel stopped it first: not ours to hand back. Let go of it,
	 * the tombstone flag before the entry (a cancel_sync returns once
	 * F_ENTRY is gone). */
	running_store(slot, NULL);
	pthread_mutex_lock(&svc->wheel_mu);
	tw__svc_clear_tomb(svc, t);
	tr_release_entry_now(t);
	pthread_mutex_unlock(&svc->wheel_mu);
	tw__svc_wake_sync_waiters(svc);
	return false;
}

/* Every add ended exactly once: it ran, a cancel or a reschedule stopped
 * it, or shutdown handed it back (service.h). After the threads are
 * joined and the wheel is drained the counts are final, and a difference
 * is an add the service lost track of: a timer initialised while it held
 * it, which then neither runs nor comes back. */
static bool balanced(struct tw_service *svc)
{
	struct tw_service_stats st;

	tw_service_stats(svc, &st);
	return st.added == st.ran + st.stopped + st.handed_back;
}

#ifdef TW_DEBUG
/* The debug build stops where the release build returns TW_ECORRUPT. */
static void report_broken(const char *call, const struct tw_service *svc)
{
	struct tw_service_stats st;

	if (svc->broken)
		tw__debug_fail(call, svc->broken,
			       "this timer was overwritten while service #%u held "
			       "it (tw_service_timer_init() or memset on a pending "
			       "timer, then maybe added again): its links could "
			       "not be followed, and shutdown stopped there rather "
			       "than loop for ever. Use tw_service_cancel_sync() "
			       "before initialising or freeing a timer.",
			       (unsigned)(svc->owner_bits >> OWNER_SHIFT));
	tw_service_stats((struct tw_service *)svc, &st);
	tw__debug_fail(call, svc,
		       "the accounting of this service does not balance: %llu "
		       "adds, but %llu ran, %llu were stopped and %llu handed "
		       "back. A timer was initialised (or its memory reused) "
		       "while the service held it; use tw_service_cancel_sync() "
		       "first.",
		       (unsigned long long)st.added, (unsigned long long)st.ran,
		       (unsigned long long)st.stopped,
		       (unsigned long long)st.handed_back);
}
#endif

int64_t tw_service_shutdown(struct tw_service *svc,
			    tw_service_hand_back_fn *hand_back, void *arg)
{
	struct tw__svc_thread *self = &THIS_THREAD;
	int64_t n = 0;

	if (!svc)
		return TW_EINVAL;
	if (self->current || self->scanning)
		return TW_EREENTER;
	pthread_mutex_lock(&svc->shutdown_mu);
	if (svc->shut_down) {
		pthread_mutex_unlock(&svc->shutdown_mu);
		return 0;
	}
	/* Serialise with pollers, then refuse adds from here on, and wait
	 * for the producers already inside. */
	pthread_mutex_lock(&svc->scan_mu);
	atomic_store(&svc->closing, true);
	pthread_mutex_unlock(&svc->scan_mu);
	for (unsigned i = 0; i < svc->ninboxes; i++)
		while (atomic_load(&svc->inboxes[i].entered) !=
		       atomic_load(&svc->inboxes[i].added)) {
			TW_TEST_POINT("shutdown.producer_inside", svc);
			sched_yield();
		}
	self->handed = NULL;
	stop_threads(svc);
	TW_TEST_POINT("shutdown.drain", svc);
	pthread_mutex_lock(&svc->wheel_mu);
	tw__svc_drain_inboxes(svc);
	{
		struct tw_timer *broken;

		if (tw__wheel_drain_checked(&svc->wheel, collect_pending,
					    &broken) == TW_ECORRUPT &&
		    !svc->broken)
			svc->broken = tw_container_of(
				broken, struct tw_service_timer, wheel_timer);
	}
	pthread_mutex_unlock(&svc->wheel_mu);
	/* hand_back runs like a callback, in the last running[] slot: a
	 * cancel_sync of the timer waits until it returned, and from inside
	 * hand_back shutdown is refused and cancel_sync(t) does not wait for
	 * itself. */
	self->current_svc = svc;
	self->slot = svc->nexecutors + 1;
	atomic_store(&svc->handing_back, true);
	while (self->handed) {
		struct tw_service_timer *t = self->handed;
		_Atomic(struct tw_service_timer *) *slot = &svc->running[self->slot];

		self->handed = t->inbox_next;
		if (!hand_back_one(svc, t, slot))
			continue;
		n++;
		COUNT(svc, handed_back);
		TW_TEST_POINT("shutdown.hand_back", t);
		self->current = t;
		if (hand_back)
			hand_back(t, arg);
		self->current = NULL;
		running_store(slot, NULL);
		tw__svc_wake_sync_waiters(svc);
	}
	atomic_store(&svc->handing_back, false);
	self->current_svc = NULL;
	svc->shut_down = true;
	svc->unbalanced = !balanced(svc);
	pthread_mutex_unlock(&svc->shutdown_mu);
	return svc->broken || svc->unbalanced ? TW_ECORRUPT : n;
}

int tw_service_destroy(struct tw_service *svc)
{
	int rc;

	/* From a callback or a hand_back the service is running the caller:
	 * freeing it there would be a use-after-free on return. Refused like
	 * shutdown, by doing nothing. */
	if (!svc)
		return TW_EINVAL;
	if (THIS_THREAD.current || THIS_THREAD.scanning)
		return TW_EREENTER;
	tw_service_shutdown(svc, NULL, NULL);
	rc = svc->broken || svc->unbalanced ? TW_ECORRUPT : TW_OK;
#ifdef TW_DEBUG
	if (rc)
		report_broken("tw_service_destroy", svc);
#endif
	free_service(svc);
	return rc;
}
