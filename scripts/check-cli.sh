#!/bin/sh
# The command-line tool build/tally (or $1): versions, help of every
# command, error prefixes and exit statuses (0 done, 1 failed, 2 bad
# command line), `tally info` against the bounds of include/tally/counter.h,
# and `tally metrics --demo` through promtool and the OpenMetrics parser
# (the package prometheus unpacked into build/tools, and Debian's python3
# with its prometheus_client, by scripts/ensure-deps.sh test; a missing one
# fails).
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
tally=${1:-build/tally}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run ARGS...: run the tool; status in $rc, output in $tmp/out, $tmp/err.
run() {
	"$tally" "$@" > "$tmp/out" 2> "$tmp/err"
	rc=$?
}

# expect NAME STATUS [grep -E pattern of stdout]: judge the last run.
expect() {
	if [ "$rc" -ne "$2" ]; then
		{ echo "exit status $rc, expected $2"; cat "$tmp/out" "$tmp/err"; } \
			> "$tmp/why"
		fail "$1" "$tmp/why"
	elif [ -n "${3:-}" ] && ! grep -Eq -- "$3" "$tmp/out"; then
		{ echo "no line matches: $3"; cat "$tmp/out"; } > "$tmp/why"
		fail "$1" "$tmp/why"
	else
		pass "$1"
	fi
}

# expect_error NAME STATUS: failed with STATUS, stderr starting "tally: ".
expect_error() {
	if [ "$rc" -eq "$2" ] && head -n 1 "$tmp/err" | grep -q '^tally: '; then
		pass "$1"
	else
		{ echo "exit status $rc, expected $2 and 'tally: ...'"
		  cat "$tmp/err"; } > "$tmp/why"
		fail "$1" "$tmp/why"
	fi
}

if [ ! -x "$tally" ]; then
	echo "$tally is missing" > "$tmp/why"
	fail cli_tool_is_built "$tmp/why"
	finish
	exit 1
fi

version=$(header_version)
for v in --version:long_option -V:short_option version:command; do
	run "${v%%:*}"
	expect "cli_version_${v#*:}_prints_the_makefile_version" 0 \
		"^tally $version\$"
done

run --help
expect cli_help_lists_commands_and_exit_statuses 0 \
	'^Exit status: 0 done, 1 failed'
for c in bench info metrics run version; do
	run help "$c"
	expect "cli_help_${c}_prints_its_usage" 0 "^usage: tally $c"
	run "$c" --help
	expect "cli_${c}_help_option_prints_its_usage" 0 "^usage: tally $c"
done
for b in counter stats export charge malloc; do
	run bench help "$b"
	expect "cli_bench_help_${b}_prints_its_usage" 0 "^usage: tally bench $b"
done

run frobnicate
expect_error cli_unknown_command_is_a_usage_error 2
run
expect_error cli_no_command_is_a_usage_error 2
run bench
expect_error cli_bench_without_a_benchmark_is_a_usage_error 2
run plot --frobnicate
expect_error cli_plot_unknown_option_is_a_usage_error 2
run plot
expect_error cli_plot_without_a_file_is_a_usage_error 2
# Numbers gnuplot cannot draw are the input's fault (status 2, said
# before gnuplot runs), never a script that gnuplot rejects (status 1):
# zero on a log axis is left out, as a bar is; a number near the largest
# double is refused.  plot_bad_input NAME MEDIAN MESSAGE: an oom plot of
# two rows with that median says MESSAGE (a grep pattern).
plot_bad_input() {
	printf '%s\n' '{"benchmark": "oom", "select": [' \
		"{\"tasks\": 1, \"cpus\": 8, \"method\": \"m\", \"median_us\": $2}," \
		"{\"tasks\": 2, \"cpus\": 8, \"method\": \"m\", \"median_us\": $2}]}" \
		> "$tmp/$1.json"
	run plot "$tmp/$1.json" -o "$tmp/$1.out"
	if [ "$rc" -eq 2 ] && grep -q "$3" "$tmp/err" &&
	   ! grep -q 'gnuplot:' "$tmp/err"; then
		pass "$1"
	else
		{ echo "exit $rc"; cat "$tmp/err"; } > "$tmp/why"
		fail "$1" "$tmp/why"
	fi
}
plot_bad_input cli_plot_zero_on_a_log_axis_is_left_out_not_given_to_gnuplot \
	0 'no number to plot'
plot_bad_input cli_plot_number_too_large_to_draw_is_refused_as_bad_input \
	1e308 '^tally: .*1e+300'
