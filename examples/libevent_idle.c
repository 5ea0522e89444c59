/* SPDX-License-Identifier: MIT */
/*
 * A timing wheel inside a libevent loop: one timer event drives the wheel.
 *
 * libevent keeps its timers in a min-heap (O(log n) per add and delete).
 * A server whose idle timeouts move on every read can keep them all in one
 * wheel instead and give libevent a single timer event, re-armed at the
 * wheel's next expiry whenever a callback may have changed the wheel
 * (libevent 2.1 has no "before poll" hook, so each callback that touches
 * the wheel ends with follow_wheel()). The wheel's clock is
 * CLOCK_MONOTONIC in milliseconds, not the loop's cached time, which is
 * wall-clock time: an NTP step or `date -s` would close live connections
 * early, or none for the length of a step back. libevent's timer takes a
 * relative timeout, so the two clocks need not agree. A connection whose
 * peer hangs up, or that fails, is closed at once, its timer cancelled.
 *
 * The scenario is much the epoll example's, with exact timers (no window)
 * and its own numbers: a server on 127.0.0.1 closes a connection after
 * IDLE_MS without a byte; the clients in this process send one byte every
 * TALK_MS, i % 4 times, then fall silent.
 *
 *     libevent_idle [CONNECTIONS]     (default 100)
 *
 * Exit status 0 when every connection was closed by its idle timeout, none
 * early; 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include <timingwheel/timingwheel.h>

enum { IDLE_MS = 250, TALK_MS = 80, GIVE_UP_MS = 20000 };

struct session {              /* the server's side of a connection */
	struct bufferevent *bev;
	int64_t last_read;
	struct tw_timer idle;
};

struct peer {                 /* a client, with a timer that makes it talk */
	struct bufferevent *bev;
	int talks_left;
	struct tw_timer talk;
};

static struct event_base *base;
static struct tw_wheel wheel;
static struct event *driver;  /* the one libevent timer */
static struct evconnlistener *listener;
static int sessions_closed, sessions_hung_up, sessions_early, peers_open;
static int64_t worst_late;
static int wanted;
static bool gave_up;

/* The wheel's clock, in ms: monotonic, whatever the wall clock does. */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the integration: the driver and its re-arming ---- */

/* After anything that may have changed the wheel: the libevent timer
 * follows the wheel's next expiry (or stops when nothing is pending). */
static void follow_wheel(void)
{
	int64_t timeout = tw_wheel_timeout(&wheel, now_ms());
	struct timeval tv;

	if (timeout < 0) {
		event_del(driver);
		return;
	}
	tv.tv_sec = (time_t)(timeout / 1000);
	tv.tv_usec = (suseconds_t)(timeout % 1000) * 1000;
	event_add(driver, &tv);
}

static void drive(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (tw_wheel_advance(&wheel, now_ms()) < 0) {
		fprintf(stderr, "libevent_idle: tw_wheel_advance failed\n");
		exit(1);
	}
	follow_wheel();
}

/* ---- the server ---- */

static void close_session(struct session *s)
{
	bufferevent_free(s->bev);
	free(s);
	if (sessions_closed + sessions_hung_up == wanted)
		event_base_loopbreak(base);
}

static void on_idle(struct tw_wheel *w, struct tw_timer *t)
{
	struct session *s = tw_container_of(t, struct session, idle);
	int64_t silent = tw_wheel_now(w) - s->last_read;

	if (silent < IDLE_MS)
		sessions_early++;
	if (silent - IDLE_MS > worst_late)
		worst_late = silent - IDLE_MS;
	sessions_closed++;
	close_session(s);
}

/* The peer hung up, or the connection failed: closed now, not left
 * open until its idle timer. */
static void on_session_event(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;

	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		tw_wheel_cancel(&wheel, &s->idle);
		sessions_hung_up++;
		close_session(s);
		follow_wheel();
	}
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;

	evbuffer_drain(bufferevent_get_input(bev),
		       evbuffer_get_length(bufferevent_get_input(bev)));
	s->last_read = now_ms();
	tw_wheel_reschedule(&wheel, &s->idle, s->last_read + IDLE_MS);
	follow_wheel();
}

static void on_connection(struct evconnlistener *l, evutil_socket_t fd,
			  struct sockaddr *addr, int len, void *arg)
{
	struct session *s = calloc(1, sizeof(*s));

