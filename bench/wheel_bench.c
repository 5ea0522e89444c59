/* SPDX-License-Identifier: MIT */
/*
 * wheel_bench — the single-threaded wheel side by side with the timers
 * people use today, in one run on one core: libuv (uv_timer_*, a binary
 * heap), libev (ev_timer_*, a 4-ary heap), libevent (event_add/event_del,
 * a min-heap), a plain binary min-heap with an index per timer written
 * here (peer.h, bench/CMakeLists.txt), and a floor: one random cache line
 * of a pool of N entries touched per operation, which no timer structure
 * can beat by much.
 *
 * The method (the one an independent harness used): per N one
 * set of N timers, preallocated in one array and initialised untimed; a
 * 1 ms tick, a virtual clock from 0. Seven cells (and an eighth for the
 * wheel alone), each timed alone:
 *   insert       timer i at due[i], in array order, dues uniform over
 *                1 ms .. 3 h; ns per insert
 *   cancel       all N in a random order (a permutation); ns per cancel
 *   churn        (all N inserted again, untimed) C = 1,000,000 reschedules,
 *                whatever N is, of random timers (pick[j] uniform in
 *                [0, N)) to new uniform dues over 1 ms .. 3 h, each
 *                library's reschedule as its users call it: ours
 *                tw_wheel_reschedule, libuv uv_timer_start, libev
 *                ev_timer_stop + set + start, libevent evtimer_add, the
 *                heap remove + add; ns per reschedule
 *   expire-step  the churned state fired as an event loop does: loop
 *                { next expiry; advance to it } until empty; ns per fired
 *                timer (N), and the advances that fired nothing (each a
 *                wake-up for nothing)
 *   expire-jump  (a fresh set: teardown, setup, the same N uniform dues,
 *                untimed) one advance to 3 h + 1; ns per fired timer
 *   idle-reset   (a fresh set with N timers due 30 s + U[0, 1 s), untimed)
 *                N resets of random timers (pick) to now + 30 s, the clock
 *                moved forward 1 ms (an advance, which fires nothing)
 *                every N/1000 resets (every reset below N = 1000): a
 *                server's idle timeouts; ns per reset, advances included
 *   idle-expire  that idle state fired stepped, as expire-step
 *   idle-reset-win, idle-expire-win  idle-reset and idle-expire with
 *                windows of p % (TW_BENCH_WINDOW_PCT, default 1) from
 *                the add on: each timer added to fire in [due, due + p %]
 *                (tw_wheel_add_range, untimed), each reset to [now + 30 s,
 *                now + 30 s + p %] (tw_wheel_reschedule_range); the
 *                summary sets the wheel's against a peer's windows where
 *                it has them, its exact idle timeouts otherwise
 *   jump-unordered  (the wheel alone) expire-jump with
 *                tw_wheel_advance_unordered, which promises no order among
 *                the timers it fires; the summary sets it against the
 *                peers' expire-jump
 * Every run of expire-step, expire-jump and idle-expire must fire exactly
 * N timers (an error is printed otherwise). libuv, libev and libevent have
 * no virtual clock: they sit out expire-step and idle-expire; for
 * expire-jump their timers are made due at once, untimed (timeout 0;
 * libev: distinct due times in the past) and one non-blocking loop
 * iteration fires them; for idle-reset they reset relative to their own
 * loop time, which cannot move (libuv uv_timer_start, libev ev_timer_again,
 * its idle-timeout idiom, libevent evtimer_add). Each library's driver runs
 * each cell's loop itself, calling the library directly (peer.h). Runs
 * alternate: run 1 of every library, then run 2 of every library, ..., so
 * the machine's noise is spread over all of them. After the table, a
 * stall test: 1e6 timers due over 2 s, the clock advanced every 1 ms, the
 * worst single advance (the wheel also in kafka mode, Kafka's structure).
 *
 * How each is built (bench/CMakeLists.txt): our library with the project's
 * flags (RelWithDebInfo: -O2 -g -DNDEBUG), this driver and the heap -O2;
 * libuv, libev, libevent the distribution's builds.
 *
 * Why runs alternate, and why `make bench-instr` counts instructions
 * (which the machine's noise cannot move): an earlier harness ran all runs
 * of one library back to back, and a busy stretch over one library's runs
 * moved its ratio (docs/performance.md, "Fifth measurement").
 *
 * usage: [TW_BENCH_WHEEL_SIZE=n] [TW_BENCH_WINDOW_PCT=p]
 *        wheel_bench [--quick|--issue|--big|--n N] [--wheel-size n]
 *                    [--wheel-only] [--instr] [CSV]
 *   --wheel-size n (or TW_BENCH_WHEEL_SIZE=n): the wheel's buckets per
 *   level (default 64; exact mode rounds it up to a power of two within
 *   what it supports); at any size in use other than 64 the wheel's
 *   column is named timingwheel-SIZE. --wheel-only: no peers.
 *   N = 1e3 .. 1e7; --quick: 1e3 and 1e6; --issue: 1e5, 1e6, 1e7 (issue
 *   14's table); --n N: that N alone; --big: the wheel alone at 1e8, one
 *   run (do 1e8 pending timers fit, and what do they cost).
 *   --instr: under valgrind --tool=callgrind --collect-atstart=no (run by
 *   bench/instr.sh, `make bench-instr`): each library's cells once at
 *   one N (--n, default 1e5; churn's C stays 1e6), collection on for
 *   exactly each cell's timed loop and a dump named "library/cell" after
 *   it, and a line "instr LIBRARY CELL OPS" for instr.sh to divide by; no
 *   timings. After the cells, the wheel's geometry: its fixed memory, and
 *   how idle timeouts coalesce (moves per fired timer, exact and 1 %
 *   windows, and the stepped idle expiries' wake-ups).
 * Each figure is the median of 3 runs, with the spread and its multiple of
 * the floor; memory per timer is from the allocator (mallinfo2) after
 * insert, all internal structures and the timers' array included. At the
 * end, for each N and cell, the fastest peer's time divided by the
 * wheel's.
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

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TW_BENCH_CALLGRIND 1
#endif
#endif

#include "bench_util.h"
#include "peer.h"
#include "timingwheel/timingwheel.h"

#define RUNS 3
#define MAX_SIZES 8
#define MAX_IMPLS 10
#define NCELL 10
#define CHURN 1000000 /* reschedules in churn, whatever N is */
#define IDLE_MS 30000 /* idle timeouts: 30 s ... */
#define IDLE_SPREAD_MS 1000 /* ... + up to 1 s when first set */
#define INSTR_N 100000
#define STALL_N 1000000
#define STALL_SPAN_MS 2000
#define SPAN_MS (3 * 3600 * 1000LL)

