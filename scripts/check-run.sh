#!/bin/sh
# Check `tally run` (cli/run.c, cli/run_preload.c) on real
# programs nobody here wrote, and on its bad input:
#   - python3 building a list under a max below what it needs raises
#     MemoryError, which the script catches and prints (no crash); without
#     a limit the charged bytes, read in the same process from the metrics
#     file, lie within jemalloc's active + dirty and that plus the adopted
#     bytes; the gap to the process's RSS is shown with Python's own
#     allocator (which tally cannot see) and with PYTHONMALLOC=malloc;
#   - python3 without PYTHONMALLOC (or with an empty one) gets malloc:
#     a list of small objects over the max raises MemoryError, and within
#     it the charge lies within 25% of the RSS; a PYTHONMALLOC of the
#     user's own is kept, its arenas shown as uncharged bytes (RSS minus
#     charged), as is a heap a C program maps itself;
#   - sqlite3 building a large in-memory table: "out of memory" and a
#     non-zero status under a max, the right answer without one;
#   - build/tests/run/run_probe: malloc() refused with ENOMEM in the
#     process, a forked child and an exec'd image; realloc() growing across
#     the max returns NULL and leaves the block intact; posix_memalign,
#     aligned_alloc, memalign, valloc, pvalloc, calloc and reallocarray
#     refused over the max; threads freeing each other's blocks;
#   - the metrics file: a relative path named from tally run's directory,
#     written as the program starts (there after _exit() or a signal),
#     and at the max; a series per process (pid, program), a child's
#     (exec'd, or forked and ending by _exit()) with its events, a
#     program that aborts with its events and signal, a SIGKILL's signal;
#     no hierarchical/local pairs, no all-zero family; every HELP line the
#     definition in docs/cli.md; a file that cannot be written refused
#     before the program runs;
#   - installed by make install under another PREFIX, LIBDIR apart, and
#     after the prefix moved, tally run finds its preload;
#     TALLY_RUN_* variables already in the environment set no limit and
#     no file; a set-user-ID program, and a preload path LD_PRELOAD cannot
#     carry, refused before the program runs;
#   - what would run unaccounted is refused before it runs: a #! chain
#     down to a static program, more than five scripts (as the kernel),
#     a 32-bit program; one that drops the preload is killed at once; a
#     file neither ELF nor #! is never handed to a shell;
#   - without the preload, tally run and make name the package to install;
#   - exit statuses: the program's, 128+N for a signal, 2 for a bad size,
#     interval or no program, 126 for a statically linked or not executable
#     program, 127 for a missing one, 125 for a max below what jemalloc
#     holds as the program starts, each with a "tally: run:" message.
# sqlite3 is unpacked privately into BUILD/deps when it is not installed
# (apt-get download, dpkg -x): nothing is installed system-wide.
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh

build=${1:-build}
tally=$build/tally
probe=$build/tests/run/run_probe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
why=$tmp/why
# Every program run here is bounded in time.
limit_s=120

# run NAME EXPECTED-STATUS COMMAND...: the status and output of COMMAND in
# $tmp/out (stdout and stderr); fails NAME when the status differs.
run() {
	name=$1
	want=$2
	shift 2
	timeout -k 5 "$limit_s" "$@" > "$tmp/out" 2>&1
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		{ echo "exit status $rc, expected $want:"; cat "$tmp/out"; } \
			> "$why"
		fail "$name" "$why"
		return 1
	fi
	return 0
}

# expect NAME PATTERN: $tmp/out matches the extended regex PATTERN.
expect() {
	if grep -Eq "$2" "$tmp/out"; then
		pass "$1"
	else
		{ echo "no line matches /$2/:"; cat "$tmp/out"; } > "$why"
		fail "$1" "$why"
	fi
}

# run_expect NAME STATUS PATTERN COMMAND...: run COMMAND as test NAME, and
# if it exits with STATUS, expect PATTERN in its output.
run_expect() {
	name=$1
	status=$2
	pattern=$3
	shift 3
	if run "$name" "$status" "$@"; then
		expect "$name" "$pattern"
	fi
}

# metric FILE FAMILY: the value of the first sample of FAMILY (whatever
# its labels): the program tally run started, the first process written.
metric() {
	awk -v n="$2" '$1 == n || index($1, n "{") == 1 { print $2; exit }' \
		"$1"
}

# sample FILE NAME: the tally_run_NAME_bytes gauge of the program in FILE.
sample() {
	metric "$1" "tally_run_$2_bytes"
}

# figures FILE: $charged, $rss, $uncharged and $current (memory.current)
# from the textfile FILE, and a line of them in $why.
figures() {
	charged=$(sample "$1" charged)
	rss=$(sample "$1" process_rss)
	uncharged=$(sample "$1" uncharged)
	# A family that is 0 for every process is left out of the file.
	[ -n "$charged" ] && [ -n "$rss" ] && uncharged=${uncharged:-0}
	current=$(metric "$1" tally_run_memory_current_bytes)
	echo "charged $charged, memory.current $current, RSS $rss," \
		"uncharged $uncharged" > "$why"
}

# uncharged_is_the_rest: the figures' uncharged bytes are the RSS minus
# the charged ones, 0 when those are more.
uncharged_is_the_rest() {
	[ -n "$charged" ] && [ -n "$rss" ] && [ -n "$uncharged" ] &&
	if [ "$rss" -gt "$charged" ]; then
		[ "$uncharged" -eq $((rss - charged)) ]
	else
		[ "$uncharged" -eq 0 ]
	fi
}

