#!/bin/sh
# The jemalloc integration against a jemalloc whose symbols carry a prefix
# (je_malloc(), je_mallctl(), ...: how services that bundle their own
# jemalloc, such as Redis and ClickHouse, build it): jemalloc 5.3.0 built
# with --with-jemalloc-prefix=je_ (scripts/build-jemalloc.sh, cached
# outside the clone), then libtally_jemalloc and its tests in
# build/je-prefixed with JEMALLOC_DIR and JEMALLOC_PREFIX=je_.  The tests
# allocate with je_malloc() (jemalloc.h's JEMALLOC_MANGLE) beside glibc's
# malloc().  Prints like a test binary: PASS/FAIL lines, last "N passed,
# N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
build=build/je-prefixed

built_jemalloc prefixed
if make --no-print-directory BUILD=$build JEMALLOC=yes \
	JEMALLOC_DIR="$je_dir" JEMALLOC_PREFIX=je_ \
	$build/libtally_jemalloc.a $build/tests/test_jemalloc \
	> "$tmp/why" 2>&1; then
	pass the_integration_builds_against_a_prefixed_jemalloc
else
	fail the_integration_builds_against_a_prefixed_jemalloc "$tmp/why"
	finish
	exit 1
fi

# What the integration calls: jemalloc's prefixed names, none of the
# plain ones (those would be glibc's, or undefined).
nm -u $build/libtally_jemalloc.a > "$tmp/undef" 2>&1
if grep -q ' je_mallctl$' "$tmp/undef" && grep -q ' je_mallocx$' "$tmp/undef" &&
   ! grep -Eq ' (mallctl|mallocx|dallocx|mallctlbymib)$' "$tmp/undef"; then
	pass the_integration_calls_the_prefixed_symbols
else
	fail the_integration_calls_the_prefixed_symbols "$tmp/undef"
fi

if timeout -k 5 600 $build/tests/test_jemalloc > "$tmp/out" 2>&1; then
	pass the_integration_s_tests_pass_on_a_prefixed_jemalloc
else
	fail the_integration_s_tests_pass_on_a_prefixed_jemalloc "$tmp/out"
fi
finish