enum cell { INSERT, CANCEL, CHURN_CELL, EXPIRE_STEP, EXPIRE_JUMP, IDLE_RESET,
	    IDLE_EXPIRE, JUMP_UNORDERED, IDLE_RESET_WIN, IDLE_EXPIRE_WIN };
static const char *const cell_names[NCELL] = {
	"insert", "cancel", "churn", "expire-step", "expire-jump", "idle-reset",
	"idle-expire", "jump-unordered", "idle-reset-win", "idle-expire-win"
};

static FILE *csv;
static size_t N;
static size_t C = CHURN;   /* reschedules in churn */
static int64_t *due;       /* N, ms, 1 .. SPAN_MS */
static int64_t *due2;      /* C, churn's new due times */
static int64_t *idle_due;  /* N, 30 s + up to 1 s */
static size_t *order;      /* N, a random permutation */
static size_t *pick;       /* max(C, N), uniform in [0, N) */
static double floor_ns;
static int nruns = RUNS;
static int instr;          /* --instr: under callgrind */
static int64_t window_ms;  /* idle windows' width: TW_BENCH_WINDOW_PCT % of
			      the idle timeout (default 1) */

/* Medians of this run, for the summary: [size][impl][cell]; 0 where an
 * implementation cannot run a cell (no virtual clock to step). */
static double result[MAX_SIZES][MAX_IMPLS][NCELL];
static size_t size_index;

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* ---- timingwheel ---- */

static struct tw_wheel wheel;
static struct tw_timer *tws;
static long tw_fired;
static enum tw_mode tw_bench_mode = TW_MODE_EXACT;

static void tw_fn(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
	tw_fired++;
}

/* Buckets per level asked for by --wheel-size (0: not given). */
static long wheel_size_arg;

/* Buckets per level: the default configuration's, 64 in exact mode (the
 * README's and the service's) and Kafka's 20 in kafka mode, unless
 * --wheel-size or TW_BENCH_WHEEL_SIZE says otherwise (to measure what the
 * size buys; the wheel's column is then named with the size in use). */
static uint32_t wheel_size(void)
{
	const char *env = getenv("TW_BENCH_WHEEL_SIZE");
	long fallback = tw_bench_mode == TW_MODE_KAFKA ? 20 : 64;
	long v = wheel_size_arg ? wheel_size_arg
		 : env		? strtol(env, NULL, 10)
				: fallback;

	return v >= TW_WHEEL_SIZE_MIN && v <= TW_WHEEL_SIZE_MAX ? (uint32_t)v
							       : (uint32_t)fallback;
}

static void tw_setup(size_t n)
{
	if (tw_wheel_init(&wheel, 1, wheel_size(), 0, tw_bench_mode) != 0) {
		fprintf(stderr, "wheel_bench: tw_wheel_init failed\n");
		exit(1);
	}
	tws = malloc(n * sizeof(*tws));
	for (size_t i = 0; i < n; i++)
		tw_timer_init(&tws[i], tw_fn);
	tw_fired = 0;
}

static void tw_insert(const int64_t *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tw_wheel_add(&wheel, &tws[i], d[i]);
}

static void tw_insert_window(const int64_t *d, size_t n, int64_t width)
{
	for (size_t i = 0; i < n; i++)
		tw_wheel_add_range(&wheel, &tws[i], d[i], d[i] + width);
}

static void tw_cancel(const size_t *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tw_wheel_cancel(&wheel, &tws[o[i]]);
}

static void tw_churn(const size_t *p, const int64_t *d, size_t c)
{
	for (size_t j = 0; j < c; j++)
		tw_wheel_reschedule(&wheel, &tws[p[j]], d[j]);
}

static void tw_expire_step(long *advances, long *idle)
{
	int64_t when;
	long a = 0, z = 0;

	while (tw_wheel_next_expiry(&wheel, &when)) {
		long before = tw_fired;

		tw_wheel_advance(&wheel, when);
		a++;
		z += tw_fired == before;
	}
	*advances = a;
	*idle = z;
}

