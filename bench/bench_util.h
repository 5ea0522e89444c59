/* SPDX-License-Identifier: MIT */
/*
 * What every benchmark program here needs: a monotonic clock in
 * nanoseconds, a comparison for sorting runs, and the bytes the allocator has handed out (mmapped chunks
 * included), for memory per timer. glibc only (mallinfo2).
 */
#ifndef TW_BENCH_UTIL_H
#define TW_BENCH_UTIL_H

#include <malloc.h>
#include <stdint.h>
#include <time.h>

static inline int64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* qsort's comparison for doubles (medians of runs). */
static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static inline double bench_allocated(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (double)mi.uordblks + (double)mi.hblkhd;
}

#endif
