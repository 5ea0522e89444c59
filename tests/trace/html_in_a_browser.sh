#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The tw-trace --html page, in a real browser (headless Chromium): for every
# step of a scenario, the buckets and the bucket queue the page shows must be
# the ones `tw-trace --text` prints for that step. Pressing "next" K times
# must land on the same state as opening step K. Opened without #step, it
# must show the first step whose --text narration says something (not step
# 0, the empty wheel). Each step must show one time: its title is --text's
# without the "[now T]" (the clock before the command), and the step line
# says "now" once, the clock after the step, with "(from T)" where the
# step moved the clock. With scripts off, the page must list every step as
# text instead. Screenshots of a few steps are left in OUTDIR.
#
# Each Chromium start costs seconds, so one start reads every step: a
# harness page holds the page once per step in an iframe (opened at
# #step=K, or at #clicks=K for the clicks, once with no address fragment,
# and once more with scripts off: a sandboxed frame) and, once all have loaded, copies what each
# shows into itself (--allow-file-access-from-files lets it read them);
# its DOM is dumped once. Then the screenshots, side by side.
#
#   html_in_a_browser.sh TW_TRACE SCENARIO OUTDIR
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
  exec bash "$(dirname "$0")/../support/skip.sh" "trace_html_browser ($(basename "$scenario")): no Chromium" \
    "(apt-get install chromium, or make deps-all)"
fi

mkdir -p "$outdir"
page=$(cd "$outdir" && pwd)/$(basename "$scenario" .tw).html
"$trace" --html "$page" "$scenario"
"$trace" --text "$scenario" >"$outdir/text"

# Chromium wants a writable home and, as root, no sandbox; each start has
# a profile of its own, so that starts may run side by side.
profiles=$(mktemp -d)
trap 'rm -rf "$profiles"' EXIT
run_browser() {
  local profile
  profile=$(mktemp -d -p "$profiles")
  HOME=$profile timeout 60 "$browser" --headless --no-sandbox --disable-gpu \
    --user-data-dir="$profile" --hide-scrollbars "$@" 2>/dev/null
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
      my @names = map { s/\(-?\d+(\.\.-?\d+)?\)$//r } split " ", $t;
      print "L$level#$s: @names\n";
    }
    if (/^  queue: (.*)$/) { my $q = $1; $q = "" if $q eq "(empty)"; print "queue: $q\n" }
  ' "$outdir/text"
}

steps=$(grep -cE '^(== |-- step)' "$outdir/text")
drawn=()
for ((k = 0; k < steps; k++)); do
  # A step with no drawing ("== run" is followed by its own steps).
  [ -z "$(from_text "$k")" ] || drawn+=("$k")
