/*
 * The alternative issue 4 asked to measure against sharding: Netty's
 * design, where producers never touch the wheel. Each producer thread has
 * its own inbox (a lock-free stack) of timers to (re)insert; one reaper
 * thread owns the wheel and drains the inboxes. Cancel is a compare-and-swap
 * on the timer's state (so it still says whether it stopped the timer) and
 * queues the timer for the reaper to unlink, as Netty's cancelledTimeouts.
 *
 * A benchmark prototype, not a library feature: after cancel returns, the
 * timer is still linked in the wheel until the reaper gets to it, so the
 * caller cannot free it then — the contract the library's intrusive timers
 * keep (cancel_sync would need a round trip to the reaper). Only what the
 * producer benchmark needs is here (no expiry).
 */
#ifndef TW_BENCH_INBOX_SERVICE_H
#define TW_BENCH_INBOX_SERVICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "timingwheel/timingwheel.h"

#define INBOX_MAX_PRODUCERS 16

struct inbox_timer {
	struct tw_timer wt;             /* owned by the reaper */
	_Atomic int state;
	_Atomic long long due;
	atomic_bool in_inbox;           /* physically in an inbox stack */
	struct inbox_timer *_Atomic next;
};

struct inbox_service {
	struct tw_wheel wheel;
	struct inbox_timer *_Atomic inbox[INBOX_MAX_PRODUCERS];
	atomic_long submitted, applied;
	atomic_bool stop;
	pthread_t reaper;
};

int inbox_service_init(struct inbox_service *s, int64_t start);
void inbox_service_destroy(struct inbox_service *s);
void inbox_timer_init(struct inbox_timer *t);
/* 0, or -1 if already pending. producer: the calling thread's inbox. */
int inbox_add(struct inbox_service *s, unsigned producer, struct inbox_timer *t,
	      int64_t due);
/* 1 if it stopped a pending timer, 0 if it was not pending. The reaper
 * unlinks it from the wheel when it next drains the inboxes. */
int inbox_cancel(struct inbox_service *s, unsigned producer,
		 struct inbox_timer *t);
/* Wait until the reaper has applied everything submitted so far. */
void inbox_quiesce(struct inbox_service *s);

#endif
