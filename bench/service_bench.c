/* SPDX-License-Identifier: MIT */
/*
 * service_bench — the timer service against a binary heap under one mutex,
 * measured in the same run on the same machine.
 *
 *   1. add, cancel and churn (cancel + re-add) of N pending timers from 1, 2
 *      and 4 producer threads, for: the heap under one mutex, the service
 *      with its default 8 inboxes, and with 1 inbox (every producer pushes
 *      onto the same lock-free stack);
 *   2. expiry throughput: N timers due at once, run by the reaper alone and
 *      by 1 and 2 executors;
 *   3. lateness on the real clock: N tasks due uniformly over 2 s (Kafka's
 *      measurement): how many ran early, p50 / p99 / max lateness;
 *   4. memory per pending task, from the allocator (mallinfo2).
 *
 * usage: service_bench [N [CSV]]   (default N = 1000000)
 * Prints a table; with CSV, also writes one row per measurement:
 * impl,workload,threads,n,ns_per_op
 *
 * The lateness runs take their service settings from the environment, for
 * experiments: BENCH_WHEEL_SIZE (20), BENCH_EXECUTORS (1), BENCH_INBOXES
 * (the default), and BENCH_HIST=1 prints the worst lateness per 100 ms of
 * due time. BENCH_RUNS (3, at most 9): runs per throughput figure; the
 * median is reported with the spread. BENCH_ONLY=NAME: only the producer
 * runs whose name contains NAME.
 */
#define _GNU_SOURCE

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "heap_service.h"
#include "timingwheel/timingwheel.h"

static size_t N = 1000000;
static FILE *csv;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of runs[0..n) and its spread (min .. max). */
static void report(const char *impl, const char *workload, unsigned threads,
		   double *runs, int n)
{
	double median;

	qsort(runs, (size_t)n, sizeof(*runs), cmp_double);
	median = runs[n / 2];
	printf("  %-22s %-8s %u thread%s  %8.1f ns/op  %6.2f Mops/s  (%d runs: "
	       "%.1f .. %.1f)\n", impl, workload, threads, threads > 1 ? "s" : " ",
	       median, 1e3 / median, n, runs[0], runs[n - 1]);
	if (csv)
		fprintf(csv, "%s,%s,%u,%zu,%.1f\n", impl, workload, threads, N,
			median);
}

static int nruns = 3;

/* ---- one interface over the implementations ---- */

enum impl { HEAP, SVC };

struct item {
	struct tw_service_timer st;
	struct heap_timer ht;
};

struct bench {
	enum impl impl;
	struct heap_service hs;
	struct tw_service *svc;
	struct item *items;
	unsigned threads;
	pthread_barrier_t start;
	int phase; /* 0 add, 1 cancel, 2 churn */
	int64_t base;
};

static void svc_fn(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	(void)t;
}

static void heap_fn(struct heap_timer *t)
{
	(void)t;
}

struct worker {
	struct bench *b;
	unsigned index;
};

static void *work(void *arg)
{
	struct worker *wk = arg;
	struct bench *b = wk->b;
	size_t per = N / b->threads, first = wk->index * per;
	uint64_t seed = 88172645463325252ULL + wk->index;

	pthread_barrier_wait(&b->start);
	for (size_t i = 0; i < per; i++) {
		/* 1 s .. 1 h ahead: nothing expires while we measure. */
		int64_t due = b->base + 1000000000LL +
			      (int64_t)(rnd(&seed) % 3600000000000ULL);
		size_t k;
		struct item *it;

		if (b->phase == 0)
			k = first + i;
		else if (b->phase == 1)
			k = first + (i * 7919) % per; /* scattered, each once */
		else
			k = first + rnd(&seed) % per;
		it = &b->items[k];
		if (b->impl == HEAP) {
			if (b->phase == 0) {
				heap_service_add(&b->hs, &it->ht, due);
			} else if (b->phase == 1) {
				heap_service_cancel(&b->hs, &it->ht);
			} else {
				heap_service_cancel(&b->hs, &it->ht);
				heap_service_add(&b->hs, &it->ht, due);
			}
		} else {
			if (b->phase == 0)
				tw_service_add(b->svc, &it->st, due);
			else if (b->phase == 1)
				tw_service_cancel(b->svc, &it->st);
			else
				tw_service_reschedule(b->svc, &it->st, due);
		}
	}
	pthread_barrier_wait(&b->start);
	return NULL;
}

