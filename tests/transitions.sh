#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Code and model, one machine (docs/model.md): run the test-point build's
# race, promise and shaken stress tests with every state-word transition
# they make recorded (TW_TRANSITIONS_SEEN). Each program already aborts on
# a transition model/service.transitions does not have; this also fails
# when a transition of the model is one the C code never makes (a
# transition removed from the code), and prints how much of the model's
# table the C suite reaches.
# usage: tests/transitions.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
seen=$(mktemp)
trap 'rm -f "$seen"' EXIT
export TW_TRANSITIONS_SEEN=$seen
run() {
	if ! "$@" >/dev/null 2>"$seen.err"; then
		cat "$seen.err" >&2
		rm -f "$seen.err"
		echo "transitions: FAILED: $*" >&2
		exit 1
	fi
	rm -f "$seen.err"
}
run "$build/tests/test_races"
run "$build/tests/test_promises_service"
run "$build/tests/test_promises_purgatory"
run "$build/tests/test_service_shaken" 200000 4 1 8 1 5
run "$build/tests/test_purgatory_shaken" 10000 2 1 5
table=$(grep '^[a-z]' "$src/model/service.transitions" | awk '{ print $1, $2, $3 }' | sort -u)
made=$(sort -u "$seen")
outside=$(comm -13 <(echo "$table") <(echo "$made"))
if [ -n "$outside" ]; then
	echo "transitions: the C code made steps the model does not have:"
	echo "$outside"
	exit 1
fi
missing=""
for name in $(echo "$table" | awk '{ print $1 }' | sort -u); do
	if ! echo "$made" | grep -q "^$name "; then
		missing="$missing $name"
	fi
done
echo "transitions: the C suite made $(echo "$made" | grep -c .) of the model's" \
	"$(echo "$table" | grep -c .) steps; every one is the model's"
for name in $(echo "$table" | awk '{ print $1 }' | sort -u); do
	printf '  %-14s %2d of %2d\n' "$name" \
		"$(echo "$made" | grep -c "^$name " || true)" \
		"$(echo "$table" | grep -c "^$name ")"
done
if [ -n "$missing" ]; then
	echo "transitions: FAILED: the model's transitions$missing are never made by the C code"
	exit 1
fi
