/* SPDX-License-Identifier: MIT */
/*
 * The invariant checker catches what it claims to catch. tw-trace, the
 * differential test and the fuzzers all rely on tw_wheel_check() to find a
 * broken wheel, so each kind of damage is done here by hand (white-box: this
 * test includes the private headers) and must be reported, with its
 * description; once repaired, the wheel must check clean again.
 */
#include <string.h>

#include "check.h"
#include "../../src/wheel/bucket_queue.h"
#include "../../src/list.h"
#include "../../src/wheel/for_inspect.h"

/* Tick 10, 4 buckets (exact mode: each level 2x the one below), clock at 10:
 * timers at 25 and 37 (level 1), 80 and 500 (higher levels), 5000 (top). */
#define NT 5
static const int64_t dues[NT] = { 25, 37, 80, 500, 5000 };

struct fixture {
	struct tw_wheel w;
	struct tw_timer t[NT + 1]; /* the last one: a ready timer, if asked */
};

static void noop(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
}

static void setup_mode(struct fixture *f, enum tw_mode mode)
{
	memset(f, 0, sizeof(*f));
	CHECK_EQ(tw_wheel_init(&f->w, 10, 4, 0, mode), 0);
	for (int i = 0; i <= NT; i++)
		tw_timer_init(&f->t[i], noop);
	CHECK_EQ(tw_wheel_advance(&f->w, 10), 0);
	for (int i = 0; i < NT; i++)
		CHECK_EQ(tw_wheel_add(&f->w, &f->t[i], dues[i]), 0);
	CHECK(tw_wheel_levels(&f->w) >= 3);
	CHECK_WHEEL(&f->w);
}

static void setup(struct fixture *f)
{
	setup_mode(f, TW_MODE_EXACT);
}

static void teardown(struct fixture *f)
{
	CHECK_WHEEL(&f->w); /* every case repairs what it broke */
	tw_wheel_destroy(&f->w);
}

#define EXPECT_BROKEN(w, needle)                                              \
	do {                                                                  \
		char why_[256] = "";                                          \
		int rc_ = tw_wheel_check((w), why_, sizeof(why_));            \
		if (rc_ != TW_ECORRUPT || !strstr(why_, (needle))) {          \
			fprintf(stderr, "%s:%d: expected \"%s\", got %d \"%s\"\n", \
				__FILE__, __LINE__, (needle), rc_, why_);     \
			check_failures++;                                     \
		}                                                             \
	} while (0)

static void test_wheel_level_damage(void)
{
	struct fixture f;
	uint32_t n;

	EXPECT_BROKEN(NULL, "not initialised");
	/* Bytes that never were a wheel: named so, not taken for a wheel
	 * checked from its own callback (a non-zero advancing). */
	memset(&f.w, 0xab, sizeof(f.w));
	EXPECT_BROKEN(&f.w, "not initialised");
	setup(&f);
#ifdef TW_DEBUG
	/* The checked build's running count, held to the buckets' sum (a
	 * release build keeps none: tw_wheel_count() is that sum). */
	f.w.count++;
	EXPECT_BROKEN(&f.w, "count 6 but 5 timers");
	f.w.count--;
#endif
	f.w.advancing = 1;
	EXPECT_BROKEN(&f.w, "inside a callback");
	CHECK_EQ(tw_wheel_check(&f.w, NULL, 0), TW_ECORRUPT); /* no description */
	f.w.advancing = 0;
	n = f.w.nlevels;
	f.w.nlevels = 0;
	EXPECT_BROKEN(&f.w, "0 levels of at most");
	f.w.nlevels = f.w.max_levels + 1;
	EXPECT_BROKEN(&f.w, "levels of at most");
	f.w.nlevels = n;
	f.w.ndraining++;
	EXPECT_BROKEN(&f.w, "levels draining");
	f.w.ndraining--;
	f.w.levels[1].clock++;
	EXPECT_BROKEN(&f.w, "L2 clock disagrees with L1");
	f.w.levels[1].clock--;
	/* Clock 1 -> 0 leaves level 2's clock (floor / 2) as it was. */
	f.w.levels[0].clock--;
	EXPECT_BROKEN(&f.w, "L1 clock 0 behind now 10");
	f.w.levels[0].clock++;
	teardown(&f);
}

