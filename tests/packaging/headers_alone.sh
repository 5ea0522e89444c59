#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Each public header compiles alone, warnings as errors, and brings the
# version macros with it: in C99 and C11 (cc), and in C++11 and C++17 with
# g++ and clang++ (each one that is installed; make deps installs both).
#   headers_alone.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
mkdir -p "$work"
n=0
compile() { # compiler std lang header
	local cc=$1 std=$2 lang=$3 name=$4 f
	f="$work/$name.$(basename "$1").$2"
	# The duration macros expand in the user's code: used here.
	printf '#include <timingwheel/%s>\nconst char *v = TW_VERSION_STRING;\nunsigned x = TW_VERSION_HEX;\n#ifdef TW_MS\nlong long durations(long long n);\nlong long durations(long long n) { return TW_NS(n) + TW_US(n) + TW_MS(0.3) + TW_S(1.5); }\n#endif\n' \
		"$name" >"$f.src"
	# C++: casts and null pointers as C++ spells them, for programs
	# built with -Wold-style-cast or -Wzero-as-null-pointer-constant.
	local strict=()
	[ "$lang" = c++ ] && strict=(-Wold-style-cast -Wzero-as-null-pointer-constant)
	"$cc" -x "$lang" -std="$std" -Wall -Wextra -Wpedantic -Werror "${strict[@]}" \
		-I"$src/include" -c "$f.src" -o "$f.o" ||
		{ echo "packaging_headers_alone: $name does not compile alone with $cc -std=$std"; exit 1; }
	n=$((n + 1))
}
for h in "$src"/include/timingwheel/*.h; do
	name=$(basename "$h")
	for std in c99 c11; do compile "${CC:-cc}" $std c "$name"; done
	for cxx in g++ clang++; do
		command -v $cxx >/dev/null || continue
		for std in c++11 c++17; do compile $cxx $std c++ "$name"; done
	done
done
echo "packaging_headers_alone: $n compilations (each public header alone: C99, C11; C++11, C++17 with g++ and clang++)"
