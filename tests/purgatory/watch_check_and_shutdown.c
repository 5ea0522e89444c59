/* SPDX-License-Identifier: MIT */
/*
 * No completion is lost between a watch, a key check and a shutdown: the
 * purgatory's races, each driven deterministically through the named
 * test points of the library (tests/support/stop_points.h), as in
 * tests/service/cancel_sync_and_teardown.c: a check between another's
 * check and watch, a failed watch, one watch per init, shutdown beside a
 * watch in flight, a forced completion holding the op across its claim,
 * shutdown dropping the reference of a claimed op's timeout.
 */
#define _POSIX_C_SOURCE 200809L

#include "forced_jobs.h"

/* ---- the purgatory ---- */

struct pop {
	struct tw_delayed_op op;
	struct tw_watch w;
	atomic_int ready, completes, expires, releases, handed;
};

static bool pop_try(struct tw_delayed_op *op)
{
	struct pop *o = tw_container_of(op, struct pop, op);

	return atomic_load(&o->ready) && tw_op_force_complete(op);
}

static void pop_complete(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct pop, op)->completes, 1);
}

static void pop_expire(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct pop, op)->expires, 1);
}

static void pop_release(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct pop, op)->releases, 1);
}

static void pop_hand_back(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct pop, op)->handed, 1);
}

static void pop_init(struct pop *o)
{
	static const struct tw_op_ops pop_ops = { pop_try, pop_complete,
						  pop_expire, pop_release, NULL };

	memset(o, 0, sizeof(*o));
	CHECK_EQ(tw_op_init(&o->op, 100, &pop_ops, NULL), TW_OK);
}

static struct tw_purgatory *manual_purgatory(void)
{
	return manual_purgatory_purging(0);
}

static const char key[] = "topic-0";

struct key_check {
	struct tw_purgatory *p;
	struct pop *o;
};

/* Between the op's failed check and its watch: the condition comes true
 * and the key is checked (the op is on no list yet). */
static void condition_then_check(const void *obj, void *arg)
{
	struct key_check *kc = arg;

	(void)obj;
	atomic_store(&kc->o->ready, 1);
	CHECK_EQ(tw_purgatory_check_and_complete(kc->p, key, sizeof(key)), 0);
}

/*
 * A check_and_complete between try_complete_else_watch's check and its
 * watch finds nobody to try; without a second check the op would wait for
 * its timeout though its condition held. Kafka checks again after
 * watching, and so does the purgatory.
 */
static void test_purgatory_check_between_check_and_watch_is_not_lost(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct key_check kc = { p, &o };
	const void *keys[1] = { key };
	size_t lens[1] = { sizeof(key) };

	pop_init(&o);
	sp_on("watch.checked", &o.op, condition_then_check, &kc);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 1, &o.w), 1);
	CHECK(tw_op_is_completed(&o.op));
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	atomic_store(&virtual_now, 2000);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(atomic_load(&o.expires), 0);
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

/* The second key's watch list cannot be allocated. */
static const char key1[] = "topic-1";

static bool fail_key1(const char *point, const void *obj)
{
	return strcmp(point, "watchers.alloc") == 0 && obj == key1;
}

/* After the failed watch let go of the op's lock, before it takes back
 * its first entry: a force finds the op claimed by the watch, and a check
 * of the first key drops the completed entry from its list. */
static void force_then_check(const void *obj, void *arg)
{
	struct key_check *kc = arg;

	(void)obj;
	CHECK(!tw_op_force_complete(&kc->o->op));
	CHECK_EQ(tw_purgatory_check_and_complete(kc->p, key, sizeof(key)), 0);
}

/*
 * A watch that fails half-way (out of memory on its second key) takes back
 * the entries it made. One of them may be gone already: the watch claimed
 * the op (nothing completes it after TW_ENOMEM), and a key
 * check then unlinks its entries, as it would after a force. Taking it
 * back again through the entry's list pointer, which that unlink cleared,
 * would crash; the entry's own link says whether it is still in a list.
 */
static void test_a_failed_watch_takes_back_only_entries_still_linked(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct tw_watch ws[2];
	struct key_check kc = { p, &o };
	const void *keys[2] = { key, key1 };
	size_t lens[2] = { sizeof(key), sizeof(key1) };

	pop_init(&o);
	tw__test_set_fail(fail_key1);
	sp_on("watch.failed", &o.op, force_then_check, &kc);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 2, ws),
		 TW_ENOMEM);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&o.completes), 0);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(atomic_load(&o.releases), 1); /* every reference went */
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(atomic_load(&o.handed), 0);
	tw_op_destroy(&o.op);
}

/* Between the second key's failure and the watch's claim, under the op's
 * lock: a completion from another thread's point of view (a
 * force_complete does not take the op's lock) claims the op first. */
