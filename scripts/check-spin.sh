#!/bin/sh
# The Promela models of formal/ (see formal/README.md), checked with spin:
#   - each model verifies: an exhaustive search (spin -a, then pan built
#     with -DSAFETY) ends with no assertion violated and no invalid end
#     state, within TALLY_SPIN_MEMLIM megabytes (default 512) and
#     TALLY_SPIN_TIMEOUT seconds (default 60) per search;
#   - the search is not vacuous: built with -DPROBES, the same pan run
#     with SPIN_PROBE=k reports path k of the model (formal/probe.h), for
#     every path the model names;
#   - each mutant, a copy of a model made with a spin -D definition, is
#     rejected: spin finds a violation of the assertion it breaks, and
#     writes its trail.
# The largest state space (about 5 million states) is searched with
# -DCOLLAPSE, spin's lossless compression of stored states: still
# exhaustive, in less than half the memory.  Everything is built and run
# in a temporary directory under build/, removed on exit.  Prints each search's states, memory and time, and
# like a test binary PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh

limit=${TALLY_SPIN_TIMEOUT:-60}
memlim=${TALLY_SPIN_MEMLIM:-512}

mkdir -p build || exit 1
work=$(mktemp -d build/spin.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP
why=$work/why

for tool in spin cc; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "$tool is missing: scripts/ensure-deps.sh test" \
			"installs it" > "$why"
		fail spin_and_a_compiler_are_installed "$why"
		finish
		exit 1
	fi
done

# pan's extra compile options and hash table size (log2 of its slots),
# for the next build and search.
pan_cflags=
pan_hash=20

# build DIR MODEL [SPIN-OPTION...]: pan for formal/MODEL in DIR (new),
# where the search runs and writes its trail.  False, with the reason in
# $why, when spin or the compiler fails.
build() {
	dir=$1
	model=$2
	shift 2
	mkdir "$dir" && cp "formal/$model" formal/probe.h "$dir/" || return 1
	# pan.c is generated: its warnings are spin's, not ours (-w).
	# -O0: the searches take a fraction of a second, an optimized
	# build of pan.c takes seconds.
	if ! (cd "$dir" && spin "$@" -a "$model" > spin.out 2>&1 &&
	      cc -O0 -w -DSAFETY -DMEMLIM="$memlim" $pan_cflags -o pan pan.c \
		> cc.out 2>&1); then
		cat "$dir/spin.out" "$dir/cc.out" > "$why" 2>/dev/null
		return 1
	fi
}

# search DIR [VAR=VALUE...]: run DIR/pan; its output in DIR/pan.out, and
# $errors, $states, $memory (MB), $secs, $complete (yes when the whole
# state space was searched, as far as the first error if one was found).
search() {
	dir=$1
	shift
	(cd "$dir" && env -u SPIN_PROBE "$@" timeout -k 5 "$limit" ./pan \
		-m10000 -w"$pan_hash" > pan.out 2>&1)
	rc=$?
	out=$dir/pan.out
	errors=$(sed -n 's/.*, errors: \([0-9][0-9]*\)$/\1/p' "$out")
	states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' "$out")
	memory=$(sed -n 's/^ *\([0-9.][0-9.]*\)[[:space:]]*total actual memory usage.*/\1/p' \
		"$out")
	secs=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\) seconds.*/\1/p' "$out")
	complete=yes
	if [ "$rc" -eq 124 ] || [ -z "$errors" ] ||
	   grep -q -e 'max search depth too small' -e 'MEMLIM' \
		-e 'out of memory' "$out"; then
		complete=no
	fi
	: "${errors:=?}" "${states:=?}" "${memory:=?}" "${secs:=?}"
}

# info LABEL: the figures of the last search.
info() {
	echo "  $1: $states states, $memory MB, ${secs}s"
}

# run_model NAME LABEL MODEL [SPIN-OPTION...]: build pan for MODEL in
# $work/NAME and search; false, NAME failed, when it cannot be built.
run_model() {
	name=$1
	label=$2
	model=$3
	dir=$work/$name
	shift 3
	if ! build "$dir" "$model" "$@"; then
		fail "$name" "$why"
		return 1
	fi
	search "$dir"
	info "$label"
}

