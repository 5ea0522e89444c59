#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The shared library exports exactly the public API: every dynamic symbol
# is a tw_* function declared in include/timingwheel/, and every function
# declared there is exported. The static library defines no global symbol
# outside the tw_ prefix (tw__ is the private half), so nothing of ours
# can collide with a user's own names at link time. The Debian symbols
# file lists the exported set, no more and no less.
#   exported_symbols.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
fail=0
so=$(ls "$build"/libtimingwheel.so.*.* | head -1)
exported=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort -u)
# The functions the public headers declare, read after the preprocessor
# (no macros), one declaration per ';'.
declared=$(printf '#include <timingwheel/timingwheel.h>\n' |
	${CC:-cc} -E -P -I"$src/include" -x c - |
	awk 'BEGIN { RS = ";" } {
		gsub(/[\n\t ]+/, " "); sub(/^[ }]*/, "")
		if ($0 ~ /^(typedef|static|struct [a-z_]+ \{|enum)/) next
		if (match($0, /tw_[a-z0-9_]+ ?\(/)) {
			name = substr($0, RSTART, RLENGTH); sub(/ ?\($/, "", name); print name
		}
	}' | sort -u)
for s in $exported; do
	case $s in
	tw__*) echo "exported private symbol: $s"; fail=1 ;;
	tw_*) grep -qx "$s" <<<"$declared" || { echo "exported, not in a public header: $s"; fail=1; } ;;
	*) echo "exported outside the tw_ namespace: $s"; fail=1 ;;
	esac
done
for s in $declared; do
	grep -qx "$s" <<<"$exported" || { echo "declared but not exported: $s"; fail=1; }
done
# The Debian package's symbols file lists the same set (dpkg-gensymbols
# only warns about a symbol missing there, and the package then promises
# nothing about it).
symbols_file="$src/debian/libtimingwheel0.1.symbols"
listed=$(awk '/^ tw_/ { sub(/@.*/, "", $1); print $1 }' "$symbols_file" | sort -u)
for s in $exported; do
	grep -qx "$s" <<<"$listed" || { echo "exported, not in debian/libtimingwheel0.1.symbols: $s"; fail=1; }
done
for s in $listed; do
	grep -qx "$s" <<<"$exported" || { echo "in debian/libtimingwheel0.1.symbols, not exported: $s"; fail=1; }
done
others=$(nm -g --defined-only "$build/libtimingwheel.a" | awk 'NF == 3 { print $3 }' |
	grep -v '^tw_' || true)
if [ -n "$others" ]; then
	echo "libtimingwheel.a defines symbols outside tw_: $others"
	fail=1
fi
[ $fail = 0 ] || exit 1
echo "packaging_exported_symbols: $(wc -w <<<"$exported") symbols, all tw_*, all declared in include/timingwheel/ and listed in the Debian symbols file"
