/* SPDX-License-Identifier: MIT */
/*
 * service_bench — the timer service against two baselines a user could
 * write instead, measured in the same run on the same machine: this
 * project's own wheel under one mutex with a reaper that sleeps until its
 * next expiry and runs callbacks under the lock (wheel_service.c), and a
 * binary heap under one mutex (heap_service.c).
 *
 *   1. add, cancel and churn (cancel + re-add; a reschedule where the
 *      implementation has one) of N pending timers from 1, 2 and 4
 *      producer threads, for: the wheel under one mutex, the heap under
 *      one mutex, the service with its default shards (one per core), and
 *      with 1 shard (every producer takes the same mutex); beside each
 *      wall-clock figure, the process's CPU per operation (the producers',
 *      the reaper's and the executors'), what a machine with more cores
 *      pays;
 *   2. expiry throughput: N timers due at once, run by the reaper alone and
 *      by 1 and 2 executors;
 *   3. lateness on the real clock: N tasks due uniformly over 2 s (Kafka's
 *      measurement): how many ran early, p50 / p99 / max lateness; the
 *      service with one executor, and with its callbacks on its reaper
 *      (its default, and how both baselines run theirs); BENCH_RUNS runs
 *      of each, alternated, the median reported with the spread;
 *   4. memory per pending task, from the allocator (mallinfo2);
 *   5. the platform's floor (clock_nanosleep to an absolute deadline) and
 *      an idle service's wake-ups (1e5 timers over an hour);
 *   6. a summary: ratios against the heap measured in this run (a figure
 *      of another implementation from an earlier run is no ratio, so
 *      none is quoted here);
 *   7. with --connections: a server's idle timeouts, exact against windows:
 *      the reaper's wake-ups and the CPU they cost.
 * Every phase runs under a watchdog: one that overstays its limit is
 * reported with its counts (pushed, ran, pending) and the run exits 3.
 *
 * usage: service_bench [N [CSV]]   (default N = 1000000)
 *        service_bench --connections [N [SECONDS [PCT...]]]
 *            (1e6 connections, 20 s measured, windows of 0, 1 and 15 %)
 * Prints a table; with CSV, also writes one row per measurement:
 * impl,workload,threads,n,ns_per_op (a producer row's CPU per operation is
 * its own row, workload "add cpu", "cancel cpu" or "churn cpu")
 *
 * The lateness runs take their service settings from the environment, for
 * experiments: BENCH_WHEEL_SIZE (the default), BENCH_EXECUTORS (1), BENCH_SHARDS
 * (the default), and BENCH_HIST=1 prints the worst lateness per 100 ms of
 * due time. BENCH_RUNS (3, at most 9): runs per throughput and lateness
 * figure; the median is reported with the spread.
 * BENCH_ONLY=NAME[,NAME...]: only the producer and expiry rows whose name
 * contains one of the NAMEs, and none of the later phases (the summary
 * shows what ran). The service's producers bind their timers
 * (tw_service_timer_bind()) before the add phase's timing;
 * BENCH_NO_BIND=1 leaves the claim to each first add.
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
#include "wheel_service.h"
#include "timingwheel/timingwheel.h"

static size_t N = 1000000;
static FILE *csv;

/* How many shards the service is split into: the config's field is
 * written in set_partitions() only and the rows are named here only. 0
 * asks for the service's default. */
#define SVC_ROW "service"
#define SVC_ROW_ONE "service 1 shard" /* no comma: it is a CSV field */

