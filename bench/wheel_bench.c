/* SPDX-License-Identifier: MIT */
/*
 * wheel_bench — the single-threaded wheel side by side with the timers
 * people use today, in one run on one core: libuv (uv_timer_*, a binary
 * heap), libev (ev_timer_*, a 4-ary heap), libevent (event_add/event_del,
 * a min-heap), a plain binary min-heap with an index per timer written
 * here, the strongest wheels when the user points at their checkouts
 * (wahern/timeout in its default and lean configurations, ratas: see
 * peer.h and bench/CMakeLists.txt), and a floor: one random cache line of
 * a pool of N entries touched per operation, which no timer structure can
 * beat by much.
 *
 * Workloads, each on two sets of due times at a 1 ms tick: "uniform" over
 * 1 ms .. 3 h, and "idle" (skewed: 30 s + up to 1 s, reset to 30 s from a
 * clock creeping forward, like a server's idle timeouts):
 *   insert  N timers;            cancel  them all in random order;
 *   churn   N times: cancel a random pending timer and re-add it with a new
 *           due time (an idle timeout reset on every packet);
 *   expire  fire all N in one jump of the clock;
 *   expire-step  fire all N as an event loop does: ask when the next timer
 *           is due, move the clock there, advance; the advances that fired
 *           nothing are counted (each is a wake-up for nothing).
 * The wheel, the heap and the peer wheels run on a virtual clock (advance
 * to 3 h in one call). libuv, libev and libevent have none: for expire
 * their timers are all made due at once (timeout 0; libev: distinct due
 * times in the past) and one non-blocking loop iteration fires them, and
 * they sit out expire-step. After the table, a stall test: 1e6 timers due
 * over 2 s, the clock advanced every 1 ms, the worst single advance (the
 * wheel also in kafka mode, Kafka's structure).
 *
 * usage: [TW_BENCH_WHEEL_SIZE=n] wheel_bench [--quick|--issue|--big] [CSV]
 *   N = 1e3 .. 1e7; --quick: 1e3 and 1e6; --issue: 1e5, 1e6, 1e7 (issue
 *   14's table); --big: the wheel alone at 1e8,
 *   one run (do 1e8 pending timers fit, and what do they cost).
 * Each figure is the median of 3 runs, with the spread and its multiple of
 * the floor; memory per timer is from the allocator (mallinfo2), all
 * internal structures included. At the end, for each N and workload, the
 * fastest peer's time divided by the wheel's.
 */
#define _GNU_SOURCE

#include <ev.h>
#include <event2/event.h>
#include <malloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "bench_util.h"
#include "peer.h"
#include "timingwheel/timingwheel.h"

#define RUNS 3
#define MAX_SIZES 8
#define MAX_IMPLS 10
#define NWORK 10
#define STALL_N 1000000
#define STALL_SPAN_MS 2000
#define SPAN_MS (3 * 3600 * 1000LL)

static FILE *csv;
static size_t N;
static int64_t *due;      /* ms, 1 .. SPAN_MS */
static int64_t *due2;     /* churn's new due times */
static int64_t *idle;     /* idle timeouts: 30 s + up to 1 s */
static int64_t *idle2;    /* reset: 30 s from a clock creeping 1 s */
static int64_t *cur_due;  /* what insert uses */
static int64_t *cur_due2; /* what churn uses */
static size_t *order;     /* a random permutation */
static size_t *pick;      /* churn's random picks */
static double floor_ns;
static long fired;
static int nruns = RUNS;

/* Medians of this run, for the summary: [size][impl][workload]; 0 where
 * an implementation cannot run a workload (no virtual clock to step). */
static const char *const work_names[NWORK] = {
	"insert", "cancel", "churn", "expire", "expire-step",
	"insert-idle", "cancel-idle", "churn-idle", "expire-idle",
	"expire-step-idle"
};
static double result[MAX_SIZES][MAX_IMPLS][NWORK];
static size_t size_index;
static long step_calls, step_idle_calls; /* stepped expiry's advances */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* ---- an implementation under test: setup, the four workloads, teardown ---- */

