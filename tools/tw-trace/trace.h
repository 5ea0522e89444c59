/* SPDX-License-Identifier: MIT */
/*
 * trace.h — what tw-trace's files share: a scenario's state (struct
 * trace: the wheel, the tasks by name, where narration goes, the html
 * steps so far), the renderer interface, and each file's calls. No
 * globals: a task's callback, which only gets the wheel, finds the trace
 * around it (tw_container_of), and narration goes to tr->out.
 *
 * Who calls whom (no circle): main.c picks a renderer and runs the
 * parser; the parser (scenario.c) reports to that renderer through
 * struct trace_renderer, and to the text renderer's wheel observer
 * through tr->observer, both set by main.c; the renderers (text.c,
 * html.c) use trace.c's vocabulary and the library's inspection calls,
 * and html.c narrates a stay and draws each step's text with text.c's
 * trace_explain_stay and trace_draw. Of the
 * tool's headers every file includes only this one (html.c also the
 * generated html_page.h), and this one includes none. Calls, every arrow
 * pointing down:
 *
 *   main.c      -> scenario.c, and picks text.c's or html.c's renderer
 *   scenario.c  -> the renderer, through tr->render and tr->observer only
 *   html.c      -> text.c (trace_explain_stay, trace_draw)
 *   scenario.c, text.c, html.c -> trace.c (trace_die, task names, times)
 */
#ifndef TW_TRACE_H
#define TW_TRACE_H

#include <stdbool.h>
#include <stdio.h>

#include "timingwheel/timingwheel.h"

#define NAME_MAX_LEN 63

struct task {
	char name[NAME_MAX_LEN + 1];
	struct tw_timer timer;
	bool windowed;          /* added with a window: earliest .. latest */
	int64_t earliest;
	int64_t latest;
};

struct trace;
struct task;

/* What the parser tells a renderer, in the order it happens. */
struct trace_renderer {
	/* A command (or one step of a run) begins; its title. */
	void (*step)(struct trace *tr, const char *title);
	/* The command is done: the wheel as it is now. */
	void (*draw)(struct trace *tr);
	/* A reschedule that reported success filed nothing: why it stayed. */
	void (*stayed)(struct trace *tr, struct task *t);
};

struct trace {
	const char *path;
	unsigned line;
	bool text;            /* --text (and --html): narrate; else --events */
	bool all_buckets;     /* --all-buckets: draw empty buckets one a line */
	bool html;            /* text narration, captured per step */
	bool step_open;
	bool have_wheel;
	bool placed;          /* the wheel filed a timer during this command */
	bool told_early;      /* the early cascade was explained once */
	FILE *out;            /* narration: stdout, or the open html step's */
	FILE *steps;          /* html: the JSON array of steps so far */
	char *steps_buf;
	size_t steps_len;
	char *log_buf;        /* html: the open step's narration, then its
	                         drawing as --text draws it */
	size_t log_len;
	size_t drawn_at;      /* html: where the drawing starts in log_buf */
	bool drawn;
	FILE *noscript;       /* html: every step as --text prints it, for
	                         the page's <noscript> */
	char *noscript_buf;
	size_t noscript_len;
	unsigned nsteps;      /* html: the steps ended so far */
	bool busy_seen;       /* html: a step has said what it did */
	unsigned first_busy;  /* html: the first such step, where the page opens */
	bool have_from;       /* html: the open step began with a wheel */
	int64_t from;         /* html: the clock when the open step began */
	char *title;          /* the open step's, whole (step() sizes it) */
	struct tw_wheel wheel;
	struct task **tasks;
	size_t ntasks, cap;
	struct tw_observer observer;
	const struct trace_renderer *render; /* NULL: --events, no drawing */
};

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#define NO_RETURN __attribute__((noreturn))
#else
#define PRINTF_LIKE(f, a)
#define NO_RETURN
#endif

/* trace.c: the vocabulary */
/* A bad scenario: "file:line: message", exit 2 (the fuzzer: longjmp). */
NO_RETURN void trace_die(struct trace *tr, const char *fmt, ...) PRINTF_LIKE(2, 3);
const char *trace_task_name(const struct tw_timer *t);
/* A task's time as the renderers write it: "D", or "E..L" for a window. */
const char *trace_task_when(const struct tw_timer *t, char *buf, size_t len);
#ifdef TW_TRACE_FUZZ
#include <setjmp.h>
extern jmp_buf trace_reject; /* a bad scenario: back to the fuzzer's entry */
#endif

/* scenario.c: the parser */
void trace_replay(struct trace *tr, FILE *f);
void trace_free(struct trace *tr);

/* text.c: a header line per step, the wheel drawn after each, the wheel's
 * events narrated (tr->observer's function) */
extern const struct trace_renderer trace_text_renderer;
void trace_draw(struct trace *tr);
void trace_explain_stay(struct trace *tr, struct task *t);
void trace_on_event(void *arg, const struct tw_wheel *w,
		    const struct tw_event *ev);

/* html.c: a step per command with its text narration, the page at the
 * end (and, for a browser without JavaScript, every step as text) */
extern const struct trace_renderer trace_html_renderer;
int trace_html_open(struct trace *tr);
void trace_html_free(struct trace *tr);
void trace_step_end(struct trace *tr);
void trace_write_page(struct trace *tr, const char *path);

#endif