# pass_with_figures NAME: NAME passed; the figures of $why are shown.
pass_with_figures() {
	echo "PASS $1 ($(cat "$why"))"
	passed=$((passed + 1))
}

for f in "$tally" "$build/libtally_run.so" "$probe"; do
	if [ ! -e "$f" ]; then
		echo "$f is missing: run make" > "$why"
		fail tally_run_is_built "$why"
		finish
		exit 1
	fi
done

# --- python3 ----------------------------------------------------------
cat > "$tmp/list.py" <<'PY'
try:
    x = [str(i) * 4 for i in range(10 ** 8)]
    print("built", len(x))
except MemoryError:
    print("caught MemoryError")
PY
run_expect python3_over_its_max_raises_memoryerror_and_catches_it 0 \
	'^caught MemoryError$' \
	env PYTHONMALLOC=malloc "$tally" run --memory-max 64M -- \
	python3 "$tmp/list.py"

# The list stays alive while the metrics thread writes the file twice;
# the script then reads the file itself: the same process's numbers.
cat > "$tmp/bound.py" <<'PY'
import os, sys, time
path = sys.argv[1]
x = [str(i) * 4 for i in range(400000)]
def sample():
    vals = {}
    try:
        with open(path) as f:
            for line in f:
                if not line.startswith("#"):
                    k, v = line.rsplit(" ", 1)
                    if 'pid="%d"' % os.getpid() not in k:
                        continue
                    k = k.split("{")[0]
                    num = float(v)  # limits may be +Inf
                    vals[k] = num if num == float("inf") else int(num)
    except OSError:
        pass
    return vals
start = time.time()
seen = 0
while time.time() - start < 20:
    v = sample()
    if v.get("tally_run_charged_bytes", 0) > 20 << 20:
        seen += 1
        if seen == 2:
            break
    time.sleep(0.05)
for k, n in sorted(v.items()):
    if k.startswith("tally_run_"):
        print(k, n)
print("objects", len(x))
PY
# A file of its own for each run: the script must never read another
# run's figures.
for mode in malloc pymalloc; do
	rm -f "$tmp/$mode.prom"
	if run "python3_${mode}_metrics_are_written_while_it_runs" 0 \
		env PYTHONMALLOC=$mode "$tally" run --metrics "$tmp/$mode.prom" \
		--interval 0.2 -- python3 "$tmp/bound.py" "$tmp/$mode.prom"; then
		cp "$tmp/out" "$tmp/$mode.out"
		pass "python3_${mode}_metrics_are_written_while_it_runs"
	fi
done
# value MODE NAME: the tally_run_NAME_bytes gauge printed by bound.py in
# MODE.
value() {
	awk -v n="tally_run_$2_bytes" \
		'$1 == n { print $2 }' "$tmp/$1.out"
}
if [ -f "$tmp/malloc.out" ]; then
	charged=$(value malloc charged)
	active=$(value malloc jemalloc_active)
	dirty=$(value malloc jemalloc_dirty)
	adopted=$(value malloc adopted)
	current=$(value malloc memory_current)
	# The values are read one after the other while the program runs
	# (it sleeps, but the interpreter may allocate): a slack of 256 KiB.
	slack=262144
	# memory.current counts the bytes reserved in per-CPU stocks too, as
	# the kernel's: at most two of the largest batches (16 x 256 KiB) per
	# CPU above what is charged.
	stocks=$(($(getconf _NPROCESSORS_CONF) * 2 * 16 * 262144))
	if [ -n "$charged" ] && [ -n "$active" ] && [ -n "$dirty" ] &&
	   [ -n "$adopted" ] && [ -n "$current" ] &&
	   [ "$active" -gt $((10 << 20)) ] &&
	   [ $((active + dirty - slack)) -le "$charged" ] &&
	   [ "$charged" -le $((active + dirty + adopted + slack)) ] &&
	   [ "$current" -le $((charged + stocks + slack)) ] &&
	   [ "$charged" -le $((current + slack)) ]; then
		pass python3_charged_bytes_lie_within_the_bound_of_jemalloc_active
	else
		{ echo "charged $charged current $current active $active" \
			"dirty $dirty adopted $adopted"; } > "$why"
		cat "$tmp/malloc.out" >> "$why"
		fail python3_charged_bytes_lie_within_the_bound_of_jemalloc_active \
			"$why"
	fi
fi
# Python's small-object allocator takes its arenas with mmap(): the
# objects are in the RSS but not in the charge; with PYTHONMALLOC=malloc
# they are in both.
if [ -f "$tmp/malloc.out" ] && [ -f "$tmp/pymalloc.out" ]; then
	cm=$(value malloc charged)
	rm_=$(value malloc process_rss)
	cp_=$(value pymalloc charged)
	rp=$(value pymalloc process_rss)
	echo "PYTHONMALLOC=malloc: charged $cm, RSS $rm_;" \
		"pymalloc: charged $cp_, RSS $rp" > "$why"
	if [ "$cm" -le "$rm_" ] && [ $((rp - cp_)) -gt $((rm_ - cm + (10 << 20))) ]
	then
		echo "PASS python3_rss_gap_is_python_s_own_allocator ($(cat "$why"))"
		passed=$((passed + 1))
	else
		fail python3_rss_gap_is_python_s_own_allocator "$why"
	fi
fi

# Without PYTHONMALLOC in its environment, tally run gives Python
# PYTHONMALLOC=malloc: its small objects are charged, and a list of them
# over the max raises MemoryError (uncaught: a traceback, status 1).
name=python3_small_objects_over_the_max_raise_memoryerror
if run "$name" 1 env -u PYTHONMALLOC "$tally" run --memory-max 32M -- \
	python3 -c 'x = [str(i) * 3 for i in range(1_500_000)]'; then
	expect "$name" '^MemoryError$'
