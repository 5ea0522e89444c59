#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's table from one wheel_bench CSV: for each cell and N, the
# wheel's ns/op, the fastest peer's and which, and the ratio (> 1: the
# wheel is faster); then the wheel's moves per fired timer in idle expiry
# and the stall test's worst advance per library. A peer is set against
# the wheel's unordered jump with its one-jump expiry, and against the
# wheel's windows with its own windows if it has them, its exact idle
# timeouts otherwise -- as wheel_bench's summary does.
#   table.sh RESULTS.csv
set -euo pipefail
csv=$1
awk -F, '
  NR == 1 || $1 == "floor" || $2 == "stall" || $2 ~ /moves/ { next }
  {
    val[$1, $2, $3] = $4
    if (!($1 in seen_l)) { seen_l[$1] = 1; libs[++nl] = $1 }
    if (!($3 in seen_n)) { seen_n[$3] = 1; ns[++nn] = $3 }
    if ($1 == "timingwheel" && !($2 in seen_w)) { seen_w[$2] = 1; ws[++nw] = $2 }
  }
  function peer(lib, w, n,   alt) {
    if (w == "jump-unordered") return val[lib, "expire-jump", n]
    if ((lib, w, n) in val) return val[lib, w, n]
    alt = w; sub(/-win$/, "", alt)
    return ((lib, alt, n) in val) ? val[lib, alt, n] : ""
  }
  END {
    printf "| cell |"
    for (i = 1; i <= nn; i++) printf " N = %s |", ns[i]
    printf "\n|---|"
    for (i = 1; i <= nn; i++) printf "---|"
    printf "\n"
    for (j = 1; j <= nw; j++) {
      printf "| %s |", ws[j]
      for (i = 1; i <= nn; i++) {
        ours = val["timingwheel", ws[j], ns[i]]; best = ""; who = ""
        for (k = 1; k <= nl; k++) {
          if (libs[k] == "timingwheel") continue
          v = peer(libs[k], ws[j], ns[i])
          if (v != "" && (best == "" || v + 0 < best + 0)) { best = v; who = libs[k] }
        }
        if (ours == "" || best == "") { printf " – |"; continue }
        r = best / ours
        printf " %.1f / %.1f %s — %s%.2f×%s |", ours, best, who,
          (r >= 1 ? "**" : ""), r, (r >= 1 ? "**" : "")
      }
      printf "\n"
    }
  }' "$csv"
echo
awk -F, '$1 == "timingwheel" && $2 == "idle-moves" { exact[$3] = $4 }
  $1 == "timingwheel" && $2 == "idle-moves-win" { win[$3] = $4; ns[++n] = $3 }
  END { for (i = 1; i <= n; i++)
          printf "- idle expiry, N = %s: %.2f moves per fired timer exact, %.2f windowed\n",
            ns[i], exact[ns[i]], win[ns[i]] }' "$csv"
awk -F, '$2 == "stall" { printf "- %s: worst advance %.2f ms\n", $1, $4 / 1e6 }' "$csv"
