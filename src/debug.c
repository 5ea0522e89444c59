/* SPDX-License-Identifier: MIT */
/*
 * debug.c — the debug build's object tracker (debug.h says what it is
 * for). One table for the whole process: a chained hash of (kind, address)
 * under one mutex, which doubles its chains whenever they hold two
 * entries each on average, so that a lookup stays O(1) with a million
 * timers tracked (a server's checked build holds that many; with a fixed
 * number of chains one expiry of a million timers would be quadratic,
 * service_expiry_scale). Slower
 * than the release build, and meant to be: it is built only with
 * -DTW_DEBUG=ON, where naming a mistake matters more than nanoseconds.
 */
#include "posix.h" /* first: the feature macros */
#include "debug.h"

#ifdef TW_DEBUG

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define FIRST_CHAINS 4096 /* a power of two */

struct node {
	struct node *next;
	const void *obj;
	enum tw__debug_kind kind;
	uint64_t tag;
	unsigned depth; /* a wheel's nested calls on one thread */
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct node *tracker_first_table[FIRST_CHAINS];
/* A grown table replaces the first one and is kept for the process's
 * life, as the first one is. */
static struct node **tracker_table = tracker_first_table;
static size_t chains = FIRST_CHAINS;
static size_t entries;
static atomic_ulong tracker_threads_seen;
static _Thread_local uint64_t thread_id; /* 0: not yet numbered */

static uint64_t me(void)
{
	if (!thread_id)
		thread_id = atomic_fetch_add(&tracker_threads_seen, 1) + 1;
	return thread_id;
}

static size_t chain_of(enum tw__debug_kind kind, const void *obj, size_t n)
{
	uint64_t h = ((uint64_t)(uintptr_t)obj + (uint64_t)kind) *
		     0x9E3779B97F4A7C15ull;

	return (size_t)(h >> 32) & (n - 1); /* n: a power of two <= 2^32 */
}

/* Twice the chains, each node moved to its new one; where the memory is
 * not there the table stays as it is (longer chains, the same answers). */
static void grow_locked(void)
{
	size_t n = chains * 2;
	struct node **grown;

	if ((uint64_t)n > ((uint64_t)1 << 32) ||
	    !(grown = calloc(n, sizeof(*grown))))
		return;
	for (size_t i = 0; i < chains; i++) {
		struct node *node = tracker_table[i], *next;

		for (; node; node = next) {
			size_t c = chain_of(node->kind, node->obj, n);

			next = node->next;
			node->next = grown[c];
			grown[c] = node;
		}
	}
	if (tracker_table != tracker_first_table)
		free(tracker_table);
	tracker_table = grown;
	chains = n;
}

static struct node **tracker_slot_of(enum tw__debug_kind kind, const void *obj)
{
	struct node **p = &tracker_table[chain_of(kind, obj, chains)];

	while (*p && ((*p)->obj != obj || (*p)->kind != kind))
		p = &(*p)->next;
	return p;
}

static void __attribute__((format(printf, 3, 0), noreturn))
fail_with(const char *call, const void *obj, const char *fmt, va_list ap,
	  const char *footer)
{
	fprintf(stderr, "timingwheel: %s(%p): ", call, obj);
	vfprintf(stderr, fmt, ap);
	fputs(footer, stderr);
	fflush(stderr);
	abort();
}

void tw__debug_fail(const char *call, const void *obj, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fail_with(call, obj, fmt, ap,
		  "\n(timingwheel's debug build, TW_DEBUG, stops at the call "
		  "that made the mistake)\n");
}

void tw__debug_fail_found_late(const char *call, const void *obj,
			       const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fail_with(call, obj, fmt, ap,
		  "\n(timingwheel's debug build, TW_DEBUG, found this in the "
		  "call above; the mistake is an earlier call that freed, "
		  "reused or initialised the timer's memory while the service "
		  "held it, which no call of the library sees. The program "
		  "under valgrind, or built with -fsanitize=address, names "
		  "that call)\n");
}

int tw__debug_einval(const char *call, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "timingwheel: %s: TW_EINVAL: ", call);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return TW_EINVAL;
}

