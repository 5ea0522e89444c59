/*
 * States (the timer's, changed by CAS):
 *   IDLE        not pending, not in the wheel
 *   ADDING      a producer is writing the due time (transient)
 *   QUEUED      pending, waiting in an inbox to be (re)placed in the wheel
 *   IN_WHEEL    pending, in the wheel
 *   CANCELLED   not pending, but maybe still linked in the wheel (lazy)
 * A timer is in at most one inbox at a time (in_inbox); the reaper clears
 * in_inbox before it reads the state, and a producer sets the state before
 * it tests in_inbox, so one of them always sees the other (seq_cst).
 */
#define _POSIX_C_SOURCE 200809L

#include "inbox_service.h"

#include <time.h>

enum { IDLE, ADDING, QUEUED, IN_WHEEL, CANCELLED };

static void never_fires(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
}

void inbox_timer_init(struct inbox_timer *t)
{
	tw_timer_init(&t->wt, never_fires);
	atomic_init(&t->state, IDLE);
	atomic_init(&t->due, 0);
	atomic_init(&t->in_inbox, false);
	atomic_init(&t->next, NULL);
}

static void push(struct inbox_service *s, unsigned producer, struct inbox_timer *t)
{
	struct inbox_timer *head = atomic_load(&s->inbox[producer]);

	do
		atomic_store(&t->next, head);
	while (!atomic_compare_exchange_weak(&s->inbox[producer], &head, t));
}

int inbox_add(struct inbox_service *s, unsigned producer, struct inbox_timer *t,
	      int64_t due)
{
	for (;;) {
		int st = atomic_load(&t->state);

		if (st == QUEUED || st == IN_WHEEL)
			return -1;
		if (st == ADDING)
			continue;
		if (atomic_compare_exchange_weak(&t->state, &st, ADDING))
			break;
	}
	atomic_store(&t->due, due);
	atomic_store(&t->state, QUEUED);
	atomic_fetch_add(&s->submitted, 1);
	if (!atomic_exchange(&t->in_inbox, true))
		push(s, producer, t);
	else
		atomic_fetch_add(&s->applied, 1); /* the queued entry covers it */
	return 0;
}

int inbox_cancel(struct inbox_service *s, unsigned producer,
		 struct inbox_timer *t)
{
	for (;;) {
		int st = atomic_load(&t->state);

		if (st == IDLE || st == CANCELLED)
			return 0;
		if (st == ADDING)
			continue;
		if (!atomic_compare_exchange_weak(&t->state, &st,
						  st == IN_WHEEL ? CANCELLED : IDLE))
			continue;
		/* As Netty's cancelledTimeouts: the reaper unlinks it soon,
		 * so its memory is not held until it would have expired. */
		if (st == IN_WHEEL) {
			atomic_fetch_add(&s->submitted, 1);
			if (!atomic_exchange(&t->in_inbox, true))
				push(s, producer, t);
			else
				atomic_fetch_add(&s->applied, 1);
		}
		return 1;
	}
}

/* Apply one inbox entry on the reaper. */
static void apply(struct inbox_service *s, struct inbox_timer *t)
{
	int st;

	atomic_store(&t->in_inbox, false);
	st = QUEUED;
	if (atomic_compare_exchange_strong(&t->state, &st, IN_WHEEL)) {
		tw_wheel_reschedule(&s->wheel, &t->wt, atomic_load(&t->due));
	} else {
		/* Cancelled meanwhile (or a stale entry): if it is not
		 * pending, it must not stay linked. A new add pushes again. */
		st = atomic_load(&t->state);
		if ((st == IDLE || st == CANCELLED) && tw_timer_pending(&t->wt))
			tw_wheel_cancel(&s->wheel, &t->wt);
	}
	atomic_fetch_add(&s->applied, 1);
}

static void *reaper(void *arg)
{
	struct inbox_service *s = arg;

	while (!atomic_load(&s->stop)) {
		bool any = false;

		for (unsigned i = 0; i < INBOX_MAX_PRODUCERS; i++) {
			struct inbox_timer *t = atomic_exchange(&s->inbox[i], NULL);

			while (t) {
				struct inbox_timer *next = atomic_load(&t->next);

				apply(s, t);
				t = next;
				any = true;
			}
		}
		if (!any) {
			struct timespec ts = { 0, 20000 };

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int inbox_service_init(struct inbox_service *s, int64_t start)
{
	for (unsigned i = 0; i < INBOX_MAX_PRODUCERS; i++)
		atomic_init(&s->inbox[i], NULL);
	atomic_init(&s->submitted, 0);
	atomic_init(&s->applied, 0);
	atomic_init(&s->stop, false);
	if (tw_wheel_init(&s->wheel, 1000000, 20, start, TW_MODE_EXACT))
		return -1;
	return pthread_create(&s->reaper, NULL, reaper, s) ? -1 : 0;
}

void inbox_quiesce(struct inbox_service *s)
{
	struct timespec ts = { 0, 10000 };

	while (atomic_load(&s->applied) < atomic_load(&s->submitted))
		nanosleep(&ts, NULL);
}

void inbox_service_destroy(struct inbox_service *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->reaper, NULL);
	tw_wheel_destroy(&s->wheel);
}
