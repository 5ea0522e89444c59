#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# An instrumented build (TW_TSAN or TW_SANITIZE) installs as a variant of
# its own: libtimingwheel-tsan (-asan), timingwheel-tsan.pc and
# find_package(timingwheel-tsan), and nothing else of the plain install's
# (no tw-trace, no pages); so does the checked build (TW_DEBUG alone), as
# timingwheel-debug. Install this build into a scratch prefix, then
# build a threaded program against it both ways a user does (pkg-config,
# CMake) and run it: it must end cleanly, with no sanitizer report. The
# checked build's programs must also be its own: a mistake
# (tests/packaging/consumer/debug_mistake.c) is named on stderr, which the plain
# library does not do.
#
#   install_variant.sh SOURCE_DIR BUILD_DIR WORK_DIR VARIANT (tsan|asan|debug)
set -euo pipefail
src=$1 build=$2 work=$3 variant=$4
pkg=timingwheel-$variant
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
fail() { echo "packaging_install_variant: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name "lib$pkg.a" | head -1)")
[ -f "$libdir/lib$pkg.a" ] || fail "no lib$pkg.a"
[ -n "$(find "$libdir" -name "lib$pkg.so.*.*")" ] || fail "no lib$pkg.so"
[ -f "$libdir/pkgconfig/$pkg.pc" ] || fail "no $pkg.pc"
[ -f "$libdir/cmake/$pkg/${pkg}Config.cmake" ] || fail "no CMake package $pkg"
[ ! -e "$libdir/pkgconfig/timingwheel.pc" ] || fail "the variant installed the plain timingwheel.pc"
[ ! -e "$prefix/bin/tw-trace" ] || fail "the variant installed an instrumented tw-trace"
[ ! -e "$prefix/share/man" ] || fail "the variant installed manual pages"

# A sanitizer report fails the run (exit code 66), and so does a leak.
export TSAN_OPTIONS="halt_on_error=1 exitcode=66"
export ASAN_OPTIONS="halt_on_error=1 exitcode=66 detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1 exitcode=66 print_stacktrace=1"
unset LD_LIBRARY_PATH
run() {
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	grep -q 'Sanitizer' <<<"$out" && { echo "$out"; fail "$1: a sanitizer report"; }
	[ $rc = 0 ] || { echo "$out"; fail "$1 exited with $rc"; }
	echo "$out"
}
# The checked library names the mistake: "timingwheel: tw_wheel_init: ...".
named() {
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	[ $rc = 0 ] || { echo "$out"; fail "$1 exited with $rc"; }
	grep -q '^timingwheel: tw_wheel_init: TW_EINVAL' <<<"$out" ||
		{ echo "$out"; fail "$1: the mistake is not named (not the checked library?)"; }
}

# 1. pkg-config: the .pc brings the sanitizer flag (compile and link).
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs "$pkg")
case $variant:$flags in
debug:*-fsanitize=*) fail "$pkg.pc asks for a sanitizer: $flags" ;;
debug:*) ;;
*:*-fsanitize=*) ;;
*) fail "$pkg.pc lacks -fsanitize: $flags" ;;
esac
# shellcheck disable=SC2086
cc -std=c11 -O1 -g -Wall -Wextra -Werror "$src/tests/packaging/consumer/threads.c" $flags \
	-Wl,-rpath,"$libdir" -o "$work/threads_pc"
run "$work/threads_pc"
if [ "$variant" = debug ]; then
	# shellcheck disable=SC2086
	cc -std=c11 -O1 -g -Wall -Wextra -Werror "$src/tests/packaging/consumer/debug_mistake.c" \
		$flags -Wl,-rpath,"$libdir" -o "$work/mistake_pc"
	named "$work/mistake_pc"
fi

# 2. CMake: find_package of the variant, which brings the flags too.
cp "$src/tests/packaging/consumer/variant/CMakeLists.txt" "$src/tests/packaging/consumer/threads.c" "$work/"
[ "$variant" != debug ] || cp "$src/tests/packaging/consumer/debug_mistake.c" "$work/"
cmake -S "$work" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
	-DTW_VARIANT_PACKAGE="$pkg" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
run "$work/cmake-build/threads_cmake"
[ "$variant" != debug ] || named "$work/cmake-build/mistake_cmake"
# 3. One variant a project: a second package defining the timingwheel::
# targets (a twin of this one under another name, as the plain library is
# beside a variant) is refused, naming the first; the same one found again
# is not.
twin=$libdir/cmake/timingwheel-twin
mkdir -p "$twin" "$work/twin"
cp "$libdir/cmake/$pkg"/* "$twin/"
mv "$twin/${pkg}Config.cmake" "$twin/timingwheel-twinConfig.cmake"
mv "$twin/${pkg}ConfigVersion.cmake" "$twin/timingwheel-twinConfigVersion.cmake"
printf '%s\n' 'cmake_minimum_required(VERSION 3.16)' 'project(tw_twin C)' \
	"find_package($pkg REQUIRED)" "find_package($pkg REQUIRED)" \
	'find_package(timingwheel-twin REQUIRED)' >"$work/twin/CMakeLists.txt"
if out=$(cmake -S "$work/twin" -B "$work/twin/build" -DCMAKE_PREFIX_PATH="$prefix" 2>&1); then
	echo "$out"
	fail "find_package of a second variant in one project was not refused"
fi
# (CMake wraps the reason's lines where it likes.)
tr -s ' \n' '  ' <<<"$out" | grep -q "already come from find_package($pkg)," ||
	{ echo "$out"; fail "the refusal of a second variant does not name the first"; }
rm -rf "$twin"

echo "packaging_install_variant: $pkg installed alone; a threaded program built against it with pkg-config and with find_package ran clean; a second variant in the project refused"
[ "$variant" != debug ] || echo "packaging_install_variant: and a mistake built both ways was named by the checked library"