done
checked=${#drawn[@]}
[ "$checked" -ge 3 ] || { echo "trace_html_browser: only $checked steps drawn"; exit 1; }
some=("${drawn[1]}" "${drawn[checked / 2]}" "${drawn[checked - 1]}")
# Where the page must open: the first step with a line of narration
# between its title and its drawing ("  level N  tick ..."), or before the
# next step where it draws nothing.
first=$(perl -ne '
  if (/^(== |-- step)/) { $k++; $on = 1; next }
  $on = 0 if /^  level \d+  tick /;
  if ($on) { print $k - 1, "\n"; exit }' "$outdir/text")
[ -n "$first" ] && [ "$first" -gt 0 ] || { echo "trace_html_browser: no step narrates anything"; exit 1; }

# The harness: the page at #step=K for every drawn step, and at #clicks=K
# for some; when all have loaded, what each shows is copied into it.
harness=$(dirname "$page")/harness.html
{
  echo '<!doctype html><html><head><meta charset="utf-8"></head><body>'
  for k in "${drawn[@]}"; do
    echo "<iframe src=\"$(basename "$page")#step=$k\"></iframe>"
  done
  for k in "${some[@]}"; do
    echo "<iframe src=\"$(basename "$page")#clicks=$k\"></iframe>"
  done
  echo "<iframe src=\"$(basename "$page")\"></iframe>"
  # No allow-scripts: the page's script does not run in this frame.
  echo "<iframe sandbox=\"allow-same-origin\" src=\"$(basename "$page")#noscript\"></iframe>"
  cat <<'HARNESS'
<div id="shown"></div>
<script>
window.addEventListener("load", () => {
  for (const frame of document.querySelectorAll("iframe")) {
    const seen = document.createElement("section");
    const src = frame.getAttribute("src");
    seen.dataset.src = src.includes("#") ? src.replace(/^.*#/, "") : "opened";
    const doc = frame.contentDocument;
    if (doc && frame.sandbox.length) {
      /* Scripts off: what the reader sees instead of the drawing. */
      const shown = e => doc.defaultView.getComputedStyle(e).display !== "none";
      const items = doc.querySelectorAll("#textsteps li pre");
      seen.textContent = "steps as text: " + items.length +
        (items.length ? ", the first titled " + items[0].textContent.split("\n")[0] : "") +
        "; controls " + (shown(doc.getElementById("controls")) ? "shown" : "hidden") +
        ", drawing " + (shown(doc.querySelector("main")) ? "shown" : "hidden");
    } else if (doc && doc.getElementById("wheels")) {
      for (const id of ["stepno", "title"]) {
        const p = document.createElement("p");
        p.className = id;
        p.textContent = doc.getElementById(id).textContent;
        seen.appendChild(p);
      }
      seen.appendChild(doc.getElementById("wheels").cloneNode(true));
      seen.appendChild(doc.getElementById("queue").cloneNode(true));
    }
    document.getElementById("shown").appendChild(seen);
  }
});
</script>
</body></html>
HARNESS
} >"$harness"

# What the page shows at each address: "== ADDRESS", its step line and
# title ("stepno: ...", "title: ..."), then "L<level>#<slot>: names" per
# non-empty bucket, then "queue: expiration L#slot, ...", read from the
# rendered DOM.
run_browser --allow-file-access-from-files --dump-dom "file://$harness" | perl -ne '
  sub flush {
    print "== $src\n", @head, @out, "queue: ", join(", ", @q), "\n" if defined $src;
    @head = (); @out = (); @q = (); undef $src;
  }
  for (split /(?=<section data-src=)|(?=<div class="bucket)/) {
    if (/^<section data-src="noscript">([^<]*)/) { flush(); print "== noscript\n$1\n"; next }
    if (/^<section data-src="([^"]*)"/) {
      flush(); $src = $1;
      push @head, "$1: $2\n" while /<p class="(stepno|title)">([^<]*)<\/p>/g;
    }
    if (/^<div class="bucket[^"]*" data-level="(\d+)" data-slot="(\d+)"/) {
      my ($l, $s) = ($1, $2);
      my @names = /<span class="name">([^<]*)<\/span>/g;
      push @out, "L$l#$s: @names\n" if @names;
    }
    push @q, /<li class="qentry">([^<]*)<\/li>/g;
  }
  END { flush() }' >"$outdir/dom"
# The buckets and queue shown at ADDRESS; dom_line ADDRESS stepno|title:
# that line.
from_dom() {
  awk -v want="== $1" '/^== / { on = ($0 == want); next } on && !/^(stepno|title): /' "$outdir/dom"
}
dom_line() {
  awk -v want="== $1" -v key="$2: " '/^== / { on = ($0 == want); next }
    on && index($0, key) == 1 { print substr($0, length(key) + 1) }' "$outdir/dom"
}
[ "$(grep -c '^== ' "$outdir/dom")" = $((checked + ${#some[@]} + 2)) ] ||
  { echo "trace_html_browser: the harness did not read every frame ($outdir/dom)"; exit 1; }

for k in "${drawn[@]}"; do
  expected=$(from_text "$k")
  actual=$(from_dom "step=$k")
  if [ "$expected" != "$actual" ]; then
    echo "trace_html_browser: step $k differs"
    diff <(echo "$expected") <(echo "$actual") || true
    exit 1
  fi
done

# One time per step: the title without "[now T]", "now" once in the step
# line, and "(from T)" there when the step moved the clock from T.
last=$((steps - 1))
for k in "${drawn[@]}"; do
  text_title=$(grep -E '^(== |-- step)' "$outdir/text" | sed -n "$((k + 1))p")
  before=$(sed -n 's/.*  \[now \(-\{0,1\}[0-9]*\)\]$/\1/p' <<<"$text_title")
  want_title=$(sed 's/ *\[now -\{0,1\}[0-9]*\]$//' <<<"$text_title")
  title=$(dom_line "step=$k" title)
  [ "$title" = "$want_title" ] ||
    { echo "trace_html_browser: step $k is titled '$title', not '$want_title'"; exit 1; }
  stepno=$(dom_line "step=$k" stepno)
  now=$(sed -n "s/^step $k of $last · now \(-\{0,1\}[0-9]*\)\( (from -\{0,1\}[0-9]*)\)\{0,1\}\$/\1/p" <<<"$stepno")
  [ -n "$now" ] ||
    { echo "trace_html_browser: step $k's line reads '$stepno', not 'step $k of $last · now T [(from T)]'"; exit 1; }
  if [ -n "$before" ] && [ "$before" != "$now" ]; then
    [[ $stepno == *"(from $before)" ]] ||
      { echo "trace_html_browser: step $k moved the clock from $before, its line reads '$stepno'"; exit 1; }
  elif [ -n "$before" ] && [[ $stepno == *"(from "* ]]; then
    echo "trace_html_browser: step $k did not move the clock, its line reads '$stepno'"; exit 1
  fi
done

# Opened without an address fragment: the first step that narrates
# something, drawn as --text draws it.
[[ $(dom_line opened stepno) == "step $first of $last "* ]] ||
  { echo "trace_html_browser: opened plainly it shows '$(dom_line opened stepno)', not step $first"; exit 1; }
[ "$(from_dom opened)" = "$(from_text "$first")" ] ||
  { echo "trace_html_browser: opened plainly, its buckets are not step $first's"; exit 1; }

for k in "${some[@]}"; do
  if [ "$(from_dom "clicks=$k")" != "$(from_text "$k")" ]; then
    echo "trace_html_browser: $k clicks on next do not show step $k"
    exit 1
  fi
done

# Scripts off: every step as text, the first the scenario's first
# command, and the controls and the empty drawing hidden.
expected="steps as text: $steps, the first titled $(head -1 "$outdir/text" | sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g'); controls hidden, drawing hidden"
actual=$(from_dom noscript)
if [ "$actual" != "$expected" ]; then
  echo "trace_html_browser: with scripts off the page shows '$actual', not '$expected'"
  exit 1
fi

for k in "${some[@]}"; do
  rm -f "$outdir/step$k.png"
  run_browser --window-size=1280,760 --screenshot="$outdir/step$k.png" \
    "file://$page#step=$k&still=1" >/dev/null &
done
wait
for k in "${some[@]}"; do
  shot="$outdir/step$k.png"
  # A PNG, and not a blank one (a white 1280x760 PNG is ~5 KB).
  [ -f "$shot" ] || { echo "trace_html_browser: no screenshot $shot"; exit 1; }
  [ "$(head -c 8 "$shot" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    { echo "trace_html_browser: $shot is not a PNG"; exit 1; }
  [ "$(stat -c %s "$shot")" -gt 20000 ] || { echo "trace_html_browser: $shot looks blank"; exit 1; }
done
echo "trace_html_browser: $checked of $steps steps match the text trace in $browser, opened at" \
  "each step and after clicks, one time each; opened plainly, step $first; with scripts off," \
  "every step as text; screenshots in $outdir"
