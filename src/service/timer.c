/* SPDX-License-Identifier: MIT */
/*
 * timer.c — the calls any thread makes on a timer: add (and its variants),
 * reschedule, cancel, the purgatory's stop_pending. Each locks the timer's
 * shard, reads the state word under that mutex and acts on what it says;
 * the first add of a timer first claims it for this service and for the
 * calling thread's shard (core.h).
 *
 * What a stop finds, and does, by state (tw__svc_stop_locked):
 *   PENDING   leaves the wheel                       TW_SVC_STOPPED
 *   QUEUED    leaves the expired list                TW_SVC_STOPPED
 *   TAKEN     takes its batch slot back, if the runner has not claimed it
 *             (one compare-and-swap against the runner's exchange)
 *                                                    TW_SVC_STOPPED
 *             claimed: its add ended in that run     RUNNING or IDLE
 *   DEFERRED  the add made during its run ends       TW_SVC_STOPPED
 *   HANDING   leaves shutdown's list                 TW_SVC_STOPPED
 *   IDLE      nothing to stop                        RUNNING or IDLE
 * RUNNING when the runner its last expiry went to still runs it.
 *
 * An add files the timer in its shard's wheel (PENDING) and kicks the
 * reaper when its window ends before what the reaper last saw for the
 * shard. With executors, an add of a timer whose callback is running
 * waits for that run's end instead (DEFERRED), so that no other executor
 * can run it beside the run (one run at a time, core.h).
 */
#include "../posix.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"

static _Thread_local unsigned tls_shard_seq TW_SVC_TLS; /* 0: not yet */
static atomic_uint shard_threads_seen;

/* The calling thread's shard: chosen at its first add, round robin (the
 * number of shards is a power of two: a mask, not a division). */
static unsigned my_shard(const struct tw_service *svc)
{
	if (!tls_shard_seq)
		tls_shard_seq = atomic_fetch_add(&shard_threads_seen, 1) + 1;
	return (tls_shard_seq - 1) & (svc->nshards - 1);
}

/* ---- stop ---- */

int tw__svc_stop_locked(struct tw_service *svc, struct shard *s,
			struct tw_service_timer *t, uint32_t word)
{
	switch (word_state(word)) {
	case ST_PENDING:
		tw_wheel_cancel(&s->wheel, &t->wheel_timer);
		break;
	case ST_QUEUED:
		list_unlink(&t->wheel_timer.link);
		bump(&s->nexpired, -1);
		break;
	case ST_TAKEN:
		TW_TEST_POINT("stop.taken", t);
		if (slot_take_back(&svc->runners[t->runner], t->place, t)) {
			/* Taken back before its claim: no run of it goes on
			 * (the runner's mark, stored before its claim, is
			 * none; a later cancel must not read it as a run). */
			word_set(t, word, word_with(word, ST_IDLE, 0, F_RAN), TR_stop);
			bump(&s->stopped, 1);
			return TW_SVC_STOPPED;
		}
		/* The runner claimed it: that run ended this add. */
		word_set(t, word, word_with(word, ST_IDLE, 0, 0), TR_ran);
		return tw__svc_idle_result(svc, t, word);
	case ST_DEFERRED: {
		/* The add waited for a run's end: that end has nothing to do
		 * now, and must not look at the timer (its callback may free
		 * it). Untag the run's mark; a run that has seen the tag
		 * already waits for this mutex and finds the timer IDLE. */
		struct tw_service_timer *tagged =
			(struct tw_service_timer *)((uintptr_t)t | RUN_AGAIN);

		mark_cas(&svc->runners[t->runner], &tagged, t);
		break;
	}
	case ST_HANDING:
		list_unlink(&t->wheel_timer.link);
		break;
	default:
		return tw__svc_idle_result(svc, t, word);
	}
	word_set(t, word, word_with(word, ST_IDLE, 0, 0), TR_stop);
	bump(&s->stopped, 1);
	return TW_SVC_STOPPED;
}

/* ---- filing ---- */

/* Under s->mu, for a timer just filed whose window ends (or that is due)
 * at end: lower reaper_sees, and ask for a kick, if it must run before
 * the reaper's next look at the shard. The end is rounded to the tick it
 * runs at only when that may matter: rounding never lowers it. */
