#!/bin/sh
# scripts/ensure-deps.sh as a user meets it, with fakes of apt-get, id,
# systemctl, service and invoke-rc.d first in PATH (and no python3), each
# recording how it was called:
#   - on a fresh machine, as root, `test` prints every package by name
#     before installing it, installs with -y --no-install-recommends only
#     packages of a list known to ship no service (never prometheus nor
#     prometheus-node-exporter), enables and starts nothing, and unpacks
#     the package prometheus with apt-get download and dpkg -x into the
#     tools directory, where promtool and the server run from;
#   - on a fresh machine, as another user, it installs nothing, names
#     every missing package with the command that installs it, exits 1;
#   - on this machine (everything present), as another user, it calls no
#     apt-get at all and exits 0;
#   - a tools directory whose promtool does not run is unpacked again.
# Prints like a test binary: PASS/FAIL lines, last "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
why=$tmp/why

# What ensure-deps.sh may install system-wide: each package ships no
# systemd unit and no init script, and pulls in none that does.
allowed=" gcc libc6-dev make libasan8 libubsan1 libtsan2 binutils pkg-config "
allowed="$allowed gnuplot-nox python3 python3-prometheus-client "
allowed="$allowed libmicrohttpd-dev libjemalloc-dev spin "
allowed="$allowed clang-14 libclang-rt-14-dev g++ "

# A fresh machine: every program of the system but the compilers (gcc,
# g++, clang), make, binutils, pkg-config, gnuplot, spin, apt-get, id and
# the Prometheus tools.
sys=$tmp/sys
mkdir "$sys"
for f in /usr/bin/* /usr/sbin/*; do
	n=${f##*/}
	case "$n" in
	gcc*|*-gcc*|g++*|*-g++*|c++|cc|c89*|c99*|cpp*|*-cpp*|clang*|make|\
	gnuplot*|nm|*-nm|readelf|\
	*-readelf|*pkg-config*|pkgconf|apt-get|apt|id|promtool|prometheus*|\
	systemctl|service|invoke-rc.d|deb-systemd-*|python3*|spin) continue ;;
	esac
	[ -e "$sys/$n" ] || ln -s "$f" "$sys/$n"
done

# The fakes: each appends "NAME ARGS" to $log and says so on stdout (so
# the order against ensure-deps.sh's own lines shows).  apt-get download
# builds a package like Debian's prometheus: both programs and a unit.
fake=$tmp/fake
mkdir "$fake"
log=$tmp/log
for n in systemctl service invoke-rc.d deb-systemd-helper \
	deb-systemd-invoke; do
	printf '#!/bin/sh\necho "%s $*" >> "%s"\n' "$n" "$log" > "$fake/$n"
done
printf '#!/bin/sh\necho "id $*" >> "%s"\necho "$FAKE_UID"\n' "$log" \
	> "$fake/id"
cat > "$fake/apt-get" <<EOF
#!/bin/sh
echo "apt-get \$*" >> "$log"
echo "fake: apt-get \$*"
download=false
for a in "\$@"; do
	case "\$a" in
	download)
		[ "\$FAKE_APT_FAILS" = 1 ] && exit 100
		download=true
		;;
	-*|*=*) ;;
	*)
		\$download || continue
		p=\$(mktemp -d)
		mkdir -p "\$p/DEBIAN" "\$p/usr/bin" "\$p/lib/systemd/system"
		printf 'Package: %s\nVersion: 1\nArchitecture: all\n' "\$a" \
			> "\$p/DEBIAN/control"
		printf 'Maintainer: t <t@t>\nDescription: fake\n' \
			>> "\$p/DEBIAN/control"
		for b in promtool prometheus; do
			printf '#!/bin/sh\necho "%s, version 0"\n' "\$b" \
				> "\$p/usr/bin/\$b"
			chmod 755 "\$p/usr/bin/\$b"
		done
		echo "[Service]" > "\$p/lib/systemd/system/\$a.service"
		dpkg-deb -b "\$p" "\${a}_1_all.deb" >/dev/null || exit 1
		rm -rf "\$p"
		;;
	esac
