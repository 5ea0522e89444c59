/* SPDX-License-Identifier: MIT */
/*
 * A completion that races an op's watch completes it once and never
 * releases it inside the watch call, and a watch that fails for want of
 * memory never completes its op nor waits for a key check: the
 * purgatory's promises about the op's watch call, forced through the
 * test points as in completion_and_release.c.
 */
#define _POSIX_C_SOURCE 200809L

#include "purgatory_forced_ops.h"

#ifdef TW_DEBUG
#include "child.h"
#endif

/* ---- a completion from outside racing the op's first watch ---- */

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
 * A watch that had claimed the op (its compare-and-swap named the
 * purgatory) and not yet taken its first reference would let a
 * force_complete from another thread find the count at zero, take the op
 * for one on its way to on_release, and return false without completing
 * it (the op then waiting for its timeout). The watch names the
 * purgatory only after its first reference; until then a completion from
 * outside waits (two steps of the watch). The watch is held there, the
 * force waits, the watch goes on (not ready: it watches), and the force
 * completes the op.
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
 * A kafka-mode purgatory refuses to watch an op with a tolerance, and
 * reads the tolerance only once its watch has claimed the op (before
 * that the field may be a racing watch's armed due time). Refused there,
 * the watch gives the claim back before any reference: a force_complete
 * from another thread, waiting for the watch's next steps, then finds
 * the op nobody watches and completes it as never watched (no
 * on_release). Forced: the watch is held right after its claim
 * ("watch.claimed"), the force waits on it ("outside.watch_starting"),
 * the watch goes on and is refused (TW_EINVAL), the force goes on.
 */
static void test_a_refused_kafka_watch_gives_its_claim_to_a_waiting_force(void)
{
	struct tw_purgatory *p = NULL;
	struct gop o;
	struct sp_thread watcher, forcer;
	int claimed, waiting;

	p = manual_purgatory_in(TW_MODE_KAFKA);
	gop_init(&o, p, "topic-0", NULL);
	CHECK_EQ(tw_op_set_tolerance(&o.op, 5), TW_OK);
	atomic_store(&watch_result, 99);
	claimed = sp_arm("watch.claimed", &o.op);
	sp_spawn(&watcher, watch_thread_result, &o);
	CHECK(sp_wait(claimed, &watcher.done));
	waiting = sp_arm("outside.watch_starting", &o.op);
	sp_spawn(&forcer, force_thread_result, &o);
	CHECK(sp_wait(waiting, &forcer.done)); /* it waits for the watch */
	sp_release(claimed);
	sp_join(&watcher, "the watch");
	CHECK_EQ(atomic_load(&watch_result), TW_EINVAL);
	sp_release(waiting);
	sp_join(&forcer, "the force");
	CHECK_EQ(atomic_load(&o.try_go), 1); /* force_complete: true */
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(check_key(p, o.key), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.releases), 0); /* never watched: none */
	tw_op_destroy(&o.op);
}

/* ---- a safe_try_complete that looked before the first watch ---- */

static atomic_int safe_try_result = 99;

static void *safe_try_thread_result(void *arg)
{
	atomic_store(&safe_try_result,
		     tw_op_safe_try_complete(&((struct gop *)arg)->op) ? 1 : 0);
	return NULL;
}

/*
 * A safe_try_complete looks: no purgatory watches the op, so it takes no
 * reference. Then the op's first watch completes it by its own
 * try_complete and, before its last step, still holds its reference. The
 * safe try takes the op's lock (here a shared one) and its try_complete
 * force_completes: completed already, false, and the force's reference
 * taken and dropped. Had the safe try not looked again under the lock,
 * that drop, after the watch's own, would be the last one: on_release
 * under the lock the safe try holds (an on_release that takes that lock
 * hangs). It looks again, holds a reference of its own across the locked
 * section, and on_release runs after its unlock.
 */
