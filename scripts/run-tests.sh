#!/bin/sh
# Run every test binary built by `make test`:
#   build/tests/test_*        three times, once per rseq mode: glibc's
#                             registration, the fallback (TALLY_RSEQ=off)
#                             and tally's own (glibc.pthread.rseq=0);
#   build/tests/test_stats*   once more with TALLY_MEMBARRIER=off: the
#   build/tests/test_memcg*   statistics tree's fenced path and the memory
#                             groups' atomic stocks, as on kernels without
#                             membarrier(PRIVATE_EXPEDITED[_RSEQ]);
#   build/inject/tests/test_* once (fault-injection hooks compiled in);
#   build/asan/tests/test_*   once (ASan + UBSan + hooks, halting on any
#                             report);
#   build/tsan/tests/test_*   once (TSan, halting on any report);
# then the checks, which print like a test binary:
#   scripts/check-layers.sh   src/'s includes run one way, from the top
#                             layer down (and the check can fail);
#   scripts/check-deps.sh     scripts/ensure-deps.sh with fake apt-get and
#                             id: installs only service-free packages,
#                             --no-install-recommends, named first; the
#                             Prometheus tools only unpacked in build/tools;
#   scripts/check-examples.sh the examples of build/examples print their
#                             examples/*.expected;
#   scripts/check-exports.sh  the shared libraries (libtally and
#                             libtally_http) export what their headers
#                             declare, install, and run the examples
#                             through pkg-config;
#   scripts/check-plot.sh     `tally plot` on fixtures, hostile JSON, and
#                             without gnuplot;
#   scripts/check-cli.sh      the command-line tool: help, errors, exit
#                             statuses, info's bounds, the metrics demo.
#   scripts/check-top.sh      `tally top` on fixture expositions, a live
#                             exporter's textfile and HTTP endpoint,
#                             hostile input and every error status.
#   scripts/check-run.sh      `tally run` on python3, sqlite3 and C
#                             programs under limits, and its bad input.
#   scripts/check-jemalloc-debug.sh  the integration's tests and `tally
#                             run` at its limit under a debug jemalloc
#                             (its lock-order checker), built once into
#                             ~/.cache/tally by scripts/build-jemalloc.sh.
#   scripts/check-jemalloc-prefixed.sh  the integration built and tested
#                             against a jemalloc whose symbols carry the
#                             prefix je_ (built once into ~/.cache/tally).
#   scripts/check-fuzz.sh     the fuzzers of tests/fuzz (clang-14):
#                             each replays its corpus, then fuzzes 5 s.
#   scripts/check-docs.sh     docs/API.md is what scripts/gen-api-docs.sh
#                             makes of the headers, and every public
#                             function's comment has a Context: line;
#   scripts/check-cxx.sh      the headers from C++: each compiles with
#                             g++ and clang++-14, and a C++ program of
#                             the inline fast paths passes in each rseq
#                             mode;
#   scripts/check-readme.sh   the complete programs of README.md and
#                             docs/*.md compile, run and print what the
#                             docs say.
#   scripts/check-prometheus.sh a real Prometheus server (unpacked in
#                             build/tools) scrapes the HTTP endpoint of
#                             examples/http_endpoint.c on 127.0.0.1 and
#                             PromQL returns the values it set.
#   scripts/check-spin.sh     the Promela models of formal/ (the charge
#                             protocol, the grace domain) verify with
#                             spin, reach every path they name, and
#                             their mutants are rejected.
#   scripts/check-rust.sh     the Rust bindings (bindings/rust): rustfmt,
#                             clippy -D warnings, cargo test (one line
#                             per test), the per_query example's output;
#                             without cargo it says what it skips.
# Sanitizer runs get TALLY_TEST_SCALE=0.5 (fewer iterations, shorter
# stress runs).  Each binary has TALLY_TEST_TIMEOUT seconds (600).
#
# Prints one line per binary (its whole output when it failed), a summary
# per run, and last, alone, "N passed, N failed" over every run.  A binary
# that crashes, times out or exits non-zero without a failed test counts
# one failure more, and so does a run that finds no binary.  Exits non-zero
# when anything failed.
set -u
cd "$(dirname "$0")/.." || exit 1