fi
# An empty PYTHONMALLOC is Python's default, as unset.
name=python3_with_an_empty_pythonmalloc_gets_malloc
if run "$name" 1 env PYTHONMALLOC= "$tally" run --memory-max 32M -- \
	python3 -c 'x = [str(i) * 3 for i in range(1_500_000)]'; then
	expect "$name" '^MemoryError$'
fi

# hold.py METRICS COPY list|dict N: builds N small objects, waits while
# they are alive until tally run has replaced METRICS twice (a new inode
# or mtime each time: the second write starts after the first one ends,
# so after the objects were built), copies what it then reads to COPY
# and prints its PYTHONMALLOC and how many objects it built.
cat > "$tmp/hold.py" <<'PY'
import os, sys, time
path, copy, kind, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if kind == "list":
    x = [str(i) * 3 for i in range(n)]
else:
    x = {i: (str(i) * 3, i * 0.5) for i in range(n)}
def ident():
    try:
        st = os.stat(path)
        return st.st_ino, st.st_mtime_ns
    except OSError:
        return None
last, seen, end = ident(), 0, time.monotonic() + 60
while seen < 2 and time.monotonic() < end:
    time.sleep(0.01)
    now = ident()
    if now != last:
        last, seen = now, seen + 1
if seen < 2:
    sys.exit("the metrics file was not replaced twice in 60 s")
with open(path) as f:
    text = f.read()
with open(copy, "w") as f:
    f.write(text)
print("PYTHONMALLOC", os.environ.get("PYTHONMALLOC"))
print("built", len(x))
PY
# Within its max, a dict of 500000 small objects (about 100 MiB) is
# charged: what the group holds (memory.current) and what the hooks
# charged both lie within 25% of the process's RSS, read from the same
# textfile while the dict is alive.
name=python3_small_objects_within_the_max_are_charged_near_their_rss
rm -f "$tmp/dict.prom"
if run "$name" 0 env -u PYTHONMALLOC "$tally" run --memory-max 512M \
	--metrics "$tmp/dict.prom" --interval 0.1 -- \
	python3 "$tmp/hold.py" "$tmp/dict.prom" "$tmp/dict.copy" dict 500000
then
	figures "$tmp/dict.copy"
	if grep -q '^built 500000$' "$tmp/out" && uncharged_is_the_rest &&
	   [ -n "$current" ] && [ "$rss" -gt $((64 << 20)) ] &&
	   [ $((4 * charged)) -ge $((3 * rss)) ] &&
	   [ $((4 * charged)) -le $((5 * rss)) ] &&
	   [ $((4 * current)) -ge $((3 * rss)) ] &&
	   [ $((4 * current)) -le $((5 * rss)) ]; then
		pass_with_figures "$name"
	else
		cat "$tmp/out" "$tmp/dict.copy" >> "$why" 2>/dev/null
		fail "$name" "$why"
	fi
fi
# A PYTHONMALLOC of the user's own is kept: with pymalloc the same list
# that raised MemoryError under 32M is built (pymalloc's arenas are
# mmap()ed, not charged), and the metrics show them as uncharged.
name=user_s_own_pythonmalloc_is_kept_and_its_arenas_show_as_uncharged
rm -f "$tmp/list.prom"
if run "$name" 0 env PYTHONMALLOC=pymalloc "$tally" run --memory-max 32M \
	--metrics "$tmp/list.prom" --interval 0.1 -- \
	python3 "$tmp/hold.py" "$tmp/list.prom" "$tmp/list.copy" list 1500000
then
	figures "$tmp/list.copy"
	if grep -q '^PYTHONMALLOC pymalloc$' "$tmp/out" &&
	   grep -q '^built 1500000$' "$tmp/out" && uncharged_is_the_rest &&
	   [ "$uncharged" -gt $((64 << 20)) ]; then
		pass_with_figures "$name"
	else
		cat "$tmp/out" >> "$why"
		fail "$name" "$why"
	fi
fi

# --- sqlite3 ----------------------------------------------------------
sqlite=$(command -v sqlite3 || true)
if [ -z "$sqlite" ]; then
	deps=$build/deps
	if [ ! -x "$deps/usr/bin/sqlite3" ]; then
		mkdir -p "$deps"
		(cd "$deps" && apt-get download sqlite3 >/dev/null 2>&1 &&
			dpkg -x sqlite3_*.deb .) || true
	fi
	sqlite=$deps/usr/bin/sqlite3
fi
sql="CREATE TABLE t AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL
SELECT x + 1 FROM c WHERE x < 300000) SELECT x, randomblob(200) AS b
FROM c; SELECT count(*), sum(length(b)) FROM t;"
if [ ! -x "$sqlite" ]; then
	echo "no sqlite3, and apt-get download sqlite3 failed" > "$why"
	fail sqlite3_is_available "$why"
else
	timeout -k 5 "$limit_s" "$tally" run --memory-max 16M -- \
		"$sqlite" :memory: "$sql" > "$tmp/out" 2>&1
	rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -lt 125 ] &&
	   grep -q 'out of memory' "$tmp/out"; then
		pass sqlite3_over_its_max_reports_out_of_memory
	else
		{ echo "exit status $rc:"; cat "$tmp/out"; } > "$why"
		fail sqlite3_over_its_max_reports_out_of_memory "$why"
	fi
	run_expect sqlite3_without_a_max_finishes 0 \
		'^300000\|60000000$' \
		"$tally" run -- \
		"$sqlite" :memory: "$sql"
