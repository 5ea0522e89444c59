/* SPDX-License-Identifier: MIT */
/*
 * Every purgatory row of docs/bad-input.md, as the wheel's in
 * tests/wheel/bad_input.c (a delayed operation kept pending while the bad
 * calls are made): the bad call gets its documented result and the
 * bystander ends exactly once.
 */

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "virtual_clock.h"

/* ---- the purgatory ---- */

struct op {
	struct tw_delayed_op base;
	struct tw_watch watch[2];
	atomic_int completes, expirations;
	bool ready;
};

static bool op_ready(struct tw_delayed_op *d)
{
	struct op *o = tw_container_of(d, struct op, base);

	return o->ready && tw_op_force_complete(d);
}

static void op_completed(struct tw_delayed_op *d)
{
	atomic_fetch_add(&tw_container_of(d, struct op, base)->completes, 1);
}

static void op_expired(struct tw_delayed_op *d)
{
	atomic_fetch_add(&tw_container_of(d, struct op, base)->expirations, 1);
}

static const struct tw_op_ops bystander_ops = { op_ready, op_completed,
						op_expired, NULL, NULL };
static const struct tw_op_ops plain_ops = { op_ready, op_completed, NULL, NULL, NULL };
static const struct tw_op_ops no_condition = { NULL, op_completed, NULL, NULL, NULL };
static const struct tw_op_ops no_completion = { op_ready, NULL, NULL, NULL, NULL };

/* P1-P4: bad operations, bad keys, NULLs, calls after shutdown. */
static void test_purgatory_bad_input(void)
{
	struct tw_purgatory_config cfg = { .service = { .tick = 1, .manual = true } };
	struct tw_purgatory *p, *none = (struct tw_purgatory *)1;
	struct op bystander = { 0 }, bad = { 0 };
	static char long_key[TW_KEY_MAX + 1];
	const void *keys[2] = { "k", long_key };
	size_t lens[2] = { 1, TW_KEY_MAX + 1 };
	size_t zero = 0;

	cfg.service.clock.now = virtual_clock;
	atomic_store(&virtual_now, 0);
	CHECK_EQ(tw_purgatory_create(NULL, &cfg), TW_EINVAL);
	cfg.shards = 70000;
	CHECK_EQ(tw_purgatory_create(&none, &cfg), TW_EINVAL);
	CHECK(none == NULL);
	cfg.shards = 0;
	CHECK_EQ(tw_purgatory_create(&p, &cfg), 0);

	/* The bystander waits on "k" for 100. */
	CHECK_EQ(tw_op_init(&bystander.base, 100, &bystander_ops, NULL), 0);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bystander.base, keys, lens, 1,
						      bystander.watch), 0);

	CHECK_EQ(tw_op_init(NULL, 10, &plain_ops, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 0, &plain_ops, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, -1, &plain_ops, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 10, &no_condition, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 10, &no_completion, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 10, NULL, NULL), TW_EINVAL);
	CHECK_EQ(tw_op_init(&bad.base, 10, &plain_ops, NULL), 0);
	/* Keys: none, more than an op's count of references holds at once,
	 * empty, too long, NULL. */
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens, 0, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens,
						      (size_t)TW_WATCH_KEYS_MAX + 1, bad.watch),
		 TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens, SIZE_MAX,
						      bad.watch),
		 TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, &zero, 1, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens, 2, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, NULL, lens, 1, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens, 1, NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, NULL, 1, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, NULL, keys, lens, 1, bad.watch), TW_EINVAL);
	{
		const void *null_key[1] = { NULL };

		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, null_key, lens, 1,
							      bad.watch), TW_EINVAL);
	}
	CHECK_EQ(tw_purgatory_try_complete_else_watch(NULL, &bad.base, keys, lens, 1, bad.watch), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(p, "", 0), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(p, long_key, TW_KEY_MAX + 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(NULL, "k", 1), TW_EINVAL);
	CHECK_EQ(tw_purgatory_cancel_for_key(p, NULL, 1, NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_check_and_complete(p, long_key, TW_KEY_MAX), 0); /* long is fine */
	CHECK(!tw_op_force_complete(NULL));
	CHECK(!tw_op_is_completed(NULL));
	CHECK(!tw_op_safe_try_complete(NULL));
	CHECK_EQ(tw_purgatory_watched(NULL), 0);
	CHECK_EQ(tw_purgatory_delayed(NULL), 0);
	CHECK_EQ(tw_purgatory_poll(NULL), TW_EINVAL);
	CHECK_EQ(tw_purgatory_shutdown(NULL, NULL), TW_EINVAL);
	tw_purgatory_purge(NULL);
	tw_purgatory_destroy(NULL);
	tw_op_destroy(NULL);
	CHECK(!tw_op_is_completed(&bad.base));

	/* P6: the bystander watched a second time (accepted, it would be
	 * linked twice): TW_EBUSY, nothing changed. */
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bystander.base, keys, lens, 1,
						      bystander.watch), TW_EBUSY);

	/* The bystander is intact: still watched, completes by its key. */
	CHECK_EQ(tw_purgatory_watched(p), 1);
	CHECK_EQ(tw_purgatory_delayed(p), 1);
	bystander.ready = true;
	CHECK_EQ(tw_purgatory_check_and_complete(p, "k", 1), 1);
	CHECK_EQ(atomic_load(&bystander.completes), 1);
	atomic_store(&virtual_now, 1000);
	CHECK(tw_purgatory_poll(p) >= 0);
	CHECK_EQ(atomic_load(&bystander.expirations), 0);

	/* After shutdown: refused, nothing watched. */
	CHECK_EQ(tw_purgatory_shutdown(p, NULL), 0);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, lens, 1, bad.watch),
		 TW_ESHUTDOWN);
	/* Bad arguments are checked first: an empty key is TW_EINVAL,
	 * shut down or not (purgatory.h). */
	{
		const size_t empty = 0;

		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &bad.base, keys, &empty, 1,
							      bad.watch), TW_EINVAL);
	}
	CHECK_EQ(tw_purgatory_delayed(p), 0);
	tw_purgatory_destroy(p);
	tw_op_destroy(&bystander.base);
	tw_op_destroy(&bad.base);
}

