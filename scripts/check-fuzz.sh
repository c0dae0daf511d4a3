#!/bin/sh
# The libFuzzer harnesses of tests/fuzz (`make fuzzers` builds them into
# build/fuzz with clang-14): each replays its corpus, tests/fuzz/corpus/NAME
# (seeds and every input that ever failed), then fuzzes for FUZZ_SECONDS
# (default 5; `make fuzz` gives 120) from it, new inputs going to
# build/fuzz/corpus/NAME, a failing one to build/fuzz/found/NAME (its
# path in the failure's detail: add it to the corpus with the fix).
# Without clang-14 and its fuzzer runtime, one failure saying what to
# install.  Prints like a test binary: PASS/FAIL lines, last "N passed,
# N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
seconds=${FUZZ_SECONDS:-5}
cc=${FUZZ_CC:-clang-14}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)
{ (void)d; (void)n; return 0; }' > "$tmp/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined -o "$tmp/probe" \
	"$tmp/probe.c" > "$tmp/why" 2>&1; then
	{ echo "$cc cannot build a libFuzzer harness: install clang-14 and"
	  echo "libclang-rt-14-dev (Debian), e.g. sh scripts/ensure-deps.sh test"
	  echo "as root"; } >> "$tmp/why"
	fail fuzzers_are_built "$tmp/why"
	finish
	exit 1
fi
if make --no-print-directory fuzzers > "$tmp/why" 2>&1; then
	pass fuzzers_are_built
else
	fail fuzzers_are_built "$tmp/why"
	finish
	exit 1
fi

for bin in build/fuzz/fuzz_*; do
	name=${bin#build/fuzz/fuzz_}
	corpus=tests/fuzz/corpus/$name
	found=build/fuzz/found/$name
	if [ ! -d "$corpus" ] || [ -z "$(ls "$corpus")" ]; then
		echo "no corpus in $corpus" > "$tmp/why"
		fail "fuzz_${name}_replays_its_corpus" "$tmp/why"
		continue
	fi
	# Files named one by one: each runs once, none is added.
	if "$bin" "$corpus"/* > "$tmp/log" 2>&1; then
		pass "fuzz_${name}_replays_its_corpus"
	else
		tail -n 40 "$tmp/log" > "$tmp/why"
		fail "fuzz_${name}_replays_its_corpus" "$tmp/why"
	fi
	mkdir -p "build/fuzz/corpus/$name" "$found"
	dict=
	[ -f "tests/fuzz/$name.dict" ] && dict=-dict=tests/fuzz/$name.dict
	# $dict: word splitting wanted (empty: no argument).
	if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 $dict \
		-print_final_stats=1 -artifact_prefix="$found/" \
		"build/fuzz/corpus/$name" "$corpus" > "$tmp/log" 2>&1; then
		pass "fuzz_${name}_holds_for_${seconds}_seconds"
		grep -E '^stat::number_of_executed_units' "$tmp/log" |
			sed "s/^/  info: /"
	else
		{ tail -n 40 "$tmp/log"; echo "the input: $(ls -t "$found" |
			head -n 1 | sed "s|^|$found/|")"; } > "$tmp/why"
		fail "fuzz_${name}_holds_for_${seconds}_seconds" "$tmp/why"
	fi
done
finish
