/* SPDX-License-Identifier: MIT */
/*
 * The purgatory's promises that issue 28's review broke, each forced into
 * the interleaving that broke it (tests/stop_points.h, the hooks build),
 * on a manual purgatory driven by a virtual clock. Each test failed on the
 * code before its fix (the closing note has the outputs).
 *
 *  1. on_release exactly once: a force_complete or safe_try_complete from
 *     outside, while the count is zero and on_release about to run (here:
 *     running), brought the count back to life and released the op again.
 *  2. No hang between a completion and the timeout path: a completer in
 *     try_complete, under the op's lock (its own or a shared one), waited
 *     in cancel_sync for the op's expired timeout, queued behind another
 *     op's timeout whose on_expiration checked the op's key and waited for
 *     that lock.
 *  3. on_release under no lock of its op: a completion's purge ran inside
 *     try_complete and released another op that shares the caller's lock.
 *  4. (the review's B8) a completion whose cancel_sync got TW_EDEADLK from
 *     a ring across the purgatory and a service took it for "not
 *     stopped", and the timeout's reference leaked: no on_release, ever.
 */
#define _POSIX_C_SOURCE 200809L

/* The shards' tables (which shard a key is in, whether one grew); first,
 * for it names the feature macros its futex needs. */
#include "purgatory/core.h"

#include "stop_points.h"

#include "check.h"
#include "virtual_clock.h"


struct gop {
	struct tw_delayed_op op;
	struct tw_watch w;
	const char *key;
	struct tw_purgatory *p;
	struct gop *other;
	pthread_mutex_t *lock; /* the shared lock, if any: on_release tries it */
	atomic_int ready, completes, expires, releases;
	atomic_int release_blocks, in_release, release_go;
	atomic_int released_under_lock;
	atomic_int try_parks, in_try, try_go;
	void (*on_expiration)(struct gop *self);
};

static bool gop_try(struct tw_delayed_op *op)
{
	struct gop *o = tw_container_of(op, struct gop, op);

	if (!atomic_load(&o->ready))
		return false;
	if (atomic_load(&o->try_parks)) {
		atomic_store(&o->in_try, 1);
		WAIT_FOR(atomic_load(&o->try_go), "try_complete's go");
	}
	return tw_op_force_complete(op);
}

static void gop_complete(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct gop, op)->completes, 1);
}

static void gop_expire(struct tw_delayed_op *op)
{
	struct gop *o = tw_container_of(op, struct gop, op);

	atomic_fetch_add(&o->expires, 1);
	if (o->on_expiration)
		o->on_expiration(o);
}

static void gop_release(struct tw_delayed_op *op)
{
	struct gop *o = tw_container_of(op, struct gop, op);
	int n = atomic_fetch_add(&o->releases, 1) + 1;

	/* An on_release that takes its op's lock first would hang if its own
	 * thread held it: try it instead, and count. */
	if (o->lock) {
		if (pthread_mutex_trylock(o->lock) == 0)
			pthread_mutex_unlock(o->lock);
		else
			atomic_fetch_add(&o->released_under_lock, 1);
	}
	if (n == 1 && atomic_load(&o->release_blocks)) {
		atomic_store(&o->in_release, 1);
		WAIT_FOR(atomic_load(&o->release_go), "on_release's go");
	}
}

static const struct tw_op_ops gop_ops = { gop_try, gop_complete, gop_expire,
					  gop_release };

static void gop_init(struct gop *o, struct tw_purgatory *p, const char *key,
		     pthread_mutex_t *lock)
{
	memset(o, 0, sizeof(*o));
	o->p = p;
	o->key = key;
	o->lock = lock;
	CHECK_EQ(tw_op_init(&o->op, 100, &gop_ops, lock), TW_OK);
}

static int gop_watch(struct gop *o)
{
	const void *keys[1] = { o->key };
	size_t lens[1] = { strlen(o->key) };

	return tw_purgatory_try_complete_else_watch(o->p, &o->op, keys, lens, 1,
						    &o->w);
}

