#!/bin/sh
# `tally top` (build/tally, or $1) on fixture expositions, on the textfile
# and HTTP endpoint of a live exporter, on hostile input and on every
# documented error status (1 unreadable source, 2 bad command line, 3 not
# a valid exposition).
#
# tests/top/groups.prom is an export (Prometheus 0.0.4) of a memory tree
# (tally_exporter_add_memcg(): /, /system, /tenant-a/{web,db},
# /tenant-b/batch, with limits and max/high events), its memory.stat
# (prefix tally_memory_stat) and an application's statistics tree (prefix
# app); no limit is written 9223372036854775807.  tests/top/groups.om is
# the same in OpenMetrics with no limit written +Inf.  groups.expected is
# the frame both give.
#
# The live exporters: build/examples/http_endpoint --serve (libtally_http
# on 127.0.0.1, a port the kernel picks), and `tally metrics --demo` as a
# textfile, also served by a fixture server in /usr/bin/python3 on
# 127.0.0.1 port 0 with error statuses and broken responses; both run in
# this script's process tree and are stopped at the end.
# Waits poll for an outcome with a 60 s bound that only catches hangs.
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
tally=${1:-build/tally}
tmp=$(mktemp -d)
server=
live=
endpoint=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null
	[ -n "$live" ] && kill "$live" 2>/dev/null
	[ -n "$endpoint" ] && kill "$endpoint" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export COLUMNS=120 LC_ALL=C.UTF-8
unset LANG LC_CTYPE