static void test_a_safe_try_that_looked_before_the_watch_releases_unlocked(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct gop o;
	struct sp_thread trier, watcher;
	int looked, armed, held;

	gop_init(&o, p, "topic-0", &mu);
	atomic_store(&o.ready, 1);
	atomic_store(&watch_result, 99);
	looked = sp_arm("safe_try.looked", &o.op);
	sp_spawn(&trier, safe_try_thread_result, &o);
	CHECK(sp_wait(looked, &trier.done)); /* not watched: no reference */
	armed = sp_arm("watch.armed", &o.op);
	sp_spawn(&watcher, watch_thread_result, &o);
	CHECK(sp_wait(armed, &watcher.done)); /* completed; its reference held */
	CHECK_EQ(atomic_load(&o.completes), 1);
	held = sp_arm("force_complete.held", &o.op);
	sp_release(looked);
	CHECK(sp_wait(held, &trier.done)); /* the force's reference, under mu */
	sp_release(armed);
	sp_join(&watcher, "the watch");
	CHECK_EQ(atomic_load(&watch_result), 1); /* its own try completed it */
	CHECK_EQ(atomic_load(&o.releases), 0);
	sp_release(held);
	sp_join(&trier, "the safe try");
	CHECK_EQ(atomic_load(&safe_try_result), 0); /* completed by the watch */
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(atomic_load(&o.released_under_lock), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
	pthread_mutex_destroy(&mu);
}

/* ---- shutdown against a completion from outside ---- */

static atomic_int ops_handed_back;

static void count_handed_op(struct tw_delayed_op *op)
{
	(void)op;
	atomic_fetch_add(&ops_handed_back, 1);
}

/*
 * purgatory.h, tw_purgatory_shutdown(): a handed-back op that a
 * tw_op_force_complete() on another thread holds meanwhile (a reference
 * of its own) gets its on_release when that call returns, not during the
 * shutdown; tw_purgatory_destroy() waits for no such call, so it comes
 * after. Forced: the force parks holding its reference
 * ("force_complete.held"); shutdown claims the watched op and hands it
 * back; the force, let go, finds it claimed and drops the last reference.
 */
static void test_a_force_holding_a_handed_back_op_releases_it_on_return(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop o;
	struct sp_thread forcer;
	int held;

	atomic_store(&ops_handed_back, 0);
	gop_init(&o, p, "topic-0", NULL);
	CHECK_EQ(gop_watch(&o), 0); /* not ready: watched */
	held = sp_arm("force_complete.held", &o.op);
	sp_spawn(&forcer, force_thread_result, &o);
	CHECK(sp_wait(held, &forcer.done));
	CHECK_EQ(tw_purgatory_shutdown(p, count_handed_op), 1);
	CHECK_EQ(atomic_load(&ops_handed_back), 1);
	CHECK_EQ(atomic_load(&o.releases), 0); /* the force's reference */
	sp_release(held);
	sp_join(&forcer, "the force");
	CHECK_EQ(atomic_load(&o.try_go), 2); /* claimed by the shutdown */
	CHECK_EQ(atomic_load(&o.completes), 0);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/*
 * The other half: a force_complete that takes the op for never watched
 * (no reference, no on_release) while a watch that already passed its
 * completed check then claims and watches it would let a key check
 * release the op while the force still runs on_complete, and give it an
 * on_release after all. The force marks the op never watched in the
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

/* ---- a completion racing the watch call ---- */

/*
 * purgatory.h: once try_complete_else_watch returns the op may already be
 * released, whatever it returned; while the call runs, another thread's
 * completion never releases it. The watcher is held after its timeout is armed, just
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
					      release_records_thread, NULL };
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

/*
 * The test-point build checks each put against the model's table with the
 * completed flag it loaded just before its decrement (after a put that is
 * not the last, nothing of the op may be read). A completion between that
 * load and the decrement makes the put one of an uncompleted op, MANY ->
 * ONE or ONE -> ZERO: steps the model makes too, once its recording runs
 * load the flag as a step of their own (model/purgatory.pml, op_put). The
 * watcher is held in its last put, the flag loaded; a key check on
 * another thread completes the op there.
 */
static void test_a_completion_between_a_puts_load_and_its_decrement(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct gop o;
	struct sp_thread watcher;
	int armed, loaded;

	gop_init(&o, p, "topic-0", NULL);
	armed = sp_arm("watch.armed", &o.op);
	sp_spawn(&watcher, watch_thread_recording, &o);
	CHECK(sp_wait(armed, &watcher.done));
	loaded = sp_arm("op_put.loaded", &o.op);
	sp_release(armed);
	CHECK(sp_wait(loaded, &watcher.done)); /* its flag: not completed */
	atomic_store(&o.ready, 1);
	CHECK_EQ(check_key(p, o.key), 1);
	CHECK_EQ(atomic_load(&o.completes), 1);
	sp_release(loaded);
	sp_join(&watcher, "the watch");
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	tw_op_destroy(&o.op);
}

/* ---- what a watch's TW_ENOMEM means ---- */

/*
 * X watches [K1, K2]; K2's list cannot be allocated while another thread
 * checks K1 with X ahead in its walk (X's entry on K1 stays: the list is
 * pinned) and is busy with Y, an op before X on K1. The watch returns TW_ENOMEM;
 * a check that then reached X, whose condition came true since, and
 * completed it would run on_complete after TW_ENOMEM, and on_release
 * after it, tens of milliseconds after the call returned. The watch
 * that fails claims the op (as a cancel does) before it lets go of its
 * lock: from TW_ENOMEM on, nothing completes it. The watch is held at
 * the failure, under the op's lock, before its claim ("watch.failing"),
 * while the check pins K1's list. Its on_release cannot
 * have run by the return here: the check still holds it (purgatory.h
 * says so, and why the watch does not wait for it:
 * test_a_failed_watch_waits_for_no_key_check); it runs on the check's
 * thread when the check lets go.
 */
static const char k1[] = "topic-1", k2[] = "topic-2";

struct two_keys {
	struct gop g;
	struct tw_watch w[2];
};

static bool fail_k2(const char *point, const void *obj)
{
	return !strcmp(point, "watchers.alloc") && obj == k2;
}

static pthread_mutex_t *watch_holds; /* a lock the watcher holds */

static void *watch_two_keys(void *arg)
{
	struct two_keys *x = arg;
	const void *keys[2] = { k1, k2 };
	size_t lens[2] = { strlen(k1), strlen(k2) };

	if (watch_holds)
		pthread_mutex_lock(watch_holds);
	atomic_store(&watch_result,
		     tw_purgatory_try_complete_else_watch(x->g.p, &x->g.op, keys,
							  lens, 2, x->w));
	if (watch_holds)
		pthread_mutex_unlock(watch_holds);
	return NULL;
}

static atomic_int check_result = 99;

static void *check_k1(void *arg)
{
	atomic_store(&check_result, (int)check_key(arg, k1));
	return NULL;
}

/* X's watch fails on K2 while a check of K1, X ahead in its walk, is
 * parked in Y's try_complete: returns once the watch returned. */
static struct tw_purgatory *failed_watch_held_by_a_check(struct gop *y,
							 struct two_keys *x,
							 struct sp_thread *checker)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct sp_thread watcher;
	int failing;

	gop_init(y, p, k1, NULL);
	CHECK_EQ(gop_watch(y), 0);
	atomic_store(&y->ready, 1);
	atomic_store(&y->try_parks, 1);
	gop_init(&x->g, p, k1, NULL);
	watch_holds = NULL;
	atomic_store(&watch_result, 99);
	tw__test_set_fail(fail_k2);
	failing = sp_arm("watch.failing", &x->g.op);
	sp_spawn(&watcher, watch_two_keys, x);
	CHECK(sp_wait(failing, &watcher.done)); /* X on K1's list; K2 failed */
	tw__test_set_fail(NULL);
	sp_spawn(checker, check_k1, p);
	WAIT_FOR(atomic_load(&y->in_try), "the check to try Y, holding X");
	atomic_store(&x->g.ready, 1); /* X's condition comes true */
	sp_release(failing);
	sp_join(&watcher, "the failed watch");
	return p;
}

static void test_a_failed_watch_never_completes_its_op(void)
{
	static struct gop y;
	static struct two_keys x;
	struct sp_thread checker;
	struct tw_purgatory *p = failed_watch_held_by_a_check(&y, &x, &checker);

	CHECK_EQ(atomic_load(&watch_result), TW_ENOMEM);
	CHECK_EQ(atomic_load(&x.g.completes), 0);
	CHECK_EQ(atomic_load(&x.g.releases), 0); /* the check holds it */
	atomic_store(&y.try_go, 1);
	sp_join(&checker, "the check");
	CHECK_EQ(atomic_load(&check_result), 1); /* Y, not X */
	CHECK_EQ(atomic_load(&x.g.completes), 0);
	CHECK_EQ(atomic_load(&x.g.releases), 1);
	CHECK_EQ(atomic_load(&y.completes), 1);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&x.g.completes), 0);
	CHECK_EQ(atomic_load(&x.g.expires), 0);
	CHECK_EQ(atomic_load(&x.g.releases), 1);
	CHECK_EQ(atomic_load(&y.releases), 1);
	tw_op_destroy(&x.g.op);
	tw_op_destroy(&y.op);
}

