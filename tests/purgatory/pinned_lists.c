/* SPDX-License-Identifier: MIT */
/*
 * A key check takes no reference per op it tries: it pins the key's list,
 * and while the list is pinned no entry leaves it; the last check out
 * unlinks the completed entries (src/purgatory/core.h, Pins). Each test
 * parks a check at the point "check.walk", its list pinned and its walk
 * ahead, over ops whose last reference is their entry in that list, and
 * does what would unlink that entry and release the op under the check:
 * the op completed from outside and the key checked again, a purge, a
 * cancel_for_key, a shutdown, a second check that leaves first, one that
 * completes an op and leaves first. None may run on_release before the
 * parked check lets go, and each op is released exactly once after it
 * (model/purgatory.pml, scenario 9; its mutations 26, an unlink that does
 * not wait for the pin, and 28, a check that unlinks what it noted
 * though it is not the last out, fail these).
 */
#define _POSIX_C_SOURCE 200809L

#include "purgatory_forced_ops.h"

static const char key[] = "partition-7";

static atomic_llong parked_result;

static void *check_parked_key(void *arg)
{
	atomic_store(&parked_result, check_key(arg, key));
	return NULL;
}

/* A check of the key on another thread, parked at point (with obj, or
 * any obj when NULL). */
static void park_the_check(struct tw_purgatory *p, const char *point,
			   const void *obj, struct sp_thread *checker,
			   int *parked)
{
	atomic_store(&parked_result, -99);
	*parked = sp_arm(point, obj);
	sp_spawn(checker, check_parked_key, p);
	CHECK(sp_wait(*parked, &checker->done));
}

/* n ops watch the key, their condition false, their timeouts armed; a
 * check on another thread is parked at point. */
static struct tw_purgatory *park_a_check_at(struct gop *ops, int n,
					    const char *point, const void *obj,
					    struct sp_thread *checker,
					    int *parked)
{
	struct tw_purgatory *p = manual_purgatory_purging(0);

	for (int i = 0; i < n; i++) {
		gop_init(&ops[i], p, key, NULL);
		CHECK_EQ(gop_watch(&ops[i]), 0);
	}
	CHECK_EQ(tw_purgatory_delayed(p), (size_t)n);
	park_the_check(p, point, obj, checker, parked);
	return p;
}

/* ... with all of them ahead in its walk. */
static struct tw_purgatory *park_a_check(struct gop *ops, int n,
					 struct sp_thread *checker, int *parked)
{
	return park_a_check_at(ops, n, "check.walk", key, checker, parked);
}

/* The parked check goes on; afterwards every op was released once, the
 * list is gone, and nothing is left armed. */
static void let_the_check_go(struct tw_purgatory *p, struct gop *ops, int n,
			     int parked, struct sp_thread *checker)
{
	sp_release(parked);
	sp_join(checker, "the parked check");
	CHECK_EQ(atomic_load(&parked_result), 0);
	for (int i = 0; i < n; i++)
		CHECK_EQ(atomic_load(&ops[i].releases), 1);
	CHECK_EQ(tw_purgatory_watched(p), 0);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(keys_listed(p), 0);
	tw_purgatory_destroy(p);
	for (int i = 0; i < n; i++) {
		CHECK_EQ(atomic_load(&ops[i].releases), 1);
		CHECK_EQ(atomic_load(&ops[i].expires), 0);
		tw_op_destroy(&ops[i].op);
	}
}

/* X is completed from outside (its timeout stopped: its entry holds its
 * last reference); another check of the key finds it completed, and a
 * purge walks every list. Both leave its entry to the parked check. */