/* P9: shutdown, destroy and poll from a callback, each refused with
 * nothing changed. What the calls from inside one callback returned: */
struct inside_calls {
	int64_t poll, shutdown;
};

static struct tw_purgatory *inside_p;

static void call_inside(struct inside_calls *r)
{
	r->poll = tw_purgatory_poll(inside_p);
	r->shutdown = tw_purgatory_shutdown(inside_p, NULL);
	tw_purgatory_destroy(inside_p); /* does nothing here */
}

static void refused_inside(const struct inside_calls *r)
{
	CHECK_EQ(r->poll, TW_EREENTER);
	CHECK_EQ(r->shutdown, TW_EREENTER);
}

/* inside_p, manual on the virtual clock at 0. */
static void inside_create(void)
{
	struct tw_purgatory_config cfg = { .service = { .tick = 1, .manual = true } };

	cfg.service.clock.now = virtual_clock;
	atomic_store(&virtual_now, 0);
	CHECK_EQ(tw_purgatory_create(&inside_p, &cfg), 0);
}

/* o initialised and watching "k" in inside_p. */
static void inside_watch(struct op *o, int64_t timeout, const struct tw_op_ops *ops)
{
	const void *keys[1] = { "k" };
	size_t lens[1] = { 1 };

	CHECK_EQ(tw_op_init(&o->base, timeout, ops, NULL), 0);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(inside_p, &o->base, keys, lens, 1,
						      o->watch), 0);
}

/* From a timeout's on_expiration, on the poll's thread: the service's
 * own shutdown refused it there, and the purgatory's went on, claiming
 * every op while the service kept running. */
static struct inside_calls from_expiration;

static void expired_shutting_down(struct tw_delayed_op *d)
{
	op_expired(d);
	call_inside(&from_expiration);
}

static const struct tw_op_ops shutting_ops = { op_ready, op_completed,
					       expired_shutting_down, NULL, NULL };

static void test_shutdown_from_a_callback_is_refused(void)
{
	struct op timed = { 0 }, bystander = { 0 }, later = { 0 };

	inside_create();
	inside_watch(&timed, 10, &shutting_ops);
	inside_watch(&bystander, 1000, &bystander_ops);
	CHECK_EQ(tw_purgatory_watched(inside_p), 2);
	atomic_store(&virtual_now, 10);
	CHECK_EQ(tw_purgatory_poll(inside_p), 1);
	CHECK_EQ(atomic_load(&timed.expirations), 1);
	refused_inside(&from_expiration);

	/* Nothing changed: both entries are on "k" still (the timed-out
	 * op's until a purge or a check takes it), the bystander is armed,
	 * new ops are taken, and the bystander times out at 1000. */
	CHECK_EQ(tw_purgatory_watched(inside_p), 2);
	CHECK_EQ(tw_purgatory_delayed(inside_p), 1);
	inside_watch(&later, 100, &plain_ops);
	later.ready = true;
	CHECK_EQ(tw_purgatory_check_and_complete(inside_p, "k", 1), 1);
	CHECK_EQ(atomic_load(&later.completes), 1);
	atomic_store(&virtual_now, 1000);
	CHECK_EQ(tw_purgatory_poll(inside_p), 1);
	CHECK_EQ(atomic_load(&bystander.completes), 1);
	CHECK_EQ(atomic_load(&bystander.expirations), 1);

	CHECK_EQ(tw_purgatory_shutdown(inside_p, NULL), 0);
	CHECK_EQ(tw_purgatory_poll(inside_p), TW_ESHUTDOWN);
	tw_purgatory_destroy(inside_p);
	tw_op_destroy(&timed.base);
	tw_op_destroy(&bystander.base);
	tw_op_destroy(&later.base);
}

