/* SPDX-License-Identifier: MIT */
/*
 * A timing wheel inside a libuv loop: one uv_timer_t drives the wheel.
 *
 * libuv keeps its timers in a binary heap (O(log n) per start/stop). A
 * server with a million connections whose idle timeouts move on every read
 * can keep them all in one wheel instead and give libuv a single timer:
 * before the loop polls (a uv_prepare_t), that timer is set to the wheel's
 * next expiry; when it fires, the wheel advances to uv_now(). The wheel's
 * clock is the loop's clock (milliseconds).
 *
 * The scenario is much the epoll example's, with exact timers (no window)
 * and its own numbers: a server on 127.0.0.1 closes a connection after
 * IDLE_MS without a byte; the clients in this process send one byte every
 * TALK_MS, i % 4 times, then fall silent.
 *
 *     libuv_idle [CONNECTIONS]     (default 100)
 *
 * A second part drives a manual timer service (no reaper thread) the same
 * way: one uv_timer_t set, before each poll, to tw_service_timeout(), and
 * tw_service_poll() when it fires. A worker thread adds timers to the
 * service while the loop sleeps, on an answer that did not know of them;
 * the service wakes the loop with uv_async_send(), the function the loop
 * gave it (tw_service_set_wake), and the loop asks again.
 *
 * Exit status 0 when every connection was closed by its idle timeout, none
 * early, and every service timer ran once, none early; 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L /* uv.h needs pthread_rwlock_t */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#include <timingwheel/timingwheel.h>

enum { IDLE_MS = 250, TALK_MS = 80, GIVE_UP_MS = 20000 };

struct session {              /* the server's side of a connection */
	uv_tcp_t tcp;
	uint64_t last_read;
	struct tw_timer idle;
};

struct peer {                 /* a client, with a timer that makes it talk */
	uv_tcp_t tcp;
	uv_connect_t connecting;
	int talks_left;
	struct tw_timer talk;
};

static uv_loop_t *loop;
static struct tw_wheel wheel;
static uv_timer_t driver;     /* the one libuv timer */
static uv_prepare_t rearm;
static uv_tcp_t server;
static int sessions_closed, sessions_hung_up, sessions_early, peers_open;
static int64_t worst_late;
static int wanted;

static void check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", what, uv_strerror(rc));
		exit(1);
	}
}

/* ---- the integration: two callbacks ---- */

static void drive(uv_timer_t *timer)
{
	(void)timer;
	tw_wheel_advance(&wheel, (int64_t)uv_now(loop));
}

/* Before every poll: the libuv timer follows the wheel's next expiry. */
static void follow_wheel(uv_prepare_t *prepare)
{
	int64_t timeout = tw_wheel_timeout(&wheel, (int64_t)uv_now(loop));

	(void)prepare;
	if (timeout < 0)
		uv_timer_stop(&driver);
	else
		uv_timer_start(&driver, drive, (uint64_t)timeout, 0);
}

/* ---- the server ---- */

static void session_freed(uv_handle_t *handle)
{
	free(tw_container_of((uv_tcp_t *)handle, struct session, tcp));
	if (sessions_closed + sessions_hung_up == wanted)
		uv_close((uv_handle_t *)&server, NULL);
}

static void free_session(uv_handle_t *handle)
{
	sessions_closed++;
	session_freed(handle);
}

static void free_hung_up(uv_handle_t *handle)
{
	sessions_hung_up++;
	session_freed(handle);
}

static void on_idle(struct tw_wheel *w, struct tw_timer *t)
{
	struct session *s = tw_container_of(t, struct session, idle);
	int64_t silent = tw_wheel_now(w) - (int64_t)s->last_read;

	if (silent < IDLE_MS)
		sessions_early++;
	if (silent - IDLE_MS > worst_late)
		worst_late = silent - IDLE_MS;
	uv_close((uv_handle_t *)&s->tcp, free_session);
}