/*
 * Why the failed watch does not wait for the other holders of its op,
 * which would make TW_ENOMEM mean "on_release has run": a holder may be
 * running user code that waits for a lock the watch's caller holds, and
 * the header lets a caller hold any lock but the op's around its watch.
 * Here the caller holds L, the lock Y shares, around its watch of X; the
 * check of K1 has X ahead in its walk and needs L to try Y, before X. A
 * watch that waited for the check would wait for ever (the stop points'
 * guard would report the deadlock); this one returns TW_ENOMEM,
 * lets go of L, and the check then tries Y, skips X (claimed) and
 * releases it.
 */
static pthread_mutex_t caller_lock = PTHREAD_MUTEX_INITIALIZER;

static void test_a_failed_watch_waits_for_no_key_check(void)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);
	static struct gop y;
	static struct two_keys x;
	struct sp_thread watcher, checker;
	int failing, walking;

	gop_init(&y, p, k1, &caller_lock);
	CHECK_EQ(gop_watch(&y), 0);
	atomic_store(&y.ready, 1);
	gop_init(&x.g, p, k1, NULL);
	watch_holds = &caller_lock;
	atomic_store(&watch_result, 99);
	tw__test_set_fail(fail_k2);
	failing = sp_arm("watch.failing", &x.g.op);
	sp_spawn(&watcher, watch_two_keys, &x);
	CHECK(sp_wait(failing, &watcher.done)); /* holding L; X on K1 */
	tw__test_set_fail(NULL);
	walking = sp_arm("check.walk", k1);
	sp_spawn(&checker, check_k1, p);
	CHECK(sp_wait(walking, &checker.done)); /* X ahead of it */
	sp_release(walking); /* on to Y, whose lock L the watcher holds */
	sp_release(failing);
	sp_join(&watcher, "the failed watch (a wait for the check deadlocks)");
	CHECK_EQ(atomic_load(&watch_result), TW_ENOMEM);
	sp_join(&checker, "the check");
	watch_holds = NULL;
	CHECK_EQ(atomic_load(&check_result), 1); /* Y */
	CHECK_EQ(atomic_load(&x.g.completes), 0);
	CHECK_EQ(atomic_load(&x.g.releases), 1);
	CHECK_EQ(atomic_load(&y.completes), 1);
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&x.g.releases), 1);
	CHECK_EQ(atomic_load(&y.releases), 1);
	CHECK_EQ(atomic_load(&y.released_under_lock), 0);
	tw_op_destroy(&x.g.op);
	tw_op_destroy(&y.op);
}