# More readers than the benchmark starts (100,000 over the CPUs it may
# use): on one CPU that is more than the option allows at all.
run bench stats --overload-per-cpu $((100000 / $(nproc) + 1)) --only readers
expect_error cli_bench_stats_refuses_more_readers_than_threads 2
run bench frobnicate
expect_error cli_unknown_benchmark_is_a_usage_error 2
run version extra
expect_error cli_version_refuses_arguments 2
run info --frobnicate
expect_error cli_info_unknown_option_is_a_usage_error 2
run info --batch 48
expect_error cli_info_refuses_a_batch_not_a_power_of_two 2
run info --cpus 0
expect_error cli_info_refuses_zero_cpus 2
run metrics
expect_error cli_metrics_without_demo_is_a_usage_error 2
run metrics --demo --format yaml
expect_error cli_metrics_unknown_format_is_a_usage_error 2
run bench export --stats 257
expect_error cli_bench_export_refuses_too_many_stats 2
run bench charge --fill near
expect_error cli_bench_charge_refuses_an_unknown_fill 2
run bench charge --threads 65
expect_error cli_bench_charge_refuses_more_than_64_threads 2
run bench charge --groups 65
expect_error cli_bench_charge_refuses_more_than_64_groups_per_cpu 2
run metrics --demo -o /nonexistent-dir/tally.prom
expect_error cli_metrics_unwritable_file_fails_with_status_1 1

# The charge benchmark's smoke run: every design, both fills, with and
# without 16 groups per CPU, the oracle and the error phase, the JSON
# layout, and no false refusal of tally's in any row.
run bench charge --quick --threads 1,2 --depth 2 --json "$tmp/charge.json"
expect cli_bench_charge_quick_runs_every_phase 0 '^384 +sim +256( +[0-9]+){3} +0$'
if [ "$(grep -c '"design": "[a-z_]*", "threads": [12], "depth": 2, "groups_per_cpu": \(0\|16\), "fill": "\(far\|95\)", "ns_per_pair": [0-9.]*,' "$tmp/charge.json")" -eq 32 ] &&
   ! grep '"design": "tally", "threads"' "$tmp/charge.json" | grep -qv '"false_refusals": 0,' &&
   grep -q '"false_refusals": 0, "max_overshoot": [0-9]*, "max_error"' "$tmp/charge.json" &&
   grep -q '"benchmark": "charge"' "$tmp/charge.json"; then
	pass cli_bench_charge_json_has_a_row_per_design_and_cell
else
	cp "$tmp/charge.json" "$tmp/why" 2>/dev/null || echo "no JSON" > "$tmp/why"
	fail cli_bench_charge_json_has_a_row_per_design_and_cell "$tmp/why"
fi

# The malloc benchmark's smoke run: every design, the JSON the plot reads.
run bench malloc --quick --reps 1 --threads 2 --json "$tmp/malloc.json"
expect cli_bench_malloc_quick_runs_every_design 0 '^2 +[0-9.]+( +-?[0-9.]+){8}$'
if [ "$(grep -c '"design": "[a-z]*", "threads": 2, "ns_per_pair": [0-9.]*,' "$tmp/malloc.json")" -eq 5 ] &&
   grep -q '"design": "switch", .*"ns_per_switch": -\{0,1\}[0-9.]*' "$tmp/malloc.json" &&
   grep -q '"design": "tally", .*"accounting_error": -\{0,1\}[0-9]*, "jemalloc_active": [0-9]*' "$tmp/malloc.json"; then
	pass cli_bench_malloc_json_has_a_row_per_design
else
	cp "$tmp/malloc.json" "$tmp/why" 2>/dev/null || echo "no JSON" > "$tmp/why"
	fail cli_bench_malloc_json_has_a_row_per_design "$tmp/why"
fi
run bench malloc --threads 17
expect_error cli_bench_malloc_refuses_more_than_16_threads 2

run info
expect cli_info_names_the_rseq_mode 0 '^rseq: +(glibc|own|fallback)( |$)'
expect cli_info_gives_the_membarrier_mode 0 \
	'^membarrier: +kernel .*; statistics trees (fence|flush)'
expect cli_info_gives_possible_and_online_cpus 0 \
	'^CPUs: +possible .*, online .* \([0-9]+ online\)$'
# The bounds of include/tally/counter.h's table, and the stats tree's
# batch x CPUs + CPUs x (batch - 1).
run info --cpus 64
expect cli_info_64_cpus_tree_is_4_4_4 0 'arity \{4,4,4\}'
expect cli_info_64_cpus_counter_bound_is_5056 0 'at most 5056 below and 0 above'
expect cli_info_64_cpus_stats_bound_is_8128 0 'at most 8128$'
run info --cpus 256 --batch 32
expect cli_info_256_cpus_tree_is_8_8_4 0 'arity \{8,8,4\}'
expect cli_info_256_cpus_counter_bound_is_22272 0 'at most 22272 below'
expect cli_info_256_cpus_stats_bound_is_16128 0 'batch 32: .* at most 16128$'
run info --cpus 4096 --batch 32
expect cli_info_4096_cpus_counter_bound_is_471040 0 'at most 471040 below'