svc_hot_inline void
lower_reaper_sees(struct tw_service *svc, struct shard *s,
		  int64_t end, bool *kick)
{
	if (end < s->reaper_sees &&
	    (end = tw__svc_runs_by(svc, end)) < s->reaper_sees) {
		s->reaper_sees = end;
		s->reaper_idle = false;
		*kick = true;
		TW_TEST_POINT("add.kicks", svc);
	} else if (__builtin_expect(end == s->reaper_sees, 0) && s->reaper_idle) {
		/* Due at INT64_MAX, where an idle reaper's reaper_sees is:
		 * the one compare above decides both. */
		s->reaper_idle = false;
		*kick = true;
		TW_TEST_POINT("add.kicks", svc);
	}
}

/* Under s->mu, after t was filed: the wheel's next expiry, if the filing
 * made t's bucket ask for an earlier wake of its own (for_service.h),
 * lowers reaper_sees as an earlier timer would. Out of line: once per
 * DRAIN_CHUNK timers a bucket gathers. */
static __attribute__((noinline, cold)) void
lower_reaper_sees_to_next(struct tw_service *svc, struct shard *s, bool *kick)
{
	int64_t when;

	if (wheel_next_expiry(s, &when))
		lower_reaper_sees(svc, s, when, kick);
}

svc_hot_inline void
lower_reaper_sees_after_filing(struct tw_service *svc, struct shard *s,
			       const struct tw_service_timer *t, int64_t end,
			       bool *kick)
{
	lower_reaper_sees(svc, s, end, kick);
	if (__builtin_expect(tw__wheel_filing_asks_wake(&t->wheel_timer), 0))
		lower_reaper_sees_to_next(svc, s, kick);
}

/* The wheel refuses a filing only for what the service never asks (a
 * window that ends before it begins, a timer already in a bucket): a
 * refusal is the service's own bug, and would leave a timer its word
 * calls PENDING in no bucket, never to run. The debug and test-point
 * builds stop there, saying so; the shipped build does not test. */
#if defined(TW_DEBUG) || defined(TW_TEST_HOOKS)
static __attribute__((noinline, cold)) void
refused(int rc, const struct tw_service_timer *t, int64_t first, int64_t last)
{
	fprintf(stderr, "timingwheel: the wheel refused (%d) to file service "
		"timer %p at [%lld, %lld]: a bug in the service, not the "
		"caller's\n", rc, (const void *)t, (long long)first,
		(long long)last);
	abort();
}
#define FILED(rc, t, first, last)                                       \
	do {                                                            \
		int filed_rc_ = (rc);                                   \
		if (filed_rc_ < 0)                                      \
			refused(filed_rc_, t, first, last);             \
	} while (0)
#else
#define FILED(rc, t, first, last) ((void)(rc))
#endif

/* Link t (word: IDLE) in its shard's wheel at due with a window of slack
 * ticks: PENDING. F_RAN stays while the run it names goes on (a
 * cancel_sync still has to wait for it). Inlined: an add's common case
 * is this and the mutex, and its callers' constants (tr, run_going,
 * often slack) fold away. */
svc_hot_inline void
link_pending(struct tw_service *svc, struct shard *s,
	     struct tw_service_timer *t, uint32_t word, int64_t due,
	     uint32_t slack, bool run_going, enum tw__svc_transition tr,
	     bool *kick)
{
	int64_t end = due;

	t->slack = slack;
	set_grid(t, word, due);
	/* Before the wheel's add, which then keeps nothing of the word
	 * across its call: under the mutex the order is not seen. */
	word_set(t, word, word_with(word, ST_PENDING, 0, run_going ? 0 : F_RAN), tr);
	if (slack) {
		int64_t first, last;

		end = tw__svc_window_end(svc, due, slack);
		its_window(s, due, end, &first, &last);
		FILED(tw_wheel_add_range(&s->wheel, &t->wheel_timer, first, last),
		      t, first, last);
	} else {
		int64_t at = its_due(s, due);

		FILED(tw_wheel_add(&s->wheel, &t->wheel_timer, at), t, at, at);
	}
	if (tr != TR_place) /* a deferred add was counted when deferred */
		bump(&s->added, 1);
	lower_reaper_sees_after_filing(svc, s, t, end, kick);
}

