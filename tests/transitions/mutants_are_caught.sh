#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every transition mutant is caught: the transition check has teeth
# (docs/model.md). Each mutant is a patch in tests/transitions/mutants/
# that changes one transition on purpose; the shipped sources carry none
# of them. The script copies the tree once to WORK_DIR/tree, builds its
# test-point programs unchanged (code_matches_model.sh must pass there,
# or a mutant "found" proves nothing), then, for each patch in turn,
# applies it (exactly: no fuzz, so a patch that no longer fits the code
# fails here instead of testing something else), rebuilds (only what the
# patch touched), requires code_matches_model.sh to fail, and takes the
# patch back out. The mutants: the service's state word (1 a step the
# model does not make, 2 a step of the model changed, 3 a transition of
# the model no longer made) and the purgatory's op (4 a reference taken
# from zero by a plain increment, 5 a claim that sets completed again, 6
# the first watch naming the purgatory before it holds a reference: an
# owner-word step the model does not make). Each patch says, at its top,
# what it breaks and how it is found.
# usage: tests/transitions/mutants_are_caught.sh SOURCE_DIR [WORK_DIR]
#   JOBS=n   parallel build jobs (default: the number of CPUs)
set -uo pipefail
src=$(cd "$1" && pwd)
work=${2:-$(mktemp -d)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
tree=$work/tree build=$work/build
targets="service_cancel_sync_and_teardown service_claims purgatory_watch_check_and_shutdown service_one_run_at_a_time
	service_cancels_across_services service_runs_and_reinits
	purgatory_completion_and_release purgatory_completion_during_a_watch
	purgatory_release_outside_locks service_edeadlk_only_for_a_cycle
	service_stress_shaken purgatory_stress_shaken transitions_purgatory_checker"

# A fresh copy every run: a build left from a previous run was last made
# from a mutated file, which the copy would put back with an older time.
rm -rf "$tree" "$build"
mkdir -p "$tree"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# what git tracks and what it would (not the builds, not .git)
	(cd "$src" && git ls-files -z --cached --others --exclude-standard |
		tar --null -T - -cf -) | tar -C "$tree" -xf -
else
	(cd "$src" && tar --exclude=./.git --exclude='./build*' -cf - .) |
		tar -C "$tree" -xf -
fi

build_programs() {
	# shellcheck disable=SC2086
	cmake --build "$build" -j "$jobs" --target $targets >"$work/build.log" 2>&1
}

if ! cmake -S "$tree" -B "$build" -DTW_BUILD_BENCH=OFF -DTW_WERROR=ON \
	>"$work/build.log" 2>&1 || ! build_programs; then
	cat "$work/build.log"
	echo "transition mutants: the unmutated tree does not build"
	exit 1
fi
if ! out=$(bash "$tree/tests/transitions/code_matches_model.sh" "$tree" "$build" 2>&1); then
	echo "$out"
	echo "transition mutants: the unmutated tree fails code_matches_model.sh"
	exit 1
fi

fail=0 n=0
for patch in "$src"/tests/transitions/mutants/*.patch; do
	m=$(basename "$patch" .patch)
	n=$((n + 1))
	# A dry run first: a patch that fits only in part changes nothing,
	# so the mutants after it test the code as shipped.
	if ! (cd "$tree" && patch -p1 --fuzz=0 -s --dry-run <"$patch" >/dev/null &&
		patch -p1 --fuzz=0 -s <"$patch"); then
		echo "transition mutant $m: the patch no longer applies (tests/transitions/mutants/)"
		fail=1
		continue
	fi
	if ! build_programs; then
		cat "$work/build.log"
		echo "transition mutant $m: the build failed"
		fail=1
	elif out=$(bash "$tree/tests/transitions/code_matches_model.sh" "$tree" "$build" 2>&1); then
		echo "transition mutant $m: NOT FOUND: the check has no teeth for it"
		fail=1
	else
		echo "transition mutant $m: found: $(echo "$out" | grep -m1 -E 'not a step|never made')"
	fi
	if ! (cd "$tree" && patch -p1 -R --fuzz=0 -s <"$patch"); then
		echo "transition mutant $m: the patch does not come back out"
		exit 1
	fi
done
[ "$n" -gt 0 ] || { echo "transition mutants: none in tests/transitions/mutants/"; exit 1; }
[ $fail = 0 ] && echo "transitions: every mutant found ($n)" || exit 1