static void tw_advance_to(int64_t now)
{
	tw_wheel_advance(&wheel, now);
}

static void tw_advance_unordered(int64_t now)
{
	tw_wheel_advance_unordered(&wheel, now);
}

static void tw_idle_reset(const size_t *p, size_t n, size_t every, int64_t delay)
{
	int64_t now = tw_wheel_now(&wheel);
	size_t k = every;

	for (size_t i = 0; i < n; i++) {
		tw_wheel_reschedule(&wheel, &tws[p[i]], now + delay);
		if (--k == 0) {
			k = every;
			tw_wheel_advance(&wheel, ++now);
		}
	}
}

static void tw_idle_reset_window(const size_t *p, size_t n, size_t every,
				 int64_t delay, int64_t width)
{
	int64_t now = tw_wheel_now(&wheel);
	size_t k = every;

	for (size_t i = 0; i < n; i++) {
		tw_wheel_reschedule_range(&wheel, &tws[p[i]], now + delay,
					  now + delay + width);
		if (--k == 0) {
			k = every;
			tw_wheel_advance(&wheel, ++now);
		}
	}
}

static long tw_fired_count(void)
{
	return tw_fired;
}

static void tw_teardown(void)
{
	tw_wheel_destroy(&wheel);
	free(tws);
}

/* wheel_bench_inline.c compiles this file with the library in it (the
 * amalgamation): the same driver, the hot calls inlined, its own name. */
#ifndef TW_BENCH_WHEEL_NAME
#define TW_BENCH_WHEEL_NAME "timingwheel"
#endif

/* Not const: a wheel of another size than the default gets its own name
 * (main, wheel_column_name), so that two geometries' columns can sit in
 * one table. */
static struct peer_ops drv_tw = {
	TW_BENCH_WHEEL_NAME, tw_setup, tw_insert, tw_cancel, tw_churn, tw_expire_step,
	NULL, tw_advance_to, tw_idle_reset, tw_advance_to, tw_fired_count,
	tw_teardown, tw_advance_unordered, tw_idle_reset_window,
	tw_insert_window
};

/* ---- a binary min-heap with an index per timer ---- */

struct ht {
	int64_t due;
	size_t index; /* SIZE_MAX: not pending */
};
static struct ht *hts;
static struct ht **heap;
static size_t heap_len;
static int64_t heap_now;
static long heap_fired;

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

/* The timers and the heap's array (capacity n) allocated and touched
 * here, untimed, like the wheel's buckets at init. */
static void heap_setup(size_t n)
{
	hts = malloc(n * sizeof(*hts));
	heap = malloc(n * sizeof(*heap));
	for (size_t i = 0; i < n; i++) {
		hts[i].due = 0;
		hts[i].index = SIZE_MAX;
		heap[i] = NULL;
	}
	heap_len = 0;
	heap_now = 0;
	heap_fired = 0;
}

static void heap_insert(const int64_t *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		hadd(&hts[i], d[i]);
}

static void heap_cancel(const size_t *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		hremove(&hts[o[i]]);
}

static inline void heap_reschedule(struct ht *t, int64_t d)
{
	if (t->index != SIZE_MAX)
		hremove(t);
	hadd(t, d);
}

static void heap_churn(const size_t *p, const int64_t *d, size_t c)
{
	for (size_t j = 0; j < c; j++)
		heap_reschedule(&hts[p[j]], d[j]);
}

static void heap_advance_to(int64_t now)
{
	heap_now = now;
	while (heap_len && heap[0]->due <= now) {
		hremove(heap[0]);
		heap_fired++;
	}
}

static void heap_expire_step(long *advances, long *idle)
{
	long a = 0, z = 0;

	while (heap_len) {
		long before = heap_fired;

		heap_advance_to(heap[0]->due);
		a++;
		z += heap_fired == before;
	}
	*advances = a;
	*idle = z;
}

static void heap_idle_reset(const size_t *p, size_t n, size_t every,
			    int64_t delay)
{
	size_t k = every;

	for (size_t i = 0; i < n; i++) {
		heap_reschedule(&hts[p[i]], heap_now + delay);
		if (--k == 0) {
			k = every;
			heap_advance_to(heap_now + 1);
		}
	}
}

static long heap_fired_count(void)
{
	return heap_fired;
}

static void heap_teardown(void)
{
	free(hts);
	free(heap);
}

static const struct peer_ops drv_heap = {
	"binaryheap", heap_setup, heap_insert, heap_cancel, heap_churn,
	heap_expire_step, NULL, heap_advance_to, heap_idle_reset,
	heap_advance_to, heap_fired_count, heap_teardown, NULL, NULL, NULL
};

/* ---- libuv ---- */

static uv_loop_t uvloop;
static uv_timer_t *uvs;
static size_t uv_n;
static long uv_fired;

static void luv_fn(uv_timer_t *t)
{
	(void)t;
	uv_fired++;
}

static void luv_setup(size_t n)
{
	uv_loop_init(&uvloop);
	uvs = malloc(n * sizeof(*uvs));
	for (size_t i = 0; i < n; i++)
		uv_timer_init(&uvloop, &uvs[i]);
	uv_n = n;
	uv_fired = 0;
}

