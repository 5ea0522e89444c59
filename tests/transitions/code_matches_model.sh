#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Code and model, one machine: the C code makes exactly the transitions
# of the models (docs/model.md). Run the test-point build's programs that
# force interleavings, and its shaken stress tests, with every transition
# they make recorded: of a service timer's state word (TW_TRANSITIONS_SEEN) and of
# a purgatory op's state (TW_OP_TRANSITIONS_SEEN). Each program already
# aborts on a transition model/service.transitions or
# model/purgatory.transitions does not have; this also fails when a
# transition of a model is one the C code never makes (a transition
# removed from the code), or when a row of the purgatory's owner word
# (watch_start, watch_name, mark_never, watch_refused: one row each)
# is never made, and prints how much of each model's table the C suite
# reaches.
# usage: tests/transitions/code_matches_model.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
seen=$(mktemp) op_seen=$(mktemp)
trap 'rm -f "$seen" "$op_seen"' EXIT
export TW_TRANSITIONS_SEEN=$seen TW_OP_TRANSITIONS_SEEN=$op_seen
run() {
	if ! "$@" >/dev/null 2>"$seen.err"; then
		cat "$seen.err" >&2
		rm -f "$seen.err"
		echo "transitions: FAILED: $*" >&2
		exit 1
	fi
	rm -f "$seen.err"
}
# (each split program: every part)
for t in service_cancel_sync_and_teardown service_claims purgatory_watch_check_and_shutdown service_one_run_at_a_time \
	service_cancels_across_services service_runs_and_reinits \
	purgatory_completion_and_release purgatory_completion_during_a_watch \
	purgatory_release_outside_locks service_edeadlk_only_for_a_cycle; do
	run "$build/tests/$t"
done
run "$build/tests/service_stress_shaken" 200000 4 1 8 1 5
run "$build/tests/purgatory_stress_shaken" 10000 2 1 5
# a watch that fails on its first key: its claim at ONE; a completion
# before any watch: mark_never
run "$build/tests/transitions_purgatory_checker"

# check WHAT TABLE SEEN [NAMES]: every step made is a row of the model's
# table, every transition of the table is made at least once, and every
# row of each transition in NAMES is made
check() {
	local what=$1 table made outside missing="" rows="" name row
	table=$(grep '^[a-z]' "$2" | awk '{ print $1, $2, $3 }' | sort -u)
	made=$(sort -u "$3")
	outside=$(comm -13 <(echo "$table") <(echo "$made"))
	if [ -n "$outside" ]; then
		echo "transitions: the C code made $what steps the model does not have:"
		echo "$outside"
		exit 1
	fi
	for name in $(echo "$table" | awk '{ print $1 }' | sort -u); do
		# (a here-string, not echo | grep -q: with pipefail, grep -q
		# leaving early kills echo with SIGPIPE and the pipe "fails")
		if ! grep -q "^$name " <<<"$made"; then
			missing="$missing $name"
		fi
	done
	for name in ${4:-}; do
		while read -r row; do
			if ! grep -qxF "$row" <<<"$made"; then
				rows="$rows; $row"
			fi
		done < <(grep "^$name " <<<"$table")
	done
	echo "transitions: the C suite made $(echo "$made" | grep -c .) of the" \
		"$what model's $(echo "$table" | grep -c .) steps; every one is the model's"
	for name in $(echo "$table" | awk '{ print $1 }' | sort -u); do
		printf '  %-20s %2d of %2d\n' "$name" \
			"$(echo "$made" | grep -c "^$name " || true)" \
			"$(echo "$table" | grep -c "^$name ")"
	done
	if [ -n "$missing" ]; then
		echo "transitions: FAILED: the $what model's transitions$missing are never made by the C code"
		exit 1
	fi
	if [ -n "$rows" ]; then
		echo "transitions: FAILED: rows of the $what model never made by the C code: ${rows#; }"
		exit 1
	fi
}
check service "$src/model/service.transitions" "$seen"
check purgatory "$src/model/purgatory.transitions" "$op_seen" \
	"watch_start watch_name mark_never watch_refused"
