/*
 * wheel_bench — the single-threaded wheel side by side with the timers
 * people use today, in one run on one core: libuv (uv_timer_*, a binary
 * heap), libev (ev_timer_*, a 4-ary heap), libevent (event_add/event_del,
 * a min-heap), a plain binary min-heap with an index per timer written
 * here, and a floor: one random cache line of a pool of N entries touched
 * per operation, which no timer structure can beat by much.
 *
 * Workloads, due times uniform over 1 ms .. 3 h at a 1 ms tick:
 *   insert  N timers;            cancel  them all in random order;
 *   churn   N times: cancel a random pending timer and re-add it with a new
 *           due time (a connection's idle timeout reset on every packet);
 *   expire  fire all N.
 * The wheel and the heap run on a virtual clock (advance to 3 h in one
 * call). libuv, libev and libevent have no virtual clock: for expire their
 * timers are all made due at once (timeout 0; libev: distinct due times in
 * the past) and one non-blocking loop iteration fires them.
 *
 * usage: wheel_bench [--quick] [CSV]   (--quick: N = 1e3 and 1e6 only)
 * Each figure is the median of 3 runs, with the spread and its multiple of
 * the floor; memory per timer is from the allocator (mallinfo2), all
 * internal structures included.
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
#include "timingwheel/timingwheel.h"

#define RUNS 3
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
};

/* ---- timingwheel ---- */

static struct tw_wheel wheel;
static struct tw_timer *tws;

static void tw_fn(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
	fired++;
}

static void tw_setup(void)
{
	tw_wheel_init(&wheel, 1, 20, 0, TW_MODE_EXACT);
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

static void heap_expire(void)
{
	while (heap_len && heap[0]->due <= SPAN_MS + 1) {
		hremove(heap[0]);
		fired++;
	}
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

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *lib, const char *work, double *runs, double bytes)
{
	qsort(runs, RUNS, sizeof(*runs), cmpd);
	printf("  %-10s %-7s %9.1f ns/op  (%.1f .. %.1f)  %5.1fx floor", lib, work,
	       runs[RUNS / 2], runs[0], runs[RUNS - 1], runs[RUNS / 2] / floor_ns);
	if (bytes > 0)
		printf("  %6.1f B/timer", bytes);
	putchar('\n');
	if (csv)
		fprintf(csv, "%s,%s,%zu,%.2f,%.1f\n", lib, work, N, runs[RUNS / 2],
			bytes);
}

static double timed(void (*fn)(void))
{
	int64_t t0 = bench_now_ns();

	fn();
	return (double)(bench_now_ns() - t0) / (double)N;
}

static void measure(const struct impl *im)
{
	double ins[RUNS], can[RUNS], chu[RUNS], exp[RUNS], idl[RUNS], bytes = 0;

	for (int r = 0; r < RUNS; r++) {
		double before = bench_allocated();

		/* Idle timeouts reset on every packet: due 30 s out, reset to
		 * 30 s from a clock that creeps forward. */
		cur_due = idle;
		cur_due2 = idle2;
		im->setup();
		im->insert();
		idl[r] = timed(im->churn);
		im->teardown();

		cur_due = due;
		cur_due2 = due2;
		fired = 0;
		im->setup();
		ins[r] = timed(im->insert);
		if (r == 0)
			bytes = (bench_allocated() - before) / (double)N;
		can[r] = timed(im->cancel);
		im->insert();
		chu[r] = timed(im->churn);
		exp[r] = timed(im->expire);
		if (fired != (long)N)
			fprintf(stderr, "%s: expire fired %ld of %zu\n", im->name,
				fired, N);
		im->teardown();
	}
	report(im->name, "insert", ins, bytes);
	report(im->name, "cancel", can, 0);
	report(im->name, "churn", chu, 0);
	report(im->name, "idle", idl, 0);
	report(im->name, "expire", exp, 0);
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

static const struct impl impls[] = {
	{ "timingwheel", tw_setup, tw_insert, tw_cancel, tw_churn, tw_expire, tw_teardown },
	{ "binaryheap", heap_setup, heap_insert, heap_cancel, heap_churn, heap_expire,
	  heap_teardown },
	{ "libev", libev_setup, libev_insert, libev_cancel, libev_churn, libev_expire,
	  libev_teardown },
	{ "libuv", luv_setup, luv_insert, luv_cancel, luv_churn, luv_expire, luv_teardown },
	{ "libevent", le_setup, le_insert, le_cancel, le_churn, le_expire, le_teardown },
};

int main(int argc, char **argv)
{
	static const size_t full[] = { 1000, 10000, 100000, 1000000 };
	static const size_t quick[] = { 1000, 1000000 };
	const size_t *ns = full;
	size_t count = 4;
	cpu_set_t cpus;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			ns = quick;
			count = 2;
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
	printf("timers side by side, pinned to CPU 0, median of %d runs (spread), "
	       "due uniform over 1 ms .. 3 h\n", RUNS);
	for (size_t k = 0; k < count; k++) {
		double f[RUNS];

		prepare(ns[k]);
		for (int r = 0; r < RUNS; r++) {
			floor_setup();
			floor_touch(); /* warm */
			f[r] = timed(floor_touch);
			floor_teardown();
		}
		qsort(f, RUNS, sizeof(*f), cmpd);
		floor_ns = f[RUNS / 2];
		printf("N = %zu: floor (one random cache line per op) %.1f ns\n", N,
		       floor_ns);
		if (csv)
			fprintf(csv, "floor,touch,%zu,%.2f,64.0\n", N, floor_ns);
		for (size_t i = 0; i < sizeof(impls) / sizeof(impls[0]); i++)
			measure(&impls[i]);
	}
	if (csv)
		fclose(csv);
	return 0;
}