static void test_an_unlink_during_a_check_waits_for_it(void)
{
	static struct gop x[1];
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = park_a_check(x, 1, &checker, &parked);

	CHECK(tw_op_force_complete(&x[0].op));
	CHECK_EQ(atomic_load(&x[0].completes), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(check_key(p, key), 0);
	tw_purgatory_purge(p);
	CHECK_EQ(atomic_load(&x[0].releases), 0); /* the parked check holds it */
	CHECK_EQ(tw_purgatory_watched(p), 1);
	let_the_check_go(p, x, 1, parked, &checker);
}

/* The same with two checks parked: the second to pin the list
 * leaves first, and the first, the last one out, drops the entries. */
static void *check_key_again(void *arg)
{
	CHECK_EQ(check_key(arg, key), 0);
	return NULL;
}

static void test_the_last_check_out_drops_the_entries(void)
{
	static struct gop x[3];
	struct sp_thread first, second;
	int parked, parked_again;
	struct tw_purgatory *p = park_a_check(x, 3, &first, &parked);

	parked_again = sp_arm("check.walk", key);
	sp_spawn(&second, check_key_again, p);
	CHECK(sp_wait(parked_again, &second.done));
	for (int i = 0; i < 3; i++)
		CHECK(tw_op_force_complete(&x[i].op));
	tw_purgatory_purge(p);
	sp_release(parked_again);
	sp_join(&second, "the second check");
	for (int i = 0; i < 3; i++)
		CHECK_EQ(atomic_load(&x[i].releases), 0);
	CHECK_EQ(tw_purgatory_watched(p), 3);
	let_the_check_go(p, x, 3, parked, &first);
}

/* A check that completes an op while another check pins the list is not
 * the last one out: it leaves the op's entry (the op's last reference)
 * and marks the list, and the parked check, the last one out, drops it.
 * X is watched after the parked check began, so that check's walk stops
 * before X: only the mark tells it X's entry is there to drop. (Unlinked
 * by the first check, X is released under the parked one; unmarked, X's
 * entry stays after both.) */
static void test_a_check_that_is_not_the_last_leaves_its_entry_to_the_last(void)
{
	static struct gop x[2];
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = park_a_check(x, 1, &checker, &parked);

	gop_init(&x[1], p, key, NULL);
	CHECK_EQ(gop_watch(&x[1]), 0);
	atomic_store(&x[1].ready, 1);
	CHECK_EQ(check_key(p, key), 1);
	CHECK_EQ(atomic_load(&x[1].completes), 1);
	CHECK_EQ(atomic_load(&x[1].releases), 0); /* the parked check pins it */
	CHECK_EQ(tw_purgatory_watched(p), 2);
	CHECK(tw_op_force_complete(&x[0].op));
	let_the_check_go(p, x, 2, parked, &checker);
}

/* Checks that keep overlapping on one key leave a last one out: a check
 * that finds the list dirty and pinned waits at the gate (watch.c) for
 * the checks in it to leave. X is completed from outside and a purge
 * marks the list while a check walks it; a second check then comes. It
 * waits at "check.gate", not pinning the list, so the parked check is
 * the last one out when it leaves, drops X's entry and X is released --
 * before the second check has begun. (Before the gate, the second check
 * pinned the list and walked it: with checks always coming, no entry was
 * ever dropped.) */
static void test_a_check_waits_for_the_checks_in_a_dirty_list(void)
{
	static struct gop x[1];
	struct sp_thread checker, second;
	int parked, gated;
	struct tw_purgatory *p = park_a_check(x, 1, &checker, &parked);

	CHECK(tw_op_force_complete(&x[0].op));
	tw_purgatory_purge(p); /* the list pinned: marked for the last out */
	CHECK_EQ(atomic_load(&x[0].releases), 0);
	gated = sp_arm("check.gate", key);
	sp_spawn(&second, check_key_again, p);
	CHECK(sp_wait(gated, &second.done));
	sp_release(parked);
	sp_join(&checker, "the parked check");
	CHECK_EQ(atomic_load(&parked_result), 0);
	CHECK_EQ(atomic_load(&x[0].releases), 1); /* dropped by the last out */
	CHECK_EQ(tw_purgatory_watched(p), 0);
	sp_release(gated);
	sp_join(&second, "the check at the gate");
	CHECK_EQ(atomic_load(&x[0].releases), 1);
	CHECK_EQ(keys_listed(p), 0);
	tw_purgatory_destroy(p);
	CHECK_EQ(atomic_load(&x[0].expires), 0);
	tw_op_destroy(&x[0].op);
}

/* The same wait from another service's timer callback: that thread pins
 * no list, so it waits at the gate too (a gate left to checks made
 * outside every callback let checkers on executors grow the list as
 * before). */
static struct tw_purgatory *checked_from_a_timer;

static void check_from_a_timer(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
	CHECK_EQ(check_key(checked_from_a_timer, key), 0);
}

static void *poll_the_service(void *arg)
{
	CHECK_EQ(tw_service_poll(arg), 1);
	return NULL;
}

static void test_a_check_from_a_timer_waits_for_the_checks_in_a_dirty_list(void)
{
	static struct gop x[1];
	static struct tw_service_timer timer;
	struct sp_thread checker, poller;
	int parked, gated;
	struct tw_purgatory *p = park_a_check(x, 1, &checker, &parked);
	struct tw_service *svc = service(true, 0);

	checked_from_a_timer = p;
	tw_service_timer_init(&timer, check_from_a_timer);
	CHECK_EQ(tw_service_add(svc, &timer, 1000), TW_OK);
	CHECK(tw_op_force_complete(&x[0].op));
	tw_purgatory_purge(p);
	gated = sp_arm("check.gate", key);
	sp_spawn(&poller, poll_the_service, svc);
	CHECK(sp_wait(gated, &poller.done));
	sp_release(parked);
	sp_join(&checker, "the parked check");
	CHECK_EQ(atomic_load(&x[0].releases), 1);
	sp_release(gated);
	sp_join(&poller, "the timer's check at the gate");
	CHECK_EQ(tw_service_shutdown(svc, NULL, NULL), 0);
	tw_service_destroy(svc);
	CHECK_EQ(keys_listed(p), 0);
	tw_purgatory_destroy(p);
	tw_op_destroy(&x[0].op);
}

/* cancel_for_key on the pinned list claims its ops in place and hands
 * them back at once, their timeouts stopped; their entries stay until
 * the check lets go. 200 ops: more than one of its batches. */
enum { CANCELLED_N = 200 };
static atomic_int handed;

static void count_hand_back(struct tw_delayed_op *op)
{
	struct gop *o = tw_container_of(op, struct gop, op);

	CHECK_EQ(atomic_load(&o->releases), 0); /* alive while handed back */
	atomic_fetch_add(&handed, 1);
}

static void test_a_cancel_meets_a_pinned_list(void)
{
	static struct gop x[CANCELLED_N];
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = park_a_check(x, CANCELLED_N, &checker, &parked);

	atomic_store(&handed, 0);
	CHECK_EQ(tw_purgatory_cancel_for_key(p, key, strlen(key), count_hand_back),
		 CANCELLED_N);
	CHECK_EQ(atomic_load(&handed), CANCELLED_N);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	CHECK_EQ(tw_purgatory_watched(p), CANCELLED_N);
	for (int i = 0; i < CANCELLED_N; i++) {
		CHECK_EQ(atomic_load(&x[i].completes), 0);
		CHECK_EQ(atomic_load(&x[i].releases), 0);
	}
	/* a second cancel finds nothing left to claim */
	CHECK_EQ(tw_purgatory_cancel_for_key(p, key, strlen(key), count_hand_back), 0);
	let_the_check_go(p, x, CANCELLED_N, parked, &checker);
	CHECK_EQ(atomic_load(&handed), CANCELLED_N);
}

/* The ops a cancel claims in place count as completed: each also watches
 * a key nobody checks, and with a purge interval of 10 the cancel's 200
 * bring a purge, which takes their entries off that key's list (and
 * leaves the pinned list to its check); when the check lets go, every op
 * is released. Uncounted, their entries on the other key stayed, and
 * none was released (model/purgatory.pml scenario 12, mutation 30). */
static void test_a_cancel_of_a_pinned_list_counts_towards_a_purge(void)
{
	static struct gop x[CANCELLED_N];
	static struct tw_watch entries[CANCELLED_N][2];
	static const char other[] = "unchecked";
	const void *keys[2] = { key, other };
	size_t lens[2] = { strlen(key), strlen(other) };
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = manual_purgatory_purging(10);

	atomic_store(&parked_result, -99);
	for (int i = 0; i < CANCELLED_N; i++) {
		gop_init(&x[i], p, key, NULL);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &x[i].op, keys, lens,
							      2, entries[i]), 0);
	}
	parked = sp_arm("check.walk", key);
	sp_spawn(&checker, check_parked_key, p);
	CHECK(sp_wait(parked, &checker.done));
	atomic_store(&handed, 0);
	CHECK_EQ(tw_purgatory_cancel_for_key(p, key, strlen(key), count_hand_back),
		 CANCELLED_N);
	CHECK_EQ(tw_purgatory_watched(p), CANCELLED_N); /* the pinned list's */
	for (int i = 0; i < CANCELLED_N; i++)
		CHECK_EQ(atomic_load(&x[i].releases), 0);
	let_the_check_go(p, x, CANCELLED_N, parked, &checker);
}

