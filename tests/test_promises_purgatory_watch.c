/* SPDX-License-Identifier: MIT */
/*
 * The purgatory's promises about the op's watch call, forced through the
 * test points as in test_promises_purgatory.c: a completion from outside
 * racing the op's first watch, and one racing the watch call, which never
 * releases the op inside the call.
 */
#define _POSIX_C_SOURCE 200809L

#include "purgatory_gops.h"

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

int main(int argc, char **argv)
{
	sp_install();
	RUN_IF(test_a_completion_never_releases_the_op_inside_the_watch_call);
	RUN_IF(test_a_force_during_the_first_watch_completes_the_op);
	RUN_IF(test_a_force_before_the_watch_claims_refuses_the_watch);
	return check_report();
}