static int64_t check_key(struct tw_purgatory *p, const char *key)
{
	return tw_purgatory_check_and_complete(p, key, strlen(key));
}

static void *check_key_thread(void *arg)
{
	struct gop *o = arg;

	CHECK_EQ(check_key(o->p, o->key), 0);
	return NULL;
}

static void *poll_purgatory_thread(void *arg)
{
	CHECK(tw_purgatory_poll(arg) >= 0);
	return NULL;
}

static void *safe_try_thread(void *arg)
{
	struct gop *o = arg;

	CHECK(tw_op_safe_try_complete(&o->op));
	return NULL;
}

/* ---- 1: a reference taken back from zero ---- */

/*
 * The op is completed; a key check drops its last reference (the watch
 * entry) and its on_release begins, and is held there. Another thread,
 * whose memory of the op is still valid (on_release has not freed it),
 * calls force_complete, then safe_try_complete. Each took a reference
 * with a plain increment, 0 -> 1, and its put took the count to zero
 * again: on_release a second and a third time. A reference is now got
 * only unless the count is zero, and a call that cannot get one returns
 * false.
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

/* ---- 2: a completion waiting for an expired timeout ---- */

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
 * try_complete of the other, under its lock, force_completes it. Its
 * cancel_sync waited for the timeout's entry in the batch, the batch's
 * thread for the lock: a hang. The completion now stops only a pending
 * timeout and never waits: the expired one runs, finds the op completed,
 * and drops its reference.
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

/* ---- 3: the purge under the caller's lock ---- */

/*
 * purge_interval 1. Z and X share the caller's lock. Z completes and its
 * watch entry lingers (its last reference). X then completes in
 * try_complete, under that lock, and its completion is the one that
 * makes a purge due. The purge ran inside the completion, under the lock,
 * and dropped Z's entry: Z's on_release ran under its own lock, which an
 * on_release that takes it would wait for for ever. The purge now runs
 * after the lock is let go.
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

/* ---- 4: a ring through the purgatory and a service ---- */

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
 * behind X. Y's completion was a cancel_sync too, which closed a ring
 * and got TW_EDEADLK; it took that for "not stopped" and the dispatch
 * then skipped the entry its cancel had stopped: the timeout's reference
 * was never dropped, and Y never released. The completion no longer
 * waits, so there is no ring: the expired timeout runs after X and drops
 * its reference.
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

/* ---- 5: the second review: a stop before the add's push ---- */

/* src/service/state.h's F_INBOX: an inbox holds the timer (white box: no
 * public call tells whether the service still refers to a timer it let go
 * of). */
#define SERVICE_F_INBOX 8u

static void check_timer_let_go(struct gop *o)
{
	CHECK_EQ(__atomic_load_n(&o->op.timer.state, __ATOMIC_SEQ_CST) &
			 SERVICE_F_INBOX,
		 0);
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
 * The watch arms the op's timeout: the add has made it PENDING with
 * F_INBOX and not yet pushed it on the inbox (add.published). A
 * completer's stop_pending wins its CAS and drains, before the push; it
 * returned STOPPED, the timeout's reference went, the push then linked the
 * timer into the inbox and the watch's last put released the op: a timer
 * the caller may free, still in the service's inbox (ASan: use after free
 * in the next drain). stop_pending now drains until the push is applied.
 */
