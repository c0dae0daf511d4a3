#!/bin/sh
# Make sure the tools a target needs are installed.  On a fresh Debian
# machine, as root, install what is missing with apt-get; otherwise say
# exactly what to install.  Usage: ensure-deps.sh build|test|demo
set -e
need=""
have_cc() { command -v "${CC:-gcc}" >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; }
# Compile and link a trivial program with the given flags.
links() {
	tmp=$(mktemp -d)
	printf 'int main(void){return 0;}\n' > "$tmp/t.c"
	if gcc $1 "$tmp/t.c" -o "$tmp/t" >/dev/null 2>&1; then r=0; else r=1; fi
	rm -rf "$tmp"
	return $r
}
have_cc || need="$need gcc libc6-dev"
[ -f /usr/include/jemalloc/jemalloc.h ] || need="$need libjemalloc-dev"
command -v make >/dev/null 2>&1 || need="$need make"
if [ "$1" = test ] && have_cc; then
	links "-fsanitize=address,undefined" || need="$need libasan8 libubsan1"
	links "-fsanitize=thread" || need="$need libtsan2"
fi
# The export and install checks of `make test`: nm, readelf, pkg-config.
if [ "$1" = test ]; then
	command -v nm >/dev/null 2>&1 && command -v readelf >/dev/null 2>&1 ||
		need="$need binutils"
	command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
fi
# make demo draws its plots with gnuplot; make test checks tally plot.
if [ "$1" = demo ] || [ "$1" = test ]; then
	command -v gnuplot >/dev/null 2>&1 || need="$need gnuplot-nox"
fi
# The oracles of the export tests: promtool for the Prometheus format,
# Debian's python3 with its prometheus_client for OpenMetrics.
if [ "$1" = test ]; then
	command -v promtool >/dev/null 2>&1 || need="$need prometheus"
	/usr/bin/python3 -c 'import prometheus_client.openmetrics.parser' \
		>/dev/null 2>&1 || need="$need python3 python3-prometheus-client"
fi
[ -z "$need" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "tally: installing missing packages:$need"
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >/dev/null
	exit 0
fi
echo "tally: missing packages:$need" >&2
echo "tally: install them with: sudo apt-get install -y$need" >&2
exit 1