/* Shutdown's walk finds the list pinned: its second walk claims the ops
 * in place and hands them back before it returns; their on_release comes
 * when the check lets go. */
static void test_a_shutdown_meets_a_pinned_list(void)
{
	static struct gop x[2];
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = park_a_check(x, 2, &checker, &parked);

	atomic_store(&handed, 0);
	CHECK_EQ(tw_purgatory_shutdown(p, count_hand_back), 2);
	CHECK_EQ(atomic_load(&handed), 2);
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(atomic_load(&x[i].releases), 0);
	let_the_check_go(p, x, 2, parked, &checker);
}

/*
 * A check that noted nothing is on its way out, its look at the list
 * taken (clean, its own pin the only one), when a shutdown claims the ops
 * in place, marks the list dirty and lets go of its own pin: the check is
 * now the last one out of a dirty list, and drops the entries on its way
 * out, so that every op shutdown handed back is released by the time the
 * check returns -- not left to a purge, which nothing calls after a
 * shutdown. Forced: the check parked at "check.leaving". (The model's
 * scenario 9 finds the old way out, the look at the mark a step apart
 * from the pin's release, as its mutation 32.)
 */
static void test_a_check_leaving_as_shutdown_marks_its_list_drops_it(void)
{
	static struct gop x[2];
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = park_a_check_at(x, 2, "check.leaving", NULL,
						 &checker, &parked);

	atomic_store(&handed, 0);
	CHECK_EQ(tw_purgatory_shutdown(p, count_hand_back), 2);
	CHECK_EQ(atomic_load(&handed), 2);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(atomic_load(&x[i].releases), 0);
	let_the_check_go(p, x, 2, parked, &checker);
}

