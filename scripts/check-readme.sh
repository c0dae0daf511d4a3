#!/bin/sh
# The programs of the documentation compile and run as written.
#
# Convention: a ```c block whose first line is an #include is a complete
# program; any other ```c block is a fragment.  In README.md every ```c
# block must be a complete program.  This script takes every complete
# program of README.md and docs/*.md (not docs/API.md, which holds the
# headers' declarations), compiles it on its own - ISO C11, warnings as
# errors, only the public headers of include/ and the static library of
# BUILD (default build) - and runs it: it must exit 0.  When the next
# fenced block after a program is marked ```output, the program must print
# exactly that block on standard output.
#
# Usage: check-readme.sh [BUILD]
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
build=${1:-build}
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$build/libtally.a" ]; then
	echo "$build/libtally.a is missing: run make lib" >"$tmp/log"
	fail documentation_programs_have_a_library "$tmp/log"
	finish
	exit
fi

# extract FILE DIR: write DIR/N.c for the N-th complete program of FILE,
# DIR/N.line with its first line's number, DIR/N.out with its expected
# output when it has one; print one line per ```c fragment "LINE" (which
# README.md may not hold).
extract() {
	awk -v dir="$2" '
		function close_files() {
			if (prog != "") close(prog)
			if (out != "") close(out)
			prog = ""
			out = ""
		}
		fence == "" && /^```/ {
			info = $0
			sub(/^```+[ \t]*/, "", info)
			sub(/[ \t]+$/, "", info)
			fence = info
			start = NR
			first = 1
			if (info == "output" && last != "") {
				out = dir "/" last ".out"
				printf "" > out
			}
			last = ""
			next
		}
		fence != "" && /^```[ \t]*$/ {
			if (fence == "c" && first)
				print start + 1	# an empty block
			fence = ""
			last = (prog != "") ? n : ""
			close_files()
			next
		}
		fence == "c" && first {
			first = 0
			if ($0 ~ /^#include[ \t]*[<"]/) {
				n++
				prog = dir "/" n ".c"
				print NR > (dir "/" n ".line")
				close(dir "/" n ".line")
			} else {
				print NR	# a fragment
			}
		}
		fence == "c" && prog != "" { print > prog }
		fence == "output" && out != "" { print > out }
	' "$1"
}

total=0
for doc in README.md docs/*.md; do
	[ -f "$doc" ] || continue
	[ "$doc" = docs/API.md ] && continue
	dir="$tmp/$(echo "$doc" | tr '/.' '__')"
	mkdir -p "$dir"
	extract "$doc" "$dir" >"$dir/fragments"
	if [ "$doc" = README.md ]; then
		if [ -s "$dir/fragments" ]; then
			while read -r line; do
				echo "README.md:$line: a \`\`\`c block that is" \
					"not a complete program (its first line" \
					"must be an #include)"
			done <"$dir/fragments" >"$tmp/log"
			fail readme_c_blocks_are_complete_programs "$tmp/log"
		else
			pass readme_c_blocks_are_complete_programs
		fi
		if [ -f "$dir/1.c" ]; then
			pass readme_has_a_complete_program
		else
			echo "README.md has no \`\`\`c block starting with" \
				"#include" >"$tmp/log"
			fail readme_has_a_complete_program "$tmp/log"
		fi
	fi
	n=1
	while [ -f "$dir/$n.c" ]; do
		name="$doc:$(cat "$dir/$n.line")"
		bin="$dir/$n"
		total=$((total + 1))
		if ! "$cc" -std=c11 -O2 -Wall -Wextra -Werror -Iinclude \
			-o "$bin" "$dir/$n.c" "$build/libtally.a" -pthread -lm \
			>"$tmp/log" 2>&1; then
			fail "${name}_program_compiles" "$tmp/log"
			n=$((n + 1))
			continue
		fi
		pass "${name}_program_compiles"
		env -u TALLY_RSEQ -u GLIBC_TUNABLES -u TALLY_MEMBARRIER \
			-u TALLY_SYSFS_ROOT timeout -k 5 60 "$bin" \
			>"$dir/$n.got" 2>"$tmp/log"
		rc=$?
		if [ "$rc" -ne 0 ]; then
			{
				echo "exit status $rc; standard output:"
				cat "$dir/$n.got"
				echo "standard error:"
				cat "$tmp/log"
			} >"$tmp/why"
			fail "${name}_program_runs" "$tmp/why"
		else
			pass "${name}_program_runs"
			if [ -f "$dir/$n.out" ]; then
				if diff -u "$dir/$n.out" "$dir/$n.got" \
					>"$tmp/why" 2>&1; then
					pass "${name}_program_prints_its_output"
				else
					fail "${name}_program_prints_its_output" \
						"$tmp/why"
				fi
			fi
		fi
		n=$((n + 1))
	done
done
finish
