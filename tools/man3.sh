#!/bin/sh
# SPDX-License-Identifier: MIT
# A manual page per public function, from the doc comment above its
# prototype in the public headers: NAME (the comment's first sentence, what
# `man -k` prints), SYNOPSIS (the #include and the prototype), DESCRIPTION
# (the comment's text and its @param lines), RETURN VALUE (@return,
# @retval), THREAD SAFETY (@par Thread safety) and SEE ALSO (the calls the page
# names). The build runs it (CMakeLists.txt), so every install path --
# cmake --install, make install, the .deb -- ships the pages, and nothing
# beyond sh and a POSIX awk (mawk, Debian's) is needed: no doxygen.
#   man3.sh OUT_DIR VERSION DATE HEADER...
set -eu
out=$1 version=$2 date=$3
shift 3
mkdir -p "$out"
rm -f "$out"/*.3
awk -v out="$out" -v version="$version" -v date="$date" '
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }

# Text for roff: a backslash written as \e, a call tw_x() in bold, @p x in
# italics, and a line that would start with a control character guarded.
function roff(s,    r, i, c) {
	r = ""
	while ((i = index(s, "\\")) > 0) { r = r substr(s, 1, i - 1) "\\e"; s = substr(s, i + 1) }
	s = r s
	r = ""
	while (match(s, /@p [A-Za-z_][A-Za-z_0-9]*/)) {
		r = r substr(s, 1, RSTART - 1) "\\fI" substr(s, RSTART + 3, RLENGTH - 3) "\\fP"
		s = substr(s, RSTART + RLENGTH)
	}
	s = r s
	r = ""
	while (match(s, /tw_[a-z_0-9]+\(\)/)) {
		r = r substr(s, 1, RSTART - 1) "\\fB" substr(s, RSTART, RLENGTH - 2) "\\fP()"
		s = substr(s, RSTART + RLENGTH)
	}
	s = r s
	# Markdown bold, which may span lines: each ** opens or closes it.
	r = ""
	while ((i = index(s, "**")) > 0) {
		r = r substr(s, 1, i - 1) (in_bold ? "\\fP" : "\\fB")
		in_bold = !in_bold
		s = substr(s, i + 2)
	}
	s = r s
	c = substr(s, 1, 1)
	if (c == "." || c == "\047") s = "\\&" s
	return s
}

# The calls a text names, for SEE ALSO.
function mentions(s,    n) {
	while (match(s, /tw_[a-z_0-9]+\(\)/)) {
		n = substr(s, RSTART, RLENGTH - 2)
		if (!(n in seen_here)) { seen_here[n] = 1; named[nfn] = named[nfn] " " n }
		s = substr(s, RSTART + RLENGTH)
	}
}