static void alloc_buffer(uv_handle_t *handle, size_t hint, uv_buf_t *buf)
{
	static char storage[256];

	(void)handle;
	(void)hint;
	*buf = uv_buf_init(storage, sizeof(storage));
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf)
{
	struct session *s = tw_container_of((uv_tcp_t *)stream, struct session, tcp);

	(void)buf;
	if (n == 0)
		return; /* nothing read this time (EAGAIN) */
	if (n < 0) {
		/* UV_EOF (the peer hung up) or an error: closed now, as
		 * libuv asks, not left open until its idle timer. */
		tw_wheel_cancel(&wheel, &s->idle);
		uv_close((uv_handle_t *)&s->tcp, free_hung_up);
		return;
	}
	s->last_read = uv_now(loop);
	tw_wheel_reschedule(&wheel, &s->idle, (int64_t)s->last_read + IDLE_MS);
}

static void on_connection(uv_stream_t *listener, int status)
{
	struct session *s = calloc(1, sizeof(*s));

	check(status, "listen");
	if (!s)
		exit(1);
	check(uv_tcp_init(loop, &s->tcp), "uv_tcp_init");
	check(uv_accept(listener, (uv_stream_t *)&s->tcp), "uv_accept");
	s->last_read = uv_now(loop);
	tw_timer_init(&s->idle, on_idle);
	tw_wheel_add(&wheel, &s->idle, (int64_t)s->last_read + IDLE_MS);
	check(uv_read_start((uv_stream_t *)&s->tcp, alloc_buffer, on_read), "read");
}

/* ---- the clients ---- */

static void on_talk(struct tw_wheel *w, struct tw_timer *t)
{
	struct peer *p = tw_container_of(t, struct peer, talk);
	static char x[] = "x";
	uv_buf_t byte = uv_buf_init(x, 1);

	check(uv_try_write((uv_stream_t *)&p->tcp, &byte, 1), "uv_try_write");
	if (--p->talks_left > 0)
		tw_wheel_add(w, t, tw_wheel_now(w) + TALK_MS);
}

static void on_connected(uv_connect_t *req, int status)
{
	struct peer *p = tw_container_of(req, struct peer, connecting);

	check(status, "connect");
	peers_open++;
	if (p->talks_left)
		tw_wheel_add(&wheel, &p->talk, (int64_t)uv_now(loop) + TALK_MS);
}

static void give_up(uv_timer_t *timer)
{
	fprintf(stderr, "libuv_idle: gave up after %d ms\n", GIVE_UP_MS);
	uv_stop(timer->loop);
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
static uv_timer_t svc_driver;
static uv_prepare_t svc_rearm;
static uv_async_t svc_wake;
static int svc_ran, svc_early;

static void on_job(struct tw_service *s, struct tw_service_timer *t)
{
	struct job *j = tw_container_of(t, struct job, timer);

	svc_early += tw_service_now(s) < j->due;
	j->runs++;
	svc_ran++;
}

static void svc_drive(uv_timer_t *timer)
{
	(void)timer;
	if (tw_service_poll(svc) < 0)
		exit(1);
}

/* Before each poll: the driver at the service's next expiry, in
 * milliseconds rounded up (never before it is due). */
static void svc_follow(uv_prepare_t *prepare)
{
	int64_t ns = tw_service_timeout(svc, tw_service_now(svc));

	(void)prepare;
	if (ns < 0)
		uv_timer_stop(&svc_driver);
	else
		uv_timer_start(&svc_driver, svc_drive,
			       (uint64_t)(ns / TW_MS(1) + (ns % TW_MS(1) != 0)), 0);
}

static void svc_woken(uv_async_t *async)
{
	(void)async; /* the prepare that follows re-arms the driver */
}

/* Called by the service from the adding thread, else the loop sleeps on
 * an older timeout. */
static void wake_loop(void *arg)
{
	uv_async_send(arg);
}

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < SVC_TIMERS; i++) {
		struct job *j = &jobs[i];

		tw_service_timer_init(&j->timer, on_job);
		j->due = tw_service_now(svc) + TW_MS(1 + i * SVC_SPREAD_MS / SVC_TIMERS);
		if (tw_service_add(svc, &j->timer, j->due))
			exit(1);
	}
	return NULL;
}