/* On the caller's thread, from the condition a watch runs (whose shutdown
 * would wait for that very watch to end) and from one a key check runs
 * (whose destroy would free the purgatory under the check). */
static struct inside_calls from_condition;

static bool ready_shutting_down(struct tw_delayed_op *d)
{
	call_inside(&from_condition);
	return op_ready(d);
}

static const struct tw_op_ops watching_ops = { ready_shutting_down, op_completed,
					       op_expired, NULL, NULL };

/* And from the on_release that a watch's last put runs (an op complete at
 * its first check), after which the watch still looks for a purge. */
static struct inside_calls from_release;

static void released_shutting_down(struct tw_delayed_op *d)
{
	(void)d;
	call_inside(&from_release);
}

static const struct tw_op_ops releasing_ops = { op_ready, op_completed, op_expired,
						released_shutting_down, NULL };

static void test_shutdown_from_a_watch_is_refused(void)
{
	struct op watched = { 0 }, released = { 0 };
	const void *keys[1] = { "k" };
	size_t lens[1] = { 1 };

	inside_create();
	inside_watch(&watched, 10, &watching_ops);
	refused_inside(&from_condition);
	CHECK_EQ(tw_purgatory_watched(inside_p), 1);
	CHECK_EQ(tw_purgatory_delayed(inside_p), 1);
	memset(&from_condition, 0, sizeof(from_condition));
	watched.ready = true;
	CHECK_EQ(tw_purgatory_check_and_complete(inside_p, "k", 1), 1);
	refused_inside(&from_condition);
	CHECK_EQ(atomic_load(&watched.completes), 1);
	CHECK_EQ(tw_purgatory_delayed(inside_p), 0);
	atomic_store(&virtual_now, 10);
	CHECK_EQ(tw_purgatory_poll(inside_p), 0);
	CHECK_EQ(atomic_load(&watched.expirations), 0);

	released.ready = true;
	CHECK_EQ(tw_op_init(&released.base, 10, &releasing_ops, NULL), 0);
	CHECK_EQ(tw_purgatory_try_complete_else_watch(inside_p, &released.base, keys, lens,
						      1, released.watch), 1);
	refused_inside(&from_release);
	CHECK_EQ(atomic_load(&released.completes), 1);
	CHECK_EQ(tw_purgatory_shutdown(inside_p, NULL), 0);
	tw_purgatory_destroy(inside_p);
	tw_op_destroy(&watched.base);
	tw_op_destroy(&released.base);
}

/* From a hand_back: an op cancelled by its key, then one pending at
 * shutdown (whose own shutdown would wait for the lock that shutdown
 * holds); the cancel and the shutdown go on. */
static struct inside_calls from_hand_back;

static void hand_back_shutting_down(struct tw_delayed_op *d)
{
	(void)d;
	call_inside(&from_hand_back);
}

static void test_shutdown_from_its_hand_back_is_refused(void)
{
	struct op pending = { 0 };

	inside_create();
	inside_watch(&pending, 100, &plain_ops);
	CHECK_EQ(tw_purgatory_cancel_for_key(inside_p, "k", 1, hand_back_shutting_down), 1);
	refused_inside(&from_hand_back);
	CHECK_EQ(tw_purgatory_delayed(inside_p), 0);
	memset(&from_hand_back, 0, sizeof(from_hand_back));
	inside_watch(&pending, 100, &plain_ops);
	CHECK_EQ(tw_purgatory_shutdown(inside_p, hand_back_shutting_down), 1);
	refused_inside(&from_hand_back);
	CHECK_EQ(tw_purgatory_poll(inside_p), TW_ESHUTDOWN);
	CHECK_EQ(atomic_load(&pending.completes), 0);
	tw_purgatory_destroy(inside_p);
	tw_op_destroy(&pending.base);
}

int main(void)
{
	RUN(test_purgatory_bad_input);
	RUN(test_shutdown_from_a_callback_is_refused);
	RUN(test_shutdown_from_a_watch_is_refused);
	RUN(test_shutdown_from_its_hand_back_is_refused);
	return check_report();
}