	(void)l;
	(void)addr;
	(void)len;
	(void)arg;
	if (!s)
		exit(1);
	s->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!s->bev)
		exit(1);
	bufferevent_setcb(s->bev, on_read, NULL, on_session_event, s);
	bufferevent_enable(s->bev, EV_READ);
	s->last_read = now_ms();
	tw_timer_init(&s->idle, on_idle);
	tw_wheel_add(&wheel, &s->idle, s->last_read + IDLE_MS);
	follow_wheel();
}

static void close_handed_back(struct tw_wheel *w, struct tw_timer *t)
{
	struct session *s = tw_container_of(t, struct session, idle);

	(void)w;
	bufferevent_free(s->bev);
	free(s);
}

/* ---- the clients ---- */

static void on_talk(struct tw_wheel *w, struct tw_timer *t)
{
	struct peer *p = tw_container_of(t, struct peer, talk);

	bufferevent_write(p->bev, "x", 1);
	if (--p->talks_left > 0)
		tw_wheel_add(w, t, tw_wheel_now(w) + TALK_MS);
}

static void on_peer_event(struct bufferevent *bev, short what, void *arg)
{
	struct peer *p = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		peers_open++;
		if (p->talks_left)
			tw_wheel_add(&wheel, &p->talk, now_ms() + TALK_MS);
		follow_wheel();
	}
}

static void give_up(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	fprintf(stderr, "libevent_idle: gave up after %d ms\n", GIVE_UP_MS);
	gave_up = true;
	event_base_loopbreak(base);
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr;
	struct sockaddr_storage bound;
	socklen_t len = sizeof(bound);
	struct timeval give_up_after = { GIVE_UP_MS / 1000, 0 };
	struct event *watchdog;
	struct peer *peers;
	int64_t start;

	wanted = argc > 1 ? atoi(argv[1]) : 100;
	if (wanted < 1 || wanted > 10000) {
		fprintf(stderr, "usage: libevent_idle [CONNECTIONS 1..10000]\n");
		return 2;
	}
	base = event_base_new();
	if (!base)
		return 1;
	event_base_update_cache_time(base);
	start = now_ms();
	if (tw_wheel_init(&wheel, 1, 64, start, TW_MODE_EXACT))
		return 1;
	driver = evtimer_new(base, drive, NULL);
	watchdog = evtimer_new(base, give_up, NULL);
	if (!driver || !watchdog)
		return 1;
	evtimer_add(watchdog, &give_up_after);

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listener = evconnlistener_new_bind(base, on_connection, NULL,
					   LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
					   1024, (struct sockaddr *)&addr, sizeof(addr));
	if (!listener ||
	    getsockname(evconnlistener_get_fd(listener), (struct sockaddr *)&bound,
			&len) != 0) {
		perror("libevent_idle: listen");
		return 1;
	}

	peers = calloc((size_t)wanted, sizeof(*peers));
	if (!peers)
		return 1;
	for (int i = 0; i < wanted; i++) {
		struct peer *p = &peers[i];

		p->talks_left = i % 4;
		tw_timer_init(&p->talk, on_talk);
		p->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
		if (!p->bev)
			return 1;
		bufferevent_setcb(p->bev, NULL, NULL, on_peer_event, p);
		if (bufferevent_socket_connect(p->bev, (struct sockaddr *)&bound,
					       (int)len) != 0) {
			perror("libevent_idle: connect");
			return 1;
		}
	}

	/* Runs until the server closed every session (or the watchdog). */
	event_base_dispatch(base);

	printf("libevent_idle: %d connections, %d closed by their idle timeout "
	       "after %d ms of silence, %d early, worst %lld ms late, %lld ms in "
	       "all\n", wanted, sessions_closed, IDLE_MS, sessions_early,
	       (long long)worst_late, (long long)(now_ms() - start));

	for (int i = 0; i < wanted; i++) {
		if (tw_timer_pending(&peers[i].talk))
			tw_wheel_cancel(&wheel, &peers[i].talk);
		bufferevent_free(peers[i].bev);
	}
	free(peers);
	/* Sessions still open (only if the watchdog fired): the wheel hands
	 * their timers back, and they are closed uncounted. */
	tw_wheel_drain(&wheel, close_handed_back);
	tw_wheel_destroy(&wheel);
	evconnlistener_free(listener);
	event_free(driver);
	event_free(watchdog);
	event_base_free(base);
	return !gave_up && sessions_closed == wanted && sessions_early == 0 &&
			       peers_open == wanted
		       ? 0 : 1;
}
