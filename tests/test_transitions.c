/* SPDX-License-Identifier: MIT */
/*
 * The transition check itself (src/service/transitions.c, test-point
 * build): a step of the model passes, a step the model does not make
 * aborts the program and names it, a word that does not change is no
 * step. The mutants of tests/transition_mutants.sh show the same from
 * inside the service; this shows it of the checker alone.
 */
#define _POSIX_C_SOURCE 200809L

#include <string.h>

#include "transition_child.h"
#include "service/state.h"

TRANSITION_CHILD(tw__svc_transition, enum tw__svc_transition, uint32_t)

static void test_a_step_of_the_model_passes(void)
{
	char out[512];

	/* cancel: PENDING -> IDLE+tomb, with an owner's bits above */
	CHECK_EQ(report_in_child(TR_cancel, ST_PENDING | (5u << OWNER_SHIFT),
				 ST_IDLE | F_TOMB | (5u << OWNER_SHIFT), out,
				 sizeof(out)), 0);
	CHECK_EQ(out[0], '\0');
}

static void test_a_step_the_model_does_not_make_aborts_and_is_named(void)
{
	char out[512];

	/* a cancel that marks an EXPIRED timer a tombstone */
	CHECK_EQ(report_in_child(TR_cancel, ST_EXPIRED | F_ENTRY,
				 ST_IDLE | F_ENTRY | F_TOMB, out, sizeof(out)),
		 SIGABRT);
	CHECK(strstr(out, "transition cancel 19 -> 80 (EXPIRED+entry -> "
			  "IDLE+entry+tomb) is not a step") != NULL);
	/* the right change under the wrong name */
	CHECK_EQ(report_in_child(TR_expire, ST_PENDING, ST_IDLE | F_TOMB, out,
				 sizeof(out)), SIGABRT);
	CHECK(strstr(out, "transition expire 2 -> 64") != NULL);
}

static void test_no_change_is_no_step(void)
{
	char out[512];

	CHECK_EQ(report_in_child(TR_clear_tomb, ST_IDLE | F_PERIODIC,
				 ST_IDLE | F_PERIODIC, out, sizeof(out)), 0);
}

int main(void)
{
	RUN(test_a_step_of_the_model_passes);
	RUN(test_a_step_the_model_does_not_make_aborts_and_is_named);
	RUN(test_no_change_is_no_step);
	return check_report();
}