static void luv_insert(const int64_t *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		uv_timer_start(&uvs[i], luv_fn, (uint64_t)d[i], 0);
}

static void luv_cancel(const size_t *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		uv_timer_stop(&uvs[o[i]]);
}

static void luv_churn(const size_t *p, const int64_t *d, size_t c)
{
	for (size_t j = 0; j < c; j++)
		uv_timer_start(&uvs[p[j]], luv_fn, (uint64_t)d[j], 0);
}

static void luv_make_due(void)
{
	for (size_t i = 0; i < uv_n; i++)
		uv_timer_start(&uvs[i], luv_fn, 0, 0);
}

static void luv_expire_jump(int64_t now)
{
	(void)now;
	uv_run(&uvloop, UV_RUN_NOWAIT);
}

static void luv_idle_reset(const size_t *p, size_t n, size_t every, int64_t delay)
{
	(void)every; /* the loop's clock does not move */
	for (size_t i = 0; i < n; i++)
		uv_timer_start(&uvs[p[i]], luv_fn, (uint64_t)delay, 0);
}

static long luv_fired_count(void)
{
	return uv_fired;
}

static void luv_close_cb(uv_handle_t *h)
{
	(void)h;
}

static void luv_teardown(void)
{
	for (size_t i = 0; i < uv_n; i++)
		uv_close((uv_handle_t *)&uvs[i], luv_close_cb);
	uv_run(&uvloop, UV_RUN_DEFAULT);
	uv_loop_close(&uvloop);
	free(uvs);
}

static const struct peer_ops drv_libuv = {
	"libuv", luv_setup, luv_insert, luv_cancel, luv_churn, NULL,
	luv_make_due, luv_expire_jump, luv_idle_reset, NULL, luv_fired_count,
	luv_teardown, NULL, NULL, NULL
};

/* ---- libev ---- */

static struct ev_loop *evloop;
static ev_timer *evs;
static size_t ev_n;
static long ev_fired;

static void ev_fn(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)w;
	(void)revents;
	ev_fired++;
}

static void libev_setup(size_t n)
{
	evloop = ev_loop_new(EVFLAG_AUTO);
	evs = malloc(n * sizeof(*evs));
	for (size_t i = 0; i < n; i++)
		ev_timer_init(&evs[i], ev_fn, 0., 0.);
	ev_n = n;
	ev_fired = 0;
}

static void libev_insert(const int64_t *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ev_timer_set(&evs[i], (double)d[i] / 1e3, 0.);
		ev_timer_start(evloop, &evs[i]);
	}
}

static void libev_cancel(const size_t *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ev_timer_stop(evloop, &evs[o[i]]);
}

static void libev_churn(const size_t *p, const int64_t *d, size_t c)
{
	for (size_t j = 0; j < c; j++) {
		ev_timer_stop(evloop, &evs[p[j]]);
		ev_timer_set(&evs[p[j]], (double)d[j] / 1e3, 0.);
		ev_timer_start(evloop, &evs[p[j]]);
	}
}

/* Distinct due times, all in the past: one iteration fires them. */
static void libev_make_due(void)
{
	for (size_t i = 0; i < ev_n; i++) {
		ev_timer_stop(evloop, &evs[i]);
		ev_timer_set(&evs[i], -(double)due[i] / 1e3, 0.);
		ev_timer_start(evloop, &evs[i]);
	}
}

static void libev_expire_jump(int64_t now)
{
	(void)now;
	ev_run(evloop, EVRUN_NOWAIT);
}

/* libev's idle-timeout idiom: repeat = the timeout, ev_timer_again. */
static void libev_idle_reset(const size_t *p, size_t n, size_t every,
			     int64_t delay)
{
	(void)every; /* the loop's clock does not move */
	for (size_t i = 0; i < n; i++) {
		evs[p[i]].repeat = (double)delay / 1e3;
		ev_timer_again(evloop, &evs[p[i]]);
	}
}

static long libev_fired_count(void)
{
	return ev_fired;
}

static void libev_teardown(void)
{
	for (size_t i = 0; i < ev_n; i++)
		ev_timer_stop(evloop, &evs[i]);
	ev_loop_destroy(evloop);
	free(evs);
}

static const struct peer_ops drv_libev = {
	"libev", libev_setup, libev_insert, libev_cancel, libev_churn, NULL,
	libev_make_due, libev_expire_jump, libev_idle_reset, NULL,
	libev_fired_count, libev_teardown, NULL, NULL, NULL
};

/* ---- libevent ---- */

static struct event_base *evbase;
static struct event **les;
static size_t le_n;
static long le_fired;

static void le_fn(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	le_fired++;
}

static struct timeval tv_of(int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	return tv;
}

static void le_setup(size_t n)
{
	struct event_config *cfg = event_config_new();

	/* One event per timer, no other dynamic allocation. */
	evbase = event_base_new_with_config(cfg);
	event_config_free(cfg);
	les = malloc(n * sizeof(*les));
	for (size_t i = 0; i < n; i++)
		les[i] = evtimer_new(evbase, le_fn, NULL);
	le_n = n;
	le_fired = 0;
}

static void le_insert(const int64_t *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct timeval tv = tv_of(d[i]);

		evtimer_add(les[i], &tv);
	}
}

static void le_cancel(const size_t *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		evtimer_del(les[o[i]]);
}

