/* SPDX-License-Identifier: MIT */
/*
 * The service's transition check itself (src/service/transitions.c,
 * test-point build): a step of the model passes, a step the model does
 * not make aborts the program and names it, a word that does not change
 * is no step. The mutants 1 to 3 (mutants/, mutants_are_caught.sh) show
 * the same from inside the service; this shows it of the checker alone.
 */
#define _POSIX_C_SOURCE 200809L

#include <string.h>

#include "transition_child.h"
#include "service/state.h"

TRANSITION_CHILD(tw__svc_transition, enum tw__svc_transition, uint32_t)

static void test_a_step_of_the_model_passes(void)
{
	char out[512];

	/* stop: PENDING -> IDLE, with a shard's and an owner's bits above */
	CHECK_EQ(report_in_child(TR_stop,
				 ST_PENDING | (3u << SHARD_SHIFT) | (5u << OWNER_SHIFT),
				 ST_IDLE | (3u << SHARD_SHIFT) | (5u << OWNER_SHIFT),
				 out, sizeof(out)), 0);
	CHECK_EQ(out[0], '\0');
}

static void test_a_step_the_model_does_not_make_aborts_and_is_named(void)
{
	char out[512];

	/* a stop that leaves a taken timer's run mark and shuts it */
	CHECK_EQ(report_in_child(TR_stop, ST_TAKEN | F_RAN,
				 ST_IDLE | F_RAN | F_SHUT, out, sizeof(out)),
		 SIGABRT);
	CHECK(strstr(out, "transition stop 19 -> 48 (TAKEN+ran -> "
			  "IDLE+ran+shut) is not a step") != NULL);
	/* the right change under the wrong name */
	CHECK_EQ(report_in_child(TR_expire, ST_PENDING, ST_IDLE, out,
				 sizeof(out)), SIGABRT);
	CHECK(strstr(out, "transition expire 1 -> 0") != NULL);
}

static void test_no_change_is_no_step(void)
{
	char out[512];

	CHECK_EQ(report_in_child(TR_settle, ST_IDLE | F_PERIODIC,
				 ST_IDLE | F_PERIODIC, out, sizeof(out)), 0);
}

int main(void)
{
	RUN(test_a_step_of_the_model_passes);
	RUN(test_a_step_the_model_does_not_make_aborts_and_is_named);
	RUN(test_no_change_is_no_step);
	return check_report();
}
