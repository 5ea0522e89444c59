/* SPDX-License-Identifier: MIT */
/*
 * owner.c — the wheel owner's side: whoever holds wheel_mu (the scanning
 * thread, a cancel_sync, stop_pending, count, shutdown). It owns the
 * wheel: it drains the inboxes and brings each timer's place in the wheel
 * in line with its state word (apply), advances the wheel and takes what
 * expired into the dispatch batch (on_expire), answers the wheel's
 * question at a cascade (drop_tombstone), and unlinks tombstones. The one
 * invariant it keeps (model/service.pml's monitor checks it in every
 * state): a timer the wheel links is PENDING or ADDING, or carries F_INBOX
 * or F_TOMB -- so it always unlinks first and takes a flag down after.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "core.h"

/* The timer is not a tombstone any more (unlinked, or about to be placed
 * again by an inbox entry). Counted only if the flag was set: a cancel
 * may set it again at any time, and counts that one. */
void tw__svc_clear_tomb(struct tw_service *svc, struct tw_service_timer *t)
{
	if (word_has(tr_clear_tomb(t), F_TOMB))
		svc->tombs_cleared++;
}

/* A timer a cancel stopped (cancel_sync, stop_pending): out of the wheel,
 * then its tombstone flag down -- unless an add has taken it since, whose
 * inbox entry places it. */
void tw__svc_unlink_stopped(struct tw_service *svc, struct tw_service_timer *t)
{
	unsigned s = word_state(word_load(t));

	if (s == ST_PENDING || s == ST_ADDING)
		return;
	if (tw_timer_pending(&t->wheel_timer))
		tw_wheel_cancel(&svc->wheel, &t->wheel_timer);
	tw__svc_clear_tomb(svc, t);
}

/*
 * Make the timer's place in the wheel match its state, and take down the
 * flags that said it might not (F_INBOX, F_TOMB) -- in the order that
 * keeps cancel_sync safe. A timer that is not PENDING or ADDING is
 * unlinked first and its flags cleared after, by a CAS from the state that
 * was unlinked: a cancel_sync that finds no flag may let its caller free
 * the timer, so no flag may go while the wheel still links it. (Clearing
 * first, then unlinking, was a use-after-free: a cancel_sync in between
 * returned at once.) A PENDING timer is the opposite: F_INBOX goes first,
 * and next_due is read after, so a reschedule racing this apply either is
 * read here or pushes again. If the CAS finds the word changed (an add, a
 * cancel), the loop looks again; the same word back after an add and a
 * cancel (ABA) needs nothing more: only the wheel owner links.
 */
static bool apply(struct tw_service *svc, struct tw_service_timer *t)
{
	/* A first guess, not a load: the word of a one-shot timer of ours
	 * added or rescheduled (most of what an inbox holds). A load first
	 * would fetch the line shared from the producer's core and the CAS
	 * fetch it again to own it; a wrong guess only costs a failed CAS,
	 * which loads the real word. */
	uint32_t old = svc->owner_bits | ST_PENDING | F_INBOX;
	unsigned s;

	for (;;) {
		s = word_state(old);
		if (s != ST_PENDING && s != ST_ADDING &&
		    tw_timer_pending(&t->wheel_timer)) {
			tw_wheel_cancel(&svc->wheel, &t->wheel_timer);
			TW_TEST_POINT("apply.unlinked", t);
		}
		/* ADDING: its producer pushes again when it publishes,
		 * because it will find F_INBOX clear. */
		if (tr_apply(t, &old))
			break;
	}
	/* Only apply takes F_INBOX down, and only the producer that set it
	 * pushed the timer: an entry without it was pushed again after its
	 * memory was wiped (an init of a pending timer), and its link may
	 * close a cycle. The caller stops its walk there. */
	if (!word_has(old, F_INBOX))
		return false;
	if (word_has(old, F_TOMB))
		svc->tombs_cleared++;
	TW_TEST_POINT("apply.cleared", t);
	if (s == ST_PENDING) {
		/* Two loads, and a reschedule may land between them: then it
		 * found F_INBOX down and pushed the timer again, and until
		 * that entry is applied the wheel's on_expire passes over it
		 * (F_INBOX set), so a torn (due, slack) is never fired. */
		int64_t due = __atomic_load_n(&t->next_due, __ATOMIC_RELAXED);
		uint32_t slack;

		TW_TEST_POINT("apply.due_read", t);
		slack = __atomic_load_n(&t->next_slack, __ATOMIC_RELAXED);
		if (!slack)
			tw_wheel_reschedule(&svc->wheel, &t->wheel_timer, due);
		else
			tw_wheel_reschedule_range(&svc->wheel, &t->wheel_timer, due,
						  tw__svc_window_end(svc, due, slack));
	}
	return true;
}

void tw__svc_drain_inboxes(struct tw_service *svc)
{
	for (unsigned i = 0; i < svc->ninboxes; i++) {
		/* seq_cst: the other half of push()'s store-buffering pair. */
		struct tw_service_timer *t =
			__atomic_exchange_n(&svc->inboxes[i].head, NULL,
					    __ATOMIC_SEQ_CST);

		while (t) {
			/* Read before apply: once F_INBOX is clear the
			 * timer may be pushed again. */
			struct tw_service_timer *next = t->inbox_next;

			if (!apply(svc, t)) {
				/* The rest of this list cannot be trusted. */
				if (!svc->broken)
					svc->broken = t;
				break;
			}
			t = next;
		}
	}
}

