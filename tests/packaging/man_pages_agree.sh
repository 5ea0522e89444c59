#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hand-written manual pages (man/: timingwheel(3), tw-trace(1)) say
# what the headers say. (The page per function is written from the
# headers' comments, tools/man3.sh; man_pages.sh checks those.)
#   - Every tw_* name in a page is one the headers declare (a function, a
#     type, a member), and every one the page calls -- "name(", ".BR name
#     ()", "name (3)" -- is a function the headers declare: a page cannot
#     name a call that does not exist, or one that was renamed.
#   - Each prototype in timingwheel(3)'s synopsis returns what the
#     header's declaration returns.
#   - timingwheel(3)'s rule for when a service timer may be freed is the
#     header's (service.h, "When may a timer be freed?"): it names
#     tw_service_timer_shutdown(), and a timer is free after its callback
#     or tw_service_cancel_sync() only if nothing added it meanwhile.
# It reads the sources only: no build, no man-db.
#   man_pages_agree.sh SOURCE_DIR
set -euo pipefail
src=$1
fail() { echo "packaging_man_pages_agree: $*"; exit 1; }

# "NAME RETURN-TYPE" of each public function, as the compiler reads the
# headers; and every tw_* identifier the headers declare or use.
functions=$(bash "$src/tests/packaging/public_functions.sh" "$src")
[ "$(wc -l <<<"$functions")" -ge 50 ] || fail "too few functions found in the headers"
declare -A ret=() known=()
while read -r name type; do
	ret[$name]=${type//_Bool/bool}
done <<<"$functions"
while read -r name; do
	known[$name]=1
done < <(${CC:-cc} -E -P -I "$src/include" "$src/include/timingwheel/timingwheel.h" |
	grep -o 'tw_[a-z0-9_]*' | sort -u)

# A page's text with troff's font escapes and quotes gone, one line of the
# source a line: ".BR tw_wheel_add ()," reads "tw_wheel_add (),".
plain() {
	sed -e 's/\\f[BIRP]//g; s/\\f(..//g; s/\\-/-/g; s/\\e/\\/g' \
	    -e 's/^\.[A-Z][A-Z]* *//; s/"//g' "$1"
}

pages=("$src"/man/*.[1-9])
[ "${#pages[@]}" -ge 2 ] || fail "no pages in $src/man"
calls=0
for page in "${pages[@]}"; do
	name=${page##*/}
	text=$(plain "$page")
	for id in $(grep -o 'tw_[a-z0-9_]*' <<<"$text" | sort -u); do
		[ -n "${known[$id]:-}" ] || fail "$name names $id, which no header declares"
	done
	# Called: the name, then "(" after at most a space.
	for id in $(grep -o 'tw_[a-z0-9_]* \{0,1\}(' <<<"$text" | tr -d ' (' | sort -u); do
		[ -n "${ret[$id]:-}" ] || fail "$name names $id() (or its page), which is not a function the headers declare"
		calls=$((calls + 1))
	done
done

# timingwheel(3)'s synopsis: "TYPE tw_name(" as the header declares it.
page=$src/man/timingwheel.3
protos=0
while read -r type id; do
	[ "$type" = "${ret[$id]:-}" ] ||
		fail "timingwheel(3)'s synopsis: $id returns '$type', its header says '${ret[$id]:-nothing}'"
	protos=$((protos + 1))
done < <(sed -n '/^\.SH SYNOPSIS/,/^\.SH/p' "$page" |
	sed -n 's/^\.BI "\([a-z_0-9 ]*[a-z_0-9]\) \{1,\}\**\(tw_[a-z0-9_]*\)(.*/\1 \2/p')
[ "$protos" -ge 10 ] || fail "only $protos prototypes read from timingwheel(3)'s synopsis"

# The service's entry in timingwheel(3), as one line: from ".B The timer
# service" to the next entry.
service=$(sed -n '/^\.B The timer service/,/^\.TP/p' "$page" | sed '$d' |
	plain /dev/stdin | tr '\n' ' ' | tr -s ' ')
[ -n "$service" ] || fail "timingwheel(3) has no entry for the timer service"
for phrase in "may be freed" "tw_service_timer_shutdown ()" "nothing added since" \
	      "tw_service_cancel_sync () returned with no add made meanwhile" "handed it back"; do
	[[ $service == *"$phrase"* ]] ||
		fail "timingwheel(3)'s rule for freeing a service timer lacks '$phrase' (service.h: \"When may a timer be freed?\"): $service"
done

echo "packaging_man_pages_agree: ${#pages[@]} pages: every tw_* name declared, $calls functions" \
	"named, each declared; $protos synopsis prototypes return what the headers say;" \
	"timingwheel(3) frees a service timer by the header's rule"