static void force_first(const void *obj, void *arg)
{
	struct key_check *kc = arg;

	(void)obj;
	CHECK(tw_op_force_complete(&kc->o->op));
}

/*
 * The watch's claim can lose only to a completion from outside the op's
 * lock (a force_complete, a cancel of a key the op was on). The op then
 * ended as a watched op that completed since would: the call returns 0,
 * not TW_ENOMEM (which says the op never completes), still takes back
 * its entries, and arms no timeout.
 */
static void test_a_completion_before_a_failed_watchs_claim_makes_it_watched(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct tw_watch ws[2];
	struct key_check kc = { p, &o };
	const void *keys[2] = { key, key1 };
	size_t lens[2] = { sizeof(key), sizeof(key1) };

	pop_init(&o);
	tw__test_set_fail(fail_key1);
	sp_on("watch.failing", &o.op, force_first, &kc);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 2, ws), 0);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(tw_purgatory_watched(p), 0); /* its entry taken back */
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.expires), 0);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(atomic_load(&o.handed), 0);
	tw_op_destroy(&o.op);
}

struct watcher {
	struct tw_purgatory *p;
	struct pop *o;
	int result;
};

static void *watch_thread(void *arg)
{
	struct watcher *w = arg;
	const void *keys[1] = { key };
	size_t lens[1] = { sizeof(key) };

	w->result = tw_purgatory_try_complete_else_watch(w->p, &w->o->op, keys,
							 lens, 1, &w->o->w);
	return NULL;
}

/*
 * A watch that failed has run the op's on_release (the purgatory let go
 * of it); a second watch of the op would end with on_release a second
 * time. A second watch of an op, racing or after one that failed, or
 * after one whose op a key check completed, gets TW_EBUSY: one watch per
 * tw_op_init. The racing pair is forced: the first watch is parked right
 * after it claimed the op.
 */
static void test_one_watch_per_init(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o, r, c;
	struct tw_watch ws[2];
	const void *keys[2] = { key, key1 };
	size_t lens[2] = { sizeof(key), sizeof(key1) };

	/* after a failed watch: refused, and on_release ran once */
	pop_init(&o);
	tw__test_set_fail(fail_key1);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 2, ws),
		 TW_ENOMEM);
	tw__test_set_fail(NULL);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 2, ws),
		 TW_EBUSY);
	CHECK_EQ(tw_purgatory_watched(p), 0);

	/* completed by a key check while still on another key's list */
	pop_init(&c);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &c.op, keys, lens, 2, ws), 0);
	atomic_store(&c.ready, 1);
	CHECK_EQ(tw_purgatory_check_and_complete(p, key, sizeof(key)), 1);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &c.op, keys, lens, 2, ws),
		 TW_EBUSY);

	/* a second watch while the first is inside its call */
	pop_init(&r);
	{
		struct sp_thread first;
		struct tw_watch w2;
		int parked = sp_arm("watch.open", &r.op);
		struct watcher wa = { p, &r, 0 };

		sp_spawn(&first, watch_thread, &wa);
		CHECK(sp_wait(parked, &first.done));
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &r.op, keys, lens, 1,
							      &w2),
			 TW_EBUSY);
		sp_release(parked);
		sp_join(&first, "the first watch");
		CHECK_EQ(wa.result, 0);
	}
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 1); /* r */
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(atomic_load(&c.releases), 1);
	CHECK_EQ(atomic_load(&r.releases), 1);
	tw_op_destroy(&o.op);
	tw_op_destroy(&c.op);
	tw_op_destroy(&r.op);
}

struct pshut {
	struct tw_purgatory *p;
	int64_t result;
};

static void *purgatory_shutdown_thread(void *arg)
{
	struct pshut *s = arg;

	s->result = tw_purgatory_shutdown(s->p, pop_hand_back);
	return NULL;
}

/* A watch parked at point; shutdown on another thread must wait for it
 * (park at its wait, not finish) until the watch returns. Then the op,
 * watched, is handed back, and released before shutdown returned. */
static void shutdown_waits_for_a_watch_parked_at(const char *point)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct watcher w = { p, &o, -1000 };
	struct pshut s = { p, -1000 };
	struct sp_thread wt, st;
	int parked, waiting;

	pop_init(&o);
	parked = sp_arm(point, &o.op);
	sp_spawn(&wt, watch_thread, &w);
	CHECK(sp_wait(parked, &wt.done));
	waiting = sp_arm("purgatory.shutdown.wait", p);
	sp_spawn(&st, purgatory_shutdown_thread, &s);
	/* it waits for the watch: it must not finish first */
	CHECK(sp_wait(waiting, &st.done));
	sp_release(parked);
	sp_join(&wt, "try_complete_else_watch");
	sp_release(waiting);
	sp_join(&st, "purgatory shutdown");
	CHECK_EQ(w.result, 0);
	CHECK_EQ(s.result, 1);
	CHECK_EQ(atomic_load(&o.handed), 1);
	CHECK(tw_op_is_completed(&o.op));
	CHECK_EQ(atomic_load(&o.completes), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_purgatory_destroy(p);
	tw_op_destroy(&o.op);
}