struct impl {
	const char *name;
	void (*setup)(void);
	void (*insert)(void);
	void (*cancel)(void);
	void (*churn)(void);
	void (*expire)(void);
	void (*teardown)(void);
	/* A virtual clock, for stepped expiry and the stall test (NULL: the
	 * library reads the real clock itself). */
	bool (*next)(int64_t *when);
	void (*advance_to)(int64_t now);
	const struct peer_ops *ops; /* a peer driven through peer.h */
};

/* ---- timingwheel ---- */

static struct tw_wheel wheel;
static struct tw_timer *tws;
static enum tw_mode tw_bench_mode = TW_MODE_EXACT;

static void tw_fn(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
	fired++;
}

/* Buckets per level: the default configuration's, 64 in exact mode (the
 * README's and the service's) and Kafka's 20 in kafka mode, unless
 * TW_BENCH_WHEEL_SIZE says otherwise (to measure what the size buys). */
static uint32_t wheel_size(void)
{
	const char *env = getenv("TW_BENCH_WHEEL_SIZE");
	long fallback = tw_bench_mode == TW_MODE_KAFKA ? 20 : 64;
	long v = env ? strtol(env, NULL, 10) : fallback;

	return v >= TW_WHEEL_SIZE_MIN && v <= TW_WHEEL_SIZE_MAX ? (uint32_t)v
							       : (uint32_t)fallback;
}

static void tw_setup(void)
{
	tw_wheel_init(&wheel, 1, wheel_size(), 0, tw_bench_mode);
	tws = malloc(N * sizeof(*tws));
	for (size_t i = 0; i < N; i++)
		tw_timer_init(&tws[i], tw_fn);
}

static void tw_insert(void)
{
	for (size_t i = 0; i < N; i++)
		tw_wheel_add(&wheel, &tws[i], cur_due[i]);
}

static void tw_cancel(void)
{
	for (size_t i = 0; i < N; i++)
		tw_wheel_cancel(&wheel, &tws[order[i]]);
}

static void tw_churn(void)
{
	for (size_t i = 0; i < N; i++)
		tw_wheel_reschedule(&wheel, &tws[pick[i]], cur_due2[i]);
}

static void tw_expire(void)
{
	tw_wheel_advance(&wheel, SPAN_MS + 1);
}

static bool tw_next(int64_t *when)
{
	return tw_wheel_next_expiry(&wheel, when);
}

static void tw_advance_to(int64_t now)
{
	tw_wheel_advance(&wheel, now);
}

static void tw_teardown(void)
{
	tw_wheel_destroy(&wheel);
	free(tws);
}

/* ---- a binary min-heap with an index per timer ---- */

struct ht {
	int64_t due;
	size_t index;
};
static struct ht *hts;
static struct ht **heap;
static size_t heap_len;

static void hset(size_t i, struct ht *t)
{
	heap[i] = t;
	t->index = i;
}

static void hup(size_t i)
{
	struct ht *t = heap[i];

	while (i && t->due < heap[(i - 1) / 2]->due) {
		hset(i, heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	hset(i, t);
}

static void hdown(size_t i)
{
	struct ht *t = heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= heap_len)
			break;
		if (c + 1 < heap_len && heap[c + 1]->due < heap[c]->due)
			c++;
		if (heap[c]->due >= t->due)
			break;
		hset(i, heap[c]);
		i = c;
	}
	hset(i, t);
}

static void hremove(struct ht *t)
{
	size_t i = t->index;
	struct ht *last = heap[--heap_len];

	t->index = SIZE_MAX;
	if (last == t)
		return;
	hset(i, last);
	if (i && last->due < heap[(i - 1) / 2]->due)
		hup(i);
	else
		hdown(i);
}

static void hadd(struct ht *t, int64_t d)
{
	t->due = d;
	hset(heap_len++, t);
	hup(t->index);
}

