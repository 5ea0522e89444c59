#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every file-scope name of src/ once in the amalgamation (tools/
# amalgamate.sh), where all the sources share one translation unit:
#   - it compiles as one translation unit with gcc and with clang, with
#     and without TW_DEBUG (the checked build's tracker, src/debug.c), with
#     the project's warnings (CMakeLists.txt's TW_WARNINGS) as errors: no
#     static defined twice with two types, no name that shadows another
#     file's, no macro defined twice differently;
#   - amalgamate.sh had no static function to rename for a later source
#     (it does so silently, with a "#define name tw__am_name__N");
#   - a file that includes it may define any name but the tw_ ones;
#   - no two sources define a static variable or function of one name
#     (two "static T x;" of one type would compile, as one variable),
#     with and without TW_DEBUG, read from each source's own object;
#   - no two sources #define one macro, nor a macro another source or a
#     header of src/ uses (it stays defined to the amalgamation's end);
#   - no two sources define one struct, union or enum tag or typedef.
# A missing clang is a skip (tests/support/skip.sh) once gcc has passed.
#   amalgamation_names.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 dir=$2
rm -rf "$dir"
mkdir -p "$dir"
bash "$src/tools/amalgamate.sh" "$src" "$dir/timingwheel.c" >/dev/null
# The sources and the warnings, as the build lists them.
list() {
	awk -v name="$1" '$0 ~ "^set\\(" name "[ \t]" { on = 1; sub("^set\\(" name, "") }
		on { line = $0; done = sub(/\).*$/, "", line); printf "%s ", line; if (done) exit }' \
		"$src/CMakeLists.txt"
}
read -r -a sources <<<"$(list TW_SOURCES)"
read -r -a warnings <<<"$(list TW_WARNINGS)"
[ "${#sources[@]}" -gt 0 ] && [ "${#warnings[@]}" -gt 0 ] ||
	{ echo "amalgamation_names: no TW_SOURCES or TW_WARNINGS in CMakeLists.txt"; exit 1; }
flags=(-std=c11 -O2 "${warnings[@]}" -Werror -I"$src/include" -pthread)
fail=0 ran=0 used= missing=

for cc in gcc clang; do
	if ! command -v "$cc" >/dev/null; then
		missing="$missing $cc"
		continue
	fi
	ran=$((ran + 1)) used="$used $cc"
	for debug in "" -DTW_DEBUG; do
		log=$dir/$cc${debug:+-debug}.log
		if ! "$cc" "${flags[@]}" $debug -c "$dir/timingwheel.c" -o "$dir/tw.o" >"$log" 2>&1; then
			cat "$log"
			echo "$cc ${debug:-(no TW_DEBUG)}: the amalgamation does not compile"
			fail=1
			continue
		fi
		# No static symbol but a tw_ one (below: the includer's names).
		nm "$dir/tw.o" | awk '$2 ~ /^[tbdr]$/ && $3 !~ /^tw_/ && $3 !~ /\./ { print $3 }' >"$dir/left"
		if [ -s "$dir/left" ]; then
			cat "$dir/left"
			echo "$cc ${debug:-(no TW_DEBUG)}: the statics above keep their names in the amalgamation"
			fail=1
		fi
	done
done

if grep -E '^#define ([A-Za-z_][A-Za-z0-9_]*) tw__am_\1__[0-9]+$' "$dir/timingwheel.c"; then
	echo "amalgamate.sh renamed the static functions above: two sources define them"
	fail=1
fi

# The includer's names are its own: the amalgamation leaves no file-scope
# name but a tw_ one (each file-local name of the library is a macro for
# tw__am_NAME until its end). Its objects, with and without TW_DEBUG, have
# no other static symbol (above; a function's own statics, NAME.N, are not
# at file scope); a file that reads the system headers a server reads, then
# includes it, then defines each of those names as a variable and as a
# struct tag -- and the names the README's examples use (on_timeout) --
# compiles with the project's warnings as errors.
cat >"$dir/includer.c" <<'INCLUDER'
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include "timingwheel.c"
static void on_timeout(struct tw_service *svc, struct tw_service_timer *t)
{
	(void)svc;
	(void)t;
}
INCLUDER
sed -nE 's/^#define ([A-Za-z_][A-Za-z0-9_]*) tw__am_\1$/\1/p' "$dir/timingwheel.c" | sort -u |
	awk '$1 != "on_timeout" { printf "static int %s __attribute__((unused));\nstruct %s { int x; };\n", $1, $1 }' \
	>>"$dir/includer.c"
