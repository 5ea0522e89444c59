/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a byte-driven sequence of purgatory operations on a
 * virtual clock (manual service, callbacks on this thread): watch an
 * operation on 1..3 keys, make a key's condition true and check it, move the
 * clock and expire, cancel_for_key, purge, recycle an operation's memory.
 *
 * Checked after every step and at the end: each operation ends exactly once
 * -- by its condition (on_complete), by its timeout (on_complete then
 * on_expiration, never before its timeout) or handed back by cancel_for_key
 * or shutdown (no callback) -- and the purgatory releases it exactly once
 * (on_release), after which its memory is reused at once, so that a stale
 * reference is a use-after-free that ASan reports. The counters
 * (watched, delayed) agree with the model. Some ops have a tolerance (their
 * timeout is a window, up to the end of time), and some inputs start the
 * clock near the end of int64 time, a power of two before it (any level's
 * reach), where timeouts and windows saturate at INT64_MAX; a timeout
 * whose window has passed by a poll has fired.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "timingwheel/timingwheel.h"
#include "fuzz_input.h"

#define NOPS 12
#define NKEYS 5

enum slot_state { FREE, WAITING, ENDED };

struct fop {
	struct tw_delayed_op base;
	struct tw_watch watches[3];
	enum slot_state state;
	unsigned keys[3], nkeys;
	unsigned need;          /* completes when the keys' levels sum >= need */
	int64_t armed_at, tolerance;
	int completes, expirations, handed_back, releases;
};

static struct fop ops[NOPS];
static unsigned level[NKEYS];
static char keys[NKEYS][TW_KEY_MAX];
static size_t key_len[NKEYS] = { 1, 2, 7, 64, TW_KEY_MAX };
static int64_t vclock;
static struct tw_purgatory *purg;