static void test_completion_before_the_timeouts_push_lets_go_of_it(void)
{
	static const struct tw_op_ops ops = { gop_try, gop_complete, gop_expire,
					      release_checks_timer };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop o;
	struct sp_thread watcher, forcer;
	int published, retry;

	gop_init(&o, p, "topic-0", NULL);
	CHECK_EQ(tw_op_init(&o.op, 100, &ops, NULL), TW_OK);
	published = sp_arm("add.published", &o.op.timer);
	sp_spawn(&watcher, watch_thread, &o);
	CHECK(sp_wait(published, &watcher.done));
	atomic_store(&o.ready, 1);
	retry = sp_arm("stop_pending.inbox", &o.op.timer);
	sp_spawn(&forcer, force_thread, &o);
	(void)sp_wait(retry, &forcer.done); /* the fixed code waits there */
	sp_release(published);
	sp_join(&watcher, "the watch");
	sp_release(retry);
	sp_join(&forcer, "the completer");
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(tw_purgatory_watched(p), 1); /* its entry lingers */
	CHECK_EQ(check_key(p, o.key), 0);     /* and goes: on_release */
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/* ---- 6: an op never watched ---- */

/*
 * A force_complete (or safe_try_complete) of an op the purgatory never
 * saw took a reference 0 -> 1 and its own put ran on_release (for
 * safe_try_complete: under the op's lock, which the caller's on_release
 * may take); watching it afterwards ran on_release a second time. Now
 * such an op takes no references and has no on_release, and a watch of a
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

/* ---- 7: a timeout past the end of the clock ---- */

/*
 * A timeout that overflows the clock (now + timeout > INT64_MAX) was not
 * armed at all: the op waited for its condition only, and delayed() did
 * not count it. It is armed at the end of time now.
 */
static void test_a_timeout_past_the_clocks_end_is_armed(void)
{
	static const struct tw_op_ops ops = { gop_try, gop_complete, gop_expire,
					      gop_release };
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
 * The test-point build's own bookkeeping (the third review of the
 * headers): a put that is not the last dropped its reference, then read
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
					      release_frees };
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

/* ---- 11: a completion from outside racing the op's first watch ---- */

static void *force_thread_result(void *arg)
{
	struct gop *o = arg;

	atomic_store(&o->try_go, tw_op_force_complete(&o->op) ? 1 : 2);
	return NULL;
}

static atomic_int watch_result = 99;

static void *watch_thread_result(void *arg)
{
	atomic_store(&watch_result, gop_watch(arg));
	return NULL;
}

/*
 * The third review of the headers: the watch had claimed the op (its
 * compare-and-swap named the purgatory) and not yet taken its first
 * reference; a force_complete from another thread found the count at zero,
 * took the op for one on its way to on_release, and returned false
 * without completing it (the op then waited for its timeout). Now the
 * watch names the purgatory only after its first reference; until then a
 * completion from outside waits (two steps of the watch). The watch is
 * held there, the force waits, the watch goes on (not ready: it watches),
 * and the force completes the op.
 */
static void test_a_force_during_the_first_watch_completes_the_op(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop o;
	struct sp_thread watcher, forcer;
	int open, waiting;

	gop_init(&o, p, "topic-0", NULL);
	open = sp_arm("watch.open", &o.op);
	sp_spawn(&watcher, watch_thread_result, &o);
	CHECK(sp_wait(open, &watcher.done));
	waiting = sp_arm("outside.watch_starting", &o.op);
	sp_spawn(&forcer, force_thread_result, &o);
	CHECK(sp_wait(waiting, &forcer.done)); /* it waits for the watch */
	sp_release(open);
	sp_join(&watcher, "the watch");
	CHECK_EQ(atomic_load(&watch_result), 0); /* watched */
	sp_release(waiting);
	sp_join(&forcer, "the force");
	CHECK_EQ(atomic_load(&o.try_go), 1); /* force_complete: true */
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 0); /* its timeout stopped */
	CHECK_EQ(check_key(p, o.key), 0);     /* its entry goes */
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/*
 * The other half: a force_complete took the op for never watched (no
 * reference, no on_release), and a watch that had already passed its
 * completed check then claimed and watched it: the op was released by a
 * key check while the force still ran on_complete, and it had an
 * on_release after all. Now the force marks the op never watched in the
 * same compare-and-swap the watch claims it with: the watch, held just
 * before its claim while the force completes the op, is refused
 * (TW_EINVAL), and no on_release runs.
 */