static void heap_setup(void)
{
	hts = malloc(N * sizeof(*hts));
	heap = malloc(N * sizeof(*heap));
	heap_len = 0;
}

static void heap_insert(void)
{
	for (size_t i = 0; i < N; i++)
		hadd(&hts[i], cur_due[i]);
}

static void heap_cancel(void)
{
	for (size_t i = 0; i < N; i++)
		hremove(&hts[order[i]]);
}

static void heap_churn(void)
{
	for (size_t i = 0; i < N; i++) {
		hremove(&hts[pick[i]]);
		hadd(&hts[pick[i]], cur_due2[i]);
	}
}

static void heap_advance_to(int64_t now)
{
	while (heap_len && heap[0]->due <= now) {
		hremove(heap[0]);
		fired++;
	}
}

static bool heap_next(int64_t *when)
{
	if (!heap_len)
		return false;
	*when = heap[0]->due;
	return true;
}

static void heap_expire(void)
{
	heap_advance_to(SPAN_MS + 1);
}

static void heap_teardown(void)
{
	free(hts);
	free(heap);
}

/* ---- libuv ---- */

static uv_loop_t uvloop;
static uv_timer_t *uvs;

static void luv_fn(uv_timer_t *t)
{
	(void)t;
	fired++;
}

static void luv_setup(void)
{
	uv_loop_init(&uvloop);
	uvs = malloc(N * sizeof(*uvs));
	for (size_t i = 0; i < N; i++)
		uv_timer_init(&uvloop, &uvs[i]);
}

static void luv_insert(void)
{
	for (size_t i = 0; i < N; i++)
		uv_timer_start(&uvs[i], luv_fn, (uint64_t)cur_due[i], 0);
}

static void luv_cancel(void)
{
	for (size_t i = 0; i < N; i++)
		uv_timer_stop(&uvs[order[i]]);
}

static void luv_churn(void)
{
	for (size_t i = 0; i < N; i++)
		uv_timer_start(&uvs[pick[i]], luv_fn, (uint64_t)cur_due2[i], 0);
}

static void luv_expire(void)
{
	for (size_t i = 0; i < N; i++)
		uv_timer_start(&uvs[i], luv_fn, 0, 0);
	uv_run(&uvloop, UV_RUN_NOWAIT);
}

static void luv_close_cb(uv_handle_t *h)
{
	(void)h;
}

static void luv_teardown(void)
{
	for (size_t i = 0; i < N; i++)
		uv_close((uv_handle_t *)&uvs[i], luv_close_cb);
	uv_run(&uvloop, UV_RUN_DEFAULT);
	uv_loop_close(&uvloop);
	free(uvs);
}

/* ---- libev ---- */

static struct ev_loop *evloop;
static ev_timer *evs;

static void ev_fn(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)w;
	(void)revents;
	fired++;
}

static void libev_setup(void)
{
	evloop = ev_loop_new(EVFLAG_AUTO);
	evs = malloc(N * sizeof(*evs));
	for (size_t i = 0; i < N; i++)
		ev_timer_init(&evs[i], ev_fn, 0., 0.);
}

static void libev_insert(void)
{
	for (size_t i = 0; i < N; i++) {
		ev_timer_set(&evs[i], (double)cur_due[i] / 1e3, 0.);
		ev_timer_start(evloop, &evs[i]);
	}
}

static void libev_cancel(void)
{
	for (size_t i = 0; i < N; i++)
		ev_timer_stop(evloop, &evs[order[i]]);
}

static void libev_churn(void)
{
	for (size_t i = 0; i < N; i++) {
		ev_timer_stop(evloop, &evs[pick[i]]);
		ev_timer_set(&evs[pick[i]], (double)cur_due2[i] / 1e3, 0.);
		ev_timer_start(evloop, &evs[pick[i]]);
	}
}

