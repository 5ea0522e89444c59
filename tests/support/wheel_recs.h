/* SPDX-License-Identifier: MIT */
/*
 * The fixtures of the wheel's contract tests (tests/wheel/:
 * add_cancel_reschedule.c, callbacks_and_order.c, windows.c,
 * ends_of_time.c): a rec (a wheel timer with what its firing saw, and an
 * action its callback takes) and the log of the order recs fired in.
 */
#ifndef TW_TEST_WHEEL_RECS_H
#define TW_TEST_WHEEL_RECS_H

#include <limits.h>
#include <string.h>

#include "check.h"

struct rec {
	struct tw_timer timer;
	int id;
	int fires;
	int64_t fired_at;
	void (*action)(struct tw_wheel *w, struct rec *self);
	struct rec *other;
};

static int log_ids[4096];
static int64_t log_at[4096];
static int nlog;

static inline void on_fire(struct tw_wheel *w, struct tw_timer *t)
{
	struct rec *r = tw_container_of(t, struct rec, timer);

	r->fires++;
	r->fired_at = tw_wheel_now(w);
	if (nlog < 4096) {
		log_ids[nlog] = r->id;
		log_at[nlog++] = r->fired_at;
	}
	if (r->action)
		r->action(w, r);
}

static inline void rec_init(struct rec *r, int id)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	tw_timer_init(&r->timer, on_fire);
}

static inline void reset_log(void)
{
	nlog = 0;
}

#endif