# A doc comment, tag by tag: the prose (paragraphs and "- " lists), then
# each @param, @return, @retval and "@par Thread safety" with its
# continuation lines (the paragraph text starts on the line after it).
function doc_line(line,    t, ind, b) {
	ind = match(line, /[^ ]/) ? RSTART - 1 : 0
	t = trim(line)
	if (t ~ /^@code/) { in_code = 1; prose = prose "\n.PP\n.RS 4\n.nf"; return }
	if (t ~ /^@endcode/) { in_code = 0; prose = prose "\n.fi\n.RE"; return }
	if (in_code) {
		line = substr(line, 5)
		gsub(/-/, "\\-", line)
		prose = prose "\n" roff(line)
		return
	}
	if (t ~ /^@param/) {
		tag = "param"; np++
		sub(/^@param/, "", t)
		pdir[np] = ""
		if (t ~ /^\[out\]/) { pdir[np] = " (out)"; sub(/^\[out\]/, "", t) }
		t = trim(t)
		pname[np] = t; sub(/[ \t].*/, "", pname[np])
		ptext[np] = (t ~ /[ \t]/) ? trim(substr(t, length(pname[np]) + 1)) : ""
		return
	}
	if (t ~ /^@return[ \t]/) { tag = "return"; ret = trim(substr(t, 8)); return }
	if (t ~ /^@retval[ \t]/) {
		tag = "retval"; nrv++
		t = trim(substr(t, 8))
		rvname[nrv] = t; sub(/[ \t].*/, "", rvname[nrv])
		rvtext[nrv] = trim(substr(t, length(rvname[nrv]) + 1))
		return
	}
	if (t ~ /^@par Thread safety$/) { tag = "thread"; thread = ""; return }
	if (t ~ /^@/) { tag = "other"; return }
	if (tag == "param") { ptext[np] = ptext[np] " " t; return }
	if (tag == "return") { ret = ret " " t; return }
	if (tag == "retval") { rvtext[nrv] = rvtext[nrv] " " t; return }
	if (tag == "thread") { thread = thread == "" ? t : thread " " t; return }
	if (tag == "other") return
	if (t == "") { if (prose != "") prose = prose "\n.PP"; item_ind = -1; return }
	if (t ~ /^- /) {
		prose = prose "\n.IP \\(bu 2"
		item_ind = ind
		t = trim(substr(t, 3))
	} else if (item_ind >= 0 && ind <= item_ind) {
		prose = prose "\n.PP"
		item_ind = -1
	}
	if (brief_open) {
		b = t
		gsub(/\*\*/, "", b)
		brief = brief (brief == "" ? "" : " ") b
		brief_end()
	}
	plain = plain " " t
	prose = prose "\n" roff(t)
}

# The first sentence, as doxygen takes it: up to a full stop and a space
# (or the end of the line), an abbreviation such as "e.g." aside.
function brief_end(    rest, at, i) {
	rest = brief; at = 0
	while (match(rest, /\.( |$)/)) {
		i = at + RSTART
		if (substr(brief, i - 3, 3) !~ /^(e\.g|i\.e)$/) {
			brief = substr(brief, 1, i - 1); brief_open = 0; return
		}
		at = i; rest = substr(brief, i + 1)
	}
}

function reset_doc() {
	prose = ""; plain = ""; brief = ""; brief_open = 1; tag = ""; np = 0; nrv = 0
	ret = ""; thread = ""; in_code = 0; item_ind = -1; in_bold = 0
}

# The synopsis line: the prototype on one line, the name in bold and each
# parameter name in italics, wrapped at commas under its opening paren.
function synopsis(decl, name,    head, args, parts, n, i, a, m, lines, width, pad, cur) {
	i = index(decl, "(")
	head = substr(decl, 1, i - 1)
	args = substr(decl, i + 1)
	sub(/\)[^)]*$/, "", args)
	sub(name "$", "", head)
	n = split(args, parts, ",")
	pad = sprintf("%" (length(head) + length(name) + 1) "s", "")
	cur = head "\\fB" name "\\fP("
	width = length(head) + length(name) + 1
	lines = ""
	for (i = 1; i <= n; i++) {
		a = trim(parts[i])
		if (a != "void" && match(a, /[A-Za-z_][A-Za-z_0-9]*$/))
			a = substr(a, 1, RSTART - 1) "\\fI" substr(a, RSTART) "\\fP"
		m = (i < n) ? a "," : a ");"
		if (i > 1 && width + length(m) + 1 > 72) {
			lines = lines cur "\n"
			cur = pad; width = length(pad)
		} else if (i > 1) { cur = cur " "; width++ }
		cur = cur m
		gsub(/\\f[BIP]/, "", m)
		width += length(m)
	}
	return lines cur
}

