/* SPDX-License-Identifier: MIT */
/*
 * on_release comes exactly once, under no lock of its op, and a
 * completion never waits for the timeout path: the purgatory's promises,
 * each forced into the interleaving that could break it
 * (tests/support/stop_points.h, the hooks build), on a manual purgatory
 * driven by a virtual clock:
 *  1. on_release exactly once: a force_complete or safe_try_complete from
 *     outside, while the count is zero and on_release about to run (here:
 *     running), takes no reference back from zero and releases nothing
 *     again.
 *  2. No hang between a completion and the timeout path: a completer in
 *     try_complete, under the op's lock (its own or a shared one), never
 *     waits for the op's expired timeout, queued behind another op's
 *     timeout whose on_expiration checks the op's key and waits for that
 *     lock.
 *  3. on_release under no lock of its op: a completion's purge never
 *     runs inside try_complete, where it could release another op that
 *     shares the caller's lock.
 *  4. A completion whose timeout's stop meets TW_EDEADLK from a ring
 *     across the purgatory and a service still drops the timeout's
 *     reference: on_release comes.
 *  5. A completion racing the first add of the op's timeout: the timeout's
 *     reference is dropped once, and the service has let go of the timer
 *     by on_release.
 *  6. An op never watched has no on_release.
 *  7. A timeout past the clock's end is armed.
 *  8. A put reads nothing of the op after it.
 * The first watch racing a completion is in completion_during_a_watch.c;
 * on_release outside the purgatory's locks (shutdown, a growing shard, no
 * memory) in release_outside_locks.c. One test can be run alone by naming
 * it (or any part of its name):
 *   purgatory_completion_and_release test_an_op_never_watched_has_no_on_release
 */
#define _POSIX_C_SOURCE 200809L

#include "purgatory_forced_ops.h"
#include "service/state.h"

/* ---- a reference taken back from zero ---- */

/*
 * The op is completed; a key check drops its last reference (the watch
 * entry) and its on_release begins, and is held there. Another thread,
 * whose memory of the op is still valid (on_release has not freed it),
 * calls force_complete, then safe_try_complete. A reference taken with a
 * plain increment, 0 -> 1, would be put back to zero again: on_release a
 * second and a third time. A reference is got only unless the count is
 * zero, and a call that cannot get one returns false.
 */
