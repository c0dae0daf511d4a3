#!/bin/sh
# Check the shared libraries of BUILD (default build, made with HTTP=yes
# and JEMALLOC=yes) as a user gets them:
#   - each of libtally, libtally_http (the HTTP endpoint) and
#     libtally_jemalloc (the jemalloc integration) is a real file
#     LIB.so.VERSION with the soname LIB.so.0, and the build's symlinks
#     LIB.so -> LIB.so.0 -> LIB.so.VERSION lead to it;
#   - libtally exports exactly what include/tally/ declares but
#     export_http.h and the jemalloc integration's names
#     (scripts/gen-exports.sh list tally), all under version node
#     TALLY_0.1, and its exported variables are the extern tally_
#     variables the compiler sees in the headers' debug information (a
#     second opinion on gen-exports.sh's parsing); libtally_http exports
#     exactly what export_http.h declares, under TALLY_HTTP_0.1, and
#     libtally_jemalloc what jemalloc.h declares, under
#     TALLY_JEMALLOC_0.1;
#   - libtally.a defines no global symbol but tally_ ones (its internals
#     are local to its one object);
#   - libtally needs no libmicrohttpd, libtally_http needs it and
#     libtally.so.0, libtally_jemalloc needs libjemalloc and libtally.so.0;
#   - `make install` into a staging DESTDIR lays out the libraries, their
#     symlinks, the headers, the pkg-config files named as the libraries
#     (tally.pc, tally_http.pc, tally_jemalloc.pc, no other) and the tool;
#     LIBDIR moves the libraries and the .pc files follow; `make
#     uninstall` removes every file and tally's header directories,
#     without an error message;
#   - every example compiles (-std=c11 -Wall -Wextra -Werror) from the
#     installed headers with `pkg-config --cflags --libs tally` (tally_http
#     for examples/http_*.c, tally_jemalloc for those of the jemalloc
#     integration), links against the installed shared libraries (no copy
#     of tally inside), and prints what it prints when linked statically
#     (check_examples in testlib.sh).
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh

build=${1:-build}
cc=${CC:-gcc}
version=$(header_version)
so=$build/libtally.so.$version
http_so=$build/libtally_http.so.$version
je_so=$build/libtally_jemalloc.so.$version
prefix=/opt/tally
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
why=$tmp/why

# differ A B WHAT-A WHAT-B: the lines only A has, then those only B has.
differ() {
	LC_ALL=C comm -23 "$1" "$2" | sed "s/^/$3 only: /"
	LC_ALL=C comm -13 "$1" "$2" | sed "s/^/$4 only: /"
}

for f in "$so" "$http_so" "$je_so"; do
	if [ ! -f "$f" ]; then
		echo "$f is missing: run make lib (HTTP=yes JEMALLOC=yes)" \
			> "$why"
		fail shared_libraries_are_built "$why"
		finish
		exit 1
	fi
done

# links DIR LIB: the two symlinks of DIR lead to LIB's real file.
links() {
	[ "$(readlink "$1/$2.so.0")" = "$2.so.$version" ] &&
	[ "$(readlink "$1/$2.so")" = "$2.so.0" ] &&
	[ -f "$1/$2.so.$version" ] && [ ! -L "$1/$2.so.$version" ]
}