/* Kafka mode's bucket queue is Kafka's heap. */
static void test_queue_damage(void)
{
	struct fixture f;
	struct tw_bucket *root, *child;

	setup_mode(&f, TW_MODE_KAFKA);
	CHECK(f.w.queue_len >= 2);
	root = f.w.queue[0];
	tw__queue_place(&f.w, root)->index = 99;
	EXPECT_BROKEN(&f.w, "queue entry 0 inconsistent");
	tw__queue_place(&f.w, root)->index = 0;

	/* Swap the root with its first child: no longer a heap. */
	child = f.w.queue[1];
	f.w.queue[0] = child, tw__queue_place(&f.w, child)->index = 0;
	f.w.queue[1] = root, tw__queue_place(&f.w, root)->index = 1;
	EXPECT_BROKEN(&f.w, "queue is not a heap at 1");
	f.w.queue[0] = root, tw__queue_place(&f.w, root)->index = 0;
	f.w.queue[1] = child, tw__queue_place(&f.w, child)->index = 1;

	/* Earlier than it should pop (the heap itself stays valid). */
	root->pop_at--;
	EXPECT_BROKEN(&f.w, "queued under the wrong time");
	root->pop_at++;

	root->draining = true;
	EXPECT_BROKEN(&f.w, "draining state inconsistent");
	root->draining = false;
	teardown(&f);
}

/* Exact mode's queue is one occupancy word per level, a smallest key per
 * bucket and a bound on when anything above level 1 pops. */
static void test_occupancy_damage(void)
{
	struct fixture f;
	struct tw_level *lv = NULL;
	struct tw_bucket *b = NULL, *empty = NULL;
	uint32_t s;

	setup(&f);
	CHECK(f.w.queue == NULL);
	/* A queued bucket above level 1, and an empty one beside it. */
	for (uint32_t l = 1; l < f.w.nlevels && !(b && empty); l++) {
		lv = &f.w.levels[l];
		b = empty = NULL;
		for (s = 0; s < f.w.size; s++) {
			if (lv->slots[s].count && !lv->slots[s].draining && !b)
				b = &lv->slots[s];
			if (!lv->slots[s].count && !empty)
				empty = &lv->slots[s];
		}
	}
	CHECK(b != NULL && empty != NULL && lv != NULL);
	if (!b || !empty || !lv)
		return;

	lv->occupied[0] &= ~((uint64_t)1 << b->slot);
	EXPECT_BROKEN(&f.w, "has expiration 1 but queued 0");
	lv->occupied[0] |= (uint64_t)1 << b->slot;

	lv->occupied[0] |= (uint64_t)1 << empty->slot;
	EXPECT_BROKEN(&f.w, "has expiration 0 but queued 1");
	lv->occupied[0] &= ~((uint64_t)1 << empty->slot);

	b->min_key += 1000;
	EXPECT_BROKEN(&f.w, "smallest key");
	b->min_key -= 1000;

	f.w.upper_pop = b->pop_at + 1;
	EXPECT_BROKEN(&f.w, "before upper_pop");
	f.w.upper_pop = INT64_MIN;

	f.w.queue_len = 1;
	EXPECT_BROKEN(&f.w, "exact mode with a bucket heap");
	f.w.queue_len = 0;
	f.w.queue = (struct tw_bucket **)&b; /* never read: only its presence */
	EXPECT_BROKEN(&f.w, "exact mode with a bucket heap");
	f.w.queue = NULL;

	b->slot++;
	EXPECT_BROKEN(&f.w, "belongs to another wheel or place");
	b->slot--;
	b->level++;
	EXPECT_BROKEN(&f.w, "belongs to another wheel or place");
	b->level--;
	teardown(&f);
}