static void test_no_second_on_release_from_a_call_at_count_zero(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop o;
	struct sp_thread th;

	gop_init(&o, p, "topic-0", NULL);
	CHECK_EQ(gop_watch(&o), 0);
	atomic_store(&o.ready, 1);
	CHECK(tw_op_force_complete(&o.op)); /* its entry still holds it */
	CHECK_EQ(atomic_load(&o.releases), 0);
	atomic_store(&o.release_blocks, 1);
	sp_spawn(&th, check_key_thread, &o);
	WAIT_FOR(atomic_load(&o.in_release), "on_release");
	CHECK(!tw_op_force_complete(&o.op));
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK(!tw_op_safe_try_complete(&o.op));
	CHECK_EQ(atomic_load(&o.releases), 1);
	atomic_store(&o.release_go, 1);
	sp_join(&th, "the key check");
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/* ---- a completion waiting for an expired timeout ---- */

static _Atomic(struct gop *) first_expired;

/* The first on_expiration of the batch: the other op's timeout waits in
 * the same batch behind it. Hold on until a completer holds that op's
 * lock, then check its key, which needs that lock. */
static void check_the_other_key(struct gop *self)
{
	struct gop *none = NULL;
	struct gop *y = self->other;

	if (!atomic_compare_exchange_strong(&first_expired, &none, self))
		return;
	atomic_store(&y->ready, 1);
	atomic_store(&y->try_parks, 1);
	WAIT_FOR(atomic_load(&y->in_try), "the completer in try_complete");
	atomic_store(&y->try_go, 1);
	CHECK_EQ(check_key(self->p, y->key), 0); /* completed by the completer */
}

/*
 * Ops X and Y, same timeout, so one advance expires both into one batch
 * (executors = 0, the default: the polling thread runs them). The first
 * one's on_expiration checks the other's key; meanwhile a completer in
 * try_complete of the other, under its lock, force_completes it. A
 * completion that cancel_synced the timeout would wait for its entry in
 * the batch, and the batch's thread for the lock: a hang. The completion
 * stops only a pending timeout and never waits: the expired one runs,
 * finds the op completed, and drops its reference.
 */
static void completion_racing_its_expired_timeout(bool shared)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct gop x, y;
	struct gop *first, *second;
	struct sp_thread poller, completer;

	gop_init(&x, p, "x", shared ? &mu : NULL);
	gop_init(&y, p, "y", shared ? &mu : NULL);
	x.other = &y;
	y.other = &x;
	x.on_expiration = check_the_other_key;
	y.on_expiration = check_the_other_key;
	atomic_store(&first_expired, NULL);
	CHECK_EQ(gop_watch(&x), 0);
	CHECK_EQ(gop_watch(&y), 0);
	atomic_store(&virtual_now, 2000);
	sp_spawn(&poller, poll_purgatory_thread, p);
	WAIT_FOR(atomic_load(&first_expired) != NULL, "the first expiry");
	first = atomic_load(&first_expired);
	second = first->other;
	sp_spawn(&completer, safe_try_thread, second);
	sp_join(&completer, "the completer (in cancel_sync)");
	sp_join(&poller, "the poll (in on_expiration's key check)");
	CHECK_EQ(atomic_load(&first->completes), 1);
	CHECK_EQ(atomic_load(&first->expires), 1);
	CHECK_EQ(atomic_load(&second->completes), 1);
	CHECK_EQ(atomic_load(&second->expires), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&x.releases), 1);
	CHECK_EQ(atomic_load(&y.releases), 1);
	CHECK_EQ(atomic_load(&x.released_under_lock) +
			 atomic_load(&y.released_under_lock), 0);
	tw_op_destroy(&x.op);
	tw_op_destroy(&y.op);
	pthread_mutex_destroy(&mu);
}

static void test_completion_never_waits_for_its_expired_timeout(void)
{
	completion_racing_its_expired_timeout(false);
}

static void test_completion_never_waits_for_its_expired_timeout_shared_lock(void)
{
	completion_racing_its_expired_timeout(true);
}

/* ---- the purge under the caller's lock ---- */

/*
 * purge_interval 1. Z and X share the caller's lock. Z completes and its
 * watch entry lingers (its last reference). X then completes in
 * try_complete, under that lock, and its completion is the one that
 * makes a purge due. A purge run inside the completion, under the lock,
 * would drop Z's entry there: Z's on_release would run under its own
 * lock, which an on_release that takes it would wait for for ever. The
 * purge runs after the lock is let go.
 */
static void test_no_on_release_under_the_callers_shared_lock(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(1);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct gop x, z;

	gop_init(&z, p, "z", &mu);
	gop_init(&x, p, "x", &mu);
	CHECK_EQ(gop_watch(&z), 0);
	CHECK_EQ(gop_watch(&x), 0);
	atomic_store(&z.ready, 1);
	CHECK(tw_op_safe_try_complete(&z.op));
	CHECK_EQ(atomic_load(&z.releases), 0); /* its entry lingers */
	CHECK_EQ(tw_purgatory_watched(p), 2);
	atomic_store(&x.ready, 1);
	CHECK_EQ(check_key(p, "x"), 1);
	CHECK_EQ(atomic_load(&z.releases), 1); /* the purge ran */
	CHECK_EQ(atomic_load(&z.released_under_lock), 0);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&x.releases), 1);
	CHECK_EQ(atomic_load(&x.released_under_lock), 0);
	tw_op_destroy(&x.op);
	tw_op_destroy(&z.op);
	pthread_mutex_destroy(&mu);
}

/* ---- a ring through the purgatory and a service ---- */

