/* SPDX-License-Identifier: MIT */
/*
 * lifecycle.c — a timer's and a service's beginning and end: timer init,
 * reinit and pending, the owner ids and the registry that finds a
 * service from one, tw_service_create (defaults, shards, runners,
 * threads), shutdown (close the shards, stop the threads, collect what is
 * pending on each shard's hand-back list and hand each back in turn),
 * destroy, count and the statistics.
 *
 * A timer joins the first service that adds it: the owner's id and the
 * shard live in the state word, and the first add's compare-and-swap
 * writes both. Ids wrap after 2^18 - 1 services, never onto a live one;
 * a timer is reused with another service only after a fresh
 * tw_service_timer_init(), which clears them.
 */
#include "../posix.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/*
 * Owner ids, handed out in turn and, after they wrap, never one a live
 * service holds: two live services with one id would pass each other's
 * owner checks. The registry maps each live id to its service, for the
 * calls that get a timer and no service (tw_service_timer_pending() of a
 * taken timer, reinit, the debug build's checks): two levels of 512, a
 * page made the first time an id in it is used, all under ids_mu.
 */
#define REG_BITS 9
#define REG_PAGE (1u << REG_BITS)

static pthread_mutex_t ids_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t ids_next; /* 0 .. OWNER_IDS - 1: the next to try */
static size_t ids_nlive;
static struct tw_service **registry[(OWNER_IDS >> REG_BITS) + 1];

#ifdef TW_TEST_HOOKS
/* Tests: make the next id the one after `id` (a wrap, without 2^18
 * creates). */
void tw__test_service_next_id(uint32_t id)
{
	pthread_mutex_lock(&ids_mu);
	ids_next = id % OWNER_IDS;
	pthread_mutex_unlock(&ids_mu);
}

/* Tests: how long the reaper chose to sleep at its last "reaper.sleeping"
 * (run.c). */
int64_t tw__test_service_sleep_ns(const struct tw_service *svc)
{
	return (int64_t)load_u64(&((struct tw_service *)svc)->test_sleep_ns);
}
#endif

/* Under ids_mu. */
static struct tw_service **registry_slot(uint32_t id, bool make)
{
	struct tw_service **page = registry[id >> REG_BITS];

	if (!page && make)
		page = registry[id >> REG_BITS] = calloc(REG_PAGE, sizeof(*page));
	return page ? &page[id & (REG_PAGE - 1)] : NULL;
}

struct tw_service *tw__svc_of_owner(uint32_t word)
{
	struct tw_service **slot, *svc;

	if (!word_owner(word))
		return NULL;
	pthread_mutex_lock(&ids_mu);
	slot = registry_slot(word_owner(word) >> OWNER_SHIFT, false);
	svc = slot ? *slot : NULL;
	if (svc && word_shard(word) < svc->nshards)
		atomic_fetch_add_explicit(&svc->lookups, 1, memory_order_relaxed);
	else
		svc = NULL;
	pthread_mutex_unlock(&ids_mu);
	return svc;
}

void tw__svc_let_go(struct tw_service *svc)
{
	atomic_fetch_sub_explicit(&svc->lookups, 1, memory_order_release);
}

/* An id no live service holds, registered to svc; or 0: every one is
 * held, or (*no_memory set) no memory for its registry page. */
static uint32_t id_take(struct tw_service *svc, bool *no_memory)
{
	uint32_t id = 0;

	*no_memory = false;
	pthread_mutex_lock(&ids_mu);
	for (uint32_t tries = 0; tries < OWNER_IDS && ids_nlive < OWNER_IDS; tries++) {
		uint32_t candidate = ids_next + 1;
		struct tw_service **slot;

		ids_next = (ids_next + 1) % OWNER_IDS;
		slot = registry_slot(candidate, true);
		if (!slot) {
			*no_memory = true;
			break;
		}
		if (!*slot) {
			*slot = svc;
			ids_nlive++;
			id = candidate;
			break;
		}
	}
	pthread_mutex_unlock(&ids_mu);
	return id;
}

static void id_give_back(uint32_t id)
{
	pthread_mutex_lock(&ids_mu);
	*registry_slot(id, false) = NULL;
	if (--ids_nlive == 0) {
		/* Nothing left behind at exit. */
		for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++) {
			free(registry[i]);
			registry[i] = NULL;
		}
	}
	pthread_mutex_unlock(&ids_mu);
}

