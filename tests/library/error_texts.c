/* SPDX-License-Identifier: MIT */
/*
 * tw_strerror() (docs/bad-input.md, row E1): every code has a text of its
 * own, never NULL, and each text is true of every call that returns the
 * code, in every layer: 0 after an add, 1 and 2 as the cancels' results
 * and as counts, TW_ECORRUPT naming the likely mistake and what avoids
 * it; a negative value that is no code is "unknown", a positive one a
 * count.
 */
#include <string.h>

#include "check.h"

/* E1: every value a call returns has its own description (the cancels'
 * results included); a negative value that is no code is "unknown", a
 * positive one a count. */
static void test_error_strings(void)
{
	static const int codes[] = { TW_OK, TW_EINVAL, TW_ENOMEM, TW_EBUSY,
		TW_ERANGE, TW_EOWNER, TW_EREENTER, TW_ECORRUPT, TW_EOVERFLOW,
		TW_ESHUTDOWN, TW_EAGAIN, TW_EDEADLK, TW_EDEADLK_STOPPED,
		TW_SVC_STOPPED, TW_SVC_RUNNING };
	const size_t n = sizeof(codes) / sizeof(codes[0]);

	for (size_t i = 0; i < n; i++) {
		CHECK(tw_strerror(codes[i]) != NULL);
		CHECK(strcmp(tw_strerror(codes[i]), "unknown error") != 0);
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(tw_strerror(codes[i]), tw_strerror(codes[j])) != 0);
	}
	/* The wheel's cancel and the service's agree on 0 and 1. */
	CHECK(TW_SVC_IDLE == 0 && TW_SVC_STOPPED == 1);
	CHECK(strstr(tw_strerror(TW_SVC_STOPPED), "stopped") != NULL);
	CHECK(strstr(tw_strerror(TW_EDEADLK), "cycle") != NULL);
	CHECK(strstr(tw_strerror(TW_EDEADLK_STOPPED), "cycle") != NULL);
	CHECK(strstr(tw_strerror(TW_EDEADLK_STOPPED), "stopped") != NULL);
	/* A text true for every layer that returns the code: TW_EOWNER
	 * comes from the wheel's calls and the service's, TW_ESHUTDOWN
	 * from the service's and the purgatory's. */
	CHECK(strstr(tw_strerror(TW_EOWNER), "wheel") != NULL);
	CHECK(strstr(tw_strerror(TW_EOWNER), "service") != NULL);
	CHECK(strstr(tw_strerror(TW_ESHUTDOWN), "service") != NULL);
	CHECK(strstr(tw_strerror(TW_ESHUTDOWN), "purgatory") != NULL);
	CHECK(strcmp(tw_strerror(3), "not an error (a count)") == 0);
	CHECK(strcmp(tw_strerror(INT32_MAX), "not an error (a count)") == 0);
	CHECK(strcmp(tw_strerror(TW_EDEADLK_STOPPED - 1), "unknown error") == 0);
	CHECK(strcmp(tw_strerror(INT32_MIN), "unknown error") == 0);
}

static void ignore(struct tw_wheel *w, struct tw_timer *t)
{
	(void)w;
	(void)t;
}

/* tw_strerror's text holds for every call that returns the value: 0
 * after an add, 1 and 2 as counts (what advance returns), and
 * TW_ECORRUPT, which a drain, destroy or shutdown returns after a pending
 * timer was initialised or freed, names that mistake, the call that
 * avoids it, and the check's other case. */
static void test_error_texts_fit_every_call(void)
{
	struct tw_wheel w;
	struct tw_timer a, b;

	CHECK_EQ(tw_wheel_init(&w, 1, 64, 0, TW_MODE_EXACT), TW_OK);
	tw_timer_init(&a, ignore);
	tw_timer_init(&b, ignore);
	CHECK_EQ(tw_wheel_add(&w, &a, 1), TW_OK);
	CHECK(strcmp(tw_strerror(TW_OK), "success") == 0);
	CHECK_EQ(tw_wheel_add(&w, &b, 1), TW_OK);
	CHECK_EQ(tw_wheel_advance(&w, 1), 2);
	CHECK(strstr(tw_strerror(2), "count") != NULL);
	CHECK_EQ(tw_wheel_add(&w, &a, 2), TW_OK);
	CHECK_EQ(tw_wheel_advance(&w, 2), 1);
	CHECK(strstr(tw_strerror(1), "count") != NULL);
	CHECK(strstr(tw_strerror(1), "cancel") != NULL);
	CHECK(strstr(tw_strerror(TW_ECORRUPT), "initialised or freed while still pending"));
	CHECK(strstr(tw_strerror(TW_ECORRUPT), "tw_service_timer_shutdown"));
	CHECK(strstr(tw_strerror(TW_ECORRUPT), "not initialised"));
	tw_wheel_destroy(&w);
}

int main(void)
{
	RUN(test_error_strings);
	RUN(test_error_texts_fit_every_call);
	return check_report();
}
