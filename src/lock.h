/* SPDX-License-Identifier: MIT */
/*
 * lock.h — the library's own lock: one 32-bit word, for the locks that
 * guard short sections on every call (a service shard's wheel, a
 * purgatory op's try_complete) and never wait on a condition variable.
 *
 * Why not a pthread_mutex_t: 4 bytes instead of 40, and a lock and an
 * unlock inline, where glibc's pthread_mutex_lock and unlock are two
 * calls of some fifty instructions between them, which was a quarter of
 * a service add. Not recursive, not robust, no owner checks: every user
 * of it holds it across a few lines of its own code.
 *
 * The word is held (0 or 1, its first byte), a mode (its second: a
 * countdown, "fenced" while above 0, and a flag) and the number of
 * threads waiting (its last two). Taking it is one compare-and-swap of
 * held. Letting go of a lock nobody waited for lately (the countdown at
 * 0, nearly always) is a plain store of held = 0 and a look at the
 * waiters: no locked instruction. That matters more than the
 * instruction itself: on x86 a locked instruction waits until every
 * store before it has reached the cache, and the stores of a section (a
 * list's links, in lines another thread wrote last) miss, so an unlock by
 * exchange waited for each of them -- half of a purgatory watch's own
 * time in its samples (perf) -- where a plain store lets them drain while
 * the thread goes on. A mutex (glibc's, Java's) pays that wait on every
 * unlock.
 *
 * A thread that finds it held spins a little (TW_LOCK_SPINS), then counts
 * itself a waiter until it has the lock, and sleeps on the word (a futex
 * on Linux) while it is held, each time after setting the flag; an unlock
 * that sees waiters takes the flag and, if it was set, wakes one (so an
 * unlock wakes only when someone may sleep, as the old lock's SLEEPERS
 * state had it); a waiter that gets the lock while others wait sets the
 * flag again. The danger of the plain store is the order of the unlock's
 * store and its look: the processor may read the waiters before its
 * held = 0 is seen by others, so the unlock can miss a waiter that then
 * sleeps on a word still held as far as it could see, and nobody wakes
 * it. Two things close that gap. The waiter that finds the countdown at
 * 0 sets it (TW_LOCK_FENCED) and runs the process-wide barrier of
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) before it first sleeps: on
 * every other thread of the process a store it has made is then seen, and
 * a load it makes later sees the waiter, so the holder of that moment has
 * let go where the waiter sees it, or will see the waiter. And while the
 * countdown is above 0 the unlocks store held = 0 as a locked
 * instruction, so the waiters that come meanwhile need no barrier; each
 * such unlock that finds nobody waiting counts it down, back to plain
 * stores after TW_LOCK_FENCED of them. So a lock pays a barrier (a system
 * call and an interrupt of the process's other running threads) when
 * contention starts, not on every contended wait. model/lock.pml checks
 * it on a machine that reorders as x86 does. Where membarrier is missing
 * (not Linux 4.14 or later, a sandbox that forbids it, valgrind) the
 * waiter that starts the countdown sleeps at most TW_LOCK_NAP_NS at a
 * time and looks again: a missed wake-up costs that much, never a hang.
 * Not Linux: no futex; a waiter yields and looks again.
 */
#ifndef TW_LOCK_H
#define TW_LOCK_H

#include "futex.h"
#include "posix.h" /* syscall(), wherever the feature macros came late */

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#ifdef __linux__
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* A free word, no waiters, plain unlocks: what a zeroed lock is. */
enum { TW_LOCK_FREE = 0 };

/* The second byte: a countdown of fenced unlocks (its low seven bits) and
 * a flag, set by a waiter before it sleeps and taken by the unlock that
 * wakes it, so that an unlock wakes only when someone may sleep. */
#define TW_LOCK_FENCED 0x7f
#define TW_LOCK_FLAG 0x80

/* How long a waiter sleeps at most where no barrier closes the gap. */
#define TW_LOCK_NAP_NS 1000000L

/* The fields, read and written as themselves (unsigned char aliases
 * anything; the count's type says may_alias): held is the word's first
 * byte, the mode its second, the waiters its last two. */
typedef uint16_t __attribute__((may_alias)) tw__lock_count;

static inline unsigned char *tw__lock_held(unsigned *word)
{
	return (unsigned char *)word;
}

static inline unsigned char *tw__lock_mode(unsigned *word)
{
	return (unsigned char *)word + 1;
}

static inline tw__lock_count *tw__lock_waiters(unsigned *word)
{
	return (tw__lock_count *)word + 1;
}

/* Byte `byte` of the word (0: its first) holding v, as the word's value. */
static inline unsigned tw__lock_in_byte(unsigned byte, unsigned v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return v << (8 * (3 - byte));
#else
	return v << (8 * byte);
#endif
}

/* For tests and checks: whether someone holds it, how many wait, and
 * whether its unlocks are fenced. */
static inline bool tw__lock_is_held(unsigned *word)
{
	return __atomic_load_n(tw__lock_held(word), __ATOMIC_RELAXED) != 0;
}

static inline unsigned tw__lock_waiting(unsigned *word)
{
	return __atomic_load_n(tw__lock_waiters(word), __ATOMIC_RELAXED);
}