# run ARGS...: tally top; status in $rc, output in $tmp/out, $tmp/err.
run() {
	timeout -k 5 120 "$tally" top "$@" > "$tmp/out" 2> "$tmp/err"
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

# expect_error NAME STATUS PATTERN: failed with STATUS, one line on
# stderr starting "tally: top: " and matching PATTERN, nothing on stdout.
expect_error() {
	if [ "$rc" -eq "$2" ] && [ ! -s "$tmp/out" ] &&
	   [ "$(wc -l < "$tmp/err")" -ge 1 ] &&
	   head -n 1 "$tmp/err" | grep -q '^tally: top: ' &&
	   head -n 1 "$tmp/err" | grep -Eq -- "$3"; then
		pass "$1"
	else
		{ echo "exit status $rc, expected $2 and 'tally: top: ...$3'"
		  cat "$tmp/out" "$tmp/err"; } > "$tmp/why"
		fail "$1" "$tmp/why"
	fi
}

# clean FILE: no terminal control reaches the terminal: no C0 control
# but newline, no DEL, no C1 control (U+0080..U+009F), no direction mark
# or embedding, no invalid UTF-8.  Prints the first offending line.
clean() {
	/usr/bin/python3 - "$1" <<'EOF'
import re, sys
data = open(sys.argv[1], 'rb').read()
try:
    text = data.decode('utf-8')
except UnicodeDecodeError as e:
    print('invalid UTF-8 at byte', e.start)
    sys.exit(1)
bad = re.compile('[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029'
                 '\u202a-\u202e\u2066-\u2069\ufeff]')
for n, line in enumerate(text.split('\n'), 1):
    if bad.search(line):
        print('line', n, ascii(line[:200]))
        sys.exit(1)
EOF
}

# widest FILE: the longest line's length in characters.
widest() {
	/usr/bin/python3 -c 'import sys
print(max(len(l) for l in open(sys.argv[1], encoding="utf-8").read().split("\n")))' "$1"
}

# wait_for FILE PATTERN: until a line of FILE matches (60 s at most).
wait_for() {
	i=0
	while ! grep -Eq -- "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -gt 600 ] && return 1
		sleep 0.1
	done
}

if [ ! -x "$tally" ]; then
	echo "$tally is missing" > "$tmp/why"
	fail top_tool_is_built "$tmp/why"
	finish
	exit 1
fi

# --- fixtures -----------------------------------------------------------

run --help
expect top_help_documents_the_exit_statuses 0 '^2 bad command line'
"$tally" --help > "$tmp/out" 2>&1
rc=$?
expect top_is_in_the_command_list 0 '^  top +'

run --once tests/top/groups.prom
if [ "$rc" -eq 0 ] && cmp -s "$tmp/out" tests/top/groups.expected; then
	pass top_once_prints_the_memory_and_stats_trees_of_a_prometheus_text
else
	diff "$tmp/out" tests/top/groups.expected > "$tmp/why"
	cat "$tmp/err" >> "$tmp/why"
	fail top_once_prints_the_memory_and_stats_trees_of_a_prometheus_text \
		"$tmp/why"
fi
cp "$tmp/out" "$tmp/groups.frame"

# docs/cli.md shows that frame, from the OpenMetrics fixture.
sed -n '/^\$ build\/tally top --once tests\/top\/groups.om$/,/^```$/p' \
	docs/cli.md | sed '1d;$d' > "$tmp/docs.frame"
"$tally" top --once tests/top/groups.om > "$tmp/out" 2>&1
if [ -s "$tmp/docs.frame" ] && cmp -s "$tmp/docs.frame" "$tmp/out"; then
	pass top_sample_in_docs_cli_md_is_what_the_tool_prints
else
	diff "$tmp/docs.frame" "$tmp/out" > "$tmp/why"
	fail top_sample_in_docs_cli_md_is_what_the_tool_prints "$tmp/why"
fi

# The same frame from OpenMetrics, where no limit is +Inf: "max".
run --once tests/top/groups.om
tail -n +2 "$tmp/out" > "$tmp/om.frame"
if [ "$rc" -eq 0 ] && tail -n +2 tests/top/groups.expected |
   cmp -s - "$tmp/om.frame"; then
	pass top_once_reads_openmetrics_with_inf_limits_as_the_same_tree
else
	tail -n +2 tests/top/groups.expected | diff - "$tmp/om.frame" \
		> "$tmp/why"
	fail top_once_reads_openmetrics_with_inf_limits_as_the_same_tree \
		"$tmp/why"
fi
expect top_shows_inf_and_the_sentinel_as_max 0 \
	'^    db +180\.0M +180\.2M +64\.0M +128\.0M +max +max$'

# Tree shape: depth by indentation, children under their parent.
awk '/^memory groups/ { on = 1; next } on && /^$/ { exit }
     on && !/^GROUP/ { match($0, /^ */); print RLENGTH / 2, $1 }' \
	"$tmp/groups.frame" > "$tmp/shape"
printf '%s\n' "0 /" "1 tenant-a" "2 web" "2 db" "1 tenant-b" "2 batch" \
	"1 system" > "$tmp/shape.expected"
if cmp -s "$tmp/shape" "$tmp/shape.expected"; then
	pass top_memory_tree_nests_groups_under_their_parents_by_usage
else
	diff "$tmp/shape.expected" "$tmp/shape" > "$tmp/why"
	fail top_memory_tree_nests_groups_under_their_parents_by_usage \
		"$tmp/why"
fi

run --once --sort name tests/top/groups.prom
awk '/^memory groups/ { on = 1; next } on && /^$/ { exit }
     on && !/^GROUP/ { printf "%s ", $1 }' "$tmp/out" > "$tmp/order"
if [ "$rc" -eq 0 ] &&
   [ "$(cat "$tmp/order")" = "/ system tenant-a db web tenant-b batch " ]; then
	pass top_sort_name_orders_siblings_by_name
else
	{ echo "exit $rc, order: $(cat "$tmp/order")"; cat "$tmp/err"; } \
		> "$tmp/why"
	fail top_sort_name_orders_siblings_by_name "$tmp/why"
fi

run --once --depth 1 tests/top/groups.prom
if [ "$rc" -eq 0 ] && grep -q '^  tenant-a ' "$tmp/out" &&
   ! grep -Eq '^    (web|db|batch|v1|v2) ' "$tmp/out"; then
	pass top_depth_1_shows_the_root_and_its_children_only
else
	cat "$tmp/out" "$tmp/err" > "$tmp/why"
	fail top_depth_1_shows_the_root_and_its_children_only "$tmp/why"
fi

# The stats of a tree: largest at the root first; the zero ones counted.
grep -A 1 '^statistics groups (app_hier_\*)' "$tmp/groups.frame" |
	tail -n 1 > "$tmp/header"
if grep -Eq '^GROUP +received +cache +requests +inflight +errors$' \
	"$tmp/header" &&
   grep -q '^(hidden: 9 zero everywhere)$' "$tmp/groups.frame"; then
	pass top_stats_columns_are_ranked_by_the_root_value
else
	cat "$tmp/header" "$tmp/groups.frame" > "$tmp/why"
	fail top_stats_columns_are_ranked_by_the_root_value "$tmp/why"
fi

COLUMNS=50 "$tally" top --once tests/top/groups.prom > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && [ "$(widest "$tmp/out")" -le 50 ] &&
   grep -q '^(hidden: 9 zero everywhere, 1 past the width)$' "$tmp/out" &&
   grep -q '^GROUP  *file  *anon  *kernel  *pgfault$' "$tmp/out"; then
	pass top_narrow_width_cuts_lines_and_drops_stats_that_do_not_fit
else
	cat "$tmp/out" > "$tmp/why"
	fail top_narrow_width_cuts_lines_and_drops_stats_that_do_not_fit \
		"$tmp/why"
fi

# The notes under the trees fit the width too.
printf '# no group here\nx_hier_a 1\n' > "$tmp/empty.prom"
COLUMNS=40 "$tally" top --once "$tmp/empty.prom" > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && [ "$(widest "$tmp/out")" -le 40 ] &&
   grep -q '^no memory groups or statistics groups: n$' "$tmp/out"; then
	pass top_narrow_width_cuts_the_note_of_an_exposition_without_groups
else
	{ echo "exit $rc"; cat "$tmp/out"; } > "$tmp/why"
	fail top_narrow_width_cuts_the_note_of_an_exposition_without_groups \
		"$tmp/why"
fi

# --- a live exporter: tally metrics --demo, as a textfile and over HTTP --

"$tally" metrics --demo -o "$tmp/demo.prom" > /dev/null 2>&1
run --once "$tmp/demo.prom"
expect top_reads_the_textfile_of_tally_metrics 0 \
	'^/ +7\.8M +4\.9M +3000 +100$'
expect top_demo_tree_has_tenant_a_web_under_tenant_a 0 '^    web +'
cp "$tmp/out" "$tmp/demo.frame"
"$tally" metrics --demo --format openmetrics > "$tmp/demo.om" 2>/dev/null

cat > "$tmp/server.py" <<'EOF'
import os, socket, socketserver, sys, threading, time
root = sys.argv[1]
class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.settimeout(30)
        data = b''
        while b'\r\n\r\n' not in data and len(data) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                return
            data += chunk
        with open(os.path.join(root, 'requests.log'), 'ab') as f:
            f.write(data)
        path = data.split(b' ')[1].decode('latin-1')
        def body(name):
            return open(os.path.join(root, name), 'rb').read()
        def ok(b, ctype=b'text/plain; version=0.0.4; charset=utf-8',
               length=None):
            n = len(b) if length is None else length
            s.sendall(b'HTTP/1.0 200 OK\r\nContent-Type: ' + ctype +
                      b'\r\nContent-Length: %d\r\n\r\n' % n + b)
        try:
            if path == '/metrics':
                ok(body('demo.prom'))
            elif path == '/om':
                ok(body('demo.om'), b'application/openmetrics-text; '
                   b'version=1.0.0; charset=utf-8')
            elif path == '/groups':
                ok(body('groups.om'), b'application/openmetrics-text; '
                   b'version=1.0.0; charset=utf-8')
            elif path == '/om-no-eof':
                ok(body('demo.om').replace(b'# EOF\n', b''),
                   b'application/openmetrics-text; version=1.0.0')
            elif path == '/hostile':
                ok(body('hostile.prom'))
            elif path == '/missing':
                s.sendall(b'HTTP/1.0 404 Not \x1b[31mFound\r\n\r\nno')
            elif path == '/redirect':
                s.sendall(b'HTTP/1.0 302 Found\r\nLocation: '
                          b'http://evil.example/\x1b]0;pwned\x07\r\n\r\n')
            elif path == '/short':
                ok(body('demo.prom'), length=len(body('demo.prom')) + 100)
            elif path == '/chunked':
                s.sendall(b'HTTP/1.0 200 OK\r\nTransfer-Encoding: '
                          b'chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n')
            elif path == '/garbage':
                s.sendall(b'\x00\xff\x1b[2J not http at all\r\n\r\n')
            elif path == '/slow':
                time.sleep(20)
            elif path == '/endless':
                s.sendall(b'HTTP/1.0 200 OK\r\n\r\n')
                line = b'x_hier_a{group="/"} 1\n' * 4096
                while True:
                    s.sendall(line)
            else:
                s.sendall(b'HTTP/1.0 500 Unknown fixture\r\n\r\n')
        except OSError:
            pass
class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
server = Server(('127.0.0.1', 0), Handler)
with open(os.path.join(root, 'port.tmp'), 'w') as f:
    f.write(str(server.server_address[1]))
os.rename(os.path.join(root, 'port.tmp'), os.path.join(root, 'port'))
threading.Timer(600, server.shutdown).start()
server.serve_forever()
EOF
cp tests/top/groups.om "$tmp/groups.om"
/usr/bin/python3 - "$tmp/hostile.prom" <<'EOF'
import sys
lines = [
    b'tally_memory_current_bytes{group="/"} 1000\n',
    # ESC (clear screen, window title), BEL, DEL, C1 CSI, a right-to-left
    # override, invalid UTF-8, an escaped newline and quote.
    b'tally_memory_current_bytes{group="/a\x1b[2J\x1b]0;t\x07"} 900\n',
    b'tally_memory_events_max_total{group="/a\x1b[2J\x1b]0;t\x07"} 7\n',
    b'tally_memory_current_bytes{group="/b\x7f\xc2\x9b31m"} 800\n',
    b'tally_memory_current_bytes{group="/c\xe2\x80\xaeevil\xff\xfe"} 700\n',
    b'tally_memory_current_bytes{group="/d\\n\\"z"} 600\n',
    # One line of 10 MiB: a group name of 10 MiB.
    b'tally_memory_current_bytes{group="/' + b'x' * (10 << 20) +
    b'"} 500\n',
    b'tally_memory_current_bytes{group="/\xc3\xa9t\xc3\xa9"} 400\n',
]
open(sys.argv[1], 'wb').write(b''.join(lines))
EOF
/usr/bin/python3 "$tmp/server.py" "$tmp" > "$tmp/server.log" 2>&1 &
server=$!
if wait_for "$tmp/port" '^[0-9]+$'; then
	port=$(cat "$tmp/port")
	base=http://127.0.0.1:$port
	pass top_fixture_http_server_listens_on_loopback
else
	cat "$tmp/server.log" > "$tmp/why"
	fail top_fixture_http_server_listens_on_loopback "$tmp/why"
	base=http://127.0.0.1:1
fi

run --once "$base/metrics"
tail -n +2 "$tmp/out" > "$tmp/http.frame"
if [ "$rc" -eq 0 ] && tail -n +2 "$tmp/demo.frame" |
   cmp -s - "$tmp/http.frame"; then
	pass top_over_http_shows_what_the_textfile_shows
else
	{ echo "exit $rc"; cat "$tmp/err"; tail -n +2 "$tmp/demo.frame" |
	  diff - "$tmp/http.frame"; } > "$tmp/why"
	fail top_over_http_shows_what_the_textfile_shows "$tmp/why"
fi
if grep -q "^GET /metrics HTTP/1.0" "$tmp/requests.log" &&
   grep -q "^Host: 127.0.0.1:$port" "$tmp/requests.log" &&
   grep -q "^Accept: application/openmetrics-text" "$tmp/requests.log"; then
	pass top_sends_an_http_1_0_get_with_host_and_accept
else
	cat "$tmp/requests.log" > "$tmp/why"
	fail top_sends_an_http_1_0_get_with_host_and_accept "$tmp/why"
fi
run --once "http://127.0.0.1:$port"
expect top_url_without_path_gets_slash_metrics 0 '^/ +7\.8M '
run --once "$base/om"
expect top_over_http_reads_openmetrics 0 '^/ +7\.8M +4\.9M +3000 +100$'
run --once "$base/groups"
tail -n +2 "$tmp/out" > "$tmp/http.frame"
if [ "$rc" -eq 0 ] && cmp -s "$tmp/om.frame" "$tmp/http.frame"; then
	pass top_over_http_shows_memory_groups_with_inf_limits
else
	{ echo "exit $rc"; cat "$tmp/err"; diff "$tmp/om.frame" \
	  "$tmp/http.frame"; } > "$tmp/why"
	fail top_over_http_shows_memory_groups_with_inf_limits "$tmp/why"
fi

# The library's own endpoint: memory groups with +Inf limits, and a
# statistics tree of the same prefix whose groups are not the memory
# groups' (so not their memory.stat).
if [ -x build/examples/http_endpoint ]; then
	build/examples/http_endpoint --serve > "$tmp/endpoint.out" 2>&1 &
	endpoint=$!
	if wait_for "$tmp/endpoint.out" '^serving http://127\.0\.0\.1:[0-9]+/metrics$'; then
		url=$(sed -n 's|^serving \(http://.*\)$|\1|p' "$tmp/endpoint.out")
		run --once "$url"
		# Depth, name, then min, low, high, max of a memory group
		# (its usage counts per-CPU stock reservations, which vary
		# with the machine), every value of a statistics group.
		awk '/^memory groups/ { print; mem = 1; on = 1; next }
		     /^statistics groups/ { print; mem = 0; on = 1; next }
		     on && /^$/ { on = 0 }
		     on && !/^GROUP/ { match($0, /^ */)
			if (mem) print RLENGTH / 2, $1, $4, $5, $6, $7
			else print RLENGTH / 2, $0 }' "$tmp/out" |
			sed 's/  */ /g' > "$tmp/endpoint.frame"
		cat > "$tmp/endpoint.expected" <<'EOF'
memory groups (tally_memory_*)
0 / 0 0 max max
1 app 0 0 max max
2 cache 0 0 max 1.0M
statistics groups (tally_hier_*), accuracy bound 0
0 / 8.0K 3
1 tenant-a 8.0K 3
2 web 8.0K 2
EOF
		if [ "$rc" -eq 0 ] &&
		   cmp -s "$tmp/endpoint.expected" "$tmp/endpoint.frame"; then
			pass top_reads_the_libtally_http_endpoint_of_a_running_program
		else
			{ echo "exit $rc"; cat "$tmp/out" "$tmp/err"; } > "$tmp/why"
			fail top_reads_the_libtally_http_endpoint_of_a_running_program \
				"$tmp/why"
		fi
	else
		cat "$tmp/endpoint.out" > "$tmp/why"
		fail top_reads_the_libtally_http_endpoint_of_a_running_program \
			"$tmp/why"
	fi
	kill "$endpoint"
	wait "$endpoint" 2>/dev/null
	endpoint=
else
	echo "build/examples/http_endpoint is missing: make HTTP=yes examples" \
		"(needs libmicrohttpd-dev)" > "$tmp/why"
	fail top_reads_the_libtally_http_endpoint_of_a_running_program "$tmp/why"
fi

# --- hostile input --------------------------------------------------------

for src in "$tmp/hostile.prom" "$base/hostile"; do
	how=file
	case $src in http*) how=http ;; esac
	run --once "$src"
	if [ "$rc" -eq 0 ] && clean "$tmp/out" > "$tmp/why" &&
	   grep -q '^  a\\x1b\[2J\\x1b]0;t\\x07  .*  max:7$' "$tmp/out" &&
	   grep -q '^  b\\x7f\\xc2\\x9b31m  ' "$tmp/out" &&
	   grep -q '^  c\\xe2\\x80\\xaeevil\\xff\\xfe  ' "$tmp/out" &&
	   grep -q '^  d\\x0a"z  ' "$tmp/out" &&
	   grep -q "$(printf '^  \303\251t\303\251 ')" "$tmp/out" &&
	   [ "$(widest "$tmp/out")" -le 120 ] &&
	   grep -Eq '^  x{37}~ +500B' "$tmp/out"; then
		pass "top_${how}_hostile_names_reach_the_terminal_escaped_and_cut"
	else
		{ echo "exit $rc"; cut -c 1-300 "$tmp/out"; cat "$tmp/err"; } \
			>> "$tmp/why"
		fail "top_${how}_hostile_names_reach_the_terminal_escaped_and_cut" \
			"$tmp/why"
	fi
