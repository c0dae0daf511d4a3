#!/bin/sh
# Build jemalloc 5.3.0 from Debian's source tarball, once, into a cache
# outside the clone, and print the directory it is installed in.
#
#   build-jemalloc.sh debug     --enable-debug: jemalloc's assertions and
#                               its lock-order checker (witness)
#   build-jemalloc.sh prefixed  --with-jemalloc-prefix=je_: every symbol
#                               prefixed, as services that bundle their
#                               own jemalloc build it
#
# The tarball (Debian's jemalloc_5.3.0.orig.tar.bz2) is downloaded with
# python3 and checked against its SHA-256 before it is unpacked; the build
# goes to $TALLY_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/tally)
# /jemalloc-5.3.0-VARIANT, which later runs reuse.  Nothing is installed
# system-wide.  Exit 1, with the reason on standard error, when the source
# cannot be fetched or built.
set -eu
variant=${1:-}
case "$variant" in
debug) flags="--enable-debug" ;;
prefixed) flags="--with-jemalloc-prefix=je_" ;;
*) echo "usage: $0 debug|prefixed" >&2; exit 2 ;;
esac
version=5.3.0
sha256=2db82d1e7119df3e71b7640219b6dfe84789bc0537983c3b7ac4f7189aecfeaa
url=https://deb.debian.org/debian/pool/main/j/jemalloc/jemalloc_$version.orig.tar.bz2
cache=${TALLY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tally}
dest=$cache/jemalloc-$version-$variant
if [ -f "$dest/.built" ]; then
	echo "$dest"
	exit 0
fi
mkdir -p "$cache"
tarball=$cache/jemalloc_$version.orig.tar.bz2
if ! echo "$sha256  $tarball" | sha256sum -c --status 2>/dev/null; then
	echo "build-jemalloc: downloading $url" >&2
	python3 - "$url" "$tarball.part" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=120) as r, \
		open(sys.argv[2], "wb") as f:
	f.write(r.read())
PY
	mv "$tarball.part" "$tarball"
	if ! echo "$sha256  $tarball" | sha256sum -c --status; then
		echo "build-jemalloc: $tarball: wrong SHA-256" >&2
		rm -f "$tarball"
		exit 1
	fi
fi
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -xjf "$tarball" -C "$work"
echo "build-jemalloc: building jemalloc $version ($variant) into $dest" >&2
(
	cd "$work/jemalloc-$version"
	# shellcheck disable=SC2086 # $flags: one option
	./configure --prefix="$dest" --disable-doc $flags \
		> "$work/log" 2>&1 &&
	make -j2 build_lib_shared > "$work/log" 2>&1 &&
	make install_include install_lib_shared > "$work/log" 2>&1
) || { tail -20 "$work/log" >&2; exit 1; }
touch "$dest/.built"
echo "$dest"
