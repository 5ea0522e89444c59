/*
 * tw-trace — replay a scenario on a timing wheel with a virtual clock and
 * show what happens, step by step.
 *
 *     tw-trace [--events|--text] SCENARIO
 *
 * Scenario language, one command a line, '#' starts a comment:
 *
 *     wheel tick=1000 size=3 start=1675752020558 mode=kafka  # mode: exact
 *     add NAME DELAY          due = now + DELAY   (add NAME @T: due = T)
 *     reschedule NAME DELAY   (or @T) move a task, pending or not
 *     cancel NAME
 *     advance T               absolute time (advance +D: now + D)
 *     run                     advance bucket by bucket until nothing is pending
 *     check                   run the invariant checker (done after every
 *                             command anyway)
 *
 * --events prints one line per event: "fire NAME at T due D",
 * "cancel NAME ok|no" and "reschedule NAME ok|no" (ok: it was pending).
 * --text (the default) draws every level, bucket and the bucket queue after
 * each command, with the cascades and fires that led there.
 *
 * Exit status: 0, 1 if the wheel's invariant checker fails, 2 for a bad
 * scenario ("file:line: message" on stderr).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timingwheel/timingwheel.h"

#define NAME_MAX_LEN 63

struct task {
	char name[NAME_MAX_LEN + 1];
	struct tw_timer timer;
};

struct trace {
	const char *path;
	unsigned line;
	bool text;
	bool have_wheel;
	struct tw_wheel wheel;
	struct task **tasks;
	size_t ntasks, cap;
	struct tw_observer observer;
};

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

static void die(struct trace *tr, const char *fmt, ...) PRINTF_LIKE(2, 3);

static void die(struct trace *tr, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%u: ", tr->path, tr->line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* Text or events: read by the timer callback, which only gets the wheel. */
static bool text_mode = true;

static const char *task_name(const struct tw_timer *t)
{
	return tw_container_of(t, struct task, timer)->name;
}

static struct task *find_task(struct trace *tr, const char *name)
{
	for (size_t i = 0; i < tr->ntasks; i++)
		if (strcmp(tr->tasks[i]->name, name) == 0)
			return tr->tasks[i];
	return NULL;
}

static struct task *new_task(struct trace *tr, const char *name)
{
	struct task *t;

	if (strlen(name) > NAME_MAX_LEN)
		die(tr, "task name longer than %d characters", NAME_MAX_LEN);
	if (tr->ntasks == tr->cap) {
		size_t cap = tr->cap ? 2 * tr->cap : 16;
		struct task **grown = realloc(tr->tasks, cap * sizeof(*grown));

		if (!grown)
			die(tr, "out of memory");
		tr->tasks = grown;
		tr->cap = cap;
	}
	/* Each task on its own: pending timers are linked by address. */
	t = calloc(1, sizeof(*t));
	if (!t)
		die(tr, "out of memory");
	strcpy(t->name, name);
	tr->tasks[tr->ntasks++] = t;
	return t;
}

/* ---- parsing ---- */

static bool parse_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end)
		return false;
	*out = (int64_t)v;
	return true;
}

static int64_t need_i64(struct trace *tr, const char *s, const char *what)
{
	int64_t v;

	if (!parse_i64(s, &v))
		die(tr, "%s: expected an integer, got '%s'", what, s ? s : "");
	return v;
}

static int64_t add_sat(int64_t a, int64_t b)
{
	if (b > 0 && a > INT64_MAX - b)
		return INT64_MAX;
	if (b < 0 && a < INT64_MIN - b)
		return INT64_MIN;
	return a + b;
}

/* "@T" is absolute, anything else a delay from now. */
static int64_t parse_due(struct trace *tr, const char *s)
{
	if (s && s[0] == '@')
		return need_i64(tr, s + 1, "due time");
	return add_sat(tw_wheel_now(&tr->wheel), need_i64(tr, s, "delay"));
}

/* ---- drawing ---- */

static void print_bucket_tasks(const struct tw_bucket_info *b)
{
	for (const struct tw_timer *t = b->first; t; t = tw_bucket_next(t))
		printf(" %s(%" PRId64 ")", task_name(t), tw_timer_due(t));
}

