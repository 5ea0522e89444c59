/* SPDX-License-Identifier: MIT */
/*
 * The library's own lock (src/lock.h), which the service's shards and
 * the purgatory's shards and ops take on every call:
 *
 *  - Uncontended, taking it sets held and letting go leaves the word
 *    free, with nobody counted as waiting.
 *  - A thread that finds it held counts itself a waiter and sleeps; the
 *    unlock wakes it. The wait left the lock fenced (its unlocks locked
 *    stores), and TW_LOCK_FENCED unlocks with nobody waiting bring it
 *    back to plain stores.
 *  - Many threads, more than the cores, each taking it many times, its
 *    sections now short, now with a yield inside (so that waiters sleep):
 *    never two inside at once, no increment lost, nobody left asleep (a
 *    watchdog fails the test when no thread gets anywhere for 10 s). The
 *    order that would strand a sleeper (the unlock's look at the waiters
 *    ahead of its store) is a window of nanoseconds that a run like this
 *    seldom opens: model/lock.pml is what shows the lock closes it, over
 *    every interleaving on a machine that reorders as x86 does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "../../src/lock.h"

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static void test_uncontended_leaves_the_word_free(void)
{
	unsigned word = TW_LOCK_FREE;

	tw__lock_acquire(&word);
	CHECK(tw__lock_is_held(&word));
	CHECK_EQ(tw__lock_waiting(&word), 0);
	tw__lock_release(&word);
	CHECK_EQ(word, TW_LOCK_FREE);
}

struct pair {
	unsigned word;
	atomic_int got;
};

static void *take_and_give_back(void *arg)
{
	struct pair *p = arg;

	tw__lock_acquire(&p->word);
	atomic_store(&p->got, 1);
	tw__lock_release(&p->word);
	return NULL;
}

static void test_a_waiter_sleeps_until_the_unlock(void)
{
	struct pair p = { TW_LOCK_FREE, 0 };
	pthread_t t;

	tw__lock_acquire(&p.word);
	pthread_create(&t, NULL, take_and_give_back, &p);
	while (!tw__lock_waiting(&p.word))
		sleep_us(100);
	sleep_us(20000); /* asleep on the word by now, nearly always */
	CHECK_EQ(atomic_load(&p.got), 0);
	tw__lock_release(&p.word);
	pthread_join(t, NULL);
	CHECK_EQ(atomic_load(&p.got), 1);
	CHECK(!tw__lock_is_held(&p.word));
	CHECK_EQ(tw__lock_waiting(&p.word), 0);
	/* Fenced since the wait: each unlock with nobody waiting counts it
	 * down, and the last of them brings back the plain store. */
	CHECK(tw__lock_is_fenced(&p.word));
	for (int i = 0; i < TW_LOCK_FENCED; i++) {
		tw__lock_acquire(&p.word);
		tw__lock_release(&p.word);
	}
	CHECK(!tw__lock_is_fenced(&p.word));
	CHECK(!tw__lock_is_held(&p.word));
}

#define THREADS 6
#define ROUNDS 200000
#define LINES 16

static struct {
	unsigned word;
	char pad[60];
	long counter;      /* only under the lock */
	atomic_int inside; /* never above 1 */
	atomic_long progress;
	atomic_int done;
	/* Written in each section: lines the other threads wrote last. */
	struct {
		long v;
		char pad[56];
	} lines[LINES];
} shared;

static void *hammer(void *arg)
{
	uint64_t seed = test_rand_seed((uint64_t)(uintptr_t)arg);

	for (long i = 0; i < ROUNDS; i++) {
		uint64_t r = test_rand(&seed);

		tw__lock_acquire(&shared.word);
		if (atomic_fetch_add(&shared.inside, 1) != 0)
			CHECK(!"two threads inside the lock");
		shared.counter++;
		for (int k = 0; k < LINES; k++)
			shared.lines[(r + (uint64_t)k) % LINES].v++;
		/* Now and then a long section, so that waiters go to sleep
		 * rather than find it free at once. */
		if (r % 512 == 0)
			sched_yield();
		atomic_fetch_sub(&shared.inside, 1);
		tw__lock_release(&shared.word);
		atomic_fetch_add_explicit(&shared.progress, 1, memory_order_relaxed);
	}
	atomic_fetch_add(&shared.done, 1);
	return NULL;
}

static void test_many_threads_none_lost_none_left_asleep(void)
{
	pthread_t t[THREADS];
	long last = -1;
	int still = 0;

	memset(&shared, 0, sizeof(shared));
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, hammer, (void *)(i + 1));
	while (atomic_load(&shared.done) < THREADS) {
		long now = atomic_load(&shared.progress);

		sleep_us(10000);
		still = now == last ? still + 1 : 0;
		last = now;
		if (still >= 1000) {
			fprintf(stderr, "lock: no thread got anywhere for 10 s "
					"(%ld of %d sections): a waiter was never "
					"woken\n", now, THREADS * ROUNDS);
			exit(1);
		}
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(shared.counter, (long)THREADS * ROUNDS);
	CHECK(!tw__lock_is_held(&shared.word));
	CHECK_EQ(tw__lock_waiting(&shared.word), 0);
}

int main(void)
{
	RUN(test_uncontended_leaves_the_word_free);
	RUN(test_a_waiter_sleeps_until_the_unlock);
	RUN(test_many_threads_none_lost_none_left_asleep);
	printf("%d passed, %d failed\n", tests_passed, tests_failed);
	return tests_failed ? 1 : 0;
}