# verify NAME LABEL MODEL "K:PATH..." [SPIN-OPTION...]: the model
# verifies (test NAME), then reaches each path K (tests
# ${NAME%_verifies*}_reaches_PATH).
verify() {
	paths=$4
	a1=$1 a2=$2 a3=$3
	shift 4
	run_model "$a1" "$a2" "$a3" -DPROBES "$@" || return
	if [ "$complete" = yes ] && [ "$errors" = 0 ]; then
		pass "$name"
	else
		{ echo "exhaustive search incomplete or failed:"; cat "$out"; } \
			> "$why"
		fail "$name" "$why"
	fi
	for p in $paths; do
		k=${p%%:*}
		test_name=${name%%_verifies*}_reaches_${p#*:}
		search "$dir" SPIN_PROBE="$k"
		if [ "$errors" != "?" ] && [ "$errors" -gt 0 ] &&
		   grep -q "probe == $k )" "$out"; then
			pass "$test_name"
		else
			{ echo "SPIN_PROBE=$k: path $k never taken:"; cat "$out"; } \
				> "$why"
			fail "$test_name" "$why"
		fi
	done
}

# reject NAME LABEL MODEL ASSERTION [SPIN-OPTION...]: spin finds a
# violation of the assertion whose text contains ASSERTION (pan's
# spelling) in the mutant, and writes its trail.
reject() {
	assertion=$4
	a1=$1 a2=$2 a3=$3
	shift 4
	run_model "$a1" "$a2" "$a3" "$@" || return
	violated=$(grep -m 1 '^pan:1: assertion violated' "$out")
	if [ "$errors" != "?" ] && [ "$errors" -gt 0 ] &&
	   [ -s "$dir/$model.trail" ] &&
	   printf '%s\n' "$violated" | grep -qF "$assertion"; then
		echo "  $label: ${violated#pan:1: }"
		pass "$name"
	else
		{
			echo "spin did not find the violation of" \
				"\"$assertion\" (errors: $errors):"
			cat "$out"
		} > "$why"
		fail "$name" "$why"
	fi
}

charge_paths="1:fast_path 2:refill_into_its_own_slot
	4:install_in_a_free_slot 5:eviction_of_a_slot_with_bytes
	6:eviction_held_back_by_pressure 7:install_losing_its_slot
	8:refill_held_back_by_pressure 9:carry_of_a_batch
	10:carry_held_back_by_pressure 11:refusal 12:refusal_moving_up
	13:two_refusals_at_once 14:grace_wait_waiting_for_a_section
	16:charge_after_drain_and_wait"
verify charge_refusal_at_child_verifies "charge, refuser at A" \
	charge.pml "$charge_paths"
verify charge_refusal_at_parent_verifies "charge, refuser at P" \
	charge.pml "11:refusal 14:grace_wait_waiting_for_a_section" \
	-DREFUSER_GROUP=P
verify charge_destroy_verifies "charge, destroy of A" charge.pml \
	"17:install_of_a_dead_group_refused 18:drain_of_the_dead_group
	19:charge_resolved_to_the_parent 4:install_in_a_free_slot" \
	-DCONFIG_DESTROY
pan_cflags=-DCOLLAPSE
pan_hash=23
verify charge_destroy_and_refusal_verifies \
	"charge, destroy of A and refusal at P" charge.pml \
	"21:two_grace_waits_at_once 17:install_of_a_dead_group_refused
	18:drain_of_the_dead_group" \
	-DCONFIG_DESTROY -DDESTROY_AND_REFUSE -DREFUSER_GROUP=P
pan_cflags=
pan_hash=20
verify charge_fork_verifies "charge, fork" charge.pml \
	"20:fork_while_a_section_is_open 8:refill_held_back_by_pressure
	10:carry_held_back_by_pressure" -DCONFIG_FORK
verify grace_verifies "grace" grace.pml \
	"1:reader_of_the_first_object 2:reader_of_the_second_object
	3:reader_after_both_unlinked 4:reader_entering_with_a_stale_epoch
	5:advance_held_back_by_a_reader"
verify share_verifies "share" share.pml \
	"1:reader_watching_a_flush 2:takeover_of_a_stopped_flush
	3:reader_returning_past_a_stopped_flush"
verify push_verifies "push" push.pml \
	"1:update_relying_on_a_stopped_claim 2:flush_adopting_a_stopped_claim
	3:flush_popping_a_push 4:read_after_both_updates"

reject mutant_eviction_outside_a_section_refuses_falsely \
	"mutant: eviction outside a section, no victim pressure check" \
	charge.pml "(ch[lv]+" -DMUTANT_EVICTION_HIDDEN
reject mutant_wait_started_outside_the_lock_refuses_falsely \
	"mutant: grace_wait reads its start outside the domain's lock" \
	charge.pml "(ch[lv]+" -DCONFIG_DESTROY -DDESTROY_AND_REFUSE \
	-DREFUSER_GROUP=P -DMUTANT_WAIT_START_UNLOCKED
reject mutant_destroy_without_grace_wait_leaves_a_dead_slot \
	"mutant: destroy drains without grace_wait" charge.pml \
	"destroyed" -DCONFIG_DESTROY -DMUTANT_DESTROY_NO_WAIT
reject mutant_fork_without_grace_wait_forks_bytes_in_transfer \
	"mutant: fork without grace_wait" charge.pml "(tr[0]==0)" \
	-DCONFIG_FORK -DMUTANT_FORK_NO_WAIT
reject mutant_free_after_one_advance_frees_under_a_reader \
	"mutant: free after one epoch advance" grace.pml "holds[" \
	-DMUTANT_ONE_ADVANCE
reject mutant_reader_without_takeover_waits_for_a_stopped_flusher \
	"mutant: a watcher waits until the flush ends" share.pml \
	"((returned+stopped)==" -DMUTANT_NO_TAKEOVER
reject mutant_forced_read_joining_an_earlier_flush_is_stale \
	"mutant: a forced read takes a flush running at its arrival" \
	share.pml "(folded>=mine)" -DMUTANT_JOIN_EARLIER
reject mutant_flush_passing_a_stopped_push_without_adopting_is_stale \
	"mutant: a flush goes past a push in progress" push.pml \
	"(hier>=need)" -DMUTANT_NO_ADOPT
reject mutant_flush_counting_pushes_after_its_pop_is_stale \
	"mutant: a flush loads pushing after its pop" push.pml \
	"(hier>=need)" -DMUTANT_COUNT_AFTER_POP
finish
