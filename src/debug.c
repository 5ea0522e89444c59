/* SPDX-License-Identifier: MIT */
/*
 * debug.c — the debug build's object tracker (debug.h says what it is
 * for). One table for the whole process: a chained hash of (kind, address)
 * under one mutex. Slow, and meant to be: it is built only with
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

#define TABLE_SIZE 4096 /* chains: a debug run holds thousands, not millions */

struct node {
	struct node *next;
	const void *obj;
	enum tw__debug_kind kind;
	uint64_t tag;
	unsigned depth; /* a wheel's nested calls on one thread */
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct node *table[TABLE_SIZE];
static atomic_ulong threads_seen;
static _Thread_local uint64_t thread_id; /* 0: not yet numbered */

static uint64_t me(void)
{
	if (!thread_id)
		thread_id = atomic_fetch_add(&threads_seen, 1) + 1;
	return thread_id;
}

static struct node **slot_of(enum tw__debug_kind kind, const void *obj)
{
	uintptr_t h = (uintptr_t)obj * 0x9E3779B97F4A7C15ull + (uintptr_t)kind;
	struct node **p = &table[(h >> 20) % TABLE_SIZE];

	while (*p && ((*p)->obj != obj || (*p)->kind != kind))
		p = &(*p)->next;
	return p;
}

void tw__debug_fail(const char *call, const void *obj, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "timingwheel: %s(%p): ", call, obj);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(timingwheel's debug build, TW_DEBUG, stops at the call that "
	      "made the mistake)\n", stderr);
	fflush(stderr);
	abort();
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
	struct node **p = slot_of(kind, obj), *n = *p;

	if (tracked && !n) {
		n = calloc(1, sizeof(*n));
		if (!n)
			return; /* a debug aid that runs out of memory stays quiet */
		n->obj = obj;
		n->kind = kind;
		n->next = NULL;
		*p = n;
	}
	if (tracked) {
		n->tag = tag;
	} else if (n) {
		*p = n->next;
		free(n);
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
	n = *slot_of(kind, obj);
	if (n && tag)
		*tag = n->tag;
	pthread_mutex_unlock(&table_mu);
	return n != NULL;
}

void tw__debug_forget(enum tw__debug_kind kind, uint64_t tag)
{
	pthread_mutex_lock(&table_mu);
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		struct node **p = &table[i];

		while (*p) {
			struct node *n = *p;

			if (n->kind == kind && n->tag == tag) {
				*p = n->next;
				free(n);
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
	p = slot_of(TW_DBG_WHEEL_USER, wheel);
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
	set_locked(TW_DBG_WHEEL_USER, wheel, true, self);
	n = *slot_of(TW_DBG_WHEEL_USER, wheel);
	if (n) /* NULL: out of memory, untracked */
		n->depth++;
	pthread_mutex_unlock(&table_mu);
}

void tw__debug_wheel_leave(const void *wheel)
{
	struct node *n;

	pthread_mutex_lock(&table_mu);
	n = *slot_of(TW_DBG_WHEEL_USER, wheel);
	if (n && n->depth && --n->depth == 0)
		set_locked(TW_DBG_WHEEL_USER, wheel, false, 0);
	pthread_mutex_unlock(&table_mu);
}

#else
/* ISO C forbids an empty translation unit. */
typedef int tw__debug_unused;
#endif
