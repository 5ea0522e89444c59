/* SPDX-License-Identifier: MIT */
/*
 * A minimal test harness: CHECK* record a failure and go on; each test
 * binary ends with "N passed, N failed" and exits non-zero on any failure.
 */
#ifndef TW_TEST_CHECK_H
#define TW_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "timingwheel/timingwheel.h"

static int check_failures;
static int tests_passed, tests_failed;

#define CHECK(cond)                                                         \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, \
				__LINE__, #cond);                           \
			check_failures++;                                   \
		}                                                           \
	} while (0)

#define CHECK_EQ(a, b)                                                      \
	do {                                                                \
		int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);               \
		if (a_ != b_) {                                             \
			fprintf(stderr, "%s:%d: %s == %s failed: %" PRId64     \
				" != %" PRId64 "\n", __FILE__, __LINE__, #a, #b, \
				a_, b_);                                    \
			check_failures++;                                   \
		}                                                           \
	} while (0)

/* Run the invariant checker; report why it failed. */
#define CHECK_WHEEL(w)                                                      \
	do {                                                                \
		char why_[256];                                             \
		if (tw_wheel_check((w), why_, sizeof(why_)) != TW_OK) {     \
			fprintf(stderr, "%s:%d: wheel invariant: %s\n",     \
				__FILE__, __LINE__, why_);                  \
			check_failures++;                                   \
		}                                                           \
	} while (0)

#define RUN(test)                                                           \
	do {                                                                \
		int before_ = check_failures;                               \
		test();                                                     \
		if (check_failures == before_) {                            \
			tests_passed++;                                     \
		} else {                                                    \
			tests_failed++;                                     \
			fprintf(stderr, "FAIL %s\n", #test);                \
		}                                                           \
	} while (0)

/* The tests' one random generator (xorshift64): cheap, seedable, and the
 * same sequence on every platform. A test keeps its state in a uint64_t of
 * its own (a thread its own state, e.g. _Thread_local), made from the seed
 * it prints by test_rand_seed(). *s must not be 0. */
static inline uint64_t test_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A state for test_rand from any seed, 0 included: seeds next to each
 * other (1, 2, 3... or a thread's index) start unrelated sequences
 * (splitmix64's mixing step), and the result is never 0. */
static inline uint64_t test_rand_seed(uint64_t seed)
{
	uint64_t z = seed + 0x9E3779B97F4A7C15ULL;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return z ? z : 0x9E3779B97F4A7C15ULL;
}

/* 0 .. bound - 1 (bound > 0). */
static inline int64_t test_rand_below(uint64_t *s, int64_t bound)
{
	return (int64_t)(test_rand(s) % (uint64_t)bound);
}

static inline int check_report(void)
{
	printf("%d passed, %d failed\n", tests_passed, tests_failed);
	return tests_failed ? 1 : 0;
}

#endif
