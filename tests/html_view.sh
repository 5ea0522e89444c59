#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The tw-trace --html page, in a real browser (headless Chromium): for every
# step of a scenario, the buckets and the bucket queue the page shows must be
# the ones `tw-trace --text` prints for that step. Pressing "next" K times
# must land on the same state as opening step K. Screenshots of a few steps
# are left in OUTDIR.
#
#   html_view.sh TW_TRACE SCENARIO OUTDIR
#
# Exit 77 (ctest: skipped) when no Chromium is installed, unless
# TW_REQUIRE_ALL=1 (CI sets it, so there the test cannot be skipped).
set -euo pipefail
trace=$1 scenario=$2 outdir=$3

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  exec bash "$(dirname "$0")/skip.sh" "trace_html_browser: no Chromium" \
    "(apt-get install chromium, or make deps-all)"
fi

mkdir -p "$outdir"
page=$(cd "$outdir" && pwd)/$(basename "$scenario" .tw).html
"$trace" --html "$page" "$scenario"
"$trace" --text "$scenario" >"$outdir/text"

# Chromium wants a writable home and, as root, no sandbox.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
run_browser() {
  HOME=$profile timeout 60 "$browser" --headless --no-sandbox --disable-gpu \
    --user-data-dir="$profile" --hide-scrollbars "$@" 2>/dev/null
}

# What the page shows: "L<level>#<slot>: names" per non-empty bucket, then
# "queue: expiration L#slot, ...", read from the rendered DOM.
from_dom() {
  run_browser --dump-dom "file://$page#$1" | perl -ne '
    for (split /(?=<div class="bucket)/) {
      next unless /^<div class="bucket[^"]*" data-level="(\d+)" data-slot="(\d+)"/;
      my ($l, $s) = ($1, $2);
      my @names = /<span class="name">([^<]*)<\/span>/g;
      print "L$l#$s: @names\n" if @names;
    }
    push @q, /<li class="qentry">([^<]*)<\/li>/g;
    END { print "queue: ", join(", ", @q), "\n" }'
}

# What --text prints for step K (the K-th "==" or "-- step" block).
from_text() {
  perl -ne '
    BEGIN { $k = -1 }
    $k++ if /^(== |-- step)/;
    next unless $k == '"$1"';
    $level = $1 if /^  level (\d+) /;
    if (/^    bucket (\d+) .*tasks:(.*)$/) {
      my ($s, $t) = ($1, $2);
      my @names = map { s/\(-?\d+\)$//r } split " ", $t;
      print "L$level#$s: @names\n";
    }
    if (/^  queue: (.*)$/) { my $q = $1; $q = "" if $q eq "(empty)"; print "queue: $q\n" }
  ' "$outdir/text"
}

steps=$(grep -cE '^(== |-- step)' "$outdir/text")
drawn=()
for ((k = 0; k < steps; k++)); do
  expected=$(from_text "$k")
  # A step with no drawing ("== run" is followed by its own steps).
  [ -n "$expected" ] || continue
  drawn+=("$k")
  actual=$(from_dom "step=$k")
  if [ "$expected" != "$actual" ]; then
    echo "html_view: step $k differs"
    diff <(echo "$expected") <(echo "$actual") || true
    exit 1
  fi
done
checked=${#drawn[@]}
[ "$checked" -ge 3 ] || { echo "html_view: only $checked steps drawn"; exit 1; }
some=("${drawn[1]}" "${drawn[checked / 2]}" "${drawn[checked - 1]}")

for k in "${some[@]}"; do
  if [ "$(from_dom "clicks=$k")" != "$(from_text "$k")" ]; then
    echo "html_view: $k clicks on next do not show step $k"
    exit 1
  fi
done

for k in "${some[@]}"; do
  shot="$outdir/step$k.png"
  rm -f "$shot"
  run_browser --window-size=1280,760 --screenshot="$shot" \
    "file://$page#step=$k&still=1" >/dev/null
  # A PNG, and not a blank one (a white 1280x760 PNG is ~5 KB).
  [ "$(head -c 8 "$shot" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    { echo "html_view: $shot is not a PNG"; exit 1; }
  [ "$(stat -c %s "$shot")" -gt 20000 ] || { echo "html_view: $shot looks blank"; exit 1; }
done
echo "html_view: $checked of $steps steps match the text trace in $browser; screenshots in $outdir"
