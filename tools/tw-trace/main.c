/* SPDX-License-Identifier: MIT */
/*
 * tw-trace — replay a scenario on a timing wheel with a virtual clock and
 * show what happens, step by step.
 *
 *     tw-trace [--events|--text [--all-buckets]] SCENARIO
 *     tw-trace --html OUT.html SCENARIO
 *
 * Scenario language, one command a line, '#' starts a comment:
 *
 *     wheel tick=1000 size=3 start=1675752020558 mode=kafka  # mode: exact
 *     add NAME DELAY          due = now + DELAY   (add NAME @T: due = T)
 *     reschedule NAME DELAY   (or @T) move a task, pending or not
 *     add NAME A..B           a window (exact mode): fire anywhere from
 *                             A to B, each a DELAY or @T (also reschedule)
 *     cancel NAME
 *     advance T               absolute time (advance +D: now + D)
 *     run                     advance bucket by bucket until nothing is pending
 *     check                   run the invariant checker (done after every
 *                             command anyway)
 *
 * --events prints one line per event: "fire NAME at T due D",
 * "cancel NAME ok|no" and "reschedule NAME ok|no" (ok: it was pending).
 * --text (the default) draws every level, bucket and the bucket queue after
 * each command, with the cascades and fires that led there; a run of empty
 * buckets takes one line, or one line each with --all-buckets.
 * --html writes one self-contained page (no network): the same steps as
 * --text, each drawn as rows of buckets with the bucket queue, walked with
 * a slider, buttons or the arrow keys (the page is tools/tw-trace.html).
 *
 * Exit status: 0, 1 if the wheel's invariant checker fails, 2 for a bad
 * scenario ("file:line: message" on stderr), or for output that could not
 * be written whole or a scenario that could not be read.
 *
 * Built with -DTW_TRACE_FUZZ the tool is a libFuzzer target instead
 * (fuzz/, `make fuzz`): the input's first byte picks events, text or html
 * (and whether text draws every empty bucket),
 * the rest is a scenario; a bad scenario is rejected as it is here, and a
 * broken invariant or a sanitizer report is a finding.
 *
 * main.c is the command line (or the fuzzer's entry); scenario.c reads
 * and runs the scenario, text.c and html.c draw it (trace.h).
 */
#define _POSIX_C_SOURCE 200809L /* fmemopen */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trace.h"

#ifdef TW_TRACE_FUZZ
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* static: it must survive the longjmp of a rejected scenario */
	static struct trace tr;
	FILE *devnull, *f;

	if (size < 2)
		return 0;
	memset(&tr, 0, sizeof(tr));
	tr.path = "fuzz";
	tr.text = data[0] % 3 != 0;
	tr.html = data[0] % 3 == 2;
	tr.all_buckets = data[0] / 3 % 2; /* both ways of drawing empty runs */
	tr.observer.on_event = trace_on_event;
	tr.observer.arg = &tr;
	tr.render = tr.html ? &trace_html_renderer
		: tr.text ? &trace_text_renderer : NULL;
	devnull = fopen("/dev/null", "w");
	f = fmemopen((void *)(data + 1), size - 1, "r");
	if (!devnull || !f)
		abort();
	tr.out = devnull;
	if (tr.html && trace_html_open(&tr))
		abort();
	if (setjmp(trace_reject) == 0) {
		trace_replay(&tr, f);
		if (tr.html) {
			trace_write_page(&tr, "/dev/null");
			tr.steps = NULL;
			tr.noscript = NULL;
		}
	}
	trace_html_free(&tr);
	trace_free(&tr);
	fclose(f);
	fclose(devnull);
	return 0;
}
#else
static const char help_text[] =
"usage: tw-trace [--text [--all-buckets]|--events] SCENARIO\n"
"       tw-trace --html OUT.html SCENARIO\n"
"       tw-trace --help | --version\n"
"\n"
"Replays SCENARIO on a timing wheel with a virtual clock and shows what\n"
"happens, step by step.\n"
"\n"
"  --text    (the default) after each command, every level, bucket and the\n"
"            bucket queue, with the cascades and fires that led there; a run\n"
"            of empty buckets is one line ('buckets 3-63 expiration -1')\n"
"  --all-buckets  with --text: every empty bucket on a line of its own\n"
"  --events  one line per event: 'fire NAME at T due D', 'cancel NAME ok|no',\n"
"            'reschedule NAME ok|no' (ok: it was pending)\n"
"  --html    one self-contained page: the --text steps, walked with a slider\n"
"            (without JavaScript, listed as text)\n"
"\n"
"The scenario language, one command a line, '#' starts a comment:\n"
"  wheel tick=T size=N start=S [mode=exact|kafka]\n"
"                          first: buckets of T time units, N per level, the\n"
"                          clock at S; exact (default) never fires early,\n"
"                          kafka reproduces Kafka, early firing included\n"
"  add NAME DELAY          a task due at now + DELAY (add NAME @T: due at T)\n"
"  reschedule NAME DELAY   move a task (or @T), pending or not\n"
"  add NAME A..B           a window (exact mode): fires anywhere from A to B,\n"
"                          each a DELAY or @T; reschedule NAME A..B too\n"
"  cancel NAME             stop a task\n"
"  advance T               move the clock to T (advance +D: to now + D)\n"
"  run                     advance bucket by bucket until nothing is pending\n"
"  check                   run the invariant checker (done after every\n"
"                          command anyway)\n"
"After every command the wheel is advanced to the current time, so a task\n"
"added at or before now fires right there, not at the next 'advance'.\n"
"Times are integers in the wheel's units (e.g. ms since the epoch).\n"
"\n"
"Exit status: 0; 1 if the invariant checker fails; 2 for a bad command line\n"
"or scenario (\"FILE:LINE: message\" on stderr), or output that could not be\n"
"written whole. man tw-trace has examples.\n";

