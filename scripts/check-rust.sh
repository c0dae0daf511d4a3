#!/bin/sh
# The Rust bindings (bindings/rust: tally-sys, tally, tally-datafusion):
# rustfmt and clippy find nothing, every test of `cargo test` passes (one
# PASS or FAIL line each), and the examples of docs/rust.md
# (tally/examples/tenant.rs, tally-datafusion/examples/per_query.rs)
# print their expected output, which docs/rust.md shows with them as
# they are.
#
#   check-rust.sh          run the checks (prints like a test binary)
#   check-rust.sh --build  only compile everything the checks run (make
#                          test calls it before the runner, so that the
#                          first build of DataFusion, 15 to 30 minutes on
#                          2 CPUs, is not counted against a test's timeout)
#
# The Cargo target directory is $CARGO_TARGET_DIR, by default
# ~/.cache/tally/cargo-target, outside the clone: a rerun or a new clone
# reuses the compiled dependencies.  Cargo.lock pins every version
# (--locked).  Without cargo, the step says what it skips and checks
# only docs/rust.md.
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The examples of docs/rust.md, which shows each with its output: one
# of its ```rust blocks is NAME.rs, one of its ```output blocks
# NAME.expected (checked without cargo; not a step of --build).
examples="tally/examples/tenant tally-datafusion/examples/per_query"
shows() {
	awk -v kind="$1" -v want="$2" '
		BEGIN { while ((getline l < want) > 0) w = w l "\n" }
		!inside && $0 == "```" kind { inside = 1; b = ""; next }
		inside && $0 == "```" { inside = 0; if (b == w) found = 1; next }
		inside { b = b $0 "\n" }
		END { exit !found }' docs/rust.md
}
if [ "${1:-}" != --build ]; then
	for ex in $examples; do
		name=${ex##*/}
		: >"$tmp/log"
		shows rust "bindings/rust/$ex.rs" ||
			echo "docs/rust.md has no \`\`\`rust block equal to" \
				"bindings/rust/$ex.rs" >>"$tmp/log"
		shows output "bindings/rust/$ex.expected" ||
			echo "docs/rust.md has no \`\`\`output block equal to" \
				"bindings/rust/$ex.expected" >>"$tmp/log"
		if [ -s "$tmp/log" ]; then
			fail "rust_md_shows_the_${name}_example_as_it_is" \
				"$tmp/log"
		else
			pass "rust_md_shows_the_${name}_example_as_it_is"
		fi
	done
fi

if ! command -v cargo >/dev/null 2>&1; then
	echo "SKIP rust: no cargo: skipping the Rust bindings (bindings/rust:" \
		"rustfmt, clippy, cargo test of tally-sys, tally and" \
		"tally-datafusion, the examples of docs/rust.md); install a" \
		"Rust toolchain (rustup) to run them"
	finish
	exit
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tally/cargo-target}"
ws=bindings/rust
cargo="cargo --locked"

if [ "${1:-}" = --build ]; then
	echo "rust: building bindings/rust into $CARGO_TARGET_DIR"
	(cd "$ws" && $cargo test --release --workspace --no-run &&
		$cargo build --release --examples &&
		$cargo clippy --release --workspace --all-targets -q) ||
		exit 1
	exit 0
fi

if (cd "$ws" && cargo fmt --all -- --check) >"$tmp/log" 2>&1; then
	pass rust_code_is_formatted
else
	fail rust_code_is_formatted "$tmp/log"
fi

if (cd "$ws" && $cargo clippy --release --workspace --all-targets -- \
	-D warnings) >"$tmp/log" 2>&1; then
	pass clippy_finds_nothing
else
	fail clippy_finds_nothing "$tmp/log"
fi

# One line per test: "test NAME ... ok" or "... FAILED"; the failures'
# output follows in the log.
(cd "$ws" && $cargo test --release --workspace -- --test-threads=2) \
	>"$tmp/test" 2>&1
rc=$?
grep -E '^test .* \.\.\. (ok|FAILED|ignored)$' "$tmp/test" > "$tmp/lines"
while read -r _ name _ result; do
	case $result in
	ok) pass "cargo_test $name" ;;
	FAILED)
		awk -v n="---- $name " 'index($0, n) == 1 { p = 1 }
			p && /^$/ && seen++ > 0 { exit } p' "$tmp/test" \
			> "$tmp/why"
		fail "cargo_test $name" "$tmp/why"
		;;
	esac
done <"$tmp/lines"
if [ "$rc" -ne 0 ] && ! grep -q ' FAILED$' "$tmp/lines"; then
	tail -n 30 "$tmp/test" > "$tmp/why"
	fail cargo_test_runs "$tmp/why"
fi

for ex in $examples; do
	name=${ex##*/}
	: >"$tmp/why"
	if (cd "$ws" && $cargo run --release -q --example "$name") \
		>"$tmp/out" 2>"$tmp/err" &&
		matches "$ws/$ex.expected" "$tmp/out" >"$tmp/why" 2>&1; then
		pass "${name}_example_prints_its_expected_output"
	else
		cat "$tmp/err" >>"$tmp/why"
		fail "${name}_example_prints_its_expected_output" "$tmp/why"
	fi
done

finish