static void draw(struct trace *tr)
{
	struct tw_wheel *w = &tr->wheel;
	struct tw_bucket_info ready;
	size_t nq, shown;
	struct tw_queue_entry *q;

	for (unsigned level = 1; level <= tw_wheel_levels(w); level++) {
		struct tw_level_info li;

		tw_wheel_level_info(w, level, &li);
		printf("  level %u  tick %" PRId64 "  currentTime %" PRId64,
		       level, li.tick, li.current_time);
		if (li.unbounded)
			printf("  range [%" PRId64 ", end of time)\n", li.current_time);
		else
			printf("  range [%" PRId64 ", %" PRId64 ")\n", li.current_time,
			       li.current_time > INT64_MAX - li.interval
				       ? INT64_MAX
				       : li.current_time + li.interval);
		for (unsigned slot = 0; slot < w->size; slot++) {
			struct tw_bucket_info b;

			tw_wheel_bucket_info(w, level, slot, &b);
			if (!b.has_expiration && !b.count) {
				printf("    bucket %u  expiration -1\n", slot);
				continue;
			}
			printf("    bucket %u  [%" PRId64 ", %" PRId64 ")  expiration %" PRId64,
			       slot, b.expiration, b.end, b.expiration);
			if (b.draining)
				printf("  (draining)");
			if (!b.count)
				printf("  (empty)");
			else
				printf("  tasks:");
			print_bucket_tasks(&b);
			putchar('\n');
		}
	}
	tw_wheel_ready_info(w, &ready);
	if (ready.count) {
		printf("  ready (fire on the next advance):");
		print_bucket_tasks(&ready);
		putchar('\n');
	}
	nq = tw_wheel_queue_snapshot(w, NULL, 0);
	q = nq ? calloc(nq, sizeof(*q)) : NULL;
	shown = q ? tw_wheel_queue_snapshot(w, q, nq) : 0;
	printf("  queue:");
	if (!shown)
		printf(" (empty)");
	for (size_t i = 0; i < shown && i < nq; i++)
		printf("%s %" PRId64 " L%u#%u", i ? "," : "", q[i].expiration,
		       q[i].level, q[i].slot);
	putchar('\n');
	free(q);
}

/* Narrate the wheel's structural events in text mode. */
static void on_event(void *arg, const struct tw_wheel *w,
		     const struct tw_event *ev)
{
	struct trace *tr = arg;
	struct tw_level_info li;

	(void)w;
	if (!tr->text)
		return;
	switch (ev->kind) {
	case TW_EV_LEVEL_ADDED:
		tw_wheel_level_info(&tr->wheel, ev->level, &li);
		printf("  + level %u created: tick %" PRId64 ", currentTime %" PRId64 "\n",
		       ev->level, li.tick, ev->time);
		break;
	case TW_EV_PLACED:
		printf("  %s (due %" PRId64 ") -> level %u bucket %u, expiration %" PRId64 "\n",
		       task_name(ev->timer), tw_timer_due(ev->timer), ev->level,
		       ev->slot, ev->time);
		break;
	case TW_EV_READY:
		printf("  %s (due %" PRId64 ") is due: ready\n", task_name(ev->timer),
		       tw_timer_due(ev->timer));
		break;
	case TW_EV_POPPED:
		printf("  pop level %u bucket %u (expiration %" PRId64 ")\n",
		       ev->level, ev->slot, ev->time);
		break;
	case TW_EV_CLOCK:
		printf("  level %u clock -> %" PRId64 "\n", ev->level, ev->time);
		break;
	case TW_EV_FIRED:
		break; /* printed by the task's callback */
	}
}

static void on_fire(struct tw_wheel *w, struct tw_timer *t)
{
	int64_t now = tw_wheel_now(w);

	printf("%sfire %s at %" PRId64 " due %" PRId64 "%s\n",
	       text_mode ? "  " : "", task_name(t), now, tw_timer_due(t),
	       text_mode && now < tw_timer_due(t) ? "  (early)" : "");
}

/* ---- commands ---- */

static void check(struct trace *tr)
{
	char why[256];

	if (tw_wheel_check(&tr->wheel, why, sizeof(why)) != TW_OK) {
		fprintf(stderr, "%s:%u: invariant broken: %s\n", tr->path,
			tr->line, why);
		exit(1);
	}
}