fi

# --- C programs: fork, exec, realloc, threads -------------------------
run_expect malloc_over_the_max_returns_null_with_enomem 0 \
	'^alloc: malloc refused after (2[0-9]|3[01]) MiB: Cannot allocate memory$' \
	"$tally" run --memory-max 32M -- "$probe" alloc 64
run_expect forked_child_is_accounted_under_the_same_max 0 \
	'^child: malloc refused after (2[0-9]|3[01]) MiB' \
	"$tally" run --memory-max 32M -- "$probe" fork 64
run_expect exec_d_program_is_accounted_under_the_same_max 0 \
	'^alloc: malloc refused after (2[0-9]|3[01]) MiB' \
	"$tally" run --memory-max 32M -- "$probe" exec 64
run_expect realloc_across_the_max_returns_null_and_keeps_the_block 0 \
	'^realloc refused at [0-9]+ MiB: Cannot allocate memory, block intact$' \
	"$tally" run --memory-max 32M -- "$probe" realloc 64
# glibc's own threads (a SIGEV_THREAD timer's helper) do not go through
# pthread_create(): the first allocation of one made at the max.
run_expect a_thread_glibc_starts_survives_its_first_malloc_at_the_max 0 \
	'^timer: [0-9]+ notifications at the max$' \
	"$tally" run --memory-max 16M -- "$probe" timer
# operator new at the max: room is made (the dirty pages another thread
# left purged) before the program's new handler, which ends it, is asked;
# what does not fit is std::bad_alloc.
new_probe=$build/tests/run/new_probe
if [ -x "$new_probe" ]; then
	run_expect new_makes_room_before_the_program_s_new_handler_runs 0 \
		'^handler: 48 MiB allocated again without the handler$' \
		"$tally" run --memory-max 64M -- "$new_probe" handler 48
	run_expect new_over_the_max_throws_bad_alloc 0 \
		'^bad_alloc: 100 MiB refused with std::bad_alloc$' \
		"$tally" run --memory-max 64M -- "$new_probe" bad_alloc 100
else
	echo "$new_probe was not built (no C++ compiler): make it with g++" \
		> "$why"
	fail new_probe_is_built "$why"
fi
# jemalloc has no pvalloc(): glibc's would take a block from glibc's heap
# that jemalloc's free() cannot take back.
if run aligned_and_zeroing_allocators_are_refused_over_the_max 0 \
	"$tally" run --memory-max 32M -- "$probe" aligned 64; then
	if [ "$(grep -Ec '^[a-z_]+: 4 KiB \(usable 4096\), 64 MiB refused: Cannot allocate memory$' \
		"$tmp/out")" -eq 7 ]; then
		pass aligned_and_zeroing_allocators_are_refused_over_the_max
	else
		cp "$tmp/out" "$why"
		fail aligned_and_zeroing_allocators_are_refused_over_the_max \
			"$why"
	fi
fi
if run threads_freeing_each_others_blocks_are_accounted 0 \
	"$tally" run --memory-max 64M --metrics "$tmp/t.prom" -- \
	"$probe" threads; then
	# At exit every block is freed: what is charged is jemalloc's.
	c=$(sample "$tmp/t.prom" charged)
	a=$(sample "$tmp/t.prom" jemalloc_active)
	d=$(sample "$tmp/t.prom" jemalloc_dirty)
	o=$(sample "$tmp/t.prom" adopted)
	if [ -n "$c" ] && [ $((a + d)) -le "$c" ] &&
	   [ "$c" -le $((a + d + o)) ]; then
		pass threads_freeing_each_others_blocks_are_accounted
	else
		{ echo "charged $c active $a dirty $d adopted $o"; cat "$tmp/t.prom"; } \
			> "$why"
		fail threads_freeing_each_others_blocks_are_accounted "$why"
	fi
fi

# A heap the program maps itself (as V8's) is not charged: under a max
# below it the program runs, and the metrics written at exit, with the
# mapping alive, show it in the uncharged bytes (RSS minus charged).
name=own_mmap_heap_is_not_charged_and_shows_as_uncharged
if run "$name" 0 "$tally" run --memory-max 16M --metrics "$tmp/mmap.prom" \
	-- "$probe" mmap 64; then
	figures "$tmp/mmap.prom"
	if grep -q '^mmap: 64 MiB mapped and written$' "$tmp/out" &&
	   uncharged_is_the_rest && [ "$uncharged" -ge $((64 << 20)) ]; then
		pass_with_figures "$name"
	else
		cat "$tmp/out" "$tmp/mmap.prom" >> "$why" 2>/dev/null
		fail "$name" "$why"
	fi
fi

# --- the metrics file ---------------------------------------------------
# A relative path is tally run's, whatever directory the program moves to.
mkdir -p "$tmp/cwd/sub"
abs_tally=$(cd "$(dirname "$tally")" && pwd)/tally
abs_probe=$(cd "$(dirname "$probe")" && pwd)/run_probe
if run relative_metrics_path_is_tally_run_s_directory_s 0 \
	sh -c 'cd "$1" && shift && exec "$@"' sh "$tmp/cwd" \
	"$abs_tally" run --metrics rel.prom -- "$abs_probe" chdir sub; then
	if [ -s "$tmp/cwd/rel.prom" ] && [ ! -e "$tmp/cwd/sub/rel.prom" ]; then
		pass relative_metrics_path_is_tally_run_s_directory_s
	else
		ls -R "$tmp/cwd" > "$why"
		fail relative_metrics_path_is_tally_run_s_directory_s "$why"
	fi
