/* SPDX-License-Identifier: MIT */
/*
 * Idle timeouts for many TCP connections in an epoll loop.
 *
 * A server on 127.0.0.1 closes every connection that has been silent for
 * IDLE_MS. Each read moves the connection's timer (O(1), no allocation), and
 * the wheel's next expiry is the epoll_wait timeout, so the loop sleeps
 * exactly until there is work. A connection whose peer hangs up is closed
 * at once, its timer cancelled.
 *
 * The timeout is a window: the wheel fires it never before IDLE_MS of
 * silence and at most IDLE_SLACK_MS after (tw_wheel_add_range /
 * tw_wheel_reschedule_range); how late the loop itself wakes, on a busy
 * machine, comes on top of that.
 * Nobody needs an idle connection closed to the millisecond, and the
 * slack buys two things: each timer is filed once, in a bucket that pops
 * inside its window, and never moved down a level before it fires; and
 * the connections whose windows overlap share that bucket, so the loop
 * wakes once for all of them instead of once per connection (the run
 * prints how many times it woke for timers: a median of 14 in nine runs
 * here, against 20 with IDLE_SLACK_MS 0, the exact timeout, for the
 * default 200 connections; a loaded machine wakes it more often, for
 * either). To be self-contained the same
 * process plays the clients: client i sends one byte every TALK_MS, i % 5
 * times, then goes quiet, and the server must close it IDLE_MS after its
 * last byte -- never earlier.
 *
 *     epoll_idle [CONNECTIONS]     (default 200)
 *
 * Each connection is two descriptors here: the soft limit on them is
 * raised to what CONNECTIONS needs, up to the hard limit (ulimit -Hn);
 * past that the run refuses with exit status 2.
 *
 * A second part drives a manual timer service (no reaper thread) from the
 * same kind of loop: tw_service_timeout() is the epoll_wait timeout, and
 * tw_service_poll() runs what is due. A worker thread adds timers while
 * the loop sleeps: the loop's next tw_service_timeout() sees such an add,
 * but only once the loop is awake to ask. So the loop gives the service
 * its eventfd (tw_service_set_wake), which the first add after each
 * question writes to; the loop reads it before it asks again.
 *
 * Exit status 0 when every connection was closed by its idle timeout, none
 * early, and every service timer ran once, none early; 1 otherwise.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <timingwheel/timingwheel.h>

enum { IDLE_MS = 300, IDLE_SLACK_MS = 100, TALK_MS = 100, GIVE_UP_MS = 20000 };

struct conn {                 /* the server's side of a connection */
	int fd;
	int64_t last_read;
	struct tw_timer idle;
};

struct client {               /* the peer, driven by a timer of its own */
	int fd;
	int talks_left;
	struct tw_timer talk;
};

static struct tw_wheel wheel;
static int ep, listener;
static bool accept_paused;    /* out of descriptors: the listener is off */
static int closed, hung_up, early, timer_wakes;
static int64_t worst_late;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Out of epoll before the close: close() alone takes a descriptor out of
 * the set only when no other copy of it is open (one a fork or an
 * exec'd child holds), and epoll would go on reporting the freed
 * connection. A descriptor freed lets a paused listener accept again. */
static void conn_close(struct conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c);
	if (accept_paused) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

		if (epoll_ctl(ep, EPOLL_CTL_MOD, listener, &ev) == 0)
			accept_paused = false;
	}
}

static void on_idle(struct tw_wheel *w, struct tw_timer *t)
{
	struct conn *c = tw_container_of(t, struct conn, idle);
	int64_t silent = tw_wheel_now(w) - c->last_read;

	/* The wheel's clock is the loop's clock, so this is what the user sees. */
	if (silent < IDLE_MS)
		early++;
	if (silent - IDLE_MS > worst_late)
		worst_late = silent - IDLE_MS;
	conn_close(c);
	closed++;
}

static void on_talk(struct tw_wheel *w, struct tw_timer *t)
{
	struct client *cl = tw_container_of(t, struct client, talk);

	if (send(cl->fd, "x", 1, MSG_NOSIGNAL) != 1)
		die("send");
	if (--cl->talks_left > 0)
		tw_wheel_add(w, t, tw_wheel_now(w) + TALK_MS);
}