static void set_partitions(struct tw_service_config *cfg, unsigned n)
{
	cfg->shards = n;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Every median of this run, for the summary's ratios. */
struct figure {
	const char *impl, *workload;
	unsigned threads;
	double value;
};
static struct figure figures[256];
static size_t nfigures;

static void remember(const char *impl, const char *workload, unsigned threads,
		     double value)
{
	if (nfigures < sizeof(figures) / sizeof(figures[0]))
		figures[nfigures++] = (struct figure){ impl, workload, threads,
						       value };
}

static double recall(const char *impl, const char *workload, unsigned threads)
{
	for (size_t i = 0; i < nfigures; i++)
		if (!strcmp(figures[i].impl, impl) &&
		    !strcmp(figures[i].workload, workload) &&
		    figures[i].threads == threads)
			return figures[i].value;
	return 0;
}

/* The median of runs[0..n) and its spread (min .. max); with cpu, on the
 * same line the median and spread of cpu[0..n), the process's CPU per
 * operation (every thread's), remembered and written as cpu_workload. */
static void report(const char *impl, const char *workload, unsigned threads,
		   double *runs, int n, const char *cpu_workload, double *cpu)
{
	double median, cpu_median = 0;
	char cpu_text[32] = "", cpu_spread[48] = "";

	qsort(runs, (size_t)n, sizeof(*runs), bench_cmp_double);
	median = runs[n / 2];
	remember(impl, workload, threads, median);
	if (cpu) {
		qsort(cpu, (size_t)n, sizeof(*cpu), bench_cmp_double);
		cpu_median = cpu[n / 2];
		remember(impl, cpu_workload, threads, cpu_median);
		snprintf(cpu_text, sizeof(cpu_text), "  CPU %7.1f ns/op",
			 cpu_median);
		snprintf(cpu_spread, sizeof(cpu_spread), "; CPU %.1f .. %.1f",
			 cpu[0], cpu[n - 1]);
	}
	printf("  %-22s %-8s %u thread%s  %8.1f ns/op  %6.2f Mops/s%s  (%d runs: "
	       "%.1f .. %.1f%s)\n", impl, workload, threads,
	       threads > 1 ? "s" : " ", median, 1e3 / median, cpu_text, n,
	       runs[0], runs[n - 1], cpu_spread);
	if (csv) {
		fprintf(csv, "%s,%s,%u,%zu,%.1f\n", impl, workload, threads, N,
			median);
		if (cpu)
			fprintf(csv, "%s,%s,%u,%zu,%.1f\n", impl, cpu_workload,
				threads, N, cpu_median);
	}
}

static int nruns = 3;

/* ---- the watchdog: a phase that hangs is a bug, reported with counts ----
 *
 * Every phase arms it with its name and a time limit; a thread checks
 * every 100 ms and, past the limit, prints what the phase pushed, what
 * ran and what is still pending, and exits with status 3 (a lost wake-up
 * would hang the expiry phase for ever). */
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *watch_phase;
static int64_t watch_deadline;
static size_t watch_pushed;
static struct tw_service *watch_svc;
static struct heap_service *watch_heap;
static atomic_size_t ran;

static void watch(const char *phase, int seconds, struct tw_service *svc,
		  struct heap_service *hs, size_t pushed)
{
	pthread_mutex_lock(&watch_mu);
	watch_phase = phase;
	watch_deadline = bench_now_ns() + (int64_t)seconds * 1000000000;
	watch_svc = svc;
	watch_heap = hs;
	watch_pushed = pushed;
	pthread_mutex_unlock(&watch_mu);
}

static void unwatch(void)
{
	watch(NULL, 0, NULL, NULL, 0);
}

static void *watchdog(void *arg)
{
	struct timespec tick = { 0, 100000000 };

	(void)arg;
	for (;;) {
		nanosleep(&tick, NULL);
		pthread_mutex_lock(&watch_mu);
		if (watch_phase && bench_now_ns() > watch_deadline) {
			size_t pending = 0;

			if (watch_svc) {
				struct tw_service_stats st;

				tw_service_stats(watch_svc, &st);
				pending = (size_t)(st.added - st.ran - st.stopped -
						   st.handed_back);
			} else if (watch_heap) {
				pending = watch_heap->len;
			}
			fprintf(stderr,
				"service_bench: WATCHDOG: phase \"%s\" still running "
				"past its limit: pushed %zu, ran %zu, pending %zu\n",
				watch_phase, watch_pushed, atomic_load(&ran), pending);
			fflush(NULL);
			_exit(3);
		}
		pthread_mutex_unlock(&watch_mu);
	}
	return NULL;
}

/* Every thread's CPU so far: the producers', the reaper's, the
 * executors' (and the watchdog's 10 checks a second). */
static int64_t process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- one interface over the implementations ---- */

enum impl { HEAP, SVC, WHEEL };

struct item {
	struct tw_service_timer st;
	struct heap_timer ht;
	struct tw_timer wt;
};

struct bench {
	enum impl impl;
	struct heap_service hs;
	struct wheel_service ws;
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

static void wheel_fn(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
}

/* Each worker times its own part: with more threads than cores, the
 * main thread may get the CPU only after the workers have run for a
 * while, so its own clock reading would start the phase late. */
struct worker {
	struct bench *b;
	unsigned index;
	int64_t t0, t1;
};

static void *work(void *arg)
{
	struct worker *wk = arg;
	struct bench *b = wk->b;
	size_t per = N / b->threads, first = wk->index * per;
	uint64_t seed = 88172645463325252ULL + wk->index;

	/* The service's timers are bound to this thread's shard where they
	 * are set up, outside the timing, as the header advises (Linux's
	 * timer_setup()); BENCH_NO_BIND=1 leaves the claim to the first
	 * add. The other two have no such step. */
	if (b->phase == 0 && b->impl == SVC && !getenv("BENCH_NO_BIND"))
		for (size_t i = 0; i < per; i++)
			tw_service_timer_bind(b->svc, &b->items[first + i].st);
	pthread_barrier_wait(&b->start);
	wk->t0 = bench_now_ns();
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
		} else if (b->impl == WHEEL) {
			if (b->phase == 0)
				wheel_service_add(&b->ws, &it->wt, due);
			else if (b->phase == 1)
				wheel_service_cancel(&b->ws, &it->wt);
			else
				wheel_service_reschedule(&b->ws, &it->wt, due);
		} else {
			if (b->phase == 0)
				tw_service_add(b->svc, &it->st, due);
			else if (b->phase == 1)
				tw_service_cancel(b->svc, &it->st);
			else
				tw_service_reschedule(b->svc, &it->st, due);
		}
	}
	wk->t1 = bench_now_ns();
	pthread_barrier_wait(&b->start);
	return NULL;
}

/* The phase's ns per operation, until the service applied everything
 * (count()); in *caller (if not NULL), until the last producer returned:
 * a service's add or cancel leaves its placement in the wheel to the
 * reaper, which on a machine with a free core does it meanwhile, and on
 * a busy one (or pinned to one core) count() does it here, inside the
 * first figure. In *cpu (if not NULL), the process's CPU per operation
 * over the same span: the producers', the reaper's and the executors'
 * together, what the phase costs on a machine with cores to spare. */
static double run_phase(struct bench *b, int phase, double *caller,
			double *cpu)
{
	pthread_t th[8];
	struct worker wk[8];
	int64_t t0, t1, caller_t1, cpu0, cpu1;
	double ops = (double)((N / b->threads) * b->threads);

	static const char *const names[] = { "producers: add",
					     "producers: cancel",
					     "producers: churn" };

	b->phase = phase;
	watch(names[phase], 120, b->impl == SVC ? b->svc : NULL,
	      b->impl == HEAP ? &b->hs : NULL, N);
	pthread_barrier_init(&b->start, NULL, b->threads + 1);
	for (unsigned i = 0; i < b->threads; i++) {
		wk[i].b = b;
		wk[i].index = i;
		pthread_create(&th[i], NULL, work, &wk[i]);
	}
	/* From when every producer is at the start: what a producer does
	 * before it (the service's binds, untimed) is not the phase's. */
	pthread_barrier_wait(&b->start);
	cpu0 = process_cpu_ns();
	pthread_barrier_wait(&b->start);
	/* count() takes every shard's mutex: whatever the service does
	 * after an add or a cancel returns is done by then. */
	if (b->impl == SVC)
		tw_service_count(b->svc);
	t1 = b->impl == SVC ? bench_now_ns() : 0;
	cpu1 = process_cpu_ns();
	t0 = INT64_MAX;
	caller_t1 = 0;
	for (unsigned i = 0; i < b->threads; i++) {
		pthread_join(th[i], NULL);
		t0 = wk[i].t0 < t0 ? wk[i].t0 : t0;
		t1 = wk[i].t1 > t1 ? wk[i].t1 : t1;
		caller_t1 = wk[i].t1 > caller_t1 ? wk[i].t1 : caller_t1;
	}
	pthread_barrier_destroy(&b->start);
	unwatch();
	if (caller)
		*caller = (double)(caller_t1 - t0) / ops;
	if (cpu)
		*cpu = (double)(cpu1 - cpu0) / ops;
	return (double)(t1 - t0) / ops;
}

/* Whether BENCH_ONLY (a comma-separated list of names) selects name. */
static bool selected(const char *name)
{
	const char *only = getenv("BENCH_ONLY");

	while (only && *only) {
		size_t len = strcspn(only, ",");
		char part[64];

		if (len > 0 && len < sizeof(part)) {
			memcpy(part, only, len);
			part[len] = 0;
			if (strstr(name, part))
				return true;
		}
		only += len + (only[len] == ',');
	}
	return !only;
}

