/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a byte-driven sequence of wheel operations, checked
 * after every step by the invariant checker and against a model that knows
 * only each timer's due time.
 *
 * The model's rule, per timer, with T(due) the tick it belongs to
 * (exact mode: ceil(due / tick) * tick, or INT64_MAX where that is past
 * the end of int64; kafka mode: floor):
 *   - it may fire only when it is pending in the model (so never twice per
 *     add, never after a cancel), and only from an advance to now >= due
 *     (exact) or now >= T(due) (kafka);
 *   - once an advance reaches now >= T(due), it must have fired, unless a
 *     callback of that same advance added it (then the next advance).
 * In exact mode some timers are windows [earliest, latest]
 * (tw_wheel_add_range): never before earliest, fired once an advance
 * reaches T(latest). The clock starts near 1e6 or near the end of int64
 * time, where due times and windows saturate at INT64_MAX.
 * Callbacks add, cancel and reschedule other timers (or themselves), as
 * the input says. Bad calls (add of a pending timer, advance backwards)
 * must fail with their error and change nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "timingwheel/timingwheel.h"
#include "fuzz_input.h"

#define NTIMERS 24

struct ftimer {
	struct tw_timer timer;
	int id;
	/* what its callback does */
	uint8_t action, target;
	int64_t delta;
};

struct model {
	bool pending;
	int64_t due;
	int64_t latest; /* a window's; due for a plain timer */
	uint64_t epoch; /* the advance during which it was added */
};

static struct tw_wheel wheel;
static struct ftimer timers[NTIMERS];
static struct model model[NTIMERS];
static size_t model_count;
static int64_t tick;
static bool kafka;
static uint64_t epoch; /* advances so far; callbacks see the current one */
static bool in_advance;

/* A due-time offset: mostly near, sometimes far (higher levels). */
static int64_t take_delta(struct input *in)
{
	unsigned a = take(in), b = take(in);
	int64_t v = (int64_t)(a << 8 | b);

	switch (a >> 6) {
	case 0: return v % 64 - 8;              /* around now, some in the past */
	case 1: return v * tick / 4;            /* within a few levels */
	case 2: return (int64_t)b << (a & 31);  /* far */
	default: return a & 32 ? INT64_MAX : v; /* the end of time, or near */
	}
}

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The tick a due time fires at in this mode (an exact one past the end
 * of int64 time: at INT64_MAX, the advance that reaches it fires it). */
static int64_t fire_tick(int64_t due)
{
	int64_t f = floor_div(due, tick) * tick;

	if (kafka || f == due)
		return f;
	return f > INT64_MAX - tick ? INT64_MAX : f + tick;
}

static void model_add_window(int i, int64_t due, int64_t latest)
{
	model[i].pending = true;
	model[i].due = due;
	model[i].latest = latest;
	model[i].epoch = epoch;
	model_count++;
}

static void model_remove(int i)
{
	model[i].pending = false;
	model_count--;
}

static void model_add(int i, int64_t due)
{
	model_add_window(i, due, due);
}

/* now + delta, saturated (deltas are never below INT64_MIN / 2). */
static int64_t clamp_due(int64_t now, int64_t delta)
{
	return delta > 0 && now > INT64_MAX - delta ? INT64_MAX : now + delta;
}

static void do_add(int i, int64_t delta)
{
	int64_t due = clamp_due(tw_wheel_now(&wheel), delta);
	int rc = tw_wheel_add(&wheel, &timers[i].timer, due);

	if (model[i].pending) {
		if (rc != TW_EBUSY)
			abort();
		return;
	}
	if (rc != 0)
		abort();
	model_add(i, due);
}

static void do_cancel(int i)
{
	int rc = tw_wheel_cancel(&wheel, &timers[i].timer);

	if (rc != (model[i].pending ? 1 : 0))
		abort();
	if (model[i].pending)
		model_remove(i);
}

static void do_reschedule(int i, int64_t delta)
{
	int64_t due = clamp_due(tw_wheel_now(&wheel), delta);
	int rc = tw_wheel_reschedule(&wheel, &timers[i].timer, due);

	if (rc != (model[i].pending ? 1 : 0))
		abort();
	if (model[i].pending)
		model_remove(i);
	model_add(i, due);
}

/* A window from now + delta, width wide (saturated); reschedule or add.
 * Kafka mode has none: refused, nothing changes. */
static void do_window(int i, int64_t delta, int64_t width, bool reschedule)
{
	int64_t due = clamp_due(tw_wheel_now(&wheel), delta);
	int64_t latest = clamp_due(due, width < 0 ? -width : width), kept;
	bool was = model[i].pending;
	int rc = reschedule ? tw_wheel_reschedule_range(&wheel, &timers[i].timer, due, latest)
			    : tw_wheel_add_range(&wheel, &timers[i].timer, due, latest);

	if (kafka) {
		if (rc != TW_EINVAL || tw_timer_pending(&timers[i].timer) != was)
			abort();
		return;
	}
	if (!reschedule && was) {
		if (rc != TW_EBUSY)
			abort();
		return;
	}
	if (rc != (was ? 1 : 0))
		abort();
	if (was)
		model_remove(i);
	kept = tw_timer_due(&timers[i].timer);
	if (kept != due) {
		/* An exact timer whose tick is inside the new window stays
		 * with its own due time, and a window no coarse bucket holds
		 * is filed at its aligned tick: either fires there. */
		if (kept < due || fire_tick(kept) > fire_tick(latest))
			abort();
		model_add(i, kept);
	} else {
		model_add_window(i, due, latest);
	}
}

