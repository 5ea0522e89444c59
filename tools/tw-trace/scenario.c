/* SPDX-License-Identifier: MIT */
/*
 * scenario.c — tw-trace's parser and interpreter: a scenario read line by
 * line, each command (wheel, add, reschedule, cancel, advance, run,
 * check) checked and applied to the wheel, the invariant checker after
 * each, and a bad line refused with "file:line: message". It tells the
 * renderer main.c chose (tr->render: text.c's or html.c's, none for
 * --events) when a step begins, when the wheel is to be drawn, and why a
 * reschedule moved nothing; it never calls a renderer by name.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

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
		trace_die(tr, "task name longer than %d characters", NAME_MAX_LEN);
	/* The events are lines of words: a name holds no control
	 * character (a vertical tab or form feed would split it, a
	 * terminal would act on an escape). */
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			trace_die(tr, "a control character (0x%02x) in task name", *c);
	if (tr->ntasks == tr->cap) {
		size_t cap = tr->cap ? 2 * tr->cap : 16;
		struct task **grown = realloc(tr->tasks, cap * sizeof(*grown));

		if (!grown)
			trace_die(tr, "out of memory");
		tr->tasks = grown;
		tr->cap = cap;
	}
	/* Each task on its own: pending timers are linked by address. */
	t = calloc(1, sizeof(*t));
	if (!t)
		trace_die(tr, "out of memory");
	strcpy(t->name, name);
	tr->tasks[tr->ntasks++] = t;
	return t;
}

/* ---- parsing ---- */

static bool parse_i64(const char *s, int64_t *value)
{
	char *end;
	long long v;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end) {
		errno = EINVAL;
		return false;
	}
	if (errno)
		return false; /* ERANGE: need_i64 says so */
	*value = (int64_t)v;
	return true;
}

static int64_t need_i64(struct trace *tr, const char *s, const char *what)
{
	int64_t v;

	if (!parse_i64(s, &v)) {
		if (errno == ERANGE)
			trace_die(tr, "%s: %s does not fit in 64 bits (%" PRId64 " to %" PRId64
				")", what, s, INT64_MIN, INT64_MAX);
		trace_die(tr, "%s: expected an integer, got '%s'", what, s ? s : "");
	}
	return v;
}

/* now + delay, which must fit in 64 bits, as tw_wheel_add_in() refuses
 * a sum past either end (TW_EOVERFLOW). */
static int64_t from_now(struct trace *tr, const char *delay)
{
	int64_t now = tw_wheel_now(&tr->wheel), d = need_i64(tr, delay, "delay");

	if ((d > 0 && now > INT64_MAX - d) || (d < 0 && now < INT64_MIN - d))
		trace_die(tr, "now + delay: %" PRId64 " + %" PRId64
			" does not fit in 64 bits", now, d);
	return now + d;
}

/* "@T" is absolute, anything else a delay from now. */
static int64_t parse_due(struct trace *tr, const char *s)
{
	if (s && s[0] == '@')
		return need_i64(tr, s + 1, "due time");
	return from_now(tr, s);
}

/* ---- commands ---- */

/* A task fired: the wheel is the trace's, so the trace is around it. */
static void on_fire(struct tw_wheel *w, struct tw_timer *t)
{
	struct trace *tr = tw_container_of(w, struct trace, wheel);
	int64_t now = tw_wheel_now(w);

	char when[48];

	fprintf(tr->out, "%sfire %s at %" PRId64 " due %s%s\n",
	       tr->text ? "  " : "", trace_task_name(t), now,
	       trace_task_when(t, when, sizeof(when)),
	       tr->text && now < tw_timer_due(t) ? "  (early)" : "");
}

static void check(struct trace *tr)
{
	char why[256];

	if (tw_wheel_check(&tr->wheel, why, sizeof(why)) != TW_OK) {
		fprintf(stderr, "%s:%u: invariant broken: %s\n", tr->path,
			tr->line, why);
#ifdef TW_TRACE_FUZZ
		abort();
#endif
		exit(1);
	}
}

static void advance(struct trace *tr, int64_t now)
{
	int64_t rc = tw_wheel_advance(&tr->wheel, now);

	if (rc < 0)
		trace_die(tr, "advance to %" PRId64 ": %s", now, tw_strerror((int)rc));
}