void tw__svc_file(struct tw_service *svc, struct shard *s,
		  struct tw_service_timer *t, uint32_t word, int64_t due,
		  uint32_t slack, enum tw__svc_transition tr, bool *kick)
{
	bool going = run_going_on(svc, t, word);

	if (going && svc->nexecutors) {
		struct tw_service_timer *expect = t;
		struct tw_service_timer *tagged =
			(struct tw_service_timer *)((uintptr_t)t | RUN_AGAIN);

		TW_TEST_POINT("add.run_going_on", t);
		if (mark_cas(&svc->runners[t->runner], &expect, tagged) ||
		    expect == tagged) {
			t->wheel_timer.due = due;
			t->slack = slack;
			word_set(t, word, word_with(word, ST_DEFERRED, 0, 0), TR_defer);
			bump(&s->added, 1);
			return;
		}
		going = false; /* the run ended meanwhile */
	}
	link_pending(svc, s, t, word, due, slack, going, tr, kick);
}

/* The run's end files a periodic timer again, or a deferred one (run.c). */
TW_HIDDEN void tw__svc_link(struct tw_service *svc, struct shard *s,
			    struct tw_service_timer *t, uint32_t word,
			    int64_t due, uint32_t slack,
			    enum tw__svc_transition tr, bool *kick);
void tw__svc_link(struct tw_service *svc, struct shard *s,
		  struct tw_service_timer *t, uint32_t word, int64_t due,
		  uint32_t slack, enum tw__svc_transition tr, bool *kick)
{
	link_pending(svc, s, t, word, due, slack, false, tr, kick);
}

/* ---- add and reschedule ---- */

/* A pending timer moved in its wheel: its earlier add ends (stopped), the
 * new one begins. */
svc_hot_inline void
reschedule_pending(struct tw_service *svc, struct shard *s,
		   struct tw_service_timer *t, uint32_t word, int64_t due,
		   uint32_t slack, bool *kick)
{
	int64_t end = due;

	t->slack = slack;
	set_grid(t, word, due);
	if (slack) {
		int64_t first, last;

		end = tw__svc_window_end(svc, due, slack);
		its_window(s, due, end, &first, &last);
		FILED(tw_wheel_reschedule_range(&s->wheel, &t->wheel_timer,
						first, last), t, first, last);
	} else {
		int64_t at = its_due(s, due);

		FILED(tw_wheel_reschedule(&s->wheel, &t->wheel_timer, at), t, at, at);
	}
	bump(&s->moved, 1);
	lower_reaper_sees_after_filing(svc, s, t, end, kick);
}

/* An add of a timer torn down by tw_service_timer_shutdown(): refused.
 * From anywhere but its own callback (whose re-add the teardown refuses
 * by design) the debug build names the mistake: the timer may well have
 * been freed since. */
static __attribute__((noinline, cold)) int
refuse_shut(const struct tw_service *svc, const struct tw_service_timer *t,
	    const char *call)
{
#ifdef TW_DEBUG
	if (!(THIS_THREAD.current == t && THIS_THREAD.current_svc == svc))
		tw__debug_fail(call, t,
			       "this timer was torn down by "
			       "tw_service_timer_shutdown(), after which it may "
			       "have been freed; adding it again is refused. "
			       "Call tw_service_timer_init() (or "
			       "tw_service_timer_reinit()) before reusing it.");
#else
	(void)svc;
	(void)t;
	(void)call;
#endif
	return TW_ESHUTDOWN;
}

/* Claim a timer no service owns for svc and the calling thread's shard,
 * or read who owns it: the word with an owner, or an error. *unclaimed:
 * the word this call's own compare-and-swap replaced, left alone when
 * another call's claim came first (even svc's own: that call, not this
 * one, may give it back). A service shut down claims nothing: its
 * refusal (TW_ESHUTDOWN, as its closed shard would answer) comes before
 * the compare-and-swap, so that no other service's call meets a claim
 * about to be given back; only an add that races the shutdown itself
 * claims, and gives back under the shard's mutex (add_locked_unlock).
 * Inlined: a first add is this one compare-and-swap more than any other
 * add. */
svc_hot_inline int
claim(struct tw_service *svc, struct tw_service_timer *t, uint32_t *word,
      uint32_t *unclaimed, const char *call)
{
	while (!(*word & (OWNER_MASK | F_SHUT))) {
		uint32_t mine = svc->owner_bits | my_shard(svc) << SHARD_SHIFT;

		TW_TEST_POINT("add.claiming", t);
		if (load_u64(&svc->all_closed))
			return TW_ESHUTDOWN;
		if (word_cas(t, word, *word | mine, TR_claim)) {
			*unclaimed = *word;
			*word |= mine;
			TW_TEST_POINT("add.claimed", t);
			return TW_OK;
		}
	}
	if (word_has(*word, F_SHUT))
		return refuse_shut(svc, t, call);
	return owner_check(svc, *word);
}

