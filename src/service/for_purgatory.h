/* SPDX-License-Identifier: MIT */
/*
 * What the purgatory uses of the service beyond its public API (defined
 * in timer.c). Not exported (the library's default visibility is hidden,
 * and nothing here is in a public header).
 */
#ifndef TW_SERVICE_FOR_PURGATORY_H
#define TW_SERVICE_FOR_PURGATORY_H

#include "timingwheel/service.h"

/*
 * Stop a timer that has not started to run, and never wait. Under its
 * shard's lock, a timer pending in the shard's wheel, queued for an
 * executor, deferred to the end of its run, or taken by a scan that has
 * not yet claimed it, leaves the service. The shard's lock is a leaf: no
 * callback ever runs under it, so this cannot wait for one, unlike
 * tw_service_cancel_sync().
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

/* The calling thread is inside a callback or a hand_back that a service
 * runs, or scanning (a reaper or a poll, any service's): where
 * tw_service_shutdown(), tw_service_destroy() and tw_service_poll() are
 * refused (TW_EREENTER), and so are the purgatory's. */
bool tw__service_in_callback(void);

/* The monotonic clock in nanoseconds (the service's default clock; arg
 * unused): the purgatory's gate bounds its wait with it. */
int64_t tw__svc_monotonic_ns(void *arg);

#endif