#if defined(__LP64__)
/* service.h says what each of these bytes is for; keep it true. */
_Static_assert(sizeof(struct tw_service_timer) == 64,
	       "a one-shot service timer is 64 bytes on LP64");
#endif
/* running's low bit is RUN_AGAIN. */
_Static_assert(_Alignof(struct tw_service_timer) >= 2,
	       "a service timer's address has its low bit free");
_Static_assert(BATCH <= UINT16_MAX && MAX_EXECUTORS + 2 <= UINT16_MAX,
	       "a timer's runner and place fit 16 bits each");

/* ---- timers ---- */

#ifdef TW_DEBUG
/* Whether the service holds t now: it waits in a wheel or a list, is
 * taken and not yet claimed, or its callback runs -- its own callback
 * included: an init there wipes what keeps its runs apart (a callback
 * that wants a new callback calls reinit; one that is done may free).
 * Not a run the service has let go of: a shutdown's hand_back (the
 * timer is handed back: hand_back may init it), or a callback that tore
 * its timer down (tw_service_timer_shutdown() from it: it may free the
 * timer as its last act, and the same address may be a new timer's,
 * initialised by another thread while that callback returns). */
static bool held_now(const struct tw_service *svc, const struct tw_service_timer *t,
		     uint32_t word)
{
	if (word_waits(word))
		return true;
	if (word_state(word) == ST_TAKEN && taken_unclaimed(svc, t))
		return true;
	return run_going_on(svc, t, word) && t->runner != HAND_BACK(svc) &&
	       !word_has(word, F_SHUT);
}

/* The debug build's table (src/debug.h) holds every timer a service may
 * hold, tagged with that service's id: a step that takes a timer out of
 * IDLE or back into it says so here. A step that leaves a run behind
 * (TAKEN, then claimed) keeps its entry until a later look clears it, so
 * the table over-approximates, and refuse_init_of_held() confirms with
 * held_now() before it calls anything a mistake. */
void tw__svc_debug_step(const struct tw_service_timer *t, uint32_t from,
			uint32_t to)
{
	/* An IDLE word with F_RAN may still have its run under way (a stop
	 * of an add made during the run leaves it so): kept too. */
	bool was = word_state(from) != ST_IDLE || word_has(from, F_RAN),
	     is = word_state(to) != ST_IDLE || word_has(to, F_RAN);

	if (was != is)
		tw__debug_set(TW_DBG_SVC_TIMER, t, is, word_owner(to));
}

static void refuse_init_of_held(const char *call, const struct tw_service_timer *t)
{
	struct tw_service *svc;
	uint64_t owner;
	uint32_t word;

	if (!tw__debug_get(TW_DBG_SVC_TIMER, t, &owner))
		return;
	word = word_load(t);
	svc = tw__svc_of_owner(word);
	if (!svc)
		return;
	if (word_owner(word) != owner || !held_now(svc, t, word)) {
		tw__svc_let_go(svc);
		return;
	}
	tw__debug_fail(call, t,
		       "this timer is still held by service #%u (%s). Initialising "
		       "it now would corrupt that service. To change its callback "
		       "after a cancel, use tw_service_timer_reinit() (or "
		       "tw_service_periodic_reinit()); to reuse or free it, call "
		       "tw_service_timer_shutdown() first, which returns once the "
		       "service has let go of it.",
		       (unsigned)(owner >> OWNER_SHIFT),
		       word_state(word) == ST_PENDING || word_state(word) == ST_DEFERRED
			       ? "pending"
		       : word_state(word) == ST_QUEUED ||
				       (word_state(word) == ST_TAKEN &&
					taken_unclaimed(svc, t))
			       ? "expired, about to run"
		       : word_state(word) == ST_HANDING ? "about to be handed back"
							: "its callback is running");
}
#else
static void refuse_init_of_held(const char *call, const struct tw_service_timer *t)
{
	(void)call;
	(void)t;
}
#endif