/* The claim out of line, for a reschedule: one of a timer never added is
 * rare, and the claim inlined would cost every reschedule registers. */
static __attribute__((noinline)) int64_t
claim_out_of_line(struct tw_service *svc, struct tw_service_timer *t,
		  uint32_t word, uint32_t *unclaimed, const char *call)
{
	int rc = claim(svc, t, &word, unclaimed, call);

	return rc ? rc : (int64_t)word; /* the word, or an error (< 0) */
}

/* Under s->mu: an add or a reschedule of t, whatever its state. (What
 * an add or a reschedule from the timer's own callback asks for also
 * stands over the run's re-arm: the word is no longer TAKEN, run.c.) */
static int add_locked(struct tw_service *svc, struct shard *s,
		      struct tw_service_timer *t, uint32_t word, int64_t due,
		      uint32_t slack, bool reschedule, const char *call,
		      bool *kick)
{
	int rc = TW_OK;

	if (s->closed)
		return TW_ESHUTDOWN;
	if (word_has(word, F_SHUT))
		return refuse_shut(svc, t, call);
	if (!reschedule &&
	    (word_waits(word) ||
	     (word_state(word) == ST_TAKEN && taken_unclaimed(svc, t))))
		return TW_EBUSY;
	if (reschedule && word_state(word) == ST_PENDING) {
		/* Moved where it is: a window that still holds its bucket's
		 * firing leaves it there (tw_wheel_reschedule_range). */
		reschedule_pending(svc, s, t, word, due, slack, kick);
		return TW_SVC_STOPPED;
	}
	if (word_state(word) != ST_IDLE) {
		int stopped = tw__svc_stop_locked(svc, s, t, word);

		if (reschedule)
			rc = stopped;
		word = word_load(t);
	} else if (reschedule) {
		rc = tw__svc_idle_result(svc, t, word);
	}
	tw__svc_file(svc, s, t, word, due, slack, TR_add, kick);
	return rc;
}

/* An add or a reschedule of a timer without a callback. */
static __attribute__((noinline, cold)) int refuse_no_callback(const char *call)
{
	(void)call; /* TW_EINVAL_BECAUSE drops its arguments in release */
	return TW_EINVAL_BECAUSE(call, "%s", "the timer has no callback "
				 "(tw_service_timer_init(t, fn) with a "
				 "non-NULL fn)");
}

/* Wakes whoever must see what was just filed, after the shard's mutex
 * is let go: the reaper when the timer runs before its next look (kick),
 * or, in a manual service, a loop that asked for its timeout before. */
svc_hot_inline void
after_filing(struct tw_service *svc, bool kick)
{
	if (kick)
		tw__svc_kick(svc);
	else if (svc->cfg.manual && load_u64(&svc->wake_armed))
		tw__svc_wake_loop(svc);
}

#define NOT_CLAIMED OWNER_MASK

/* add_locked's whole path, from under s->mu to the wake-up: out of line,
 * so that the common cases keep their few registers to themselves.
 * unclaimed: the word before this call claimed the timer (NOT_CLAIMED:
 * it did not). A call that fails changes nothing (error.h): a timer this call
 * claimed for a service that turns out shut down, or that a
 * tw_service_timer_shutdown() tore down between the claim and the mutex,
 * is given back unclaimed, still idle, under the mutex of the shard it
 * was claimed for, so that another service can take it. The teardown's
 * F_SHUT stays: the timer ends as "teardown, then add" leaves it. A shut
 * shard is closed for good, so every other add of it there fails the same
 * way. */
static __attribute__((noinline)) int
add_locked_unlock(struct tw_service *svc, struct shard *s,
		  struct tw_service_timer *t, uint32_t word, int64_t due,
		  uint32_t slack, bool reschedule, const char *call,
		  uint32_t unclaimed)
{
	bool kick = false;
	int rc = add_locked(svc, s, t, word, due, slack, reschedule, call, &kick);

	if (rc == TW_ESHUTDOWN && unclaimed != NOT_CLAIMED &&
	    !((word ^ unclaimed) & ~(OWNER_MASK | SHARD_MASK | F_SHUT)))
		word_cas(t, &word, unclaimed | (word & F_SHUT), TR_claim);
	shard_unlock(s);
	if (rc >= 0)
		after_filing(svc, kick);
	return rc;
}