static void accept_all(void)
{
	for (;;) {
		struct epoll_event ev = { .events = EPOLLIN };
		struct conn *c;
		/* Non-blocking (a readiness report may be stale), and not
		 * inherited by a child the server forks or execs. */
		int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (fd < 0 && (errno == EMFILE || errno == ENFILE ||
			       errno == ENOBUFS || errno == ENOMEM)) {
			/* The level-triggered listener would report the
			 * waiting connection at every wait: off until a
			 * connection closes (conn_close). */
			struct epoll_event off = { .events = 0, .data.ptr = NULL };

			perror("accept (paused until a connection closes)");
			if (epoll_ctl(ep, EPOLL_CTL_MOD, listener, &off))
				die("epoll_ctl");
			accept_paused = true;
			return;
		}
		if (fd < 0)
			die("accept");
		c = calloc(1, sizeof(*c));
		if (!c)
			die("calloc");
		c->fd = fd;
		c->last_read = now_ms();
		tw_timer_init(&c->idle, on_idle);
		tw_wheel_add_range(&wheel, &c->idle, c->last_read + IDLE_MS,
				   c->last_read + IDLE_MS + IDLE_SLACK_MS);
		ev.data.ptr = c;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
			die("epoll_ctl");
	}
}

static void on_readable(struct conn *c)
{
	char buf[256];
	ssize_t n = read(c->fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* The peer hung up (or the connection failed): closed now.
		 * Left to its idle timer, the socket would stay readable, and
		 * the level-triggered wait would return at once, every time,
		 * until the timer fired. One wait reports a descriptor once,
		 * so no event of this wait still names c. */
		tw_wheel_cancel(&wheel, &c->idle);
		conn_close(c);
		hung_up++;
		return;
	}
	c->last_read = now_ms();
	/* The line this library exists for: an O(1) move on every read (and
	 * none at all while the timer's bucket still pops inside the new
	 * window). */
	tw_wheel_reschedule_range(&wheel, &c->idle, c->last_read + IDLE_MS,
				  c->last_read + IDLE_MS + IDLE_SLACK_MS);
}

/* ---- a manual service in the same loop ---- */

enum { SVC_TIMERS = 64, SVC_SPREAD_MS = 80 };

struct job {
	struct tw_service_timer timer;
	int64_t due;              /* ns, on the service's clock */
	int runs;
};

static struct job jobs[SVC_TIMERS];
static struct tw_service *svc;
static int wake_fd;           /* the worker's eventfd */
static int svc_ran, svc_early, svc_wakes;

static void on_job(struct tw_service *s, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, timer);

	svc_early += tw_service_now(s) < j->due;
	j->runs++;
	svc_ran++;
}

/* The loop's wake-up, called by the service from the adding thread: the
 * loop sleeps on a timeout computed before the add. */
static void wake_loop(void *arg)
{
	uint64_t one = 1;

	if (write(*(int *)arg, &one, sizeof(one)) != sizeof(one))
		die("write eventfd");
}

/* Another thread's adds: the service wakes the loop for them. */
static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < SVC_TIMERS; i++) {
		struct job *j = &jobs[i];

		tw_service_timer_init(&j->timer, on_job);
		j->due = tw_service_now(svc) + TW_MS(1 + i * SVC_SPREAD_MS / SVC_TIMERS);
		if (tw_service_add(svc, &j->timer, j->due))
			die("tw_service_add");
	}
	return NULL;
}

static int manual_service_in_epoll(void)
{
	struct tw_service_config cfg = { .manual = true };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &wake_fd };
	int64_t start_ns;
	int fails = 0;
	pthread_t th;

	if (tw_service_create(&svc, &cfg))
		die("tw_service_create");
	wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (wake_fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd, &ev))
		die("eventfd");
	if (tw_service_set_wake(svc, wake_loop, &wake_fd))
		die("tw_service_set_wake");
	start_ns = tw_service_now(svc);
	if (pthread_create(&th, NULL, worker, NULL))
		die("pthread_create");
	while (svc_ran < SVC_TIMERS &&
	       tw_service_now(svc) - start_ns < TW_MS(GIVE_UP_MS)) {
		struct epoll_event events[4];
		int64_t ns = tw_service_timeout(svc, tw_service_now(svc));
		/* Milliseconds rounded up: rounded down, the loop would wake
		 * before the timer is due and poll for nothing. (Not
		 * (ns + 999999) / 1000000, which overflows near INT64_MAX,
		 * the answer for nothing due on a custom clock.) */
		int64_t ms = ns < 0 ? -1 : ns / TW_MS(1) + (ns % TW_MS(1) != 0);
		int n = epoll_wait(ep, events, 4, ms > INT_MAX ? INT_MAX : (int)ms);
		uint64_t count;

		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		/* The eventfd read only when it is what fired (in a loop
		 * that also serves connections, most events are theirs). */
		for (int i = 0; i < n; i++)
			if (events[i].data.ptr == &wake_fd &&
			    read(wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
				die("read eventfd");
		svc_wakes += n == 0;
		if (tw_service_poll(svc) < 0)
			die("tw_service_poll");
	}
	pthread_join(th, NULL);
	for (int i = 0; i < SVC_TIMERS; i++)
		fails += jobs[i].runs != 1;
	printf("epoll_idle: manual service: %d timers added by another thread, "
	       "%d ran, %d early, %d more or less than once, %d wake-ups for "
	       "timers\n", SVC_TIMERS, svc_ran, svc_early, fails, svc_wakes);
	/* The service first: until it is gone, an add from another thread
	 * (none is left here) could write to a closed, or reused, fd. */
	if (tw_service_destroy(svc))
		fails++;
	close(wake_fd);
	return svc_ran == SVC_TIMERS && svc_early == 0 && fails == 0 ? 0 : 1;
}

/* Room for nconn connections, each two descriptors here (the server's
 * end and the client's), and a few more: the soft limit raised up to the
 * hard one where it is lower (a common default is 1024), as a server
 * does; false where even that is too few. */
static bool room_for(int nconn)
{
	rlim_t need = 2 * (rlim_t)nconn + 32;
	struct rlimit lim;

	if (getrlimit(RLIMIT_NOFILE, &lim))
		return true; /* the accepts will say */
	if (lim.rlim_cur >= need)
		return true;
	if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) {
		fprintf(stderr, "epoll_idle: %d connections need about %llu file descriptors; "
				"the limit is %llu (ulimit -n)\n",
			nconn, (unsigned long long)need, (unsigned long long)lim.rlim_max);
		return false;
	}
	lim.rlim_cur = need;
	return setrlimit(RLIMIT_NOFILE, &lim) == 0;
}