/* One producer run: a fresh set of N timers and a fresh implementation,
 * its add, cancel and churn phases timed into the r-th slot of each. */
struct producer_figures {
	double add[9], add_caller[9], cancel[9], churn[9];
	double add_cpu[9], cancel_cpu[9], churn_cpu[9];
};

static void producer_run(enum impl impl, unsigned partitions,
			 unsigned threads, int r, struct producer_figures *f)
{
	struct bench b = { 0 };
	struct tw_service_config cfg = { 0 };

	b.impl = impl;
	b.threads = threads;
	b.items = calloc(N, sizeof(*b.items));
	for (size_t i = 0; i < N; i++) {
		tw_service_timer_init(&b.items[i].st, svc_fn);
		heap_timer_init(&b.items[i].ht, heap_fn);
		tw_timer_init(&b.items[i].wt, wheel_fn);
	}
	b.base = bench_now_ns();
	if (impl == HEAP) {
		heap_service_init(&b.hs, N, true);
	} else if (impl == WHEEL) {
		wheel_service_init(&b.ws, true);
	} else {
		set_partitions(&cfg, partitions);
		cfg.executors = 1;
		tw_service_create(&b.svc, &cfg);
	}
	f->add[r] = run_phase(&b, 0, &f->add_caller[r], &f->add_cpu[r]);
	f->cancel[r] = run_phase(&b, 1, NULL, &f->cancel_cpu[r]);
	run_phase(&b, 0, NULL, NULL); /* all pending again */
	f->churn[r] = run_phase(&b, 2, NULL, &f->churn_cpu[r]);
	if (impl == HEAP)
		heap_service_destroy(&b.hs);
	else if (impl == WHEEL)
		wheel_service_destroy(&b.ws);
	else
		tw_service_destroy(b.svc);
	free(b.items);
}

/* The producer rows, for each thread count, alternated as the lateness
 * rows are: round r begins r rows further on, so that no row always
 * runs first or after the same one. One run moved with where its N
 * timers landed in memory: on this VM, a million timers churned one
 * thread at 120 ns an operation in one process and 250 in the next,
 * the wheel under a mutex as much as the service, so rows run one after
 * the other took the machine's moods as their own. */
static void producers(void)
{
	static const struct {
		const char *name;
		enum impl impl;
		unsigned partitions;
	} rows[] = {
		{ "wheel + mutex", WHEEL, 0 },
		{ "heap + mutex", HEAP, 0 },
		{ SVC_ROW, SVC, 0 },
		{ SVC_ROW_ONE, SVC, 1 },
	};
	enum { ROWS = sizeof(rows) / sizeof(rows[0]) };
	static const unsigned counts[] = { 1, 2, 4 };
	static struct producer_figures figs[ROWS];

	for (size_t c = 0; c < 3; c++) {
		for (int r = 0; r < nruns; r++)
			for (size_t i = 0; i < ROWS; i++) {
				size_t k = (i + (size_t)r) % ROWS;

				if (selected(rows[k].name))
					producer_run(rows[k].impl,
						     rows[k].partitions,
						     counts[c], r, &figs[k]);
			}
		for (size_t k = 0; k < ROWS; k++) {
			struct producer_figures *f = &figs[k];
			const char *name = rows[k].name;

			if (!selected(name))
				continue;
			report(name, "add", counts[c], f->add, nruns, "add cpu",
			       f->add_cpu);
			if (rows[k].impl == SVC)
				report(name, "add caller", counts[c],
				       f->add_caller, nruns, NULL, NULL);
			report(name, "cancel", counts[c], f->cancel, nruns,
			       "cancel cpu", f->cancel_cpu);
			report(name, "churn", counts[c], f->churn, nruns,
			       "churn cpu", f->churn_cpu);
		}
	}
}

/* ---- expiry throughput ---- */

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

static void count_wheel(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
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

/* Map every page of [p, p + bytes) now, with a write to each: a large
 * calloc gets fresh pages that the kernel maps on their first write, and
 * on this VM those faults made a million first writes outlast the expiry
 * phase's lead. A volatile write, as gcc drops a memset of zero after
 * calloc. */
static void touch(void *p, size_t bytes)
{
	volatile char *c = p;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < bytes; i += page)
		c[i] = 0;
}

/* Wall ns per timer from the last due time to the last run, and in *cpu
 * the process's CPU ns per timer from the end of the adds to the last run
 * (the main thread sleeps meanwhile): on a shared machine the wall figure
 * also counts the time other processes had the core, the CPU one not.
 * The timers are due `lead` ns after the adds start; in *adds, how long
 * the adds took. -1 if they ended less than 50 ms before the due time (the
 * run does not count: firing overlapped the adds). */
static double expire_once(enum impl impl, unsigned executors, int64_t lead,
			  double *cpu, int64_t *adds)
{
	int64_t cpu0;
	bool overran;
	struct item *items = calloc(N, sizeof(*items));
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	struct heap_service hs;
	struct wheel_service ws;
	int64_t due, start;
	uint64_t seed = 7;
	double ns;

	touch(items, N * sizeof(*items));
	atomic_store(&ran, 0);
	cfg.executors = executors;
	cfg.queue_capacity = 65536;
	if (impl == HEAP) {
		heap_service_init(&hs, N, true);
		touch(hs.heap, N * sizeof(*hs.heap));
	} else if (impl == WHEEL) {
		wheel_service_init(&ws, true);
	} else {
		tw_service_create(&svc, &cfg);
	}
	/* All due within one 1 ms tick, `lead` from now: added well before
	 * (checked below: on a loaded machine a million adds took over the
	 * 200 ms the lead once was, and timers fired while others were
	 * added). */
	start = bench_now_ns();
	due = start + lead;
	for (size_t i = 0; i < N; i++) {
		int64_t d = due + (int64_t)(rnd(&seed) % 1000000);

		if (impl == HEAP) {
			heap_timer_init(&items[i].ht, count_heap);
			heap_service_add(&hs, &items[i].ht, d);
		} else if (impl == WHEEL) {
			tw_timer_init(&items[i].wt, count_wheel);
			wheel_service_add(&ws, &items[i].wt, d);
		} else {
			tw_service_timer_init(&items[i].st, count_svc);
			tw_service_add(svc, &items[i].st, d);
		}
	}
	/* As in the producer rows: count() takes every shard's mutex. */
	if (impl == SVC)
		tw_service_count(svc);
	watch("expiry", 120, svc, impl == HEAP ? &hs : NULL, N);
	*adds = bench_now_ns() - start;
	overran = start + *adds > due - 50000000;
	cpu0 = process_cpu_ns();
	wait_all();
	*cpu = (double)(process_cpu_ns() - cpu0) / (double)N;
	unwatch();
	ns = (double)(atomic_load(&last_run) - (due + 1000000)) / (double)N;
	if (impl == HEAP)
		heap_service_destroy(&hs);
	else if (impl == WHEEL)
		wheel_service_destroy(&ws);
	else
		tw_service_destroy(svc);
	free(items);
	return overran ? -1 : ns;
}

