#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make flaky: the threaded suite RUNS times under ThreadSanitizer while a
# second job keeps every core busy, then the list of every test that
# failed even once, with how often. A test whose verdict depends on how
# the scheduler treated it (a wake-up counted over real time, a duration)
# fails here long before it fails a CI run; one that counts only what the
# library decided never does.
# usage: tests/support/flaky.sh BUILD_TSAN_DIR RUNS
set -uo pipefail
dir=$1 runs=$2
cores=$(nproc 2>/dev/null || echo 2)
export TSAN_OPTIONS=halt_on_error=1

# The second job: a busy loop per core, so the tests' threads are
# preempted at random (ctest runs them two at a time beside it).
load=()
if [ "${FLAKY_LOAD:-1}" != 0 ]; then
	for _ in $(seq "$cores"); do
		bash -c 'while :; do :; done' &
		load+=($!)
	done
fi
stop_load() { [ ${#load[@]} -eq 0 ] || kill "${load[@]}" 2>/dev/null; }
trap stop_load EXIT

declare -A failed=()
start=$(date +%s)
for r in $(seq "$runs"); do
	rm -f "$dir/Testing/Temporary/LastTestsFailed.log"
	if ! (cd "$dir" && ctest -L threaded -j 2 --output-on-failure \
		>"flaky-run-$r.log" 2>&1); then
		while IFS=: read -r _ name; do
			failed[$name]=$(( ${failed[$name]:-0} + 1 ))
		done <"$dir/Testing/Temporary/LastTestsFailed.log"
		echo "flaky: run $r of $runs failed (its output: $dir/flaky-run-$r.log)"
		# A CI run keeps only what is printed: the failing tests' own
		# words, not only their names, or the flake cannot be found.
		echo "flaky: the end of what run $r printed:"
		grep -v '^ *Start \|Passed\|^ *[0-9]*/[0-9]* Test' \
			"$dir/flaky-run-$r.log" | tail -n 80 | sed 's/^/  | /'
	else
		rm -f "$dir/flaky-run-$r.log"
	fi
	[ $(( r % 5 )) = 0 ] && echo "flaky: $r of $runs runs done"
done
stop_load
secs=$(( $(date +%s) - start ))
if [ ${#failed[@]} -eq 0 ]; then
	echo "flaky: clean: $runs runs of the threaded suite under TSan, the machine" \
		"loaded by $cores busy loops, in $secs s"
	exit 0
fi
echo "flaky: tests that failed at least once in $runs runs ($secs s):"
for name in "${!failed[@]}"; do
	echo "  $name: ${failed[$name]} of $runs"
done
exit 1