/* A slot in the batch: grow it (doubling), or false (no memory). */
static bool batch_room(struct tw_service *svc)
{
	struct tw_service_timer **grown;
	size_t cap;

	if (svc->batch_len < svc->batch_cap)
		return true;
	if (svc->batch_cap > SIZE_MAX / 2 / sizeof(*grown))
		return false;
	cap = svc->batch_cap ? 2 * svc->batch_cap : BATCH_MIN;
	grown = realloc(svc->batch, cap * sizeof(*grown));
	if (!grown)
		return false;
	svc->batch = grown;
	svc->batch_cap = cap;
	return true;
}

/* The wheel callback, under wheel_mu, on the scanning thread. The wheel
 * has already unlinked the timer. With no room in the batch (no memory to
 * grow it) the timer stays PENDING and goes back in the wheel due
 * now: the next advance, which the reaper starts at once (the wheel's
 * next expiry is now), expires it. To the protocol that is an expiry not
 * yet made (model/service.pml's scan defers the same way). */
void tw__svc_on_expire(struct tw_wheel *w, struct tw_timer *wt)
{
	struct tw_service *svc = tw_container_of(w, struct tw_service, wheel);
	struct tw_service_timer *t =
		tw_container_of(wt, struct tw_service_timer, wheel_timer);
	uint32_t old = word_load(t);

	do {
		/* Cancelled (a tombstone: gone now), or moved since it was
		 * placed: an inbox entry (or its producer) will place it
		 * again if it is pending. */
		if (word_state(old) != ST_PENDING || word_has(old, F_INBOX)) {
			if (word_has(old, F_TOMB))
				tw__svc_clear_tomb(svc, t);
			return;
		}
		if (!word_has(old, F_ENTRY) && !batch_room(svc)) {
			TW_TEST_POINT("expire.deferred", t);
			svc->deferred = true;
			tw_wheel_add(w, wt, tw_wheel_now(w));
			return;
		}
	} while (!tr_expire(t, &old));
	if (word_has(old, F_ENTRY))
		return; /* an older entry still waits: it runs this expiry */
	svc->batch[svc->batch_len++] = t;
}

/* The wheel's question at a cascade, under wheel_mu: the timer, unlinked
 * a moment ago, is dropped if it is not pending -- a tombstone (or a timer
 * an inbox entry will look at again). Dropped at its first cascade rather
 * than filed down level by level until its due time: one visit instead of
 * one per level (bench: "tombstones"). Unlinked before the flag goes, as
 * apply() does. */
bool tw__svc_drop_tombstone(struct tw_wheel *w, struct tw_timer *wt)
{
	struct tw_service *svc = tw_container_of(w, struct tw_service, wheel);
	struct tw_service_timer *t =
		tw_container_of(wt, struct tw_service_timer, wheel_timer);
	unsigned s = word_state(word_load(t));

	if (s == ST_PENDING || s == ST_ADDING)
		return false;
	tw__svc_clear_tomb(svc, t);
	return true;
}

/* Drain the inboxes, advance the wheel to now and return the earliest
 * next expiry. What expired is in svc->batch, in firing order. */
void tw__svc_scan(struct tw_service *svc, int64_t now, int64_t *next)
{
	int64_t when;

	pthread_mutex_lock(&svc->wheel_mu);
	tw__svc_drain_inboxes(svc);
	if (now < tw_wheel_now(&svc->wheel)) {
		COUNT(svc, backwards);
		now = tw_wheel_now(&svc->wheel);
	}
	tw_wheel_advance(&svc->wheel, now);
	*next = tw_wheel_next_expiry(&svc->wheel, &when) ? when : INT64_MAX;
	pthread_mutex_unlock(&svc->wheel_mu);
}

size_t tw_service_count(struct tw_service *svc)
{
	size_t n;
	int64_t tombs;

	if (!svc)
		return 0;
	pthread_mutex_lock(&svc->wheel_mu);
	tw__svc_drain_inboxes(svc);
	n = tw_wheel_count(&svc->wheel);
	tombs = -(int64_t)svc->tombs_cleared;
	for (unsigned i = 0; i < svc->ninboxes; i++)
		tombs += (int64_t)atomic_load_explicit(&svc->inboxes[i].tombed,
						       memory_order_relaxed);
	pthread_mutex_unlock(&svc->wheel_mu);
	/* Tombstones are cancelled timers the wheel still links. A cancel
	 * counts its tombstone after its CAS, so for a moment the wheel
	 * owner may have cleared more than were counted: never below 0. */
	if (tombs > 0)
		n = (size_t)tombs < n ? n - (size_t)tombs : 0;
	return n;
}

/* The wheel's next expiry once the inboxes are applied: an add from any
 * thread that returned before this call is in the answer (it may sit in
 * an inbox until a poll, and the wheel alone would not see it). */
bool tw_service_next_expiry(struct tw_service *svc, int64_t *when)
{
	bool any;

	if (!svc || !when)
		return false;
	pthread_mutex_lock(&svc->wheel_mu);
	/* Before the drain: an add it misses wakes the loop (wake_loop). */
	if (svc->cfg.manual)
		atomic_store(&svc->kick_pending, false);
	tw__svc_drain_inboxes(svc);
	any = tw_wheel_next_expiry(&svc->wheel, when);
	pthread_mutex_unlock(&svc->wheel_mu);
	return any;
}

int64_t tw_service_timeout(struct tw_service *svc, int64_t now)
{
	int64_t when = 0;
	bool any = tw_service_next_expiry(svc, &when);

	return tw__timeout_until(any, when, now);
}
