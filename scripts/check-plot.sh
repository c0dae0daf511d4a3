#!/bin/sh
# The `tally plot` command against fixtures: pictures, data, scripts and
# index from a benchmark's JSON; no text of a hostile JSON runs anything
# (gnuplot, shell) or reaches the script, and the index escapes it; plots
# that tell the truth (a line per implementation, integer thread ticks,
# human labels, stale reads beside latency, captions with machine and
# load); a failed run leaves the index as it was; malformed or binary JSON
# refused with exit 2 and "not JSON at byte N"; without gnuplot, exit 3
# with the data and scripts written and the package named.  Every message
# starts with "tally: ".
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
tally=${1:-build/tally}
tally=$(cd "$(dirname "$tally")" && pwd)/$(basename "$tally")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# svg_texts FILE...: the texts a picture shows, a line each.
svg_texts() {
	cat "$@" | grep -o '<text[^>]*>[^<]*</text>' |
		sed 's/<[^>]*>//g; s/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g; s/&amp;/\&/g'
}

# svg_shows FILE TEXT...: the picture shows each TEXT (a whole text).
svg_shows() {
	svg_file=$1
	shift
	for text in "$@"; do
		svg_texts "$svg_file" | grep -qxF -- "$text" || return 1
	done
}

# only_tally_messages FILE: every line of FILE starts with "tally: ".
only_tally_messages() {
	! grep -qv '^tally: ' "$1"
}