done
LC_ALL=C "$tally" top --once "$tmp/hostile.prom" > "$tmp/out" 2>&1
if /usr/bin/python3 -c 'import sys
sys.exit(any(b > 0x7e for b in open(sys.argv[1], "rb").read()))' "$tmp/out" &&
   grep -q '^  \\xc3\\xa9t\\xc3\\xa9 ' "$tmp/out"; then
	pass top_ascii_locale_escapes_every_non_ascii_byte
else
	cut -c 1-300 "$tmp/out" > "$tmp/why"
	fail top_ascii_locale_escapes_every_non_ascii_byte "$tmp/why"
fi

head -c 1048576 /dev/urandom > "$tmp/random.bin"
printf '\0' >> "$tmp/random.bin"
run --once "$tmp/random.bin"
if [ "$rc" -eq 3 ] && [ ! -s "$tmp/out" ] &&
   grep -Eq '^tally: top: .*(NUL byte at offset|line 1:)' "$tmp/err" &&
   clean "$tmp/err" > "$tmp/why"; then
	pass top_binary_input_is_refused_with_status_3
else
	{ echo "exit $rc"; cat "$tmp/err"; } >> "$tmp/why"
	fail top_binary_input_is_refused_with_status_3 "$tmp/why"
fi
/usr/bin/python3 -c 'import sys
open(sys.argv[1], "wb").write(bytes(b for b in open("/dev/urandom", "rb").read(65536) if b and b != 10 and b != 35))' "$tmp/noise.bin"
run --once "$tmp/noise.bin"
if [ "$rc" -eq 3 ] && clean "$tmp/err" > "$tmp/why"; then
	pass top_binary_input_without_nul_is_refused_with_status_3
