#!/bin/sh
# Check that tally's dependencies run one way.  The library is one folder
# per concept under src/, in layers (src/README.md says what each owns):
#
#   0 runtime   per-CPU runtime, rseq, CPU domains, grace periods, fork
#   0 names     a tree of named nodes: names, paths, lookups, sorted walks
#   1 counter   hierarchical per-CPU counters
#   2 stats     the statistics tree
#   3 mm        per-task memory and victim selection
#   4 memcg     memory groups
#   5 export    Prometheus/OpenMetrics rendering
#   6 http      the HTTP endpoint (libtally_http)
#   6 jemalloc  the jemalloc integration
#
# A file may include a private header of its own folder, or of a folder
# of a lower layer ("runtime/inject.h"), and a public header
# (<tally/x.h>) of its own layer or a lower one; the public headers
# themselves follow the same rule.  Any other include fails the check, as
# does a private header included without its folder from outside it, or
# a source file in no layer.
#
# The tool (build/tally) has three folders, which use the library only
# through its public headers: tool/ (what the commands share: option
# parsing, the machine's description, the benchmarks' JSON schema) uses
# nothing of the other two; bench/ may use tool/; cli/ may use tool/ and
# bench/bench.h alone (the `tally bench` entry points), never the
# benchmarks' internals.  `tally run`'s preload library (libtally_run.so)
# is the tool's too: cli/run_preload.c, with cli/run_ledger.c, which it
# shares with `tally run`.
#
# usage: check-layers.sh [ROOT]  (default: the repository).  With no ROOT
# it also proves it can fail: it copies the tree, adds a wrong-way
# include to the lowest layer, and expects a failure.
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh

# The rank of a folder under src/, or of a public header's concept.
layer_of_dir() {
	case $1 in
	runtime | names) echo 0 ;; counter) echo 1 ;; stats) echo 2 ;; mm) echo 3 ;;
	memcg) echo 4 ;; export) echo 5 ;; http | jemalloc) echo 6 ;;
	*) echo none ;;
	esac
}
layer_of_public() {
	case $1 in
	percpu.h | percpu_x86_64.h | domain.h | version.h) echo 0 ;;
	counter.h) echo 1 ;; stats.h) echo 2 ;; mm.h | oom.h) echo 3 ;;
	memcg.h | memcg_current.h) echo 4 ;; export.h) echo 5 ;;
	export_http.h | jemalloc.h) echo 6 ;;
	*) echo none ;;
	esac
}

# check_tree ROOT OUT: writes one line per violation to OUT.
check_tree() {
	root=$1
	out=$2
	: > "$out"
	for f in "$root"/src/*.[ch]; do
		[ -f "$f" ] && echo "${f#"$root"/}: a file outside every layer's folder" >> "$out"
	done
	for f in "$root"/src/*/*.[ch] "$root"/include/tally/*.h; do
		[ -f "$f" ] || continue
		rel=${f#"$root"/}
		case $rel in
		include/tally/*) dir=public; own=$(layer_of_public "${rel##*/}") ;;
		*) dir=${rel#src/}; dir=${dir%%/*}; own=$(layer_of_dir "$dir") ;;
		esac
		if [ "$own" = none ]; then
			echo "$rel: in no layer" >> "$out"
			continue
		fi
		grep -n '^[[:space:]]*#[[:space:]]*include' "$f" |
		while IFS= read -r line; do
			n=${line%%:*}
			inc=$(printf '%s\n' "$line" |
				sed -n 's/.*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p')
			name=${inc#?}
			name=${name%?}
			case $inc in
			\<tally/*)
				# a public header: its own layer or a lower one
				to=$(layer_of_public "${name#tally/}")
				[ "$to" != none ] && [ "$to" -le "$own" ] && continue ;;
			\<*) continue ;;
			\"*/*)
				# a private header: its own folder or a lower layer's
				[ "${name%%/*}" = "$dir" ] && continue
				to=$(layer_of_dir "${name%%/*}")
				[ "$dir" != public ] && [ "$to" != none ] &&
					[ "$to" -lt "$own" ] && continue ;;
			\"*)
				[ "$dir" != public ] && [ -f "${f%/*}/$name" ] && continue ;;
			*) continue ;;
			esac
			echo "$rel:$n: $inc: a layer-$own file may not include it" >> "$out"
		done
	done
}

# check_tool ROOT OUT: the tool's folders; violations appended to OUT.
check_tool() {
	for f in "$1"/tool/*.[ch] "$1"/bench/*.[ch] "$1"/cli/*.[ch]; do
		[ -f "$f" ] || continue
		rel=${f#"$1"/}
		grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
		while IFS= read -r line; do
			name=$(printf '%s\n' "$line" | sed 's/[^"]*"\([^"]*\)".*/\1/')
			case ${rel%%/*}:$name in
			*:../tool/* | cli:../bench/bench.h) ;;
			tool:../* | bench:../* | cli:../*)
				echo "$rel:${line%%:*}: \"$name\": not the tool's way down" >> "$2" ;;
			esac
		done
	done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

root=${1:-.}
check_tree "$root" "$tmp/why"
check_tool "$root" "$tmp/why"
if [ -s "$tmp/why" ]; then
	fail dependencies_run_one_way "$tmp/why"
else
	pass dependencies_run_one_way
fi

if [ $# -eq 0 ]; then
	# The check must be able to fail: a wrong-way include, private then
	# public, in the lowest layer of a copy of the tree.
	for wrong in 'src/runtime/percpu.c:#include "memcg/memcg_internal.h"' \
		     'src/runtime/percpu.c:#include <tally/stats.h>' \
		     'cli/tally.c:#include "../bench/measure.h"'; do
		file=${wrong%%:*}
		wrong=${wrong#*:}
		rm -rf "$tmp/copy"
		mkdir -p "$tmp/copy"
		cp -R src include tool bench cli "$tmp/copy/"
		printf '%s\n' "$wrong" >> "$tmp/copy/$file"
		check_tree "$tmp/copy" "$tmp/why2"
		check_tool "$tmp/copy" "$tmp/why2"
		if grep -q "^$file" "$tmp/why2"; then
			pass "a_wrong_way_include_fails: $wrong"
		else
			echo "no failure for $wrong in $file" > "$tmp/why2"
			fail "a_wrong_way_include_fails: $wrong" "$tmp/why2"
		fi
	done
fi
finish