static void test_a_force_before_the_watch_claims_refuses_the_watch(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop o;
	struct sp_thread watcher;
	int claiming;

	gop_init(&o, p, "topic-0", NULL);
	claiming = sp_arm("watch.claiming", &o.op);
	sp_spawn(&watcher, watch_thread_result, &o);
	CHECK(sp_wait(claiming, &watcher.done)); /* past its completed check */
	CHECK(tw_op_force_complete(&o.op));
	CHECK_EQ(atomic_load(&o.completes), 1);
	sp_release(claiming);
	sp_join(&watcher, "the watch");
	CHECK_EQ(atomic_load(&watch_result), TW_EINVAL);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(check_key(p, o.key), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.releases), 0); /* never watched: none */
	tw_op_destroy(&o.op);
}

/* With an argument, only the tests whose name contains it (a hang ends
 * the binary: run the others alone). */
#define RUN_IF(test)                                                        \
	do {                                                                \
		if (argc < 2 || strstr(#test, argv[1]))                     \
			RUN(test);                                          \
	} while (0)

/* ---- 8: a completion racing the watch call ---- */

/*
 * purgatory.h: once try_complete_else_watch returns the op may already be
 * released, whatever it returned; while the call runs, another thread's
 * completion never releases it (issue 25: nothing at the call said when
 * the op could go). The watcher is held after its timeout is armed, just
 * before its own last put; a key check on another thread completes the
 * op there. on_complete runs on the checker, on_release does not: only
 * the call's last put, on the watcher's thread, releases the op.
 */
static pthread_t released_on;

static void release_records_thread(struct tw_delayed_op *op)
{
	struct gop *o = tw_container_of(op, struct gop, op);

	released_on = pthread_self();
	atomic_fetch_add(&o->releases, 1);
}

static pthread_t watcher_id;

static void *watch_thread_recording(void *arg)
{
	watcher_id = pthread_self();
	CHECK_EQ(gop_watch(arg), 0);
	return NULL;
}

static void test_a_completion_never_releases_the_op_inside_the_watch_call(void)
{
	static const struct tw_op_ops ops = { gop_try, gop_complete, gop_expire,
					      release_records_thread };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop o;
	struct sp_thread watcher;
	int armed;

	gop_init(&o, p, "topic-0", NULL);
	CHECK_EQ(tw_op_init(&o.op, 100, &ops, NULL), TW_OK);
	armed = sp_arm("watch.armed", &o.op);
	sp_spawn(&watcher, watch_thread_recording, &o);
	CHECK(sp_wait(armed, &watcher.done));
	atomic_store(&o.ready, 1);
	CHECK_EQ(check_key(p, o.key), 1); /* completed, here, meanwhile */
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.releases), 0); /* the call still holds it */
	sp_release(armed);
	sp_join(&watcher, "the watch");
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK(pthread_equal(released_on, watcher_id));
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/* ---- 9: on_release outside the purgatory's shutdown lock ---- */

/*
 * purgatory.h: on_release "runs with no lock the purgatory took held: not
 * the purgatory's own". Shutdown ran the on_release of the ops it handed
 * back while it held its shutdown lock (the second review of the
 * headers): thread A, holding its lock L around its own call to
 * tw_purgatory_shutdown, waited for that lock, and B's on_release, which
 * takes L, waited for A -- a hang. Now a second shutdown waits for the
 * first one's work, not for its on_releases. (A bounded wait stands for
 * the hang: a failure, not a stuck test.)
 */
static pthread_mutex_t release_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int release_started, a_holds_lock, release_got_lock;

static bool never_done(struct tw_delayed_op *op)
{
	(void)op;
	return false;
}

static void nothing(struct tw_delayed_op *op)
{
	(void)op;
}

static void release_takes_the_lock(struct tw_delayed_op *op)
{
	struct timespec until;

	(void)op;
	atomic_store(&release_started, 1);
	WAIT_FOR(atomic_load(&a_holds_lock), "thread A to take its lock");
	nanosleep(&(struct timespec){ 0, 100000000 }, NULL); /* A is inside its
								 shutdown call by now */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 3;
	if (pthread_mutex_timedlock(&release_lock, &until) == 0) {
		atomic_store(&release_got_lock, 1);
		pthread_mutex_unlock(&release_lock);
	}
}

static void *shutdown_holding_the_lock(void *arg)
{
	WAIT_FOR(atomic_load(&release_started), "on_release to start");
	pthread_mutex_lock(&release_lock);
	atomic_store(&a_holds_lock, 1);
	CHECK_EQ(tw_purgatory_shutdown(arg, NULL), 0);
	pthread_mutex_unlock(&release_lock);
	return NULL;
}

static void test_on_release_runs_outside_the_shutdown_lock(void)
{
	static const struct tw_op_ops ops = { never_done, nothing, NULL,
					      release_takes_the_lock };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	static struct {
		struct tw_delayed_op op;
		struct tw_watch w;
	} o;
	const void *keys[1] = { "k" };
	size_t lens[1] = { 1 };
	pthread_t a;

	CHECK_EQ(tw_op_init(&o.op, 100000, &ops, NULL), TW_OK);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 1, &o.w), 0);
	pthread_create(&a, NULL, shutdown_holding_the_lock, p);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 1); /* hands the op back */
	pthread_join(a, NULL);
	CHECK_EQ(atomic_load(&release_got_lock), 1);
	tw_purgatory_destroy(p);
}