/* The claim a first add would make, made ahead of it (as Linux's
 * timer_setup() binds a timer to its base): the same compare-and-swap,
 * so the protocol has no new step, at a time the caller picks -- the
 * connection's setup, say -- rather than inside its first add, which is
 * then a plain store under the shard's mutex like every later one. */
int tw_service_timer_bind(struct tw_service *svc, struct tw_service_timer *t)
{
	/* What the claim replaced: an add gives it back if it then finds
	 * the timer torn down; a bind keeps its claim, as an idle timer
	 * keeps its service. */
	uint32_t word, unclaimed = NOT_CLAIMED;

	if (!svc || !t)
		return TW_EINVAL_BECAUSE("tw_service_timer_bind", "%s",
					 !svc ? "the service is NULL"
					      : "the timer is NULL");
	/* A shut-down service binds nothing, its own timers included: an
	 * add of them would be refused too. */
	if (load_u64(&svc->all_closed))
		return TW_ESHUTDOWN;
	word = word_load(t);
	if (word_owner(word) == svc->owner_bits &&
	    word_shard(word) >= svc->nshards)
		return TW_EOWNER; /* a destroyed service's timer, ids wrapped */
	return claim(svc, t, &word, &unclaimed, "tw_service_timer_bind");
}

/* Inlined into each caller, so that tw_service_add and
 * tw_service_reschedule are each one function with their constants
 * folded: the common cases (an idle timer added, a pending one moved)
 * take the shard's mutex, file the timer and let go, and nothing else. */
svc_hot_inline int
add_or_reschedule(struct tw_service *svc, struct tw_service_timer *t,
		  int64_t due, uint32_t slack, bool reschedule, const char *call)
{
	struct shard *s;
	/* The word before this call's claim; NOT_CLAIMED (an owner of all
	 * ones, which no unowned word has) when it made none. */
	uint32_t word, unclaimed = NOT_CLAIMED;
	bool kick = false;
	int rc;

	(void)call; /* TW_EINVAL_BECAUSE drops its arguments in release */
	if (!svc || !t)
		return TW_EINVAL_BECAUSE(call, "%s", !svc ? "the service is NULL"
							 : "the timer is NULL");
	/* An add looks at the callback first. A reschedule, whose common
	 * timer is pending and has one (reinit refuses a pending timer),
	 * looks before a claim, or under the mutex where reinit changes it,
	 * when the timer is not pending. */
	if (!reschedule && !callback_of(t))
		return refuse_no_callback(call);
	word = word_load(t);
	if (word_owner(word) != svc->owner_bits) {
		if (reschedule && !callback_of(t))
			return refuse_no_callback(call);
		if (reschedule) {
			int64_t claimed = claim_out_of_line(svc, t, word,
							    &unclaimed, call);

			if (claimed < 0)
				return (int)claimed;
			word = (uint32_t)claimed;
		} else {
			rc = claim(svc, t, &word, &unclaimed, call);
			if (rc)
				return rc;
		}
	} else if (word_shard(word) >= svc->nshards) {
		/* A destroyed service's timer, ids wrapped. */
		return callback_of(t) ? TW_EOWNER : refuse_no_callback(call);
	}
	s = shard_of(svc, word);
	shard_lock(s);
	word = word_load(t);
	if (reschedule && (word & (ST_MASK | F_SHUT)) == ST_PENDING &&
	    !s->closed) {
		/* Moved where it is: a window that still holds its bucket's
		 * firing leaves it there (tw_wheel_reschedule_range). */
		reschedule_pending(svc, s, t, word, due, slack, &kick);
		rc = TW_SVC_STOPPED;
	} else if (reschedule && !callback_of(t)) {
		shard_unlock(s);
		return refuse_no_callback(call);
	} else if ((word & (ST_MASK | F_RAN | F_SHUT)) == ST_IDLE && !s->closed) {
		/* The common case of an add: idle, and no run of it to look
		 * at. */
		rc = reschedule ? TW_SVC_IDLE : TW_OK;
		link_pending(svc, s, t, word, due, slack, false, TR_add, &kick);
	} else {
		return add_locked_unlock(svc, s, t, word, due, slack,
					 reschedule, call, unclaimed);
	}
	shard_unlock(s);
	after_filing(svc, kick);
	return rc;
}

