/* SPDX-License-Identifier: MIT */
/*
 * The purgatory's transition check itself (src/purgatory/transitions.c,
 * test-point build): a step of the model passes, a step the model does
 * not make aborts the program and names it, and a step that leaves the
 * abstract word as it was is looked up too. The mutants 4 and 5
 * (mutants/, mutants_are_caught.sh) show the same from inside the
 * purgatory; this shows it of the checker alone, and mutant 6 shows an
 * owner-word step refused from inside the purgatory. Last, a watch that
 * fails for want of memory on its first key claims its op holding only
 * its own reference (the model's claim ONE -> ONE+completed, which the
 * forced and stress programs do not make) and releases it completed (no
 * op is released uncompleted: the model has no such step); and a
 * completion from outside before any watch marks the op never watched
 * (mark_never), which code_matches_model.sh requires of the suite (it
 * runs this too).
 */
#define _POSIX_C_SOURCE 200809L

#include <string.h>

#include "transition_child.h"
#include "purgatory/opstate.h"
#include "test_point.h"
#include "virtual_clock.h"

TRANSITION_CHILD(tw__pg_op_transition, enum tw__pg_op_transition, unsigned)

static void test_a_step_of_the_model_passes(void)
{
	char out[512];

	CHECK_EQ(report_in_child(OPT_claim, OP_MANY, OP_MANY | OP_COMPLETED,
				 out, sizeof(out)), 0);
	CHECK_EQ(out[0], '\0');
	CHECK_EQ(report_in_child(OPT_release, OP_ZERO | OP_COMPLETED,
				 OP_ZERO | OP_COMPLETED | OP_RELEASED, out,
				 sizeof(out)), 0);
}

static void test_a_step_the_model_does_not_make_aborts_and_is_named(void)
{
	char out[512];

	/* a reference taken back from zero */
	CHECK_EQ(report_in_child(OPT_ref_get_unless_zero, OP_ZERO | OP_COMPLETED,
				 OP_ONE | OP_COMPLETED, out, sizeof(out)),
		 SIGABRT);
	CHECK(strstr(out, "op transition ref_get_unless_zero 4 -> 5 "
			  "(ZERO+completed -> ONE+completed) is not a step") != NULL);
	/* a claim at a count of zero: its caller held no reference */
	CHECK_EQ(report_in_child(OPT_claim, OP_ZERO, OP_ZERO | OP_COMPLETED,
				 out, sizeof(out)), SIGABRT);
	CHECK(strstr(out, "op transition claim 0 -> 4") != NULL);
	/* a second release */
	CHECK_EQ(report_in_child(OPT_release, OP_ZERO | OP_RELEASED,
				 OP_ZERO | OP_RELEASED, out, sizeof(out)), SIGABRT);
}

/* Unlike the service's word, no change is still a step: a claim that
 * finds the op completed and sets it again is refused. */
static void test_no_change_is_looked_up_too(void)
{
	char out[512];

	CHECK_EQ(report_in_child(OPT_ref_put, OP_MANY, OP_MANY, out,
				 sizeof(out)), 0);
	CHECK_EQ(report_in_child(OPT_claim, OP_ONE | OP_COMPLETED,
				 OP_ONE | OP_COMPLETED, out, sizeof(out)), SIGABRT);
	CHECK(strstr(out, "op transition claim 5 -> 5") != NULL);
}

/* The owner word's steps carry op->purgatory in bits 4-5 and the count
 * and the flag below: the purgatory is named only once the watch holds
 * its reference, and an op is marked never watched only uncompleted. */