/* Kafka mode sets no occupancy bit, and queue order stays the heap's. */
static void test_kafka_occupancy_damage(void)
{
	struct fixture f;
	struct tw_bucket *b;

	setup_mode(&f, TW_MODE_KAFKA);
	b = f.w.queue[0];
	f.w.levels[b->level - 1].occupied[0] |= (uint64_t)1 << b->slot;
	EXPECT_BROKEN(&f.w, "occupancy bit 1 but queued 1");
	f.w.levels[b->level - 1].occupied[0] = 0;
	tw__queue_place(&f.w, b)->seq = f.w.queue_seq + 1;
	EXPECT_BROKEN(&f.w, "occupancy bit 0 but queued 1");
	tw__queue_place(&f.w, b)->seq = 0;
	teardown(&f);
}

/* Exact mode's queue, as the inspector shows it, is the order advance
 * pops: by pop time, and at a tie a level above level 1 first. */
static void test_exact_queue_snapshot_order(void)
{
	struct tw_wheel w;
	struct tw_timer a, b, c;
	struct tw_queue_entry q[4];

	CHECK_EQ(tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT), 0);
	tw_timer_init(&a, noop);
	tw_timer_init(&b, noop);
	tw_timer_init(&c, noop);
	CHECK_EQ(tw_wheel_add(&w, &a, 32), 0);  /* level 1, pops at 32 */
	CHECK_EQ(tw_wheel_add(&w, &b, 70), 0);  /* level 2 [64, 96), pops at 32 */
	CHECK_EQ(tw_wheel_add(&w, &c, 40), 0);  /* level 1, pops at 40 */
	CHECK_EQ(tw_wheel_queue_snapshot(&w, q, 4), 3);
	CHECK_EQ(q[0].level, 2);
	CHECK_EQ(q[0].pops_at, 32);
	CHECK_EQ(q[0].expiration, 64);
	CHECK_EQ(q[1].level, 1);
	CHECK_EQ(q[1].pops_at, 32);
	CHECK_EQ(q[2].level, 1);
	CHECK_EQ(q[2].pops_at, 40);
	CHECK_EQ(tw_wheel_queue_snapshot(&w, NULL, 0), 3);
	CHECK_EQ(tw_wheel_advance(&w, 40), 2);
	CHECK_EQ(tw_wheel_queue_snapshot(&w, q, 4), 1);
	CHECK_EQ(q[0].level, 1); /* b moved down, to level 1 [70, 71) */
	CHECK_EQ(q[0].pops_at, 70);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

/* The snapshot's first max entries are the queue's first max, whatever
 * max is: each shorter snapshot is the start of the whole one, which is
 * in pop order (exact mode: pop time, at a tie a level above level 1
 * first, lower first; kafka mode: pop time, at a tie first queued). */