int tw_service_add(struct tw_service *svc, struct tw_service_timer *t, int64_t due)
{
	return add_or_reschedule(svc, t, due, 0, false, "tw_service_add");
}

/* now + delay (a negative delay: now), or TW_EOVERFLOW past INT64_MAX. */
static int due_in(struct tw_service *svc, int64_t delay, int64_t *due)
{
	int64_t now = clock_now(svc);

	/* The wheel's rule (tw_wheel_add_in): a sum past either end of the
	 * int64 range is refused, not clamped. A delay <= 0 is due now. */
	if ((delay > 0 && now > INT64_MAX - delay) ||
	    (delay < 0 && now < INT64_MIN - delay))
		return TW_EOVERFLOW;
	*due = delay > 0 ? now + delay : now;
	return TW_OK;
}

/* add_in and reschedule_in: now + delay, then as add or reschedule. */
static int add_or_reschedule_in(struct tw_service *svc,
				struct tw_service_timer *t, int64_t delay,
				bool reschedule, const char *call)
{
	int64_t due;
	int rc;

	(void)call; /* TW_EINVAL_BECAUSE drops its arguments in release */
	/* A NULL argument before the sum: bad-input.md's TW_EINVAL whatever
	 * the delay. */
	if (!svc || !t)
		return TW_EINVAL_BECAUSE(call, "%s",
					 !svc ? "the service is NULL"
					      : "the timer is NULL");
	rc = due_in(svc, delay, &due);
	return rc ? rc : add_or_reschedule(svc, t, due, 0, reschedule, call);
}

int tw_service_add_in(struct tw_service *svc, struct tw_service_timer *t,
		      int64_t delay)
{
	return add_or_reschedule_in(svc, t, delay, false, "tw_service_add_in");
}

int tw_service_reschedule(struct tw_service *svc, struct tw_service_timer *t,
			  int64_t due)
{
	return add_or_reschedule(svc, t, due, 0, true, "tw_service_reschedule");
}

int tw_service_reschedule_in(struct tw_service *svc, struct tw_service_timer *t,
			     int64_t delay)
{
	return add_or_reschedule_in(svc, t, delay, true,
				    "tw_service_reschedule_in");
}

/* A window's width in whole ticks, rounded down (it may only narrow) and
 * capped at what the timer's 32 bits hold; or TW_EINVAL. *slack is written
 * on every path. */
static int window_slack(const struct tw_service *svc, const char *call,
			int64_t earliest, int64_t latest, uint32_t *slack)
{
	uint64_t ticks;

	*slack = 0;
	(void)call; /* TW_EINVAL_BECAUSE drops its arguments in release */
	if (!svc)
		return TW_EINVAL_BECAUSE(call, "%s", "the service is NULL");
	if (latest < earliest)
		return TW_EINVAL_BECAUSE(call, "the window ends (%lld) before it "
					 "starts (%lld)", (long long)latest,
					 (long long)earliest);
	if (latest > earliest && svc->cfg.mode == TW_MODE_KAFKA)
		return TW_EINVAL_BECAUSE(call, "%s", "a kafka-mode service files "
					 "timers as Kafka does, which has no "
					 "windows: use TW_MODE_EXACT");
	/* The difference of two int64_t with latest >= earliest fits a
	 * uint64_t; in int64_t it could overflow. */
	ticks = ((uint64_t)latest - (uint64_t)earliest) / (uint64_t)svc->cfg.tick;
	*slack = ticks > UINT32_MAX ? UINT32_MAX : (uint32_t)ticks;
	return TW_OK;
}

int tw_service_add_range(struct tw_service *svc, struct tw_service_timer *t,
			 int64_t earliest, int64_t latest)
{
	uint32_t slack;
	int rc = window_slack(svc, "tw_service_add_range", earliest, latest, &slack);

	return rc ? rc : add_or_reschedule(svc, t, earliest, slack, false,
					  "tw_service_add_range");
}