static void libev_expire(void)
{
	/* Distinct due times, all in the past: one iteration fires them. */
	for (size_t i = 0; i < N; i++) {
		ev_timer_stop(evloop, &evs[i]);
		ev_timer_set(&evs[i], -(double)due[i] / 1e3, 0.);
		ev_timer_start(evloop, &evs[i]);
	}
	ev_run(evloop, EVRUN_NOWAIT);
}

static void libev_teardown(void)
{
	for (size_t i = 0; i < N; i++)
		ev_timer_stop(evloop, &evs[i]);
	ev_loop_destroy(evloop);
	free(evs);
}

/* ---- libevent ---- */

static struct event_base *evbase;
static struct event **les;

static void le_fn(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	fired++;
}

static struct timeval tv_of(int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	return tv;
}

static void le_setup(void)
{
	struct event_config *cfg = event_config_new();

	/* One event per timer, no other dynamic allocation. */
	evbase = event_base_new_with_config(cfg);
	event_config_free(cfg);
	les = malloc(N * sizeof(*les));
	for (size_t i = 0; i < N; i++)
		les[i] = evtimer_new(evbase, le_fn, NULL);
}

static void le_insert(void)
{
	for (size_t i = 0; i < N; i++) {
		struct timeval tv = tv_of(cur_due[i]);

		evtimer_add(les[i], &tv);
	}
}

static void le_cancel(void)
{
	for (size_t i = 0; i < N; i++)
		evtimer_del(les[order[i]]);
}

static void le_churn(void)
{
	for (size_t i = 0; i < N; i++) {
		struct timeval tv = tv_of(cur_due2[i]);

		evtimer_add(les[pick[i]], &tv); /* re-adding reschedules */
	}
}

static void le_expire(void)
{
	struct timeval zero = { 0, 0 };

	for (size_t i = 0; i < N; i++)
		evtimer_add(les[i], &zero);
	event_base_loop(evbase, EVLOOP_NONBLOCK);
}

static void le_teardown(void)
{
	for (size_t i = 0; i < N; i++)
		event_free(les[i]);
	event_base_free(evbase);
	free(les);
}

/* ---- the floor: one random cache line per operation ---- */

struct line {
	int64_t v[8];
};
static struct line *pool;

static void floor_setup(void)
{
	pool = calloc(N, sizeof(*pool));
}

static void floor_touch(void)
{
	for (size_t i = 0; i < N; i++)
		pool[order[i]].v[0] += due[i];
}

static void floor_teardown(void)
{
	free(pool);
}

/* ---- the harness ---- */

/* ---- peers from the user's checkouts, through peer.h ---- */

static const struct peer_ops *cur_ops;

#if defined(TW_BENCH_WITH_WAHERN) || defined(TW_BENCH_WITH_RATAS)
static void peer_setup(void)
{
	cur_ops->setup(N);
}

static void peer_insert(void)
{
	cur_ops->insert(cur_due, N);
}

static void peer_cancel(void)
{
	cur_ops->cancel(order, N);
}

static void peer_churn(void)
{
	cur_ops->churn(pick, cur_due2, N);
}

static void peer_expire(void)
{
	cur_ops->advance_to(SPAN_MS + 1);
}

static bool peer_next(int64_t *when)
{
	return cur_ops->next(when);
}

static void peer_advance_to(int64_t now)
{
	cur_ops->advance_to(now);
}

static void peer_teardown(void)
{
	cur_ops->teardown();
}

#define PEER_IMPL(ops)                                                      \
	{ (ops).name, peer_setup, peer_insert, peer_cancel, peer_churn,     \
	  peer_expire, peer_teardown, peer_next, peer_advance_to, &(ops) }
#endif

static long fired_so_far(const struct impl *im)
{
	return im->ops ? im->ops->fired() : fired;
}