/* Every expiry row, one run of each in turn, nruns rounds: on a shared
 * machine a slow spell then falls on every row alike, not on the runs of
 * one (the medians compared are of the same minutes). The lead from the
 * first add to the due time starts at 500 ms and is kept at least twice
 * the slowest adds seen, so that a slow machine lengthens the wait, not
 * the list of runs that overran. */
static void expire_all(void)
{
	static const struct {
		const char *name;
		enum impl impl;
		unsigned executors;
	} rows[] = {
		{ "wheel + mutex (reaper)", WHEEL, 0 },
		{ "heap + mutex (reaper)", HEAP, 0 },
		{ "service (reaper)", SVC, 0 },
		{ "service 1 executor", SVC, 1 },
		{ "service 2 executors", SVC, 2 },
	};
	enum { NROWS = sizeof(rows) / sizeof(rows[0]) };
	double runs[NROWS][9], cpu[NROWS][9];
	int64_t lead = 500000000, adds;

	for (int r = 0; r < nruns; r++)
		for (size_t k = 0; k < NROWS; k++)
			for (int tries = 0; selected(rows[k].name); tries++) {
				runs[k][r] = expire_once(rows[k].impl,
							 rows[k].executors, lead,
							 &cpu[k][r], &adds);
				if (2 * adds > lead) {
					lead = 2 * adds;
					printf("  (%s: the adds took %.0f ms; the "
					       "lead is now %.0f ms)\n",
					       rows[k].name, (double)adds / 1e6,
					       (double)lead / 1e6);
				}
				if (runs[k][r] >= 0)
					break;
				printf("  (%s: the adds overran the due time; "
				       "again)\n", rows[k].name);
				if (tries == 5) {
					fprintf(stderr, "expiry: the adds overran "
						"6 times\n");
					exit(3);
				}
			}
	for (size_t k = 0; k < NROWS; k++) {
		if (!selected(rows[k].name))
			continue;
		report(rows[k].name, "expire",
		       rows[k].executors ? rows[k].executors : 1, runs[k], nruns,
		       NULL, NULL);
		report(rows[k].name, "expire cpu",
		       rows[k].executors ? rows[k].executors : 1, cpu[k], nruns,
		       NULL, NULL);
	}
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

static void late_wheel(struct tw_wheel *w, struct tw_timer *t)
{
	struct late_item *li = tw_container_of(t, struct late_item, it.wt);

	(void)w;
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

/* One lateness run's figures: p50, p99, max and min lateness in ms, and
 * how many timers ran early. */
struct late_run {
	double ms[4];
	size_t early;
};

/* executors: the service's (BENCH_EXECUTORS, 1 by default, where < 0). */
static struct late_run lateness_run(enum impl impl, enum tw_mode mode,
				    int executors)
{
	struct late_item *items = calloc(N, sizeof(*items));
	int64_t *late = malloc(N * sizeof(*late));
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;
	struct heap_service hs;
	struct wheel_service ws;
	struct late_run run = { { 0 }, 0 };
	int64_t start;
	uint64_t seed = 11;

	touch(items, N * sizeof(*items));
	atomic_store(&ran, 0);
	cfg.executors = executors < 0 ? (unsigned)env_or("BENCH_EXECUTORS", 1)
				      : (unsigned)executors;
	cfg.mode = mode;
	cfg.wheel_size = (uint32_t)env_or("BENCH_WHEEL_SIZE", 0); /* default */
	set_partitions(&cfg, (unsigned)env_or("BENCH_SHARDS", 0));
	cfg.queue_capacity = 65536;
	if (impl == HEAP) {
		heap_service_init(&hs, N, true);
		touch(hs.heap, N * sizeof(*hs.heap));
	} else if (impl == WHEEL) {
		wheel_service_init(&ws, true);
	} else {
		tw_service_create(&svc, &cfg);
	}
	/* Due 1 s .. 3 s from now: every task is added before any is due
	 * (adding 1e6 takes well under 1 s), so lateness is the timer's. */
	start = bench_now_ns() + 1000000000;
	for (size_t i = 0; i < N; i++) {
		items[i].due = start + (int64_t)(rnd(&seed) % 2000000000ULL);
		if (impl == HEAP) {
			heap_timer_init(&items[i].it.ht, late_heap);
			heap_service_add(&hs, &items[i].it.ht, items[i].due);
		} else if (impl == WHEEL) {
			tw_timer_init(&items[i].it.wt, late_wheel);
			wheel_service_add(&ws, &items[i].it.wt, items[i].due);
		} else {
			tw_service_timer_init(&items[i].it.st, late_svc);
			tw_service_add(svc, &items[i].it.st, items[i].due);
		}
	}
	if (bench_now_ns() >= start)
		printf("  (warning: adding took longer than 1 s)\n");
	watch("lateness", 120, svc, impl == HEAP ? &hs : NULL, N);
	wait_all();
	unwatch();
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
		run.early += late[i] < 0;
	}
	qsort(late, N, sizeof(*late), cmp64);
	run.ms[0] = (double)late[N / 2] / 1e6;
	run.ms[1] = (double)late[N * 99 / 100] / 1e6;
	run.ms[2] = (double)late[N - 1] / 1e6;
	run.ms[3] = (double)late[0] / 1e6;
	if (impl == HEAP)
		heap_service_destroy(&hs);
	else if (impl == WHEEL)
		wheel_service_destroy(&ws);
	else
		tw_service_destroy(svc);
	free(items);
	free(late);
	return run;
}

/* Each lateness row run nruns times, as the throughput rows are: the
 * rows alternated, each round begun one row further on so that no row
 * always runs first, and each figure the median of the row's runs, with
 * their spread. One run a row moved with the machine: on this VM, with a
 * million timers, eight runs of "service exact" spread 1.6-14.7 ms at
 * p99 and six of "wheel + mutex" 3.0-10.6 ms, a stall of 20 ms landing
 * anywhere in a run's 2 s. A timer that ran early in any run is counted:
 * every run's early timers are added up. */
static void lateness(void)
{
	static const struct {
		const char *name;
		enum impl impl;
		enum tw_mode mode;
		int executors;
	} rows[] = {
		{ "service exact", SVC, TW_MODE_EXACT, -1 },
		/* The library's default, and the baselines' way: callbacks
		 * on the reaper, no hand-off to an executor. */
		{ "service on its reaper", SVC, TW_MODE_EXACT, 0 },
		{ "service kafka", SVC, TW_MODE_KAFKA, -1 },
		{ "wheel + mutex", WHEEL, TW_MODE_EXACT, -1 },
		{ "heap + mutex", HEAP, TW_MODE_EXACT, -1 },
	};
	enum { ROWS = sizeof(rows) / sizeof(rows[0]) };
	static const char *const names[] = { "late p50", "late p99", "late max" };
	static const char *const columns[] = { "late_p50", "late_p99", "late_max" };
	struct late_run runs[ROWS][9];

	for (int r = 0; r < nruns; r++)
		for (size_t i = 0; i < ROWS; i++) {
			size_t k = (i + (size_t)r) % ROWS;
			struct late_run *one = &runs[k][r];

			*one = lateness_run(rows[k].impl, rows[k].mode,
					    rows[k].executors);
			printf("  %-22s run %d: early %zu, p50 %.2f ms, p99 %.2f ms, "
			       "max %.2f ms, min %.2f ms\n", rows[k].name, r + 1,
			       one->early, one->ms[0], one->ms[1], one->ms[2],
			       one->ms[3]);
		}
	for (size_t k = 0; k < ROWS; k++) {
		double fig[3][9], median[3];
		size_t early = 0;

		for (int r = 0; r < nruns; r++) {
			early += runs[k][r].early;
			for (int f = 0; f < 3; f++)
				fig[f][r] = runs[k][r].ms[f];
		}
		for (int f = 0; f < 3; f++) {
			qsort(fig[f], (size_t)nruns, sizeof(double), bench_cmp_double);
			median[f] = fig[f][nruns / 2];
			remember(rows[k].name, names[f], 1, median[f]);
		}
		remember(rows[k].name, "early %", 1,
			 100.0 * (double)early / ((double)N * nruns));
		printf("  %-22s lateness over 2 s, median of %d runs: early %zu "
		       "(%.1f %%, all runs), p50 %.2f ms (%.2f .. %.2f), p99 %.2f ms "
		       "(%.2f .. %.2f), max %.2f ms (%.2f .. %.2f)\n", rows[k].name,
		       nruns, early, 100.0 * (double)early / ((double)N * nruns),
		       median[0], fig[0][0], fig[0][nruns - 1], median[1],
		       fig[1][0], fig[1][nruns - 1], median[2], fig[2][0],
		       fig[2][nruns - 1]);
		if (csv) {
			for (int f = 0; f < 3; f++)
				fprintf(csv, "%s,%s,1,%zu,%lld\n", rows[k].name,
					columns[f], N, (long long)(median[f] * 1e6));
			fprintf(csv, "%s,early_count,1,%zu,%zu\n", rows[k].name,
				N, early);
		}
	}
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
		tw_service_timer_init(&st[i], svc_fn);
		tw_service_add(svc, &st[i], bench_now_ns() + 1000000000LL + (int64_t)i * 1000);
	}
	after = bench_allocated();
	printf("  %-22s memory   %.1f bytes per pending task (the timer is %zu B; "
	       "the rest is the service's fixed part / N)\n", "service",
	       (after - before) / (double)N, sizeof(*st));
	remember("service", "bytes", 1, (after - before) / (double)N);
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
	remember("heap + mutex", "bytes", 1, (after - before) / (double)N);
	if (csv)
		fprintf(csv, "heap,bytes_per_task,1,%zu,%.1f\n", N,
			(after - before) / (double)N);
	heap_service_destroy(&hs);
	free(ht);

	{
		struct wheel_service ws;
		struct tw_timer *wt;
		int64_t base = bench_now_ns();

		before = bench_allocated();
		wheel_service_init(&ws, false);
		wt = malloc(N * sizeof(*wt));
		for (size_t i = 0; i < N; i++) {
			tw_timer_init(&wt[i], wheel_fn);
			wheel_service_add(&ws, &wt[i], base + 1000000000LL +
					  (int64_t)i * 1000);
		}
		after = bench_allocated();
		printf("  %-22s memory   %.1f bytes per pending task (the timer is "
		       "%zu B; the rest is the wheel's fixed part / N)\n",
		       "wheel + mutex", (after - before) / (double)N, sizeof(*wt));
		remember("wheel + mutex", "bytes", 1, (after - before) / (double)N);
		if (csv)
			fprintf(csv, "wheel,bytes_per_task,1,%zu,%.1f\n", N,
				(after - before) / (double)N);
		wheel_service_destroy(&ws);
		free(wt);
	}
}