int main(int argc, char **argv)
{
	int nconn = argc > 1 ? atoi(argv[1]) : 200;
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t len = sizeof(addr);
	struct epoll_event ev = { .events = EPOLLIN };
	struct client *clients;
	int64_t start;

	if (nconn < 1 || nconn > 10000) {
		fprintf(stderr, "usage: epoll_idle [CONNECTIONS 1..10000]\n");
		return 2;
	}
	if (!room_for(nconn))
		return 2;
	start = now_ms();
	if (tw_wheel_init(&wheel, 1, 64, start, TW_MODE_EXACT))
		die("tw_wheel_init");

	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof(addr)) ||
	    listen(listener, SOMAXCONN) ||
	    getsockname(listener, (struct sockaddr *)&addr, &len))
		die("listen");
	ep = epoll_create1(EPOLL_CLOEXEC);
	ev.data.ptr = NULL; /* NULL: the listener */
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev))
		die("epoll");

	clients = calloc((size_t)nconn, sizeof(*clients));
	if (!clients)
		die("calloc");
	for (int i = 0; i < nconn; i++) {
		struct client *cl = &clients[i];

		cl->fd = socket(AF_INET, SOCK_STREAM, 0);
		if (cl->fd < 0 || connect(cl->fd, (struct sockaddr *)&addr, sizeof(addr)))
			die("connect");
		cl->talks_left = i % 5;
		tw_timer_init(&cl->talk, on_talk);
		if (cl->talks_left)
			tw_wheel_add(&wheel, &cl->talk, now_ms() + TALK_MS);
		if (i % 64 == 63)
			accept_all(); /* keep the backlog short */
	}

	while (closed + hung_up < nconn && now_ms() - start < GIVE_UP_MS) {
		struct epoll_event events[64];
		int64_t timeout = tw_wheel_timeout(&wheel, now_ms());
		int n = epoll_wait(ep, events, 64,
				   timeout > INT_MAX ? INT_MAX : (int)timeout);

		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		timer_wakes += n == 0;
		for (int i = 0; i < n; i++) {
			if (events[i].data.ptr)
				on_readable(events[i].data.ptr);
			else
				accept_all();
		}
		/* After this wait's events, never before them: on_idle frees
		 * its connection, and an event of a freed connection may still
		 * be in events[]. */
		tw_wheel_advance(&wheel, now_ms());
	}

	printf("epoll_idle: %d connections, %d closed by their idle timeout after "
	       "%d ms of silence (+ up to %d), %d early, worst %lld ms late, "
	       "%d wake-ups for timers, %lld ms in all\n",
	       nconn, closed, IDLE_MS, IDLE_SLACK_MS, early, (long long)worst_late,
	       timer_wakes, (long long)(now_ms() - start));
	if (hung_up)
		printf("epoll_idle: %d connections hung up by their peer\n", hung_up);
	for (int i = 0; i < nconn; i++)
		close(clients[i].fd);
	free(clients);
	close(listener);
	/* Nothing may be pending now: every connection ended through its timer. */
	if (tw_wheel_count(&wheel) != 0)
		printf("epoll_idle: %zu timers still pending\n", tw_wheel_count(&wheel));
	tw_wheel_destroy(&wheel);
	{
		int svc_failed = manual_service_in_epoll();

		close(ep);
		return closed == nconn && early == 0 && !svc_failed ? 0 : 1;
	}
}
