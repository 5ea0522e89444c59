#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every relative link in the generated reference leads to a file that is
# there (make docs). Links out (http, mailto) are not followed.
#   check-links.sh HTML_DIR
set -euo pipefail
dir=$1
bad=0 n=0
for page in "$dir"/*.html; do
	while IFS= read -r href; do
		target=${href%%#*}
		[ -z "$target" ] && continue
		case $target in http:* | https:* | mailto:* | javascript:*) continue ;; esac
		n=$((n + 1))
		if [ ! -e "$dir/$target" ]; then
			echo "$(basename "$page"): broken link to $href"
			bad=$((bad + 1))
		fi
	done < <(grep -oE 'href="[^"]*"' "$page" | sed 's/^href="//; s/"$//' | sort -u)
done
echo "check-links: $n relative links, $bad broken"
[ $bad = 0 ]
