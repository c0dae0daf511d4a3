#!/bin/sh
# The symbols the public headers declare: a shared library's exports.
#
#   gen-exports.sh list [LIB]  one name a line, sorted
#   gen-exports.sh map [LIB]   a linker version script: node TALLY_0.1
#                              (TALLY_HTTP_0.1 for tally_http) exports
#                              those names, every other symbol is local
#
# LIB is tally (the default: every header of include/tally/ but
# export_http.h) or tally_http (export_http.h, the HTTP endpoint's own
# library).
#
# libtally's names are every tally_ name but the jemalloc integration's
# (tally_jemalloc_*, tally/jemalloc.h), which libtally_jemalloc exports:
# "list jemalloc" and "map jemalloc" (node TALLY_JEMALLOC_0.1) give those.
#
# Functions come from gcc's -aux-info, the compiler's own list of every
# prototype it saw with the file that declared it: no C parsing here.  gcc
# has no such list for variables, so extern variables are read from the
# preprocessed headers: top-level declarations (outside braces) that start
# with "extern" and declare no function.  Only declarations made under
# include/tally/ count (not those of the system headers they include);
# static inline functions do not (they are in every caller).  Run with the
# compiler of the build in CC (default gcc).
set -e
cd "$(dirname "$0")/.."
cc=${CC:-gcc}
case "$1" in
list|map) ;;
*) echo "usage: $0 list|map [tally|tally_http|jemalloc]" >&2; exit 2 ;;
esac
# Which library: the HTTP endpoint's header is libtally_http's; the
# jemalloc integration's names (tally_jemalloc_*) are libtally_jemalloc's;
# libtally has every other.
case "${2:-tally}" in
tally) only= skip=export_http.h node=TALLY_0.1 pick='-v' ;;
tally_http) only=export_http.h skip= node=TALLY_HTTP_0.1 pick='-v' ;;
jemalloc) only= skip=export_http.h node=TALLY_JEMALLOC_0.1 pick= ;;
*) echo "usage: $0 list|map [tally|tally_http|jemalloc]" >&2; exit 2 ;;
esac

inc=$(pwd)/include
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for h in include/tally/*.h; do
	echo "#include <tally/${h#include/tally/}>"
done > "$tmp/all.c"

$cc -std=gnu11 -I"$inc" -fsyntax-only -aux-info "$tmp/aux" "$tmp/all.c"
# "/* FILE:LINE:NC */ extern TYPE NAME (PARAMS);", or for a function that
# returns a function pointer "extern TYPE (*NAME (PARAMS)) (PARAMS);".
awk -v dir="$inc/tally/" -v only="$only" -v skip="$skip" '
	index($0, "/* " dir) != 1 { next }
	{
		f = substr($0, 4 + length(dir))
		sub(/:.*/, "", f)
		if ((only != "" && f != only) || f == skip)
			next
		sub(/^\/\*[^*]*\*\/ /, "")
	}
	!/^extern / { next }
	{
		if (match($0, /\(\*+ *[A-Za-z_][A-Za-z0-9_]* \(/)) {
			name = substr($0, RSTART, RLENGTH)
			gsub(/[(* ]/, "", name)
		} else if (match($0, /[A-Za-z_][A-Za-z0-9_]* \(/)) {
			name = substr($0, RSTART, RLENGTH - 2)
		} else {
			print "gen-exports: cannot read: " $0 > "/dev/stderr"
			exit 1
		}
		print name
	}' "$tmp/aux" > "$tmp/names"

$cc -std=gnu11 -I"$inc" -E "$tmp/all.c" > "$tmp/pp"
awk -v dir="$inc/tally/" -v only="$only" -v skip="$skip" '
	# Line markers name the file the following lines come from.
	/^# [0-9]+ "/ {
		f = $3
		gsub(/"/, "", f)
		name = substr(f, length(dir) + 1)
		mine = index(f, dir) == 1 &&
			(only == "" || name == only) && name != skip
		next
	}
	mine { text = text " " $0 }
	# Drop "KEYWORD (...)" groups, nested parentheses included.
	function drop(s, kw, repl,    i, d, j) {
		while ((i = index(s, kw)) > 0) {
			j = i + length(kw)
			while (substr(s, j, 1) == " ")
				j++
			if (substr(s, j, 1) != "(")
				return s
			for (d = 0; j <= length(s); j++) {
				c = substr(s, j, 1)
				if (c == "(")
					d++
				else if (c == ")" && --d == 0)
					break
			}
			s = substr(s, 1, i - 1) repl substr(s, j + 1)
		}
		return s
	}
	END {
		fnptr = "\\( *\\*+ *((const|volatile) +)*" \
			"[A-Za-z_][A-Za-z0-9_]* *\\)"
		# Top level only: blank out strings, then every brace block
		# (struct bodies, inline function bodies) ends a declaration.
		out = ""
		depth = 0
		n = length(text)
		for (i = 1; i <= n; i++) {
			c = substr(text, i, 1)
			if (c == "\"" || c == "\047") {
				for (i++; i <= n && substr(text, i, 1) != c; i++)
					if (substr(text, i, 1) == "\\")
						i++
				c = " "
			}
			if (c == "{")
				depth++
			else if (c == "}") {
				if (--depth == 0)
					out = out ";"
			} else if (depth == 0)
				out = out c
		}
		ndecl = split(out, decl, ";")
		for (k = 1; k <= ndecl; k++) {
			s = decl[k]
			if (s !~ /^[ \t]*extern[ \t]/)
				continue
			s = drop(s, "__attribute__", "")
			s = drop(s, "__asm__", "")
			s = drop(s, "_Alignas", "")
			s = drop(s, "_Atomic", "T")
			s = drop(s, "__typeof__", "T")
			s = drop(s, "typeof", "T")
			gsub(/\[[^]]*\]/, "", s)
			# A pointer to a function: extern T (*const name)(...).
			if (match(s, fnptr)) {
				s = substr(s, RSTART + 1, RLENGTH - 2)
				gsub(/^[* ]+| +$/, "", s)
				sub(/.* /, "", s)
				print s
				continue
			}
			if (index(s, "("))
				continue	# a function: -aux-info has it
			sub(/=.*/, "", s)
			nv = split(s, var, ",")
			for (v = 1; v <= nv; v++)
				if (match(var[v], /[A-Za-z_][A-Za-z0-9_]*[ \t]*$/)) {
					name = substr(var[v], RSTART, RLENGTH)
					sub(/[ \t]+$/, "", name)
					print name
				}
		}
	}' "$tmp/pp" >> "$tmp/names"

# $pick: word splitting wanted ('-v': every name but the integration's).
LC_ALL=C sort -u "$tmp/names" | grep $pick '^tally_jemalloc_' \
	> "$tmp/sorted" || true
if [ "$1" = list ]; then
	cat "$tmp/sorted"
	exit 0
fi
echo "/* Generated by scripts/gen-exports.sh from include/tally/*.h. */"
echo "$node {"
echo "global:"
sed 's/.*/	&;/' "$tmp/sorted"
echo "local:"
echo "	*;"
echo "};"