# check_library LIB NODE [NAME]: soname, symlinks, exports and their
# version; NAME is scripts/gen-exports.sh's for LIB (default LIB without
# "lib").
check_library() {
	lib=$1
	node=$2
	exports=${3:-${lib#lib}}
	file=$build/$lib.so.$version
	soname=$(readelf -d "$file" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	if [ "$soname" = "$lib.so.0" ]; then
		pass "${lib}_soname_is_${lib}_so_0"
	else
		echo "soname: '$soname'" > "$why"
		fail "${lib}_soname_is_${lib}_so_0" "$why"
	fi
	if links "$build" "$lib"; then
		pass "${lib}_build_symlinks_lead_to_the_shared_library"
	else
		ls -l "$build/$lib".so* > "$why" 2>&1
		fail "${lib}_build_symlinks_lead_to_the_shared_library" "$why"
	fi
	# Exported: every defined dynamic symbol but the version node.
	nm -D --defined-only "$file" | awk '$2 != "A" { print $2, $3 }' \
		> "$tmp/dyn"
	sed 's/^[^ ]* //; s/@.*//' "$tmp/dyn" | LC_ALL=C sort -u \
		> "$tmp/exported"
	test=${lib}_exports_are_exactly_its_header_declarations
	if ! CC="$cc" sh scripts/gen-exports.sh list "$exports" \
		> "$tmp/declared"; then
		echo "scripts/gen-exports.sh list $exports failed" > "$why"
		fail "$test" "$why"
	elif [ ! -s "$tmp/declared" ]; then
		echo "scripts/gen-exports.sh found no declaration" > "$why"
		fail "$test" "$why"
	elif cmp -s "$tmp/declared" "$tmp/exported"; then
		pass "$test"
	else
		differ "$tmp/declared" "$tmp/exported" declared exported \
			> "$why"
		fail "$test" "$why"
	fi
	if awk -v node="$node" '
		substr($2, length($2) - length(node) - 1) != "@@" node {
			bad = 1
			print "not under " node ": " $2
		}
		END { exit bad }' "$tmp/dyn" > "$why"; then
		pass "${lib}_exports_have_version_$(echo "$node" | tr . _)"
	else
		fail "${lib}_exports_have_version_$(echo "$node" | tr . _)" \
			"$why"
	fi
}
check_library libtally_http TALLY_HTTP_0.1
check_library libtally_jemalloc TALLY_JEMALLOC_0.1 jemalloc
# Last: the variables' check below reads libtally's $tmp/dyn.
check_library libtally TALLY_0.1

# A program linking libtally.a statically sees only tally_ names: the
# library's internals are local to its one object.
nm -g --defined-only "$build/libtally.a" 2>/dev/null |
	awk 'NF == 3 && $3 !~ /^tally_/ { print $3 }' > "$tmp/static_other"
if [ -s "$build/libtally.a" ] && [ ! -s "$tmp/static_other" ] &&
   nm -g --defined-only "$build/libtally.a" | grep -q ' T tally_domain_system$'
then
	pass static_library_defines_only_tally_symbols
else
	fail static_library_defines_only_tally_symbols "$tmp/static_other"
fi

needed() {
	readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
}
if needed "$so" | grep -q microhttpd; then
	needed "$so" > "$why"
	fail libtally_needs_no_libmicrohttpd "$why"
else
	pass libtally_needs_no_libmicrohttpd
fi
if needed "$http_so" | grep -qx 'libmicrohttpd\.so\.[0-9]*' &&
   needed "$http_so" | grep -qx libtally.so.0; then
	pass libtally_http_needs_libmicrohttpd_and_libtally
else
	needed "$http_so" > "$why"
	fail libtally_http_needs_libmicrohttpd_and_libtally "$why"
fi

if needed "$je_so" | grep -qx 'libjemalloc\.so\.[0-9]*' &&
   needed "$je_so" | grep -qx libtally.so.0; then
	pass libtally_jemalloc_needs_libjemalloc_and_libtally
else
	needed "$je_so" > "$why"
	fail libtally_jemalloc_needs_libjemalloc_and_libtally "$why"
fi

# Variables: exported data objects vs the external variables gcc describes
# in the debug information of a file including every public header.
awk '$1 ~ /^[BDGRSV]$/ { sub(/@.*/, "", $2); print $2 }' "$tmp/dyn" |
	LC_ALL=C sort -u > "$tmp/objects"
for h in include/tally/*.h; do
	echo "#include <tally/${h#include/tally/}>"
done > "$tmp/all.c"
test=exported_variables_are_the_extern_variables_of_the_headers
if $cc -std=gnu11 -Iinclude -g -fno-eliminate-unused-debug-symbols \
	-c "$tmp/all.c" -o "$tmp/all.o" 2> "$why"; then
	readelf --debug-dump=info "$tmp/all.o" | awk '
		function emit() {
			if (var && ext && name ~ /^tally_/)
				print name
		}
		/DW_TAG_/ {
			emit()
			var = /DW_TAG_variable/
			ext = 0
			name = ""
		}
		var && /DW_AT_name/ { name = $NF }
		var && /DW_AT_external/ { ext = 1 }
		END { emit() }' | LC_ALL=C sort -u > "$tmp/dwarf"
	if cmp -s "$tmp/dwarf" "$tmp/objects"; then
		pass "$test"
	else
		differ "$tmp/dwarf" "$tmp/objects" declared exported > "$why"
		fail "$test" "$why"
	fi
else
	fail "$test" "$why"
fi

# pcs DIR LIBDIR: DIR holds the three pkg-config files, named as the
# libraries, and no other, each with $prefix and LIBDIR.
pcs() {
	[ "$(ls "$1" | tr '\n' ' ')" = \
	  "tally.pc tally_http.pc tally_jemalloc.pc " ] &&
	for pc in tally tally_http tally_jemalloc; do
		grep -qx "prefix=$prefix" "$1/$pc.pc" &&
		grep -qx "libdir=$2" "$1/$pc.pc" || return 1
	done
}

# Install into a staging directory, as a packager would.
dest=$tmp/dest
root=$dest$prefix
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory \
	install BUILD="$build" HTTP=yes JEMALLOC=yes DESTDIR="$dest" \
	PREFIX="$prefix" > "$why" 2>&1 &&
   links "$root/lib" libtally && [ -f "$root/lib/libtally.a" ] &&
   links "$root/lib" libtally_http && [ -f "$root/lib/libtally_http.a" ] &&
   links "$root/lib" libtally_jemalloc &&
   [ -f "$root/lib/libtally_jemalloc.a" ] &&
   diff -r include/tally "$root/include/tally" >> "$why" 2>&1 &&
   pcs "$root/lib/pkgconfig" "$prefix/lib"; then
	pass install_stages_library_symlinks_headers_and_pkgconfig
else
	find "$dest" >> "$why" 2>&1
	fail install_stages_library_symlinks_headers_and_pkgconfig "$why"
fi

if [ "$("$root/bin/tally" --version 2>&1)" = "tally $version" ]; then
	pass install_puts_the_tool_in_bindir
else
	ls -l "$root/bin" > "$why" 2>&1
	fail install_puts_the_tool_in_bindir "$why"
fi

# LIBDIR apart from PREFIX, then uninstall with the same variables.
dest2=$tmp/dest2
mk() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory \
		"$1" BUILD="$build" HTTP=yes JEMALLOC=yes DESTDIR="$dest2" \
		PREFIX="$prefix" LIBDIR="$prefix/lib64" > "$why" 2>&1
}
if mk install && links "$dest2$prefix/lib64" libtally &&
   links "$dest2$prefix/lib64" libtally_http &&
   links "$dest2$prefix/lib64" libtally_jemalloc &&
   [ ! -e "$dest2$prefix/lib" ] && pcs "$dest2$prefix/lib64/pkgconfig" "$prefix/lib64"
then
	pass install_honours_libdir
else
	find "$dest2" >> "$why" 2>&1
	fail install_honours_libdir "$why"
fi
# Something else in the prefix: uninstall leaves it, and its directory;
# it removes every file it installed and the directories of tally's
# headers, says no error (make prints "Error 1 (ignored)" even for an
# ignored one), and leaves the shared directories.
echo other > "$dest2$prefix/bin/other"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory uninstall \
	BUILD="$build" DESTDIR="$dest2" PREFIX="$prefix" LIBDIR="$prefix/lib64" \
	> "$why" 2>&1
rc=$?
if [ $rc -eq 0 ] && ! grep -q 'Error\|ignored\|rmdir: ' "$why" &&
   [ "$(find "$dest2" ! -type d 2>/dev/null)" = "$dest2$prefix/bin/other" ]
then
	pass uninstall_removes_every_installed_file_without_an_error
else
	{ echo "exit $rc"; find "$dest2" ! -type d; } >> "$why" 2>&1
	fail uninstall_removes_every_installed_file_without_an_error "$why"
fi
if [ ! -e "$dest2$prefix/include/tally" ] && [ -d "$dest2$prefix/include" ] &&
   [ -d "$dest2$prefix/lib64/pkgconfig" ] && [ -d "$dest2$prefix/bin" ]; then
	pass uninstall_removes_its_own_directories_only
else
	find "$dest2" > "$why" 2>&1
	fail uninstall_removes_its_own_directories_only "$why"
fi

# pkg-config as a user runs it, pointed at the staged tree only.
PKG_CONFIG_LIBDIR=$root/lib/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$dest
export PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
unset PKG_CONFIG_PATH
if [ "$(pkg-config --modversion tally 2>&1)" = "$version" ] &&
   flags=$(pkg-config --cflags --libs tally 2> "$why") &&
   [ "$(pkg-config --modversion tally_http 2>&1)" = "$version" ] &&
   http_flags=$(pkg-config --cflags --libs tally_http 2>> "$why") &&
   [ "$(pkg-config --modversion tally_jemalloc 2>&1)" = "$version" ] &&
   je_flags=$(pkg-config --cflags --libs tally_jemalloc 2>> "$why"); then
	pass pkg_config_finds_the_installed_tally_tally_http_and_tally_jemalloc
else
	pkg-config --modversion tally tally_http tally_jemalloc >> "$why" 2>&1
	fail pkg_config_finds_the_installed_tally_tally_http_and_tally_jemalloc \
		"$why"
	finish
	exit 1
fi

mkdir "$tmp/bin"
for src in examples/*.c; do
	name=${src#examples/}
	name=${name%.c}
	bin=$tmp/bin/$name
	test=example_${name}_links_to_the_installed_shared_library
	ex_flags=$flags
	want=libtally.so.0
	case "$name" in
	http_*)
		ex_flags=$http_flags
		want="libtally_http.so.0 libtally.so.0"
		;;
	esac
	# The jemalloc integration's example links its library too.
	if grep -q '<tally/jemalloc.h>' "$src"; then
		ex_flags=$je_flags
		want="libtally_jemalloc.so.0 libtally.so.0"
	fi
	# $ex_flags: word splitting wanted.
	if ! $cc -std=c11 -O2 -Wall -Wextra -Werror -o "$bin" "$src" \
		$ex_flags > "$why" 2>&1; then
		fail "$test" "$why"
		continue
	fi
	needed=$(readelf -d "$bin" |
		sed -n 's/.*(NEEDED).*\[\(libtally.*\)\]/\1/p' |
		LC_ALL=C sort -r | tr '\n' ' ')
	needed=${needed% }
	# Code of tally in the program: linked statically.  (Its variables
	# may be there: copy relocations of the library's, versioned.)
	copied=$(nm -g --defined-only "$bin" |
		awk '$2 ~ /^[TW]$/ && $3 ~ /^tally_/ { print $3 }')
	loaded=$(LD_LIBRARY_PATH=$root/lib ldd "$bin" |
		awk '$1 == "libtally.so.0" { print $3 }')
	if [ "$needed" = "$want" ] && [ -z "$copied" ] &&
	   [ "$loaded" = "$root/lib/libtally.so.0" ]; then
		pass "$test"
	else
		{
			echo "NEEDED: $needed"
			echo "loaded: $loaded"
			echo "tally symbols defined in the program: $copied"
		} > "$why"
		fail "$test" "$why"
	fi
done
LD_LIBRARY_PATH=$root/lib
export LD_LIBRARY_PATH
check_examples "$tmp/bin"
finish