/* Under table_mu. */
static void set_locked(enum tw__debug_kind kind, const void *obj, bool tracked,
		       uint64_t tag)
{
	struct node **p = tracker_slot_of(kind, obj), *n = *p;

	if (tracked && !n) {
		if (entries >= 2 * chains) {
			grow_locked();
			p = tracker_slot_of(kind, obj);
		}
		n = calloc(1, sizeof(*n));
		if (!n)
			return; /* a debug aid that runs out of memory stays quiet */
		n->obj = obj;
		n->kind = kind;
		n->next = NULL;
		*p = n;
		entries++;
	}
	if (tracked) {
		n->tag = tag;
	} else if (n) {
		*p = n->next;
		free(n);
		entries--;
	}
}

void tw__debug_set(enum tw__debug_kind kind, const void *obj, bool tracked,
		   uint64_t tag)
{
	pthread_mutex_lock(&table_mu);
	set_locked(kind, obj, tracked, tag);
	pthread_mutex_unlock(&table_mu);
}

bool tw__debug_get(enum tw__debug_kind kind, const void *obj, uint64_t *tag)
{
	struct node *n;

	pthread_mutex_lock(&table_mu);
	n = *tracker_slot_of(kind, obj);
	if (n && tag)
		*tag = n->tag;
	pthread_mutex_unlock(&table_mu);
	return n != NULL;
}

void tw__debug_forget(enum tw__debug_kind kind, uint64_t tag)
{
	pthread_mutex_lock(&table_mu);
	for (size_t i = 0; i < chains; i++) {
		struct node **p = &tracker_table[i];

		while (*p) {
			struct node *n = *p;

			if (n->kind == kind && n->tag == tag) {
				*p = n->next;
				free(n);
				entries--;
			} else {
				p = &n->next;
			}
		}
	}
	pthread_mutex_unlock(&table_mu);
}

void tw__debug_wheel_enter(const void *wheel, const char *call)
{
	struct node **p, *n;
	uint64_t self = me();

	pthread_mutex_lock(&table_mu);
	p = tracker_slot_of(TW_DBG_WHEEL_USER, wheel);
	n = *p;
	if (n && n->tag != self) {
		pthread_mutex_unlock(&table_mu);
		tw__debug_fail(call, wheel,
			       "this wheel is inside a call on another thread "
			       "(thread #%llu here, #%llu there). A wheel belongs "
			       "to one thread at a time; for timers shared "
			       "between threads use the timer service "
			       "(timingwheel/service.h), or hand the wheel over "
			       "under a lock.",
			       (unsigned long long)self, (unsigned long long)n->tag);
	}
	if (*tracker_slot_of(TW_DBG_WHEEL_OBSERVED, wheel)) {
		pthread_mutex_unlock(&table_mu);
		tw__debug_fail(call, wheel,
			       "called from the wheel's observer, whose on_event "
			       "must not change the wheel (inspect.h): the wheel "
			       "is in the middle of the call that told it. Note "
			       "the event there and make the change after that "
			       "call returns.");
	}
	set_locked(TW_DBG_WHEEL_USER, wheel, true, self);
	n = *tracker_slot_of(TW_DBG_WHEEL_USER, wheel);
	if (n) /* NULL: out of memory, untracked */
		n->depth++;
	pthread_mutex_unlock(&table_mu);
}

void tw__debug_wheel_leave(const void *wheel)
{
	struct node *n;

	pthread_mutex_lock(&table_mu);
	n = *tracker_slot_of(TW_DBG_WHEEL_USER, wheel);
	if (n && n->depth && --n->depth == 0)
		set_locked(TW_DBG_WHEEL_USER, wheel, false, 0);
	pthread_mutex_unlock(&table_mu);
}

#else
/* ISO C forbids an empty translation unit. */
typedef int tw__debug_unused;
#endif
