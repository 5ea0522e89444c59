/* SPDX-License-Identifier: MIT */
/*
 * The tests' one virtual clock (virtual_clock as a service's clock.now),
 * moved by hand (set_clock, or virtual_now itself), and the small
 * services and purgatories the tests drive with it (and poll from a
 * thread of their own): tick 10, 8 buckets, the clock at 1000 when each
 * is made. Include after check.h.
 */
#ifndef TW_TEST_VIRTUAL_CLOCK_H
#define TW_TEST_VIRTUAL_CLOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

static _Atomic int64_t virtual_now;

static inline int64_t virtual_clock(void *arg)
{
	(void)arg;
	return atomic_load(&virtual_now);
}

static inline void set_clock(int64_t t)
{
	atomic_store(&virtual_now, t);
}

/* queue_capacity 0: the default. */
static inline struct tw_service *service_queue(bool manual, unsigned executors,
					       size_t queue_capacity)
{
	struct tw_service_config cfg = { 0 };
	struct tw_service *svc = NULL;

	cfg.tick = 10;
	cfg.wheel_size = 8;
	cfg.manual = manual;
	cfg.executors = executors;
	cfg.queue_capacity = queue_capacity;
	cfg.clock.now = virtual_clock;
	atomic_store(&virtual_now, 1000);
	CHECK_EQ(tw_service_create(&svc, &cfg), TW_OK);
	return svc;
}

static inline struct tw_service *service(bool manual, unsigned executors)
{
	return service_queue(manual, executors, 0);
}

/* A poll on a thread of its own (sp_spawn), and its result. */
struct poller {
	struct tw_service *svc;
	int64_t result;
};

static inline void *poll_thread(void *arg)
{
	struct poller *p = arg;

	p->result = tw_service_poll(p->svc);
	return NULL;
}

/* purge_interval 0: the default (1000) */
/* A manual purgatory of one shard on the virtual clock at 1000, a tick of
 * 10 and 8 buckets a level, its service in the given mode (kafka mode:
 * no tolerances). */
static inline struct tw_purgatory *manual_purgatory_in(enum tw_mode mode)
{
	struct tw_purgatory_config cfg = { 0 };
	struct tw_purgatory *p = NULL;

	cfg.service.tick = 10;
	cfg.service.wheel_size = 8;
	cfg.service.manual = true;
	cfg.service.mode = mode;
	cfg.service.clock.now = virtual_clock;
	atomic_store(&virtual_now, 1000);
	CHECK_EQ(tw_purgatory_create(&p, &cfg), TW_OK);
	return p;
}

static inline struct tw_purgatory *manual_purgatory_purging(size_t purge_interval)
{
	struct tw_purgatory_config cfg = { 0 };
	struct tw_purgatory *p = NULL;

	cfg.service.tick = 10;
	cfg.service.wheel_size = 8;
	cfg.service.manual = true;
	cfg.service.clock.now = virtual_clock;
	cfg.shards = 4;
	cfg.purge_interval = purge_interval;
	atomic_store(&virtual_now, 1000);
	CHECK_EQ(tw_purgatory_create(&p, &cfg), TW_OK);
	return p;
}

#endif
