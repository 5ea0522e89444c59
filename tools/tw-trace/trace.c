/* SPDX-License-Identifier: MIT */
/*
 * trace.c — what tw-trace's parser and its renderers both speak of, and
 * nothing else: a bad scenario's message ("file:line: message"), and a
 * task's name and time as every output writes them. The parser
 * (scenario.c) and the renderers (text.c, html.c) depend on this file and
 * on trace.h; the parser reaches the renderers only through the
 * struct trace_renderer that main.c hands it, so no file of the tool
 * calls back into one that calls it.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

#include "trace.h"

#ifdef TW_TRACE_FUZZ
jmp_buf trace_reject;
#endif

void trace_die(struct trace *tr, const char *fmt, ...)
{
#ifdef TW_TRACE_FUZZ
	(void)tr;
	(void)fmt;
	longjmp(trace_reject, 2);
#else
	va_list ap;

	fprintf(stderr, "%s:%u: ", tr->path, tr->line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
#endif
}

const char *trace_task_name(const struct tw_timer *t)
{
	return tw_container_of(t, struct task, timer)->name;
}

const char *trace_task_when(const struct tw_timer *t, char *buf, size_t len)
{
	const struct task *task = tw_container_of(t, struct task, timer);

	if (task->windowed)
		snprintf(buf, len, "%" PRId64 "..%" PRId64, task->earliest, task->latest);
	else
		snprintf(buf, len, "%" PRId64, tw_timer_due(t));
	return buf;
}

