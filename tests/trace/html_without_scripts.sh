#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The tw-trace --html page without JavaScript: inside its <noscript> it
# lists every step as text, and that text, unescaped, is exactly what
# `tw-trace --text` prints for the same scenario (each step's title, its
# narration and the wheel drawn after it). The page also hides its
# controls, which do nothing without a script, when scripts are off.
# (tests/trace/html_in_a_browser.sh checks the same in a browser with scripts off.)
# And what the script is given: it opens at FIRST_STEP, which must be the
# first step whose --text narration says something (not step 0, the empty
# wheel); and each step carries one title without --text's "[now T]" (the
# clock before the command), with the clock before ("from") and after
# ("now") it, so that the page shows one time per step. The page is valid
# UTF-8, as it says it is (a title over 4 KiB was once cut in the middle
# of a character: scenarios/long_line.tw).
#
#   html_without_scripts.sh TW_TRACE OUTDIR SCENARIO...
set -euo pipefail
trace=$1 outdir=$2
shift 2
mkdir -p "$outdir"
for scenario in "$@"; do
	name=$(basename "$scenario" .tw)
	page=$outdir/$name.html
	"$trace" --html "$page" "$scenario"
	"$trace" --text "$scenario" >"$outdir/$name.text"
	# The page says it is UTF-8: it is, for a scenario that is.
	iconv -f UTF-8 -t UTF-8 "$page" >/dev/null 2>&1 ||
		{ echo "trace_html_noscript: $page is not valid UTF-8"; exit 1; }
	grep -q '<noscript><style>#controls, main { display: none; }</style></noscript>' "$page" ||
		{ echo "trace_html_noscript: $page does not hide its controls without scripts"; exit 1; }
	# The <pre> of each <li> inside the noscript section, unescaped.
	perl -0ne '
		/<noscript><section id="textsteps">(.*?)<\/section><\/noscript>/s or die "no noscript section\n";
		my $s = $1;
		while ($s =~ /<li><pre>(.*?)<\/pre><\/li>/gs) {
			my $t = $1;
			$t =~ s/&lt;/</g; $t =~ s/&gt;/>/g; $t =~ s/&amp;/&/g;
			print $t;
		}' "$page" >"$outdir/$name.noscript" ||
		{ echo "trace_html_noscript: $page has no <noscript> list of the steps"; exit 1; }
	if ! cmp -s "$outdir/$name.text" "$outdir/$name.noscript"; then
		echo "trace_html_noscript: $name: the page's text differs from tw-trace --text:"
		diff "$outdir/$name.text" "$outdir/$name.noscript" | head -20
		exit 1
	fi
	steps=$(grep -cE '^(== |-- step)' "$outdir/$name.text")
	[ "$(grep -c '^<li><pre>' "$page")" = "$steps" ] ||
		{ echo "trace_html_noscript: $name: not one <li> per step ($steps steps)"; exit 1; }
	# The first step with a narration line: a line between its title and
	# its drawing (which starts with "  level N  tick"), or, undrawn ("==
	# run"), before the next step.
	first=$(perl -ne '
		if (/^(== |-- step)/) { $k++; $on = 1; next }
		$on = 0 if /^  level \d+  tick /;
		if ($on) { print $k - 1, "\n"; exit }' "$outdir/$name.text")
	opens=$(sed -n 's/^const FIRST_STEP = \([0-9]*\);$/\1/p' "$page")
	[ -n "$first" ] && [ "$first" -gt 0 ] ||
		{ echo "trace_html_noscript: $name: no step narrates anything"; exit 1; }
	[ "$opens" = "$first" ] ||
		{ echo "trace_html_noscript: $name: the page opens at step '$opens', not $first (the first that narrates something)"; exit 1; }
	# One time per step: titles without "[now T]", each step its from and now.
	perl -0ne '
		/const STEPS = \[\n(.*?)\];\n/s or die "no STEPS\n";
		my $s = $1; my $n = 0;
		while ($s =~ /\{"title":"((?:[^"\\]|\\.)*)","log":"(?:[^"\\]|\\.)*","from":"-?\d+","now":"-?\d+",/g) {
			my $title = $1;
			die "a title still shows the clock: $title\n" if $title =~ /\[now /;
			$n++;
		}
		die "$n steps have a title, from and now, of '"$steps"'\n" if $n != '"$steps"';
	' "$page" || { echo "trace_html_noscript: $name: not one time per step"; exit 1; }
	echo "trace_html_noscript: $name: $steps steps as text, as --text prints them;" \
		"opens at step $first, the first that narrates something; one time per step"
done