static int64_t sat_add(int64_t a, int64_t b)
{
	return b > 0 && a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int64_t virtual_now(void *arg)
{
	(void)arg;
	return vclock;
}

static struct fop *fop_of(struct tw_delayed_op *op)
{
	return tw_container_of(op, struct fop, base);
}

static bool condition(struct tw_delayed_op *op)
{
	struct fop *f = fop_of(op);
	unsigned sum = 0;

	for (unsigned i = 0; i < f->nkeys; i++)
		sum += level[f->keys[i]];
	return sum >= f->need && tw_op_force_complete(op);
}

static void on_complete(struct tw_delayed_op *op)
{
	struct fop *f = fop_of(op);

	if (f->state != WAITING || f->completes || f->handed_back)
		abort();
	f->completes++;
}

static void on_expiration(struct tw_delayed_op *op)
{
	struct fop *f = fop_of(op);

	if (f->completes != 1 || f->expirations)
		abort();
	if (vclock < sat_add(f->armed_at, op->timeout))
		abort(); /* early */
	f->expirations++;
}

static void on_release(struct tw_delayed_op *op)
{
	struct fop *f = fop_of(op);

	if (f->releases++)
		abort();
}

static const struct tw_op_ops fuzz_ops = { condition, on_complete, on_expiration,
					   on_release, NULL };

static void hand_back(struct tw_delayed_op *op)
{
	struct fop *f = fop_of(op);

	if (f->completes || f->handed_back++)
		abort();
}

/* An op that ended (or was handed back) and was released: check its story
 * and scribble over its memory before it is used again. */
static void recycle(struct fop *f)
{
	int endings = f->completes + f->handed_back;

	if (endings != 1 || f->releases != 1)
		abort();
	tw_op_destroy(&f->base);
	memset(f, 0x5a, sizeof(*f));
	f->state = FREE;
}

static void update_states(void)
{
	for (int i = 0; i < NOPS; i++)
		if (ops[i].state == WAITING && (ops[i].completes || ops[i].handed_back))
			ops[i].state = ENDED;
}

static void check_counts(void)
{
	size_t waiting = 0;

	update_states();
	for (int i = 0; i < NOPS; i++)
		waiting += ops[i].state == WAITING;
	if (tw_purgatory_delayed(purg) != waiting)
		abort();
}

static void start_op(struct fop *f, struct input *in)
{
	const void *kp[3];
	size_t kl[3];
	unsigned t;
	int rc;

	memset(f, 0, sizeof(*f));
	if (tw_op_init(&f->base, 1 + take(in) % 50, &fuzz_ops, NULL))
		abort();
	t = take(in);
	/* A window: a few units, or up to the end of time. */
	f->tolerance = !(t & 1) ? 0 : t & 2 ? INT64_MAX : (int64_t)t << (t & 31);
	if (tw_op_set_tolerance(&f->base, f->tolerance))
		abort();
	f->nkeys = 1 + take(in) % 3;
	f->need = take(in) % 6;
	for (unsigned i = 0; i < f->nkeys; i++) {
		f->keys[i] = take(in) % NKEYS;
		kp[i] = keys[f->keys[i]];
		kl[i] = key_len[f->keys[i]];
	}
	f->armed_at = vclock;
	f->state = WAITING;
	rc = tw_purgatory_try_complete_else_watch(purg, &f->base, kp, kl, f->nkeys,
						  f->watches);
	if (rc == 1 ? f->completes != 1 : rc != 0 || f->completes != 0)
		abort();
}

/* Every op whose timeout's window the clock has passed has ended (the
 * service's tick is 1, and the poll has run what was due). */
static void check_timeouts(void)
{
	update_states();
	for (int i = 0; i < NOPS; i++)
		if (ops[i].state == WAITING &&
		    sat_add(sat_add(ops[i].armed_at, ops[i].base.timeout), ops[i].tolerance) <
			    vclock)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct tw_purgatory_config cfg = { 0 };
	const void *empty_key = "";

	for (int k = 0; k < NKEYS; k++)
		memset(keys[k], 'a' + k, key_len[k]);
	memset(level, 0, sizeof(level));
	memset(ops, 0, sizeof(ops));
	vclock = 1000;
	{
		unsigned b = take(&in);

		if ((b & 3) == 3)
			vclock = INT64_MAX - ((int64_t)1 << (b >> 2) % 63) +
				 (int64_t)(b >> 2) % 7;
	}
	cfg.service.manual = true;
	cfg.service.tick = 1;
	cfg.service.wheel_size = 2 + take(&in) % 20;
	cfg.service.clock.now = virtual_now;
	cfg.shards = 1 + take(&in) % 4;   /* few shards: keys share them */
	cfg.purge_interval = 1 + take(&in) % 8;
	if (tw_purgatory_create(&purg, &cfg))
		abort();

	while (in.n) {
		unsigned op = take(&in), arg = take(&in);
		struct fop *f = &ops[arg % NOPS];
		int64_t n;

		switch (op % 8) {
		case 0:
		case 1:
			if (f->state == FREE)
				start_op(f, &in);
			break;
		case 2: /* a key's condition moves; checking it completes ops */
			level[arg % NKEYS]++;
			if (tw_purgatory_check_and_complete(purg, keys[arg % NKEYS],
							    key_len[arg % NKEYS]) < 0)
				abort();
			break;
		case 3: /* time passes: a little, or a power of two */
			n = take(&in);
			vclock = sat_add(vclock, n < 200 ? n % 40 : (int64_t)1 << n % 63);
			if (tw_purgatory_poll(purg) < 0)
				abort();
			check_timeouts();
			break;
		case 4:
			n = tw_purgatory_cancel_for_key(purg, keys[arg % NKEYS],
							key_len[arg % NKEYS], hand_back);
			if (n < 0)
				abort();
			break;
		case 5:
			tw_purgatory_purge(purg);
			break;
		case 6: /* reuse the memory of an op the purgatory released */
			update_states();
			if (f->state == ENDED && f->releases)
				recycle(f);
			break;
		default: /* bad keys are refused and change nothing */
			if (tw_purgatory_check_and_complete(purg, empty_key, 0) != TW_EINVAL ||
			    tw_purgatory_check_and_complete(purg, keys[0], TW_KEY_MAX + 1) !=
				    TW_EINVAL ||
			    tw_purgatory_cancel_for_key(purg, NULL, 1, hand_back) != TW_EINVAL)
				abort();
			break;
		}
		check_counts();
	}

	/* Shutdown hands back every op still waiting; then each op must have
	 * ended exactly once and been released. */
	if (tw_purgatory_shutdown(purg, hand_back) < 0)
		abort();
	tw_purgatory_destroy(purg);
	update_states();
	for (int i = 0; i < NOPS; i++)
		if (ops[i].state != FREE)
			recycle(&ops[i]);
	return 0;
}