else
	{ echo "exit $rc"; cat "$tmp/err"; } >> "$tmp/why"
	fail top_binary_input_without_nul_is_refused_with_status_3 "$tmp/why"
fi

bad() {
	printf "$2" > "$tmp/bad.prom"
	run --once "$tmp/bad.prom"
	expect_error "$1" 3 "$3"
}
bad top_unterminated_label_value_is_status_3 \
	'x_hier_a{group="/x} 1\n' 'line 1: unterminated label value'
bad top_bad_value_is_status_3_with_its_line \
	'# HELP x_hier_a A.\nx_hier_a{group="/"} 1\nx_hier_a{group="/b"} 12ab\n' \
	'line 3: bad value'
bad top_bad_label_escape_is_status_3 \
	'x_hier_a{group="/\\q"} 1\n' 'bad escape'
bad top_group_path_without_slash_is_status_3 \
	'x_hier_a{group="x"} 1\n' 'does not start with'
bad top_repeated_series_is_status_3 \
	'x_hier_a{group="/",pid="1"} 1\nx_hier_a{group="/",pid="2"} 1\n' \
	'line 2: a second sample of group /'
bad top_data_after_eof_is_status_3 \
	'x_hier_a{group="/"} 1\n# EOF\nx_hier_a{group="/b"} 1\n' \
	'line 3: data after # EOF'