printf 'int main(void)\n{\n\ton_timeout(NULL, NULL);\n\treturn 0;\n}\n' >>"$dir/includer.c"
[ "$(grep -c '^struct ' "$dir/includer.c")" -gt 100 ] ||
	{ echo "amalgamation_names: fewer than 100 file-local names renamed (amalgamate.sh)"; fail=1; }
for cc in $used; do
	for debug in "" -DTW_DEBUG; do
		log=$dir/includer-$cc${debug:+-debug}.log
		"$cc" "${flags[@]}" $debug -I"$dir" "$dir/includer.c" -o "$dir/includer" >"$log" 2>&1 ||
			{ head -20 "$log"; echo "$cc ${debug:-(no TW_DEBUG)}: a file that includes the amalgamation cannot use the library's private names"; fail=1; }
	done
done

# Each source's own statics (not those of the headers it includes: those
# are pasted in once), read from its object's symbols and debug lines.
cc=gcc
command -v gcc >/dev/null || cc=clang
if command -v "$cc" >/dev/null; then
	for debug in "" -DTW_DEBUG; do
		for s in "${sources[@]}"; do
			"$cc" -std=c11 -O0 -g $debug -I"$src/include" -pthread -c "$src/$s" -o "$dir/one.o"
			# nm -l: "ADDRESS TYPE NAME FILE:LINE"; a thread-local has
			# no line, and counts as the source's.
			nm -l "$dir/one.o" | awk -v s="$s" '$2 ~ /^[tbdr]$/ && $3 !~ /\./ &&
				(NF < 4 || $4 ~ /\.c:[0-9]+$/) { print $3, s }'
		done
	done | sort -u >"$dir/statics"
	if awk '{ n[$1]++; where[$1] = where[$1] " " $2 }
		END { for (x in n) if (n[x] > 1) { print x ":" where[x]; bad = 1 }; exit !bad }' \
		"$dir/statics"; then
		echo "the statics above are defined in more than one source"
		fail=1
	fi
fi

headers=$(cd "$src" && ls src/*.h src/*/*.h)
for s in "${sources[@]}"; do
	sed -nE 's/^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*).*/\1/p' "$src/$s" | sort -u |
		while read -r m; do
			for o in "${sources[@]}" $headers; do
				[ "$o" != "$s" ] || continue
				if grep -qw -- "$m" "$src/$o"; then
					echo "macro $m of $s is also in $o"
				fi
			done
		done
done >"$dir/macros"
if [ -s "$dir/macros" ]; then
	cat "$dir/macros"
	echo "the macros above are not their source's alone"
	fail=1
fi

for s in "${sources[@]}"; do
	sed -nE -e 's/^(static[ \t]+)?(struct|union|enum)[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*\{.*/\2 \3/p' \
		-e 's/^typedef[^;]*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[ \t]*;.*/typedef \1/p' \
		-e 's/^\}[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*;.*/typedef \1/p' "$src/$s" |
		sed "s|\$| $s|"
done | sort -u >"$dir/types"
if awk '{ k = $1 " " $2; n[k]++; where[k] = where[k] " " $3 }
	END { for (x in n) if (n[x] > 1) { print x ":" where[x]; bad = 1 }; exit !bad }' "$dir/types"; then
	echo "the types above are defined in more than one source"
	fail=1
fi

[ "$ran" -gt 0 ] || bash "$src/tests/support/skip.sh" "amalgamation_names: neither gcc nor clang is installed"
[ "$fail" = 0 ] || exit 1
echo "amalgamation_names: one translation unit with$used, with and without TW_DEBUG; every file-scope name of src/ once"
[ -z "$missing" ] || exec bash "$src/tests/support/skip.sh" "amalgamation_names with$missing (not installed; apt-get install$missing)"