static void le_churn(const size_t *p, const int64_t *d, size_t c)
{
	for (size_t j = 0; j < c; j++) {
		struct timeval tv = tv_of(d[j]);

		evtimer_add(les[p[j]], &tv); /* re-adding reschedules */
	}
}

static void le_make_due(void)
{
	struct timeval zero = { 0, 0 };

	for (size_t i = 0; i < le_n; i++)
		evtimer_add(les[i], &zero);
}

static void le_expire_jump(int64_t now)
{
	(void)now;
	event_base_loop(evbase, EVLOOP_NONBLOCK);
}

static void le_idle_reset(const size_t *p, size_t n, size_t every, int64_t delay)
{
	struct timeval tv = tv_of(delay);

	(void)every; /* the loop's clock does not move */
	for (size_t i = 0; i < n; i++)
		evtimer_add(les[p[i]], &tv);
}

static long le_fired_count(void)
{
	return le_fired;
}

static void le_teardown(void)
{
	for (size_t i = 0; i < le_n; i++)
		event_free(les[i]);
	event_base_free(evbase);
	free(les);
}

static const struct peer_ops drv_libevent = {
	"libevent", le_setup, le_insert, le_cancel, le_churn, NULL, le_make_due,
	le_expire_jump, le_idle_reset, NULL, le_fired_count, le_teardown, NULL, NULL, NULL
};

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

/* The wheel first, then its peers. */
static const struct peer_ops *impls[MAX_IMPLS];

/* Every run of every cell, [impl][cell][run], and what goes with them. */
static double times[MAX_IMPLS][NCELL][RUNS];
static double bytes_per_timer[MAX_IMPLS];
static long steps[MAX_IMPLS][3][2]; /* [expire-step, idle-expire,
				       idle-expire-win][advances,
				       of which fired nothing]: the same in
				       every run */

static int64_t phase_t0;

/* Around exactly each cell's timed loop: the clock, and under --instr
 * callgrind's collection switched on for it alone and dumped after it. */
static void phase_begin(void)
{
	phase_t0 = bench_now_ns();
#ifdef TW_BENCH_CALLGRIND
	if (instr)
		CALLGRIND_TOGGLE_COLLECT;
#endif
}

static double phase_end(const struct peer_ops *im, enum cell c, size_t ops)
{
	int64_t t1;

#ifdef TW_BENCH_CALLGRIND
	if (instr) {
		char what[64];

		CALLGRIND_TOGGLE_COLLECT;
		snprintf(what, sizeof(what), "%s/%s", im->name, cell_names[c]);
		CALLGRIND_DUMP_STATS_AT(what);
		printf("instr %s %s %zu\n", im->name, cell_names[c], ops);
	}
#else
	(void)im;
	(void)c;
#endif
	t1 = bench_now_ns();
	return (double)(t1 - phase_t0) / (double)(ops ? ops : 1);
}

static void check_fired(const struct peer_ops *im, enum cell c, long got,
			long want)
{
	if (got != want)
		fprintf(stderr, "%s: %s fired %ld of %ld\n", im->name,
			cell_names[c], got, want);
}

/* The idle cells of one run: resets (exact or windowed), then stepped
 * expiry of what they left. */
static void run_idle(size_t k, int r, bool windowed)
{
	const struct peer_ops *im = impls[k];
	enum cell reset = windowed ? IDLE_RESET_WIN : IDLE_RESET;
	enum cell expire = windowed ? IDLE_EXPIRE_WIN : IDLE_EXPIRE;
	size_t every = N >= 1000 ? N / 1000 : 1;
	long f0, adv, z;

	im->setup(N);
	if (windowed)
		im->insert_window(idle_due, N, window_ms);
	else
		im->insert(idle_due, N);
	f0 = im->fired();
	phase_begin();
	if (windowed)
		im->idle_reset_window(pick, N, every, IDLE_MS, window_ms);
	else
		im->idle_reset(pick, N, every, IDLE_MS);
	times[k][reset][r] = phase_end(im, reset, N);
	check_fired(im, reset, im->fired() - f0, 0);
	if (im->expire_step) {
		f0 = im->fired();
		phase_begin();
		im->expire_step(&adv, &z);
		times[k][expire][r] = phase_end(im, expire, N);
		check_fired(im, expire, im->fired() - f0, (long)N);
		steps[k][windowed ? 2 : 1][0] = adv;
		steps[k][windowed ? 2 : 1][1] = z;
	}
	im->teardown();
}