/* What was wrong with the command line, then how to write it. */
static void usage(const char *what, const char *arg)
{
	fprintf(stderr, "tw-trace: %s%s%s%s\n", what, arg ? " '" : "", arg ? arg : "",
		arg ? "'" : "");
	fputs("usage: tw-trace [--text [--all-buckets]|--events] SCENARIO\n"
	      "       tw-trace --html OUT.html SCENARIO\n"
	      "(tw-trace --help says more)\n", stderr);
	exit(2);
}

/* A scenario refused before any page was written: free what was set up. */
static int give_up(struct trace *tr)
{
	trace_html_free(tr);
	trace_free(tr);
	return 2;
}

int main(int argc, char **argv)
{
	struct trace tr = { 0 };
	const char *html_path = NULL;
	struct stat st;
	bool have_st;
	int arg, modes = 0;
	FILE *f;

	tr.out = stdout;
	tr.text = true;
	tr.observer.on_event = trace_on_event;
	tr.observer.arg = &tr;
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(help_text, stdout);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "--version")) {
		printf("tw-trace (timingwheel) %s\n", tw_version_string());
		return 0;
	}
	/* Options first, in any order, then the scenario. --all-buckets
	 * changes only the text drawing (the html page lays out every bucket
	 * anyway, and --events draws none). */
	for (arg = 1; arg < argc - 1 && argv[arg][0] == '-'; arg++) {
		if (!strcmp(argv[arg], "--events")) {
			tr.text = false;
			modes++;
		} else if (!strcmp(argv[arg], "--text")) {
			modes++;
		} else if (!strcmp(argv[arg], "--html") && arg + 2 < argc &&
			   argv[arg + 1][0] != '-') {
			html_path = argv[++arg];
			modes++;
		} else if (!strcmp(argv[arg], "--all-buckets")) {
			tr.all_buckets = true;
		} else if (!strcmp(argv[arg], "--html")) {
			usage("--html needs OUT.html, then the scenario", NULL);
		} else {
			usage("unknown option", argv[arg]);
		}
	}
	if (argc < 2)
		usage("no scenario given", NULL);
	if (arg != argc - 1)
		usage(argv[arg + 1][0] == '-' ? "options come before the scenario, not after it:"
					      : "one scenario at a time, not also",
		      argv[arg + 1]);
	if (!strcmp(argv[arg], "--html"))
		usage("--html needs OUT.html, then the scenario", NULL);
	if (argv[arg][0] == '-')
		usage("no scenario after the option", argv[arg]);
	if (modes > 1)
		usage("one of --text, --events and --html", NULL);
	if (tr.all_buckets && (html_path || !tr.text))
		usage("--all-buckets is for --text alone", NULL);
	tr.path = argv[arg];
	if (tr.text)
		tr.render = &trace_text_renderer;
	if (html_path) {
		tr.render = &trace_html_renderer;
		tr.html = true;
		if (trace_html_open(&tr)) {
			perror("tw-trace");
			return give_up(&tr);
		}
	}
	f = fopen(tr.path, "r");
	if (!f) {
		fprintf(stderr, "%s: %s\n", tr.path, strerror(errno));
		return give_up(&tr);
	}
	have_st = fstat(fileno(f), &st) == 0;
	if (have_st && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: is a directory, not a scenario\n", tr.path);
		fclose(f);
		return give_up(&tr);
	}
	/* The page is written after the scenario is read: over the
	 * scenario itself, it would replace it. */
	if (html_path && have_st) {
		struct stat page;

		if (stat(html_path, &page) == 0 && page.st_dev == st.st_dev &&
		    page.st_ino == st.st_ino) {
			fprintf(stderr, "%s: is the scenario itself, not a place for "
					"the page\n", html_path);
			fclose(f);
			return give_up(&tr);
		}
	}
	trace_replay(&tr, f);
	if (ferror(f)) {
		fprintf(stderr, "%s: %s\n", tr.path, strerror(errno));
		fclose(f);
		return give_up(&tr);
	}
	fclose(f);
	if (!tr.have_wheel) {
		fprintf(stderr, "%s: no commands (an empty scenario, or only comments); "
				"the first must be 'wheel'\n", tr.path);
		return give_up(&tr);
	}
	if (html_path)
		trace_write_page(&tr, html_path);
	trace_free(&tr);
	/* Text or events that did not reach their file (a full disk) are
	 * no trace: say so, as for a page. */
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "tw-trace: standard output: %s\n", strerror(errno));
		return 2;
	}
	return 0;
}
#endif
