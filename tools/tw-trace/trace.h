/* SPDX-License-Identifier: MIT */
/*
 * trace.h — what tw-trace's files share: a scenario's state (struct
 * trace: the wheel, the tasks by name, where narration goes, the html
 * steps so far) and the calls between the parser (scenario.c), the text
 * renderer (text.c), the html renderer (html.c) and main.c. No globals:
 * a task's callback, which only gets the wheel, finds the trace around it
 * (tw_container_of), and narration goes to tr->out.
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
	bool windowed;          /* added with a window: due (earliest) .. latest */
	int64_t latest;
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
	char *log_buf;        /* html: the open step's narration */
	size_t log_len;
	char title[4096];
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

/* scenario.c */
void trace_die(struct trace *tr, const char *fmt, ...) PRINTF_LIKE(2, 3);
const char *trace_task_name(const struct tw_timer *t);
/* A task's time as the renderers write it: "D", or "E..L" for a window. */
const char *trace_task_when(const struct tw_timer *t, char *buf, size_t len);
void trace_replay(struct trace *tr, FILE *f);
void trace_free(struct trace *tr);
#ifdef TW_TRACE_FUZZ
#include <setjmp.h>
extern jmp_buf trace_reject; /* a bad scenario: back to the fuzzer's entry */
#endif

/* text.c: the wheel drawn after a command, the wheel's events narrated */
void trace_draw(struct trace *tr);
void trace_on_event(void *arg, const struct tw_wheel *w,
		    const struct tw_event *ev);
void trace_explain_stay(struct trace *tr, struct task *t);

/* html.c: a step per command, the page at the end */
void trace_step_begin(struct trace *tr, const char *fmt, ...) PRINTF_LIKE(2, 3);
void trace_step_end(struct trace *tr);
void trace_write_page(struct trace *tr, const char *path);

#endif
