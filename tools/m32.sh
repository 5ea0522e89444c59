#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A 32-bit build with a 64-bit time_t, and its tests (make m32; CI runs
# it): x86's i386 with glibc's _TIME_BITS=64, as Debian's 32-bit ports
# build since their time_t transition. What it guards: the time the
# library hands the kernel (src/futex.h: a struct timespec is not the
# layout the 32-bit futex call reads), 64-bit arithmetic on 32-bit words
# and sizes that differ (size_t, pointers, a timer's bytes), all with
# warnings as errors. Where the kernel cannot run 32-bit programs itself
# (no IA-32 emulation in it, as on this project's VMs), the tests run
# under qemu-user, which hands the program's system calls to the host
# kernel as the program laid them out.
#
# The tests are the library's own: the wheel's, the service's, the
# purgatory's, the library's and three examples'. Left out: those that
# run the build's tools from a script rather than through ctest (the
# trace tool's, the packaging's, the transitions' mutants), which
# qemu-user would not reach, and two that take minutes under it
# (wheel_differential 122 s, library_overload 101 s, the rest of the run
# 20 s); both pass under qemu-i386 when run by hand.
#   m32.sh WORK_DIR JOBS
set -euo pipefail
work=$1 jobs=$2
src=$(cd "$(dirname "$0")/.." && pwd)
flags="-m32 -D_TIME_BITS=64 -D_FILE_OFFSET_BITS=64"
mkdir -p "$work"

probe=$work/probe
printf 'int main(void) { return 0; }\n' | gcc $flags -x c - -o "$probe"
emulator=""
if ! "$probe" 2>/dev/null; then
	bash "$src/tools/deps.sh" m32-emulator
	emulator=qemu-i386
	echo "m32: this kernel does not run 32-bit programs: the tests run under $emulator"
fi

# No 64-bit library may be found for the examples (pkg-config would
# offer the host's libuv): only the i386 ones, which are not installed.
PKG_CONFIG_LIBDIR=/usr/lib/i386-linux-gnu/pkgconfig \
	cmake -S "$src" -B "$work" -DTW_WERROR=ON -DTW_BUILD_BENCH=OFF \
	-DCMAKE_C_FLAGS="$flags" -DCMAKE_CROSSCOMPILING_EMULATOR="$emulator" >/dev/null
cmake --build "$work" -j "$jobs"
cd "$work"
ctest -j "$jobs" --output-on-failure --timeout 600 \
	-R '^(wheel|service|purgatory|library)_|^example_(epoll_idle|service_pool|produce_acks)$' \
	-E '^(wheel_differential|library_overload)$'