run metrics --demo
cp "$tmp/out" "$tmp/demo.prom"
expect cli_metrics_demo_prints_prometheus_text 0 \
	'^tally_hier_anon_bytes\{group="/"\} 5120000$'
promtool=build/tools/prometheus/usr/bin/promtool
if [ -x "$promtool" ]; then
	if "$promtool" check metrics < "$tmp/demo.prom" > "$tmp/why" 2>&1; then
		pass cli_metrics_demo_passes_promtool
	else
		fail cli_metrics_demo_passes_promtool "$tmp/why"
	fi
else
	echo "$promtool is missing: scripts/ensure-deps.sh test unpacks" \
		"the Debian package prometheus there" > "$tmp/why"
	fail cli_metrics_demo_passes_promtool "$tmp/why"
fi
run metrics --demo --format openmetrics --label host=web-1 \
	--label 'zone=eu "1"' --pid
cp "$tmp/out" "$tmp/demo.om"
expect cli_metrics_demo_openmetrics_ends_with_eof 0 '^# EOF$'
expect cli_metrics_demo_labels_and_pid_follow_group 0 \
	'^tally_local_pgfault_total\{group="/tenant-a/db",host="web-1",zone="eu \\"1\\"",pid="[0-9]+"\} 2000$'
# Prometheus sets instance and job when it scrapes: refused, and said so.
for l in instance=web-1 job=app; do
	run metrics --demo --label "$l"
	expect_error "cli_metrics_label_${l%%=*}_is_refused" 2
	if grep -q 'set by Prometheus' "$tmp/err"; then
		pass "cli_metrics_label_${l%%=*}_refusal_says_why"
	else
		cp "$tmp/err" "$tmp/why"
		fail "cli_metrics_label_${l%%=*}_refusal_says_why" "$tmp/why"
	fi
done
# A label name the exporter refuses is a bad command line, whatever the
# rule it breaks: syntax, reserved, repeated, pid beside --pid.
run metrics --demo --label 'a b=1'
expect_error cli_metrics_label_name_with_a_space_is_a_usage_error 2
run metrics --demo --label 9x=1
expect_error cli_metrics_label_name_with_a_leading_digit_is_a_usage_error 2
run metrics --demo --label group=1
expect_error cli_metrics_label_group_is_a_usage_error 2
run metrics --demo --label __x=1
expect_error cli_metrics_label_name_with_two_underscores_is_a_usage_error 2
run metrics --demo --label a=1 --label a=2
expect_error cli_metrics_repeated_label_is_a_usage_error 2
run metrics --demo --pid --label pid=1
expect_error cli_metrics_label_pid_beside_pid_is_a_usage_error 2
run metrics --demo --label novalue
expect_error cli_metrics_label_without_value_is_a_usage_error 2
if /usr/bin/python3 -c '
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
n = sum(len(f.samples) for f in text_string_to_metric_families(
	open(sys.argv[1], encoding="utf-8", newline="").read()))
sys.exit(0 if n == 8 * 6 + 1 else 1)' "$tmp/demo.om" > "$tmp/why" 2>&1; then
	pass cli_metrics_demo_openmetrics_passes_the_strict_parser
else
	echo "(needs /usr/bin/python3 and python3-prometheus-client)" >> "$tmp/why"
	fail cli_metrics_demo_openmetrics_passes_the_strict_parser "$tmp/why"
fi
(umask 077 && "$tally" metrics --demo -o "$tmp/textfile.prom") \
	> "$tmp/out" 2> "$tmp/err"
rc=$?
if [ "$rc" -eq 0 ] && [ ! -s "$tmp/out" ] &&
   [ "$(stat -c %a "$tmp/textfile.prom")" = 644 ] &&
   cmp -s "$tmp/textfile.prom" "$tmp/demo.prom" &&
   [ "$(ls -A "$tmp" | grep -c '^\.textfile')" -eq 0 ]; then
	pass cli_metrics_demo_writes_the_textfile_0644_and_nothing_else
else
	{ echo "exit $rc"; ls -la "$tmp"; cat "$tmp/err"; } > "$tmp/why"
	fail cli_metrics_demo_writes_the_textfile_0644_and_nothing_else \
		"$tmp/why"
fi
finish
