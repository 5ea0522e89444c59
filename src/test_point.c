/* SPDX-License-Identifier: MIT */
/*
 * test_point.c — the hook behind TW_TEST_POINT, in test builds only
 * (test_point.h says why). One atomic load when no hook is installed.
 */
#include <stdatomic.h>
#include <stddef.h>

#include "test_point.h"

static _Atomic(tw__test_hook_fn *) hook;

void tw__test_set_hook(tw__test_hook_fn *fn)
{
	atomic_store(&hook, fn);
}

void tw__test_point(const char *point, const void *obj)
{
	tw__test_hook_fn *fn = atomic_load_explicit(&hook, memory_order_acquire);

	if (fn)
		fn(point, obj);
}

static _Atomic(tw__test_fail_fn *) fail;

void tw__test_set_fail(tw__test_fail_fn *fn)
{
	atomic_store(&fail, fn);
}

bool tw__test_fail(const char *point, const void *obj)
{
	tw__test_fail_fn *fn = atomic_load_explicit(&fail, memory_order_acquire);

	return fn && fn(point, obj);
}