static void on_fire(struct tw_wheel *w, struct tw_timer *t)
{
	struct ftimer *ft = tw_container_of(t, struct ftimer, timer);
	int64_t now = tw_wheel_now(w);

	if (!in_advance || !model[ft->id].pending)
		abort(); /* fired twice, after a cancel, or outside advance */
	if (now < (kafka ? fire_tick(model[ft->id].due) : model[ft->id].due))
		abort(); /* early */
	if (tw_timer_pending(t))
		abort();
	model_remove(ft->id);
	switch (ft->action % 7) {
	case 1: do_add(ft->target % NTIMERS, ft->delta); break;
	case 2: do_cancel(ft->target % NTIMERS); break;
	case 3: do_reschedule(ft->target % NTIMERS, ft->delta); break;
	case 4: do_add(ft->id, ft->delta); break; /* re-arm itself */
	case 5: do_window(ft->target % NTIMERS, ft->delta, ft->delta >> 2, true); break;
	case 6: do_window(ft->id, ft->delta, ft->delta, false); break;
	default: break;
	}
}

static void check_wheel(void)
{
	if (tw_wheel_check(&wheel, NULL, 0) != TW_OK)
		abort();
	if (tw_wheel_count(&wheel) != model_count)
		abort();
}

static void do_advance(int64_t delta)
{
	int64_t now = clamp_due(tw_wheel_now(&wheel), delta < 0 ? -delta : delta);

	epoch++;
	in_advance = true;
	if (tw_wheel_advance(&wheel, now) < 0)
		abort();
	in_advance = false;
	for (int i = 0; i < NTIMERS; i++)
		if (model[i].pending && model[i].epoch < epoch &&
		    fire_tick(model[i].latest) <= now)
			abort(); /* missed */
}

static void hand_back(struct tw_wheel *w, struct tw_timer *t)
{
	struct ftimer *ft = tw_container_of(t, struct ftimer, timer);

	(void)w;
	if (!model[ft->id].pending)
		abort();
	model_remove(ft->id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	unsigned size_byte = take(&in), mode_byte = take(&in);
	unsigned start_byte = take(&in);
	int64_t start;
	int64_t when;

	tick = 1 + take(&in) % 100;
	kafka = mode_byte & 1;
	/* A quarter of the inputs start a power of two (any level's reach,
	 * in exact mode) ticks before the end of time, give or take some. */
	if ((mode_byte & 6) == 6) {
		unsigned shift = (start_byte & 63) % (tick > 1 ? 56 : 63);
		int64_t d = (tick << shift) - ((int64_t)(mode_byte >> 3) - 16) * tick;

		start = INT64_MAX - (d < 0 ? 0 : d);
	} else {
		start = 1000000 + (int64_t)start_byte * 977;
	}
	if (tw_wheel_init(&wheel, tick, 2 + size_byte % 30, start,
			  kafka ? TW_MODE_KAFKA : TW_MODE_EXACT))
		abort();
	memset(model, 0, sizeof(model));
	model_count = 0;
	epoch = 0;
	for (int i = 0; i < NTIMERS; i++) {
		tw_timer_init(&timers[i].timer, on_fire);
		timers[i].id = i;
		timers[i].action = 0;
	}

	while (in.n) {
		unsigned op = take(&in), i = take(&in) % NTIMERS;

		switch (op % 11) {
		case 0: do_add((int)i, take_delta(&in)); break;
		case 1: do_cancel((int)i); break;
		case 2: do_reschedule((int)i, take_delta(&in)); break;
		case 3: case 4: do_advance(take_delta(&in)); break;
		case 5: /* what i's callback will do */
			timers[i].action = (uint8_t)take(&in);
			timers[i].target = (uint8_t)take(&in);
			timers[i].delta = take_delta(&in);
			break;
		case 6: /* the clock may not go back; nothing changes */
			if (tw_wheel_advance(&wheel, tw_wheel_now(&wheel) - 1 - (int64_t)i) !=
			    TW_ERANGE)
				abort();
			break;
		case 7: /* the next expiry is never after a pending timer's tick */
			if (tw_wheel_next_expiry(&wheel, &when)) {
				for (int k = 0; k < NTIMERS; k++) {
					int64_t due_at = fire_tick(model[k].latest);

					if (due_at < tw_wheel_now(&wheel))
						due_at = tw_wheel_now(&wheel);
					if (model[k].pending && when > due_at)
						abort();
				}
			} else if (model_count) {
				abort();
			}
			break;
		case 9: do_window((int)i, take_delta(&in), take_delta(&in), false); break;
		case 10: do_window((int)i, take_delta(&in), take_delta(&in), true); break;
		default: /* a timer of another wheel is refused, and nothing changes */
			if (model[i].pending) {
				struct tw_wheel other;

				if (tw_wheel_init(&other, 1, 8, 0, TW_MODE_EXACT))
					abort();
				if (tw_wheel_cancel(&other, &timers[i].timer) != TW_EOWNER)
					abort();
				tw_wheel_destroy(&other);
			}
			break;
		}
		check_wheel();
	}
	if (tw_wheel_drain(&wheel, hand_back) < 0 || model_count)
		abort();
	tw_wheel_destroy(&wheel);
	return 0;
}
