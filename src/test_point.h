/* SPDX-License-Identifier: MIT */
/*
 * test_point.h — named points in the concurrent protocols where a test can
 * stop, yield or act.
 *
 * The races the service and the purgatory must survive are a few
 * instructions wide; a random stress test reaches them once in millions of
 * runs, if ever. So the library names the places where a thread's progress
 * matters to another (between a check and the act that depends on it), and
 * a test build (TW_TEST_HOOKS, the timingwheel_hooks library) calls a hook
 * there. tests/support/stop_points.h uses the hook to park a thread at a
 * point until the test releases it, which turns a one-in-a-million
 * interleaving into a deterministic test, and to shake the schedule at
 * random (seeded) in the soak run.
 *
 * In every other build TW_TEST_POINT expands to nothing: the shipped
 * library has no hook, no branch and no symbol for it.
 */
#ifndef TW_TEST_POINT_H
#define TW_TEST_POINT_H

#ifdef TW_TEST_HOOKS
#include <stdbool.h>

/* The hook a test installs; obj names the timer, op or service involved. */
typedef void tw__test_hook_fn(const char *point, const void *obj);
void tw__test_set_hook(tw__test_hook_fn *fn);
void tw__test_point(const char *point, const void *obj);
#define TW_TEST_POINT(point, obj) tw__test_point(point, obj)
/* Whether the allocation at this point should fail: a path that only an
 * out-of-memory reaches, made reachable from a forced-interleaving test
 * (library_overload fails malloc itself, but cannot stop a thread). */
typedef bool tw__test_fail_fn(const char *point, const void *obj);
void tw__test_set_fail(tw__test_fail_fn *fn);
bool tw__test_fail(const char *point, const void *obj);
#define TW_TEST_FAIL(point, obj) tw__test_fail(point, obj)
#include <stdint.h>
/* The next service's owner id: the one after id (src/service/lifecycle.c). */
void tw__test_service_next_id(uint32_t id);
/* The reaper's last sleep: ns, -1 until kicked, 0 none (src/service/run.c). */
struct tw_service;
int64_t tw__test_service_sleep_ns(const struct tw_service *svc);
#else
#define TW_TEST_POINT(point, obj) ((void)0)
#define TW_TEST_FAIL(point, obj) false
#endif

#endif