/* ---- what a cancel leaves for later ----
 *
 * A service whose cancel left the timer linked (a tombstone) for the
 * wheel to drop later would hide that work from the producer's cancel
 * figure. Measured here, on one thread: N timers 1 s .. 1 h ahead, all
 * cancelled, then a manual service's virtual clock walks past the hour in
 * 10 ms steps, polling at each; the same walk with nothing pending is
 * subtracted. Per cancelled timer: what the wheel still did for it (the
 * service's cancel unlinks at once: about nothing, within the noise). */
static _Atomic int64_t tomb_clock;

static int64_t tomb_now(void *arg)
{
	(void)arg;
	return atomic_load(&tomb_clock);
}

static double walk_the_hour(struct tw_service *svc, int64_t base)
{
	int64_t t0 = bench_now_ns();

	for (int64_t at = base; at <= base + 3602000000000LL; at += 10000000) {
		atomic_store(&tomb_clock, at);
		tw_service_poll(svc);
	}
	return (double)(bench_now_ns() - t0);
}

static void tombstones(void)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc, *empty;
	struct tw_service_timer *st = malloc(N * sizeof(*st));
	const int64_t base = 1000000000000LL;
	uint64_t seed = 11;
	double cancel_ns, with, without, per;

	cfg.manual = true;
	cfg.clock.now = tomb_now;
	atomic_store(&tomb_clock, base);
	tw_service_create(&svc, &cfg);
	tw_service_create(&empty, &cfg);
	watch("tombstones", 300, svc, NULL, N);
	for (size_t i = 0; i < N; i++) {
		tw_service_timer_init(&st[i], svc_fn);
		tw_service_add(svc, &st[i], base + 1000000000LL +
			       (int64_t)(rnd(&seed) % 3600000000000ULL));
	}
	tw_service_poll(svc); /* placed */
	cancel_ns = (double)bench_now_ns();
	for (size_t i = 0; i < N; i++)
		tw_service_cancel(svc, &st[(i * 7919) % N]);
	cancel_ns = ((double)bench_now_ns() - cancel_ns) / (double)N;
	with = walk_the_hour(svc, base);
	atomic_store(&tomb_clock, base);
	without = walk_the_hour(empty, base);
	unwatch();
	per = (with - without) / (double)N;
	printf("  %-22s cancel   %.1f ns now (one thread, no reaper running) + "
	       "%.1f ns later in the wheel per cancelled timer (what the walk "
	       "of the hour still did for it; "
	       "%zu left after the hour)\n", "service", cancel_ns, per,
	       tw_service_count(svc));
	remember("service", "tomb later", 1, per);
	if (csv)
		fprintf(csv, "service,tombstone_later_ns,1,%zu,%.1f\n", N, per);
	tw_service_destroy(svc);
	tw_service_destroy(empty);
	free(st);
}

