#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian packages a make target needs, and only those.
#
#   tools/deps.sh [--optional] GROUP...
#
# Each group is a list of probe:package pairs (a command on the PATH, or a
# file that must exist, or a pattern of files one of which must exist). Missing packages are installed with apt-get as
# root, or with sudo when it works without a password, and without their
# recommended packages: only what is named here (and what those packages
# depend on) is installed, so a package a target needs that Debian only
# recommends is named here itself. Otherwise nothing is
# installed: the script names the packages and the command to install
# them, and fails, or with --optional only says so (the tests that need
# them are then skipped, each saying why).
set -euo pipefail

declare -A groups=(
	# make build / demo / test: the compiler and CMake; pkg-config for
	# the install test; the C library's headers (gcc only recommends them)
	[build]="cmake:cmake cc:gcc /usr/include/stdio.h:libc6-dev pkg-config:pkg-config"
	# make test, optional: the C++ header test and the event-loop examples
	[test]="g++:g++ /usr/include/uv.h:libuv1-dev /usr/include/event2/event.h:libevent-dev
		/usr/include/liburing.h:liburing-dev"
	# make test, optional and large (Chromium is 356 MB): the browser test
	# of tw-trace --html and the ABI check
	[test-extra]="chromium:chromium abidiff:abigail-tools"
	# make clang / fuzz: libFuzzer and the sanitizers' runtimes, which
	# clang only recommends
	[clang]="clang:clang
		/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a:libclang-rt-dev"
	# make m32: gcc's 32-bit x86 libraries and the i386 C library; and
	# qemu-user, where the kernel cannot run 32-bit programs itself
	[m32]="/usr/lib/gcc/x86_64-linux-gnu/*/32/crtbegin.o:gcc-multilib
		/usr/include/x86_64-linux-gnu/gnu/stubs-32.h:gcc-multilib"
	[m32-emulator]="qemu-i386:qemu-user"
	[valgrind]="valgrind:valgrind"
	[model]="spin:spin"
	[coverage]="lcov:lcov"
	[docs]="doxygen:doxygen"
	# dpkg-buildpackage refuses to build without build-essential, which
	# dpkg-dev only recommends
	[deb]="dh:debhelper lintian:lintian dpkg-buildpackage:dpkg-dev fakeroot:fakeroot
		/usr/share/build-essential/list:build-essential"
	# make bench*: wheel_bench's peers (libevent-dev has the static
	# archive it links) and gnuplot for the plot
	[bench]="/usr/include/uv.h:libuv1-dev /usr/include/ev.h:libev-dev
		/usr/include/event2/event.h:libevent-dev pkg-config:pkg-config
		gnuplot:gnuplot-nox"
)

optional=0
if [ "${1:-}" = --optional ]; then
	optional=1
	shift
fi
[ $# -gt 0 ] || { echo "usage: tools/deps.sh [--optional] GROUP... (${!groups[*]})" >&2; exit 2; }

missing=()
set -f # the groups' patterns are probes, for compgen, not words to expand
for g in "$@"; do
	[ -n "${groups[$g]+set}" ] || { echo "deps: no group '$g' (${!groups[*]})" >&2; exit 2; }
	for dep in ${groups[$g]}; do
		probe=${dep%%:*} pkg=${dep##*:}
		case $probe in
		*'*'*) compgen -G "$probe" >/dev/null && continue ;;
		/*) [ -e "$probe" ] && continue ;;
		*) command -v "$probe" >/dev/null 2>&1 && continue ;;
		esac
		case " ${missing[*]-} " in *" $pkg "*) ;; *) missing+=("$pkg") ;; esac
	done
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=sudo
else
	echo "deps: missing for '$*': ${missing[*]}"
	echo "deps: not root and no password-less sudo; install them with:"
	echo "      sudo apt-get install --no-install-recommends ${missing[*]}"
	if [ $optional = 1 ]; then
		echo "deps: going on without them (the tests that need them are skipped)"
		exit 0
	fi
	exit 1
fi
echo "deps: installing for '$*': ${missing[*]}"
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
