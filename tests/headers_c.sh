#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Each public header compiles alone, in C99 and in C11, warnings as errors,
# and brings the version macros with it.
#   headers_c.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
mkdir -p "$work"
n=0
for h in "$src"/include/timingwheel/*.h; do
	name=$(basename "$h")
	for std in c99 c11; do
		printf '#include <timingwheel/%s>\nconst char *v = TW_VERSION_STRING;\nunsigned x = TW_VERSION_HEX;\n' \
			"$name" >"$work/$name.$std.c"
		${CC:-cc} -std=$std -Wall -Wextra -Wpedantic -Werror -I"$src/include" \
			-c "$work/$name.$std.c" -o "$work/$name.$std.o" ||
			{ echo "headers_c: $name does not compile alone as $std"; exit 1; }
		n=$((n + 1))
	done
done
echo "headers_c: $n compilations (each public header alone, C99 and C11)"
