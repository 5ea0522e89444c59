#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The public functions, as the compiler reads the headers (not as the page
# generator, tools/man3.sh, does): each declaration or definition at file
# scope of the preprocessed include/timingwheel/timingwheel.h whose name is
# tw_*, typedefs aside, and not tw__* (the headers' own inline helpers,
# which no page documents). One "NAME RETURN-TYPE" a line, sorted.
#   public_functions.sh SOURCE_DIR
set -euo pipefail
src=$1
${CC:-cc} -E -P -I "$src/include" "$src/include/timingwheel/timingwheel.h" |
	grep -v '^#' | tr '\n' ' ' | tr ';{}' '\n\n\n' | grep -v '^ *typedef' |
	sed -n 's/^ *\([^(]*[^_a-z0-9(]\)\(tw_[a-z0-9][a-z0-9_]*\) *(.*/\2 \1/p' |
	sed 's/ *$//' | sort -u
