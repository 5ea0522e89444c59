/* SPDX-License-Identifier: MIT */
/*
 * text.c — tw-trace's text renderer: after each command every level, its
 * buckets (a run of empty ones on one line unless --all-buckets) and the
 * bucket queue (in pop order, with pop times),
 * and, as the wheel reports them (its observer), the levels it adds, where
 * it files each task, the buckets it pops and the clocks it moves.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "trace.h"

static void print_bucket_tasks(FILE *out, const struct tw_bucket_info *b)
{
	char when[48];

	for (const struct tw_timer *t = b->first; t; t = tw_bucket_next(t))
		fprintf(out, " %s(%s)", trace_task_name(t),
			trace_task_when(t, when, sizeof(when)));
}

static bool early_cascades(const struct tw_queue_entry *q, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (q[i].pops_at != q[i].expiration)
			return true;
	return false;
}

static bool bucket_is_empty(struct tw_wheel *w, unsigned level, unsigned slot)
{
	struct tw_bucket_info b;

	tw_wheel_bucket_info(w, level, slot, &b);
	return !b.has_expiration && !b.count;
}

/* An empty bucket at slot, and the empty ones right after it: one line for
 * the run (a wheel of 64 mostly empty buckets drew a screen per level),
 * or a line each with --all-buckets, as the seeds' traces do. Returns the
 * run's last slot. */
static unsigned draw_empty_run(struct trace *tr, unsigned level, unsigned slot)
{
	unsigned last = slot;

	if (tr->all_buckets) {
		fprintf(tr->out, "    bucket %u  expiration -1\n", slot);
		return slot;
	}
	while (last + 1 < tr->wheel.size && bucket_is_empty(&tr->wheel, level, last + 1))
		last++;
	if (last == slot)
		fprintf(tr->out, "    bucket %u  expiration -1\n", slot);
	else
		fprintf(tr->out, "    buckets %u-%u  expiration -1 (%u empty)\n", slot,
			last, last - slot + 1);
	return last;
}

void trace_draw(struct trace *tr)
{
	struct tw_wheel *w = &tr->wheel;
	struct tw_bucket_info ready;
	size_t nq, shown;
	struct tw_queue_entry *q;

	for (unsigned level = 1; level <= tw_wheel_levels(w); level++) {
		struct tw_level_info li;

		tw_wheel_level_info(w, level, &li);
		fprintf(tr->out, "  level %u  tick %" PRId64 "  currentTime %" PRId64,
		       level, li.tick, li.current_time);
		if (li.unbounded)
			fprintf(tr->out, "  range [%" PRId64 ", end of time)\n", li.current_time);
		else
			fprintf(tr->out, "  range [%" PRId64 ", %" PRId64 ")\n", li.current_time,
			       li.current_time > INT64_MAX - li.interval
				       ? INT64_MAX
				       : li.current_time + li.interval);
		for (unsigned slot = 0; slot < w->size; slot++) {
			struct tw_bucket_info b;

			tw_wheel_bucket_info(w, level, slot, &b);
			if (!b.has_expiration && !b.count) {
				slot = draw_empty_run(tr, level, slot);
				continue;
			}
			fprintf(tr->out, "    bucket %u  [%" PRId64 ", %" PRId64 ")  expiration %" PRId64,
			       slot, b.expiration, b.end, b.expiration);
			if (b.pops_at != b.expiration)
				fprintf(tr->out, "  pops at %" PRId64 " (early cascade)",
					b.pops_at);
			if (b.draining)
				fprintf(tr->out, "  (draining)");
			if (!b.count)
				fprintf(tr->out, "  (empty)");
			else
				fprintf(tr->out, "  tasks:");
			print_bucket_tasks(tr->out, &b);
			fputc('\n', tr->out);
		}
	}
	tw_wheel_ready_info(w, &ready);
	if (ready.count) {
		fprintf(tr->out, "  ready (fire on the next advance):");
		print_bucket_tasks(tr->out, &ready);
		fputc('\n', tr->out);
	}
	nq = tw_wheel_queue_snapshot(w, NULL, 0);
	q = nq ? calloc(nq, sizeof(*q)) : NULL;
	shown = q ? tw_wheel_queue_snapshot(w, q, nq) : 0;
	fprintf(tr->out, "  queue:");
	if (!shown)
		fprintf(tr->out, " (empty)");
	/* In pop order, each with its pop time: on an early-cascade level
	 * that is a tick before the bucket's range starts (said in brackets). */
	for (size_t i = 0; i < shown && i < nq; i++) {
		fprintf(tr->out, "%s %" PRId64 " L%u#%u", i ? "," : "", q[i].pops_at,
			q[i].level, q[i].slot);
		if (q[i].pops_at != q[i].expiration)
			fprintf(tr->out, " (range starts %" PRId64 ")", q[i].expiration);
	}
	fputc('\n', tr->out);
	if (!tr->told_early && early_cascades(q, shown < nq ? shown : nq)) {
		fprintf(tr->out, "  (the queue is in pop order, with pop times: in exact "
				   "mode a bucket above level 1 pops one of its own ticks "
				   "before its range starts, and its tasks move down a "
				   "share at each advance, so none is late and no advance "
				   "moves them all at once)\n");
		tr->told_early = true;
	}
	free(q);
}

