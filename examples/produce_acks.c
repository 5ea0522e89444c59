/* SPDX-License-Identifier: MIT */
/*
 * produce_acks — why Kafka has a purgatory.
 *
 * A leader appends produce requests to a log; FOLLOWERS threads fetch from
 * it, each at its own pace. A request with acks=all can only be answered
 * when every follower has the message: it waits in the purgatory, watched
 * on the partition's key, and each follower fetch checks that key. If a
 * follower stalls, requests time out instead. Every request ends exactly
 * once: acknowledged (completed by the condition) or timed out.
 *
 *     produce_acks [REQUESTS [FOLLOWERS [TIMEOUT_MS]]]   (20000, 3, 30)
 *
 * One follower stalls for 40 ms now and then, so a few requests expire.
 * Prints the counts and the acknowledgement latency distribution.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timingwheel/timingwheel.h"

#define MAX_FOLLOWERS 16
static const char PARTITION[] = "orders-0";

struct produce {
	struct tw_delayed_op op;
	struct tw_watch watch;
	int64_t offset;      /* acknowledged when every follower is past it */
	int64_t created_ns;
	int64_t latency_ns;
	atomic_int outcome;  /* 0 waiting, 1 acknowledged, 2 timed out */
};

static struct tw_purgatory *purgatory;
static atomic_llong log_end;                 /* next offset to write */
static atomic_llong follower_end[MAX_FOLLOWERS];
static int nfollowers = 3;
static atomic_bool done;
static atomic_int finished, expirations;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* The high watermark: what every follower has. */
static int64_t high_watermark(void)
{
	int64_t hw = atomic_load(&log_end);

	for (int i = 0; i < nfollowers; i++) {
		int64_t f = atomic_load(&follower_end[i]);

		if (f < hw)
			hw = f;
	}
	return hw;
}

static bool try_ack(struct tw_delayed_op *op)
{
	struct produce *req = tw_container_of(op, struct produce, op);

	return high_watermark() > req->offset && tw_op_force_complete(op);
}

/* Every completion comes here, the timeout's too (purgatory.h: a timed
 * out op runs on_complete, then on_expiration), so the answer is decided
 * here, from the condition itself, as Kafka's DelayedProduce.onComplete
 * does: acknowledged only if every follower has the message now. Sending
 * the ack from here without that test would acknowledge the timed-out
 * requests too. */
static void on_complete(struct tw_delayed_op *op)
{
	struct produce *req = tw_container_of(op, struct produce, op);

	req->latency_ns = now_ns() - req->created_ns;
	atomic_store(&req->outcome, high_watermark() > req->offset ? 1 : 2);
	atomic_fetch_add(&finished, 1);
}

/* After on_complete, for a timeout only: what a server counts there
 * (Kafka's expiration metrics), not the answer. */
static void on_expiration(struct tw_delayed_op *op)
{
	(void)op;
	atomic_fetch_add(&expirations, 1);
}

/* One table for every produce request: the callbacks live here, not in
 * each op. */
static const struct tw_op_ops produce_ops = { try_ack, on_complete,
					      on_expiration, NULL, NULL };

static void *follower(void *arg)
{
	int id = (int)(uintptr_t)arg;
	uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);

	while (!atomic_load(&done)) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		/* A fetch round trip; follower 0 stalls now and then. */
		sleep_us(id == 0 && s % 500 == 0 ? 40000 : 100 + (long)(s % 400));
		atomic_store(&follower_end[id], atomic_load(&log_end));
		tw_purgatory_check_and_complete(purgatory, PARTITION,
						sizeof(PARTITION) - 1);
	}
	return NULL;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int requests = argc > 1 ? atoi(argv[1]) : 20000;
	int64_t timeout_ms = argc > 3 ? atoll(argv[3]) : 30;
	struct tw_purgatory_config cfg = { 0 };
	pthread_t th[MAX_FOLLOWERS];
	struct produce *reqs;
	int64_t *lat, start;
	int acked = 0, expired = 0, other = 0, n = 0;

	if (argc > 2)
		nfollowers = atoi(argv[2]);
	if (requests < 1 || nfollowers < 1 || nfollowers > MAX_FOLLOWERS ||
	    timeout_ms < 1) {
		fprintf(stderr, "usage: produce_acks [REQUESTS [FOLLOWERS(1..16) "
			"[TIMEOUT_MS]]]\n");
		return 2;
	}
	reqs = calloc((size_t)requests, sizeof(*reqs));
	lat = calloc((size_t)requests, sizeof(*lat));
	cfg.service.executors = 1;
	if (!reqs || !lat || tw_purgatory_create(&purgatory, &cfg) != TW_OK) {
		fprintf(stderr, "produce_acks: out of memory\n");
		return 1;
	}
	for (int i = 0; i < nfollowers; i++)
		pthread_create(&th[i], NULL, follower, (void *)(uintptr_t)i);

	start = now_ns();
	for (int i = 0; i < requests; i++) {
		struct produce *req = &reqs[i];
		const void *keys[1] = { PARTITION };
		size_t lens[1] = { sizeof(PARTITION) - 1 };
		int rc;

		tw_op_init(&req->op, TW_MS(timeout_ms), &produce_ops, NULL);
		req->created_ns = now_ns();
		req->offset = atomic_fetch_add(&log_end, 1); /* append */
		rc = tw_purgatory_try_complete_else_watch(purgatory, &req->op, keys,
							  lens, 1, &req->watch);
		if (rc < 0) {
			fprintf(stderr, "produce_acks: %s\n", tw_strerror(rc));
			return 1;
		}
		if (i % 20 == 19)
			sleep_us(1000); /* ~20000 requests per second */
	}
	while (atomic_load(&finished) < requests &&
	       now_ns() - start < TW_S(60))
		sleep_us(1000);
	atomic_store(&done, true);
	for (int i = 0; i < nfollowers; i++)
		pthread_join(th[i], NULL);
	tw_purgatory_destroy(purgatory);

	for (int i = 0; i < requests; i++) {
		int o = atomic_load(&reqs[i].outcome);

		if (o == 1)
			lat[n++] = reqs[i].latency_ns;
		acked += o == 1;
		expired += o == 2;
		other += o == 0;
		tw_op_destroy(&reqs[i].op);
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp64);
	printf("produce_acks: %d acks=all requests, %d followers, timeout %lld ms, "
	       "%.2f s\n", requests, nfollowers, (long long)timeout_ms,
	       (double)(now_ns() - start) / 1e9);
	printf("  acknowledged %d, timed out %d, lost %d (%d timeouts fired; a "
	       "request whose message every follower had by then is "
	       "acknowledged)\n", acked, expired, other, atomic_load(&expirations));
	if (n)
		printf("  acknowledgement latency: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
		       (double)lat[n / 2] / 1e6, (double)lat[n * 99 / 100] / 1e6,
		       (double)lat[n - 1] / 1e6);
	free(reqs);
	free(lat);
	return other ? 1 : 0;
}