int tw__service_add_in_range(struct tw_service *svc, struct tw_service_timer *t,
			     int64_t delay, int64_t tolerance)
{
	/* The purgatory's op has a tolerance >= 0 (tw_op_set_tolerance
	 * checked it). */
	int64_t earliest;
	int rc = due_in(svc, delay, &earliest);

	if (rc)
		return rc;
	return tw_service_add_range(svc, t, earliest,
				    earliest > INT64_MAX - tolerance ? INT64_MAX
								     : earliest + tolerance);
}

int tw_service_reschedule_range(struct tw_service *svc,
				struct tw_service_timer *t, int64_t earliest,
				int64_t latest)
{
	uint32_t slack;
	int rc = window_slack(svc, "tw_service_reschedule_range", earliest,
			      latest, &slack);

	return rc ? rc : add_or_reschedule(svc, t, earliest, slack, true,
					  "tw_service_reschedule_range");
}

/* ---- cancel ---- */

/* Stop t under its shard's mutex; with shut, also refuse every later add
 * (F_SHUT). A timer no service owns has nothing to stop: with shut it is
 * marked all the same. call names the caller's function for a refusal.
 * Inlined into tw_service_cancel, where shut is false and a pending
 * timer, the common case, leaves the wheel without a call. */
svc_hot_inline int
cancel(struct tw_service *svc, struct tw_service_timer *t, bool shut,
       const char *call)
{
	struct shard *s;
	uint32_t word;
	int rc;

	(void)call; /* TW_EINVAL_BECAUSE drops its arguments in release */
	if (!svc || !t)
		return TW_EINVAL_BECAUSE(call, "%s", !svc ? "the service is NULL"
							 : "the timer is NULL");
	word = word_load(t);
	while (!word_owner(word)) {
		if (!shut || word_has(word, F_SHUT) ||
		    word_cas(t, &word, word | F_SHUT, TR_shut))
			return TW_SVC_IDLE;
	}
	rc = owner_check(svc, word);
	if (rc)
		return rc;
	if (word_shard(word) >= svc->nshards)
		return TW_EOWNER; /* a destroyed service's timer, ids wrapped */
	TW_TEST_POINT("cancel.locking", t);
	s = shard_of(svc, word);
	shard_lock(s);
	word = word_load(t);
	if (word_state(word) == ST_PENDING) {
		uint32_t idle = word_with(word, ST_IDLE, 0, 0);

		tw_wheel_cancel(&s->wheel, &t->wheel_timer);
		word_set(t, word, idle, TR_stop);
		word = idle;
		bump(&s->stopped, 1);
		rc = TW_SVC_STOPPED;
	} else {
		rc = tw__svc_stop_locked(svc, s, t, word);
		word = word_load(t);
	}
	if (shut && !word_has(word, F_SHUT))
		word_set(t, word, word | F_SHUT, TR_shut);
	shard_unlock(s);
	if (THIS_THREAD.current == t && THIS_THREAD.current_svc == svc)
		THIS_THREAD.rearm = false; /* its run is its last: it may free itself */
	return rc;
}

int tw__svc_cancel(struct tw_service *svc, struct tw_service_timer *t,
		   bool shut, const char *call)
{
	return cancel(svc, t, shut, call);
}

int tw_service_cancel(struct tw_service *svc, struct tw_service_timer *t)
{
	return cancel(svc, t, false, "tw_service_cancel");
}

/*
 * The purgatory's completion (for_purgatory.h): stop a timeout that has
 * not started to run, never wait. A running or finished run, or a timer
 * shutdown is handing back, is left alone: its callback or hand_back
 * finds the op done.
 */
int tw__service_stop_pending(struct tw_service *svc, struct tw_service_timer *t)
{
	uint32_t word = word_load(t);
	struct shard *s;
	unsigned st;
	int rc = TW_SVC_IDLE;

	if (!word_owner(word) || owner_check(svc, word) ||
	    word_shard(word) >= svc->nshards)
		return TW_SVC_IDLE;
	s = shard_of(svc, word);
	shard_lock(s);
	word = word_load(t);
	st = word_state(word);
	if (st == ST_PENDING || st == ST_QUEUED || st == ST_DEFERRED ||
	    (st == ST_TAKEN && taken_unclaimed(svc, t)))
		rc = tw__svc_stop_locked(svc, s, t, word);
	shard_unlock(s);
	TW_TEST_POINT("stop_pending.done", t);
	return rc == TW_SVC_STOPPED ? TW_SVC_STOPPED : TW_SVC_IDLE;
}
