/*
 * Stress: several threads add, cancel and reschedule a shared pool of
 * timers (any thread may touch any timer) while the reaper and executors
 * expire them on the real clock; callbacks re-add timers too. At the end,
 * after shutdown, every add is accounted for exactly once:
 *
 *     adds == runs + cancels that returned STOPPED + timers handed back
 *
 * per timer and in total: zero lost, zero doubled. Built with
 * ThreadSanitizer by `make tsan`; `make soak` runs it for minutes.
 *
 * usage: test_service_stress [TOTAL_OPS [THREADS [EXECUTORS [SHARDS]]]]
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"

#define POOL 4096

struct item {
	struct tw_service_timer t;
	atomic_long adds, runs, stopped, handed;
	bool readd;         /* its callback adds it again once */
};

static struct item pool[POOL];
static struct tw_service *svc;
static long ops_per_thread;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void on_run(struct tw_service *s, struct tw_service_timer *t)
{
	struct item *it = tw_container_of(t, struct item, t);

	atomic_fetch_add(&it->runs, 1);
	if (it->readd && tw_service_add_in(s, t, 20000) == TW_OK)
		atomic_fetch_add(&it->adds, 1);
}

static void account(struct item *it, int result)
{
	if (result == TW_SVC_STOPPED)
		atomic_fetch_add(&it->stopped, 1);
}

static void *producer(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;

	for (long i = 0; i < ops_per_thread; i++) {
		struct item *it = &pool[rnd(&seed) % POOL];
		int64_t delay = (int64_t)(rnd(&seed) % 2000000); /* 0..2 ms */
		int rc;

		switch (rnd(&seed) % 4) {
		case 0:
		case 1:
			rc = tw_service_add_in(svc, &it->t, delay);
			if (rc == TW_OK)
				atomic_fetch_add(&it->adds, 1);
			else
				CHECK(rc == TW_EBUSY);
			break;
		case 2:
			rc = tw_service_cancel(svc, &it->t);
			CHECK(rc >= 0);
			account(it, rc);
			break;
		default:
			rc = tw_service_reschedule(svc, &it->t,
						   tw_service_now(svc) + delay);
			CHECK(rc >= 0);
			account(it, rc);
			atomic_fetch_add(&it->adds, 1);
			break;
		}
	}
	return NULL;
}

static void hand_back(struct tw_service_timer *t, void *arg)
{
	(void)arg;
	atomic_fetch_add(&tw_container_of(t, struct item, t)->handed, 1);
}

static long total_ops = 1000000;
static unsigned nthreads = 4, nexecutors = 2, nshards = 4;

static void test_every_add_ends_exactly_once(void)
{
	struct tw_service_config cfg = { 0 };
	pthread_t th[64];
	long adds = 0, ends = 0;
	struct tw_service_stats st;

	cfg.tick = 100000; /* 0.1 ms: many buckets fire during the run */
	cfg.executors = nexecutors;
	cfg.shards = nshards;
	cfg.queue_capacity = 256; /* small: the full-queue path runs too */
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	for (int i = 0; i < POOL; i++) {
		memset(&pool[i], 0, sizeof(pool[i]));
		tw_service_timer_init(&pool[i].t, on_run, 0);
		pool[i].readd = i % 8 == 0;
	}
	ops_per_thread = total_ops / (long)nthreads;
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, producer, (void *)(uintptr_t)(i + 1));
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	CHECK(tw_service_shutdown(svc, hand_back, NULL) >= 0);

	for (int i = 0; i < POOL; i++) {
		struct item *it = &pool[i];
		long end = atomic_load(&it->runs) + atomic_load(&it->stopped) +
			   atomic_load(&it->handed);

		if (end != atomic_load(&it->adds)) {
			fprintf(stderr, "timer %d: %ld adds, %ld runs, %ld stopped, "
				"%ld handed back\n", i, atomic_load(&it->adds),
				atomic_load(&it->runs), atomic_load(&it->stopped),
				atomic_load(&it->handed));
			CHECK(!"an add did not end exactly once");
			break;
		}
		adds += atomic_load(&it->adds);
		ends += end;
	}
	CHECK_EQ(adds, ends);
	tw_service_stats(svc, &st);
	CHECK_EQ(st.added, (uint64_t)adds);
	CHECK_EQ(st.ran + st.stopped + st.handed_back, (uint64_t)adds);
	printf("stress: %ld ops on %u threads, %u executors, %u shards: %ld adds = "
	       "%llu ran + %llu stopped + %llu handed back (%llu run by the reaper "
	       "when the queue was full, %llu reaper wake-ups)\n",
	       total_ops, nthreads, nexecutors, nshards, adds,
	       (unsigned long long)st.ran, (unsigned long long)st.stopped,
	       (unsigned long long)st.handed_back, (unsigned long long)st.caller_ran,
	       (unsigned long long)st.wakeups);
	tw_service_destroy(svc);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		total_ops = strtol(argv[1], NULL, 10);
	if (argc > 2)
		nthreads = (unsigned)strtoul(argv[2], NULL, 10);
	if (argc > 3)
		nexecutors = (unsigned)strtoul(argv[3], NULL, 10);
	if (argc > 4)
		nshards = (unsigned)strtoul(argv[4], NULL, 10);
	if (nthreads < 1 || nthreads > 64)
		nthreads = 4;
	RUN(test_every_add_ends_exactly_once);
	return check_report();
}
