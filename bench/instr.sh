#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instructions per operation of every library in each of wheel_bench's
# cells (make bench-instr): a count that the machine's noise cannot
# move. wheel_bench --instr runs each library's cells once at one N under
# valgrind's callgrind, started with collection off; it switches
# collection on and off around exactly each cell's timed loop (setup and
# the untimed parts are not counted), dumps the count as "library/cell"
# and prints "instr LIBRARY CELL OPS" (OPS: N; churn's C = 1e6
# reschedules, as in the timed run; the N timers an expiry fires; the N
# resets). It ends with the time the run took under callgrind.
# Each dump's total over OPS, as a table (rows: cells, columns: libraries)
# and as CSV. Further binaries built from the same driver (wheel_bench_inline:
# the wheel compiled into it) run the same way, their libraries as further
# columns. Each WHEEL_BENCH or MORE_BENCH is a path, or a path and the
# driver's own arguments in one word split at spaces ("build/bench/wheel_bench
# --wheel-only --wheel-size 256": make bench-geometry), so one driver can
# give several columns.
#   instr.sh WHEEL_BENCH [N [CSV [MORE_BENCH...]]]
set -euo pipefail
bench=$1 n=${2:-100000} out=${3:-}
shift $(( $# < 3 ? $# : 3 ))
command -v valgrind >/dev/null ||
  { echo "instr.sh: valgrind is not installed (tools/deps.sh valgrind)"; exit 1; }
for b in "$bench" "$@"; do
  read -ra cmd <<<"$b"
  [ -x "${cmd[0]}" ] || { echo "instr.sh: no ${cmd[0]} (build the wheel_bench target)"; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
start=$(date +%s)
k=0
for b in "$bench" "$@"; do
  k=$((k + 1))
  read -ra cmd <<<"$b"
  if ! valgrind -q --tool=callgrind --collect-atstart=no \
      --callgrind-out-file="$dir/cg$k.out" "${cmd[@]}" --instr --n "$n" >>"$dir/stdout" 2>>"$dir/stderr"; then
    cat "$dir/stdout" "$dir/stderr"
    echo "instr.sh: $b --instr failed"
    exit 1
  fi
done
# What the run said besides its counts: any cell that did not fire N
# timers (which stderr names).
grep -v '^instr ' "$dir/stdout" || true
cat "$dir/stderr"
# One line per dump: name and instructions ("summary:", or "totals:").
for f in "$dir"/cg*.out.*; do
  [ -e "$f" ] || continue
  awk '/^desc: Trigger: Client Request: / { sub(/^desc: Trigger: Client Request: /, ""); name = $0 }
       /^summary:/ { s = $2 } /^totals:/ { t = $2 }
       END { if (name != "") print name, (s != "" ? s : t) }' "$f"
done >"$dir/dumps"
# The build the counts are of, from the first binary's CMake cache: a
# count depends on the build type and the compiler (a Release build's
# differ from the default RelWithDebInfo's in several cells).
read -ra cmd <<<"$bench"
cache=$(dirname "$(dirname "$(readlink -f "${cmd[0]}")")")/CMakeCache.txt
built=""
if [ -f "$cache" ]; then
  type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$cache")
  compiler=$(sed -n 's/^set(CMAKE_C_COMPILER_\(ID\|VERSION\) "\(.*\)")$/\2/p' \
    "$(dirname "$cache")"/CMakeFiles/*/CMakeCCompiler.cmake 2>/dev/null | head -2 | paste -sd ' ')
  built="${type:-no build type}${compiler:+, $compiler}"
fi
awk -v n="$n" -v out="$out" -v built="$built" -v secs=$(( $(date +%s) - start )) '
  FNR == NR { count[$1] = $2; next }              # library/cell instructions
  $1 != "instr" { next }
  {
    lib = $2; cell = $3; ops = $4; key = lib "/" cell
    if (!(lib in seen_lib)) { seen_lib[lib] = 1; libs[++nl] = lib }
    if (!(cell in seen_cell)) { seen_cell[cell] = 1; cells[++nc] = cell }
    if (cell == "churn") churn = ops
    if (!(key in count)) { missing++; next }
    per[key] = count[key] / ops; total[key] = count[key]; nops[key] = ops
  }
  END {
    printf "\ninstructions per operation (callgrind), N = %s%s; " \
           "- : the library cannot run the cell (no virtual clock)\n", n, \
           churn == "" ? "" : ", churn C = " churn
    printf "  %-14s", "cell"
    for (j = 1; j <= nl; j++) printf " %12s", libs[j]
    printf "\n"
    for (i = 1; i <= nc; i++) {
      printf "  %-14s", cells[i]
      for (j = 1; j <= nl; j++) {
        key = libs[j] "/" cells[i]
        if (key in per) printf " %12.1f", per[key]; else printf " %12s", "-"
      }
      printf "\n"
    }
    if (out != "") {
      print "library,cell,n,ops,instructions,instructions_per_op" > out
      for (j = 1; j <= nl; j++)
        for (i = 1; i <= nc; i++) {
          key = libs[j] "/" cells[i]
          if (key in per)
            printf "%s,%s,%s,%s,%s,%.2f\n", libs[j], cells[i], n, nops[key],
                   total[key], per[key] > out
        }
      printf "csv: %s\n", out
    }
    if (built != "") printf "built: %s\n", built
    printf "(under callgrind: %d s)\n", secs
    if (missing) { printf "instr.sh: %d cells without a dump\n", missing; exit 1 }
    if (nl == 0) { print "instr.sh: no counts (was wheel_bench built with <valgrind/callgrind.h>?)"; exit 1 }
  }' "$dir/dumps" "$dir/stdout"