function emit(name, decl, header,    f, i, ref, refs, n, k, uc) {
	nfn++
	fname[nfn] = name
	split("", seen_here)
	seen_here[name] = 1
	mentions(plain)
	for (i = 1; i <= np; i++) mentions(ptext[i])
	mentions(ret)
	for (i = 1; i <= nrv; i++) mentions(rvtext[i])
	mentions(thread)
	f = out "/" name ".3"
	file[nfn] = f
	uc = toupper(name)
	print ".\\\" SPDX-License-Identifier: MIT" > f
	print ".\\\" Generated by tools/man3.sh from " header "; edit the header, not this page." > f
	print ".TH " uc " 3 \"" date "\" \"timingwheel " version "\" \"Library Functions Manual\"" > f
	print ".SH NAME" > f
	print name " \\- " brief > f
	print ".SH LIBRARY" > f
	print "timingwheel" > f
	print ".RB ( \\-ltimingwheel ," > f
	print ".BR \"pkg\\-config timingwheel\" ," > f
	print ".RB \"CMake \" \\%find_package(timingwheel) )" > f
	print ".SH SYNOPSIS" > f
	print ".nf" > f
	print ".B #include <timingwheel/" header ">" > f
	print ".PP" > f
	print synopsis(decl, name) > f
	print ".fi" > f
	print ".SH DESCRIPTION" > f
	sub(/^\n/, "", prose)
	print prose > f
	if (np > 0) {
		print ".PP" > f
		print "Parameters:" > f
		for (i = 1; i <= np; i++) {
			print ".TP" > f
			print ".I " pname[i] pdir[i] > f
			print roff(ptext[i]) > f
		}
	}
	if (ret != "" || nrv > 0) {
		print ".SH RETURN VALUE" > f
		if (ret != "") print roff(ret) > f
		for (i = 1; i <= nrv; i++) {
			print ".TP" > f
			print ".B " rvname[i] > f
			print roff(rvtext[i]) > f
		}
	}
	if (thread != "") {
		print ".SH THREAD SAFETY" > f
		print roff(thread) > f
	}
	close(f)
}

FNR == 1 { header = FILENAME; sub(/.*\//, "", header); state = "code"; have_doc = 0 }

state == "doc" {
	line = $0
	if (line ~ /\*\//) { sub(/[ \t]*\*\/.*/, "", line); state = "code"; have_doc = 1 }
	sub(/^[ \t]*\* ?/, "", line)
	if (line != "" || state == "doc") doc_line(line)
	next
}

state == "code" && (/^[ \t]*\/\*\*[^<]/ || /^[ \t]*\/\*\*$/) {
	reset_doc()
	line = $0
	sub(/^[ \t]*\/\*\* ?/, "", line)
	if (line ~ /\*\//) { sub(/[ \t]*\*\/.*/, "", line); doc_line(line); have_doc = 1; next }
	state = "doc"
	if (line != "") doc_line(line)
	next
}

state == "decl" {
	decl = decl " " trim($0)
	if ($0 ~ /[;{]/) { end_decl(); }
	next
}

have_doc && /[^ \t]/ {
	if ($0 ~ /^[ \t]*#/) { have_doc = 0; next }
	decl = trim($0)
	if ($0 ~ /[;{]/) end_decl(); else state = "decl"
	next
}

function end_decl(    head, name) {
	state = "code"; have_doc = 0
	sub(/[ \t]*[;{].*$/, "", decl)
	gsub(/[ \t]+/, " ", decl)
	if (decl ~ /^typedef/ || index(decl, "(") == 0) return
	head = substr(decl, 1, index(decl, "(") - 1)
	if (!match(head, /tw_[a-z_0-9]+[ ]*$/)) return
	name = trim(substr(head, RSTART))
	sub(/[ ]+\(/, "(", decl)
	emit(name, decl, header)
}

END {
	for (k = 1; k <= nfn; k++) have[fname[k]] = 1
	for (k = 1; k <= nfn; k++) {
		f = file[k]
		n = split(named[k], refs, " ")
		print ".SH SEE ALSO" >> f
		for (i = 1; i <= n; i++)
			if (refs[i] in have) print ".BR " refs[i] " (3)," >> f
		print ".BR timingwheel (3)" >> f
		close(f)
	}
	if (nfn == 0) { print "man3.sh: no documented function found" > "/dev/stderr"; exit 1 }
}
' "$@"