void tw_service_timer_init(struct tw_service_timer *t, tw_service_fn *fn)
{
	if (!t)
		return;
	refuse_init_of_held("tw_service_timer_init", t);
	memset(t, 0, sizeof(*t));
	/* Every service timer fires through the service (run.c). */
	t->wheel_timer.fn = tw__svc_fire;
	set_callback(t, fn);
}

/* F_PERIODIC is set only here and in tw_service_periodic_reinit(): it also
 * says that the timer is the first member of a struct tw_service_periodic,
 * so that the run's end may read the period behind it. */
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

/* Taken to run, the timer is pending until its runner claims it: its
 * runner's slot says. The runner and the slot's place are read under the
 * shard's mutex, with the word looked at again there: since the look
 * without it, the timer may have been added again and have expired for
 * the executors, its place then an index in their ring, not a batch slot
 * (a read past the runner), or it may be another service's. */
bool tw_service_timer_pending(const struct tw_service_timer *t)
{
	if (!t)
		return false;
	for (;;) {
		uint32_t word = word_load(t), again;
		struct tw_service *svc;
		struct shard *s;
		bool same;

		if (word_waits(word))
			return true;
		if (word_state(word) != ST_TAKEN)
			return false;
		svc = tw__svc_of_owner(word);
		if (!svc)
			return false;
		TW_TEST_POINT("pending.found", t);
		if (word_shard(word) >= svc->nshards) {
			tw__svc_let_go(svc); /* not a word the service wrote */
			return false;
		}
		s = shard_of(svc, word);
		shard_lock(s);
		again = word_load(t);
		same = word_state(again) == ST_TAKEN &&
		       word_owner(again) == word_owner(word) &&
		       word_shard(again) == word_shard(word);
		if (same) {
			bool pending = taken_unclaimed(svc, t);

			shard_unlock(s);
			tw__svc_let_go(svc);
			return pending;
		}
		shard_unlock(s);
		tw__svc_let_go(svc);
		/* Added again, or another service's: look again. */
	}
}

/* Only the callback, the period, F_PERIODIC and F_SHUT change; the rest
 * of the word (owner, shard, F_RAN) stays what the service knows. Under
 * the shard's mutex when a service owns the timer; a timer never added
 * (or whose service is gone) changes with a compare-and-swap. */
static int reinit(struct tw_service_timer *t, tw_service_fn *fn,
		  struct tw_service_periodic *p, int64_t period)
{
	struct tw_service *svc;
	struct shard *s = NULL;
	uint32_t word, next;
	int rc = TW_OK;