static double run_phase(struct bench *b, int phase)
{
	pthread_t th[8];
	struct worker wk[8];
	int64_t t0, t1;

	b->phase = phase;
	pthread_barrier_init(&b->start, NULL, b->threads + 1);
	for (unsigned i = 0; i < b->threads; i++) {
		wk[i].b = b;
		wk[i].index = i;
		pthread_create(&th[i], NULL, work, &wk[i]);
	}
	pthread_barrier_wait(&b->start);
	t0 = bench_now_ns();
	pthread_barrier_wait(&b->start);
	/* The service's work is not done until every add and cancel left in
	 * the inboxes is applied to the wheel: count() applies the rest. */
	if (b->impl == SVC)
		tw_service_count(b->svc);
	t1 = bench_now_ns();
	for (unsigned i = 0; i < b->threads; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&b->start);
	return (double)(t1 - t0) / (double)((N / b->threads) * b->threads);
}

static void producers(const char *name, enum impl impl, unsigned inboxes)
{
	static const unsigned counts[] = { 1, 2, 4 };
	const char *only = getenv("BENCH_ONLY");

	if (only && !strstr(name, only))
		return;

	for (size_t c = 0; c < 3; c++) {
		double add[9], cancel[9], churn[9];

		for (int r = 0; r < nruns; r++) {
			struct bench b = { 0 };
			struct tw_service_config cfg = { 0 };

			b.impl = impl;
			b.threads = counts[c];
			b.items = calloc(N, sizeof(*b.items));
			for (size_t i = 0; i < N; i++) {
				tw_service_timer_init(&b.items[i].st, svc_fn, 0);
				heap_timer_init(&b.items[i].ht, heap_fn);
			}
			b.base = bench_now_ns();
			if (impl == HEAP) {
				heap_service_init(&b.hs, N, true);
			} else {
				cfg.inboxes = inboxes;
				cfg.executors = 1;
				tw_service_create(&b.svc, &cfg);
			}
			add[r] = run_phase(&b, 0);
			cancel[r] = run_phase(&b, 1);
			run_phase(&b, 0); /* all pending again */
			churn[r] = run_phase(&b, 2);
			if (impl == HEAP)
				heap_service_destroy(&b.hs);
			else
				tw_service_destroy(b.svc);
			free(b.items);
		}
		report(name, "add", counts[c], add, nruns);
		report(name, "cancel", counts[c], cancel, nruns);
		report(name, "churn", counts[c], churn, nruns);
	}
}

/* ---- expiry throughput ---- */

static atomic_size_t ran;
static atomic_llong last_run;

static void count_svc(struct tw_service *s, struct tw_service_timer *t)
{
	(void)s;
	(void)t;
	if (atomic_fetch_add(&ran, 1) + 1 == N)
		atomic_store(&last_run, bench_now_ns());
}

static void count_heap(struct heap_timer *t)
{
	(void)t;
	if (atomic_fetch_add(&ran, 1) + 1 == N)
		atomic_store(&last_run, bench_now_ns());
}

static void wait_all(void)
{
	struct timespec ts = { 0, 1000000 };

	while (atomic_load(&ran) < N)
		nanosleep(&ts, NULL);
}

