/* SPDX-License-Identifier: MIT */
/*
 * The scaffolding of the tests of a transition checker (the service's
 * timer word, tests/transitions/service_checker.c; the purgatory's op,
 * purgatory_checker.c): one step reported to the checker in a child,
 * since a refused step aborts the program. TRANSITION_CHILD(check,
 * tr_type, word_type) defines
 *   report_in_child(tr, from, to, out, size)
 * which calls check(tr, from, to) in a child and returns the signal that
 * ended it (0: the step passed), with what it wrote on stderr in out.
 */
#ifndef TW_TEST_TRANSITION_CHILD_H
#define TW_TEST_TRANSITION_CHILD_H

#include "child.h"

#define TRANSITION_CHILD(check, tr_type, word_type)                         \
	struct report {                                                     \
		tr_type tr;                                                 \
		word_type from, to;                                         \
	};                                                                  \
                                                                            \
	static void report(void *arg)                                       \
	{                                                                   \
		const struct report *r = arg;                               \
                                                                            \
		check(r->tr, r->from, r->to);                               \
	}                                                                   \
                                                                            \
	static int report_in_child(tr_type tr, word_type from, word_type to, \
				   char *out, size_t size)                  \
	{                                                                   \
		struct report r = { tr, from, to };                         \
                                                                            \
		return run_in_child(report, &r, out, size);                 \
	}

#endif