/* The cells of one run of one implementation. */
static void run_cells(size_t k, int r)
{
	const struct peer_ops *im = impls[k];
	double before = bench_allocated();
	long f0, adv, z;

	/* 1-4 on one set: insert, cancel, insert again, churn, stepped. */
	im->setup(N);
	phase_begin();
	im->insert(due, N);
	times[k][INSERT][r] = phase_end(im, INSERT, N);
	if (r == 0)
		bytes_per_timer[k] = (bench_allocated() - before) / (double)N;
	phase_begin();
	im->cancel(order, N);
	times[k][CANCEL][r] = phase_end(im, CANCEL, N);
	im->insert(due, N);
	phase_begin();
	im->churn(pick, due2, C);
	times[k][CHURN_CELL][r] = phase_end(im, CHURN_CELL, C);
	if (im->expire_step) {
		f0 = im->fired();
		phase_begin();
		im->expire_step(&adv, &z);
		times[k][EXPIRE_STEP][r] = phase_end(im, EXPIRE_STEP, N);
		check_fired(im, EXPIRE_STEP, im->fired() - f0, (long)N);
		steps[k][0][0] = adv;
		steps[k][0][1] = z;
	}
	im->teardown();

	/* 5: the same dues, fresh, fired by one advance. */
	im->setup(N);
	im->insert(due, N);
	if (im->make_due)
		im->make_due();
	f0 = im->fired();
	phase_begin();
	im->expire_jump(SPAN_MS + 1);
	times[k][EXPIRE_JUMP][r] = phase_end(im, EXPIRE_JUMP, N);
	check_fired(im, EXPIRE_JUMP, im->fired() - f0, (long)N);
	im->teardown();

	/* 5 again with no order promised among the timers fired (ours:
	 * tw_wheel_advance_unordered; the summary sets it against the
	 * peers' expire-jump, none of which orders more). */
	if (im->expire_jump_unordered) {
		im->setup(N);
		im->insert(due, N);
		f0 = im->fired();
		phase_begin();
		im->expire_jump_unordered(SPAN_MS + 1);
		times[k][JUMP_UNORDERED][r] = phase_end(im, JUMP_UNORDERED, N);
		check_fired(im, JUMP_UNORDERED, im->fired() - f0, (long)N);
		im->teardown();
	}

	/* 6-7: idle timeouts reset, then fired stepped; then again with
	 * windows (tw_wheel_reschedule_range, or a peer's own):
	 * [30 s, 30 s + window_ms]. */
	run_idle(k, r, false);
	if (im->idle_reset_window)
		run_idle(k, r, true);
}

static double report(const char *lib, const char *work, double *runs, double bytes)
{
	double median;

	qsort(runs, (size_t)nruns, sizeof(*runs), bench_cmp_double);
	median = runs[nruns / 2];
	printf("  %-11s %-15s %9.1f ns/op  (%.1f .. %.1f)  %5.1fx floor", lib, work,
	       median, runs[0], runs[nruns - 1], median / floor_ns);
	if (bytes > 0)
		printf("  %6.1f B/timer", bytes);
	putchar('\n');
	if (csv)
		fprintf(csv, "%s,%s,%zu,%.2f,%.1f\n", lib, work, N, median, bytes);
	return median;
}

static void report_steps(const long s[2])
{
	printf("  %-11s %-15s %9ld advances, %ld (%.1f %%) fired nothing\n", "",
	       "", s[0], s[1], s[0] ? 100.0 * (double)s[1] / (double)s[0] : 0);
}

static void report_impl(size_t k)
{
	const struct peer_ops *im = impls[k];

	for (int c = 0; c < NCELL; c++) {
		bool stepped = c == EXPIRE_STEP || c == IDLE_EXPIRE ||
			       c == IDLE_EXPIRE_WIN;
		bool windowed = c == IDLE_RESET_WIN || c == IDLE_EXPIRE_WIN;

		if ((stepped && !im->expire_step) ||
		    (c == JUMP_UNORDERED && !im->expire_jump_unordered) ||
		    (windowed && !im->idle_reset_window)) {
			result[size_index][k][c] = 0;
			continue;
		}
		result[size_index][k][c] = report(im->name, cell_names[c],
						  times[k][c],
						  c == INSERT ? bytes_per_timer[k] : 0);
		if (stepped)
			report_steps(steps[k][c == IDLE_EXPIRE_WIN ? 2
						: c == IDLE_EXPIRE   ? 1
								     : 0]);
	}
}

/* The worst single advance of an event loop ticking every 1 ms while
 * 1e6 timers come due over 2 s (500 per tick): a cascade that moves a
 * level's bucket at once shows up here as a stall. Median of the runs'
 * maxima. */
static void stall(const struct peer_ops *im, const char *name)
{
	int64_t *set = malloc(STALL_N * sizeof(*set));
	double worst[RUNS];

	for (size_t i = 0; i < STALL_N; i++)
		set[i] = 1 + (int64_t)(rnd() % STALL_SPAN_MS);
	for (int r = 0; r < nruns; r++) {
		im->setup(STALL_N);
		im->insert(set, STALL_N);
		worst[r] = 0;
		for (int64_t ms = 1; ms <= STALL_SPAN_MS + 1; ms++) {
			int64_t t0 = bench_now_ns();
			double dt;

			im->advance_to(ms);
			dt = (double)(bench_now_ns() - t0);
			if (dt > worst[r])
				worst[r] = dt;
		}
		if (im->fired() != STALL_N)
			fprintf(stderr, "%s: stall test fired %ld of %d\n", name,
				im->fired(), STALL_N);
		im->teardown();
	}
	qsort(worst, (size_t)nruns, sizeof(*worst), bench_cmp_double);
	printf("  %-17s worst advance %7.3f ms  (%.3f .. %.3f)\n", name,
	       worst[nruns / 2] / 1e6, worst[0] / 1e6, worst[nruns - 1] / 1e6);
	if (csv)
		fprintf(csv, "%s,stall,%d,%.2f,0\n", name, STALL_N,
			worst[nruns / 2]);
	free(set);
}