static double report(const char *lib, const char *work, double *runs, double bytes)
{
	double median;

	qsort(runs, (size_t)nruns, sizeof(*runs), bench_cmp_double);
	median = runs[nruns / 2];
	printf("  %-11s %-16s %9.1f ns/op  (%.1f .. %.1f)  %5.1fx floor", lib, work,
	       median, runs[0], runs[nruns - 1], median / floor_ns);
	if (bytes > 0)
		printf("  %6.1f B/timer", bytes);
	putchar('\n');
	if (csv)
		fprintf(csv, "%s,%s,%zu,%.2f,%.1f\n", lib, work, N, median, bytes);
	return median;
}

static double timed(void (*fn)(void))
{
	int64_t t0 = bench_now_ns();

	fn();
	return (double)(bench_now_ns() - t0) / (double)N;
}

static const struct impl *cur_impl;

/* An event loop on a virtual clock: ask when the next timer is due, move
 * the clock there, advance; count the advances that fired nothing (each
 * one a wake-up for nothing in a real loop). */
static void step_expire(void)
{
	int64_t when;

	while (cur_impl->next(&when)) {
		long before = fired_so_far(cur_impl);

		cur_impl->advance_to(when);
		step_calls++;
		if (fired_so_far(cur_impl) == before)
			step_idle_calls++;
	}
}

/* The five workloads on one set of due times into t[workload][run r];
 * returns the bytes per timer after insert. */
static double run_set(const struct impl *im, int64_t *set, int64_t *set2,
		      double t[5][RUNS], long idle_calls[2][RUNS], int r)
{
	double before = bench_allocated(), bytes;

	cur_due = set;
	cur_due2 = set2;
	fired = 0;
	im->setup();
	t[0][r] = timed(im->insert);
	bytes = (bench_allocated() - before) / (double)N;
	t[1][r] = timed(im->cancel);
	im->insert();
	t[2][r] = timed(im->churn);
	t[3][r] = timed(im->expire);
	if (fired_so_far(im) != (long)N)
		fprintf(stderr, "%s: expire fired %ld of %zu\n", im->name,
			fired_so_far(im), N);
	im->teardown();
	t[4][r] = 0;
	if (!im->next)
		return bytes;
	fired = 0;
	im->setup();
	im->insert();
	step_calls = step_idle_calls = 0;
	t[4][r] = timed(step_expire);
	idle_calls[0][r] = step_calls;
	idle_calls[1][r] = step_idle_calls;
	if (fired_so_far(im) != (long)N)
		fprintf(stderr, "%s: stepped expiry fired %ld of %zu\n", im->name,
			fired_so_far(im), N);
	im->teardown();
	return bytes;
}

static void report_steps(long calls[2][RUNS])
{
	printf("  %-11s %-16s %9ld advances, %ld (%.1f %%) fired nothing\n", "",
	       "", calls[0][0], calls[1][0],
	       calls[0][0] ? 100.0 * (double)calls[1][0] / (double)calls[0][0] : 0);
}

static void measure(const struct impl *im, size_t impl_index)
{
	double uni[5][RUNS], idl[5][RUNS], bytes = 0;
	long uni_calls[2][RUNS], idl_calls[2][RUNS];

	cur_impl = im;
	cur_ops = im->ops;
	for (int r = 0; r < nruns; r++) {
		double b = run_set(im, due, due2, uni, uni_calls, r);

		if (r == 0)
			bytes = b;
		run_set(im, idle, idle2, idl, idl_calls, r);
	}
	for (int w = 0; w < 5; w++) {
		if (w == 4 && !im->next)
			continue;
		result[size_index][impl_index][w] =
			report(im->name, work_names[w], uni[w], w == 0 ? bytes : 0);
		if (w == 4)
			report_steps(uni_calls);
	}
	for (int w = 0; w < 5; w++) {
		if (w == 4 && !im->next)
			continue;
		result[size_index][impl_index][5 + w] =
			report(im->name, work_names[5 + w], idl[w], 0);
		if (w == 4)
			report_steps(idl_calls);
	}
}

