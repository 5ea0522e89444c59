#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make deb: build the Debian packages from a scratch copy of the tree
# (dpkg-buildpackage -us -uc -b), check them with lintian (errors and
# warnings fail), unpack them into a scratch root, find a manual page for
# every public function there, and build and run the
# README's quick start against that root with pkg-config; tw-trace from the
# root must run too.
#   deb.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$(cd "$1" && pwd) work=$2
fail() { echo "deb: $*"; exit 1; }
rm -rf "$work"
mkdir -p "$work/timingwheel" "$work/root"
work=$(cd "$work" && pwd)
# The tracked and the new (not ignored) files, no build trees.
(cd "$src" && git ls-files -co --exclude-standard | grep -v '^build' |
	tar -cf - -T -) | tar -xf - -C "$work/timingwheel"
(cd "$work/timingwheel" && dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) ||
	{ tail -30 "$work/build.log"; fail "dpkg-buildpackage failed"; }
for p in libtimingwheel0.1 libtimingwheel-dev timingwheel-tools; do
	ls "$work"/${p}_*.deb >/dev/null 2>&1 || fail "no $p package"
done
# lintian: E: and W: fail (I: and P: are advice).
report=$(lintian --tag-display-limit 0 "$work"/timingwheel_*.changes 2>&1 |
	grep -v 'running with root privileges' || true)
if grep -qE '^(E|W): ' <<<"$report"; then
	echo "$report"
	fail "lintian found errors or warnings"
fi
for deb in "$work"/*.deb; do
	case $deb in *-dbgsym_*) continue ;; esac
	dpkg -x "$deb" "$work/root"
done
libdir=$(dirname "$(find "$work/root" -name 'libtimingwheel.so.*' | head -1)")
[ -f "$work/root/usr/include/timingwheel/timingwheel.h" ] || fail "no headers"
# A manual page per public function (tests/packaging/man_pages.sh checks them).
npages=0
while read -r fn _; do
	[ -f "$work/root/usr/share/man/man3/$fn.3.gz" ] || fail "no page for $fn in the packages"
	npages=$((npages + 1))
done < <(bash "$src/tests/packaging/public_functions.sh" "$src")
[ $npages -ge 50 ] || fail "only $npages public functions found"
awk '/<!-- quickstart/ { on = 1; next } on && /^```c/ { inside = 1; next }
     inside && /^```/ { exit } inside { print }' "$src/README.md" >"$work/quickstart.c"
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$work/quickstart.c" \
	$(pkg-config --cflags --libs timingwheel) -Wl,-rpath,"$libdir" -o "$work/quickstart"
out=$("$work/quickstart")
[ "$out" = "ring at 350" ] || fail "quick start printed '$out'"
ver=$("$work/root/usr/bin/tw-trace" --version)
[ "$ver" = "tw-trace (timingwheel) $(pkg-config --modversion timingwheel)" ] ||
	fail "tw-trace --version printed '$ver'"
echo "deb: $(cd "$work" && ls ./*.deb | grep -vc dbgsym) packages built, lintian clean," \
	"a manual page for each of the $npages public functions," \
	"the quick start built and ran against them; the packages are in $work"