	if (!t)
		return TW_EINVAL;
	/* Never initialised (zeroed memory, or a timer wiped while a service
	 * held it): a callback alone would let an add claim it and the
	 * wheel refuse it, an add that returned 0 and never ran. */
	if (t->wheel_timer.fn != tw__svc_fire)
		return TW_EINVAL_BECAUSE(p ? "tw_service_periodic_reinit"
					   : "tw_service_timer_reinit",
					 "%s", "the timer was never initialised, "
					 "or its memory was overwritten "
					 "(tw_service_timer_init() or "
					 "tw_service_periodic_init() prepares it)");
	word = word_load(t);
	svc = tw__svc_of_owner(word);
	if (svc) {
		s = shard_of(svc, word);
		shard_lock(s);
		word = word_load(t);
		if (word_state(word) == ST_TAKEN && !word_has(word, F_PERIODIC) &&
		    !taken_unclaimed(svc, t)) {
			/* A one-shot's run has its add: it is IDLE. */
			word_set(t, word, word_with(word, ST_IDLE, 0, 0), TR_ran);
			word = word_load(t);
		}
		/* Busy: pending, taken and not yet run, or a periodic run
		 * nobody cancelled (its end re-arms it). A one-shot run that
		 * a cancel found started keeps its callback (taken with it). */
		if (word_waits(word) ||
		    (word_state(word) == ST_TAKEN &&
		     (taken_unclaimed(svc, t) || word_has(word, F_PERIODIC))))
			rc = TW_EBUSY;
	} else if (word_state(word) == ST_TAKEN && !word_has(word, F_PERIODIC)) {
		/* Its service is gone, and with it every run: a timer taken
		 * for a run is one whose run ended (a one-shot's run leaves it
		 * TAKEN until its service looks again), idle as the live
		 * service's branch above makes it. Nobody else writes the
		 * word of a gone service's timer. */
		next = word_with(word, ST_IDLE, 0, 0);
		if (!word_cas(t, &word, next, TR_ran))
			rc = TW_EBUSY;
	} else if (word_state(word) != ST_IDLE) {
		rc = TW_EBUSY; /* a service that is gone left it mid-way */
	}
	if (rc == TW_OK) {
		set_callback(t, fn);
		if (p)
			set_period(p, period);
		for (;;) {
			next = word & ~(uint32_t)F_SHUT;
			if (p)
				next = period > 0 ? next | F_PERIODIC
						  : next & ~(uint32_t)F_PERIODIC;
			if (s) {
				if (next != word)
					word_set(t, word, next, TR_reinit);
				break;
			}
			if (next == word || word_cas(t, &word, next, TR_reinit))
				break;
		}
	}
	if (s)
		shard_unlock(s);
	if (svc)
		tw__svc_let_go(svc);
	return rc;
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
	/* First out of the registry, then no call that found it there is
	 * still using it: a tw_service_timer_pending() or a reinit of one
	 * of its timers, on another thread, takes no service to keep it
	 * alive (its timers outlive it). */
	if (svc->owner_bits)
		id_give_back(svc->owner_bits >> OWNER_SHIFT);
	while (atomic_load_explicit(&svc->lookups, memory_order_acquire))
		sched_yield();
#ifdef TW_DEBUG
	/* What it still held is the caller's memory again. */
	tw__debug_forget(TW_DBG_SVC_TIMER, svc->owner_bits);
#endif
	for (unsigned i = 0; svc->shards && i < svc->nshards; i++) {
		if (svc->shards[i].wheel.buckets)
			tw_wheel_destroy(&svc->shards[i].wheel);
	}
	free(svc->shards);
	free(svc->runners);
	free(svc->executors);
	free(svc->ahead);
	pthread_mutex_destroy(&svc->shutdown_mu);
	pthread_mutex_destroy(&svc->scan_mu);
	pthread_mutex_destroy(&svc->reaper_mu);
	tw__bell_destroy(&svc->reaper_bell);
	pthread_mutex_destroy(&svc->work_mu);
	tw__bell_destroy(&svc->work_bell);
	pthread_mutex_destroy(&svc->idle_mu);
	pthread_cond_destroy(&svc->idle_cv);
	free(svc);
}

