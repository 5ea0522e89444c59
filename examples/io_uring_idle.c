/* SPDX-License-Identifier: MIT */
/*
 * A timing wheel in an io_uring loop (liburing): the wheel's next expiry is
 * the completion wait's timeout.
 *
 * The loop submits what it has queued, then waits for a completion at most
 * tw_wheel_timeout() milliseconds (io_uring_wait_cqe_timeout), handles the
 * completions, and advances the wheel to the clock. Accepts and receives
 * are io_uring operations; each receive moves the connection's idle timer
 * (tw_wheel_reschedule: O(1), no allocation). When a connection's timer
 * fires the server shuts the socket down, which completes its pending
 * receive, and closes it there. A connection whose peer hangs up is
 * closed at once, its timer cancelled.
 *
 * The scenario is much the epoll example's, with exact timers (no window)
 * and its own numbers: a server on 127.0.0.1 closes a connection after
 * IDLE_MS without a byte; the clients in this process send one byte every
 * TALK_MS, i % 4 times, then fall silent.
 *
 *     io_uring_idle [CONNECTIONS]     (default 100)
 *
 * Each connection is two descriptors here: the soft limit on them is
 * raised to what CONNECTIONS needs, up to the hard limit (ulimit -Hn);
 * past that the run refuses with exit status 2.
 *
 * Exit status 0 when every connection was closed by its idle timeout, none
 * early; 1 otherwise; 77 when the kernel refuses io_uring (a sandbox may).
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include <timingwheel/timingwheel.h>

enum { IDLE_MS = 250, TALK_MS = 80, GIVE_UP_MS = 20000, ACCEPT_TAG = 1 };

struct session {              /* the server's side of a connection */
	int fd;
	bool closing;         /* its idle timer fired: shut down, await recv */
	int64_t last_read;
	struct tw_timer idle;
	char buf[256];
};

struct peer {                 /* a client, with a timer that makes it talk */
	int fd;
	int talks_left;
	struct tw_timer talk;
};

static struct io_uring ring;
static struct tw_wheel wheel;
static int listen_fd;
static int sessions_closed, sessions_hung_up, sessions_early, accepted;
static bool accept_paused;    /* out of descriptors: no accept in flight */
static int64_t worst_late;
static int wanted;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct io_uring_sqe *sqe(void)
{
	struct io_uring_sqe *e = io_uring_get_sqe(&ring);

	if (!e) { /* the queue is full: hand it to the kernel, take another */
		io_uring_submit(&ring);
		e = io_uring_get_sqe(&ring);
	}
	if (!e) {
		fprintf(stderr, "io_uring_idle: no submission queue entry\n");
		exit(1);
	}
	return e;
}