static void advance(struct trace *tr, int64_t now)
{
	int64_t rc = tw_wheel_advance(&tr->wheel, now);

	if (rc < 0)
		die(tr, "advance to %" PRId64 ": %s", now, tw_strerror((int)rc));
}

static void cmd_wheel(struct trace *tr, char **argv, int argc)
{
	int64_t tick = 0, size = 0, start = 0;
	enum tw_mode mode = TW_MODE_EXACT;
	bool have_tick = false, have_size = false, have_start = false;
	int rc;

	if (tr->have_wheel)
		die(tr, "the wheel is already set up");
	for (int i = 1; i < argc; i++) {
		char *eq = strchr(argv[i], '=');

		if (!eq)
			die(tr, "expected key=value, got '%s'", argv[i]);
		*eq = '\0';
		if (!strcmp(argv[i], "tick"))
			tick = need_i64(tr, eq + 1, "tick"), have_tick = true;
		else if (!strcmp(argv[i], "size"))
			size = need_i64(tr, eq + 1, "size"), have_size = true;
		else if (!strcmp(argv[i], "start"))
			start = need_i64(tr, eq + 1, "start"), have_start = true;
		else if (!strcmp(argv[i], "mode") && !strcmp(eq + 1, "kafka"))
			mode = TW_MODE_KAFKA;
		else if (!strcmp(argv[i], "mode") && !strcmp(eq + 1, "exact"))
			mode = TW_MODE_EXACT;
		else if (!strcmp(argv[i], "mode"))
			die(tr, "mode must be kafka or exact, not '%s'", eq + 1);
		else
			die(tr, "unknown wheel parameter '%s'", argv[i]);
	}
	if (!have_tick || !have_size || !have_start)
		die(tr, "wheel needs tick=, size= and start=");
	if (size < TW_WHEEL_SIZE_MIN || size > TW_WHEEL_SIZE_MAX)
		die(tr, "size must be in [%d, %d]", TW_WHEEL_SIZE_MIN,
		    TW_WHEEL_SIZE_MAX);
	rc = tw_wheel_init(&tr->wheel, tick, (uint32_t)size, start, mode);
	if (rc)
		die(tr, "wheel: %s", tw_strerror(rc));
	tr->have_wheel = true;
	if (tr->text)
		tw_wheel_set_observer(&tr->wheel, &tr->observer);
}

static void cmd_add(struct trace *tr, char **argv, int argc, bool reschedule)
{
	struct task *t;
	int rc;

	if (argc != 3)
		die(tr, "usage: %s NAME DELAY|@TIME", argv[0]);
	t = find_task(tr, argv[1]);
	if (!t && reschedule)
		die(tr, "unknown task '%s'", argv[1]);
	if (!t) {
		t = new_task(tr, argv[1]);
		tw_timer_init(&t->timer, on_fire);
	}
	if (reschedule) {
		rc = tw_wheel_reschedule(&tr->wheel, &t->timer,
					 parse_due(tr, argv[2]));
		if (rc < 0)
			die(tr, "reschedule: %s", tw_strerror(rc));
		printf("%sreschedule %s %s\n", tr->text ? "  " : "", t->name,
		       rc ? "ok" : "no");
		return;
	}
	rc = tw_wheel_add(&tr->wheel, &t->timer, parse_due(tr, argv[2]));
	if (rc == TW_EBUSY)
		die(tr, "task '%s' is already pending (use reschedule)", argv[1]);
	if (rc)
		die(tr, "add: %s", tw_strerror(rc));
}

static void cmd_cancel(struct trace *tr, char **argv, int argc)
{
	struct task *t;
	int rc;

	if (argc != 2)
		die(tr, "usage: cancel NAME");
	t = find_task(tr, argv[1]);
	if (!t)
		die(tr, "unknown task '%s'", argv[1]);
	rc = tw_wheel_cancel(&tr->wheel, &t->timer);
	if (rc < 0)
		die(tr, "cancel: %s", tw_strerror(rc));
	printf("%scancel %s %s\n", tr->text ? "  " : "", t->name, rc ? "ok" : "no");
}

