#!/bin/sh
# Make sure the tools a target needs are there, and install no more than
# that.  Usage: ensure-deps.sh build|test|demo [TOOLS]
#
# System-wide, Debian packages that ship no service: the compiler, make,
# the sanitizer runtimes, g++ (the C++ test of the headers), clang-14
# with libclang-rt-14-dev (the fuzzers, and clang++-14 for the headers),
# binutils, pkg-config, gnuplot-nox, Debian's
# python3 with python3-prometheus-client (the OpenMetrics parser of the
# tests), libmicrohttpd-dev (the optional HTTP endpoint), bzip2 (to
# unpack jemalloc's source for its debug build) and spin (the
# model checker of formal/).  As root, what is missing is printed by name,
# then installed with `apt-get install -y --no-install-recommends`; as
# another user the script names what is missing, gives the command that
# installs it and exits 1.
#
# Tools the tests need that come with a service are never installed:
# promtool and the Prometheus server are taken from the Debian package
# prometheus, downloaded (`apt-get download`, which needs no root once the
# package lists are there) and unpacked (`dpkg -x`) into TOOLS/prometheus
# (TOOLS: default build/tools), where the tests run them from:
# TOOLS/prometheus/usr/bin/promtool and TOOLS/prometheus/usr/bin/prometheus.
# Its maintainer scripts never run, nothing is enabled or started.
#
# TALLY_PYTHON names the interpreter probed for prometheus_client (default
# /usr/bin/python3, the one the tests run).
set -e
cd "$(dirname "$0")/.."
target=$1
tools=${2:-build/tools}
python=${TALLY_PYTHON:-/usr/bin/python3}
case "$target" in
build|test|demo) ;;
*) echo "usage: $0 build|test|demo [TOOLS]" >&2; exit 2 ;;
esac

need=""
have() { command -v "$1" >/dev/null 2>&1; }
have_cc() { have "${CC:-gcc}" || have gcc; }
# Compile and link a small program (standard input) with flags ($1) and
# a compiler ($2, default gcc).
links() {
	tmp=$(mktemp -d)
	cat > "$tmp/t.c"
	# $1: word splitting wanted.
	if "${2:-gcc}" $1 "$tmp/t.c" -o "$tmp/t" >/dev/null 2>&1; then r=0
	else r=1; fi
	rm -rf "$tmp"
	return $r
}
main_c='int main(void) { return 0; }'

# Every target: the compiler and make.
have_cc || need="$need gcc libc6-dev"
have make || need="$need make"

if [ "$target" = test ]; then
	# The ASan+UBSan and TSan builds.
	if ! have_cc || ! echo "$main_c" | links "-fsanitize=address,undefined"
	then
		need="$need libasan8 libubsan1"
	fi
	if ! have_cc || ! echo "$main_c" | links "-fsanitize=thread"; then
		need="$need libtsan2"
	fi
	# The headers from C++ (tests/cxx, scripts/check-cxx.sh).
	have "${CXX:-g++}" || need="$need g++"
	# The export and install checks: nm, readelf, pkg-config.
	have nm && have readelf || need="$need binutils"
	have pkg-config || need="$need pkg-config"
	# The HTTP endpoint (libtally_http), built and tested by make test.
	if ! have_cc || ! printf '#include <microhttpd.h>\n%s\n' "$main_c" |
		links "-lmicrohttpd"; then
		need="$need libmicrohttpd-dev"
	fi
	# The fuzzers (tests/fuzz): clang-14 and its libFuzzer runtime.
	if ! have clang-14 || ! echo 'int LLVMFuzzerTestOneInput(const char *d,
		unsigned long n) { (void)d; (void)n; return 0; }' |
		links "-fsanitize=fuzzer,address,undefined" clang-14; then
		need="$need clang-14 libclang-rt-14-dev"
	fi
	# The OpenMetrics oracle of the export tests.
	[ -x "$python" ] || need="$need python3"
	"$python" -c 'import prometheus_client.openmetrics.parser' \
		>/dev/null 2>&1 || need="$need python3-prometheus-client"
	# The model checker of formal/'s protocol models (its pan programs
	# are built with the compiler above).
	have spin || need="$need spin"
	# The debug jemalloc's source (scripts/build-jemalloc.sh).
	have bzip2 || need="$need bzip2"
fi
# make demo draws its plots with gnuplot; make test checks tally plot.
if [ "$target" = demo ] || [ "$target" = test ]; then
	have gnuplot || need="$need gnuplot-nox"
fi
# The jemalloc integration (libtally_jemalloc, tally run), built and
# tested by make test, measured by make demo; packages added here go into the allowed list of
# scripts/check-deps.sh too.
if [ "$target" = test ] || [ "$target" = demo ]; then
	if ! have_cc || ! printf '#include <jemalloc/jemalloc.h>\n%s\n' \
		"$main_c" | links "-ljemalloc"; then
		need="$need libjemalloc-dev"
	fi
fi

root=false
if [ "$(id -u)" = 0 ] && have apt-get; then
	root=true
fi
updated=false
apt_update() {
	$updated && return 0
	updated=true
	echo "tally: apt-get update (the package lists)"
	apt-get update -q
}

if [ -n "$need" ]; then
	if ! $root; then
		echo "tally: missing packages:$need" >&2
		echo "tally: install them with: sudo apt-get install -y" \
			"--no-install-recommends$need" >&2
		exit 1
	fi
	echo "tally: installing system-wide:$need"
	apt_update
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends $need
fi

[ "$target" = test ] || exit 0

# promtool and the Prometheus server, unpacked privately.
prom=$tools/prometheus
tools_work() {
	"$prom/usr/bin/promtool" --version >/dev/null 2>&1 &&
		"$prom/usr/bin/prometheus" --version >/dev/null 2>&1
}
tools_work && exit 0
dl=$tools/download
download() {
	rm -rf "$dl"
	mkdir -p "$dl"
	# As root apt would drop to its _apt user, who may not write here.
	if $root; then
		set -- -o APT::Sandbox::User=root
	fi
	(cd "$dl" && apt-get download -q "$@" prometheus)
}
echo "tally: unpacking the Debian package prometheus (promtool and the" \
	"server, for the tests) into $prom: not installed, no service"
if ! have apt-get || ! have dpkg; then
	echo "tally: apt-get and dpkg are needed to unpack the Debian package" \
		"prometheus into $prom" >&2
	exit 1
fi
if ! download && ! { $root && apt_update && download; }; then
	rm -rf "$dl"
	echo "tally: cannot download the Debian package prometheus: run" \
		"'sudo apt-get update', then make test again" >&2
	exit 1
fi
rm -rf "$prom.tmp"
for deb in "$dl"/prometheus_*.deb; do
	dpkg -x "$deb" "$prom.tmp"
done
rm -rf "$prom" "$dl"
mv "$prom.tmp" "$prom"
if ! tools_work; then
	echo "tally: $prom/usr/bin/promtool or prometheus does not run" >&2
	exit 1
fi
