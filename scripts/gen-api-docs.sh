#!/bin/sh
# docs/API.md from the public headers: `make docs` runs it, and
# scripts/check-docs.sh fails when the committed file differs from what it
# prints, so the reference never drifts from the comments it is made of.
#
# Per header (include/tally/*.h, in name order): its design comment (the
# first plain comment, kept as it is written, in a text block), then every
# kernel-doc comment ("/**") with the declaration that follows it: a
# function's prototype or signature, a struct, enum or typedef, a macro.
# The comment's first line "NAME() - summary" gives the heading, "@arg:"
# lines the parameter list, "Context:" and "Return:" their own paragraphs;
# the rest is text, where tab-indented lines are kept as code.  No C
# parsing beyond that layout, which every header follows.
#
# Usage: gen-api-docs.sh [HEADER...]   (default include/tally/*.h); prints
# the markdown on stdout.
set -eu
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- include/tally/*.h

echo "# tally API reference"
echo
echo "Generated from the comments of the public headers by"
echo "\`scripts/gen-api-docs.sh\` (\`make docs\`); do not edit: edit the headers."
echo "Every function's \"Context\" says whether it is MT-safe (callable from"
echo "several threads at once) and async-signal-safe (callable from a signal"
echo "handler), and what it may do that matters there: take a lock, wait,"
echo "allocate."
echo
for h in "$@"; do
	name=${h#include/}
	anchor=$(echo "$name" | tr -d './')
	echo "- [$name](#$anchor)"
done

for h in "$@"; do
	awk -v header="${h#include/}" '
	function strip(line) {
		sub(/^ \*\/$/, "", line)
		if (line == " *")
			return ""
		sub(/^ \* ?/, "", line)
		return line
	}
	# @arg and %CONST as code; nothing else of kernel-doc needs markup.
	function inline(s,    out) {
		out = ""
		while (match(s, /[@%][A-Za-z_][A-Za-z0-9_]*/)) {
			out = out substr(s, 1, RSTART - 1) "`" \
				substr(s, RSTART + 1, RLENGTH - 1) "`"
			s = substr(s, RSTART + RLENGTH)
		}
		return out s
	}
	# Print @s after the blank line asked for since the last output.
	function out(s) {
		if (blank)
			print ""
		blank = 0
		print s
	}
	# Text lines; a tab-indented run becomes an indented code block.
	function text(line) {
		if (line == "") {
			blank = 1
			return
		}
		if ((line ~ /^\t/) != in_code)
			blank = 1
		in_code = line ~ /^\t/
		if (in_code) {
			sub(/^\t/, "", line)
			out("    " line)
		} else {
			out(inline(line))
		}
	}
	function flush_section() {
		if (section != "") {
			blank = 1
			out("**" section ":** " inline(section_text))
		}
		section = ""
		section_text = ""
	}
	# Render the comment in doc[1..ndoc] and the declaration decl.
	function render(    i, line, title, name, summary, m) {
		title = doc[1]
		i = 2
		while (i <= ndoc && doc[i] ~ /^\t/) {
			m = doc[i]
			sub(/^\t/, "", m)
			title = title " " m
			i++
		}
		if (match(title, /^[A-Za-z_][A-Za-z0-9_ ]*(\(\))? - /)) {
			name = substr(title, 1, RLENGTH - 3)
			summary = substr(title, RLENGTH + 1)
		} else {
			name = decl_name
			summary = title
		}
		blank = 1
		out("### `" name "`")
		blank = 1
		out("```c")
		out(decl)
		out("```")
		blank = 1
		out(inline(summary))
		# Parameters, each with its tab-indented continuation.
		nparam = 0
		while (i <= ndoc && doc[i] ~ /^@[A-Za-z_][A-Za-z0-9_]*:/) {
			m = doc[i]
			i++
			while (i <= ndoc && doc[i] ~ /^\t/) {
				line = doc[i]
				sub(/^\t/, "", line)
				m = m " " line
				i++
			}
			if (!nparam++)
				blank = 1
			match(m, /^@[A-Za-z_][A-Za-z0-9_]*:/)
			out("- `" substr(m, 2, RLENGTH - 2) "`:" \
			    inline(substr(m, RLENGTH + 1)))
		}
		in_code = 0
		section = ""
		for (; i <= ndoc; i++) {
			line = doc[i]
			if (match(line, /^(Context|Return): /)) {
				flush_section()
				section = substr(line, 1, RLENGTH - 2)
				section_text = substr(line, RLENGTH + 1)
				continue
			}
			if (section != "" && line != "") {
				section_text = section_text " " line
				continue
			}
			flush_section()
			text(line)
		}
		flush_section()
		in_code = 0
		blank = 0
	}
	BEGIN {
		print ""
		print "## " header
		state = "top"
	}
	# The design comment: the first plain "/*" comment.
	state == "top" && $0 == "/*" {
		print ""
		print "```text"
		state = "design"
		next
	}
	state == "design" {
		if ($0 == " */") {
			print "```"
			state = "body"
		} else {
			print strip($0)
		}
		next
	}
	state == "top" { next }
	# A one-line kernel-doc comment.
	state == "body" && /^\/\*\* .* \*\/$/ {
		ndoc = 1
		doc[1] = $0
		sub(/^\/\*\* /, "", doc[1])
		sub(/ \*\/$/, "", doc[1])
		state = "decl"
		decl = ""
		next
	}
	state == "body" && $0 == "/**" {
		ndoc = 0
		state = "doc"
		next
	}
	state == "doc" {
		if ($0 == " */") {
			state = "decl"
			decl = ""
		} else {
			doc[++ndoc] = strip($0)
		}
		next
	}
	# The declaration after a kernel-doc comment: a macro with its
	# continuation lines, a struct/enum body up to "};", a prototype up
	# to ";", or an inline function signature up to its "{" line.
	state == "decl" {
		if (decl == "") {
			kind = "proto"
			if ($0 ~ /^#define /)
				kind = "macro"
			else if ($0 ~ /^(struct|enum|union)[^;(]*\{$/)
				kind = "body"
			decl_name = $0
			sub(/^#define /, "", decl_name)
			sub(/[^A-Za-z0-9_].*/, "", decl_name)
			decl = $0
		} else if (kind == "proto" && $0 == "{") {
			decl = decl ";"	# an inline function: its signature
		} else {
			decl = decl "\n" $0
		}
		if ((kind == "macro" && $0 !~ /\\$/) ||
		    (kind == "body" && $0 ~ /^}.*;$/) ||
		    (kind == "proto" && ($0 ~ /;$/ || $0 == "{"))) {
			render()
			state = "body"
		}
		next
	}
	END {
		if (state != "body") {
			print "gen-api-docs: " header ": unterminated " state \
				> "/dev/stderr"
			exit 1
		}
	}' "$h"
done