struct ring {
	struct tw_service *svc;
	struct tw_service_timer b;
	struct gop x, y;
	atomic_int b_in, x_waits, b_done;
	atomic_int sync_result;
};

static struct ring ring;

/* b's callback, on the service's polling thread: once X's on_expiration
 * waits for it, check Y's key: Y completes, its timeout expired in the
 * purgatory's batch behind X. */
static void b_checks_y(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	atomic_store(&ring.b_in, 1);
	WAIT_FOR(atomic_load(&ring.x_waits), "X's cancel_sync of b");
	atomic_store(&ring.y.ready, 1);
	CHECK_EQ(check_key(ring.y.p, ring.y.key), 1);
	atomic_store(&ring.b_done, 1);
}

static void x_waits(const void *obj, void *arg)
{
	(void)obj;
	(void)arg;
	atomic_store(&ring.x_waits, 1);
}

/* X's on_expiration, on the purgatory's polling thread: cancel_sync b
 * while its callback runs. */
static void x_cancels_b(struct gop *self)
{
	(void)self;
	if (self != &ring.x)
		return;
	WAIT_FOR(atomic_load(&ring.b_in), "b's callback");
	sp_on("cancel_sync.wait", &ring.b, x_waits, NULL);
	atomic_store(&ring.sync_result,
		     tw_service_cancel_sync(ring.svc, &ring.b));
}

static void *poll_service_thread(void *arg)
{
	CHECK(tw_service_poll(arg) >= 0);
	return NULL;
}

/*
 * X's on_expiration waits (cancel_sync) for service timer b's callback;
 * b's callback completes Y, whose timeout waits in the purgatory's batch
 * behind X. A completion that cancel_synced Y's timeout would close a
 * ring and get TW_EDEADLK; taken for "not stopped", the dispatch would
 * then skip the entry its cancel had stopped: the timeout's reference
 * never dropped, and Y never released. The completion does not wait, so
 * there is no ring: the expired timeout runs after X and drops its
 * reference.
 */
static void test_completion_in_a_ring_with_a_service_keeps_no_reference(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct tw_service_config cfg = { 0 };
	struct sp_thread spoll, ppoll;

	memset(&ring, 0, sizeof(ring));
	cfg.tick = 10;
	cfg.wheel_size = 8;
	cfg.manual = true;
	cfg.clock.now = virtual_clock;
	CHECK_EQ(tw_service_create(&ring.svc, &cfg), TW_OK);
	tw_service_timer_init(&ring.b, b_checks_y);
	gop_init(&ring.x, p, "x", NULL);
	gop_init(&ring.y, p, "y", NULL);
	ring.x.on_expiration = x_cancels_b;
	/* X's timeout ahead of Y's in the batch: an earlier tick */
	CHECK_EQ(gop_watch(&ring.x), 0);
	atomic_store(&virtual_now, 1020);
	CHECK_EQ(gop_watch(&ring.y), 0);
	CHECK_EQ(tw_service_add(ring.svc, &ring.b, 1020), TW_OK);
	sp_spawn(&spoll, poll_service_thread, ring.svc);
	WAIT_FOR(atomic_load(&ring.b_in), "b's callback");
	atomic_store(&virtual_now, 2000);
	sp_spawn(&ppoll, poll_purgatory_thread, p);
	sp_join(&spoll, "the service's poll (b's callback)");
	sp_join(&ppoll, "the purgatory's poll (X's on_expiration)");
	CHECK_EQ(atomic_load(&ring.b_done), 1);
	CHECK_EQ(atomic_load(&ring.sync_result), TW_SVC_RUNNING);
	CHECK_EQ(atomic_load(&ring.x.expires), 1);
	CHECK_EQ(atomic_load(&ring.y.completes), 1);
	CHECK_EQ(atomic_load(&ring.y.expires), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&ring.x.releases), 1);
	CHECK_EQ(atomic_load(&ring.y.releases), 1);
	CHECK_EQ(tw_service_shutdown(ring.svc, NULL, NULL), 0);
	tw_service_destroy(ring.svc);
	tw_op_destroy(&ring.x.op);
	tw_op_destroy(&ring.y.op);
}

