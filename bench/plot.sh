#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Draw build/bench/results.csv as ns/op against N (log-log), one panel per
# cell of wheel_bench (the uniform set's five, the idle timeouts' two, the
# wheel's unordered jump, and the idle cells with windows), one line per
# library the CSV holds (in its order) and the cache-line floor dashed.
#   plot.sh RESULTS.csv OUT.png
set -euo pipefail
csv=$1 out=$2
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not installed (make bench-deps)"; exit 1; }
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
libs=$(awk -F, 'NR > 1 && $1 != "floor" && !seen[$1]++ { print $1 }' "$csv")
works="insert cancel churn expire-step expire-jump idle-reset idle-expire jump-unordered idle-reset-win idle-expire-win"
for lib in $libs; do
  for w in $works; do
    awk -F, -v l="$lib" -v w="$w" '$1 == l && $2 == w { print $3, $4 }' "$csv" >"$data/$lib.$w"
  done
done
awk -F, '$1 == "floor" { print $3, $4 }' "$csv" >"$data/floor"
{
  echo "set terminal pngcairo size 2000,800 font 'sans,9'"
  echo "set output '$out'"
  echo "set logscale xy; set grid; set key top left"
  echo "set format x '10^{%L}'; set xlabel 'N pending'; set ylabel 'ns per operation'"
  echo "set multiplot layout 2,5 title 'timingwheel and its peers (build/bench/results.csv)'"
  for w in $works; do
    echo "set title '$w'"
    plot="plot '$data/floor' using 1:2 with lines dashtype 2 lc rgb 'gray' title 'floor'"
    for lib in $libs; do
      [ -s "$data/$lib.$w" ] && plot="$plot, '$data/$lib.$w' using 1:2 with linespoints lw 2 title '$lib'"
    done
    echo "$plot"
  done
  echo "unset multiplot"
} >"$data/plot.gp"
gnuplot "$data/plot.gp"
echo "plot: $out"
