/* SPDX-License-Identifier: MIT */
/*
 * wheel_alone — the wheel by itself, on wheel_bench's uniform loops, for
 * same-run before/after figures of a change to the core: build it against
 * two builds of the library and run them back to back.
 *
 *   usage: wheel_alone N WHEEL_SIZE LABEL
 *   cc -O2 -I<tree>/include bench/wheel_alone.c <build>/libtimingwheel.a
 *
 * Prints one line: insert, cancel (random order), churn (reschedule a
 * random timer), expire in one jump over 3 h, stepped expiry (next expiry,
 * then advance there) and how many stepped advances fired nothing; each
 * the median of 3 runs, exact mode, tick 1, dues uniform over 1 ms .. 3 h.
 */
#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timingwheel/timingwheel.h"

#define SPAN_MS (3 * 3600 * 1000LL)

static long fired;
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static void count(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
	fired++;
}

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct tw_wheel w;
	struct tw_timer *t;
	int64_t *due, *due2, when;
	size_t *order, *pick, n;
	double res[5][3];
	long calls = 0, idle = 0;
	unsigned size;

	if (argc != 4) {
		fprintf(stderr, "usage: wheel_alone N WHEEL_SIZE LABEL\n");
		return 2;
	}
	n = strtoul(argv[1], NULL, 10);
	size = (unsigned)atoi(argv[2]);
	t = malloc(n * sizeof(*t));
	due = malloc(n * sizeof(*due));
	due2 = malloc(n * sizeof(*due2));
	order = malloc(n * sizeof(*order));
	pick = malloc(n * sizeof(*pick));
	if (!n || !t || !due || !due2 || !order || !pick)
		return 2;
	for (size_t i = 0; i < n; i++) {
		due[i] = 1 + (int64_t)(rnd() % SPAN_MS);
		due2[i] = 1 + (int64_t)(rnd() % SPAN_MS);
		order[i] = i;
		pick[i] = rnd() % n;
		tw_timer_init(&t[i], count);
	}
	for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
		size_t j = rnd() % (i + 1), x = order[i];

		order[i] = order[j];
		order[j] = x;
	}
	for (int r = 0; r < 3; r++) {
		double a, b, c, d, e, f, g, h;

		if (tw_wheel_init(&w, 1, size, 0, TW_MODE_EXACT))
			return 2;
		a = now_ns();
		for (size_t i = 0; i < n; i++)
			tw_wheel_add(&w, &t[i], due[i]);
		b = now_ns();
		for (size_t i = 0; i < n; i++)
			tw_wheel_cancel(&w, &t[order[i]]);
		c = now_ns();
		for (size_t i = 0; i < n; i++)
			tw_wheel_add(&w, &t[i], due[i]);
		d = now_ns();
		for (size_t i = 0; i < n; i++)
			tw_wheel_reschedule(&w, &t[pick[i]], due2[i]);
		e = now_ns();
		tw_wheel_advance(&w, SPAN_MS + 1);
		f = now_ns();
		tw_wheel_destroy(&w);

		tw_wheel_init(&w, 1, size, 0, TW_MODE_EXACT);
		for (size_t i = 0; i < n; i++)
			tw_wheel_add(&w, &t[i], due[i]);
		calls = idle = 0;
		g = now_ns();
		while (tw_wheel_next_expiry(&w, &when)) {
			long before = fired;

			tw_wheel_advance(&w, when);
			calls++;
			idle += fired == before;
		}
		h = now_ns();
		tw_wheel_destroy(&w);
		res[0][r] = (b - a) / (double)n;
		res[1][r] = (c - b) / (double)n;
		res[2][r] = (e - d) / (double)n;
		res[3][r] = (f - e) / (double)n;
		res[4][r] = (h - g) / (double)n;
	}
	for (int k = 0; k < 5; k++)
		qsort(res[k], 3, sizeof(double), cmpd);
	printf("%-8s N=%-9zu size %-3u insert %6.1f cancel %6.1f churn %6.1f "
	       "expire %6.1f expire-step %6.1f ns; %ld advances, %ld fired "
	       "nothing (%.1f %%)\n", argv[3], n, size, res[0][1], res[1][1],
	       res[2][1], res[3][1], res[4][1], calls, idle,
	       calls ? 100.0 * (double)idle / (double)calls : 0.0);
	free(t);
	free(due);
	free(due2);
	free(order);
	free(pick);
	return 0;
}
