/* SPDX-License-Identifier: MIT */
/*
 * transitions.c — code and model, one machine (test-point build only).
 * Every transition of a state word the C code makes (state.h's,
 * reported with the shard's and the owner's bits masked off) is looked up in the table
 * SPIN derived from model/service.pml: model/service.transitions, every
 * (transition, word before, word after) the model makes in the runs of
 * its scenarios, turned into
 * service_transitions.inc by the build. A step the
 * model never makes aborts the program at that step, with the step named,
 * so the race tests, the stress tests and the soak all check that the
 * code is the machine SPIN verified. With TW_TRANSITIONS_SEEN=file set, a
 * program also appends every distinct step it made to that file at exit,
 * so tests/transitions/code_matches_model.sh can show which of the
 * model's steps the C suite exercises (docs/model.md).
 */
#include "../posix.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"

#define WORD_BITS WORD_LOW /* the state and the three flags: bits 0-5 */
#define WORD_OF(w) ((w) & (WORD_BITS - 1))

static const char *const names[TR_COUNT] = {
#define NAME(tr) [TR_##tr] = #tr
	NAME(claim), NAME(add), NAME(defer), NAME(stop), NAME(ran),
	NAME(expire), NAME(take), NAME(rearm), NAME(place), NAME(again),
	NAME(collect), NAME(hand_back), NAME(settle), NAME(shut), NAME(reinit),
#undef NAME
};

static const struct step {
	enum tw__svc_transition tr;
	unsigned char from, to;
} model_steps[] = {
#define TW_STEP(tr, from, to) { TR_##tr, from, to },
#include "service_transitions.inc"
#undef TW_STEP
};

/* A bit per (transition, from, to): the model's, and the ones seen. */
static uint64_t allowed[TR_COUNT][WORD_BITS][WORD_BITS / 64];
static _Atomic uint64_t seen[TR_COUNT][WORD_BITS][WORD_BITS / 64];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void dump_seen(void)
{
	const char *path = getenv("TW_TRANSITIONS_SEEN");
	FILE *f;

	if (!path || !*path || !(f = fopen(path, "a")))
		return;
	for (unsigned tr = 0; tr < TR_COUNT; tr++)
		for (unsigned from = 0; from < WORD_BITS; from++)
			for (unsigned to = 0; to < WORD_BITS; to++)
				if (atomic_load(&seen[tr][from][to / 64]) >>
				    (to % 64) & 1)
					fprintf(f, "%s %u %u\n", names[tr], from, to);
	fclose(f);
}

static void load_table(void)
{
	for (size_t i = 0; i < sizeof(model_steps) / sizeof(model_steps[0]); i++) {
		const struct step *s = &model_steps[i];

		allowed[s->tr][s->from][s->to / 64] |= (uint64_t)1 << (s->to % 64);
	}
	atexit(dump_seen);
}

/* "TAKEN+periodic+ran": the word as the table's comments decode it. */
static void describe(unsigned w, char *buf, size_t size)
{
	static const char *const states[8] = { "IDLE", "PENDING", "QUEUED",
		"TAKEN", "DEFERRED", "HANDING", "6?", "7?" };
	static const char *const flags[3] = { "+periodic", "+ran", "+shut" };
	size_t n = (size_t)snprintf(buf, size, "%s", states[w & ST_MASK]);

	for (unsigned i = 0; i < 3 && n < size; i++)
		if (w & (F_PERIODIC << i))
			n += (size_t)snprintf(buf + n, size - n, "%s", flags[i]);
}

void tw__svc_transition(enum tw__svc_transition tr, uint32_t from, uint32_t to)
{
	unsigned f = WORD_OF(from), t = WORD_OF(to);
	uint64_t bit = (uint64_t)1 << (t % 64);
	char was[64], now[64];

	if (f == t)
		return; /* no change: no step */
	pthread_once(&once, load_table);
	if (!(allowed[tr][f][t / 64] & bit)) {
		describe(f, was, sizeof(was));
		describe(t, now, sizeof(now));
		fprintf(stderr,
			"timingwheel: transition %s %u -> %u (%s -> %s) is not a "
			"step of model/service.pml (model/service.transitions)\n",
			names[tr], f, t, was, now);
		abort();
	}
	if (!(atomic_load_explicit(&seen[tr][f][t / 64], memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(&seen[tr][f][t / 64], bit,
					 memory_order_relaxed);
}