/* ---- the platform's floor: a bare sleep to an absolute deadline ----
 *
 * What no timer on this machine can beat: clock_nanosleep(TIMER_ABSTIME)
 * to 2,000 deadlines 1 .. 2 ms apart, and how late it wakes. The service's
 * lateness is read against this, in the same run. */
static void sleep_floor(void)
{
	enum { SLEEPS = 2000 };
	int64_t over[SLEEPS];
	uint64_t seed = 5;

	watch("sleep floor", 60, NULL, NULL, SLEEPS);
	for (int i = 0; i < SLEEPS; i++) {
		int64_t deadline = bench_now_ns() + 1000000 +
				   (int64_t)(rnd(&seed) % 1000000);
		struct timespec ts = { (time_t)(deadline / 1000000000),
				       (long)(deadline % 1000000000) };

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
			;
		over[i] = bench_now_ns() - deadline;
	}
	unwatch();
	qsort(over, SLEEPS, sizeof(*over), cmp64);
	printf("  %-22s oversleep of clock_nanosleep(TIMER_ABSTIME): p50 %.3f ms, "
	       "p99 %.3f ms, max %.3f ms\n", "platform floor",
	       (double)over[SLEEPS / 2] / 1e6, (double)over[SLEEPS * 99 / 100] / 1e6,
	       (double)over[SLEEPS - 1] / 1e6);
	remember("floor", "late p50", 1, (double)over[SLEEPS / 2] / 1e6);
	remember("floor", "late p99", 1, (double)over[SLEEPS * 99 / 100] / 1e6);
	remember("floor", "late max", 1, (double)over[SLEEPS - 1] / 1e6);
}

/* ---- an idle service: how often the reaper wakes ----
 *
 * 1e5 timers spread over an hour, none due for the first second: the
 * reaper should wake about once per due bucket (at most once per
 * distinct due tick), not on a timer of its own. */
static void idle_wakeups(void)
{
	enum { IDLE_N = 100000, WINDOW_S = 10 };
	struct tw_service_timer *st = malloc(IDLE_N * sizeof(*st));
	int64_t *due = malloc(IDLE_N * sizeof(*due));
	char *seen = calloc(3600 * 1000 + 1, 1);
	struct tw_service_config cfg = { 0 };
	struct tw_service_stats a, b;
	struct tw_service *svc;
	struct timespec window = { WINDOW_S, 0 };
	int64_t start, t0, t1;
	uint64_t seed = 3;
	size_t ticks = 0, due_in_window = 0;

	cfg.executors = 1;
	tw_service_create(&svc, &cfg);
	start = bench_now_ns() + 1000000000;
	for (size_t i = 0; i < IDLE_N; i++) {
		due[i] = start + (int64_t)(rnd(&seed) % 3600000000000ULL);
		tw_service_timer_init(&st[i], svc_fn);
		tw_service_add(svc, &st[i], due[i]);
	}
	watch("idle wake-ups", WINDOW_S + 30, svc, NULL, IDLE_N);
	tw_service_stats(svc, &a);
	t0 = bench_now_ns();
	nanosleep(&window, NULL);
	t1 = bench_now_ns();
	tw_service_stats(svc, &b);
	unwatch();
	for (size_t i = 0; i < IDLE_N; i++) {
		if (due[i] > t0 && due[i] <= t1) {
			int64_t tick = (due[i] - start) / 1000000;

			due_in_window++;
			if (tick >= 0 && tick <= 3600 * 1000 && !seen[tick]) {
				seen[tick] = 1;
				ticks++;
			}
		}
	}
	printf("  %-22s idle: %.1f wake-ups/s while %.1f timers/s came due in "
	       "%.1f distinct 1 ms ticks/s (ran %.1f/s)\n", "service",
	       (double)(b.wakeups - a.wakeups) * 1e9 / (double)(t1 - t0),
	       (double)due_in_window * 1e9 / (double)(t1 - t0),
	       (double)ticks * 1e9 / (double)(t1 - t0),
	       (double)(b.ran - a.ran) * 1e9 / (double)(t1 - t0));
	remember("service", "idle wakes/s", 1,
		 (double)(b.wakeups - a.wakeups) * 1e9 / (double)(t1 - t0));
	remember("service", "due ticks/s", 1, (double)ticks * 1e9 / (double)(t1 - t0));
	tw_service_destroy(svc);
	free(st);
	free(due);
	free(seen);
}

/* ---- idle connections: windows against exact timeouts ----
 *
 * A server holding `conns` connections, each with a 30 s idle timeout. Nine
 * in ten are active: a driver thread resets a random one of them to now +
 * 30 s at the rate that touches each every 5 s on average. One in ten is
 * idle: nothing resets it, its timeout fires, and the callback opens a new
 * idle connection in its place (an add at now + 30 s), so timeouts keep
 * firing at about conns / 10 / 30 s. At the start the idle ones are due
 * uniformly over the next 30 s and the active ones from 25 to 30 s, as if
 * each had last been reset at a random moment of its last 30 or 5 s. With a window of pct % every add and reset asks for [due, due +
 * pct % of 30 s] (tw_service_add_range, tw_service_reschedule_range).
 * Measured over `seconds` after a 2 s warm-up: the reaper's wake-ups per
 * second, timeouts fired per second, and CPU per second of the service's
 * own threads (the process's CPU less the driver thread's) and of the
 * driver (its resets). */

struct conn {
	struct tw_service_timer t;
	int64_t window; /* clock units a timeout may come late */
};

static atomic_uint_fast64_t conns_fired;