static int manual_service_in_libuv(void)
{
	struct tw_service_config cfg = { .manual = true };
	uint64_t start = uv_now(loop);
	int fails = 0;
	pthread_t th;

	if (tw_service_create(&svc, &cfg))
		return 1;
	uv_timer_init(loop, &svc_driver);
	uv_prepare_init(loop, &svc_rearm);
	uv_prepare_start(&svc_rearm, svc_follow);
	check(uv_async_init(loop, &svc_wake, svc_woken), "uv_async_init");
	if (tw_service_set_wake(svc, wake_loop, &svc_wake))
		return 1;
	if (pthread_create(&th, NULL, worker, NULL))
		return 1;
	while (svc_ran < SVC_TIMERS && uv_now(loop) - start < GIVE_UP_MS) {
		uv_run(loop, UV_RUN_ONCE);
		uv_update_time(loop);
	}
	pthread_join(th, NULL);
	for (int i = 0; i < SVC_TIMERS; i++)
		fails += jobs[i].runs != 1;
	printf("libuv_idle: manual service: %d timers added by another thread, "
	       "%d ran, %d early, %d more or less than once\n",
	       SVC_TIMERS, svc_ran, svc_early, fails);
	uv_close((uv_handle_t *)&svc_driver, NULL);
	uv_close((uv_handle_t *)&svc_rearm, NULL);
	uv_close((uv_handle_t *)&svc_wake, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	if (tw_service_destroy(svc))
		fails++;
	return svc_ran == SVC_TIMERS && svc_early == 0 && fails == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr;
	struct sockaddr_storage bound;
	int len = sizeof(bound);
	struct peer *peers;
	uv_timer_t watchdog;
	uint64_t start;

	wanted = argc > 1 ? atoi(argv[1]) : 100;
	if (wanted < 1 || wanted > 10000) {
		fprintf(stderr, "usage: libuv_idle [CONNECTIONS 1..10000]\n");
		return 2;
	}
	loop = uv_default_loop();
	start = uv_now(loop);
	if (tw_wheel_init(&wheel, 1, 64, (int64_t)start, TW_MODE_EXACT))
		return 1;
	uv_timer_init(loop, &driver);
	uv_prepare_init(loop, &rearm);
	uv_prepare_start(&rearm, follow_wheel);
	uv_timer_init(loop, &watchdog);
	uv_timer_start(&watchdog, give_up, GIVE_UP_MS, 0);
	uv_unref((uv_handle_t *)&watchdog); /* it does not keep the loop alive */

	check(uv_ip4_addr("127.0.0.1", 0, &addr), "uv_ip4_addr");
	check(uv_tcp_init(loop, &server), "uv_tcp_init");
	check(uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0), "bind");
	check(uv_listen((uv_stream_t *)&server, 1024, on_connection), "listen");
	check(uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &len), "getsockname");

	peers = calloc((size_t)wanted, sizeof(*peers));
	if (!peers)
		return 1;
	for (int i = 0; i < wanted; i++) {
		struct peer *p = &peers[i];

		p->talks_left = i % 4;
		tw_timer_init(&p->talk, on_talk);
		check(uv_tcp_init(loop, &p->tcp), "uv_tcp_init");
		check(uv_tcp_connect(&p->connecting, &p->tcp,
				     (const struct sockaddr *)&bound, on_connected),
		      "uv_tcp_connect");
	}

	/* Runs until the server closed every session (then it closes itself). */
	while (sessions_closed + sessions_hung_up < wanted &&
	       uv_now(loop) - start < GIVE_UP_MS)
		uv_run(loop, UV_RUN_ONCE);

	printf("libuv_idle: %d connections, %d closed by their idle timeout after "
	       "%d ms of silence, %d early, worst %lld ms late, %llu ms in all\n",
	       wanted, sessions_closed, IDLE_MS, sessions_early,
	       (long long)worst_late, (unsigned long long)(uv_now(loop) - start));

	for (int i = 0; i < wanted; i++)
		uv_close((uv_handle_t *)&peers[i].tcp, NULL);
	uv_close((uv_handle_t *)&driver, NULL);
	uv_close((uv_handle_t *)&rearm, NULL);
	uv_close((uv_handle_t *)&watchdog, NULL);
	if (!uv_is_closing((uv_handle_t *)&server))
		uv_close((uv_handle_t *)&server, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	free(peers);
	tw_wheel_destroy(&wheel);
	{
		int svc_failed = manual_service_in_libuv();

		check(uv_loop_close(loop), "uv_loop_close");
		return sessions_closed == wanted && sessions_early == 0 &&
				       peers_open == wanted && !svc_failed
			       ? 0 : 1;
	}
}