#ifdef TW_DEBUG
/*
 * The checked build agrees with the header: after TW_ENOMEM, while a
 * check still holds the op, a tw_op_init of it is a mistake (its
 * on_release has not run), and the abort says why, naming the failed
 * watch, not only "still held". In a child, which dies there.
 */
static void init_before_the_failed_watchs_release(void *arg)
{
	static struct gop y;
	static struct two_keys x;
	struct sp_thread checker;

	(void)arg;
	failed_watch_held_by_a_check(&y, &x, &checker);
	CHECK_EQ(atomic_load(&watch_result), TW_ENOMEM);
	tw_op_init(&x.g.op, 100, &gop_ops, NULL); /* the mistake */
}

static void test_the_checked_build_names_an_init_before_a_failed_watchs_release(void)
{
	char out[4096];

	CHECK_EQ(run_in_child(init_before_the_failed_watchs_release, NULL, out,
			      sizeof(out)),
		 SIGABRT);
	if (!strstr(out, "tw_op_init(") || !strstr(out, "returned TW_ENOMEM") ||
	    !strstr(out, "on_release")) {
		fprintf(stderr, "not named:\n%s\n", out);
		CHECK(0);
	}
}
#endif

int main(int argc, char **argv)
{
	sp_install();
	RUN_IF(test_a_completion_never_releases_the_op_inside_the_watch_call);
	RUN_IF(test_a_completion_between_a_puts_load_and_its_decrement);
	RUN_IF(test_a_force_during_the_first_watch_completes_the_op);
	RUN_IF(test_a_force_before_the_watch_claims_refuses_the_watch);
	RUN_IF(test_a_refused_kafka_watch_gives_its_claim_to_a_waiting_force);
	RUN_IF(test_a_safe_try_that_looked_before_the_watch_releases_unlocked);
	RUN_IF(test_a_force_holding_a_handed_back_op_releases_it_on_return);
	RUN_IF(test_a_failed_watch_never_completes_its_op);
	RUN_IF(test_a_failed_watch_waits_for_no_key_check);
#ifdef TW_DEBUG
	RUN_IF(test_the_checked_build_names_an_init_before_a_failed_watchs_release);
#endif
	return check_report();
}