/* ---- a completion racing the first add of the op's timeout ---- */

/* The service has let go of the op's timeout: not pending, and its state
 * word IDLE (src/service/state.h; white box: no public call says whether
 * the service still holds a timer that is not pending). */
static void check_timer_let_go(struct gop *o)
{
	uint32_t word = __atomic_load_n(&o->op.timer.state, __ATOMIC_SEQ_CST);

	CHECK(!tw_service_timer_pending(&o->op.timer));
	CHECK_EQ(word & ST_MASK, ST_IDLE);
}

static void *watch_thread(void *arg)
{
	CHECK_EQ(gop_watch(arg), 0);
	return NULL;
}

static void *force_thread(void *arg)
{
	struct gop *o = arg;

	CHECK(tw_op_force_complete(&o->op));
	return NULL;
}

static void release_checks_timer(struct tw_delayed_op *op)
{
	struct gop *o = tw_container_of(op, struct gop, op);

	atomic_fetch_add(&o->releases, 1);
	check_timer_let_go(o);
}

/*
 * The watch arms the op's timeout with the timer's first add; a completion
 * from another thread races it. Forced: the add is parked before its claim
 * ("add.claiming": the timer has no owner yet) while a force_complete runs
 * to its end -- it never waits for the add: its stop of the timeout finds
 * nothing to stop (stop_pending: TW_SVC_IDLE) and leaves the timeout's
 * reference to the watch. The add then files the timer, and the watch,
 * seeing the op completed, stops it (TW_SVC_STOPPED) and drops that
 * reference. The op completes once and is released once, when its entry
 * goes; by then the service has let go of its timer, which the caller may
 * free.
 */
static void test_a_completion_before_the_timeouts_first_add_lets_go_of_it(void)
{
	static const struct tw_op_ops ops = { gop_try, gop_complete, gop_expire,
					      release_checks_timer, NULL };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop o;
	struct sp_thread watcher, forcer;
	int claiming;

	gop_init(&o, p, "topic-0", NULL);
	CHECK_EQ(tw_op_init(&o.op, 100, &ops, NULL), TW_OK);
	claiming = sp_arm("add.claiming", &o.op.timer);
	sp_spawn(&watcher, watch_thread, &o);
	CHECK(sp_wait(claiming, &watcher.done));
	atomic_store(&o.ready, 1);
	sp_spawn(&forcer, force_thread, &o);
	sp_join(&forcer, "the completer");
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.releases), 0);
	sp_release(claiming);
	sp_join(&watcher, "the watch");
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 0); /* the timeout's count went */
	check_timer_let_go(&o);
	CHECK_EQ(tw_purgatory_watched(p), 1); /* its entry lingers */
	CHECK_EQ(atomic_load(&o.releases), 0);
	CHECK_EQ(check_key(p, o.key), 0);     /* and goes: on_release */
	CHECK_EQ(atomic_load(&o.releases), 1);
	atomic_store(&virtual_now, 2000);     /* past the timeout */
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(atomic_load(&o.expires), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/* ---- an op never watched ---- */

/*
 * A force_complete (or safe_try_complete) of an op the purgatory never
 * saw must not take a reference 0 -> 1: its own put would run on_release
 * (for safe_try_complete: under the op's lock, which the caller's
 * on_release may take), and a watch afterwards on_release a second time.
 * Such an op takes no references and has no on_release, and a watch of a
 * completed op is refused.
 */
static void test_an_op_never_watched_has_no_on_release(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct gop a, b;

	gop_init(&a, p, "a", NULL);
	gop_init(&b, p, "b", &mu);
	CHECK(tw_op_force_complete(&a.op));
	CHECK_EQ(atomic_load(&a.completes), 1);
	CHECK_EQ(atomic_load(&a.releases), 0);
	CHECK_EQ(gop_watch(&a), TW_EINVAL);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	atomic_store(&b.ready, 1);
	CHECK(tw_op_safe_try_complete(&b.op));
	CHECK_EQ(atomic_load(&b.completes), 1);
	CHECK_EQ(atomic_load(&b.releases), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&a.releases), 0);
	CHECK_EQ(atomic_load(&b.releases), 0);
	tw_op_destroy(&a.op);
	tw_op_destroy(&b.op);
	pthread_mutex_destroy(&mu);
}

