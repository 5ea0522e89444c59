#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make soak: the stress tests with the schedule shaken (seeded yields and
# sleeps at the protocol's test points), under ThreadSanitizer, round after
# round with new seeds and shapes, for MINUTES minutes. Any failure stops
# it with the seed that found it: rerun that round's command to reproduce
# (the seed fixes each thread's decisions; the OS still adds its own).
# usage: tests/support/soak.sh BUILD_DIR MINUTES [SERVICE_OPS] [PURGATORY_OPS]
set -uo pipefail
dir=$1 minutes=$2 sops=${3:-400000} pops=${4:-20000}
end=$(( $(date +%s) + minutes * 60 ))
rounds=0 ops=0 points=0 shakes=0
start=$(date +%s)
export TSAN_OPTIONS=halt_on_error=1
run() {
	local out
	if ! out=$("$@" 2>&1); then
		echo "$out" | tail -30
		echo "soak: FAILED: $*"
		exit 1
	fi
	ops=$(( ops + $(echo "$out" | sed -n 's/^\(purgatory \)\{0,1\}stress: \([0-9]*\) ops.*/\2/p' | head -1) ))
	points=$(( points + $(echo "$out" | sed -n 's/.*: \([0-9]*\) test points passed.*/\1/p') ))
	shakes=$(( shakes + $(echo "$out" | sed -n 's/.*passed, \([0-9]*\) schedule perturbations.*/\1/p') ))
}
while [ "$(date +%s)" -lt "$end" ]; do
	r=$(( rounds + 1 ))
	threads=$(( 2 << (r % 3) ))      # 2, 4, 8
	pct=$(( 2 + r % 9 ))             # 2..10 % of points perturbed
	run "$dir/tests/service_stress_shaken" "$sops" "$threads" $(( r % 3 )) \
		$(( 1 + r % 8 )) "$r" "$pct"
	run "$dir/tests/purgatory_stress_shaken" "$pops" $(( 1 + r % 4 )) "$r" "$pct"
	rounds=$r
	if [ $(( rounds % 10 )) = 0 ]; then
		echo "soak: $rounds rounds, $ops operations, $shakes schedule perturbations so far"
	fi
done
secs=$(( $(date +%s) - start ))
echo "soak: clean: $rounds rounds in ${secs} s under TSan: $ops operations," \
	"$points test points passed, $shakes schedule perturbations" \
	"($(( shakes / (secs > 0 ? secs : 1) ))/s)"