static double expire_once(enum impl impl, unsigned executors)
{
	struct item *items = calloc(N, sizeof(*items));
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	struct heap_service hs;
	int64_t due;
	uint64_t seed = 7;
	double ns;

	atomic_store(&ran, 0);
	cfg.executors = executors;
	cfg.queue_capacity = 65536;
	if (impl == HEAP)
		heap_service_init(&hs, N, true);
	else
		tw_service_create(&svc, &cfg);
	/* All due within one 1 ms tick, 200 ms from now: added well before. */
	due = bench_now_ns() + 200000000;
	for (size_t i = 0; i < N; i++) {
		int64_t d = due + (int64_t)(rnd(&seed) % 1000000);

		if (impl == HEAP) {
			heap_timer_init(&items[i].ht, count_heap);
			heap_service_add(&hs, &items[i].ht, d);
		} else {
			tw_service_timer_init(&items[i].st, count_svc, 0);
			tw_service_add(svc, &items[i].st, d);
		}
	}
	wait_all();
	ns = (double)(atomic_load(&last_run) - (due + 1000000)) / (double)N;
	if (impl == HEAP)
		heap_service_destroy(&hs);
	else
		tw_service_destroy(svc);
	free(items);
	return ns;
}

static void expire(const char *name, enum impl impl, unsigned executors)
{
	double runs[9];

	for (int r = 0; r < nruns; r++)
		runs[r] = expire_once(impl, executors);
	report(name, "expire", executors ? executors : 1, runs, nruns);
}

/* ---- lateness on the real clock ---- */

struct late_item {
	struct item it;
	int64_t due;
	int64_t late;
};

static void late_svc(struct tw_service *s, struct tw_service_timer *t)
{
	struct late_item *li = tw_container_of(t, struct late_item, it.st);

	(void)s;
	li->late = bench_now_ns() - li->due;
	atomic_fetch_add(&ran, 1);
}

static void late_heap(struct heap_timer *t)
{
	struct late_item *li = tw_container_of(t, struct late_item, it.ht);

	li->late = bench_now_ns() - li->due;
	atomic_fetch_add(&ran, 1);
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static long env_or(const char *name, long fallback)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 10) : fallback;
}

static void lateness(const char *name, enum impl impl, enum tw_mode mode)
{
	struct late_item *items = calloc(N, sizeof(*items));
	int64_t *late = malloc(N * sizeof(*late));
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	struct heap_service hs;
	int64_t start;
	size_t early = 0;
	uint64_t seed = 11;

	atomic_store(&ran, 0);
	cfg.executors = (unsigned)env_or("BENCH_EXECUTORS", 1);
	cfg.mode = mode;
	cfg.wheel_size = (uint32_t)env_or("BENCH_WHEEL_SIZE", 20);
	cfg.inboxes = (unsigned)env_or("BENCH_INBOXES", 0);
	cfg.queue_capacity = 65536;
	if (impl == HEAP)
		heap_service_init(&hs, N, true);
	else
		tw_service_create(&svc, &cfg);
	/* Due 1 s .. 3 s from now: every task is added before any is due
	 * (adding 1e6 takes well under 1 s), so lateness is the timer's. */
	start = bench_now_ns() + 1000000000;
	for (size_t i = 0; i < N; i++) {
		items[i].due = start + (int64_t)(rnd(&seed) % 2000000000ULL);
		if (impl == HEAP) {
			heap_timer_init(&items[i].it.ht, late_heap);
			heap_service_add(&hs, &items[i].it.ht, items[i].due);
		} else {
			tw_service_timer_init(&items[i].it.st, late_svc, 0);
			tw_service_add(svc, &items[i].it.st, items[i].due);
		}
	}
	if (bench_now_ns() >= start)
		printf("  (warning: adding took longer than 1 s)\n");
	wait_all();
	if (env_or("BENCH_HIST", 0)) {
		int64_t worst[20] = { 0 };
		for (size_t i = 0; i < N; i++) {
			int seg = (int)((items[i].due - start) / 100000000);
			if (seg >= 0 && seg < 20 && items[i].late > worst[seg])
				worst[seg] = items[i].late;
		}
		for (int g = 0; g < 20; g++)
			printf("    due +%d00 ms: worst %.2f ms\n", g, (double)worst[g] / 1e6);
	}
	for (size_t i = 0; i < N; i++) {
		late[i] = items[i].late;
		early += late[i] < 0;
	}
	qsort(late, N, sizeof(*late), cmp64);
	printf("  %-22s lateness over 2 s: early %zu (%.1f %%), p50 %.2f ms, "
	       "p99 %.2f ms, max %.2f ms, min %.2f ms\n", name, early,
	       100.0 * (double)early / (double)N, (double)late[N / 2] / 1e6,
	       (double)late[N * 99 / 100] / 1e6, (double)late[N - 1] / 1e6,
	       (double)late[0] / 1e6);
	if (csv) {
		fprintf(csv, "%s,late_p50,1,%zu,%lld\n", name, N, (long long)late[N / 2]);
		fprintf(csv, "%s,late_p99,1,%zu,%lld\n", name, N,
			(long long)late[N * 99 / 100]);
		fprintf(csv, "%s,early_count,1,%zu,%zu\n", name, N, early);
	}
	if (impl == HEAP)
		heap_service_destroy(&hs);
	else
		tw_service_destroy(svc);
	free(items);
	free(late);
}