static void prepare(size_t n)
{
	size_t npick = C > n ? C : n;

	N = n;
	due = realloc(due, n * sizeof(*due));
	idle_due = realloc(idle_due, n * sizeof(*idle_due));
	order = realloc(order, n * sizeof(*order));
	due2 = realloc(due2, C * sizeof(*due2));
	pick = realloc(pick, npick * sizeof(*pick));
	if (!due || !idle_due || !order || !due2 || !pick) {
		fprintf(stderr, "wheel_bench: out of memory for N = %zu\n", n);
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		due[i] = 1 + (int64_t)(rnd() % SPAN_MS);
		idle_due[i] = IDLE_MS + (int64_t)(rnd() % IDLE_SPREAD_MS);
		order[i] = i;
	}
	for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
		size_t j = rnd() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (size_t j = 0; j < C; j++)
		due2[j] = 1 + (int64_t)(rnd() % SPAN_MS);
	for (size_t j = 0; j < npick; j++)
		pick[j] = rnd() % n;
}

static size_t collect_impls(void)
{
	size_t n = 0;

	impls[n++] = &drv_tw;
#ifdef TW_BENCH_WHEEL_ONLY
	return n; /* wheel_bench_inline: the peers are wheel_bench's */
#endif
	impls[n++] = &drv_heap;
	impls[n++] = &drv_libev;
	impls[n++] = &drv_libuv;
	impls[n++] = &drv_libevent;
	return n;
}

/* A peer's figure to set against the wheel's in cell w: the peers have
 * one one-jump expiry each (none orders less than the wheel's unordered
 * one), and a peer without windows is set against with its exact idle
 * timeouts. */
static double peer_value(size_t k, size_t i, int w)
{
	if (w == JUMP_UNORDERED)
		return result[k][i][EXPIRE_JUMP];
	if ((w == IDLE_RESET_WIN || w == IDLE_EXPIRE_WIN) && result[k][i][w] <= 0)
		return result[k][i][w == IDLE_RESET_WIN ? IDLE_RESET : IDLE_EXPIRE];
	return result[k][i][w];
}

/* For each N and cell: the fastest peer's time over the wheel's. */
static void summary(const size_t *ns, size_t count, size_t nimpls)
{
	printf("\nfastest peer / the wheel (> 1: the wheel is faster), per N\n");
	printf("  %-14s", "cell");
	for (size_t k = 0; k < count; k++)
		printf(" %18zu", ns[k]);
	putchar('\n');
	for (int w = 0; w < NCELL; w++) {
		printf("  %-14s", cell_names[w]);
		for (size_t k = 0; k < count; k++) {
			size_t best = 0;

			for (size_t i = 1; i < nimpls; i++)
				if (peer_value(k, i, w) > 0 &&
				    (!best || peer_value(k, i, w) < peer_value(k, best, w)))
					best = i;
			if (!best || result[k][0][w] <= 0)
				printf("  %5s  %-10s", "-", "");
			else
				printf("  %5.2fx %-10s",
				       peer_value(k, best, w) / result[k][0][w],
				       impls[best]->name);
		}
		putchar('\n');
	}
}

/* How often the wheel moves a timer down a level per timer it fires, in
 * the idle cells (untimed: an observer counts the moves): what a window
 * saves. */
static long moves;
static void count_move(void *arg, const struct tw_wheel *w,
		       const struct tw_event *ev)
{
	(void)arg;
	(void)w;
	moves += ev->kind == TW_EV_PLACED;
}

static void report_moves(void)
{
	static const struct tw_observer counter = { count_move, NULL };
	size_t every = N >= 1000 ? N / 1000 : 1;
	double per[2];
	long adv, z;

	for (int win = 0; win < 2; win++) {
		tw_setup(N);
		if (win)
			tw_insert_window(idle_due, N, window_ms);
		else
			tw_insert(idle_due, N);
		if (win)
			tw_idle_reset_window(pick, N, every, IDLE_MS, window_ms);
		else
			tw_idle_reset(pick, N, every, IDLE_MS);
		moves = 0;
		tw_wheel_set_observer(&wheel, &counter);
		tw_expire_step(&adv, &z);
		per[win] = (double)moves / (double)N;
		tw_teardown();
	}
	printf("  %-11s idle expiry moves a timer down %.2f times per timer it "
	       "fires; with windows of %lld ms, %.2f\n", drv_tw.name, per[0],
	       (long long)window_ms, per[1]);
	if (csv)
		fprintf(csv, "timingwheel,idle-moves,%zu,%.3f,0\ntimingwheel,"
			"idle-moves-win,%zu,%.3f,0\n", N, per[0], N, per[1]);
}

/* The wheel's name in the tables: TW_BENCH_WHEEL_NAME at the default
 * 64 buckets a level, with "-SIZE" appended for any other size in use
 * (exact mode rounds the size asked for; the name says what ran). */
static void wheel_column_name(void)
{
	static char name[64];
	struct tw_wheel probe;

	if (tw_wheel_init(&probe, 1, wheel_size(), 0, tw_bench_mode) != 0)
		return;
	if (probe.size != 64) {
		snprintf(name, sizeof(name), "%s-%u", TW_BENCH_WHEEL_NAME,
			 (unsigned)probe.size);
		drv_tw.name = name;
	}
	tw_wheel_destroy(&probe);
}

/* What a geometry costs and buys beside the instruction counts: the
 * fixed block an initialised wheel allocates (the allocator's count, all
 * levels' buckets and the level array), and how idle timeouts coalesce
 * (moves per fired timer from report_moves, and the stepped idle
 * expiries' wake-ups). Under --instr, after the cells. */
