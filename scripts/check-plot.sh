#!/bin/sh
# The `tally plot` command against fixtures: pictures, data, scripts and
# index from a benchmark's JSON; hostile series names kept out of the
# gnuplot script; malformed JSON refused with exit 2; without gnuplot,
# exit 3 with the data and scripts written and the package named.
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
tally=${1:-build/tally}
tally=$(cd "$(dirname "$tally")" && pwd)/$(basename "$tally")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# plot_ok NAME OUTDIR [ENV...]: run tally plot on the oom fixture.
"$tally" plot tests/plot/oom.json -o "$tmp/out" >"$tmp/log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/out/oom_select_cpus256.png" ] &&
   [ -s "$tmp/out/oom_select_cpus256.svg" ] &&
   [ -s "$tmp/out/oom_select_cpus256.dat" ] &&
   [ -s "$tmp/out/oom_select_cpus64.gp" ] &&
   grep -q 'oom_select_cpus64.svg' "$tmp/out/index.html" &&
   grep -q 'oom_select_cpus256.svg' "$tmp/out/index.md"; then
	pass plot_writes_pictures_data_scripts_and_an_index
else
	echo "exit $rc" >>"$tmp/log"
	fail plot_writes_pictures_data_scripts_and_an_index "$tmp/log"
fi

# The .dat holds the fixture's numbers, one block per series.
if grep -q '^10000 2100$' "$tmp/out/oom_select_cpus256.dat" &&
   grep -q '^40 120.5$' "$tmp/out/oom_select_cpus256.dat"; then
	pass plot_data_holds_the_json_numbers_by_series
else
	fail plot_data_holds_the_json_numbers_by_series \
		"$tmp/out/oom_select_cpus256.dat"
fi

# Series that differ only past the label's length or in a sanitized
# character stay apart, with unique titles.
cat >"$tmp/close.json" <<'EOF2'
{"benchmark": "oom", "select": [
 {"tasks": 1, "cpus": 8, "method": "a'b", "median_us": 1},
 {"tasks": 2, "cpus": 8, "method": "a\"b", "median_us": 2},
 {"tasks": 1, "cpus": 8, "method": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx1", "median_us": 3},
 {"tasks": 2, "cpus": 8, "method": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx2", "median_us": 4}
]}
EOF2
"$tally" plot "$tmp/close.json" -o "$tmp/close" >"$tmp/log" 2>&1
if [ "$(grep -c '^# ' "$tmp/close/oom_select_cpus8.dat")" -eq 4 ] &&
   grep -q 'title "a_b #2"' "$tmp/close/oom_select_cpus8.gp"; then
	pass plot_keeps_series_apart_whose_labels_look_alike
else
	fail plot_keeps_series_apart_whose_labels_look_alike \
		"$tmp/close/oom_select_cpus8.dat"
fi

# A series name with a quote, a newline and a backslash: sanitized.
if grep -q 'title "two__pass_evil_"' "$tmp/out/oom_select_cpus64.gp" &&
   [ "$(grep -c 'evil' "$tmp/out/oom_select_cpus64.gp")" -eq 1 ]; then
	pass plot_keeps_hostile_series_names_out_of_the_script
else
	fail plot_keeps_hostile_series_names_out_of_the_script \
		"$tmp/out/oom_select_cpus64.gp"
fi

# Without gnuplot on PATH: exit 3, data and scripts, the package named.
mkdir -p "$tmp/bin"
PATH="$tmp/bin" "$tally" plot tests/plot/oom.json -o "$tmp/nognu" \
	>"$tmp/log" 2>&1
rc=$?
if [ $rc -eq 3 ] && [ -s "$tmp/nognu/oom_select_cpus256.gp" ] &&
   [ -s "$tmp/nognu/oom_select_cpus256.dat" ] &&
   [ ! -e "$tmp/nognu/oom_select_cpus256.png" ] &&
   grep -q 'gnuplot-nox' "$tmp/log"; then
	pass plot_without_gnuplot_writes_data_and_scripts_and_names_the_package
else
	echo "exit $rc" >>"$tmp/log"
	fail plot_without_gnuplot_writes_data_and_scripts_and_names_the_package \
		"$tmp/log"
fi

# The charge benchmark: one plot per depth and fill, a line per design.
"$tally" plot tests/plot/charge.json -o "$tmp/charge" >"$tmp/log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/charge/charge_cost_depth1_fillfar.png" ] &&
   [ -s "$tmp/charge/charge_cost_depth4_fill95.svg" ] &&
   grep -q '^2 300$' "$tmp/charge/charge_cost_depth1_fillfar.dat" &&
   grep -q '^2 6.25$' "$tmp/charge/charge_cost_depth1_fillfar.dat" &&
   [ ! -e "$tmp/charge/charge_cost_depth4_fillfar.dat" ]; then
	pass plot_charge_draws_a_plot_per_depth_and_fill
else
	{ echo "exit $rc"; ls "$tmp/charge"; cat "$tmp/log"; } >"$tmp/why" 2>&1
	fail plot_charge_draws_a_plot_per_depth_and_fill "$tmp/why"
fi

# Malformed or foreign input: exit 2 with a message, never a crash.
bad=0
printf '' >"$tmp/empty.json"
printf '{"benchmark": "oom", "select": [' >"$tmp/truncated.json"
awk 'BEGIN { for (i = 0; i < 100000; i++) printf "["; }' >"$tmp/deep.json"
printf '{"benchmark": "\\ud800x"}' >"$tmp/surrogate.json"
printf '{"benchmark": "oom"} x' >"$tmp/trailing.json"
printf '{"benchmark": 01}' >"$tmp/number.json"
printf '{"b\001": 1}' >"$tmp/control.json"
printf '{"select": []}' >"$tmp/foreign.json"
printf '{"benchmark": "oom"}\000' >"$tmp/nul.json"
printf '{"benchmark": "oom", "schema_version": 99, "select": []}' \
	>"$tmp/future.json"
printf '{"benchmark": "oom", "select": [{"tasks": 1e999}]}' >"$tmp/inf.json"
printf '{"benchmark": "export", "rows": [{"row": "a", "us_median": "x"}]}' \
	>"$tmp/nonumber.json"
for f in empty truncated deep surrogate trailing number control foreign nul \
	future inf nonumber; do
	"$tally" plot "$tmp/$f.json" -o "$tmp/bad" >"$tmp/log" 2>&1
	rc=$?
	if [ $rc -ne 2 ] || ! grep -q '^tally plot: ' "$tmp/log"; then
		echo "$f.json: exit $rc" >>"$tmp/badlog"
		cat "$tmp/log" >>"$tmp/badlog"
		bad=1
	fi
done
"$tally" plot >"$tmp/log" 2>&1
[ $? -eq 2 ] || { echo "no argument: not exit 2" >>"$tmp/badlog"; bad=1; }
"$tally" plot "$tmp/missing.json" >"$tmp/log" 2>&1
[ $? -eq 2 ] || { echo "missing file: not exit 2" >>"$tmp/badlog"; bad=1; }
if [ $bad -eq 0 ]; then
	pass plot_refuses_malformed_json_with_exit_2
else
	fail plot_refuses_malformed_json_with_exit_2 "$tmp/badlog"
fi
finish