/*
 * An op that passed the "closing" check and watched after shutdown had
 * walked the lists would never be completed, expired or handed back.
 * Shutdown waits for such calls to finish before it walks.
 */
static void test_purgatory_shutdown_waits_for_a_watch_in_flight(void)
{
	shutdown_waits_for_a_watch_parked_at("watch.open");
}

/*
 * A watch's last steps -- the put of its own reference, which releases
 * an op that shutdown has handed back, and the purge it may make, a walk
 * of every list -- belong to the call shutdown waits for. Shutdown let
 * go of the watch before them: it returned with an op it handed back not
 * yet released, and a destroy after it freed the purgatory under the
 * purge (ASan: a use after free in the walk).
 */
static void test_purgatory_shutdown_waits_for_a_watchs_last_steps(void)
{
	shutdown_waits_for_a_watch_parked_at("watch.armed");
}

struct forcer {
	struct pop *o;
	int releases_seen_at_complete;
	bool result;
};

static void *force_thread(void *arg)
{
	struct forcer *f = arg;

	f->result = tw_op_force_complete(&f->o->op);
	return NULL;
}

/*
 * tw_op_force_complete() from outside try_complete took a reference only
 * after its claim: in between, the op's last references could go (its
 * entry purged, its timeout run) and on_release ran before on_complete.
 */
static void test_force_complete_holds_the_op_across_its_claim(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct forcer f = { &o, 0, false };
	struct sp_thread ft;
	const void *keys[1] = { key };
	size_t lens[1] = { sizeof(key) };
	int claimed;

	pop_init(&o);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 1, &o.w), 0);
	claimed = sp_arm("force_complete.claimed", &o.op);
	sp_spawn(&ft, force_thread, &f);
	CHECK(sp_wait(claimed, &ft.done));
	/* Completed now: the key check drops its entry, the timeout runs. */
	CHECK_EQ(tw_purgatory_check_and_complete(p, key, sizeof(key)), 0);
	atomic_store(&virtual_now, 2000);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(atomic_load(&o.releases), 0); /* the forcer still holds it */
	sp_release(claimed);
	sp_join(&ft, "force_complete");
	CHECK(f.result);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.expires), 0);
	CHECK_EQ(atomic_load(&o.releases), 1);
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

struct checker_args {
	struct tw_purgatory *p;
	int64_t result;
};

static void *check_key_thread(void *arg)
{
	struct checker_args *c = arg;

	c->result = tw_purgatory_check_and_complete(c->p, key, sizeof(key));
	return NULL;
}

/*
 * A key check has claimed the op and not yet cancelled its timeout when
 * shutdown runs (a case model/purgatory.pml reaches). Shutdown does not
 * claim it (it is completed), and the service's own shutdown hands the
 * armed timeout back: handed to nobody, the timeout's reference would
 * leak and on_release never run. The purgatory takes that hand-back and
 * drops it.
 */
static void test_purgatory_shutdown_drops_the_reference_of_a_claimed_ops_timeout(void)
{
	struct tw_purgatory *p = manual_purgatory();
	struct pop o;
	struct checker_args c = { p, -1000 };
	struct sp_thread ct;
	const void *keys[1] = { key };
	size_t lens[1] = { sizeof(key) };
	int claimed;

	pop_init(&o);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 1, &o.w), 0);
	atomic_store(&o.ready, 1);
	claimed = sp_arm("force_complete.claimed", &o.op);
	sp_spawn(&ct, check_key_thread, &c);
	CHECK(sp_wait(claimed, &ct.done));
	CHECK_EQ(tw_purgatory_shutdown(p, pop_hand_back), 0);
	sp_release(claimed);
	sp_join(&ct, "check_and_complete");
	CHECK_EQ(c.result, 1);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.handed), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&o.releases), 1);
	tw_op_destroy(&o.op);
}

int main(void)
{
	sp_install();
	RUN(test_purgatory_check_between_check_and_watch_is_not_lost);
	RUN(test_a_failed_watch_takes_back_only_entries_still_linked);
	RUN(test_a_completion_before_a_failed_watchs_claim_makes_it_watched);
	RUN(test_one_watch_per_init);
	RUN(test_purgatory_shutdown_waits_for_a_watch_in_flight);
	RUN(test_purgatory_shutdown_waits_for_a_watchs_last_steps);
	RUN(test_force_complete_holds_the_op_across_its_claim);
	RUN(test_purgatory_shutdown_drops_the_reference_of_a_claimed_ops_timeout);
	return check_report();
}