/* ---- 9: the purge walk beside a growing shard ---- */

/*
 * The walk over every shard read a shard's table pointer in its loop
 * condition before taking that shard's lock, while a watch of a new key
 * replaced the table under the lock when the shard grew (its 9th key): a
 * data race (purgatory.h: every call may be made from any thread).
 * No test had a purge beside a growing shard: the threaded tests that
 * purge watch 8 keys over 4 shards, and a shard grows at its 9th; the
 * test whose shards grow is single-threaded.
 *
 * Here the purge's on_release of an op of shard s (run after shard s is
 * unlocked, before shard s + 1 is read) waits until another thread has
 * grown shard s + 1. The two threads meet through relaxed atomics only,
 * which order nothing for ThreadSanitizer: the table's read and its write
 * are ordered by nothing but the shard's lock, and TSan reported the read
 * (make tsan) until the walk read the table under the lock.
 */
static atomic_int walk_in_release, shard_grown;

static bool never_try(struct tw_delayed_op *op)
{
	(void)op;
	return false;
}

static void nothing_to_do(struct tw_delayed_op *op)
{
	(void)op;
}

static void release_waits_for_the_grow(struct tw_delayed_op *op)
{
	(void)op;
	atomic_store_explicit(&walk_in_release, 1, memory_order_relaxed);
	while (!atomic_load_explicit(&shard_grown, memory_order_relaxed))
		sched_yield();
}

enum { GROW_KEYS = 9 };

struct grower {
	struct tw_purgatory *p;
	struct tw_delayed_op ops[GROW_KEYS];
	struct tw_watch watches[GROW_KEYS];
	char keys[GROW_KEYS][16];
};

static void *grow_a_shard(void *arg)
{
	struct grower *g = arg;

	while (!atomic_load_explicit(&walk_in_release, memory_order_relaxed))
		sched_yield();
	for (int i = 0; i < GROW_KEYS; i++) {
		const void *k[1] = { g->keys[i] };
		size_t len[1] = { strlen(g->keys[i]) };

		CHECK_EQ(tw_purgatory_try_complete_else_watch(g->p, &g->ops[i], k, len,
							      1, &g->watches[i]),
			 0);
	}
	atomic_store_explicit(&shard_grown, 1, memory_order_relaxed);
	return NULL;
}