/* The worst single advance of an event loop ticking every 1 ms while
 * 1e6 timers come due over 2 s (500 per tick): a cascade that moves a
 * level's bucket at once shows up here as a stall. Median of the runs'
 * maxima. */
static void stall(const struct impl *im)
{
	int64_t *set = malloc(STALL_N * sizeof(*set));
	size_t saved_n = N;
	double worst[RUNS];
	long ticks = 0;

	for (size_t i = 0; i < STALL_N; i++)
		set[i] = 1 + (int64_t)(rnd() % STALL_SPAN_MS);
	N = STALL_N;
	cur_impl = im;
	cur_ops = im->ops;
	for (int r = 0; r < nruns; r++) {
		fired = 0;
		cur_due = set;
		im->setup();
		im->insert();
		worst[r] = 0;
		for (int64_t ms = 1; ms <= STALL_SPAN_MS + 1; ms++) {
			int64_t t0 = bench_now_ns();
			double dt;

			im->advance_to(ms);
			dt = (double)(bench_now_ns() - t0);
			if (dt > worst[r])
				worst[r] = dt;
			ticks++;
		}
		if (fired_so_far(im) != (long)N)
			fprintf(stderr, "%s: stall test fired %ld of %zu\n", im->name,
				fired_so_far(im), N);
		im->teardown();
	}
	qsort(worst, (size_t)nruns, sizeof(*worst), bench_cmp_double);
	printf("  %-16s worst advance %7.3f ms  (%.3f .. %.3f)\n", im->name,
	       worst[nruns / 2] / 1e6, worst[0] / 1e6, worst[nruns - 1] / 1e6);
	if (csv)
		fprintf(csv, "%s,stall,%d,%.2f,0\n", im->name, STALL_N,
			worst[nruns / 2]);
	N = saved_n;
	free(set);
	(void)ticks;
}

static void prepare(size_t n)
{
	N = n;
	due = realloc(due, n * sizeof(*due));
	due2 = realloc(due2, n * sizeof(*due2));
	order = realloc(order, n * sizeof(*order));
	pick = realloc(pick, n * sizeof(*pick));
	idle = realloc(idle, n * sizeof(*idle));
	idle2 = realloc(idle2, n * sizeof(*idle2));
	for (size_t i = 0; i < n; i++) {
		due[i] = 1 + (int64_t)(rnd() % SPAN_MS);
		due2[i] = 1 + (int64_t)(rnd() % SPAN_MS);
		idle[i] = 30000 + (int64_t)(rnd() % 1000);
		idle2[i] = 31000 + (int64_t)((uint64_t)i * 1000 / n);
		order[i] = i;
		pick[i] = rnd() % n;
	}
	for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
		size_t j = rnd() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
}

static const struct impl builtin_impls[] = {
	{ "timingwheel", tw_setup, tw_insert, tw_cancel, tw_churn, tw_expire,
	  tw_teardown, tw_next, tw_advance_to, NULL },
	{ "binaryheap", heap_setup, heap_insert, heap_cancel, heap_churn, heap_expire,
	  heap_teardown, heap_next, heap_advance_to, NULL },
	{ "libev", libev_setup, libev_insert, libev_cancel, libev_churn, libev_expire,
	  libev_teardown, NULL, NULL, NULL },
	{ "libuv", luv_setup, luv_insert, luv_cancel, luv_churn, luv_expire,
	  luv_teardown, NULL, NULL, NULL },
	{ "libevent", le_setup, le_insert, le_cancel, le_churn, le_expire,
	  le_teardown, NULL, NULL, NULL },
};

/* The built-ins, then the peers this executable was built with. */
static struct impl impls[MAX_IMPLS];

