#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Each public header compiles alone, warnings as errors, and brings the
# version macros with it: in C99 and C11 (cc), and in C++11 and C++17 with
# g++ and clang++ (each one that is installed; make deps installs both).
# With clang, also under -Weverything (a user's strictest flags; its doc
# comments parsed as clang's -Wdocumentation does), but -Wpadded, which
# no C timer header avoids where a struct holds a 32-bit field beside
# pointers, and in C++ the C++98-compatibility warnings and those on
# reserved names: the headers' inline helpers are tw__ names, which C
# leaves to the program and C++ reserves.
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
everything() { # compiler std lang header [flags]
	local cc=$1 std=$2 lang=$3 name=$4 f
	shift 4
	f="$work/$name.$cc.everything.$std"
	printf '#include <timingwheel/%s>\n' "$name" >"$f.src"
	"$cc" -x "$lang" -std="$std" -Weverything -Wno-padded "$@" -Werror \
		-I"$src/include" -c "$f.src" -o "$f.o" ||
		{ echo "packaging_headers_alone: $name warns under $cc -Weverything"; exit 1; }
	n=$((n + 1))
}
for h in "$src"/include/timingwheel/*.h; do
	name=$(basename "$h")
	for std in c99 c11; do compile "${CC:-cc}" $std c "$name"; done
	for cxx in g++ clang++; do
		command -v $cxx >/dev/null || continue
		for std in c++11 c++17; do compile $cxx $std c++ "$name"; done
	done
	if command -v clang >/dev/null; then
		everything clang c11 c "$name"
		everything clang++ c++17 c++ "$name" -Wno-c++98-compat -Wno-c++98-compat-pedantic \
			-Wno-reserved-identifier -Wno-reserved-macro-identifier
	fi
done
echo "packaging_headers_alone: $n compilations (each public header alone: C99, C11; C++11, C++17 with g++ and clang++; C11 and C++17 under clang's -Weverything)"
