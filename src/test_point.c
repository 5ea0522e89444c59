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