static void report_geometry(void)
{
	struct tw_wheel probe;
	double before = bench_allocated();

	if (tw_wheel_init(&probe, 1, wheel_size(), 0, tw_bench_mode) != 0)
		return;
	printf("  %-11s geometry: %u buckets a level, %u levels, fixed memory "
	       "%.0f B (allocator, after tw_wheel_init)\n", drv_tw.name,
	       (unsigned)probe.size, (unsigned)probe.max_levels,
	       bench_allocated() - before);
	tw_wheel_destroy(&probe);
	printf("  %-11s idle-expire: %ld advances, %ld fired nothing; "
	       "idle-expire-win: %ld advances, %ld fired nothing\n",
	       drv_tw.name, steps[0][1][0], steps[0][1][1], steps[0][2][0],
	       steps[0][2][1]);
	report_moves();
}

static void measure_floor(void)
{
	double f[RUNS];

	for (int r = 0; r < nruns; r++) {
		floor_setup();
		floor_touch(); /* warm */
		{
			int64_t t0 = bench_now_ns();

			floor_touch();
			f[r] = (double)(bench_now_ns() - t0) / (double)N;
		}
		floor_teardown();
	}
	qsort(f, (size_t)nruns, sizeof(*f), bench_cmp_double);
	floor_ns = f[nruns / 2];
	printf("N = %zu: floor (one random cache line per op) %.1f ns; churn: "
	       "%zu reschedules\n", N, floor_ns, C);
	if (csv)
		fprintf(csv, "floor,touch,%zu,%.2f,64.0\n", N, floor_ns);
}

int main(int argc, char **argv)
{
	static const size_t full[] = { 1000, 10000, 100000, 1000000, 10000000 };
	static const size_t quick[] = { 1000, 1000000 };
	static const size_t issue[] = { 100000, 1000000, 10000000 };
	static const size_t big[] = { 100000000 };
	static size_t one[1];
	const size_t *ns = full;
	size_t count = 5, nimpls = collect_impls();
	int given_n = 0;
	cpu_set_t cpus;
	const char *pct = getenv("TW_BENCH_WINDOW_PCT");

	window_ms = IDLE_MS * (pct ? strtol(pct, NULL, 10) : 1) / 100;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			ns = quick;
			count = 2;
		} else if (!strcmp(argv[i], "--issue")) {
			ns = issue;
			count = 3;
		} else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
			one[0] = (size_t)strtoull(argv[++i], NULL, 10);
			ns = one;
			count = 1;
			given_n = 1;
		} else if (!strcmp(argv[i], "--big")) {
			ns = big;
			count = 1;
			nimpls = 1;
			nruns = 1;
		} else if (!strcmp(argv[i], "--instr")) {
			instr = 1;
		} else if (!strcmp(argv[i], "--wheel-size") && i + 1 < argc) {
			wheel_size_arg = strtol(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--wheel-only")) {
			nimpls = 1;
		} else {
			csv = fopen(argv[i], "w");
		}
	}
	if (instr) {
#ifndef TW_BENCH_CALLGRIND
		fprintf(stderr, "wheel_bench: built without <valgrind/callgrind.h>, "
				"so no --instr (install valgrind, rebuild)\n");
		return 2;
#else
		if (!RUNNING_ON_VALGRIND)
			printf("(--instr outside callgrind: nothing is counted; "
			       "bench/instr.sh runs it under valgrind)\n");
#endif
		if (!given_n) {
			one[0] = INSTR_N;
			ns = one;
		}
		count = 1;
		nruns = 1;
	}
	for (size_t k = 0; k < count; k++)
		if (ns[k] < 2) {
			fprintf(stderr, "wheel_bench: N must be at least 2\n");
			return 2;
		}
	wheel_column_name();
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0)
		printf("(could not pin to CPU 0)\n");
	if (instr) {
		/* One run of each library's cells. */
		prepare(ns[0]);
		for (size_t i = 0; i < nimpls; i++)
			run_cells(i, 0);
		report_geometry();
		return 0;
	}
	if (csv)
		fprintf(csv, "library,workload,n,ns_per_op,bytes_per_timer\n");
	printf("timers side by side, pinned to CPU 0, median of %d runs (spread), "
	       "runs alternating between libraries; 1 ms tick\n", nruns);
	for (size_t k = 0; k < count; k++) {
		size_index = k;
		prepare(ns[k]);
		measure_floor();
		fflush(stdout);
		for (int r = 0; r < nruns; r++)
			for (size_t i = 0; i < nimpls; i++)
				run_cells(i, r);
		for (size_t i = 0; i < nimpls; i++)
			report_impl(i);
		report_moves();
		fflush(stdout);
	}
	if (nimpls > 1) {
		summary(ns, count, nimpls);
		printf("\nstall: %d timers due over %d ms, the clock advanced every "
		       "1 ms\n", STALL_N, STALL_SPAN_MS);
		for (size_t i = 0; i < nimpls; i++)
			if (impls[i]->advance_to)
				stall(impls[i], impls[i]->name);
		tw_bench_mode = TW_MODE_KAFKA;
		stall(&drv_tw, "timingwheel-kafka");
	}
	if (csv)
		fclose(csv);
	return 0;
}