/* ---- a timeout past the end of the clock ---- */

/*
 * A timeout that overflows the clock (now + timeout > INT64_MAX) is
 * armed, at the end of time: unarmed, the op would wait for its
 * condition only, and delayed() would not count it.
 */
static void test_a_timeout_past_the_clocks_end_is_armed(void)
{
	static const struct tw_op_ops ops = { gop_try, gop_complete, gop_expire,
					      gop_release, NULL };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop o;

	gop_init(&o, p, "topic-0", NULL);
	CHECK_EQ(tw_op_init(&o.op, INT64_MAX, &ops, NULL), TW_OK);
	CHECK_EQ(gop_watch(&o), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 1); /* handed back */
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.completes), 0);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/*
 * The test-point build's own bookkeeping: a put that is not the last dropped its reference, then read
 * the op's completed flag to report its step; meanwhile another thread's
 * last put released the op, whose on_release freed it. A safe_try_complete
 * is held right after its put; a key check completes the op and releases
 * it, and its on_release frees it; then the held put goes on and reads
 * nothing of the op (ASan, in make sanitize, reported a heap use after
 * free in op_refs_step before).
 */
static atomic_int freed_releases;

static void release_frees(struct tw_delayed_op *op)
{
	atomic_fetch_add(&freed_releases, 1);
	free(tw_container_of(op, struct gop, op));
}

static void *safe_try_fails_thread(void *arg)
{
	struct gop *o = arg;

	CHECK(!tw_op_safe_try_complete(&o->op));
	return NULL;
}

static void test_a_put_reads_nothing_of_the_op_after_it(void)
{
	static const struct tw_op_ops ops = { gop_try, gop_complete, gop_expire,
					      release_frees, NULL };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop *o = malloc(sizeof(*o));
	struct sp_thread trier;
	int put;

	CHECK(o != NULL);
	gop_init(o, p, "topic-0", NULL);
	CHECK_EQ(tw_op_init(&o->op, 100, &ops, NULL), TW_OK);
	CHECK_EQ(gop_watch(o), 0); /* its entry's and its timeout's references */
	put = sp_arm("op_put.decremented", &o->op);
	sp_spawn(&trier, safe_try_fails_thread, o); /* not ready: false */
	CHECK(sp_wait(put, &trier.done));
	atomic_store(&o->ready, 1);
	CHECK_EQ(check_key(p, "topic-0"), 1); /* the last put: freed */
	CHECK_EQ(atomic_load(&freed_releases), 1);
	sp_release(put);
	sp_join(&trier, "the safe_try_complete");
	CHECK_EQ(atomic_load(&freed_releases), 1);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
}

int main(int argc, char **argv)
{
	sp_install();
	RUN_IF(test_no_second_on_release_from_a_call_at_count_zero);
	RUN_IF(test_completion_never_waits_for_its_expired_timeout);
	RUN_IF(test_completion_never_waits_for_its_expired_timeout_shared_lock);
	RUN_IF(test_no_on_release_under_the_callers_shared_lock);
	RUN_IF(test_completion_in_a_ring_with_a_service_keeps_no_reference);
	RUN_IF(test_a_completion_before_the_timeouts_first_add_lets_go_of_it);
	RUN_IF(test_an_op_never_watched_has_no_on_release);
	RUN_IF(test_a_timeout_past_the_clocks_end_is_armed);
	RUN_IF(test_a_put_reads_nothing_of_the_op_after_it);
	return check_report();
}
