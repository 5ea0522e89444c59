/* SPDX-License-Identifier: MIT */
/*
 * A peer wheel driven by wheel_bench from its own translation unit: the
 * peers' sources stay where the user has them (TW_BENCH_WAHERN,
 * TW_BENCH_RATAS) and are compiled into a driver here, never copied.
 * Every call covers a whole phase, so no per-operation indirect call is
 * charged to the peer. Times are in ticks (1 ms) from 0.
 */
#ifndef TW_BENCH_PEER_H
#define TW_BENCH_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct peer_ops {
	const char *name;
	void (*setup)(size_t n);                     /* n idle timers */
	void (*insert)(const int64_t *due, size_t n); /* timer i at due[i] */
	void (*cancel)(const size_t *order, size_t n);
	/* n times: move timer pick[i] to due[i] */
	void (*churn)(const size_t *pick, const int64_t *due, size_t n);
	void (*advance_to)(int64_t now);             /* fire what is due */
	bool (*next)(int64_t *when);                 /* next time it has work */
	long (*fired)(void);                         /* since setup */
	void (*teardown)(void);
};

extern const struct peer_ops peer_wahern;      /* default configuration */
extern const struct peer_ops peer_wahern_lean; /* no intervals, callbacks,
						  relative access: 40 B */
extern const struct peer_ops peer_ratas;

#ifdef __cplusplus
}
#endif

#endif