/* A key of shard `shard` of p, not yet in use (n counts the tries). */
static void key_in_shard(struct tw_purgatory *p, unsigned shard, unsigned *n,
			 char out[16])
{
	do
		snprintf(out, 16, "key-%u", (*n)++);
	while (hash_key(out, strlen(out)) % p->nshards != shard);
}

static void test_a_purge_beside_a_growing_shard(void)
{
	static const struct tw_op_ops walked_ops = { never_try, nothing_to_do,
						     nothing_to_do,
						     release_waits_for_the_grow };
	static const struct tw_op_ops grown_ops = { never_try, nothing_to_do,
						    nothing_to_do, nothing_to_do };
	static struct grower g;
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct tw_delayed_op walked;
	struct tw_watch w;
	char walked_key[16];
	const void *k[1] = { walked_key };
	size_t len[1];
	unsigned n = 0;
	pthread_t th;

	atomic_store(&walk_in_release, 0);
	atomic_store(&shard_grown, 0);
	key_in_shard(p, 0, &n, walked_key);
	len[0] = strlen(walked_key);
	g.p = p;
	for (int i = 0; i < GROW_KEYS; i++) {
		key_in_shard(p, 1, &n, g.keys[i]);
		CHECK_EQ(tw_op_init(&g.ops[i], 100, &grown_ops, NULL), TW_OK);
	}
	CHECK_EQ(p->shards[1].nbuckets, (size_t)GROW_KEYS - 1); /* grows at the 9th */
	CHECK_EQ(tw_op_init(&walked, 100, &walked_ops, NULL), TW_OK);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &walked, k, len, 1, &w), 0);
	CHECK(tw_op_force_complete(&walked)); /* its entry holds the last reference */
	pthread_create(&th, NULL, grow_a_shard, &g);
	tw_purgatory_purge(p); /* releases walked, then walks shard 1 */
	pthread_join(th, NULL);
	CHECK(p->shards[1].nbuckets > (size_t)GROW_KEYS - 1);
	CHECK_EQ(tw_purgatory_watched(p), (size_t)GROW_KEYS);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), GROW_KEYS);
	tw_purgatory_destroy(p);
	tw_op_destroy(&walked);
	for (int i = 0; i < GROW_KEYS; i++)
		tw_op_destroy(&g.ops[i]);
}

/* ---- 10: no memory to defer a reference to after a lock ---- */

/*
 * A reference dropped under a purgatory lock runs on_release there when it
 * is the last. Three places collected the references they dropped on a
 * list that grows, and when it could not grow they dropped them in place
 * or lost them: the unlink of a watch entry (purge, key checks, cancel:
 * on_release under the shard lock), cancel_for_key's list of claimed ops
 * (the op claimed, never handed back, never completed) and shutdown's
 * list of handed-back timeouts (on_release under the shutdown lock and
 * the service's). Entries are now chained through their own links and the
 * timeouts' room is reserved before the service's shutdown, so none of
 * them can fail. Here every push onto a list fails (the test point
 * "oplist.push": as when it must grow and no memory is left), and
 * on_release records whether the shard's or the shutdown's lock was held.
 */
static struct tw_purgatory *oom_p;
static atomic_int oom_releases, oom_under_lock, oom_handed, oom_completes;

static bool fail_pushes(const char *point, const void *obj)
{
	(void)obj;
	return !strcmp(point, "oplist.push");
}

static bool held(pthread_mutex_t *mu)
{
	if (pthread_mutex_trylock(mu))
		return true;
	pthread_mutex_unlock(mu);
	return false;
}

static bool oom_try(struct tw_delayed_op *op)
{
	(void)op;
	return false;
}

static void oom_complete(struct tw_delayed_op *op)
{
	(void)op;
	atomic_fetch_add(&oom_completes, 1);
}

static void oom_release(struct tw_delayed_op *op)
{
	bool locked = held(&oom_p->shutdown_mu);

	(void)op;
	for (unsigned i = 0; i < oom_p->nshards; i++)
		locked |= held(&oom_p->shards[i].mu);
	atomic_fetch_add(&oom_releases, 1);
	if (locked)
		atomic_fetch_add(&oom_under_lock, 1);
}

