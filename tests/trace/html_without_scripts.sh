#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The tw-trace --html page without JavaScript: inside its <noscript> it
# lists every step as text, and that text, unescaped, is exactly what
# `tw-trace --text` prints for the same scenario (each step's title, its
# narration and the wheel drawn after it). The page also hides its
# controls, which do nothing without a script, when scripts are off.
# (tests/trace/html_in_a_browser.sh checks the same in a browser with scripts off.)
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
	echo "trace_html_noscript: $name: $steps steps as text, as --text prints them"
done
