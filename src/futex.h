/* SPDX-License-Identifier: MIT */
/*
 * futex.h — the library's two futex calls (Linux): sleep on a word while
 * it holds the value the caller saw, for at most a time, and wake those
 * sleeping on a word. Our lock's waiter (lock.h) and the service's bell
 * (service/bell.h) sleep and wake through them.
 *
 * Why not syscall(SYS_futex, ..., &a_struct_timespec): the C library's
 * struct timespec is not always the one the call reads. A 32-bit build
 * with a 64-bit time_t (glibc with _TIME_BITS=64, as Debian's 32-bit
 * ports build since their time_t transition; musl from 1.2) has a 64-bit
 * tv_sec, and the 32-bit futex call reads two 32-bit fields: the low half
 * of the seconds and, as nanoseconds, their high half. A sleep of 400 ms
 * then reads as none at all (the reaper spins until its timer is due)
 * and one of 1.1 s as 1 s. So the time is laid out here as the kernel
 * reads it: two 64-bit fields for futex_time64, the call every 32-bit
 * architecture has had since Linux 5.1 (and the only one some, RISC-V's
 * 32-bit, have); where that call is missing (an older kernel: ENOSYS) or
 * does not exist (64-bit architectures, whose one futex call reads two
 * longs, which are 64-bit there), two longs for the plain call.
 *
 * Both calls leave errno as they found it: the lock's waiter sleeps in
 * the caller's thread, in the middle of a tw_* call.
 */
#ifndef TW_FUTEX_H
#define TW_FUTEX_H

#ifdef __linux__

#include "posix.h" /* syscall(), wherever the feature macros came late */

#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Sleep while *word is seen, until a wake-up, a signal or rel_ns (below
 * 0: no limit; at most 2^31 s). It may return at once (*word moved), and
 * for no reason the caller can tell: callers look again. */
static inline void tw__futex_wait(void *word, uint32_t seen, int64_t rel_ns)
{
	int saved = errno;

#ifdef SYS_futex_time64
	struct {
		int64_t tv_sec, tv_nsec;
	} limit64 = { rel_ns / 1000000000, rel_ns % 1000000000 };

	if (syscall(SYS_futex_time64, word, FUTEX_WAIT_PRIVATE, seen,
		    rel_ns < 0 ? NULL : &limit64, NULL, 0) == 0 ||
	    errno != ENOSYS) {
		errno = saved;
		return;
	}
#endif
#ifdef SYS_futex
	{
		struct {
			long tv_sec, tv_nsec;
		} limit = { (long)(rel_ns / 1000000000), (long)(rel_ns % 1000000000) };

		syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen,
			rel_ns < 0 ? NULL : &limit, NULL, 0);
	}
#endif
	errno = saved;
}

/* Wake up to count of those sleeping on word. */
static inline void tw__futex_wake(void *word, int count)
{
	int saved = errno;

#ifdef SYS_futex
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
	syscall(SYS_futex_time64, word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#endif
	errno = saved;
}

#endif /* __linux__ */
#endif
