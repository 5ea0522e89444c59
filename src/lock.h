/* SPDX-License-Identifier: MIT */
/*
 * lock.h — the library's own lock: one 32-bit word, for the locks that
 * guard short sections on every call (a service shard's wheel, a
 * purgatory op's try_complete) and never wait on a condition variable.
 *
 * Why not a pthread_mutex_t: 4 bytes instead of 40, and a lock and an
 * unlock inline, one compare-and-swap and one exchange (the two locked
 * instructions any mutex pays), where glibc's pthread_mutex_lock and
 * unlock are two calls of some fifty instructions between them, which
 * was a quarter of a service add. Uncontended, which is nearly always,
 * nothing else happens; contended, a thread marks the word and sleeps on
 * it (a futex on Linux), and the holder wakes one sleeper when it lets
 * go. No spinning, as glibc's default mutex does none. Not recursive,
 * not robust, no owner checks: every user of it holds it across a few
 * lines of its own code.
 *
 * The word is TW_LOCK_FREE, TW_LOCK_HELD, or TW_LOCK_SLEEPERS (held, and
 * someone may sleep on it, so the release must wake one).
 */
#ifndef TW_LOCK_H
#define TW_LOCK_H

#include "posix.h" /* syscall(), wherever the feature macros came late */

#include <sched.h>
#include <stdbool.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

enum { TW_LOCK_FREE = 0, TW_LOCK_HELD = 1, TW_LOCK_SLEEPERS = 2 };

static inline void tw__lock_sleep(unsigned *word)
{
#ifdef __linux__
	/* Returns at once if the word is no longer TW_LOCK_SLEEPERS. */
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, TW_LOCK_SLEEPERS, NULL, NULL, 0);
#else
	(void)word;
	sched_yield();
#endif
}

static inline void tw__lock_wake_one(unsigned *word)
{
#ifdef __linux__
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
	(void)word;
#endif
}

/* The contended path, out of the callers' way. */
static __attribute__((noinline, cold, unused)) void tw__lock_wait(unsigned *word,
								   unsigned seen)
{
	/* Whoever takes it from here on takes it as TW_LOCK_SLEEPERS: it
	 * cannot know whether another sleeper is left, so its release wakes
	 * one (at worst a wake-up nobody needed). */
	if (seen != TW_LOCK_SLEEPERS)
		seen = __atomic_exchange_n(word, TW_LOCK_SLEEPERS, __ATOMIC_ACQUIRE);
	while (seen != TW_LOCK_FREE) {
		tw__lock_sleep(word);
		seen = __atomic_exchange_n(word, TW_LOCK_SLEEPERS, __ATOMIC_ACQUIRE);
	}
}

static inline void tw__lock_acquire(unsigned *word)
{
	unsigned seen = TW_LOCK_FREE;

	if (!__atomic_compare_exchange_n(word, &seen, TW_LOCK_HELD, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		tw__lock_wait(word, seen);
}

static inline void tw__lock_release(unsigned *word)
{
	if (__atomic_exchange_n(word, TW_LOCK_FREE, __ATOMIC_RELEASE) == TW_LOCK_SLEEPERS)
		tw__lock_wake_one(word);
}

#endif