timeout_s=${TALLY_TEST_TIMEOUT:-600}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
trap 'exit 130' INT TERM
total_passed=0
total_failed=0

# run_binary LABEL BINARY [VAR=VALUE...]: run with a clean environment
# (no tally setting but those given).
run_binary() {
	label=$1
	bin=$2
	shift 2
	start=$(date +%s.%N)
	env -u TALLY_RSEQ -u GLIBC_TUNABLES -u TALLY_TEST_SCALE \
		-u TALLY_MEMBARRIER -u TALLY_SYSFS_ROOT "$@" \
		timeout -k 10 "$timeout_s" "$bin" >"$log" 2>&1
	rc=$?
	secs=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
	last=$(tail -n 1 "$log")
	if echo "$last" | grep -Eq '^[0-9]+ passed, [0-9]+ failed$'; then
		passed=${last%% passed*}
		failed=${last#*, }
		failed=${failed%% failed}
	else
		# Crashed or killed: count what it reported, plus the crash.
		passed=$(grep -c '^PASS ' "$log")
		failed=$(($(grep -c '^FAIL ' "$log") + 1))
	fi
	if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
		failed=1
	fi
	status=ok
	[ "$failed" -eq 0 ] || status=FAILED
	[ "$rc" -eq 124 ] && status="TIMED OUT after ${timeout_s}s"
	printf '  %-12s %-40s %4d passed, %d failed  (%ss, exit %d) %s\n' \
		"$label" "$bin" "$passed" "$failed" "$secs" "$rc" "$status"
	if [ "$failed" -ne 0 ]; then
		sed 's/^/    | /' "$log"
	fi
	run_passed=$((run_passed + passed))
	run_failed=$((run_failed + failed))
}

# run_set LABEL PATTERN [VAR=VALUE...]: every binary PATTERN names.
run_set() {
	label=$1
	pattern=$2
	shift 2
	run_passed=0
	run_failed=0
	found=0
	echo "== $label"
	for bin in $pattern; do
		[ -x "$bin" ] || continue
		found=1
		run_binary "$label" "$bin" "$@"
	done
	if [ "$found" -eq 0 ]; then
		echo "  $label: nothing matches $pattern: run make test"
		run_failed=$((run_failed + 1))
	fi
	echo "== $label: $run_passed passed, $run_failed failed"
	total_passed=$((total_passed + run_passed))
	total_failed=$((total_failed + run_failed))
}

asan="ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1"
ubsan="UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
tsan="TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1"

run_set glibc 'build/tests/test_*'
run_set fallback 'build/tests/test_*' TALLY_RSEQ=off
run_set own 'build/tests/test_*' GLIBC_TUNABLES=glibc.pthread.rseq=0
run_set nomembarrier 'build/tests/test_stats* build/tests/test_memcg*' \
	TALLY_MEMBARRIER=off
run_set inject 'build/inject/tests/test_*'
run_set asan 'build/asan/tests/test_*' TALLY_TEST_SCALE=0.5 "$asan" "$ubsan"
run_set tsan 'build/tsan/tests/test_*' TALLY_TEST_SCALE=0.5 "$tsan"
run_set layers scripts/check-layers.sh
run_set deps scripts/check-deps.sh
run_set examples scripts/check-examples.sh
run_set exports scripts/check-exports.sh
run_set plot scripts/check-plot.sh
run_set cli scripts/check-cli.sh
run_set top scripts/check-top.sh
run_set run scripts/check-run.sh
run_set jemalloc-debug scripts/check-jemalloc-debug.sh
run_set jemalloc-prefixed scripts/check-jemalloc-prefixed.sh
run_set fuzz scripts/check-fuzz.sh
run_set docs scripts/check-docs.sh
run_set cxx scripts/check-cxx.sh
run_set readme scripts/check-readme.sh
run_set prometheus scripts/check-prometheus.sh
run_set spin scripts/check-spin.sh
run_set rust scripts/check-rust.sh

echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