static void cmd_advance(struct trace *tr, char **argv, int argc)
{
	int64_t now;

	if (argc != 2)
		die(tr, "usage: advance TIME|+DELAY");
	if (argv[1][0] == '+')
		now = add_sat(tw_wheel_now(&tr->wheel),
			      need_i64(tr, argv[1] + 1, "delay"));
	else
		now = need_i64(tr, argv[1], "time");
	if (now < tw_wheel_now(&tr->wheel))
		die(tr, "advance to %" PRId64 ": the clock is at %" PRId64
			" and cannot go backwards", now, tw_wheel_now(&tr->wheel));
	advance(tr, now);
}

static void cmd_run(struct trace *tr, int argc)
{
	int64_t when;

	if (argc != 1)
		die(tr, "usage: run");
	while (tw_wheel_count(&tr->wheel) &&
	       tw_wheel_next_expiry(&tr->wheel, &when)) {
		if (tr->text) {
			printf("-- step: advance to %" PRId64 "\n", when);
		}
		advance(tr, when);
		check(tr);
		if (tr->text)
			draw(tr);
	}
}

static int split(char *line, char **argv, int max)
{
	int argc = 0;

	for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
		if (argc == max)
			return -1;
		argv[argc++] = tok;
	}
	return argc;
}

static void run_line(struct trace *tr, char *line)
{
	char *argv[16];
	char shown[4096];
	char *hash = strchr(line, '#');
	int argc;

	if (hash)
		*hash = '\0';
	snprintf(shown, sizeof(shown), "%s", line);
	shown[strcspn(shown, "\r\n")] = '\0';
	argc = split(line, argv, 16);
	if (argc < 0)
		die(tr, "too many words");
	if (argc == 0)
		return;
	if (strcmp(argv[0], "wheel") && !tr->have_wheel)
		die(tr, "the first command must be 'wheel'");
	if (tr->text && tr->have_wheel)
		printf("== %s:%u: %s  [now %" PRId64 "]\n", tr->path, tr->line,
		       shown + strspn(shown, " \t"), tw_wheel_now(&tr->wheel));
	else if (tr->text)
		printf("== %s:%u: %s\n", tr->path, tr->line,
		       shown + strspn(shown, " \t"));

	if (!strcmp(argv[0], "wheel"))
		cmd_wheel(tr, argv, argc);
	else if (!strcmp(argv[0], "add"))
		cmd_add(tr, argv, argc, false);
	else if (!strcmp(argv[0], "reschedule"))
		cmd_add(tr, argv, argc, true);
	else if (!strcmp(argv[0], "cancel"))
		cmd_cancel(tr, argv, argc);
	else if (!strcmp(argv[0], "advance"))
		cmd_advance(tr, argv, argc);
	else if (!strcmp(argv[0], "run"))
		cmd_run(tr, argc);
	else if (!strcmp(argv[0], "check")) {
		if (argc != 1)
			die(tr, "usage: check");
	} else
		die(tr, "unknown command '%s'", argv[0]);

	/* Anything due now (a task added in the past) fires at once. */
	advance(tr, tw_wheel_now(&tr->wheel));
	check(tr);
	if (tr->text && strcmp(argv[0], "run"))
		draw(tr);
}

static void usage(void)
{
	fprintf(stderr, "usage: tw-trace [--events|--text] SCENARIO\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct trace tr = { 0 };
	char line[4096];
	FILE *f;

	tr.text = true;
	tr.observer.on_event = on_event;
	tr.observer.arg = &tr;
	if (argc == 3 && !strcmp(argv[1], "--events"))
		tr.text = false;
	else if (argc == 3 && !strcmp(argv[1], "--text"))
		tr.text = true;
	else if (argc != 2 || argv[1][0] == '-')
		usage();
	text_mode = tr.text;
	tr.path = argv[argc - 1];
	f = fopen(tr.path, "r");
	if (!f) {
		fprintf(stderr, "%s: %s\n", tr.path, strerror(errno));
		return 2;
	}
	while (fgets(line, sizeof(line), f)) {
		tr.line++;
		if (!strchr(line, '\n') && !feof(f))
			die(&tr, "line too long");
		run_line(&tr, line);
	}
	fclose(f);
	if (tr.have_wheel)
		tw_wheel_destroy(&tr.wheel);
	for (size_t i = 0; i < tr.ntasks; i++)
		free(tr.tasks[i]);
	free(tr.tasks);
	return 0;
}