static void oom_hand_back(struct tw_delayed_op *op)
{
	(void)op;
	atomic_fetch_add(&oom_handed, 1);
}

static const struct tw_op_ops oom_ops = { oom_try, oom_complete, oom_complete,
					  oom_release };

static void oom_watch(struct tw_delayed_op *op, struct tw_watch *w)
{
	const void *k[1] = { "topic-0" };
	size_t len[1] = { 7 };

	oom_p = manual_purgatory_purging(0);
	atomic_store(&oom_releases, 0);
	atomic_store(&oom_under_lock, 0);
	atomic_store(&oom_handed, 0);
	atomic_store(&oom_completes, 0);
	CHECK_EQ(tw_op_init(op, 100, &oom_ops, NULL), TW_OK);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(oom_p, op, k, len, 1, w), 0);
}

static void test_a_purge_without_memory_releases_outside_the_shard_lock(void)
{
	struct tw_delayed_op op;
	struct tw_watch w;

	oom_watch(&op, &w);
	CHECK(tw_op_force_complete(&op)); /* its entry holds the last reference */
	tw__test_set_fail(fail_pushes);
	tw_purgatory_purge(oom_p);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	CHECK_EQ(atomic_load(&oom_under_lock), 0);
	CHECK_EQ(tw_purgatory_watched(oom_p), 0);
	tw_purgatory_destroy(oom_p);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	tw_op_destroy(&op);
}

static void test_a_cancel_without_memory_hands_back_what_it_claims(void)
{
	struct tw_delayed_op op;
	struct tw_watch w;

	oom_watch(&op, &w);
	tw__test_set_fail(fail_pushes);
	CHECK_EQ(tw_purgatory_cancel_for_key(oom_p, "topic-0", 7, oom_hand_back), 1);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&oom_handed), 1);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	CHECK_EQ(atomic_load(&oom_under_lock), 0);
	CHECK_EQ(tw_purgatory_delayed(oom_p), 0);
	tw_purgatory_destroy(oom_p);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	CHECK_EQ(atomic_load(&oom_completes), 0);
	tw_op_destroy(&op);
}

static void *force_op_thread(void *arg)
{
	CHECK(tw_op_force_complete(arg));
	return NULL;
}

static void *shutdown_thread(void *arg)
{
	CHECK_EQ(tw_purgatory_shutdown(arg, oom_hand_back), 0);
	return NULL;
}

/* The model's completer between its claim and its cancel: the service's
 * shutdown holds the op's timeout, so the completer's cancel leaves its
 * reference to the hand-back, and the completer's own goes first. */
static void test_a_shutdown_without_memory_releases_outside_its_lock(void)
{
	struct tw_delayed_op op;
	struct tw_watch w;
	struct sp_thread completer, closer;
	int claimed, handing;

	oom_watch(&op, &w);
	claimed = sp_arm("force_complete.claimed", &op);
	sp_spawn(&completer, force_op_thread, &op);
	CHECK(sp_wait(claimed, &completer.done));
	tw_purgatory_purge(oom_p); /* the entry's reference goes */
	CHECK_EQ(atomic_load(&oom_releases), 0);
	handing = sp_arm("shutdown.hand_back", &op.timer);
	sp_spawn(&closer, shutdown_thread, oom_p);
	CHECK(sp_wait(handing, &closer.done));
	sp_release(claimed); /* its cancel cannot stop the timeout */
	sp_join(&completer, "force_complete");
	CHECK_EQ(atomic_load(&oom_releases), 0); /* the timeout's is the last */
	tw__test_set_fail(fail_pushes);
	sp_release(handing);
	sp_join(&closer, "shutdown");
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&oom_completes), 1);
	CHECK_EQ(atomic_load(&oom_handed), 0);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	CHECK_EQ(atomic_load(&oom_under_lock), 0);
	tw_purgatory_destroy(oom_p);
	CHECK_EQ(atomic_load(&oom_releases), 1);
	tw_op_destroy(&op);
}