done
EOF
chmod 755 "$fake"/*

# deps UID PATH TOOLS: run `ensure-deps.sh test` as user UID; output in
# $tmp/out (stdout and stderr), status in $rc, the fakes' calls in $log.
deps() {
	: > "$log"
	env -u CC FAKE_UID="$1" PATH="$2" TALLY_PYTHON="$tmp/no/python3" \
		FAKE_APT_FAILS="${FAKE_APT_FAILS:-0}" \
		sh scripts/ensure-deps.sh test "$3" > "$tmp/out" 2>&1
	rc=$?
}

# --- a fresh machine, as root -----------------------------------------
tools=$tmp/tools
deps 0 "$fake:$sys" "$tmp/tools"
{ echo "exit status $rc"; cat "$tmp/out"; echo "calls:"; cat "$log"; } \
	> "$tmp/context"

# The packages of every apt-get install, one per line.
grep '^apt-get .*install' "$log" | tr ' ' '\n' |
	grep -v -e '^-' -e '^apt-get$' -e '^install$' > "$tmp/installed"
if [ "$rc" -eq 0 ] && [ -s "$tmp/installed" ]; then
	pass deps_fresh_root_machine_succeeds
else
	fail deps_fresh_root_machine_succeeds "$tmp/context"
fi

if grep '^apt-get .*install' "$log" |
	grep -v -e ' -y .*--no-install-recommends' \
		-e ' --no-install-recommends.* -y' > "$why"; then
	cat "$tmp/context" >> "$why"
	fail deps_every_install_is_yes_without_recommends "$why"
elif grep -q '^apt-get .*install' "$log"; then
	pass deps_every_install_is_yes_without_recommends
else
	fail deps_every_install_is_yes_without_recommends "$tmp/context"
fi

: > "$why"
while read -r p; do
	case "$allowed" in
	*" $p "*) ;;
	*) echo "installs $p" >> "$why" ;;
	esac
done < "$tmp/installed"
if [ ! -s "$why" ] &&
   ! grep -Eqx "prometheus(-node-exporter)?" "$tmp/installed"; then
	pass deps_installs_only_packages_without_a_service
else
	cat "$tmp/context" >> "$why"
	fail deps_installs_only_packages_without_a_service "$why"
fi

# Printed by name, on a line before apt-get runs.
printed=$(grep -n '^tally: installing system-wide:' "$tmp/out" | head -n 1)
first_apt=$(grep -n '^fake: apt-get' "$tmp/out" | head -n 1 | cut -d: -f1)
: > "$why"
if [ -z "$printed" ] || [ -z "$first_apt" ] ||
   [ "${printed%%:*}" -gt "$first_apt" ]; then
	echo "no 'tally: installing system-wide:' line before apt-get" > "$why"
fi
while read -r p; do
	case " ${printed#*system-wide:} " in
	*" $p "*) ;;
	*) echo "$p installed without being named first" >> "$why" ;;
	esac
done < "$tmp/installed"
if [ -s "$why" ]; then
	cat "$tmp/context" >> "$why"
	fail deps_names_every_package_before_installing "$why"
else
	pass deps_names_every_package_before_installing
fi

if grep -v -e '^apt-get ' -e '^id ' "$log" > "$why"; then
	cat "$tmp/context" >> "$why"
	fail deps_enables_and_starts_no_service "$why"
else
	pass deps_enables_and_starts_no_service
fi

if grep -q '^apt-get .*download.* prometheus$' "$log" &&
   [ "$("$tools/prometheus/usr/bin/promtool" --version 2>&1)" = \
     "promtool, version 0" ] &&
   [ "$("$tools/prometheus/usr/bin/prometheus" --version 2>&1)" = \
     "prometheus, version 0" ] &&
   [ ! -e "$tools/download" ]; then
	pass deps_unpacks_prometheus_into_the_tools_directory
else
	{ find "$tools"; cat "$tmp/context"; } > "$why" 2>&1
	fail deps_unpacks_prometheus_into_the_tools_directory "$why"
fi

# --- a fresh machine, another user --------------------------------------
deps 1000 "$fake:$sys" "$tmp/tools2"
: > "$why"
[ "$rc" -eq 1 ] || echo "exit status $rc, expected 1" >> "$why"
if grep '^apt-get .*install' "$log" >> "$why"; then
	echo "(installed as another user)" >> "$why"
fi
cmd=$(grep -e '--no-install-recommends' "$tmp/out")
for p in gcc libc6-dev make libasan8 libubsan1 libtsan2 binutils \
	pkg-config libmicrohttpd-dev python3 python3-prometheus-client \
	gnuplot-nox clang-14 libclang-rt-14-dev spin g++; do
	case " $cmd " in
	*" $p "*) ;;
	*) echo "the command does not name $p" >> "$why" ;;
	esac
done
if [ -s "$why" ]; then
	cat "$tmp/out" >> "$why"
	fail deps_fresh_machine_as_user_says_what_to_install "$why"
else
	pass deps_fresh_machine_as_user_says_what_to_install
fi

# --- this machine, another user: nothing to do ---------------------------
# The real interpreter and tools, the fake id and apt-get.
if [ -x build/tools/prometheus/usr/bin/promtool ]; then
	: > "$log"
	env -u CC FAKE_UID=1000 PATH="$fake:$PATH" FAKE_APT_FAILS=1 \
		sh scripts/ensure-deps.sh test build/tools > "$tmp/out" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ] && ! grep -q '^apt-get' "$log"; then
		pass deps_present_as_user_does_nothing
	else
		{ echo "exit status $rc"; cat "$tmp/out" "$log"; } > "$why"
		fail deps_present_as_user_does_nothing "$why"
	fi
else
	echo "build/tools/prometheus is missing: run make test" > "$why"
	fail deps_present_as_user_does_nothing "$why"
fi

# --- a broken tools directory is unpacked again --------------------------
printf '#!/bin/sh\nexit 1\n' > "$tools/prometheus/usr/bin/promtool"
deps 0 "$fake:$sys" "$tmp/tools"
if [ "$rc" -eq 0 ] &&
   [ "$("$tools/prometheus/usr/bin/promtool" --version 2>&1)" = \
     "promtool, version 0" ]; then
	pass deps_unpacks_a_broken_tools_directory_again
else
	{ echo "exit status $rc"; cat "$tmp/out" "$log"; } > "$why"
	fail deps_unpacks_a_broken_tools_directory_again "$why"
fi

# A download that fails says what to do and exits non-zero.
rm -rf "$tmp/tools3"
FAKE_APT_FAILS=1
deps 0 "$fake:$sys" "$tmp/tools3"
FAKE_APT_FAILS=0
if [ "$rc" -ne 0 ] && grep -q '^tally: cannot download' "$tmp/out" &&
   [ ! -e "$tmp/tools3/prometheus" ]; then
	pass deps_failed_download_says_so
else
	{ echo "exit status $rc"; cat "$tmp/out"; } > "$why"
	fail deps_failed_download_says_so "$why"
fi
finish