static void cmd_wheel(struct trace *tr, char **argv, int argc)
{
	int64_t tick = 0, size = 0, start = 0;
	enum tw_mode mode = TW_MODE_EXACT;
	bool have_tick = false, have_size = false, have_start = false;
	int rc;

	if (tr->have_wheel)
		trace_die(tr, "the wheel is already set up");
	for (int i = 1; i < argc; i++) {
		char *eq = strchr(argv[i], '=');

		if (!eq)
			trace_die(tr, "expected key=value, got '%s'", argv[i]);
		*eq = '\0';
		for (int j = 1; j < i; j++)
			if (!strcmp(argv[j], argv[i]))
				trace_die(tr, "wheel parameter '%s' given twice", argv[i]);
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
			trace_die(tr, "mode must be kafka or exact, not '%s'", eq + 1);
		else
			trace_die(tr, "unknown wheel parameter '%s'", argv[i]);
	}
	if (!have_tick || !have_size || !have_start)
		trace_die(tr, "wheel needs tick=, size= and start=");
	if (tick < 1)
		trace_die(tr, "tick must be at least 1 (time units per bucket), not %" PRId64,
		    tick);
	if (size < TW_WHEEL_SIZE_MIN || size > TW_WHEEL_SIZE_MAX)
		trace_die(tr, "size must be in [%d, %d]", TW_WHEEL_SIZE_MIN,
		    TW_WHEEL_SIZE_MAX);
	rc = tw_wheel_init(&tr->wheel, tick, (uint32_t)size, start, mode);
	if (rc)
		trace_die(tr, "wheel: %s", tw_strerror(rc));
	tr->have_wheel = true;
	if (tr->text)
		tw_wheel_set_observer(&tr->wheel, &tr->observer);
}

/* "DUE" or a window "DUE..DUE" (each a delay or @TIME): *latest is the
 * second, or the first when there is none. */
static int64_t parse_window(struct trace *tr, char *s, int64_t *latest)
{
	char *dots = strstr(s, "..");
	int64_t earliest;

	if (!dots) {
		*latest = parse_due(tr, s);
		return *latest;
	}
	*dots = '\0';
	earliest = parse_due(tr, s);
	*latest = parse_due(tr, dots + 2);
	if (*latest < earliest)
		trace_die(tr, "window %s..%s ends before it starts", s, dots + 2);
	return earliest;
}

static void cmd_add(struct trace *tr, char **argv, int argc, bool reschedule)
{
	struct task *t;
	int64_t due, latest;
	bool windowed;
	int rc;

	if (argc != 3)
		trace_die(tr, "usage: %s NAME DELAY|@TIME[..DELAY|@TIME]", argv[0]);
	t = find_task(tr, argv[1]);
	if (!t && reschedule)
		trace_die(tr, "unknown task '%s'", argv[1]);
	windowed = strstr(argv[2], "..") != NULL;
	due = parse_window(tr, argv[2], &latest);
	if (windowed && tr->wheel.mode != TW_MODE_EXACT)
		trace_die(tr, "a window needs an exact-mode wheel (mode=exact)");
	if (!t) {
		t = new_task(tr, argv[1]);
		tw_timer_init(&t->timer, on_fire);
	}
	if (reschedule) {
		tr->placed = false;
		t->windowed = windowed; /* what the narration of the move says */
		t->earliest = due;
		t->latest = latest;
		rc = windowed ? tw_wheel_reschedule_range(&tr->wheel, &t->timer, due, latest)
			      : tw_wheel_reschedule(&tr->wheel, &t->timer, due);
		if (rc < 0)
			trace_die(tr, "reschedule: %s", tw_strerror(rc));
		fprintf(tr->out, "%sreschedule %s %s\n", tr->text ? "  " : "", t->name,
		       rc ? "ok" : "no");
		if (tr->render && rc == 1 && !tr->placed)
			tr->render->stayed(tr, t);
		return;
	}
	if (tw_timer_pending(&t->timer))
		trace_die(tr, "task '%s' is already pending (use reschedule)", argv[1]);
	t->windowed = windowed;
	t->earliest = due;
	t->latest = latest;
	rc = windowed ? tw_wheel_add_range(&tr->wheel, &t->timer, due, latest)
		      : tw_wheel_add(&tr->wheel, &t->timer, due);
	if (rc)
		trace_die(tr, "add: %s", tw_strerror(rc));
}