static void test_queue_snapshot_of_any_length_is_the_queues_start(void)
{
	enum { N = 300, Q = 256 };
	static struct tw_timer t[N];
	static struct tw_queue_entry all[Q], part[Q];

	for (int kafka = 0; kafka < 2; kafka++) {
		struct tw_wheel w;
		uint64_t x = 7;
		size_t n;

		CHECK_EQ(tw_wheel_init(&w, 1, kafka ? 20 : 64, 0,
				       kafka ? TW_MODE_KAFKA : TW_MODE_EXACT), 0);
		for (int i = 0; i < N; i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			tw_timer_init(&t[i], noop);
			CHECK_EQ(tw_wheel_add(&w, &t[i], 1 + (int64_t)(x >> 33) % 500000), 0);
		}
		/* Some popped, some draining. */
		CHECK(tw_wheel_advance(&w, 3000) >= 0);
		n = tw_wheel_queue_snapshot(&w, all, Q);
		CHECK(n > 20 && n <= Q);
		for (size_t i = 1; i < n; i++) {
			CHECK(all[i - 1].pops_at <= all[i].pops_at);
			if (!kafka && all[i - 1].pops_at == all[i].pops_at)
				CHECK(all[i].level == 1 ||
				      (all[i - 1].level != 1 && all[i - 1].level < all[i].level));
		}
		for (size_t max = 1; max <= n + 1; max++) {
			memset(part, 0xab, sizeof part);
			CHECK_EQ(tw_wheel_queue_snapshot(&w, part, max), n);
			for (size_t i = 0; i < max && i < n; i++) {
				CHECK_EQ(part[i].level, all[i].level);
				CHECK_EQ(part[i].slot, all[i].slot);
				CHECK_EQ(part[i].pops_at, all[i].pops_at);
				CHECK_EQ(part[i].expiration, all[i].expiration);
				CHECK_EQ(part[i].count, all[i].count);
			}
			if (max < Q)
				CHECK_EQ(part[max].level, 0xababababu);
		}
		CHECK_WHEEL(&w);
		tw_wheel_destroy(&w);
	}
}

/* Kafka mode keeps wheel_size as given: a level wider than an occupancy
 * word is checked without a load past it (UBSan: shift exponent 64, found
 * by the fuzzer). */
