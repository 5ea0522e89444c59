#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's table from one wheel_bench CSV: for each workload and N, the
# wheel's ns/op, the fastest peer's and which, and the ratio (> 1: the
# wheel is faster); then the stall test's worst advance per library.
#   table.sh RESULTS.csv
set -euo pipefail
csv=$1
awk -F, '
  NR == 1 || $1 == "floor" || $2 == "stall" { next }
  {
    key = $2 SUBSEP $3
    if ($1 == "timingwheel") ours[key] = $4
    else if (!(key in best) || $4 + 0 < best[key] + 0) { best[key] = $4; who[key] = $1 }
    if (!($3 in seen_n)) { seen_n[$3] = 1; ns[++nn] = $3 }
    if (!($2 in seen_w)) { seen_w[$2] = 1; ws[++nw] = $2 }
  }
  END {
    printf "| workload |"
    for (i = 1; i <= nn; i++) printf " N = %s |", ns[i]
    printf "\n|---|"
    for (i = 1; i <= nn; i++) printf "---|"
    printf "\n"
    for (j = 1; j <= nw; j++) {
      printf "| %s |", ws[j]
      for (i = 1; i <= nn; i++) {
        key = ws[j] SUBSEP ns[i]
        if (!(key in ours) || !(key in best)) { printf " – |"; continue }
        r = best[key] / ours[key]
        printf " %.1f / %.1f %s — %s%.2f×%s |", ours[key], best[key], who[key],
          (r >= 1 ? "**" : ""), r, (r >= 1 ? "**" : "")
      }
      printf "\n"
    }
  }' "$csv"
echo
awk -F, '$2 == "stall" { printf "- %s: worst advance %.2f ms\n", $1, $4 / 1e6 }' "$csv"