/usr/bin/python3 -c 'import sys
print("tally_memory_current_bytes{group=\"/\"} 1")
print("tally_memory_current_bytes{group=\"" + "/a" * 300 + "\"} 2")' \
	> "$tmp/deep.prom"
run --once "$tmp/deep.prom"
expect top_groups_deeper_than_256_levels_are_counted_not_shown 0 \
	'^\(1 samples of groups deeper than 256 levels not shown\)$'

# Byte values past the largest unit (1024 EiB and more, which a float
# exposition may hold) are shown whole, never as the digits that fit.
printf '%s\n' 'tally_memory_current_bytes{group="/"} 1e308' \
	'tally_memory_peak_bytes{group="/"} 1.5e21' > "$tmp/huge.prom"
run --once "$tmp/huge.prom"
expect top_byte_values_past_the_largest_unit_are_shown_whole 0 \
	'^/ +8\.67e\+289E +1301\.0E( |$)'

# --- errors: 1 unreadable source ------------------------------------------

run --once "$tmp/nonexistent.prom"
expect_error top_missing_file_is_status_1 1 'No such file or directory'
run --once "$tmp/no$(printf '\033')[2Jfile"
if [ "$rc" -eq 1 ] && grep -q 'no\\x1b\[2Jfile' "$tmp/err" &&
   clean "$tmp/err" > "$tmp/why"; then
	pass top_a_file_name_in_a_message_is_escaped
