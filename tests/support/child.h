/* SPDX-License-Identifier: MIT */
/*
 * Death tests: run a piece of a test in a forked child, with what it writes
 * on stderr captured, and tell the test how the child ended. For the checks
 * that end a program on purpose (a transition the model does not make, a
 * mistake the debug build names), which must not end the test binary.
 */
#ifndef TW_TEST_CHILD_H
#define TW_TEST_CHILD_H

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* Run fn(arg) in a child, its stderr in out (size bytes, NUL-terminated);
 * the signal that ended the child, or 0 if it returned. */
static inline int run_in_child(void (*fn)(void *arg), void *arg, char *out,
			       size_t size)
{
	int fds[2], status;
	pid_t pid;
	ssize_t n, got = 0;

	CHECK_EQ(pipe(fds), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		fn(arg);
		_exit(0);
	}
	close(fds[1]);
	while ((n = read(fds[0], out + got, size - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = '\0';
	close(fds[0]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

#endif