static void want_accept(void)
{
	struct io_uring_sqe *e = sqe();

	io_uring_prep_accept(e, listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(e, ACCEPT_TAG);
}

static void want_recv(struct session *s)
{
	struct io_uring_sqe *e = sqe();

	io_uring_prep_recv(e, s->fd, s->buf, sizeof(s->buf), 0);
	io_uring_sqe_set_data(e, s);
}

/* ---- the server ---- */

static void on_idle(struct tw_wheel *w, struct tw_timer *t)
{
	struct session *s = tw_container_of(t, struct session, idle);
	int64_t silent = tw_wheel_now(w) - s->last_read;

	if (silent < IDLE_MS)
		sessions_early++;
	if (silent - IDLE_MS > worst_late)
		worst_late = silent - IDLE_MS;
	/* Its receive is still in flight: shutting the socket down
	 * completes it (with 0), and the session is closed there. */
	s->closing = true;
	shutdown(s->fd, SHUT_RDWR);
}

/* A session over: a descriptor freed lets a paused accept go again. */
static void session_close(struct session *s)
{
	close(s->fd);
	free(s);
	if (accept_paused) {
		accept_paused = false;
		want_accept();
	}
}

static void on_accept(int fd)
{
	struct session *s;

	if (fd == -EINTR || fd == -ECONNABORTED) {
		want_accept();
		return;
	}
	if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
		/* Another accept now would fail at once, again and again:
		 * the next one waits for a session to close. */
		fprintf(stderr, "io_uring_idle: accept: %s (paused until a "
			"connection closes)\n", strerror(-fd));
		accept_paused = true;
		return;
	}
	if (fd < 0) {
		fprintf(stderr, "io_uring_idle: accept: %s\n", strerror(-fd));
		exit(1);
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		exit(1);
	s->fd = fd;
	s->last_read = now_ms();
	tw_timer_init(&s->idle, on_idle);
	tw_wheel_add(&wheel, &s->idle, s->last_read + IDLE_MS);
	want_recv(s);
	accepted++;
	want_accept(); /* one accept in flight at all times */
}

static void on_recv(struct session *s, int res)
{
	if (s->closing) {
		session_close(s);
		sessions_closed++;
		return;
	}
	if (res <= 0) {
		/* The peer hung up, or the connection failed: no receive is
		 * in flight any more, so the idle timer's shutdown would
		 * complete nothing and the session would never be closed. */
		tw_wheel_cancel(&wheel, &s->idle);
		session_close(s);
		sessions_hung_up++;
		return;
	}
	s->last_read = now_ms();
	tw_wheel_reschedule(&wheel, &s->idle, s->last_read + IDLE_MS);
	want_recv(s);
}

/* ---- the clients ---- */

static void on_talk(struct tw_wheel *w, struct tw_timer *t)
{
	struct peer *p = tw_container_of(t, struct peer, talk);

	if (send(p->fd, "x", 1, 0) != 1) {
		perror("io_uring_idle: send");
		exit(1);
	}
	if (--p->talks_left > 0)
		tw_wheel_add(w, t, tw_wheel_now(w) + TALK_MS);
}

/* Room for n connections, each two descriptors here (the server's end
 * and the client's), and a few more: the soft limit raised up to the
 * hard one where it is lower (a common default is 1024), as a server
 * does; false where even that is too few. */
static bool room_for(int n)
{
	rlim_t need = 2 * (rlim_t)n + 32;
	struct rlimit lim;

	if (getrlimit(RLIMIT_NOFILE, &lim))
		return true; /* the accepts will say */
	if (lim.rlim_cur >= need)
		return true;
	if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) {
		fprintf(stderr, "io_uring_idle: %d connections need about %llu file "
				"descriptors; the limit is %llu (ulimit -n)\n",
			n, (unsigned long long)need, (unsigned long long)lim.rlim_max);
		return false;
	}
	lim.rlim_cur = need;
	return setrlimit(RLIMIT_NOFILE, &lim) == 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr;
	socklen_t len = sizeof(addr);
	struct peer *peers;
	int64_t start;
	int rc;

	wanted = argc > 1 ? atoi(argv[1]) : 100;
	if (wanted < 1 || wanted > 1000) {
		fprintf(stderr, "usage: io_uring_idle [CONNECTIONS 1..1000]\n");
		return 2;
	}
	if (!room_for(wanted))
		return 2;
	rc = io_uring_queue_init(256, &ring, 0);
	if (rc < 0) {
		fprintf(stderr, "skipped: io_uring_idle: the kernel refused "
			"io_uring (io_uring_queue_init: %s)\n", strerror(-rc));
		return 77;
	}
	start = now_ms();
	if (tw_wheel_init(&wheel, 1, 64, start, TW_MODE_EXACT))
		return 1;

	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    listen(listen_fd, 1024) ||
	    getsockname(listen_fd, (struct sockaddr *)&addr, &len)) {
		perror("io_uring_idle: listen");
		return 1;
	}
	/* The clients connect at once: the backlog holds them until the
	 * server's accepts come through the ring. */
	peers = calloc((size_t)wanted, sizeof(*peers));
	if (!peers)
		return 1;
	for (int i = 0; i < wanted; i++) {
		struct peer *p = &peers[i];

		p->talks_left = i % 4;
		tw_timer_init(&p->talk, on_talk);
		p->fd = socket(AF_INET, SOCK_STREAM, 0);
		if (p->fd < 0 || connect(p->fd, (struct sockaddr *)&addr, len)) {
			perror("io_uring_idle: connect");
			return 1;
		}
		if (p->talks_left)
			tw_wheel_add(&wheel, &p->talk, now_ms() + TALK_MS);
	}
	want_accept();

	/* The loop: submit, wait until a completion or the wheel's next
	 * expiry, handle the completions, advance the wheel. */
	while (sessions_closed + sessions_hung_up < wanted &&
	       now_ms() - start < GIVE_UP_MS) {
		int64_t timeout = tw_wheel_timeout(&wheel, now_ms());
		struct __kernel_timespec ts;
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;

		if (timeout < 0 || timeout > 1000)
			timeout = 1000; /* nothing due soon: look again in 1 s */
		ts.tv_sec = timeout / 1000;
		ts.tv_nsec = (timeout % 1000) * 1000000;
		io_uring_submit(&ring);
		rc = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
		if (rc < 0 && rc != -ETIME && rc != -EINTR) {
			fprintf(stderr, "io_uring_idle: wait: %s\n", strerror(-rc));
			return 1;
		}
		io_uring_for_each_cqe(&ring, head, cqe) {
			uint64_t tag = io_uring_cqe_get_data64(cqe);

			/* A kernel without IORING_FEAT_EXT_ARG (before 5.11):
			 * the wait's timeout is liburing's own request, and
			 * its completion is here too. */
			if (tag == LIBURING_UDATA_TIMEOUT) {
				seen++;
				continue;
			}
			if (tag == ACCEPT_TAG)
				on_accept(cqe->res);
			else
				on_recv(io_uring_cqe_get_data(cqe), cqe->res);
			seen++;
		}
		io_uring_cq_advance(&ring, seen);
		tw_wheel_advance(&wheel, now_ms());
	}

	printf("io_uring_idle: %d connections, %d closed by their idle timeout "
	       "after %d ms of silence, %d early, worst %lld ms late, %lld ms in "
	       "all\n", wanted, sessions_closed, IDLE_MS, sessions_early,
	       (long long)worst_late, (long long)(now_ms() - start));
	if (sessions_hung_up)
		printf("io_uring_idle: %d connections hung up by their peer\n",
		       sessions_hung_up);

	for (int i = 0; i < wanted; i++) {
		if (tw_timer_pending(&peers[i].talk))
			tw_wheel_cancel(&wheel, &peers[i].talk);
		close(peers[i].fd);
	}
	free(peers);
	rc = sessions_closed == wanted && sessions_early == 0 ? 0 : 1;
	/* Only after a give-up: sessions still open leak here, and the
	 * exit status already says so. */
	io_uring_queue_exit(&ring);
	close(listen_fd);
	tw_wheel_destroy(&wheel);
	return rc;
}
