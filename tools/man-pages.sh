#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The manual pages to install, from doxygen's (make docs): a page per
# public function, macro, constant and struct, so that `man tw_wheel_add`
# works as it does for libuv's or the kernel's calls. Doxygen writes one
# page per header (wheel.h.3) and makes each function's page a link to it
# (".so man3/wheel.h.3"); it also writes a page per struct member
# (count.3, next.3, link.3...), names that would shadow other packages'
# pages. Kept: every tw_* and TW_* page; the header pages they link to,
# renamed timingwheel-wheel.h.3 (a bare error.h.3 is not ours to install)
# with the links rewritten.
#   man-pages.sh DOXYGEN_MAN3_DIR OUT_DIR
set -euo pipefail
in=$1 out=$2
rm -rf "$out"
mkdir -p "$out"
n=0
for page in "$in"/tw_*.3 "$in"/TW_*.3; do
	[ -e "$page" ] || continue
	target=$(sed -n '1s|^\.so man3/\(.*\)$|\1|p' "$page")
	case $target in
	*.h.3)
		echo ".so man3/timingwheel-$target" >"$out/$(basename "$page")"
		cp "$in/$target" "$out/timingwheel-$target" ;;
	"") cp "$page" "$out/" ;;
	*) cp "$page" "$out/" ;; # a link to a struct's page, itself tw_*
	esac
	n=$((n + 1))
done
[ $n -gt 0 ] || { echo "man-pages: no tw_* page in $in (make docs first)" >&2; exit 1; }
echo "man-pages: $n pages in $out"
