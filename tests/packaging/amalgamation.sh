#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The amalgamation (tools/amalgamate.sh; docs/performance.md), generated
# from this tree, with each of gcc and clang that is installed:
#   - on its own, it compiles with warnings as errors (the project's
#     warnings and -O2), defines the shared library's API, every call as
#     an external definition and nothing else outside tw_, and the
#     wheel's tests (tests/wheel/: add_cancel_reschedule.c,
#     kafka_timer_tests.c, differential.c) and the error texts' (tests/
#     library/error_texts.c) linked against it pass;
#   - included into the file that calls the wheel, it compiles the same
#     way with kafka_timer_tests.c and differential.c, they pass, and no
#     call to tw_wheel_add, _cancel, _reschedule, _add_range or
#     _reschedule_range is left in them (inlined), while each is still
#     defined;
#   - included after the including file's own system headers (<stdio.h>,
#     <time.h>, <pthread.h>, <unistd.h>), with -std=c11 and no feature
#     macro of its own, it compiles with
#     -Werror=implicit-function-declaration (glibc read the feature
#     macros at that first header: src/posix.h declares what the library
#     needs), and after <stdio.h> it links and starts and stops a service
#     and a purgatory.
#   amalgamation.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
dir=$build/amalgamation-test
rm -rf "$dir"
mkdir -p "$dir"
bash "$src/tools/amalgamate.sh" "$src" "$dir/timingwheel.c" >/dev/null
flags=(-std=c11 -O2 -Wall -Wextra -Werror -Wpedantic -Wshadow -Wstrict-prototypes
       -I"$src/include" -I"$src/tests/support" -I"$dir" -pthread)
hot='tw_wheel_(add|cancel|reschedule|add_range|reschedule_range)'
# A program that includes its system headers first: the clock, the
# service's threads and waits, the purgatory.
cat >"$dir/after-main.inc" <<'EOF'
int main(void)
{
	struct tw_service *svc;
	struct tw_purgatory *p;

	if (tw_service_create(&svc, NULL) != 0)
		return 1;
	if (tw_service_destroy(svc) != 0)
		return 2;
	if (tw_purgatory_create(&p, NULL) != 0)
		return 3;
	tw_purgatory_destroy(p);
	puts("ok");
	return 0;
}
EOF
so=$(ls "$build"/libtimingwheel.so.*.* 2>/dev/null | head -1)
fail=0 ran=0
for cc in gcc clang; do
	if ! command -v "$cc" >/dev/null; then
		echo "skipped: amalgamation with $cc ($cc is not installed)"
		continue
	fi
	ran=$((ran + 1))
	"$cc" "${flags[@]}" -c "$dir/timingwheel.c" -o "$dir/tw-$cc.o"
	defined=$(nm -g --defined-only "$dir/tw-$cc.o" | awk 'NF == 3 { print $3 }' | sort)
	if grep -v '^tw_' <<<"$defined"; then
		echo "$cc: the amalgamation defines the symbols above outside tw_"
		fail=1
	fi
	if [ -n "$so" ]; then
		api=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort -u)
		mine=$(grep -v '^tw__' <<<"$defined" || true)
		if [ "$api" != "$mine" ]; then
			echo "$cc: the amalgamation's API differs from $so's:"
			diff <(echo "$api") <(echo "$mine") || true
			fail=1
		fi
	fi
	for t in wheel/add_cancel_reschedule library/error_texts \
		wheel/kafka_timer_tests wheel/differential; do
		# -I src: differential.c asks the wheel to stop as the
		# service does (src/wheel/for_service.h, inline only).
		"$cc" "${flags[@]}" -I"$src/src" "$src/tests/$t.c" "$dir/tw-$cc.o" -o "$dir/${t#*/}-$cc"
		t=${t#*/}
		args=()
		[ "$t" = differential ] && args=(100000)
		"$dir/$t-$cc" "${args[@]}" >"$dir/$t-$cc.log" 2>&1 ||
			{ tail -20 "$dir/$t-$cc.log"; echo "$cc: $t against the amalgamation failed"; fail=1; }
	done
	for h in stdio.h time.h pthread.h unistd.h; do
		f=$dir/after-${h%.h}.c
		printf '#include <%s>\n#include <stdio.h>\n#include "timingwheel.c"\n' "$h" >"$f"
		cat "$dir/after-main.inc" >>"$f"
		if [ "$h" = stdio.h ]; then
			"$cc" "${flags[@]}" -O0 -Werror=implicit-function-declaration "$f" -o "${f%.c}-$cc" &&
				[ "$("${f%.c}-$cc")" = ok ] ||
				{ echo "$cc: timingwheel.c after <$h> does not build and run"; fail=1; }
		else
			"$cc" "${flags[@]}" -O0 -Werror=implicit-function-declaration -fsyntax-only "$f" ||
				{ echo "$cc: timingwheel.c after <$h> does not compile"; fail=1; }
		fi
	done
	for t in kafka_timer_tests differential; do
		printf '#include "timingwheel.c"\n#include "%s"\n' "$src/tests/wheel/$t.c" >"$dir/inline-$t.c"
		"$cc" "${flags[@]}" -DTW_TEST_AFTER_AMALGAMATION "$dir/inline-$t.c" -o "$dir/inline-$t-$cc"
		args=()
		[ "$t" = differential ] && args=(100000)
		"$dir/inline-$t-$cc" "${args[@]}" >"$dir/inline-$t-$cc.log" 2>&1 ||
			{ tail -20 "$dir/inline-$t-$cc.log"; echo "$cc: $t with the amalgamation included failed"; fail=1; }
		calls=$(objdump -d "$dir/inline-$t-$cc" | grep -cE "call.*<$hot>" || true)
		if [ "$calls" != 0 ]; then
			echo "$cc: $t with the amalgamation included still calls the hot calls $calls times"
			fail=1
		fi
		if [ "$(nm "$dir/inline-$t-$cc" | grep -cE " T $hot\$")" != 5 ]; then
			echo "$cc: $t with the amalgamation included lacks an external definition of a hot call"
			fail=1
		fi
	done
done
[ "$ran" -gt 0 ] || { echo "skipped: amalgamation (neither gcc nor clang)"; exit 0; }
[ "$fail" = 0 ] && echo "amalgamation: compiled with $ran compiler(s), tests pass, hot calls inlined"
exit "$fail"