static int start_threads(struct tw_service *svc)
{
	static atomic_bool lock_prepared;

	/* Once a process, before the first thread that may contend. */
	if (!atomic_exchange_explicit(&lock_prepared, true, memory_order_relaxed))
		tw__lock_prepare();
	for (unsigned i = 0; i < svc->nexecutors; i++) {
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

/* The default number of shards: the online cores, rounded up to a power
 * of two, at most MAX_SHARDS. */
static unsigned default_shards(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = 1;

	while (n < MAX_SHARDS && (long)n < cores)
		n *= 2;
	return n;
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
	if (!c->shards)
		c->shards = default_shards();
	if (!c->queue_capacity)
		c->queue_capacity = 4096;
	if (!c->clock.now)
		c->clock.now = tw__svc_monotonic_ns;
	if (c->tick < 1 || c->shards > MAX_SHARDS || c->executors > MAX_EXECUTORS ||
	    c->wheel_size < TW_WHEEL_SIZE_MIN ||
	    c->wheel_size > TW_WHEEL_SIZE_MAX ||
	    (c->mode != TW_MODE_EXACT && c->mode != TW_MODE_KAFKA))
		return TW_EINVAL_BECAUSE("tw_service_create",
			"%s", c->tick < 1 ? "cfg.tick must be at least 1 (0: 1 ms)"
			: c->shards > MAX_SHARDS ? "cfg.shards must be at most 256"
			: c->executors > MAX_EXECUTORS ? "cfg.executors must be at most 4096"
			: c->mode != TW_MODE_EXACT && c->mode != TW_MODE_KAFKA
			? "cfg.mode must be TW_MODE_EXACT or TW_MODE_KAFKA"
			: "cfg.wheel_size must be in [2, 65536] (0: the default)");
	return TW_OK;
}

/* Locks, condition variables, bells and atomics: nothing here can fail,
 * and free_service destroys them all. The two timed waits (reaper_bell,
 * idle_cv) run on CLOCK_MONOTONIC, the clock tw__svc_wait_for_ns reads
 * idle_cv's deadlines on. */
static void init_sync(struct tw_service *svc)
{
	pthread_condattr_t attr;

	pthread_mutex_init(&svc->shutdown_mu, NULL);
	pthread_mutex_init(&svc->scan_mu, NULL);
	pthread_mutex_init(&svc->reaper_mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	tw__bell_init(&svc->reaper_bell);
	pthread_cond_init(&svc->idle_cv, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&svc->work_mu, NULL);
	tw__bell_init(&svc->work_bell);
	pthread_mutex_init(&svc->idle_mu, NULL);
	store_u64(&svc->wake_armed, 1); /* the loop has not asked yet */
}

/* The shards (each a wheel starting at the clock's time now, under
 * its own mutex), the runners and the executors' thread ids. TW_ENOMEM
 * if any is missing (the caller frees what was made). */
static int alloc_parts(struct tw_service *svc)
{
	int64_t now = clock_now(svc);

	svc->nexecutors = svc->cfg.executors;
	svc->nrunners = svc->nexecutors + 2;
	/* A power of two (a thread's shard is a mask of its number). */
	for (svc->nshards = 1; svc->nshards < svc->cfg.shards;)
		svc->nshards *= 2;
	store_u64(&svc->latest, (uint64_t)now);
	svc->runners = aligned_alloc(64, svc->nrunners * sizeof(*svc->runners));
	svc->executors = calloc(svc->nexecutors + 1, sizeof(*svc->executors));
	svc->shards = aligned_alloc(64, svc->nshards * sizeof(*svc->shards));
	if (svc->nexecutors) {
		/* core.h: ahead, sized by the capacity. Each place written
		 * now, so that its pages are mapped here, not in the first
		 * expiry that reaches them. */
		uint32_t places = 64;

		while (places < 65536 && places < svc->cfg.queue_capacity)
			places *= 2;
		svc->ahead = malloc(places * sizeof(*svc->ahead));
		svc->ahead_mask = places - 1;
		for (uint32_t i = 0; svc->ahead && i < places; i++)
			atomic_init(&svc->ahead[i], NULL);
	}
	if (!svc->runners || !svc->executors || !svc->shards ||
	    (svc->nexecutors && !svc->ahead)) {
		free(svc->shards);
		svc->shards = NULL;
		return TW_ENOMEM;
	}
	memset(svc->runners, 0, svc->nrunners * sizeof(*svc->runners));
	for (unsigned i = 0; i < svc->nrunners; i++) {
		svc->runners[i].index = i;
		svc->runners[i].cap = BATCH;
	}
	memset(svc->shards, 0, svc->nshards * sizeof(*svc->shards));
	for (unsigned i = 0; i < svc->nshards; i++) {
		struct shard *s = &svc->shards[i];

		list_init(&s->expired);
		list_init(&s->handing);
		/* Below every due time: no add kicks a reaper that has yet
		 * to scan (its first scan finds what was added); the scan
		 * leaves the shard's next expiry here. */
		s->reaper_sees = INT64_MIN;
		s->svc = svc;
		/* In ticks in exact mode (core.h, its_due()). */
		s->unit = svc->cfg.mode == TW_MODE_EXACT ? svc->cfg.tick : 1;
		if (tw_wheel_init(&s->wheel, svc->cfg.tick / s->unit,
				  svc->cfg.wheel_size, wheel_now_of(s, now),
				  svc->cfg.mode) != TW_OK)
			return TW_ENOMEM;
		/* Its due runs are taken whole (exact mode's level 1). */
		tw__wheel_set_taker(&s->wheel, tw__svc_take_run);
		/* With executors the reaper moves the drains' shares after
		 * they have taken what fired (run.c, drain_pass). */
		if (svc->nexecutors)
			tw__wheel_defer_drains(&s->wheel, true);
	}
	return TW_OK;
}

/* Each step undoes only what came before it: a bad configuration or no
 * owner id frees the bare structure, a failed allocation everything made
 * so far (free_service), and a thread that would not start stops those
 * that did (tw_service_destroy). */
int tw_service_create(struct tw_service **out, const struct tw_service_config *cfg)
{
	struct tw_service *svc;
	uint32_t id;
	bool no_memory;
	int rc;

	if (!out)
		return TW_EINVAL_BECAUSE("tw_service_create", "out is NULL");
	*out = NULL;
	svc = calloc(1, sizeof(*svc));
	if (!svc)
		return TW_ENOMEM;
	rc = settle_config(&svc->cfg, cfg);
	if (rc) {
		free(svc);
		return rc;
	}
	init_sync(svc);
	rc = alloc_parts(svc);
	if (rc) {
		free_service(svc);
		return rc;
	}
	/* Last: once registered, the service can be found from its id. */
	id = id_take(svc, &no_memory);
	if (!id) {
		free_service(svc);
		return no_memory ? TW_ENOMEM : TW_EAGAIN; /* 2^18 - 1 live */
	}
	svc->owner_bits = id << OWNER_SHIFT;
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
	for (unsigned i = 0; i < svc->nshards; i++) {
		uint64_t moved = load_u64(&svc->shards[i].moved);

		out->added += load_u64(&svc->shards[i].added) + moved;
		out->stopped += load_u64(&svc->shards[i].stopped) + moved;
	}
	for (unsigned i = 0; i < svc->nrunners; i++) {
		out->ran += load_u64(&svc->runners[i].ran);
		out->caller_ran += load_u64(&svc->runners[i].caller_ran);
	}
	out->handed_back = load_u64(&svc->handed_back);
	out->clock_backwards = load_u64(&svc->backwards);
	out->wakeups = load_u64(&svc->wakeups);
}

size_t tw_service_count(struct tw_service *svc)
{
	size_t n = 0;

	if (!svc)
		return 0;
	for (unsigned i = 0; i < svc->nshards; i++) {
		shard_lock(&svc->shards[i]);
		n += tw_wheel_count(&svc->shards[i].wheel);
		shard_unlock(&svc->shards[i]);
	}
	return n;
}

/* ---- shutdown ---- */

/* The wheel's drain, under the shard's mutex: a pending timer goes to the
 * shard's hand-back list, still pending to a cancel (HANDING). */
static void collect_pending(struct tw_wheel *w, struct tw_timer *wt)
{
	struct shard *s = tw_container_of(w, struct shard, wheel);
	struct tw_service_timer *t = svc_timer_of(wt);
	uint32_t word = word_load(t);

	list_append(&s->handing, &wt->link);
	word_set(t, word, word_with(word, ST_HANDING, 0, 0), TR_collect);
}

static void stop_threads(struct tw_service *svc)
{
	if (svc->reaper_started) {
		pthread_mutex_lock(&svc->reaper_mu);
		svc->stop_reaper = true;
		tw__bell_ring(&svc->reaper_bell, false);
		pthread_mutex_unlock(&svc->reaper_mu);
		pthread_join(svc->reaper, NULL);
		svc->reaper_started = false;
	}
	/* What already expired runs: the executors empty their list before
	 * they exit. */
	pthread_mutex_lock(&svc->work_mu);
	svc->stop_executors = true;
	tw__bell_ring(&svc->work_bell, true);
	pthread_mutex_unlock(&svc->work_mu);
	for (unsigned i = 0; i < svc->nexecutors_started; i++)
		pthread_join(svc->executors[i], NULL);
	svc->nexecutors_started = 0;
}

/* Every shard's pending timers onto its hand-back list; a timer whose
 * links were wiped while the service held it stops the drain there
 * (svc->broken) instead of looping. Expired timers nobody ran (no
 * executor took them) are handed back too. */
static void collect_all(struct tw_service *svc)
{
	for (unsigned i = 0; i < svc->nshards; i++) {
		struct shard *s = &svc->shards[i];
		struct tw_timer *broken;

		shard_lock(s);
		if (tw__wheel_drain_checked(&s->wheel, collect_pending, &broken) ==
			    TW_ECORRUPT &&
		    !svc->broken)
			svc->broken = svc_timer_of(broken);
		while (!list_empty(&s->expired)) {
			struct tw_timer *wt = list_timer(s->expired.next);

			list_unlink(&wt->link);
			bump(&s->nexpired, -1);
			collect_pending(&s->wheel, wt);
		}
		shard_unlock(s);
	}
}

/* Hand back every timer on the shards' lists, one at a time, each marked
 * in the hand-back runner's slot while hand_back runs (a cancel_sync of it
 * waits; from hand_back itself, it does not). */
static int64_t hand_back_all(struct tw_service *svc,
			     tw_service_hand_back_fn *hand_back, void *arg)
{
	struct tw__svc_thread *self = &THIS_THREAD;
	struct runner *r = &svc->runners[HAND_BACK(svc)];
	int64_t n = 0;

	for (unsigned i = 0; i < svc->nshards; i++) {
		struct shard *s = &svc->shards[i];

		for (;;) {
			struct tw_service_timer *t;
			uint32_t word;

			shard_lock(s);
			if (list_empty(&s->handing)) {
				shard_unlock(s);
				break;
			}
			t = svc_timer_of(list_timer(s->handing.next));
			list_unlink(&t->wheel_timer.link);
			word = word_load(t);
			t->runner = (uint16_t)HAND_BACK(svc);
			mark_store(r, t);
			word_set(t, word, word_with(word, ST_IDLE, F_RAN, 0),
				 TR_hand_back);
			shard_unlock(s);
			n++;
			bump(&svc->handed_back, 1);
			TW_TEST_POINT("shutdown.hand_back", t);
			self->current = t;
			self->current_svc = svc;
			self->runner = HAND_BACK(svc);
			if (hand_back)
				hand_back(t, arg);
			self->current = NULL;
			self->current_svc = NULL;
			mark_store(r, NULL);
			tw__svc_wake_sync_waiters(svc);
		}
	}
	return n;
}

/* Every add ended exactly once: it ran, a cancel or a reschedule stopped
 * it, or shutdown handed it back (service.h). After the threads are
 * joined the counts are final, and a difference is an add the service
 * lost track of: a timer initialised while it held it. */
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
		tw__debug_fail_found_late(call, svc->broken,
			       "this timer was overwritten while service #%u held "
			       "it (tw_service_timer_init() or memset on a pending "
			       "timer, then maybe added again): its links could "
			       "not be followed, and shutdown stopped there rather "
			       "than loop for ever. Use tw_service_timer_shutdown() "
			       "before initialising or freeing a timer.",
			       (unsigned)(svc->owner_bits >> OWNER_SHIFT));
	tw_service_stats((struct tw_service *)svc, &st);
	tw__debug_fail_found_late(call, svc,
		       "the accounting of this service does not balance: %llu "
		       "adds, but %llu ran, %llu were stopped and %llu handed "
		       "back. A timer was initialised (or its memory reused) "
		       "while the service held it; use tw_service_timer_shutdown() "
		       "first.",
		       (unsigned long long)st.added, (unsigned long long)st.ran,
		       (unsigned long long)st.stopped,
		       (unsigned long long)st.handed_back);
}
#endif

bool tw__service_in_callback(void)
{
	return THIS_THREAD.current || THIS_THREAD.scanning;
}

int64_t tw_service_shutdown(struct tw_service *svc,
			    tw_service_hand_back_fn *hand_back, void *arg)
{
	int64_t n;

	if (!svc)
		return TW_EINVAL_BECAUSE("tw_service_shutdown", "%s",
					 "the service is NULL");
	if (tw__service_in_callback())
		return TW_EREENTER;
	pthread_mutex_lock(&svc->shutdown_mu);
	if (svc->shut_down) {
		pthread_mutex_unlock(&svc->shutdown_mu);
		return 0;
	}
	/* Serialise with a poll, then refuse adds shard by shard. */
	pthread_mutex_lock(&svc->scan_mu);
	svc->closing = true;
	pthread_mutex_unlock(&svc->scan_mu);
	for (unsigned i = 0; i < svc->nshards; i++) {
		shard_lock(&svc->shards[i]);
		svc->shards[i].closed = true;
		shard_unlock(&svc->shards[i]);
	}
	store_u64(&svc->all_closed, 1);
	stop_threads(svc);
	TW_TEST_POINT("shutdown.drain", svc);
	collect_all(svc);
	n = hand_back_all(svc, hand_back, arg);
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
		return TW_EINVAL_BECAUSE("tw_service_destroy", "%s",
					 "the service is NULL");
	if (tw__service_in_callback())
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
