/* SPDX-License-Identifier: MIT */
/*
 * transitions.c — code and model, one machine, for the purgatory's op
 * (test-point build only). Every transition of an op's state the C code
 * makes (opstate.h's tr_*, reported as the abstract word opstate.h
 * defines: the count ZERO, ONE or MANY, +COMPLETED, +RELEASED, and in
 * the owner word's own steps op->purgatory: NONE, STARTING, WATCHED,
 * NEVER) is looked
 * up in the table SPIN derived from model/purgatory.pml:
 * model/purgatory.transitions, every (transition, word before, word
 * after) the model makes in the runs of its scenarios, turned into
 * purgatory_transitions.inc by the build. A step the model never makes
 * aborts the program at that step, with the step named, so the race
 * tests, the shaken stress test and the soak all check that the code is
 * the machine SPIN verified. Unlike the service's check, a step that
 * leaves the word as it was (a put MANY -> MANY) is looked up too: every
 * call of a transition changes a field. With TW_OP_TRANSITIONS_SEEN=file
 * set, a program also appends every distinct step it made to that file
 * at exit, for tests/transitions/code_matches_model.sh (docs/model.md).
 * The service's check (service/transitions.c) writes to its own file,
 * TW_TRANSITIONS_SEEN: two tables, two lists of steps made.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "opstate.h"

#define OP_WORDS 64 /* the count (bits 0-1), COMPLETED, RELEASED, the owner */
#define WORD_OF(w) ((w) & (OP_WORDS - 1))

static const char *const names[OPT_COUNT] = {
#define NAME(tr) [OPT_##tr] = #tr
	NAME(ref_first), NAME(ref_get), NAME(ref_get_unless_zero),
	NAME(ref_put), NAME(release), NAME(claim), NAME(watch_start),
	NAME(watch_name), NAME(mark_never), NAME(watch_refused),
#undef NAME
};

static const struct step {
	enum tw__pg_op_transition tr;
	unsigned char from, to;
} model_steps[] = {
#define TW_STEP(tr, from, to) { OPT_##tr, from, to },
#include "purgatory_transitions.inc"
#undef TW_STEP
};

/* A bit per (transition, from, to): the model's, and the ones seen. */
static uint64_t allowed[OPT_COUNT][OP_WORDS];
static _Atomic uint64_t seen[OPT_COUNT][OP_WORDS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void dump_seen(void)
{
	const char *path = getenv("TW_OP_TRANSITIONS_SEEN");
	FILE *f;

	if (!path || !*path || !(f = fopen(path, "a")))
		return;
	for (unsigned tr = 0; tr < OPT_COUNT; tr++)
		for (unsigned from = 0; from < OP_WORDS; from++)
			for (unsigned to = 0; to < OP_WORDS; to++)
				if (atomic_load(&seen[tr][from]) >> to & 1)
					fprintf(f, "%s %u %u\n", names[tr], from, to);
	fclose(f);
}

static void load_table(void)
{
	for (size_t i = 0; i < sizeof(model_steps) / sizeof(model_steps[0]); i++)
		allowed[model_steps[i].tr][model_steps[i].from] |=
			(uint64_t)1 << model_steps[i].to;
	atexit(dump_seen);
}

/* "MANY+completed", "STARTING+ONE": the word as the table's comments
 * decode it (the owner named in the owner word's own steps). */
static void describe(enum tw__pg_op_transition tr, unsigned w, char *buf,
		     size_t size)
{
	static const char *const counts[4] = { "ZERO", "ONE", "MANY", "3?" };
	static const char *const owners[4] = { "NONE+", "STARTING+", "WATCHED+",
					       "NEVER+" };
	bool owner_step = tr == OPT_watch_start || tr == OPT_watch_name ||
			  tr == OPT_mark_never || tr == OPT_watch_refused;

	snprintf(buf, size, "%s%s%s%s", owner_step ? owners[w >> 4 & 3] : "",
		 counts[w & 3], w & OP_COMPLETED ? "+completed" : "",
		 w & OP_RELEASED ? "+released" : "");
}

void tw__pg_op_transition(enum tw__pg_op_transition tr, unsigned from,
			  unsigned to)
{
	unsigned f = WORD_OF(from), t = WORD_OF(to);
	uint64_t bit = (uint64_t)1 << t;
	char was[48], now[48];

	pthread_once(&once, load_table);
	if (!(allowed[tr][f] & bit)) {
		describe(tr, f, was, sizeof(was));
		describe(tr, t, now, sizeof(now));
		fprintf(stderr,
			"timingwheel: op transition %s %u -> %u (%s -> %s) is not "
			"a step of model/purgatory.pml "
			"(model/purgatory.transitions)\n",
			names[tr], f, t, was, now);
		abort();
	}
	if (!(atomic_load_explicit(&seen[tr][f], memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(&seen[tr][f], bit, memory_order_relaxed);
}