static void conn_timed_out(struct tw_service *svc, struct tw_service_timer *t)
{
	struct conn *c = tw_container_of(t, struct conn, t);
	int64_t due = tw_service_now(svc) + TW_S(30);

	atomic_fetch_add_explicit(&conns_fired, 1, memory_order_relaxed);
	tw_service_add_range(svc, t, due, due + c->window);
}

struct conn_driver {
	struct tw_service *svc;
	struct conn *c;
	size_t n;
	double seconds;
	int64_t window;
	uint64_t resets;
	int64_t cpu_ns;      /* the driver's CPU inside the measured window */
	int64_t t0, t1;      /* the measured window, wall clock */
	struct tw_service_stats a, b;
	int64_t proc0, proc1;
};

static int64_t cpu_ns(clockid_t which)
{
	struct timespec ts;

	clock_gettime(which, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *conn_drive(void *arg)
{
	struct conn_driver *d = arg;
	size_t active = d->n - d->n / 10;
	double rate = (double)active / 5.0; /* resets per second */
	int64_t start = bench_now_ns(), warm = start + 2000000000LL;
	int64_t end = warm + (int64_t)(d->seconds * 1e9), cpu0 = 0;
	uint64_t done = 0, seed = 11, measured_from = 0;
	bool measuring = false;

	for (;;) {
		int64_t now = bench_now_ns();
		uint64_t target = (uint64_t)((double)(now - start) * rate / 1e9);
		struct timespec ms = { 0, 1000000 };

		if (!measuring && now >= warm) {
			measuring = true;
			measured_from = done;
			cpu0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
			d->proc0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
			d->t0 = now;
			tw_service_stats(d->svc, &d->a);
		}
		if (now >= end)
			break;
		for (; done < target; done++) {
			/* an active one: every index not a multiple of 10 */
			size_t i = (size_t)(rnd(&seed) % d->n);
			int64_t due;

			if (i % 10 == 0)
				i++;
			if (i >= d->n)
				i = 1;
			due = tw_service_now(d->svc) + TW_S(30);
			tw_service_reschedule_range(d->svc, &d->c[i].t, due,
						    due + d->window);
		}
		nanosleep(&ms, NULL);
	}
	d->cpu_ns = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	d->proc1 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	d->t1 = bench_now_ns();
	tw_service_stats(d->svc, &d->b);
	d->resets = done - measured_from;
	return NULL;
}

static void connections(size_t n, double seconds, double pct)
{
	struct tw_service_config cfg = { 0 };
	struct conn *c = calloc(n, sizeof(*c));
	struct conn_driver d = { 0 };
	struct tw_service *svc;
	pthread_t driver;
	int64_t start, window = (int64_t)(pct / 100.0 * 30e9);
	uint64_t seed = 5;
	double wall;

	cfg.executors = 1;
	if (!c || tw_service_create(&svc, &cfg) != TW_OK) {
		fprintf(stderr, "connections: out of memory\n");
		exit(1);
	}
	atomic_store(&conns_fired, 0);
	start = tw_service_now(svc);
	for (size_t i = 0; i < n; i++) {
		/* idle: due anywhere in the next 30 s; active: reset in the
		 * last 5 s, as the driver keeps them */
		int64_t due = start + (i % 10 == 0
			? (int64_t)(rnd(&seed) % 30000000000ULL)
			: TW_S(25) + (int64_t)(rnd(&seed) % 5000000000ULL));

		c[i].window = window;
		tw_service_timer_init(&c[i].t, conn_timed_out);
		tw_service_add_range(svc, &c[i].t, due, due + window);
	}
	d = (struct conn_driver){ .svc = svc, .c = c, .n = n, .seconds = seconds,
				  .window = window };
	watch("connections", (int)seconds + 60, svc, NULL, n);
	pthread_create(&driver, NULL, conn_drive, &d);
	pthread_join(driver, NULL);
	unwatch();
	wall = (double)(d.t1 - d.t0) / 1e9;
	printf("  window %5.1f %% (%6.0f ms)  %8.1f wake-ups/s  %7.0f fired/s  "
	       "%7.0f resets/s  service CPU %5.1f %%  driver CPU %5.1f %%  "
	       "(%.1f s)\n", pct, (double)window / 1e6,
	       (double)(d.b.wakeups - d.a.wakeups) / wall,
	       (double)(d.b.ran - d.a.ran) / wall, (double)d.resets / wall,
	       100.0 * (double)(d.proc1 - d.proc0 - d.cpu_ns) / 1e9 / wall,
	       100.0 * (double)d.cpu_ns / 1e9 / wall, wall);
	fflush(stdout);
	tw_service_shutdown(svc, NULL, NULL);
	tw_service_destroy(svc);
	free(c);
}

/* ---- the summary: ratios measured in this run ---- */

/* One figure for the service and each baseline; the ratios are the
 * baseline's over the service's, so > 1 says the service is better (for
 * every figure here, smaller is better). */
static void summary_row(const char *label, double svc, double wheel,
			double heap, const char *unit)
{
	if (svc == 0 && wheel == 0 && heap == 0)
		return; /* not measured in this run (BENCH_ONLY) */
	printf("  %-40s %9.2f %9.2f %7.2fx %9.2f %7.2fx   %s\n", label, svc,
	       wheel, svc > 0 ? wheel / svc : 0, heap, svc > 0 ? heap / svc : 0,
	       unit);
}

static void summary(void)
{
	static const unsigned counts[] = { 1, 2, 4 };
	static const char *const works[] = { "add", "cancel", "churn" };
	static const char *const cpus[] = { "add cpu", "cancel cpu", "churn cpu" };
	static const char *const late[] = { "late p50", "late p99", "late max" };
	double floor99 = recall("floor", "late p99", 1);
	double svc99 = recall("service exact", "late p99", 1);
	double floormax = recall("floor", "late max", 1);
	double svcmax = recall("service exact", "late max", 1);
	double tomb = recall("service", "tomb later", 1);
	char label[64];

	printf("\nsummary: the service against the wheel under one mutex and the "
	       "heap under one mutex, all in this run; a ratio is the baseline's "
	       "figure over the service's (> 1: the service is better)\n");
	printf("  %-40s %9s %9s %8s %9s %8s\n", "figure", "service",
	       "wheel+mu", "w/svc", "heap+mu", "h/svc");
	for (size_t w = 0; w < 3; w++) {
		for (size_t c = 0; c < 3; c++) {
			snprintf(label, sizeof(label), "%s%s, %u thread%s",
				 works[w], w == 1 ? " as the caller sees it" : "",
				 counts[c], counts[c] > 1 ? "s" : "");
			summary_row(label, recall(SVC_ROW, works[w], counts[c]),
				    recall("wheel + mutex", works[w], counts[c]),
				    recall("heap + mutex", works[w], counts[c]),
				    "ns");
		}
		for (size_t c = 0; c < 3; c++) {
			snprintf(label, sizeof(label), "%s CPU, %u thread%s",
				 works[w], counts[c], counts[c] > 1 ? "s" : "");
			summary_row(label, recall(SVC_ROW, cpus[w], counts[c]),
				    recall("wheel + mutex", cpus[w], counts[c]),
				    recall("heap + mutex", cpus[w], counts[c]),
				    "CPU ns, all threads");
		}
		if (w == 0) /* the service's add before the wheel placed it */
			summary_row("add as the caller sees it, 1 thread",
				    recall(SVC_ROW, "add caller", 1),
				    recall("wheel + mutex", "add", 1),
				    recall("heap + mutex", "add", 1), "ns");
		if (w == 1) /* the wheel's later part of a service cancel */
			summary_row("cancel's whole cost, 1 thread",
				    recall(SVC_ROW, "cancel", 1) + tomb,
				    recall("wheel + mutex", "cancel", 1),
				    recall("heap + mutex", "cancel", 1), "ns");
	}
	summary_row("expiry, callbacks on the reaper",
		    recall("service (reaper)", "expire", 1),
		    recall("wheel + mutex (reaper)", "expire", 1),
		    recall("heap + mutex (reaper)", "expire", 1), "ns per timer");
	summary_row("expiry, 1 executor",
		    recall("service 1 executor", "expire", 1),
		    recall("wheel + mutex (reaper)", "expire", 1),
		    recall("heap + mutex (reaper)", "expire", 1), "ns per timer");
	summary_row("expiry CPU, callbacks on the reaper",
		    recall("service (reaper)", "expire cpu", 1),
		    recall("wheel + mutex (reaper)", "expire cpu", 1),
		    recall("heap + mutex (reaper)", "expire cpu", 1), "CPU ns per timer");
	summary_row("expiry CPU, 1 executor",
		    recall("service 1 executor", "expire cpu", 1),
		    recall("wheel + mutex (reaper)", "expire cpu", 1),
		    recall("heap + mutex (reaper)", "expire cpu", 1), "CPU ns per timer");
	for (size_t l = 0; l < 3; l++) {
		snprintf(label, sizeof(label), "lateness %s", late[l] + 5);
		summary_row(label, recall("service exact", late[l], 1),
			    recall("wheel + mutex", late[l], 1),
			    recall("heap + mutex", late[l], 1), "ms");
	}
	for (size_t l = 0; l < 3; l++) {
		snprintf(label, sizeof(label), "lateness %s, callbacks on the reaper",
			 late[l] + 5);
		summary_row(label, recall("service on its reaper", late[l], 1),
			    recall("wheel + mutex", late[l], 1),
			    recall("heap + mutex", late[l], 1), "ms");
	}
	summary_row("bytes per pending timer", recall("service", "bytes", 1),
		    recall("wheel + mutex", "bytes", 1),
		    recall("heap + mutex", "bytes", 1), "B");
	printf("  the platform's floor, p99 / max: %.2f / %.2f ms; the service "
	       "above it: %.2f / %.2f ms (1 tick = 1 ms)\n", floor99, floormax,
	       svc99 - floor99, svcmax - floormax);
	printf("  cancel's deferred part: %.1f ns per cancelled timer, later, in "
	       "the wheel (in the whole-cost row, not in the caller's)\n", tomb);
	printf("  idle reaper: %.1f wake-ups/s for %.1f distinct due ticks/s\n",
	       recall("service", "idle wakes/s", 1), recall("service", "due ticks/s", 1));
}

int main(int argc, char **argv)
{
	pthread_t dog;

	/* Each line as it is printed, also into a pipe or a file: a phase that
	 * fails (stderr, unbuffered) then shows after the lines before it. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--connections")) {
		/* service_bench --connections [N [SECONDS [PCT...]]]: exact
		 * and each window, alternating, BENCH_RUNS rounds */
		size_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
		double secs = argc > 3 ? atof(argv[3]) : 20;
		double pcts[8] = { 0, 1, 15 };
		int npcts = 3, rounds = (int)env_or("BENCH_RUNS", 1);

		if (argc > 4)
			for (npcts = 0; npcts < 8 && 4 + npcts < argc; npcts++)
				pcts[npcts] = atof(argv[4 + npcts]);
		pthread_create(&dog, NULL, watchdog, NULL);
		pthread_detach(dog);
		printf("idle connections: %zu, 30 s timeouts, 9 in 10 reset every "
		       "5 s on average, 1 in 10 idle (times out, reopens); %ld "
		       "cores\n", n, sysconf(_SC_NPROCESSORS_ONLN));
		for (int r = 0; r < rounds; r++)
			for (int k = 0; k < npcts; k++)
				connections(n, secs, pcts[k]);
		return 0;
	}
	if (argc > 1)
		N = strtoull(argv[1], NULL, 10);
	if (argc > 2)
		csv = fopen(argv[2], "w");
	nruns = (int)env_or("BENCH_RUNS", 3);
	if (nruns < 1 || nruns > 9)
		nruns = 3;
	if (csv)
		fprintf(csv, "impl,workload,threads,n,ns_per_op\n");
	pthread_create(&dog, NULL, watchdog, NULL);
	pthread_detach(dog);
	/* For the test that the watchdog bites: a phase that overstays. */
	if (env_or("BENCH_WATCHDOG_SELFTEST", 0)) {
		struct timespec hang = { 5, 0 };

		watch("watchdog self-test", 1, NULL, NULL, 0);
		nanosleep(&hang, NULL);
		return 0; /* not reached: the watchdog exits 3 */
	}
	printf("timer service vs our wheel under one mutex and a binary heap "
	       "under one mutex, N = %zu pending, %ld cores\n", N,
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("producers (wall time / total ops; due 1 s .. 1 h ahead):\n");
	producers();
	printf("expiry (N due within one 1 ms tick; ns per timer run):\n");
	expire_all();
	if (getenv("BENCH_ONLY")) {
		summary();
		if (csv)
			fclose(csv);
		return 0;
	}
	printf("lateness (tick 1 ms; the service with 1 executor, and on its "
	       "reaper as the baselines run theirs):\n");
	sleep_floor();
	lateness();
	printf("memory:\n");
	watch("memory", 120, NULL, NULL, N);
	memory();
	unwatch();
	printf("a cancel's deferred part:\n");
	tombstones();
	printf("wake-ups:\n");
	idle_wakeups();
	summary();
	if (csv)
		fclose(csv);
	return 0;
}