/* ---- memory per pending task ---- */

static void memory(void)
{
	double before, after;
	struct tw_service *svc;
	struct tw_service_config cfg = { 0 };
	struct heap_service hs;
	struct tw_service_timer *st;
	struct heap_timer *ht;

	before = bench_allocated();
	cfg.executors = 1;
	tw_service_create(&svc, &cfg);
	st = malloc(N * sizeof(*st));
	for (size_t i = 0; i < N; i++) {
		tw_service_timer_init(&st[i], svc_fn, 0);
		tw_service_add(svc, &st[i], bench_now_ns() + 1000000000LL + (int64_t)i * 1000);
	}
	after = bench_allocated();
	printf("  %-22s memory   %.1f bytes per pending task (the timer is %zu B; "
	       "the rest is the service's fixed part / N)\n", "service",
	       (after - before) / (double)N, sizeof(*st));
	if (csv)
		fprintf(csv, "service,bytes_per_task,1,%zu,%.1f\n", N,
			(after - before) / (double)N);
	tw_service_destroy(svc);
	free(st);

	before = bench_allocated();
	heap_service_init(&hs, N, false);
	ht = malloc(N * sizeof(*ht));
	for (size_t i = 0; i < N; i++) {
		heap_timer_init(&ht[i], heap_fn);
		heap_service_add(&hs, &ht[i], (int64_t)i);
	}
	after = bench_allocated();
	printf("  %-22s memory   %.1f bytes per pending task (timer %zu B + heap "
	       "slot)\n", "heap + mutex",
	       (after - before) / (double)N, sizeof(*ht));
	if (csv)
		fprintf(csv, "heap,bytes_per_task,1,%zu,%.1f\n", N,
			(after - before) / (double)N);
	heap_service_destroy(&hs);
	free(ht);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		N = strtoull(argv[1], NULL, 10);
	if (argc > 2)
		csv = fopen(argv[2], "w");
	nruns = (int)env_or("BENCH_RUNS", 3);
	if (nruns < 1 || nruns > 9)
		nruns = 3;
	if (csv)
		fprintf(csv, "impl,workload,threads,n,ns_per_op\n");
	printf("timer service vs binary heap under one mutex, N = %zu pending, "
	       "%ld cores\n", N, sysconf(_SC_NPROCESSORS_ONLN));
	printf("producers (wall time / total ops; due 1 s .. 1 h ahead):\n");
	producers("heap + mutex", HEAP, 0);
	producers("service", SVC, 0);
	producers("service 1 inbox", SVC, 1);
	printf("expiry (N due within one 1 ms tick; ns per timer run):\n");
	expire("heap + mutex (reaper)", HEAP, 0);
	expire("service (reaper)", SVC, 0);
	expire("service 1 executor", SVC, 1);
	expire("service 2 executors", SVC, 2);
	printf("lateness (tick 1 ms, 20 buckets, 1 executor):\n");
	lateness("service exact", SVC, TW_MODE_EXACT);
	lateness("service kafka", SVC, TW_MODE_KAFKA);
	lateness("heap + mutex", HEAP, TW_MODE_EXACT);
	printf("memory:\n");
	memory();
	if (csv)
		fclose(csv);
	return 0;
}