static size_t collect_impls(void)
{
	size_t n = sizeof(builtin_impls) / sizeof(builtin_impls[0]);

	memcpy(impls, builtin_impls, sizeof(builtin_impls));
#ifdef TW_BENCH_WITH_WAHERN
	impls[n++] = (struct impl)PEER_IMPL(peer_wahern);
	impls[n++] = (struct impl)PEER_IMPL(peer_wahern_lean);
#else
	printf("(wahern/timeout not built: set TW_BENCH_WAHERN to a checkout)\n");
#endif
#ifdef TW_BENCH_WITH_RATAS
	impls[n++] = (struct impl)PEER_IMPL(peer_ratas);
#else
	printf("(ratas not built: set TW_BENCH_RATAS to a checkout)\n");
#endif
	return n;
}

/* For each N and workload: the fastest peer's time over the wheel's. */
static void summary(const size_t *ns, size_t count, size_t nimpls)
{
	printf("\nfastest peer / the wheel (> 1: the wheel is faster), per N\n");
	printf("  %-16s", "workload");
	for (size_t k = 0; k < count; k++)
		printf(" %18zu", ns[k]);
	putchar('\n');
	for (int w = 0; w < NWORK; w++) {
		printf("  %-16s", work_names[w]);
		for (size_t k = 0; k < count; k++) {
			size_t best = 0;

			for (size_t i = 1; i < nimpls; i++)
				if (result[k][i][w] > 0 &&
				    (!best || result[k][i][w] < result[k][best][w]))
					best = i;
			if (!best || result[k][0][w] <= 0)
				printf("  %5s  %-10s", "-", "");
			else
				printf("  %5.2fx %-10s",
				       result[k][best][w] / result[k][0][w],
				       impls[best].name);
		}
		putchar('\n');
	}
}

int main(int argc, char **argv)
{
	static const size_t full[] = { 1000, 10000, 100000, 1000000, 10000000 };
	static const size_t quick[] = { 1000, 1000000 };
	static const size_t issue[] = { 100000, 1000000, 10000000 };
	static const size_t big[] = { 100000000 };
	const size_t *ns = full;
	size_t count = 5, nimpls = collect_impls();
	cpu_set_t cpus;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			ns = quick;
			count = 2;
		} else if (!strcmp(argv[i], "--issue")) {
			ns = issue;
			count = 3;
		} else if (!strcmp(argv[i], "--big")) {
			ns = big;
			count = 1;
			nimpls = 1;
			nruns = 1;
		} else {
			csv = fopen(argv[i], "w");
		}
	}
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0)
		printf("(could not pin to CPU 0)\n");
	if (csv)
		fprintf(csv, "library,workload,n,ns_per_op,bytes_per_timer\n");
	printf("timers side by side, pinned to CPU 0, median of %d runs (spread); "
	       "uniform: due over 1 ms .. 3 h; idle: 30 s idle timeouts\n", nruns);
	for (size_t k = 0; k < count; k++) {
		double f[RUNS];

		size_index = k;
		prepare(ns[k]);
		for (int r = 0; r < nruns; r++) {
			floor_setup();
			floor_touch(); /* warm */
			f[r] = timed(floor_touch);
			floor_teardown();
		}
		qsort(f, (size_t)nruns, sizeof(*f), bench_cmp_double);
		floor_ns = f[nruns / 2];
		printf("N = %zu: floor (one random cache line per op) %.1f ns\n", N,
		       floor_ns);
		if (csv)
			fprintf(csv, "floor,touch,%zu,%.2f,64.0\n", N, floor_ns);
		for (size_t i = 0; i < nimpls; i++)
			measure(&impls[i], i);
		fflush(stdout);
	}
	if (nimpls > 1) {
		summary(ns, count, nimpls);
		printf("\nstall: %d timers due over %d ms, the clock advanced every "
		       "1 ms\n", STALL_N, STALL_SPAN_MS);
		for (size_t i = 0; i < nimpls; i++)
			if (impls[i].advance_to)
				stall(&impls[i]);
		tw_bench_mode = TW_MODE_KAFKA;
		impls[0].name = "timingwheel-kafka";
		stall(&impls[0]);
	}
	if (csv)
		fclose(csv);
	return 0;
}