"$tally" plot tests/plot/oom.json -o "$tmp/out" >"$tmp/log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/out/oom_select_cpus256.png" ] &&
   [ -s "$tmp/out/oom_select_cpus256.svg" ] &&
   [ -s "$tmp/out/oom_select_cpus256.dat" ] &&
   [ -s "$tmp/out/oom_select_cpus256.txt" ] &&
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
if [ "$(grep -c '^"x*\( #[0-9]\)*"$' "$tmp/close/oom_select_cpus8.dat")" -eq 2 ] &&
   grep -qx '"a'"'"'b"' "$tmp/close/oom_select_cpus8.dat" &&
   grep -qx '"a'"'"'b #2"' "$tmp/close/oom_select_cpus8.dat"; then
	pass plot_keeps_series_apart_whose_labels_look_alike
else
	fail plot_keeps_series_apart_whose_labels_look_alike \
		"$tmp/close/oom_select_cpus8.dat"
fi

# A series name with a quote, a newline and a backslash: in the data (the
# quote and backslash replaced, the newline a space), not in the script.
if grep -qx '"two_'"'"'pass evil/"' "$tmp/out/oom_select_cpus64.dat" &&
   ! grep -q 'evil' "$tmp/out/oom_select_cpus64.gp"; then
	pass plot_keeps_hostile_series_names_out_of_the_script
else
	fail plot_keeps_hostile_series_names_out_of_the_script \
		"$tmp/out/oom_select_cpus64.gp"
fi

# Hostile text in every string of the JSON that can reach a title, a
# label, a category, a file name or the index: backquotes, system(),
# newlines with gnuplot's shell escape (!), quotes of both kinds,
# semicolons, format strings, macros, HTML.  Each tries to create a file
# under $tmp/pwned; nothing may run, no text of the JSON may be in a
# script, and the pictures are still drawn.
bad=0
: >"$tmp/why"
for f in tests/plot/hostile-*.json; do
	b=${f#tests/plot/hostile-}
	b=${b%.json}
	sed "s|MARKER|$tmp/pwned-$b|g" "$f" >"$tmp/hostile.json"
	rm -rf "$tmp/h-$b"
	"$tally" plot "$tmp/hostile.json" -o "$tmp/h-$b" >"$tmp/log" 2>&1
	rc=$?
	if [ "$b" = name ]; then
		# Not a benchmark: refused, with the name made printable.
		want=2
	else
		want=0
	fi
	if [ $rc -ne $want ]; then
		{ echo "$b: exit $rc, expected $want"; cat "$tmp/log"; } >>"$tmp/why"
		bad=1
	fi
	if [ $rc -ne 0 ] && ! only_tally_messages "$tmp/log"; then
		{ echo "$b: a message not starting 'tally: '"; cat "$tmp/log"; } \
			>>"$tmp/why"
		bad=1
	fi
	for gp in "$tmp/h-$b"/*.gp; do
		[ -e "$gp" ] || continue
		if grep -n 'touch\|pwned\|system(\|<script\|%n\|alert' "$gp" >>"$tmp/why"
		then
			echo "$b: JSON text in $gp" >>"$tmp/why"
			bad=1
		fi
		if [ ! -s "${gp%.gp}.png" ] || [ ! -s "${gp%.gp}.svg" ]; then
			echo "$b: no picture of $gp" >>"$tmp/why"
			bad=1
		fi
	done
done
if ls "$tmp" | grep -q pwned; then
	{ echo "these ran:"; ls "$tmp" | grep pwned; } >>"$tmp/why"
	bad=1
fi
if [ $bad -eq 0 ]; then
	pass plot_runs_nothing_written_in_the_json
else
	fail plot_runs_nothing_written_in_the_json "$tmp/why"
fi

# The index shows the machine's strings escaped: no markup of the JSON.
if [ -s "$tmp/h-oom/index.html" ] &&
   ! grep -q '<script\|<img src=x' "$tmp/h-oom/index.html" "$tmp/h-oom/index.md" &&
   grep -q '&lt;script&gt;alert(1)&lt;/script&gt;' "$tmp/h-oom/index.html" &&
   grep -q '&quot;&gt;&lt;img src=x' "$tmp/h-oom/index.html" &&
   ! grep -q '<script\|<img src=x' "$tmp/h-oom"/*.svg; then
	pass plot_escapes_the_json_in_the_index_and_pictures
else
	grep -n 'script\|img src' "$tmp/h-oom/index.html" "$tmp/h-oom/index.md" \
		"$tmp/h-oom"/*.svg >"$tmp/why" 2>&1
	fail plot_escapes_the_json_in_the_index_and_pictures "$tmp/why"
fi

# The counter's reads: tally and percpu_counter each have an approximate
# and a precise sum, four lines, each going left to right (a line that
# merged two implementations goes back and forth).
"$tally" plot tests/plot/counter.json -o "$tmp/counter" >"$tmp/log" 2>&1
rc=$?
if [ $rc -eq 0 ] &&
   awk '
	# A block of points ends at a blank line; "x y" lines are points.
	NF == 0 { n = 0; next }
	NF == 2 && $1 ~ /^[0-9.e+-]+$/ && $2 ~ /^[0-9.e+-]+$/ {
		if (n && $1 + 0 <= prev + 0)
			back++
		if (!n)
			lines++
		prev = $1
		n++
	}
	END { exit !(lines == 4 && !back) }' "$tmp/counter/counter_read.dat" &&
   svg_shows "$tmp/counter/counter_read.svg" 'tally approximate sum' \
	'tally precise sum' 'percpu_counter approximate sum' \
	'percpu_counter precise sum'; then
	pass plot_draws_one_line_per_implementation
else
	{ echo "exit $rc"; cat "$tmp/log" "$tmp/counter/counter_read.dat"; } \
		>"$tmp/why" 2>&1
	fail plot_draws_one_line_per_implementation "$tmp/why"
fi

# Threads, CPUs, tasks and depths are counted: ticks at integers (the
# y axes of these fixtures are logarithmic, their ticks powers of 10).
"$tally" plot tests/plot/charge.json -o "$tmp/ticks" >"$tmp/log" 2>&1
rc=$?
"$tally" plot tests/plot/counter.json -o "$tmp/ticks" >>"$tmp/log" 2>&1
rc=$((rc + $?))
if [ $rc -eq 0 ] && [ -s "$tmp/ticks/charge_cost_depth1_fillfar.svg" ] &&
   ! svg_texts "$tmp/ticks"/*.svg | grep -Eq '^ *[0-9]*\.[0-9]+$' &&
   svg_texts "$tmp/ticks/charge_cost_depth1_fillfar.svg" | grep -qx ' *2'; then
	pass plot_ticks_counted_quantities_at_integers
else
	{ echo "exit $rc"; cat "$tmp/log"
	  svg_texts "$tmp/ticks"/*.svg; } >"$tmp/why" 2>&1
	fail plot_ticks_counted_quantities_at_integers "$tmp/why"
fi

# What a picture shows is named for a reader, with units: no JSON key.
"$tally" plot tests/plot/stats.json -o "$tmp/stats" >"$tmp/log" 2>&1
rc=$?
keys='[a-z0-9]+_[a-z0-9_]+'
if [ $rc -eq 0 ] &&
   ! svg_texts "$tmp/stats"/*.svg "$tmp/counter"/*.svg "$tmp/ticks"/*.svg \
	"$tmp/out"/*.svg | grep -Ev 'percpu_counter|shared_atomic|page_counter' |
	grep -Eq "$keys" &&
   svg_texts "$tmp/stats/stats_read_latency_readers52_period_ms10.svg" |
	grep -qx '< 100 µs' &&
   svg_texts "$tmp/stats/stats_read_percentiles_readers52_period_ms10.svg" |
	grep -qx 'p99.9' &&
   svg_texts "$tmp/stats/stats_read_percentiles_readers52_period_ms10.svg" |
	grep -q 'period 10 ms' &&
   svg_texts "$tmp/stats/stats_read_percentiles_readers52_period_ms10.svg" |
	grep -qx 'read latency (µs)' &&
   svg_texts "$tmp/counter/counter_add.svg" | grep -qx 'time per add (ns)'
then
	pass plot_labels_name_quantities_and_units_not_json_keys
else
	{ echo "exit $rc"; cat "$tmp/log"
	  svg_texts "$tmp/stats"/*.svg "$tmp/counter"/*.svg | sort -u; } \
		>"$tmp/why" 2>&1
	fail plot_labels_name_quantities_and_units_not_json_keys "$tmp/why"
fi

# Reader latency beside stale reads: linux61 of the fixture is the
# fastest and stale in 7272 of 9112 checks (79.8%); the picture says so.
pic=$tmp/stats/stats_read_percentiles_readers52_period_ms10
if svg_texts "$pic.svg" | grep -qx '79.8%' &&
   svg_texts "$pic.svg" | grep -qx '0.0%' &&
   svg_texts "$tmp/stats/stats_read_latency_readers52_period_ms10.svg" |
	grep -qx '79.8%'; then
	pass plot_shows_stale_reads_beside_reader_latency
else
	{ svg_texts "$pic.svg"; cat "$pic.dat"; } >"$tmp/why" 2>&1
	fail plot_shows_stale_reads_beside_reader_latency "$tmp/why"
fi

# The index: a caption under each picture, the machine and the load.
if [ "$(grep -c '<figcaption>' "$tmp/counter/index.html")" -eq 3 ] &&
   grep -q 'Measured on test fixture, 2 possible CPUs (2 online), Linux 6.1.0' \
	"$tmp/counter/index.html" &&
   grep -q 'load average (1 min) 0.50 at the start, 2.25 at the end' \
	"$tmp/counter/index.html" &&
   grep -q 'Median time of one read of a counter' "$tmp/counter/index.html" &&
   grep -q 'Measured on test fixture' "$tmp/counter/index.md"; then
	pass plot_index_captions_each_picture_with_machine_and_load
else
	cat "$tmp/counter/index.html" >"$tmp/why" 2>&1
	fail plot_index_captions_each_picture_with_machine_and_load "$tmp/why"
fi

# A run that fails writes no index, and leaves one made before as it was:
# nothing to plot (exit 2), gnuplot failing (exit 1).
printf '{"benchmark": "oom", "select": [{"tasks": 1, "cpus": 2}]}' \
	>"$tmp/nothing.json"
"$tally" plot "$tmp/nothing.json" -o "$tmp/nothing" >"$tmp/log" 2>&1
rc1=$?
mkdir -p "$tmp/badgnu"
printf '#!/bin/sh\necho "cannot draw" >&2\nexit 1\n' >"$tmp/badgnu/gnuplot"
chmod +x "$tmp/badgnu/gnuplot"
cp -r "$tmp/counter" "$tmp/again"
cp "$tmp/again/index.html" "$tmp/index.before"
PATH="$tmp/badgnu:$PATH" "$tally" plot tests/plot/stats.json -o "$tmp/again" \
	>>"$tmp/log" 2>&1
rc2=$?
if [ $rc1 -eq 2 ] && [ ! -e "$tmp/nothing/index.html" ] &&
   [ ! -e "$tmp/nothing/index.md" ] && [ $rc2 -eq 1 ] &&
   cmp -s "$tmp/again/index.html" "$tmp/index.before" &&
   [ -z "$(ls -A "$tmp/again" | grep '^\.')" ] &&
   grep -q '^tally: gnuplot: cannot draw$' "$tmp/log" &&
   only_tally_messages "$tmp/log"; then
	pass plot_failed_run_leaves_the_index_as_it_was
else
	{ echo "exit $rc1, $rc2"; cat "$tmp/log"; ls -A "$tmp/nothing" \
	  "$tmp/again"; } >"$tmp/why" 2>&1
	fail plot_failed_run_leaves_the_index_as_it_was "$tmp/why"
fi

# Without gnuplot on PATH: exit 3, data and scripts, the package named.
mkdir -p "$tmp/bin"
PATH="$tmp/bin" "$tally" plot tests/plot/oom.json -o "$tmp/nognu" \
	>"$tmp/log" 2>&1
rc=$?
if [ $rc -eq 3 ] && [ -s "$tmp/nognu/oom_select_cpus256.gp" ] &&
   [ -s "$tmp/nognu/oom_select_cpus256.dat" ] &&
   [ ! -e "$tmp/nognu/oom_select_cpus256.png" ] &&
   [ ! -e "$tmp/nognu/index.html" ] &&
   grep -q 'gnuplot-nox' "$tmp/log" && only_tally_messages "$tmp/log"; then
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
	if [ $rc -ne 2 ] || ! grep -q '^tally: ' "$tmp/log" ||
	   ! only_tally_messages "$tmp/log"; then
		echo "$f.json: exit $rc" >>"$tmp/badlog"
		cat "$tmp/log" >>"$tmp/badlog"
		bad=1
	fi
done
"$tally" plot >"$tmp/log" 2>&1
[ $? -eq 2 ] || { echo "no argument: not exit 2" >>"$tmp/badlog"; bad=1; }
grep -q '^tally: ' "$tmp/log" ||
	{ echo "no argument: no 'tally: ' message" >>"$tmp/badlog"; bad=1; }
"$tally" plot "$tmp/missing.json" >"$tmp/log" 2>&1
[ $? -eq 2 ] || { echo "missing file: not exit 2" >>"$tmp/badlog"; bad=1; }
only_tally_messages "$tmp/log" ||
	{ echo "missing file: not a 'tally: ' message" >>"$tmp/badlog"; bad=1; }
if [ $bad -eq 0 ]; then
	pass plot_refuses_malformed_json_with_exit_2
else
	fail plot_refuses_malformed_json_with_exit_2 "$tmp/badlog"
fi

# Binary or mangled input: where it stops being JSON, not a system error.
: >"$tmp/badlog"
bad=0
# not_json_at FILE N: exit 2, "tally: FILE: not JSON at byte N: ...".
not_json_at() {
	"$tally" plot "$1" -o "$tmp/bad" >"$tmp/log" 2>&1
	rc=$?
	if [ $rc -ne 2 ] ||
	   ! grep -q "^tally: $1: not JSON at byte $2: " "$tmp/log" ||
	   ! only_tally_messages "$tmp/log"; then
		{ echo "$1: exit $rc, expected 2 and byte $2"; cat "$tmp/log"; } \
			>>"$tmp/badlog"
		bad=1
	fi
}
printf '\211PNG\r\n\032\n\000\000\000\rIHDR' >"$tmp/png.json"
not_json_at "$tmp/png.json" 0
printf '{"benchmark": "oom"\000}' >"$tmp/nul.json"
not_json_at "$tmp/nul.json" 19
printf '{"benchmark": "o\377m"}' >"$tmp/latin1.json"
not_json_at "$tmp/latin1.json" 16
printf '{"benchmark": "\355\240\200"}' >"$tmp/surrogate8.json"
not_json_at "$tmp/surrogate8.json" 15
printf '{"benchmark": "\300\257"}' >"$tmp/overlong.json"
not_json_at "$tmp/overlong.json" 15
printf '{"benchmark" @ "oom"}' >"$tmp/junk.json"
not_json_at "$tmp/junk.json" 13
# Random bytes (a fixed pattern, the same every run): never a crash.
awk 'BEGIN { srand(17); for (i = 0; i < 4096; i++)
	printf "%c", int(rand() * 255) + 1 }' >"$tmp/random.json"
"$tally" plot "$tmp/random.json" -o "$tmp/bad" >"$tmp/log" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q 'not JSON at byte [0-9]*: ' "$tmp/log" ||
   ! only_tally_messages "$tmp/log"; then
	{ echo "random bytes: exit $rc"; cat "$tmp/log"; } >>"$tmp/badlog"
	bad=1
fi
if [ $bad -eq 0 ]; then
	pass plot_says_where_binary_input_stops_being_json
else
	fail plot_says_where_binary_input_stops_being_json "$tmp/badlog"
fi
finish
