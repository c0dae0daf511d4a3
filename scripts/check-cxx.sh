#!/bin/sh
# The public headers from C++, as a C++ program uses them:
#   - every header of include/tally/ compiles alone as C++11 (but
#     percpu_x86_64.h, which says "never include it directly": percpu.h
#     does), and all of them together as C++20, with g++ ($CXX) and
#     clang++-14, under -Wall -Wextra -pedantic -Werror;
#   - tests/cxx/layout.h lists every struct and enum the headers define
#     (build/tests/cxx/test_cxx compares their size and alignment in C++
#     and C);
#   - build/tests/cxx/test_cxx (tests/cxx/test_cxx.cc: the inline fast
#     paths from C++ threads, linked against libtally.a) passes in each
#     rseq mode: glibc's registration, none (TALLY_RSEQ=off), tally's own
#     (glibc.pthread.rseq=0); its lines are repeated with the mode.
# Usage: check-cxx.sh [BUILD] (default build).
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh

build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
why=$tmp/why
flags="-Wall -Wextra -pedantic -Werror -O2 -Iinclude"

# compiles COMPILER NAME: each header alone as C++11, then all as C++20.
compiles() {
	cxx=$1
	name=$2
	if ! command -v "$cxx" > /dev/null 2>&1; then
		echo "no $cxx: make test installs it (scripts/ensure-deps.sh)" \
			> "$why"
		fail "every_public_header_compiles_as_cxx_with_$name" "$why"
		return
	fi
	: > "$why"
	for h in include/tally/*.h; do
		grep -q 'never include it directly' "$h" && continue
		echo "#include <tally/${h#include/tally/}>" > "$tmp/one.cc"
		$cxx -std=c++11 $flags -c "$tmp/one.cc" -o "$tmp/one.o" \
			>> "$why" 2>&1 || echo "^ $h as C++11" >> "$why"
	done
	if [ -s "$why" ]; then
		fail "every_public_header_compiles_alone_as_cxx11_with_$name" \
			"$why"
	else
		pass "every_public_header_compiles_alone_as_cxx11_with_$name"
	fi
	for h in include/tally/*.h; do
		echo "#include <tally/${h#include/tally/}>"
	done > "$tmp/all.cc"
	# $flags: word splitting wanted.
	if $cxx -std=c++20 $flags -c "$tmp/all.cc" -o "$tmp/all.o" \
		> "$why" 2>&1; then
		pass "all_public_headers_compile_together_as_cxx20_with_$name"
	else
		fail "all_public_headers_compile_together_as_cxx20_with_$name" \
			"$why"
	fi
}
compiles "${CXX:-g++}" gxx
compiles clang++-14 clangxx

# The types the headers define against those layout.h lists.
sed -n 's/^\(struct\|enum\) \(tally_[a-z0-9_]*\) {.*/\1 \2/p' \
	include/tally/*.h | LC_ALL=C sort > "$tmp/defined"
grep -o '\<X([^)]*)' tests/cxx/layout.h | sed 's/^X(//; s/)$//' |
	LC_ALL=C sort > "$tmp/listed"
if [ -s "$tmp/defined" ] && cmp -s "$tmp/defined" "$tmp/listed"; then
	pass layout_lists_every_struct_and_enum_of_the_headers
else
	LC_ALL=C comm -3 "$tmp/defined" "$tmp/listed" |
		sed 's/^\t/listed only: /; t; s/^/defined only: /' > "$why"
	fail layout_lists_every_struct_and_enum_of_the_headers "$why"
fi

# run MODE [VAR=VALUE]: the program, its lines repeated with MODE.
bin=$build/tests/cxx/test_cxx
run() {
	mode=$1
	shift
	env -u TALLY_RSEQ -u GLIBC_TUNABLES "$@" "$bin" > "$tmp/out" 2>&1
	rc=$?
	while IFS= read -r line; do
		case "$line" in
		"PASS "*)
			pass "${line#PASS }, $mode"
			;;
		"FAIL "*)
			fail "${line#FAIL }, $mode"
			;;
		[0-9]*" passed, "[0-9]*" failed")
			;;
		*)
			echo "  $line"
			;;
		esac
	done < "$tmp/out"
	if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$tmp/out"; then
		echo "exit status $rc" > "$why"
		fail "cxx_program_runs_to_its_end, $mode" "$why"
	fi
}
if [ -x "$bin" ]; then
	run "glibc rseq"
	run "no rseq" TALLY_RSEQ=off
	run "own rseq" GLIBC_TUNABLES=glibc.pthread.rseq=0
else
	echo "$bin is missing: run make (it needs g++)" > "$why"
	fail cxx_program_is_built "$why"
fi
finish