static bool fail_reserve(const char *point, const void *obj)
{
	(void)obj;
	return !strcmp(point, "oplist.reserve");
}

/* More armed timeouts than shutdown holds without memory (32): with no
 * room for their references, shutdown changes nothing and says so, and a
 * later call succeeds; destroy goes on without it. */
static void test_a_shutdown_without_room_for_its_timeouts_changes_nothing(void)
{
	enum { N = 40 };
	static struct tw_delayed_op ops[N];
	static struct tw_watch ws[N];
	const void *k[1] = { "topic-0" };
	size_t len[1] = { 7 };

	for (int destroy = 0; destroy < 2; destroy++) {
		oom_watch(&ops[0], &ws[0]);
		for (int i = 1; i < N; i++) {
			CHECK_EQ(tw_op_init(&ops[i], 100, &oom_ops, NULL), TW_OK);
			CHECK_EQ(tw_purgatory_try_complete_else_watch(oom_p, &ops[i], k, len,
								      1, &ws[i]),
				 0);
		}
		tw__test_set_fail(fail_reserve);
		if (destroy) {
			tw_purgatory_destroy(oom_p);
			tw__test_set_fail(NULL);
			CHECK_EQ(atomic_load(&oom_releases), N);
		} else {
			CHECK_EQ(tw_purgatory_shutdown(oom_p, oom_hand_back), TW_ENOMEM);
			tw__test_set_fail(NULL);
			CHECK_EQ(atomic_load(&oom_handed), 0);
			CHECK_EQ(tw_purgatory_watched(oom_p), (size_t)N);
			CHECK_EQ(tw_purgatory_delayed(oom_p), (size_t)N);
			CHECK_EQ(tw_purgatory_shutdown(oom_p, oom_hand_back), N);
			CHECK_EQ(atomic_load(&oom_handed), N);
			CHECK_EQ(atomic_load(&oom_releases), N);
			CHECK_EQ(atomic_load(&oom_under_lock), 0);
			tw_purgatory_destroy(oom_p);
		}
		CHECK_EQ(atomic_load(&oom_releases), N);
		CHECK_EQ(atomic_load(&oom_completes), 0);
		for (int i = 0; i < N; i++)
			tw_op_destroy(&ops[i]);
	}
}

int main(int argc, char **argv)
{
	sp_install();
	RUN_IF(test_no_second_on_release_from_a_call_at_count_zero);
	RUN_IF(test_completion_never_waits_for_its_expired_timeout);
	RUN_IF(test_completion_never_waits_for_its_expired_timeout_shared_lock);
	RUN_IF(test_no_on_release_under_the_callers_shared_lock);
	RUN_IF(test_completion_in_a_ring_with_a_service_keeps_no_reference);
	RUN_IF(test_completion_before_the_timeouts_push_lets_go_of_it);
	RUN_IF(test_an_op_never_watched_has_no_on_release);
	RUN_IF(test_a_timeout_past_the_clocks_end_is_armed);
	RUN_IF(test_a_completion_never_releases_the_op_inside_the_watch_call);
	RUN_IF(test_on_release_runs_outside_the_shutdown_lock);
	RUN_IF(test_a_put_reads_nothing_of_the_op_after_it);
	RUN_IF(test_a_force_during_the_first_watch_completes_the_op);
	RUN_IF(test_a_force_before_the_watch_claims_refuses_the_watch);
	RUN_IF(test_a_purge_beside_a_growing_shard);
	RUN_IF(test_a_purge_without_memory_releases_outside_the_shard_lock);
	RUN_IF(test_a_cancel_without_memory_hands_back_what_it_claims);
	RUN_IF(test_a_shutdown_without_memory_releases_outside_its_lock);
	RUN_IF(test_a_shutdown_without_room_for_its_timeouts_changes_nothing);
	return check_report();
}