static void test_kafka_wheel_wider_than_a_word_checks_clean(void)
{
	struct tw_wheel w;
	struct tw_timer t[300];

	CHECK_EQ(tw_wheel_init(&w, 1, 100, 0, TW_MODE_KAFKA), 0);
	for (int i = 0; i < 300; i++) {
		tw_timer_init(&t[i], noop);
		CHECK_EQ(tw_wheel_add(&w, &t[i], 1 + i * 37), 0);
	}
	CHECK_WHEEL(&w);
	CHECK_EQ(tw_wheel_advance(&w, 5000), 136);
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void test_ready_list_damage(void)
{
	struct fixture f;
	struct tw_timer *ready = NULL;

	setup(&f);
	ready = &f.t[NT];
	CHECK_EQ(tw_wheel_add(&f.w, ready, 5), 0); /* due: waits in the ready list */
	ready->due = 1000;
	EXPECT_BROKEN(&f.w, "timer due 1000 is ready too soon");
	ready->due = 5;
	f.w.ready_cur ^= 1u;
	EXPECT_BROKEN(&f.w, "timers left in the ready list being run");
	f.w.ready_cur ^= 1u;
	tw__ready_list(&f.w, f.w.ready_cur)->has_expiration = true;
	EXPECT_BROKEN(&f.w, "ready list is queued");
	tw__ready_list(&f.w, f.w.ready_cur)->has_expiration = false;
	CHECK_EQ(tw_wheel_cancel(&f.w, ready), 1);
	teardown(&f);
}

static void test_list_damage(void)
{
	struct fixture f;
	struct tw_timer *t0;
	struct tw_bucket *b;
	struct tw_link *prev;

	setup(&f);
	t0 = &f.t[0];
	b = t0->bucket;
	prev = t0->link.prev;
	t0->link.prev = &f.t[1].link;
	EXPECT_BROKEN(&f.w, "bucket list links broken");
	t0->link.prev = prev;

	t0->bucket = f.t[1].bucket;
	EXPECT_BROKEN(&f.w, "timer due 25 points at another bucket");
	t0->bucket = b;

	b->count++;
	EXPECT_BROKEN(&f.w, "bucket count 2 but 1 timers linked");
	b->count--;

	b->wheel = NULL;
	EXPECT_BROKEN(&f.w, "belongs to another wheel");
	b->wheel = &f.w;
	teardown(&f);
}

/* A pending timer whose memory was reused (zeroed: calloc, memset, or
 * tw_timer_init on it while pending) leaves NULL links in its list: the
 * checker must say so, not follow them (it crashed). */
static void test_zeroed_pending_timer(void)
{
	struct fixture f;
	struct tw_timer saved;

	setup(&f);
	saved = f.t[0];
	memset(&f.t[0], 0, sizeof(f.t[0]));
	EXPECT_BROKEN(&f.w, "bucket list links broken");
	f.t[0].link.next = saved.link.next; /* half repaired: prev still NULL */
	EXPECT_BROKEN(&f.w, "bucket list links broken");
	f.t[0] = saved;
	CHECK_EQ(tw_wheel_check(&f.w, NULL, 0), 0);
	teardown(&f);
}

static void test_timer_placement_damage(void)
{
	struct fixture f;
	struct tw_timer *t0;

	setup(&f);
	t0 = &f.t[0]; /* due 25: level 1, tick 3 */
	t0->due = 5;
	EXPECT_BROKEN(&f.w, "timer due 5 overdue");
	t0->due = 15; /* tick 2, below what its bucket says it holds */
	EXPECT_BROKEN(&f.w, "timer due 15 below L1#3's smallest key");
	/* With the bound lowered too: its bucket (tick 3) expires after
	 * tick 2, so it would fire late. */
	t0->bucket->min_key = 2;
	EXPECT_BROKEN(&f.w, "timer due 15 in the wrong bucket L1#3 (after its tick)");
	t0->bucket->min_key = 3;
	/* Later than its bucket is how exact mode leaves a timer moved
	 * later (stays_put): the bucket re-files it, never early. */
	t0->due = 1000;
	CHECK_WHEEL(&f.w);
	t0->due = 25;
	teardown(&f);
}

static void test_exact_bucket_number_damage(void)
{
	/* Exact mode checks a bucket's own number, since its timers may be
	 * later than it: it must be a live number of its level and slot. */
	struct fixture f;
	struct tw_bucket *b;
	int64_t expiration;

	setup(&f);
	b = f.t[0].bucket; /* level 1, tick 3 */
	expiration = b->expiration;
	/* Lowered, so the bucket queue stays a heap (it is the earliest). */
	b->expiration = b->pop_at = expiration - 2; /* tick 1: the clock's */
	EXPECT_BROKEN(&f.w, "bucket outside L1's range");
	b->expiration = b->pop_at = expiration - 1; /* live, but slot 2's */
	EXPECT_BROKEN(&f.w, "expiration is not its slot's");
	b->expiration = b->pop_at = expiration;
	teardown(&f);
}

/* Kafka mode always moves a rescheduled timer, so there a timer must sit
 * exactly in its own bucket. */
static void test_kafka_placement_damage(void)
{
	struct tw_wheel w;
	struct tw_timer t;

	CHECK_EQ(tw_wheel_init(&w, 10, 4, 0, TW_MODE_KAFKA), 0);
	tw_timer_init(&t, noop);
	CHECK_EQ(tw_wheel_add(&w, &t, 25), 0); /* level 1, tick 2 */
	CHECK_WHEEL(&w);
	t.due = 1000;
	EXPECT_BROKEN(&w, "timer due 1000 outside L1's range");
	t.due = 35;
	EXPECT_BROKEN(&w, "timer due 35 in the wrong bucket");
	t.due = 25;
	CHECK_WHEEL(&w);
	tw_wheel_destroy(&w);
}

static void test_bucket_state_damage(void)
{
	struct fixture f;
	struct tw_timer *t0;
	struct tw_bucket *b, *unused;

	setup(&f);
	t0 = &f.t[0];
	b = t0->bucket;

	/* Exact mode never leaves an empty bucket queued. */
	list_unlink(&t0->link);
	b->count--, f.w.count--;
	t0->bucket = NULL;
	EXPECT_BROKEN(&f.w, "empty bucket queued in exact mode");
	list_append(&b->head, &t0->link);
	b->count++, f.w.count++;
	t0->bucket = b;

	/* Timers in a bucket that will never be popped (exact mode queues
	 * a bucket by its level's occupancy bit). */
	f.w.levels[b->level - 1].occupied[0] &= ~((uint64_t)1 << b->slot);
	b->has_expiration = false;
	EXPECT_BROKEN(&f.w, "timers but no expiration");
	b->has_expiration = true;
	f.w.levels[b->level - 1].occupied[0] |= (uint64_t)1 << b->slot;
	CHECK_WHEEL(&f.w);

	/* A bucket of a level that does not exist yet, queued. */
	CHECK(f.w.nlevels < f.w.max_levels);
	unused = &f.w.levels[f.w.max_levels - 1].slots[0];
	unused->has_expiration = true;
	unused->expiration = unused->pop_at = INT64_MAX;
	f.w.levels[f.w.max_levels - 1].occupied[0] |= 1;
	EXPECT_BROKEN(&f.w, "used before its level exists");
	f.w.levels[f.w.max_levels - 1].occupied[0] &= ~(uint64_t)1;
	unused->has_expiration = false;
	teardown(&f);
}

/* The saturating arithmetic the wheel and the checker compute spans and
 * times with: exact where the result fits, clamped to the int64 range
 * where it does not, a span past INT64_MAX included (the top levels). */
static void test_saturating_arithmetic(void)
{
	struct tw_wheel w = { .tick = 1000 };
	const uint64_t half = (uint64_t)1 << 63; /* INT64_MAX + 1 */

	CHECK_EQ(tw__mul_sat(0, 5), 0);
	CHECK_EQ(tw__mul_sat(7, 0), 0);
	CHECK_EQ(tw__mul_sat(-3, 4), -12);
	CHECK_EQ(tw__mul_sat(3, (uint64_t)INT64_MAX), INT64_MAX);
	CHECK_EQ(tw__mul_sat(1, half), INT64_MAX);
	CHECK_EQ(tw__mul_sat(-1, half), INT64_MIN);   /* exactly -2^63 */
	CHECK_EQ(tw__mul_sat(-2, half), INT64_MIN);
	CHECK_EQ(tw__mul_sat(-4, 3000000000000000000ULL), INT64_MIN);
	CHECK_EQ(tw__mul_sat(-2, (uint64_t)1 << 62), INT64_MIN); /* fits */
	CHECK_EQ(tw__span_div(-5, half), -1);
	CHECK_EQ(tw__span_div(5, half), 0);
	CHECK_EQ(tw__span_div(-5, 2), -3);
	CHECK_EQ(tw__ceil_div(-5, 2), -2);
	CHECK_EQ(tw__ceil_div(5, 2), 3);
	CHECK_EQ(tw__floor_div(-5, 2), -3);
	CHECK_EQ(tw__ticks_to_time(&w, INT64_MAX / 999), INT64_MAX);
	CHECK_EQ(tw__ticks_to_time(&w, INT64_MIN / 999), INT64_MIN);
	CHECK_EQ(tw__ticks_to_time(&w, -7), -7000);
}

int main(void)
{
	RUN(test_saturating_arithmetic);
	RUN(test_wheel_level_damage);
	RUN(test_queue_damage);
	RUN(test_occupancy_damage);
	RUN(test_kafka_occupancy_damage);
	RUN(test_exact_queue_snapshot_order);
	RUN(test_queue_snapshot_of_any_length_is_the_queues_start);
	RUN(test_kafka_wheel_wider_than_a_word_checks_clean);
	RUN(test_ready_list_damage);
	RUN(test_list_damage);
	RUN(test_zeroed_pending_timer);
	RUN(test_timer_placement_damage);
	RUN(test_kafka_placement_damage);
	RUN(test_exact_bucket_number_damage);
	RUN(test_bucket_state_damage);
	return check_report();
}
