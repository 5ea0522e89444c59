#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Show that the transition check has teeth (docs/model.md): build the
# test-point library with each TW_TRANSITION_MUTANT (src/service/state.h
# and sync.c: 1 a step the model does not make, 2 a step of the model
# changed, 3 a transition of the model no longer made; the purgatory's op,
# src/purgatory/opstate.h: 4 a reference taken from zero by a plain
# increment, 5 a claim that sets completed again) and require
# tests/transitions.sh to fail on each.
# usage: tests/transition_mutants.sh SOURCE_DIR [WORK_DIR]
set -uo pipefail
src=$(cd "$1" && pwd)
work=${2:-$(mktemp -d)}
jobs=$(nproc 2>/dev/null || echo 2)
fail=0
for m in 1 2 3 4 5; do
	dir=$work/mutant$m
	if ! { cmake -S "$src" -B "$dir" -DTW_BUILD_BENCH=OFF -DTW_WERROR=ON \
		"-DCMAKE_C_FLAGS=-DTW_TRANSITION_MUTANT=$m" >/dev/null &&
	       cmake --build "$dir" -j "$jobs" --target test_races \
		test_races_purgatory test_races_runs \
		test_promises_service test_promises_service_runs \
		test_promises_purgatory test_promises_purgatory_watch \
		test_promises_purgatory_locks \
		test_service_shaken test_purgatory_shaken \
		test_op_transitions >/dev/null; }; then
		echo "transition mutant $m: the build failed"
		fail=1
		continue
	fi
	out=$(bash "$src/tests/transitions.sh" "$src" "$dir" 2>&1)
	if [ $? = 0 ]; then
		echo "transition mutant $m: NOT FOUND: the check has no teeth for it"
		fail=1
	else
		echo "transition mutant $m: found: $(echo "$out" | grep -m1 -E 'not a step|never made')"
	fi
done
[ $fail = 0 ] && echo "transitions: every mutant found" || exit 1