fi
# No atexit() handler runs after _exit() or a signal: the file written
# when the program started is there, and tally run's last write says
# which signal killed it (SIGKILL leaves the program no handler).
for how in _exit signal; do
	name=metrics_file_is_written_by_a_program_that_ends_by_$how
	if [ $how = _exit ]; then
		run "$name" 0 "$tally" run --metrics "$tmp/$how.prom" -- \
			"$probe" _exit
	else
		run "$name" 137 "$tally" run --metrics "$tmp/$how.prom" -- \
			sh -c 'kill -9 $$'
	fi || continue
	sig=$(metric "$tmp/$how.prom" tally_run_signal)
	want=
	[ $how = signal ] && want=9
	if [ -n "$(metric "$tmp/$how.prom" tally_run_memory_current_bytes)" ] &&
	   [ "$sig" = "$want" ]; then
		pass "$name"
	else
		{ echo "no memory.current, or signal '$sig':"
		  cat "$tmp/$how.prom"; } > "$why" 2>&1
		fail "$name" "$why"
	fi
done

# samples FILE FAMILY: "PID VALUE" per sample of FAMILY, in file order.
samples() {
	sed -n "s/^$2{pid=\"\([0-9]*\)\",program=\"[^\"]*\"} /\1 /p" "$1"
}
# Each process has a group and limits of its own, and every process of
# the tree records its events in the file: a child that execs a program,
# a forked child that ends by _exit(); the program, first, without one.
for mode in spawn fork; do
	name=${mode}ed_child_over_its_max_has_its_events_in_the_metrics_file
	run "$name" 0 "$tally" run --memory-max 32M --metrics "$tmp/$mode.prom" \
		-- "$probe" "$mode" 64 || continue
	samples "$tmp/$mode.prom" tally_run_memory_events_oom_total \
		> "$tmp/oom"
	main=$(sed -n 1p "$tmp/oom")
	child=$(sed -n 2p "$tmp/oom")
	# The forked child does what its parent does after it.
	main_oom=0
	[ $mode = fork ] && main_oom=${child#* }
	if [ "$(metric "$tmp/$mode.prom" tally_run_processes)" = 2 ] &&
	   [ "$(wc -l < "$tmp/oom")" -eq 2 ] && [ -n "$child" ] &&
	   [ "${child#* }" -gt 0 ] && [ "${child% *}" != "${main% *}" ] &&
	   [ "${main#* }" -eq "$main_oom" ]; then
		pass "$name"
	else
		{ cat "$tmp/out"; cat "$tmp/$mode.prom"; } > "$why"
		fail "$name" "$why"
	fi
done
# Python's subprocess closes every descriptor it does not pass on: the
# child still finds the ledger (named by a path, not inherited).
name=python_subprocess_child_has_its_events_in_the_metrics_file
if run "$name" 0 "$tally" run --memory-max 32M --metrics "$tmp/py.prom" -- \
	python3 -c 'import subprocess, sys
sys.exit(subprocess.run([sys.argv[1], "alloc", "64"]).returncode)' \
	"$abs_probe"; then
	oom=$(sed -n 's/^tally_run_memory_events_oom_total{pid="[0-9]*",program="run_probe"} //p' \
		"$tmp/py.prom")
	if [ -n "$oom" ] && [ "$oom" -gt 0 ]; then
		pass "$name"
	else
		{ cat "$tmp/out"; cat "$tmp/py.prom"; } > "$why" 2>&1
		fail "$name" "$why"
	fi
fi
# A program that aborts when malloc() fails (as tclsh does) records its
# events and the signal from the handler the preload left on SIGABRT.
name=program_that_aborts_at_its_max_leaves_its_events_and_its_signal
if run "$name" 134 "$tally" run --memory-max 32M --metrics "$tmp/abort.prom" \
	-- "$probe" abort 64; then
	oom=$(metric "$tmp/abort.prom" tally_run_memory_events_oom_total)
	if [ "$(metric "$tmp/abort.prom" tally_run_signal)" = 6 ] &&
	   [ -n "$oom" ] && [ "$oom" -gt 0 ]; then
		pass "$name"
	else
		cat "$tmp/abort.prom" > "$why" 2>&1
		fail "$name" "$why"
	fi
fi
# At its max, where every malloc() fails (at exit too), the file is
# written, the RSS read.
name=metrics_are_written_when_the_program_stands_at_its_max
if run "$name" 0 "$tally" run --memory-max 16M --metrics "$tmp/fill.prom" \
	-- "$probe" fill; then
	figures "$tmp/fill.prom"
	if [ -n "$rss" ] && [ "$rss" -gt 0 ] && uncharged_is_the_rest &&
	   [ "$current" -eq $((16 << 20)) ]; then
		pass_with_figures "$name"
	else
		cat "$tmp/fill.prom" >> "$why" 2>&1
		fail "$name" "$why"
	fi
fi
# One label set per process (its pid and name), no hierarchy to split
# into hierarchical and local families, no family that is 0 everywhere.
name=metrics_file_has_one_label_set_per_process_and_no_all_zero_family
if [ -f "$tmp/spawn.prom" ]; then
	if awk '
	/^#/ { next }
	$1 == "tally_run_processes" { next }
	$1 !~ /^tally_run_[a-z_]+\{pid="[0-9]+",program="[^"]*"\}$/ ||
	    $1 ~ /_(hier|local)_/ { print "bad sample: " $0; bad = 1 }
	{ f = $1; sub(/\{.*/, "", f); if ($2 != "0") nonzero[f] = 1; seen[f] = 1 }
	END {
		for (f in seen)
			if (!(f in nonzero)) { print "all zero: " f; bad = 1 }
		exit bad
	}' "$tmp/spawn.prom" > "$why"; then
		pass "$name"
	else
		cat "$tmp/spawn.prom" >> "$why"
		fail "$name" "$why"
	fi
fi
# Every HELP line of the file is the definition docs/cli.md's table gives
# its family.
name=every_help_line_of_the_metrics_file_is_the_docs_definition
if [ -f "$tmp/spawn.prom" ] && [ -f "$tmp/abort.prom" ]; then
	if awk '
	FNR == NR {
		if ($0 ~ /^\| `tally_run_[a-z_]+` \| /) {
			name = $2
			gsub(/`/, "", name)
			def = $0
			sub(/^\| `[a-z_]+` \| /, "", def)
			sub(/ \|$/, "", def)
			docs[name] = def
		}
		next
	}
	/^# HELP / {
		n++
		help = $0
		sub(/^# HELP [a-z_]+ /, "", help)
		if (!($3 in docs)) {
			print $3 ": no row of the table names it"
			bad = 1
		} else if (docs[$3] != help) {
			print $3 ": HELP \"" help "\", docs \"" docs[$3] "\""
			bad = 1
		}
	}
	END { if (n < 10) { print "only " n " HELP lines"; bad = 1 }; exit bad }
	' docs/cli.md "$tmp/spawn.prom" "$tmp/abort.prom" > "$why"; then
		pass "$name"
	else
		fail "$name" "$why"
	fi
fi

# --- the environment of tally run -----------------------------------------
# The variables tally run passes to its preload are the command line's
# alone: one already in its environment sets no limit and no file.
run_expect environment_s_tally_run_max_sets_no_limit 0 \
	'^alloc: allocated 8 MiB$' \
	env TALLY_RUN_MEMORY_MAX=1048576 TALLY_RUN_MEMORY_HIGH=garbage \
	"$tally" run -- "$probe" alloc 8
if run environment_s_tally_run_metrics_writes_no_file 0 \
	env TALLY_RUN_METRICS="$tmp/stray.prom" TALLY_RUN_INTERVAL_MS=1 \
	"$tally" run -- "$probe" alloc 1; then
	if [ -e "$tmp/stray.prom" ]; then
		echo "$tmp/stray.prom was written" > "$why"
		fail environment_s_tally_run_metrics_writes_no_file "$why"
	else
		pass environment_s_tally_run_metrics_writes_no_file
	fi
fi

# refused NAME STATUS PATTERN COMMAND...: tally run exits STATUS with a
# message matching PATTERN, and the program never ran (the probe prints
# nothing).
refused() {
	name=$1
	want=$2
	pattern=$3
	shift 3
	if run "$name" "$want" "$@"; then
		if grep -q '^alloc:' "$tmp/out"; then
			{ echo "the program ran:"; cat "$tmp/out"; } > "$why"
			fail "$name" "$why"
		else
			expect "$name" "$pattern"
		fi
	fi
}
# The loader ignores LD_PRELOAD for a program that changes the user or
# group ID: it would run without the accounting.
if [ "$(id -u)" -eq 0 ] && id nobody > /dev/null 2>&1; then
	cp "$probe" "$tmp/setuid_probe"
	chown nobody "$tmp/setuid_probe"
	chmod 4755 "$tmp/setuid_probe"
	case $(findmnt -no OPTIONS -T "$tmp" 2>/dev/null) in
	*nosuid*) ;;
	*) refused set_user_id_program_is_refused_before_it_runs 126 \
		'^tally: run: .*setuid_probe is set-user-ID' \
		"$tally" run --memory-max 8M -- "$tmp/setuid_probe" alloc 64 ;;
	esac
fi
# LD_PRELOAD splits its list at spaces and colons: a preload library
# whose path holds one cannot be preloaded.
mkdir -p "$tmp/a dir"
cp "$build/libtally_run.so" "$tmp/a dir/"
refused preload_path_with_a_space_is_refused_before_the_program_runs 125 \
	'^tally: run: cannot preload .*a dir/libtally_run.so' \
	env TALLY_RUN_PRELOAD="$tmp/a dir/libtally_run.so" \
	"$tally" run --memory-max 8M -- "$probe" alloc 64
# A library the program preloads that starts a thread before the
# accounting is installed: that thread's allocations would escape it
# (tally_jemalloc_init() refuses), so the program does not run.
cat > "$tmp/thread.c" <<'C'
#include <pthread.h>
#include <unistd.h>
static void *sleeper(void *arg) { for (;;) pause(); return arg; }
__attribute__((constructor)) static void start(void)
{
	pthread_t t;

	pthread_create(&t, 0, sleeper, 0);
}
C
if ${CC:-cc} -shared -fPIC -pthread -o "$tmp/thread.so" "$tmp/thread.c"
then
	refused thread_started_before_the_accounting_is_refused 125 \
		'^tally: run: the process has another thread before the accounting is installed' \
		env LD_PRELOAD="$tmp/thread.so" "$tally" run -- "$probe" alloc 1
else
	echo "cannot build $tmp/thread.so" > "$why"
	fail thread_started_before_the_accounting_is_refused "$why"
fi

# --- nothing runs unaccounted, nothing through a shell -------------------
# A #! script runs its interpreter: the checks follow the chain as the
# kernel does (at most five scripts), to the program at its end.
static=$(cd "$(dirname "$probe")" && pwd)/run_probe_static
if [ -x "$static" ]; then
	printf '#!%s alloc\n' "$static" > "$tmp/static.sh"
	printf '#!%s\n' "$tmp/static.sh" > "$tmp/chain.sh"
	chmod 755 "$tmp/static.sh" "$tmp/chain.sh"
	refused script_whose_interpreter_is_static_is_refused_before_it_runs \
		126 "^tally: run: $static is statically linked" \
		"$tally" run --memory-max 1M -- "$tmp/static.sh"
	refused script_chain_ending_in_a_static_program_is_refused 126 \
		"^tally: run: $static is statically linked" \
		"$tally" run --memory-max 1M -- "$tmp/chain.sh"
fi
# Five scripts down to the probe run it (accounted); a sixth is the
# kernel's ELOOP, refused before anything runs.
printf '#!%s alloc\n' "$abs_probe" > "$tmp/level4"
for i in 3 2 1 0; do
	printf '#!%s\n' "$tmp/level$((i + 1))" > "$tmp/level$i"
done
printf '#!%s\n' "$tmp/level0" > "$tmp/level-1"
chmod 755 "$tmp"/level*
run five_scripts_down_to_a_program_run_it_accounted 0 \
	"$tally" run --memory-max 8M -- "$tmp/level0" &&
	expect five_scripts_down_to_a_program_run_it_accounted \
		'^alloc: allocated 0 MiB$'
refused six_scripts_down_to_a_program_are_refused_as_the_kernel_does 126 \
	"^tally: run: $tmp/level-1: more than 5 levels of #! interpreters" \
	"$tally" run -- "$tmp/level-1"
# A 32-bit program: the loader ignores a 64-bit preload (with a warning)
# and it would run unaccounted.  A static i386 ELF that prints one line.
python3 -c '
import struct, sys
msg = b"alloc: a 32-bit program ran\n"
base = 0x08048000
code_at = base + 52 + 32
code = (b"\xb8\x04\x00\x00\x00\xbb\x01\x00\x00\x00\xb9" +
        struct.pack("<I", code_at + 31) + b"\xba" +
        struct.pack("<I", len(msg)) +
        b"\xcd\x80\xb8\x01\x00\x00\x00\x31\xdb\xcd\x80")
size = 52 + 32 + len(code) + len(msg)
eh = b"\x7fELF\x01\x01\x01" + b"\0" * 9 + struct.pack(
    "<HHIIIIIHHHHHH", 2, 3, 1, code_at, 52, 0, 0, 52, 32, 1, 0, 0, 0)
ph = struct.pack("<IIIIIIII", 1, 0, base, base, size, size, 5, 0x1000)
sys.stdout.buffer.write(eh + ph + code + msg)
' > "$tmp/prog32"
chmod 755 "$tmp/prog32"
refused program_of_another_architecture_is_refused_before_it_runs 126 \
	"^tally: run: $tmp/prog32 is not an x86-64 program" \
	"$tally" run --memory-max 1M -- "$tmp/prog32"
# A program that drops LD_PRELOAD before the preload's constructor runs
# (and executes itself again) never reports: it is killed before it has
# run for long, never reaching 64 MiB (1 MiB every 250 ms) under 4M.
unpreload=$build/tests/run/run_probe_unpreload
name=program_that_drops_the_preload_is_killed_before_it_allocates
if run "$name" 125 "$tally" run --memory-max 4M -- "$unpreload" slow 64
then
	if grep -q '^slow: allocated' "$tmp/out" ||
	   ! grep -q '^slow: started$' "$tmp/out"; then
		{ echo "it ran to its end, or never started:"
		  cat "$tmp/out"; } > "$why"
		fail "$name" "$why"
	else
		expect "$name" \
			'^tally: run: .*run_probe_unpreload started without the accounting'
	fi
fi
# An executable file that is neither ELF nor #! is what execvp() hands
# to /bin/sh: here it is not run (ENOEXEC).
mkdir -p "$tmp/bin"
printf 'echo ran through a shell\n' > "$tmp/bin/noshebang"
chmod 755 "$tmp/bin/noshebang"
name=executable_without_shebang_is_never_run_through_a_shell
if run "$name" 126 env PATH="$tmp/bin:$PATH" "$tally" run -- noshebang
then
	if grep -q 'ran through a shell' "$tmp/out"; then
		{ echo "a shell ran it:"; cat "$tmp/out"; } > "$why"
		fail "$name" "$why"
	else
		expect "$name" \
			"^tally: run: $tmp/bin/noshebang: cannot execute: Exec format error"
	fi
fi
# Without its preload library tally run says what provides it.
mkdir -p "$tmp/alone"
cp "$tally" "$tmp/alone/tally"
env -u TALLY_RUN_PRELOAD "$tmp/alone/tally" run -- true > "$tmp/out" 2>&1
rc=$?
name=tally_run_without_its_preload_names_the_package_and_the_build
if [ "$rc" -eq 0 ]; then
	echo "info: an installed libtally_run.so was found: $name not checked"
elif [ "$rc" -eq 125 ] && grep -q 'libjemalloc-dev' "$tmp/out" &&
     grep -q 'make JEMALLOC=yes' "$tmp/out"; then
	pass "$name"
else
	{ echo "exit status $rc:"; cat "$tmp/out"; } > "$why"
	fail "$name" "$why"
fi
# Installed, tally run finds its preload from its own binary: under any
# PREFIX the build was not made for, with LIBDIR apart from it, and after
# the prefix is moved.
# install_and_run NAME DIR VARS...: make install into DIR with the
# variables VARS, then DIR/bin/tally runs the probe accounted.
install_and_run() {
	name=$1
	dir=$2
	shift 2
	if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s \
		--no-print-directory install BUILD="$build" JEMALLOC=yes \
		PREFIX="$dir" "$@" > "$tmp/out" 2>&1; then
		{ echo "make install failed:"; cat "$tmp/out"; } > "$why"
		fail "$name" "$why"
		return 1
	fi
	run "$name" 0 env -u TALLY_RUN_PRELOAD "$dir/bin/tally" run \
		--memory-max 8M -- "$probe" alloc 64 &&
	expect "$name" '^alloc: malloc refused after [0-9] MiB'
}
install_and_run installed_tally_run_finds_its_preload_under_any_prefix \
	"$tmp/prefix"
mv "$tmp/prefix" "$tmp/moved"
run installed_tally_run_finds_its_preload_after_the_prefix_moved 0 \
	env -u TALLY_RUN_PRELOAD "$tmp/moved/bin/tally" run --memory-max 8M \
	-- "$probe" alloc 64 &&
	expect installed_tally_run_finds_its_preload_after_the_prefix_moved \
		'^alloc: malloc refused after [0-9] MiB'
install_and_run installed_tally_run_finds_its_preload_in_lib64 \
	"$tmp/p64" LIBDIR="$tmp/p64/lib64"
rm -rf "$tmp/moved" "$tmp/p64"
# make says what it leaves out, and which package brings it.
make -n --no-print-directory BUILD="$tmp/mk" HAVE_JEMALLOC= HAVE_MHD= \
	deps > "$tmp/out" 2>&1
expect make_says_it_skips_the_jemalloc_integration_and_its_package \
	'skip.*jemalloc.*libjemalloc-dev'
expect make_says_it_skips_the_http_endpoint_and_its_package \
	'skip.*HTTP.*libmicrohttpd-dev'

# --- exit statuses and bad input --------------------------------------
run program_s_exit_status_is_tally_run_s 7 "$tally" run -- sh -c 'exit 7' &&
	pass program_s_exit_status_is_tally_run_s
run killed_program_gives_128_plus_its_signal 137 \
	"$tally" run -- sh -c 'kill -9 $$' &&
	pass killed_program_gives_128_plus_its_signal
for bad in 12Q -5 1.5M "" M 99999999999T; do
	if run "unparseable_size_'$bad'_is_a_usage_error" 2 \
		"$tally" run --memory-max "$bad" -- true; then
		expect "unparseable_size_'$bad'_is_a_usage_error" \
			"^tally: run: --memory-max: cannot parse size"
	fi
done
run size_suffixes_are_binary 0 "$tally" run --memory-max 1g \
	--memory-high 512MiB -- true && pass size_suffixes_are_binary
for bad in 0 -1 abc 100000; do
	run "bad_interval_'$bad'_is_a_usage_error" 2 "$tally" run \
		--metrics "$tmp/x.prom" --interval "$bad" -- true &&
	expect "bad_interval_'$bad'_is_a_usage_error" \
		"^tally: run: --interval:"
done
# A metrics file that cannot be written is a bad command line, said in
# one line before the program runs.
mkdir -p "$tmp/isdir.prom"
: > "$tmp/plain"
for bad in missing/x.prom isdir.prom plain/x.prom; do
	name="metrics_file_that_cannot_be_written_is_refused_before_the_program_runs ($bad)"
	run "$name" 2 "$tally" run --metrics "$tmp/$bad" -- "$probe" alloc 1 ||
		continue
	if [ "$(wc -l < "$tmp/out")" -eq 1 ] &&
	   grep -q "^tally: run: --metrics: cannot write $tmp/$bad: " "$tmp/out"
	then
		pass "$name"
	else
		{ echo "not one line naming the file:"; cat "$tmp/out"; } > "$why"
		fail "$name" "$why"
	fi
done
# jemalloc holds its first pages before the program runs: a max below
# them could never be kept, and is refused before the program starts,
# naming the least that works (the program ran with no limit before).
refused max_below_what_the_allocator_holds_at_start_names_the_least 125 \
	'^tally: run: --memory-max is below the [0-9]* bytes the allocator holds as the program starts: give at least [0-9]*K$' \
	"$tally" run --memory-max 1K -- "$probe" alloc 0
run missing_program_is_a_usage_error 2 "$tally" run --memory-max 1M &&
	expect missing_program_is_a_usage_error '^tally: run: no program to run$'
run unknown_program_exits_127 127 "$tally" run -- no-such-program-xyz &&
	expect unknown_program_exits_127 \
		'^tally: run: no-such-program-xyz: command not found$'
printf 'not a program\n' > "$tmp/data"
chmod 644 "$tmp/data"
run not_executable_program_exits_126 126 "$tally" run -- "$tmp/data" &&
	expect not_executable_program_exits_126 \
		"^tally: run: $tmp/data: Permission denied\$"
if [ -x "$build/tests/run/run_probe_static" ]; then
	run statically_linked_program_exits_126 126 "$tally" run -- \
		"$build/tests/run/run_probe_static" alloc 1 &&
	expect statically_linked_program_exits_126 \
		'^tally: run: .*run_probe_static is statically linked'
fi
run help_documents_the_exit_statuses 0 "$tally" run --help &&
	expect help_documents_the_exit_statuses \
		'125 tally failed|126 the program cannot|127 the program was'
finish
