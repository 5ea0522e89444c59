#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tw-trace and what it cannot write or read: each case exits 2 with a
# message on stderr, never 0 with a truncated trace or page.
#   - --html to a full disk (/dev/full), or to a file past its size limit:
#     "the page was not written whole", and no page cut short left behind;
#   - --text and --events to a full standard output: "standard output";
#   - --html onto the scenario's own file: refused, the scenario untouched;
#   - a scenario whose read fails (/proc/self/mem): the read's error, not
#     "no commands".
#   output_errors.sh TW_TRACE WORKDIR
set -uo pipefail
trace=$1 work=$2
scenario=tests/trace/scenarios/cancel.tw
fail=0
rm -rf "$work"
mkdir -p "$work"

# expect NAME PATTERN COMMAND...: exit 2 and PATTERN on stderr.
expect() {
	local name=$1 pattern=$2 rc
	shift 2
	"$@" 2>"$work/$name.err"
	rc=$?
	if [ $rc != 2 ] || ! grep -q -- "$pattern" "$work/$name.err"; then
		echo "trace_output_errors: $name: exit $rc, stderr '$(cat "$work/$name.err")'" \
			"(want exit 2 and '$pattern')"
		fail=1
	fi
}

if [ -w /dev/full ]; then
	expect html_full "/dev/full: the page was not written whole" \
		"$trace" --html /dev/full "$scenario"
	expect text_full "tw-trace: standard output:" \
		bash -c '"$0" --text "$1" >/dev/full' "$trace" "$scenario"
	expect events_full "tw-trace: standard output:" \
		bash -c '"$0" --events "$1" >/dev/full' "$trace" "$scenario"
else
	echo "trace_output_errors: no writable /dev/full here: the full-disk cases not run"
fi
# A file that reaches its size limit (ulimit -f, the signal ignored: the
# write fails with EFBIG) as a disk that fills: exit 2, and no page cut
# short is left behind.
expect html_too_big "big.html: the page was not written whole" \
	bash -c 'trap "" XFSZ; ulimit -f 8 && exec "$0" --html "$1" "$2"' \
	"$trace" "$work/big.html" "$scenario"
[ ! -e "$work/big.html" ] ||
	{ echo "trace_output_errors: a page cut short ($(wc -c <"$work/big.html") bytes) was left behind"; fail=1; }
cp "$scenario" "$work/own.tw"
expect html_over_scenario "own.tw: is the scenario itself" \
	"$trace" --html "$work/own.tw" "$work/own.tw"
cmp -s "$scenario" "$work/own.tw" ||
	{ echo "trace_output_errors: the page replaced its own scenario"; fail=1; }
if [ -r /proc/self/mem ]; then
	expect unreadable "^/proc/self/mem: [A-Z]" "$trace" --events /proc/self/mem
fi
[ $fail = 0 ] || exit 1
echo "trace_output_errors: a full disk, a page over its scenario and an unreadable scenario each exit 2 with a message"