/*
 * An op on two keys; a check of one of them walked past it (uncompleted)
 * and is on its way out ("check.leaving") when a shutdown claims the op
 * through its other key's list and unlinks that entry. The entry left on
 * the pinned list is the op's last, and nothing on that list is left for
 * shutdown to claim there; shutdown marks the list for the last one out
 * all the same, so that the op is released by the time the check
 * returns, not left to a purge that nothing calls after a shutdown.
 */
static void test_a_shutdown_marks_a_pinned_list_it_claims_nothing_on(void)
{
	static struct gop x;
	static struct tw_watch both[2];
	static const char other_key[] = "partition-8";
	const void *keys[2] = { other_key, key };
	size_t lens[2] = { strlen(other_key), strlen(key) };
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = manual_purgatory_purging(0);

	gop_init(&x, p, key, NULL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &x.op, keys, lens, 2, both), 0);
	park_the_check(p, "check.leaving", NULL, &checker, &parked);
	atomic_store(&handed, 0);
	CHECK_EQ(tw_purgatory_shutdown(p, count_hand_back), 1);
	CHECK_EQ(atomic_load(&handed), 1);
	CHECK_EQ(atomic_load(&x.releases), 0);
	CHECK_EQ(tw_purgatory_watched(p), 1);
	let_the_check_go(p, &x, 1, parked, &checker);
}