static inline bool tw__lock_is_fenced(unsigned *word)
{
	return (__atomic_load_n(tw__lock_mode(word), __ATOMIC_RELAXED) &
		TW_LOCK_FENCED) != 0;
}

#ifdef __linux__
/* Registers this process for the barrier; false where the system
 * refuses it. A second registration is harmless. */
static inline bool tw__lock_register(void)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
		       0, 0) == 0;
}

/* The process-wide barrier; false where the system refuses it. The
 * first use in a process registers it if the service has not. */
static inline bool tw__lock_barrier(void)
{
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return true;
	return tw__lock_register() &&
	       syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}
#endif

/* Registers the barrier ahead of the first contended wait (the
 * registration may wait for a grace period of the kernel's): the
 * service calls it when it starts its threads. */
static inline void tw__lock_prepare(void)
{
#ifdef __linux__
	(void)tw__lock_register();
#endif
}

/* After held = 0: wake one sleeper if a waiter is counted and the flag
 * was set (taking it, an exchange). */
static inline void tw__lock_wake_if_flagged(unsigned *word, bool waiters)
{
	if (waiters && (__atomic_fetch_and(tw__lock_mode(word),
					   (unsigned char)~TW_LOCK_FLAG,
					   __ATOMIC_SEQ_CST) & TW_LOCK_FLAG)) {
#ifdef __linux__
		tw__futex_wake(word, 1);
#endif
	}
}

/* A waiter looks this many times, a pause apart, before it counts itself
 * and sleeps: the sections are a few hundred instructions, so a holder
 * that is running lets go within them, and the wait then costs no system
 * call on either side. A holder that is not running (preempted) costs
 * the waiter these hundred pauses, and then the sleep. */
#define TW_LOCK_SPINS 100

static inline void tw__lock_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* The contended path, out of the callers' way. */
static __attribute__((noinline, cold, unused)) void
tw__lock_wait(unsigned *word)
{
	unsigned char *held = tw__lock_held(word), free_ = 0;
	const unsigned flag = tw__lock_in_byte(1, TW_LOCK_FLAG);
	bool sure = true; /* that an unlock will not miss this waiter */

	for (int i = 0; i < TW_LOCK_SPINS; i++) {
		tw__lock_pause();
		if (!__atomic_load_n(held, __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(held, &free_, 1, false,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
		free_ = 0;
	}
	/* Counted from here until it has the lock; the mode fenced, and the
	 * barrier if it was not. */
	__atomic_fetch_add(tw__lock_waiters(word), 1, __ATOMIC_SEQ_CST);
	if (!(__atomic_fetch_or(tw__lock_mode(word), TW_LOCK_FENCED,
				__ATOMIC_SEQ_CST) & TW_LOCK_FENCED)) {
#ifdef __linux__
		sure = tw__lock_barrier();
#endif
	}
	while (!__atomic_compare_exchange_n(held, &free_, 1, false,
					    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		/* The flag set and the word read in one instruction: an
		 * unlock that takes the flag after it changes the word, so
		 * the sleep below returns at once. */
		unsigned seen = __atomic_fetch_or(word, flag, __ATOMIC_SEQ_CST) | flag;

		if (seen & tw__lock_in_byte(0, 0xff)) {
#ifdef __linux__
			tw__futex_wait(word, seen, sure ? -1 : TW_LOCK_NAP_NS);
#else
			sched_yield();
#endif
		}
		free_ = 0;
	}
	__atomic_fetch_sub(tw__lock_waiters(word), 1, __ATOMIC_RELAXED);
	/* Others may sleep: this unlock wakes one (the old lock's "taken as
	 * SLEEPERS"). */
	if (__atomic_load_n(tw__lock_waiters(word), __ATOMIC_RELAXED))
		__atomic_fetch_or(tw__lock_mode(word), TW_LOCK_FLAG, __ATOMIC_SEQ_CST);
	(void)sure;
}

static inline void tw__lock_acquire(unsigned *word)
{
	unsigned char free_ = 0;

	if (!__atomic_compare_exchange_n(tw__lock_held(word), &free_, 1, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		tw__lock_wait(word);
}

/* An unlock while fenced: counted down when nobody waits, held = 0 as a
 * locked store, then the look. */
static __attribute__((noinline, cold, unused)) void
tw__lock_release_fenced(unsigned *word)
{
	if (!__atomic_load_n(tw__lock_waiters(word), __ATOMIC_RELAXED))
		__atomic_fetch_sub(tw__lock_mode(word), 1, __ATOMIC_RELAXED);
	__atomic_store_n(tw__lock_held(word), 0, __ATOMIC_SEQ_CST);
	tw__lock_wake_if_flagged(word, __atomic_load_n(tw__lock_waiters(word),
						       __ATOMIC_SEQ_CST) != 0);
}

static inline void tw__lock_release(unsigned *word)
{
	if (__builtin_expect(__atomic_load_n(tw__lock_mode(word), __ATOMIC_RELAXED) &
			     TW_LOCK_FENCED, 0)) {
		tw__lock_release_fenced(word);
		return;
	}
	__atomic_store_n(tw__lock_held(word), 0, __ATOMIC_RELEASE);
	tw__lock_wake_if_flagged(word, __atomic_load_n(tw__lock_waiters(word),
						       __ATOMIC_RELAXED) != 0);
}

#endif
