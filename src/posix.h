/* SPDX-License-Identifier: MIT */
/*
 * posix.h — what the library calls beyond C11, declared even where a system
 * header came first.
 *
 * Beyond C11 the library calls POSIX.1-2008 (threads, a condition
 * variable on the monotonic clock) and one Linux call (the futex, through
 * syscall). In its own build every source defines _POSIX_C_SOURCE before
 * its first system header, and the system declares them all. The
 * amalgamation (tools/amalgamate.sh) is different: a program includes
 * timingwheel.c into its own file, maybe after its own system headers,
 * compiled with -std=c11. glibc reads the feature macros once, at the
 * first system header (<features.h>), so the ones the amalgamation sets
 * come too late, and <time.h>, <pthread.h> and <unistd.h> leave out:
 *
 *   what                          glibc declares it under   used by
 *   clock_gettime, CLOCK_MONOTONIC  __USE_POSIX199309        the service's clock
 *   pthread_condattr_setclock       __USE_XOPEN2K            the service's waits
 *   syscall                         __USE_MISC               the futex (futex.h)
 *
 * This header declares each of them when the system did not, with the
 * prototype glibc gives it (C allows a function to be declared twice
 * alike). tools/amalgamate.sh pastes it at the top of timingwheel.c, after
 * the feature macros; a source of the library may include it first, in
 * place of its own #define _POSIX_C_SOURCE. Another C library reads the
 * feature macros at each header, so there the macros below suffice unless
 * the program included the same header before them.
 * tests/packaging/amalgamation.sh compiles timingwheel.c after each of
 * several system headers with -std=c11
 * -Werror=implicit-function-declaration.
 */
#ifndef TW_POSIX_H
#define TW_POSIX_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* syscall() */
#endif

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#if defined(__GLIBC__)
#if !defined(__USE_POSIX199309)
extern int clock_gettime(__clockid_t, struct timespec *);
#endif
#if !defined(__USE_XOPEN2K)
extern int pthread_condattr_setclock(pthread_condattr_t *, __clockid_t);
#endif
#if !defined(__USE_MISC)
extern long int syscall(long int, ...);
#endif
#endif /* __GLIBC__ */

#ifndef CLOCK_MONOTONIC
#define CLOCK_MONOTONIC 1 /* Linux's clock id (<linux/time.h>) */
#endif

#endif