else
	{ echo "exit $rc"; cat "$tmp/err"; } >> "$tmp/why"
	fail top_a_file_name_in_a_message_is_escaped "$tmp/why"
fi
run --once "$tmp"
expect_error top_directory_is_status_1 1 'Is a directory'
mkfifo "$tmp/fifo"
run --once "$tmp/fifo"
expect_error top_fifo_is_refused_without_blocking 1 'not a regular file'
head -c $((33 << 20)) /dev/zero | tr '\0' '\n' > "$tmp/big.prom"
run --once "$tmp/big.prom"
expect_error top_file_over_32_mib_is_status_1 1 'larger than 32 MiB'

# A port nothing listens on: bound, then closed.
closed=$(/usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run --once "http://127.0.0.1:$closed/metrics"
expect_error top_connection_refused_is_status_1 1 'Connection refused'
run --once "$base/missing"
expect_error top_http_404_is_status_1_with_the_reason_escaped 1 \
	'HTTP status 404 Not \\x1b\[31mFound$'
run --once "$base/redirect"
expect_error top_redirect_is_not_followed 1 \
	'HTTP status 302 Found: redirects are not followed \(to http://evil.example/\\x1b]0;pwned\\x07\)'
run --once "$base/short"
expect_error top_truncated_response_is_status_1 1 'truncated response'
run --once "$base/chunked"
expect_error top_chunked_response_is_refused 1 'Transfer-Encoding'
run --once "$base/garbage"
expect_error top_non_http_response_is_status_1 1 'not an HTTP/1.x response'
run --once --timeout 0.5 "$base/slow"
expect_error top_silent_server_times_out_with_status_1 1 \
	'no complete response within 0.5 s'
run --once --timeout 60 "$base/endless"
expect_error top_endless_response_stops_at_32_mib 1 'response over 32 MiB'
run --once "$base/om-no-eof"
expect_error top_openmetrics_without_eof_is_status_3 3 'without .# EOF'

# --- errors: 2 bad command line ---------------------------------------------

run --once
expect_error top_without_source_is_status_2 2 'no URL or FILE'
run --once a b
expect_error top_two_sources_are_status_2 2 "unexpected argument"
while IFS='|' read -r name url pattern; do
	run --once "$url"
	expect_error "top_${name}_is_status_2" 2 "$pattern"
done <<'EOF'
https_url|https://127.0.0.1/metrics|https is not supported
ftp_url|ftp://h/x|only http:// URLs
url_without_host|http://|no host
port_0|http://h:0/|bad port
port_65536|http://h:65536/|bad port
url_with_user_and_password|http://user:pw@h/|user names and passwords
ipv6_without_closing_bracket|http://[::1/|IPv6 address must be in brackets
space_in_url_path|http://h/a b|bad character in the path
backquotes_in_url_path|http://h/`id`|bad character in the path
url_fragment|http://h/#frag|fragment
semicolon_after_host|http://h;id/|bad character after the host
EOF
run --once --interval 0 x
expect_error top_interval_0_is_status_2 2 'bad value of --interval'
run --once --sort size x
expect_error top_unknown_sort_is_status_2 2 'bad value of --sort'
run --once --depth -1 x
expect_error top_negative_depth_is_status_2 2 'bad value of --depth'
run --once --frobnicate x
expect_error top_unknown_option_is_status_2 2 'bad option'

# --- size: time linear in the exposition ----------------------------------

# 200k distinct names, 50k of each kind a lookup by name serves: stats of
# one tree, statistics trees, memory trees, accuracy bounds (each with its
# tree), with a group each.  A parse that compared names one by one would
# take minutes of CPU; the bound (CPU time, not wall time, so a loaded
# machine does not matter) is some 20 times what a linear parse needs.
/usr/bin/python3 - "$tmp/names.prom" <<'EOF'
import sys
out = []
for i in range(50000):
    out.append('app_hier_s%x{group="/%x"} 1\n' % (i, i))
    out.append('p%x_hier_s{group="/"} 1\n' % i)
    out.append('m%x_memory_current_bytes{group="/"} 1\n' % i)
    out.append('b%x_accuracy_bound 1\nb%x_hier_s{group="/"} 1\n' % (i, i))
open(sys.argv[1], 'w').write(''.join(out))
EOF
if /usr/bin/python3 - "$tally" "$tmp/names.prom" > "$tmp/why" 2>&1 <<'EOF'
import resource, subprocess, sys
try:
    r = subprocess.run([sys.argv[1], 'top', '--once', sys.argv[2]],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=120)
    rc = r.returncode
except subprocess.TimeoutExpired:
    rc = 'killed after 120 s'
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
print('exit', rc, 'cpu %.2f s' % cpu)
sys.exit(0 if rc == 0 and cpu < 10 else 1)
EOF
then
	pass top_200k_distinct_names_parse_in_linear_time
	sed "s/^/  info: /" "$tmp/why"
else
	fail top_200k_distinct_names_parse_in_linear_time "$tmp/why"
fi

# Ctrl-C during a long parse (a 30 MiB exposition: a million distinct
# names and groups) ends it at once: status 0, no frame drawn.  The
# signal is sent once the parse has begun: reading the file costs far
# less than 0.15 s of CPU, the whole parse well over that.
/usr/bin/python3 - "$tmp/million.prom" <<'EOF'
import sys
open(sys.argv[1], 'w').write(''.join(
    'a_hier_%x{group="/%x"} 1\n' % (i, i) for i in range(1000000)))
EOF
if /usr/bin/python3 - "$tally" "$tmp/million.prom" > "$tmp/why" 2>&1 <<'EOF'
import os, signal, subprocess, sys, time
tick = os.sysconf('SC_CLK_TCK')
p = subprocess.Popen([sys.argv[1], 'top', '--interval', '60', sys.argv[2]],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def cpu():
    f = open('/proc/%d/stat' % p.pid).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick
deadline = time.monotonic() + 60
while p.poll() is None and cpu() < 0.15 and time.monotonic() < deadline:
    time.sleep(0.005)
sent = time.monotonic()
p.send_signal(signal.SIGINT)
try:
    out, err = p.communicate(timeout=5)
    rc, took = p.returncode, time.monotonic() - sent
except subprocess.TimeoutExpired:
    p.kill()
    out, err = p.communicate()
    rc, took = 'still running 5 s after SIGINT', 5
print('exit', rc, 'after %.2f s' % took, 'stdout', len(out), 'bytes')
print(err.decode('utf-8', 'replace')[:500])
sys.exit(0 if rc == 0 and not out and not err else 1)
EOF
then
	pass top_ctrl_c_during_a_long_parse_ends_it_at_once
else
	fail top_ctrl_c_during_a_long_parse_ends_it_at_once "$tmp/why"
fi

# --- refreshing -----------------------------------------------------------

# Without a terminal: plain frames, each refresh re-reading the file; a
# failed refresh is reported in the frame, which keeps the last data;
# SIGTERM ends with status 0.
cp tests/top/groups.prom "$tmp/live.prom"
"$tally" top --interval 0.1 "$tmp/live.prom" > "$tmp/live.out" \
	2> "$tmp/live.err" &
live=$!
ok=1
wait_for "$tmp/live.out" '^/ +433\.0M' || ok=0
sed 's/^tally_memory_current_bytes{group="\/"} .*/tally_memory_current_bytes{group="\/"} 1073741824/' \
	tests/top/groups.prom > "$tmp/live.new"
mv "$tmp/live.new" "$tmp/live.prom"
wait_for "$tmp/live.out" '^/ +1\.0G' || ok=0
rm "$tmp/live.prom"
wait_for "$tmp/live.out" '^refresh failed: .*live.prom: No such file or directory \(showing the last data\)$' ||
	ok=0
kill -TERM "$live"
wait "$live"
rc=$?
live=
if [ "$ok" -eq 1 ] && [ "$rc" -eq 0 ] && clean "$tmp/live.out" > "$tmp/why" &&
   ! grep -q "$(printf '\033')" "$tmp/live.out"; then
	pass top_refreshes_plain_frames_and_reports_a_failed_refresh
else
	{ echo "ok $ok, exit $rc"; tail -n 40 "$tmp/live.out";
	  cat "$tmp/live.err"; } >> "$tmp/why"
	fail top_refreshes_plain_frames_and_reports_a_failed_refresh "$tmp/why"
fi

# On a terminal (a pseudo-terminal here): redrawn in place, hostile names
# still escaped; Ctrl-C (SIGINT) ends with status 0.
if /usr/bin/python3 - "$tally" "$tmp/hostile.prom" > "$tmp/why" 2>&1 <<'EOF'
import os, pty, re, select, signal, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.environ['COLUMNS'] = '100'
    os.execv(sys.argv[1], [sys.argv[1], 'top', '--interval', '0.2',
                           sys.argv[2]])
out = b''
deadline = time.monotonic() + 60
while out.count(b'\x1b[H\x1b[2J') < 2 and time.monotonic() < deadline:
    r, _, _ = select.select([fd], [], [], 1)
    if r:
        try:
            out += os.read(fd, 1 << 20)
        except OSError:
            break
os.kill(pid, signal.SIGINT)
while True:
    try:
        chunk = os.read(fd, 1 << 20)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
frames = out.count(b'\x1b[H\x1b[2J')
rest = out.replace(b'\x1b[H\x1b[2J', b'')
text = rest.decode('utf-8')
ok = (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and frames >= 2
      and 'Ctrl-C quits' in text and '\\x1b[2J' in text
      and not re.search('[\x00-\x09\x0b-\x0c\x0e-\x1f\x7f-\x9f\u202e]', text)
      and max(len(l) for l in text.replace('\r', '').split('\n')) <= 100)
print('status', status, 'frames', frames)
print(ascii(text[:2000]))
sys.exit(0 if ok else 1)
EOF
then
	pass top_on_a_terminal_redraws_in_place_and_quits_on_ctrl_c
else
	fail top_on_a_terminal_redraws_in_place_and_quits_on_ctrl_c "$tmp/why"
fi

finish
