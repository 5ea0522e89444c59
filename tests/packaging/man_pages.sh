#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The manual pages as a user meets them: cmake --install into a scratch
# prefix (no doxygen involved), then for every public function -- found
# by the compiler, not by the page generator: each function the
# preprocessed headers declare, and each tw_* symbol the shared library
# exports -- a page that `MANPATH=PREFIX/share/man man -w NAME` finds, that
# has a SYNOPSIS naming the function, a RETURN VALUE unless it returns
# void, that groff renders without a warning (lintian checks the same), and
# whose NAME line mandb reads as "NAME - summary" (what man -k prints).
# Then man -k itself, against the index built for the prefix as
# timingwheel(3) says.
#
# Each tool runs once for all the pages, or once per page where it must see
# a page alone, and the pages' texts are checked in the shell: a process per
# check and page (some 700) took over a minute on a loaded 2-core machine.
#   man_pages.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
fail() { echo "packaging_man_pages: $*"; exit 1; }
for tool in man mandb whatis apropos groff troff; do
	command -v $tool >/dev/null ||
		exec bash "$src/tests/support/skip.sh" "packaging_man_pages: no $tool (apt-get install man-db)"
done
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
man3=$prefix/share/man/man3
[ -d "$man3" ] || fail "cmake --install installed no $man3"

bash "$src/tests/packaging/public_functions.sh" "$src" >"$work/functions"
n=$(wc -l <"$work/functions")
[ "$n" -ge 50 ] || fail "only $n functions found in the headers"
so=$(find "$build" -maxdepth 1 -name 'libtimingwheel.so.*.*' | head -1)
[ -n "$so" ] || fail "no shared library in $build"
nm -D --defined-only "$so" | awk '$2 == "T" && $3 ~ /^tw_/ { print $3 }' | sort -u >"$work/exported"
missing=$(cut -d' ' -f1 "$work/functions" | comm -13 - "$work/exported")
[ -z "$missing" ] || fail "exported but not declared in a header: $missing"

export MANPATH=$prefix/share/man
# man-db's tools confine each child in a seccomp sandbox, which costs more
# than the work on these small pages; what they read is the same without.
export MAN_DISABLE_SECCOMP=1
mapfile -t names < <(cut -d' ' -f1 "$work/functions")
pages=()
for fn in "${names[@]}"; do
	[ -f "$man3/$fn.3" ] || fail "no page for $fn ($man3/$fn.3)"
	pages+=("$man3/$fn.3")
done
printf '%s\n' "${pages[@]}" >"$work/pages"
# man -w, every name: the page of each, in order.
man -w "${names[@]}" >"$work/found" 2>"$work/man-w.err" ||
	fail "man -w did not find them all with MANPATH=$MANPATH: $(cat "$work/man-w.err")"
cmp -s "$work/pages" "$work/found" ||
	fail "man -w found other pages: $(diff "$work/pages" "$work/found" | head -5)"
# Every groff warning on (stricter than lintian's man --warnings), each
# page alone; then all of them rendered as man renders them, in one run.
for page in "${pages[@]}"; do
	troff -man -Tutf8 -ww -z "$page" 2>>"$work/warnings"
done
[ ! -s "$work/warnings" ] || fail "groff warns: $(head -5 "$work/warnings")"
groff -man -Tutf8 -P-cbou -ww "${pages[@]}" >"$work/rendered" 2>"$work/warnings"
[ ! -s "$work/warnings" ] || fail "groff warns: $(head -5 "$work/warnings")"
# Each page's text: from its header line (the only lines that start with
# "TW_": "TW_WHEEL_ADD(3) ...", a long name cut short) to the next, in
# the order given.
mkdir -p "$work/rendered.d"
awk -v dir="$work/rendered.d" -v list="$work/pages" '
	/^TW_/ { close(out); if ((getline page < list) <= 0) exit 1
		 n = split(page, part, "/"); out = dir "/" part[n] }
	out { print > out }
	END { if ((getline page < list) > 0) exit 1 }' "$work/rendered" ||
	fail "groff did not render one page per function"

# man -k reads an index that mandb builds; timingwheel(3) tells whoever
# installed under a prefix to build it with this command.
groff -man -Tutf8 -P-cbou "$man3/timingwheel.3" 2>/dev/null | tr -s ' \n' ' ' |
	grep -q 'mandb PREFIX/share/man' ||
	fail "timingwheel(3) does not say how to index a prefix's pages (mandb PREFIX/share/man)"
mandb -q "$prefix/share/man" 2>/dev/null || fail "mandb could not index $prefix/share/man"
# What mandb read of each NAME line: "NAME (3) - summary".
# (A NAME line mandb cannot parse reads "(unknown subject)".)
whatis -l "${names[@]}" >"$work/whatis" 2>&1 || fail "whatis: $(grep -v ' - ' "$work/whatis")"
declare -A summary=()
while read -r name section dash rest; do
	[ "$section $dash" = "(3) -" ] && summary[$name]=$rest
done <"$work/whatis"

checked=0
while read -r fn ret; do
	[[ ${summary[$fn]:-} =~ ^[A-Za-z] ]] ||
		fail "$fn: mandb reads its NAME line as '$(grep "^$fn " "$work/whatis")'"
	text=
	read -r -d '' text <"$work/rendered.d/$fn.3" || true
	[[ ${text,,} == tw_${fn:3:9}* ]] || fail "$fn: its page is not where it should be"
	[[ $text == *$'\nSYNOPSIS\n'* ]] || fail "$fn: no SYNOPSIS"
	[[ $text == *$'\nDESCRIPTION\n'* ]] || fail "$fn: no DESCRIPTION"
	flat=${text//$'\n'/ }
	[[ $flat =~ \#include\ \<timingwheel/[a-z]*\.h\>\ .*[\ *]$fn\( ]] ||
		fail "$fn: the synopsis lacks the #include or the prototype"
	case $ret in
	*void) ;;
	*) [[ $text == *$'\nRETURN VALUE\n'* ]] || fail "$fn returns $ret: no RETURN VALUE" ;;
	esac
	checked=$((checked + 1))
done <"$work/functions"

# man -k: every call of the service, and a call's summary as mandb read it.
k=$(man -k tw_service) || fail "man -k tw_service found nothing after mandb"
for fn in "${names[@]}"; do
	[[ $fn != tw_service_* ]] || grep -q "^$fn (3) *- " <<<"$k" ||
		fail "man -k tw_service does not list $fn"
done
k=$(apropos -l tw_wheel_add) || fail "man -k tw_wheel_add found nothing"
[ "$(sed -n 's/^tw_wheel_add (3) *- //p' <<<"$k")" = "${summary[tw_wheel_add]}" ] ||
	fail "man -k tw_wheel_add printed '$k', not its summary '${summary[tw_wheel_add]}'"
echo "packaging_man_pages: $checked functions, each with its page (man -w finds it, synopsis" \
	"right, no groff warning, mandb reads its NAME line); after mandb PREFIX/share/man," \
	"as timingwheel(3) says, man -k lists the service's calls with their summaries"
