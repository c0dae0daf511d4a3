#!/bin/sh
# The API reference against the headers: docs/API.md is exactly what
# scripts/gen-api-docs.sh makes of the current headers (run `make docs`
# after editing a header comment), and every public function - what
# scripts/gen-exports.sh lists plus the headers' static inline functions -
# has a kernel-doc comment, with a "Context:" line stating its thread and
# signal safety.
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! sh scripts/gen-api-docs.sh >"$tmp/API.md" 2>"$tmp/log"; then
	fail api_md_is_what_the_generator_makes_of_the_headers "$tmp/log"
elif ! diff -u docs/API.md "$tmp/API.md" >"$tmp/diff" 2>&1; then
	{
		echo "docs/API.md is stale: run make docs"
		head -n 40 "$tmp/diff"
	} >"$tmp/log"
	fail api_md_is_what_the_generator_makes_of_the_headers "$tmp/log"
else
	pass api_md_is_what_the_generator_makes_of_the_headers
fi

# The functions: exported names that the headers declare with "(" (not the
# variables), and the static inline ones, which export nothing.
if ! sh scripts/gen-exports.sh list >"$tmp/exports" 2>"$tmp/log"; then
	fail public_functions_are_listed "$tmp/log"
fi
while read -r name; do
	grep -Eq "(^|[^A-Za-z0-9_])$name ?\(" include/tally/*.h &&
		echo "$name"
done <"$tmp/exports" >"$tmp/functions"
sed -n 's/^static inline[^(]*[^A-Za-z0-9_(]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' \
	include/tally/*.h >>"$tmp/functions"
LC_ALL=C sort -u "$tmp/functions" -o "$tmp/functions"

# From the generated reference: for each "### `NAME()`" section whose
# declaration declares NAME, whether it has a Context paragraph.
awk '
	/^### `/ {
		fn = $0
		sub(/^### `/, "", fn)
		sub(/`$/, "", fn)
		if (fn !~ /\(\)$/)
			fn = ""
		sub(/\(\)$/, "", fn)
		next
	}
	/^```c$/ { code = 1; next }
	/^```$/ { code = 0; next }
	code && fn != "" && index($0, fn "(") { print "doc " fn }
	fn != "" && /^\*\*Context:\*\* ./ { print "ctx " fn }
' "$tmp/API.md" >"$tmp/documented"

: >"$tmp/nodoc"
: >"$tmp/noctx"
while read -r name; do
	if ! grep -qx "doc $name" "$tmp/documented"; then
		echo "$name: no kernel-doc comment" >>"$tmp/nodoc"
	elif ! grep -qx "ctx $name" "$tmp/documented"; then
		echo "$name: no Context: line in its comment" >>"$tmp/noctx"
	fi
done <"$tmp/functions"
count=$(wc -l <"$tmp/functions")
if [ "$count" -lt 1 ]; then
	echo "no public function found" >>"$tmp/nodoc"
fi
if [ -s "$tmp/nodoc" ]; then
	fail every_public_function_has_a_kernel_doc_comment "$tmp/nodoc"
else
	pass every_public_function_has_a_kernel_doc_comment
fi
if [ -s "$tmp/noctx" ]; then
	fail every_public_function_comment_states_its_context "$tmp/noctx"
else
	pass every_public_function_comment_states_its_context
fi
finish
