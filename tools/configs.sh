#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the configurations the documentation tells users to use, with gcc
# and with clang, warnings as errors (make configs; CI runs it): the
# default (cmake with no option: RelWithDebInfo), the checked build
# (-DTW_DEBUG=ON, default build type, as docs/bad-input.md says) and
# Release. Each is built as a user builds it, with the default options:
# the library, the tools, the examples, the tests and the benchmarks (the
# inline bench compiles the amalgamation, so the checked build's is the
# amalgamation with TW_DEBUG); the checked build's tests also run once
# (gcc), since no other target runs them with optimisation on. --all
# builds every CMake build type (Debug, Release, RelWithDebInfo,
# MinSizeRel) with and without TW_DEBUG, and runs nothing: what a change
# to the warnings or to the build is tried against. CONFIGS_SKIP (words
# CC-NAME, e.g. "gcc-default clang-default") names configurations another
# step of the same run builds with the same options (CI: make test builds
# gcc's default, make clang clang's), so that they are not built twice.
#   configs.sh [--all] WORK_DIR JOBS
set -euo pipefail
all=0
if [ "${1:-}" = --all ]; then all=1; shift; fi
work=$1 jobs=$2
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
work=$(cd "$work" && pwd)

configs=()
if [ $all = 1 ]; then
	for type in Debug Release RelWithDebInfo MinSizeRel; do
		configs+=("$type:" "$type-debug:-DTW_DEBUG=ON")
	done
else
	configs=("default:" "debug:-DTW_DEBUG=ON" "Release:")
fi

failed=()
for cc in gcc clang; do
	command -v "$cc" >/dev/null || { echo "configs: no $cc (make deps-all)"; exit 1; }
	for c in "${configs[@]}"; do
		name=${c%%:*} flags=${c#*:}
		type=${name%-debug}
		args=(-DTW_WERROR=ON)
		[ "$type" = default ] || [ "$type" = debug ] || args+=(-DCMAKE_BUILD_TYPE="$type")
		# shellcheck disable=SC2206
		args+=($flags)
		dir=$work/$cc-$name
		if [[ " ${CONFIGS_SKIP:-} " == *" $cc-$name "* ]]; then
			echo "== $cc $name: cmake ${args[*]}: skipped (CONFIGS_SKIP: built by another step)"
			continue
		fi
		echo "== $cc $name: cmake ${args[*]}"
		if ! CC=$cc cmake -S "$src" -B "$dir" "${args[@]}" >"$dir.log" 2>&1 ||
		   ! cmake --build "$dir" -j "$jobs" >>"$dir.log" 2>&1; then
			grep -E 'error|warning' "$dir.log" | head -20 || tail -20 "$dir.log"
			failed+=("$cc $name")
			continue
		fi
		if [ $all = 0 ] && [ "$cc" = gcc ] && [ "$name" = debug ]; then
			( cd "$dir" && ctest -j "$jobs" --output-on-failure >>"$dir.log" 2>&1 ) ||
				{ tail -40 "$dir.log"; failed+=("$cc $name: ctest"); }
		fi
	done
done
if [ ${#failed[@]} -gt 0 ]; then
	printf 'configs: FAILED: %s\n' "${failed[@]}"
	exit 1
fi
echo "configs: every configuration built with gcc and clang, warnings as errors${CONFIGS_SKIP:+ (${CONFIGS_SKIP} by another step)}"
