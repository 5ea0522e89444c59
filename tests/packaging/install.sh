#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the built library into a scratch prefix and use it the two ways a
# user does: find_package(timingwheel) from CMake (static and shared
# targets) and pkg-config from a plain compiler line. The program is the
# README's quick start, extracted as written.
#
#   install.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

fail() { echo "packaging_install: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null

# What a packager expects to find.
for f in include/timingwheel/timingwheel.h include/timingwheel/wheel.h \
         include/timingwheel/service.h include/timingwheel/purgatory.h; do
  [ -f "$prefix/$f" ] || fail "missing $f"
done
for e in epoll_idle.c libuv_idle.c libevent_idle.c io_uring_idle.c service_pool.c produce_acks.c; do
  [ -f "$prefix/share/doc/timingwheel/examples/$e" ] || fail "missing example $e"
done
# Every scenario README.md's tw-trace paragraph lists (seeds 001, 003 and
# 004 in both modes, and the windows): each in examples/ and installed,
# and tw-trace replays the installed copy.
for s in seed001 seed001-exact seed003 seed003-exact seed004 seed004-exact idle-window; do
  [ -f "$src/examples/$s.tw" ] || fail "README.md lists examples/$s.tw, which is not there"
  [ -f "$prefix/share/doc/timingwheel/examples/$s.tw" ] || fail "missing scenario $s.tw"
  "$prefix/bin/tw-trace" --events "$prefix/share/doc/timingwheel/examples/$s.tw" >/dev/null ||
    fail "the installed tw-trace cannot replay the installed $s.tw"
done
grep -q 'seeds 001, 003 and 004 in' "$src/README.md" && grep -q 'both modes, windows' "$src/README.md" ||
  fail "README.md no longer lists the scenarios this test checks: update the list above"
for m in share/man/man1/tw-trace.1 share/man/man3/timingwheel.3; do
  [ -f "$prefix/$m" ] || fail "missing $m"
  if command -v groff >/dev/null; then
    warnings=$(groff -man -ww -z "$prefix/$m" 2>&1)
    [ -z "$warnings" ] || fail "$m: $warnings"
  fi
done
libdir=$(dirname "$(find "$prefix" -name libtimingwheel.a | head -1)")
[ -f "$libdir/libtimingwheel.a" ] || fail "no static library"
[ -f "$libdir/pkgconfig/timingwheel.pc" ] || fail "no timingwheel.pc"
[ -f "$libdir/cmake/timingwheel/timingwheelConfig.cmake" ] || fail "no CMake config"
so=$(find "$libdir" -name 'libtimingwheel.so.*.*' | head -1)
[ -n "$so" ] || fail "no versioned shared library"
soname=$(objdump -p "$so" | awk '/SONAME/ { print $2 }')
# The SONAME carries the minor version while the major is 0 (a 0.x minor
# may change the ABI), the major alone from 1.0.0 on.
version=$(sed -n 's/^Version: //p' "$libdir/pkgconfig/timingwheel.pc")
major=${version%%.*} minor=${version#*.}
minor=${minor%%.*}
if [ "$major" = 0 ]; then want=libtimingwheel.so.0.$minor; else want=libtimingwheel.so.$major; fi
[ "$soname" = "$want" ] || fail "SONAME is '$soname', not $want (version $version)"
[ -L "$libdir/libtimingwheel.so" ] || fail "no libtimingwheel.so link for -l"

# The README's quick start: the C block after the quickstart marker.
awk '/<!-- quickstart/ { on = 1; next } on && /^```c/ { inside = 1; next }
     inside && /^```/ { exit } inside { print }' "$src/README.md" >"$work/quickstart.c"
[ "$(wc -l <"$work/quickstart.c")" -ge 5 ] || fail "no quick start found in README.md"
expected="ring at 350"

check_run() {
  local out
  out=$("$@") || fail "$1 exited with $?"
  [ "$out" = "$expected" ] || fail "$1 printed '$out', expected '$expected'"
}

# 1. CMake: find_package against the installed copy only.
cp "$src/tests/packaging/consumer/CMakeLists.txt" "$work/"
cmake -S "$work" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
# No LD_LIBRARY_PATH anywhere below: each program must run as built.
unset LD_LIBRARY_PATH
check_run "$work/cmake-build/consumer_static"
check_run "$work/cmake-build/consumer_shared"
check_run "$work/cmake-build/consumer_default"
# (ldd's output in a variable: with pipefail, grep -q closing the pipe
# early would make ldd fail on SIGPIPE.)
for exe in consumer_shared consumer_default; do
  loaded=$(ldd "$work/cmake-build/$exe")
  case $loaded in
    *"$prefix"/*libtimingwheel.so*) ;;
    *) fail "$exe does not load the installed libtimingwheel.so" ;;
  esac
done
loaded=$(ldd "$work/cmake-build/consumer_static")
case $loaded in
  *libtimingwheel.so*) fail "consumer_static loads the shared library" ;;
esac

# 2. pkg-config, the way the README shows it (shared), and --static.
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion timingwheel)" = 0.1.0 ] || fail "pkg-config version"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$work/quickstart.c" \
  $(pkg-config --cflags --libs timingwheel) \
  -Wl,-rpath,"$(pkg-config --variable=libdir timingwheel)" -o "$work/pc_shared"
check_run "$work/pc_shared"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$work/quickstart.c" -static \
  $(pkg-config --cflags --libs --static timingwheel) -o "$work/pc_static"
check_run "$work/pc_static"
# 3. make install PREFIX=... after the build tree was configured with
# another prefix (as make demo leaves it): the files go to PREFIX.
make -s -C "$src" install BUILD="$build" PREFIX="$work/prefix2" >/dev/null
[ -f "$work/prefix2/include/timingwheel/timingwheel.h" ] ||
  fail "make install PREFIX=... did not install into that prefix"
# 4. make install also installs a manual page per function (the build
# writes them, tools/man3.sh; tests/packaging/man_pages.sh checks every one),
# which man finds by the function's name; with doxygen, the HTML pages too.
for m in tw_wheel_add tw_service_cancel_sync tw_purgatory_try_complete_else_watch; do
  [ -f "$work/prefix2/share/man/man3/$m.3" ] || fail "no manual page for $m"
done
if command -v man >/dev/null; then
  page=$(MANPATH="$work/prefix2/share/man" MANWIDTH=100 man tw_service_cancel_sync 2>/dev/null) ||
    fail "man tw_service_cancel_sync failed"
  case $page in
    *"tw_service_cancel_sync(struct tw_service *svc,"*) ;;
    *) fail "man tw_service_cancel_sync does not show the call" ;;
  esac
fi
if command -v doxygen >/dev/null; then
  [ -f "$work/prefix2/share/doc/timingwheel/html/index.html" ] ||
    fail "make install did not install the HTML reference"
else
  echo "packaging_install: no doxygen: the HTML reference was not checked"
fi

echo "packaging_install: headers, libtimingwheel.a, $soname, timingwheel.pc and the CMake config installed; the README quick start builds and runs with find_package and with pkg-config"
