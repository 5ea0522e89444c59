#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The shared library's ABI against the committed baseline
# (abi/libtimingwheel.abi, from abigail-tools' abidw): any difference in
# the exported functions or in the types the public headers define fails,
# an incompatible one loudly. A deliberate change updates the baseline
# with `make abi-baseline` in the same commit (and, if incompatible, bumps
# the minor version while the major is 0, the major after: the SONAME
# follows it, CMakeLists.txt).
#   abi.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
command -v abidiff >/dev/null ||
	exec bash "$(dirname "$0")/../support/skip.sh" "packaging_abi: no abidiff" \
		"(apt-get install abigail-tools, or make deps-all)"
so=$(ls "$build"/libtimingwheel.so.*.* | head -1)
report=$(abidiff --headers-dir2 "$src/include/timingwheel" \
	"$src/abi/libtimingwheel.abi" "$so" 2>&1)
rc=$?
if [ $rc = 0 ]; then
	echo "packaging_abi: $(basename "$so") matches abi/libtimingwheel.abi"
	exit 0
fi
echo "$report"
if [ $((rc & 8)) != 0 ]; then
	echo "packaging_abi: INCOMPATIBLE ABI change against abi/libtimingwheel.abi"
elif [ $((rc & 4)) != 0 ]; then
	echo "packaging_abi: the ABI changed (compatibly): if that is meant, run make abi-baseline and commit abi/libtimingwheel.abi"
else
	echo "packaging_abi: abidiff failed ($rc)"
fi
exit 1