/* Exact mode moves a timer reset to a later time lazily: it stays in its
 * bucket, which expires no later than the new time, and is re-filed then. */
void trace_explain_stay(struct trace *tr, struct task *t)
{
	struct tw_bucket_info b;
	unsigned level, slot;

	if (tw_timer_where(&tr->wheel, &t->timer, &level, &slot) != TW_OK ||
	    level == TW_LEVEL_READY ||
	    tw_wheel_bucket_info(&tr->wheel, level, slot, &b) != TW_OK)
		return;
	if (t->windowed && tw_timer_due(&t->timer) <= b.expiration - tr->wheel.tick) {
		fprintf(tr->out, "  %s (window %" PRId64 "..%" PRId64 ") stays in level %u "
			"bucket %u: it pops at %" PRId64 ", still inside the window\n",
			t->name, t->earliest, t->latest, level, slot, b.pops_at);
		return;
	}
	if (t->windowed && tw_timer_due(&t->timer) <= b.end) {
		/* An exact timer whose own tick the new window holds. */
		fprintf(tr->out, "  %s (due %" PRId64 ") stays in level %u bucket %u [%"
			PRId64 ", %" PRId64 "]: it fires at its own tick, inside the "
			"window ..%" PRId64 "\n", t->name, tw_timer_due(&t->timer),
			level, slot, b.expiration, b.end, t->latest);
		return;
	}
	fprintf(tr->out, "  %s (due %" PRId64 ") stays in level %u bucket %u [%" PRId64
		", %" PRId64 "): exact mode moves a later reset lazily; the bucket "
		"expires before the new due time, and re-files the task then\n",
		t->name, tw_timer_due(&t->timer), level, slot, b.expiration, b.end);
}

/* Narrate the wheel's structural events in text mode. */
void trace_on_event(void *arg, const struct tw_wheel *w,
		     const struct tw_event *ev)
{
	struct trace *tr = arg;
	struct tw_level_info li;
	char when_ready[48];

	(void)w;
	if (!tr->text)
		return;
	switch (ev->kind) {
	case TW_EV_LEVEL_ADDED:
		tw_wheel_level_info(&tr->wheel, ev->level, &li);
		fprintf(tr->out, "  + level %u created: tick %" PRId64 ", currentTime %" PRId64 "\n",
		       ev->level, li.tick, ev->time);
		break;
	case TW_EV_PLACED: {
		const struct task *task = tw_container_of(ev->timer, struct task, timer);
		struct tw_bucket_info b;
		char when[48];

		tr->placed = true;
		trace_task_when(ev->timer, when, sizeof(when));
		if (!task->windowed) {
			fprintf(tr->out, "  %s (due %s) -> level %u bucket %u, expiration %" PRId64 "\n",
			       task->name, when, ev->level, ev->slot, ev->time);
			break;
		}
		/* In a bucket whose range starts after earliest: it fires when
		 * the bucket pops, and is never moved down. */
		tw_wheel_bucket_info(&tr->wheel, ev->level, ev->slot, &b);
		if (tw_timer_due(ev->timer) <= ev->time - tr->wheel.tick)
			fprintf(tr->out, "  %s (window %s) -> level %u bucket %u, pops at %" PRId64
				": fires then, never moved\n",
				task->name, when, ev->level, ev->slot, b.pops_at);
		else
			fprintf(tr->out, "  %s (window %s) -> exact, at its aligned tick %" PRId64
				": level %u bucket %u, expiration %" PRId64 "\n",
				task->name, when, tw_timer_due(ev->timer), ev->level,
				ev->slot, ev->time);
		break;
	}
	case TW_EV_READY:
		tr->placed = true;
		fprintf(tr->out, "  %s (due %s) is due: ready\n", trace_task_name(ev->timer),
		       trace_task_when(ev->timer, when_ready, sizeof(when_ready)));
		break;
	case TW_EV_POPPED: {
		struct tw_bucket_info b;

		tw_wheel_bucket_info(&tr->wheel, ev->level, ev->slot, &b);
		if (b.expiration == ev->time)
			fprintf(tr->out, "  pop level %u bucket %u (expiration %" PRId64 ")\n",
				ev->level, ev->slot, ev->time);
		else /* exact mode's early cascade */
			fprintf(tr->out, "  pop level %u bucket %u at %" PRId64
				" (early cascade: one level-%u tick before its range [%" PRId64
				", %" PRId64 ") starts)\n",
				ev->level, ev->slot, ev->time, ev->level, b.expiration, b.end);
		break;
	}
	case TW_EV_CLOCK:
		fprintf(tr->out, "  level %u clock -> %" PRId64 "\n", ev->level, ev->time);
		break;
	case TW_EV_FIRED:
		break; /* printed by the task's callback */
	}
}

/* A step's header line, then (draw) the wheel after it. */
static void text_step(struct trace *tr, const char *title)
{
	fprintf(tr->out, "%s\n", title);
}

const struct trace_renderer trace_text_renderer = {
	.step = text_step,
	.draw = trace_draw,
	.stayed = trace_explain_stay,
};