static void cmd_cancel(struct trace *tr, char **argv, int argc)
{
	struct task *t;
	int rc;

	if (argc != 2)
		trace_die(tr, "usage: cancel NAME");
	t = find_task(tr, argv[1]);
	if (!t)
		trace_die(tr, "unknown task '%s'", argv[1]);
	rc = tw_wheel_cancel(&tr->wheel, &t->timer);
	if (rc < 0)
		trace_die(tr, "cancel: %s", tw_strerror(rc));
	fprintf(tr->out, "%scancel %s %s\n", tr->text ? "  " : "", t->name, rc ? "ok" : "no");
}

static void cmd_advance(struct trace *tr, char **argv, int argc)
{
	int64_t now;

	if (argc != 2)
		trace_die(tr, "usage: advance TIME|+DELAY");
	if (argv[1][0] == '+')
		now = from_now(tr, argv[1] + 1);
	else
		now = need_i64(tr, argv[1], "time");
	if (now < tw_wheel_now(&tr->wheel))
		trace_die(tr, "advance to %" PRId64 ": the clock is at %" PRId64
			" and cannot go backwards", now, tw_wheel_now(&tr->wheel));
	advance(tr, now);
}

/* A step begins: its title to the renderer, if there is one. */
static void step(struct trace *tr, const char *fmt, ...) PRINTF_LIKE(2, 3);
static void step(struct trace *tr, const char *fmt, ...)
{
	/* Whole, however long its line and path: --text and the page's
	 * text print the same title, and no UTF-8 sequence is cut. */
	char *title;
	va_list ap;
	int n;

	if (!tr->render)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	title = n < 0 ? NULL : malloc((size_t)n + 1);
	if (!title)
		trace_die(tr, "out of memory");
	va_start(ap, fmt);
	vsnprintf(title, (size_t)n + 1, fmt, ap);
	va_end(ap);
	tr->render->step(tr, title);
	free(title);
}

static void cmd_run(struct trace *tr, int argc)
{
	int64_t when;

	if (argc != 1)
		trace_die(tr, "usage: run");
	while (tw_wheel_count(&tr->wheel) &&
	       tw_wheel_next_expiry(&tr->wheel, &when)) {
		step(tr, "-- step: advance to %" PRId64, when);
		advance(tr, when);
		check(tr);
		if (tr->render)
			tr->render->draw(tr);
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
		trace_die(tr, "too many words");
	if (argc == 0)
		return;
	if (strcmp(argv[0], "wheel") && !tr->have_wheel)
		trace_die(tr, "the first command must be 'wheel'");
	if (tr->have_wheel)
		step(tr, "== %s:%u: %s  [now %" PRId64 "]", tr->path, tr->line,
		     shown + strspn(shown, " \t"), tw_wheel_now(&tr->wheel));
	else
		step(tr, "== %s:%u: %s", tr->path, tr->line,
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
			trace_die(tr, "usage: check");
	} else
		trace_die(tr, "unknown command '%s'", argv[0]);

	/* Anything due now (a task added in the past) fires at once. */
	advance(tr, tw_wheel_now(&tr->wheel));
	check(tr);
	if (tr->render && strcmp(argv[0], "run"))
		tr->render->draw(tr);
}

/* The next line of f into line (its newline kept), a byte at a time: a
 * NUL byte in it, which a string would end at, is refused wherever it
 * is, the last line without its newline included. False at the end. */
static bool read_line(struct trace *tr, FILE *f, char *line, size_t size)
{
	size_t len = 0;
	int c;

	while ((c = getc(f)) != EOF) {
		if (c == '\0')
			trace_die(tr, "a NUL byte in the line");
		if (len + 1 >= size)
			trace_die(tr, "line too long");
		line[len++] = (char)c;
		if (c == '\n')
			break;
	}
	line[len] = '\0';
	return len > 0;
}

void trace_replay(struct trace *tr, FILE *f)
{
	char line[4096];

	for (;;) {
		tr->line++;
		if (!read_line(tr, f, line, sizeof(line))) {
			tr->line--;
			return;
		}
		run_line(tr, line);
	}
}

void trace_free(struct trace *tr)
{
	if (tr->step_open) {
		fclose(tr->out);
		free(tr->log_buf);
		tr->step_open = false;
	}
	if (tr->have_wheel)
		tw_wheel_destroy(&tr->wheel);
	for (size_t i = 0; i < tr->ntasks; i++)
		free(tr->tasks[i]);
	free(tr->tasks);
	free(tr->title);
	tr->title = NULL;
}
