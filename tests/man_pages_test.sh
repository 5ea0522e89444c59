#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The manual pages as a user meets them: cmake --install into a scratch
# prefix (no doxygen involved), then for every public function -- found
# by the compiler, not by the page generator: each function the
# preprocessed headers declare, and each tw_* symbol the shared library
# exports -- a page that `MANPATH=PREFIX/share/man man -w NAME` finds, whose
# NAME line mandb reads as "NAME - summary" (what man -k prints), that has
# a SYNOPSIS naming the function, a RETURN VALUE unless it returns void,
# and that groff renders without a warning (lintian checks the same). Then man -k
# itself, against an index built for the prefix.
#   man_pages_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
fail() { echo "man_pages_test: $*"; exit 1; }
for tool in man lexgrog mandb apropos groff; do
	command -v $tool >/dev/null ||
		exec bash "$src/tests/skip.sh" "man_pages: no $tool (apt-get install man-db)"
done
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
man3=$prefix/share/man/man3
[ -d "$man3" ] || fail "cmake --install installed no $man3"

bash "$src/tests/public_functions.sh" "$src" >"$work/functions"
n=$(wc -l <"$work/functions")
[ "$n" -ge 50 ] || fail "only $n functions found in the headers"
so=$(find "$build" -maxdepth 1 -name 'libtimingwheel.so.*.*' | head -1)
[ -n "$so" ] || fail "no shared library in $build"
nm -D --defined-only "$so" | awk '$2 == "T" && $3 ~ /^tw_/ { print $3 }' | sort -u >"$work/exported"
missing=$(cut -d' ' -f1 "$work/functions" | comm -13 - "$work/exported")
[ -z "$missing" ] || fail "exported but not declared in a header: $missing"

export MANPATH=$prefix/share/man
pages=0
while read -r fn ret; do
	page=$man3/$fn.3
	[ -f "$page" ] || fail "no page for $fn ($page)"
	found=$(man -w "$fn") || fail "man -w $fn found nothing with MANPATH=$MANPATH"
	[ "$found" = "$page" ] || fail "man -w $fn found $found, not $page"
	whatis=$(lexgrog "$page") || fail "$fn: mandb cannot read its NAME line"
	grep -q "^$page: \"$fn - [A-Za-z(]" <<<"$whatis" || fail "$fn: its whatis is $whatis"
	# Rendered as man renders it, every groff warning on (stricter than
	# lintian's man --warnings).
	rendered=$(groff -man -Tutf8 -P-cbou -ww "$page" 2>"$work/warnings")
	[ ! -s "$work/warnings" ] || fail "$fn: groff warns: $(cat "$work/warnings")"
	grep -q "^SYNOPSIS" <<<"$rendered" || fail "$fn: no SYNOPSIS"
	grep -q "^DESCRIPTION" <<<"$rendered" || fail "$fn: no DESCRIPTION"
	tr -s ' \n' ' ' <<<"$rendered" | grep -q "#include <timingwheel/[a-z]*\.h> .*[ *]$fn(" ||
		fail "$fn: the synopsis lacks the #include or the prototype"
	case $ret in
	*void) ;;
	*) grep -q "^RETURN VALUE" <<<"$rendered" || fail "$fn returns $ret: no RETURN VALUE" ;;
	esac
	pages=$((pages + 1))
done <"$work/functions"

# man -k, as after a package's install (mandb indexes the prefix's pages).
mandb -q "$MANPATH" 2>/dev/null || fail "mandb could not index $MANPATH"
summary=$(lexgrog "$man3/tw_wheel_add.3" | sed 's/^[^"]*"tw_wheel_add - \(.*\)"$/\1/')
k=$(apropos -l tw_wheel_add) || fail "man -k tw_wheel_add found nothing"
[ "$(sed -n 's/^tw_wheel_add (3) *- //p' <<<"$k")" = "$summary" ] ||
	fail "man -k tw_wheel_add printed '$k', not its summary '$summary'"
echo "man_pages_test: $pages functions, each with its page (man -w finds it, whatis and" \
	"synopsis right, no groff warning); man -k prints the call's summary"
