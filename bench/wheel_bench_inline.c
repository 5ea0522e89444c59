/* SPDX-License-Identifier: MIT */
/*
 * wheel_bench_inline — wheel_bench's wheel column with the library compiled
 * into the driver's own file: the amalgamation (tools/amalgamate.sh, made
 * by the build as timingwheel.c beside this target) included here, as a
 * program that wants the wheel's hot calls inlined includes it. Same
 * driver, same cells, same arguments (--instr for bench/instr.sh); the
 * wheel alone, named timingwheel-inline (its peers are wheel_bench's).
 */
#define _GNU_SOURCE
#include "timingwheel.c"

#define TW_BENCH_WHEEL_NAME "timingwheel-inline"
#define TW_BENCH_WHEEL_ONLY 1
#include "wheel_bench.c"
