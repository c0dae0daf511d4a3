#!/bin/sh
# End to end with the real thing: the Prometheus server of the Debian
# package prometheus (unpacked into build/tools by scripts/ensure-deps.sh
# test, never installed) scrapes build/examples/http_endpoint --serve, the
# example that serves a statistics tree and memory groups on 127.0.0.1
# (port 0: the port it prints), and PromQL queries through the server's
# HTTP API (/api/v1/query, read with /usr/bin/python3's json) return the
# values the program set: a statistics group's, a memory group's usage,
# its +Inf max, a usage/max ratio of 0, the target up with Prometheus's
# own instance label (no exported_instance).
#
# Everything runs on 127.0.0.1 with a temporary configuration and data
# directory (scrape every second); the server's port is picked free and
# retried when taken.  Each wait is bounded (TALLY_PROMETHEUS_TIMEOUT
# seconds, default 180: generous, to hold under heavy load); every process
# started here is stopped on exit, whatever happens.
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh

prometheus=build/tools/prometheus/usr/bin/prometheus
endpoint=build/examples/http_endpoint
python=/usr/bin/python3
limit=${TALLY_PROMETHEUS_TIMEOUT:-180}
tmp=$(mktemp -d)
why=$tmp/why
pids=""

# stop_process PID: SIGTERM, up to 30 s to exit, then SIGKILL; reaped.
stop_process() {
	kill "$1" 2>/dev/null || return 0
	n=0
	while kill -0 "$1" 2>/dev/null && [ "$n" -lt 300 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}
cleanup() {
	for p in $pids; do
		stop_process "$p"
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

for f in "$prometheus" "$endpoint" "$python"; do
	if [ ! -x "$f" ]; then
		echo "$f is missing: run make test (scripts/ensure-deps.sh" \
			"test unpacks the Prometheus server)" > "$why"
		fail prometheus_scrapes_the_endpoint "$why"
		finish
		exit 1
	fi
done

# The endpoint: its first line says its port.
"$endpoint" --serve > "$tmp/endpoint.out" 2>&1 &
endpoint_pid=$!
pids="$endpoint_pid"
port=""
n=0
while [ -z "$port" ] && [ "$n" -lt $((limit * 10)) ] &&
      kill -0 "$endpoint_pid" 2>/dev/null; do
	port=$(sed -n 's|^serving http://127\.0\.0\.1:\([0-9][0-9]*\)/metrics$|\1|p' \
		"$tmp/endpoint.out")
	[ -n "$port" ] || sleep 0.1
	n=$((n + 1))
done
if [ -n "$port" ]; then
	pass endpoint_serves_on_a_kernel_chosen_loopback_port
else
	cp "$tmp/endpoint.out" "$why"
	fail endpoint_serves_on_a_kernel_chosen_loopback_port "$why"
	finish
	exit 1
fi

# The queries and their answers, then the watcher that asks until all
# match or the time is up.  One query a line: EXPECTED<tab>PROMQL.
tab=$(printf '\t')
cat > "$tmp/queries" <<EOF
8192${tab}tally_hier_anon_bytes{job="tally",group="/tenant-a/web"}
3${tab}tally_hier_pgfault_total{job="tally",group="/tenant-a"}
1${tab}tally_local_pgfault_total{job="tally",group="/tenant-a"}
12288${tab}tally_memory_current_bytes{job="tally",group="/app"}
4096${tab}tally_memory_current_bytes{job="tally",group="/app/cache"}
+Inf${tab}tally_memory_max_bytes{job="tally",group="/app"}
1048576${tab}tally_memory_max_bytes{job="tally",group="/app/cache"}
0${tab}tally_memory_current_bytes{job="tally",group="/app"} / tally_memory_max_bytes{job="tally",group="/app"}
1${tab}up{job="tally",instance="127.0.0.1:$port"}
3${tab}count(tally_memory_current_bytes{job="tally",instance="127.0.0.1:$port",exported_instance=""})
EOF
cat > "$tmp/watch.py" <<'EOF'
import json, sys, time, urllib.parse, urllib.request

port, queries, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
want = [line.rstrip("\n").split("\t", 1) for line in open(queries)]
deadline = time.monotonic() + limit
got = {}
while True:
    for value, query in want:
        url = "http://127.0.0.1:%s/api/v1/query?%s" % (
            port, urllib.parse.urlencode({"query": query}))
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                d = json.load(r)
            res = d["data"]["result"]
            if d["status"] != "success":
                got[query] = "status " + d["status"]
            elif len(res) != 1:
                got[query] = "%d series" % len(res)
            else:
                got[query] = res[0]["value"][1]
        except Exception as e:
            got[query] = "error: %s" % e
    if all(got[q] == v for v, q in want):
        sys.exit(0)
    if time.monotonic() > deadline:
        for v, q in want:
            print("%s: %s, expected %s" % (q, got[q], v))
        sys.exit(1)
    time.sleep(0.5)
EOF

# ready PORT PID: wait until the server at PORT answers /-/ready; fails
# when PID exits first (its port was taken) or the time is up.
ready() {
	"$python" - "$1" "$2" "$limit" <<'EOF'
import os, sys, time, urllib.request

port, pid, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + limit
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(1)
    try:
        with urllib.request.urlopen(
                "http://127.0.0.1:%s/-/ready" % port, timeout=5) as r:
            if r.status == 200:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.2)
sys.exit(1)
EOF
}

# A port that was free a moment ago (the server may still lose it: then
# it exits and the next try takes another).
free_port() {
	"$python" -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

cat > "$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tally
    static_configs:
      - targets: ["127.0.0.1:$port"]
EOF

started=false
for try in 1 2 3 4 5; do
	pport=$(free_port) || break
	rm -rf "$tmp/data"
	"$prometheus" --config.file="$tmp/prometheus.yml" \
		--storage.tsdb.path="$tmp/data" \
		--web.listen-address="127.0.0.1:$pport" \
		--web.console.templates="$tmp/none" \
		--web.console.libraries="$tmp/none" \
		> "$tmp/prometheus.log" 2>&1 &
	prom_pid=$!
	pids="$prom_pid $pids"
	if ready "$pport" "$prom_pid"; then
		started=true
		break
	fi
	stop_process "$prom_pid"
	grep -q 'address already in use' "$tmp/prometheus.log" || break
done
if $started; then
	pass prometheus_server_starts_on_loopback
else
	tail -n 30 "$tmp/prometheus.log" > "$why"
	fail prometheus_server_starts_on_loopback "$why"
	finish
	exit 1
fi

if "$python" "$tmp/watch.py" "$pport" "$tmp/queries" "$limit" > "$why" 2>&1
then
	pass promql_returns_the_values_the_program_set
else
	echo "prometheus log:" >> "$why"
	tail -n 20 "$tmp/prometheus.log" >> "$why"
	fail promql_returns_the_values_the_program_set "$why"
fi

# Stopped while Prometheus still scrapes it: a clean stop.
stop_process "$endpoint_pid"
if [ "$(tail -n 1 "$tmp/endpoint.out")" = stopped ]; then
	pass endpoint_stops_cleanly_while_scraped
else
	cp "$tmp/endpoint.out" "$why"
	fail endpoint_stops_cleanly_while_scraped "$why"
fi
stop_process "$prom_pid"
left=""
for p in $pids; do
	kill -0 "$p" 2>/dev/null && left="$left $p"
done
if [ -z "$left" ]; then
	pass nothing_started_here_is_left_running
else
	echo "still running:$left" > "$why"
	fail nothing_started_here_is_left_running "$why"
fi
finish
