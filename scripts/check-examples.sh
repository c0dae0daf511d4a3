#!/bin/sh
# Run the examples built in DIR (default build/examples) and check what
# they print against examples/*.expected; see check_examples in testlib.sh.
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
dir=$(cd "${1:-build/examples}" 2>/dev/null && pwd) || {
	echo "${1:-build/examples}: no such directory: run make examples" >&2
	exit 1
}
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
check_examples "$dir"
finish