/*
 * Pins nest: a cancel_for_key on a pinned list runs hand_back with its own
 * pin held, and a hand_back may cancel the key again. The count must not
 * wrap: a list whose count read 0 would be unlinked and freed while the
 * pins' holders still use it. Here the parked check holds one pin and
 * 65,535 more are added under the shard lock (65,536 nested cancels are
 * what the count must survive; a 16-bit count wrapped to 0 there, and the
 * cancel below freed the list under the parked check); the cancel must
 * still find the list pinned and claim in place.
 */
static struct tw_watchers *list_of(struct tw_purgatory *p, const char *k,
				   struct pshard **sh)
{
	for (unsigned i = 0; i < p->nshards; i++) {
		pshard_lock(&p->shards[i]);
		for (size_t b = 0; b < p->shards[i].nbuckets; b++)
			for (struct tw_watchers *ws = p->shards[i].table[b]; ws; ws = ws->next)
				if (ws->len == strlen(k) && !memcmp(ws->key, k, ws->len)) {
					*sh = &p->shards[i];
					return ws; /* its shard still locked */
				}
		pshard_unlock(&p->shards[i]);
	}
	return NULL;
}

static void add_pins(struct tw_purgatory *p, long n)
{
	struct pshard *sh = NULL;
	struct tw_watchers *ws = list_of(p, key, &sh);

	CHECK(ws != NULL);
	if (n > 0)
		atomic_fetch_add(&ws->walkers, (unsigned)n);
	else
		atomic_fetch_sub(&ws->walkers, (unsigned)-n);
	pshard_unlock(sh);
}

static void test_pins_do_not_wrap(void)
{
	static struct gop x[1];
	struct sp_thread checker;
	int parked;
	struct tw_purgatory *p = park_a_check(x, 1, &checker, &parked);

	add_pins(p, 65535);
	atomic_store(&handed, 0);
	CHECK_EQ(tw_purgatory_cancel_for_key(p, key, strlen(key), count_hand_back), 1);
	CHECK_EQ(tw_purgatory_watched(p), 1); /* claimed in place */
	CHECK_EQ(keys_listed(p), 1);
	CHECK_EQ(atomic_load(&x[0].releases), 0);
	add_pins(p, -65535);
	let_the_check_go(p, x, 1, parked, &checker);
}

int main(int argc, char **argv)
{
	sp_install();
	RUN_IF(test_an_unlink_during_a_check_waits_for_it);
	RUN_IF(test_the_last_check_out_drops_the_entries);
	RUN_IF(test_a_check_that_is_not_the_last_leaves_its_entry_to_the_last);
	RUN_IF(test_a_check_waits_for_the_checks_in_a_dirty_list);
	RUN_IF(test_a_check_from_a_timer_waits_for_the_checks_in_a_dirty_list);
	RUN_IF(test_a_cancel_meets_a_pinned_list);
	RUN_IF(test_a_cancel_of_a_pinned_list_counts_towards_a_purge);
	RUN_IF(test_a_shutdown_meets_a_pinned_list);
	RUN_IF(test_a_check_leaving_as_shutdown_marks_its_list_drops_it);
	RUN_IF(test_a_shutdown_marks_a_pinned_list_it_claims_nothing_on);
	RUN_IF(test_pins_do_not_wrap);
	return check_report();
}
