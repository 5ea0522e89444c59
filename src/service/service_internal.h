/* SPDX-License-Identifier: MIT */
/*
 * service_internal.h -- what the purgatory needs of the service beyond its
 * public API (defined in sync.c and producer.c). Not exported (the
 * library's default visibility is hidden, and nothing here is in a public
 * header).
 */
#ifndef TW_SERVICE_INTERNAL_H
#define TW_SERVICE_INTERNAL_H

#include "timingwheel/service.h"

/*
 * Stop a timer that is pending, and never wait. PENDING (with no entry of
 * an earlier expiry still waiting) -> IDLE in one CAS, then, under the
 * wheel's lock, the timer leaves the wheel and every inbox. The wheel's
 * lock is a leaf: no callback ever runs under it, so this cannot wait for
 * one, unlike tw_service_cancel_sync(). The one thing it waits for is an
 * add that has made the timer PENDING and not yet pushed it on its inbox
 * (a few instructions, no lock): until that push is drained, an inbox
 * would still refer to the timer.
 *
 * For a timer added once and never re-added while it may still run (the
 * purgatory's timeouts): when it returns TW_SVC_STOPPED nothing in the
 * service refers to the timer any more, and it will not run. Any other
 * result (TW_SVC_IDLE) means this call changed nothing: the timer expired
 * (its callback will run, or runs), or shutdown holds it (its hand_back
 * will run), or it was never added; whoever runs then must see that the
 * work is done.
 */
int tw__service_stop_pending(struct tw_service *svc, struct tw_service_timer *t);

/* tw_service_add_range() at [now + delay, now + delay + tolerance] (the
 * end saturating): the purgatory's timeout with a tolerance (delay > 0,
 * tolerance >= 0). TW_EOVERFLOW as tw_service_add_in(). */
int tw__service_add_in_range(struct tw_service *svc, struct tw_service_timer *t,
			     int64_t delay, int64_t tolerance);

#endif
