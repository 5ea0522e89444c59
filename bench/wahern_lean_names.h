/* SPDX-License-Identifier: MIT */
/*
 * Force-included (-include) when compiling the lean configuration of
 * wahern/timeout's timeout.c and its driver (peer_wahern.c with
 * WAHERN_LEAN=1; bench/CMakeLists.txt): every function timeout.h declares
 * gets a name of its own, so the lean object and the default one, both
 * built from the same timeout.c, link into one wheel_bench.
 */
#ifndef TW_BENCH_WAHERN_LEAN_NAMES_H
#define TW_BENCH_WAHERN_LEAN_NAMES_H

#define timeout_version lean_timeout_version
#define timeout_vendor lean_timeout_vendor
#define timeout_v_rel lean_timeout_v_rel
#define timeout_v_abi lean_timeout_v_abi
#define timeout_v_api lean_timeout_v_api
#define timeout_init lean_timeout_init
#define timeout_pending lean_timeout_pending
#define timeout_expired lean_timeout_expired
#define timeout_del lean_timeout_del
#define timeouts_open lean_timeouts_open
#define timeouts_close lean_timeouts_close
#define timeouts_hz lean_timeouts_hz
#define timeouts_update lean_timeouts_update
#define timeouts_step lean_timeouts_step
#define timeouts_timeout lean_timeouts_timeout
#define timeouts_add lean_timeouts_add
#define timeouts_del lean_timeouts_del
#define timeouts_get lean_timeouts_get
#define timeouts_pending lean_timeouts_pending
#define timeouts_expired lean_timeouts_expired
#define timeouts_check lean_timeouts_check
#define timeouts_next lean_timeouts_next

#endif