static void test_the_owner_word_steps_are_checked(void)
{
	char out[512];

	CHECK_EQ(report_in_child(OPT_watch_start, OP_OWNER_NONE | OP_ZERO,
				 OP_OWNER_STARTING | OP_ZERO, out, sizeof(out)), 0);
	CHECK_EQ(report_in_child(OPT_watch_name, OP_OWNER_STARTING | OP_ONE,
				 OP_OWNER_WATCHED | OP_ONE, out, sizeof(out)), 0);
	CHECK_EQ(report_in_child(OPT_mark_never, OP_OWNER_NONE | OP_ZERO,
				 OP_OWNER_NEVER | OP_ZERO, out, sizeof(out)), 0);
	/* named before its first reference (transition mutant 6) */
	CHECK_EQ(report_in_child(OPT_watch_name, OP_OWNER_STARTING | OP_ZERO,
				 OP_OWNER_WATCHED | OP_ZERO, out, sizeof(out)),
		 SIGABRT);
	CHECK(strstr(out, "op transition watch_name 16 -> 32 "
			  "(STARTING+ZERO -> WATCHED+ZERO) is not a step") != NULL);
	/* straight from NONE to the purgatory, the claim and the name in one */
	CHECK_EQ(report_in_child(OPT_watch_start, OP_OWNER_NONE | OP_ZERO,
				 OP_OWNER_WATCHED | OP_ZERO, out, sizeof(out)),
		 SIGABRT);
	CHECK(strstr(out, "op transition watch_start 0 -> 32 "
			  "(NONE+ZERO -> WATCHED+ZERO)") != NULL);
	/* a watched op marked never watched */
	CHECK_EQ(report_in_child(OPT_mark_never, OP_OWNER_WATCHED | OP_ONE,
				 OP_OWNER_NEVER | OP_ONE, out, sizeof(out)), SIGABRT);
	CHECK(strstr(out, "op transition mark_never 33 -> 49") != NULL);
}

struct plain_op {
	struct tw_delayed_op op;
	struct tw_watch w[2];
	atomic_int completes, releases;
};

static bool never_ready(struct tw_delayed_op *op)
{
	(void)op;
	return false;
}

static void count_complete(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct plain_op, op)->completes, 1);
}

static void count_release(struct tw_delayed_op *op)
{
	atomic_fetch_add(&tw_container_of(op, struct plain_op, op)->releases, 1);
}

static const char key0[] = "topic-0", key1[] = "topic-1";

static const char *fail_key; /* the key whose list cannot be allocated */

static bool fail_that_key(const char *point, const void *obj)
{
	return strcmp(point, "watchers.alloc") == 0 && obj == fail_key;
}

static void test_a_failed_watch_claims_and_releases_its_op(void)
{
	static const struct tw_op_ops ops = { never_ready, count_complete, NULL,
					      count_release, NULL };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	const void *keys[2] = { key0, key1 };
	size_t lens[2] = { sizeof(key0), sizeof(key1) };

	/* on its first key (nothing watched: claimed at ONE), then on its
	 * second (its first entry taken back) */
	for (int k = 0; k < 2; k++) {
		struct plain_op o;

		memset(&o, 0, sizeof(o));
		CHECK_EQ(tw_op_init(&o.op, 100, &ops, NULL), TW_OK);
		fail_key = keys[k];
		tw__test_set_fail(fail_that_key);
		CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 2,
							      o.w),
			 TW_ENOMEM);
		tw__test_set_fail(NULL);
		CHECK(tw_op_is_completed(&o.op)); /* claimed by the watch */
		CHECK_EQ(atomic_load(&o.completes), 0);
		CHECK_EQ(atomic_load(&o.releases), 1);
		CHECK_EQ(tw_purgatory_watched(p), 0);
		tw_op_destroy(&o.op);
	}
	tw_purgatory_destroy(p);
}

/* A completion from outside before any watch marks the op never watched
 * (the step mark_never), and a watch after it is refused. */
static void test_a_completion_before_any_watch_marks_it_never_watched(void)
{
	static const struct tw_op_ops ops = { never_ready, count_complete, NULL,
					      count_release, NULL };
	struct tw_purgatory *p = manual_purgatory_purging(0);
	struct plain_op o;
	const void *keys[1] = { key0 };
	size_t lens[1] = { sizeof(key0) };

	memset(&o, 0, sizeof(o));
	CHECK_EQ(tw_op_init(&o.op, 100, &ops, NULL), TW_OK);
	CHECK(tw_op_force_complete(&o.op));
	CHECK(!tw_op_force_complete(&o.op));
	CHECK_EQ(tw_purgatory_try_complete_else_watch(p, &o.op, keys, lens, 1, o.w),
		 TW_EINVAL);
	CHECK_EQ(atomic_load(&o.completes), 1);
	CHECK_EQ(atomic_load(&o.releases), 0); /* never watched: no on_release */
	CHECK_EQ(tw_purgatory_watched(p), 0);
	tw_purgatory_destroy(p);
	tw_op_destroy(&o.op);
}

int main(void)
{
	RUN(test_a_step_of_the_model_passes);
	RUN(test_a_step_the_model_does_not_make_aborts_and_is_named);
	RUN(test_no_change_is_looked_up_too);
	RUN(test_the_owner_word_steps_are_checked);
	RUN(test_a_failed_watch_claims_and_releases_its_op);
	RUN(test_a_completion_before_any_watch_marks_it_never_watched);
	return check_report();
}
