# Sourced by the check scripts: the test harness's output format in sh
# ("PASS name", "FAIL name" with indented detail, last "N passed, N
# failed"), so that scripts/run-tests.sh counts them like a test binary.

passed=0
failed=0

# The version of include/tally/version.h ("0.1.0"), as the Makefile reads it.
header_version() {
	awk '/^#define TALLY_VERSION_(MAJOR|MINOR|PATCH) / {
		v = v s $3; s = "." } END { print v }' include/tally/version.h
}

pass() {
	echo "PASS $1"
	passed=$((passed + 1))
}

# fail NAME [DETAIL-FILE]
fail() {
	echo "FAIL $1"
	[ -n "${2:-}" ] && sed 's/^/  /' "$2"
	failed=$((failed + 1))
}

finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# built_jemalloc VARIANT: jemalloc 5.3.0 built as VARIANT (debug or
# prefixed, scripts/build-jemalloc.sh, cached outside the clone); its
# installation directory in $je_dir.  If it cannot be built, the test
# VARIANT_jemalloc_is_built fails with the reason and the script ends.
# Needs $tmp.
built_jemalloc() {
	if ! je_dir=$(sh scripts/build-jemalloc.sh "$1" 2> "$tmp/why"); then
		fail "$1_jemalloc_is_built" "$tmp/why"
		finish
		exit 1
	fi
}

# matches EXPECTED ACTUAL: ACTUAL has EXPECTED's lines, where "<int>" in
# EXPECTED stands for any decimal integer.  Prints the first difference.
matches() {
	awk -v exp_file="$1" '
		function fits(e, a,    i) {
			while ((i = index(e, "<int>")) > 0) {
				if (substr(a, 1, i - 1) != substr(e, 1, i - 1))
					return 0
				a = substr(a, i)
				if (!match(a, /^-?[0-9]+/))
					return 0
				a = substr(a, RLENGTH + 1)
				e = substr(e, i + 5)
			}
			return e == a
		}
		{
			if ((getline e < exp_file) <= 0) {
				printf "line %d: unexpected \"%s\"\n", NR, $0
				exit 1
			}
			if (!fits(e, $0)) {
				printf "line %d: expected \"%s\"\n", NR, e
				printf "line %d: got      \"%s\"\n", NR, $0
				exit 1
			}
		}
		END {
			if ((getline e < exp_file) > 0) {
				printf "line %d: missing \"%s\"\n", NR + 1, e
				exit 1
			}
		}' "$2"
}

# check_examples DIR: every examples/NAME.c was built as DIR/NAME; each
# must exit 0 printing examples/NAME.expected, and, with the CPUs of the
# system unreadable (TALLY_SYSFS_ROOT pointing nowhere), either still do
# that (it needs no system CPU) or exit 1 naming the failed call and ENODEV:
# no crash, no garbage printed.
check_examples() {
	ex_tmp=$(mktemp -d)
	for src in examples/*.c; do
		name=${src#examples/}
		name=${name%.c}
		bin=$1/$name
		if [ ! -x "$bin" ]; then
			echo "$bin is missing" > "$ex_tmp/why"
			fail "example_${name}_prints_its_expected_output" \
				"$ex_tmp/why"
			continue
		fi
		env -u TALLY_SYSFS_ROOT "$bin" > "$ex_tmp/out" 2>&1
		rc=$?
		if [ "$rc" -ne 0 ]; then
			echo "exit status $rc" >> "$ex_tmp/out"
			fail "example_${name}_prints_its_expected_output" \
				"$ex_tmp/out"
		elif matches "examples/$name.expected" "$ex_tmp/out" \
			> "$ex_tmp/why"; then
			pass "example_${name}_prints_its_expected_output"
		else
			cat "$ex_tmp/out" >> "$ex_tmp/why"
			fail "example_${name}_prints_its_expected_output" \
				"$ex_tmp/why"
		fi

		TALLY_SYSFS_ROOT=/nonexistent "$bin" > "$ex_tmp/out" \
			2> "$ex_tmp/err"
		rc=$?
		if [ "$rc" -eq 0 ] &&
		   matches "examples/$name.expected" "$ex_tmp/out" >/dev/null &&
		   [ ! -s "$ex_tmp/err" ]; then
			pass "example_${name}_without_system_cpus_needs_none"
		elif [ "$rc" -eq 1 ] &&
		     grep -q 'failed: No such device' "$ex_tmp/err"; then
			pass "example_${name}_without_system_cpus_fails_cleanly"
		else
			{
				echo "exit status $rc, stdout:"
				cat "$ex_tmp/out"
				echo "stderr:"
				cat "$ex_tmp/err"
			} > "$ex_tmp/why"
			fail "example_${name}_without_system_cpus_fails_cleanly" \
				"$ex_tmp/why"
		fi
	done
	rm -rf "$ex_tmp"
}
