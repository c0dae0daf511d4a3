#!/bin/sh
# The jemalloc integration against jemalloc's own checks: jemalloc 5.3.0
# built with --enable-debug (scripts/build-jemalloc.sh, cached outside the
# clone), whose assertions and lock-order checker (witness) abort the
# process on a lock taken out of jemalloc's order, preloaded into
#
#   - test_jemalloc, the integration's tests;
#   - the probes of `tally run` at a 64 MiB limit (the preload library and
#     the environment `tally run` gives a program), each run once;
#   - 100 runs of a probe whose 4 threads allocate at the limit while a
#     fifth forks, each killed if it takes over a minute.
#
# Each passes when it exits as without the checks and jemalloc printed
# nothing ("<jemalloc>: ..." is how its checks report).  Prints like a
# test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
probe=build/tests/run/run_probe

built_jemalloc debug
pass debug_jemalloc_is_built
je=$je_dir/lib/libjemalloc.so.2

# quiet NAME: $tmp/out has no report of jemalloc's checks.
quiet() {
	if grep -q '<jemalloc>' "$tmp/out"; then
		cp "$tmp/out" "$tmp/why"
		fail "$1" "$tmp/why"
		return 1
	fi
	return 0
}

# under MAX CMD...: CMD as `tally run --memory-max MAX` runs it, with the
# debug jemalloc; output in $tmp/out, status returned.
under() {
	max=$1
	shift
	MALLOC_CONF=oversize_threshold:0 \
	LD_PRELOAD=$PWD/build/libtally_run.so:$je \
	TALLY_RUN_MEMORY_MAX=$max timeout -k 5 60 "$@" > "$tmp/out" 2>&1
}

if LD_PRELOAD=$je timeout -k 5 600 build/tests/test_jemalloc \
	> "$tmp/out" 2>&1; then
	quiet integration_tests_pass_under_jemalloc_s_checks &&
		pass integration_tests_pass_under_jemalloc_s_checks
else
	cp "$tmp/out" "$tmp/why"
	fail integration_tests_pass_under_jemalloc_s_checks "$tmp/why"
fi

for args in "alloc 200" "realloc 200" "threads" "aligned 64" "fork 200" \
	"forks"; do
	name="tally_run_${args%% *}_at_the_limit_passes_jemalloc_s_checks"
	# shellcheck disable=SC2086 # $args: the probe's arguments
	if under 67108864 "$probe" $args; then
		quiet "$name" && pass "$name"
	else
		{ echo "exit status $?:"; cat "$tmp/out"; } > "$tmp/why"
		fail "$name" "$tmp/why"
	fi
done

hung=0 failed=0
for i in $(seq 1 100); do
	under 67108864 "$probe" forks
	rc=$?
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		hung=$((hung + 1))
	elif [ "$rc" -ne 0 ] || grep -q '<jemalloc>' "$tmp/out"; then
		failed=$((failed + 1))
		cp "$tmp/out" "$tmp/last-failure"
	fi
done
if [ "$hung" -eq 0 ] && [ "$failed" -eq 0 ]; then
	pass forks_at_the_limit_never_hang_in_100_runs
else
	{ echo "$hung of 100 runs hung, $failed failed; the last failure:"
	  cat "$tmp/last-failure" 2>/dev/null; } > "$tmp/why"
	fail forks_at_the_limit_never_hang_in_100_runs "$tmp/why"
fi
finish
