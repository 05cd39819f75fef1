#!/bin/sh
# SPDX-License-Identifier: MIT
# `make install DESTDIR=... PREFIX=/usr` (the package's layout) and PREFIX=
# /usr/local: exactly the expected files, the unit's paths filled in, the
# unit, config, logrotate and sysctl snippets agreeing with each other and
# named by splicer.8's FILES (man_files.sh);
# `make uninstall` removing all of it but a config the user edited.
# Run from the source tree after `make all`. Exit 0 pass, 1 fail.
set -u
[ -r Makefile ] && [ -r contrib/splicer.service.in ] ||
	{ echo "FAIL: run from the source tree" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/splicer-install.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM HUP PIPE
# not the jobserver of a `make test` this may run under
unset MAKEFLAGS MFLAGS MAKELEVEL
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
mk() {
	make --no-print-directory "$@" > "$work/make.log" 2>&1 ||
		{ cat "$work/make.log" >&2; echo "FAIL: make $*" >&2; exit 1; }
}
tree() { (cd "$1" && find . ! -type d | sed 's|^\./||' | sort); }

root=$work/usr-root
mk install DESTDIR="$root" PREFIX=/usr
# the man pages: splicer(8) and splicer.conf(5), or splicer(1) before them
if [ -e doc/splicer.8 ] || [ -e doc/splicer.conf.5 ]; then
	man=$(for m in doc/splicer.8 doc/splicer.conf.5; do
		[ -e "$m" ] && echo "usr/share/man/man${m##*.}/${m#doc/}"; done)
else
	man=usr/share/man/man1/splicer.1
fi
printf '%s\n' etc/logrotate.d/splicer etc/splicer/splicer.conf lib/systemd/system/splicer.service \
	lib/systemd/system/splicer.socket \
	usr/lib/sysctl.d/60-splicer.conf usr/sbin/splicer usr/share/splicer/bench/haproxy.cfg \
	usr/share/splicer/bench/nginx.conf usr/share/splicer/bench/haproxy-sni.cfg \
	usr/share/splicer/bench/splicer-sni.conf usr/share/splicer/bench/nginx-rate.conf \
	usr/share/splicer/bench/haproxy-idle.cfg \
	usr/share/splicer/bench/splicer-upgrade.conf $man | sort > "$work/want"
tree "$root" > "$work/got"
cmp -s "$work/want" "$work/got" ||
	fail "PREFIX=/usr installed other files (- expected, + installed):
$(diff -u "$work/want" "$work/got" | tail -n +3)"

sh tests/package/man_files.sh "$root" doc/splicer.8 || fail "splicer.8's FILES section misses installed paths"

unit=$root/lib/systemd/system/splicer.service
grep -qx 'ExecStart=/usr/sbin/splicer -c /etc/splicer/splicer.conf' "$unit" ||
	fail "ExecStart is not the installed binary on the installed config: $(grep ^ExecStart= "$unit")"
grep -qx 'ExecStartPre=/usr/sbin/splicer check -c /etc/splicer/splicer.conf' "$unit" ||
	fail "no ExecStartPre=splicer check: $(grep ^ExecStartPre= "$unit")"
! grep -q '@[A-Z]*@' "$unit" || fail "placeholders left in the unit: $(grep '@[A-Z]*@' "$unit")"
[ -x "$root/usr/sbin/splicer" ] && "$root/usr/sbin/splicer" --version > /dev/null ||
	fail "the installed binary does not run"

# The unit and the config agree on the user, the config's log is in the
# unit's LogsDirectory and in the logrotate glob.
conf=$root/etc/splicer/splicer.conf
cuser=$(sed -n 's/^user *= *//p' "$conf")
uuser=$(sed -n 's/^User=//p' "$unit")
[ -n "$cuser" ] && [ "$cuser" = "$uuser" ] || fail "config user '$cuser' but unit User=$uuser"
! grep -q '^DynamicUser=yes' "$unit" || fail "DynamicUser=yes beside a config user"
log=$(sed -n 's/^log *= *//p' "$conf")
logs=$(sed -n 's/^LogsDirectory=//p' "$unit")
case $log in
"/var/log/$logs/"*) ;;
*) fail "config log $log is not in the unit's LogsDirectory /var/log/$logs" ;;
esac
glob=$(sed -n 's/^\(\/[^ ]*\) {$/\1/p' "$root/etc/logrotate.d/splicer")
case $log in
$glob) ;;
*) fail "logrotate's $glob does not cover the config's log $log" ;;
esac
grep -q 'kill.*USR1' "$root/etc/logrotate.d/splicer" || fail "logrotate does not send SIGUSR1"

# The admin socket's place: the unit's RuntimeDirectory (ProtectSystem=
# strict leaves /run/splicer the one place it may make it), named by the
# config's commented admin line.
rt=$(sed -n 's/^RuntimeDirectory=//p' "$unit")
[ "$rt" = splicer ] && grep -qx 'RuntimeDirectoryMode=0750' "$unit" ||
	fail "the unit has no RuntimeDirectory=splicer with mode 0750 (RuntimeDirectory=$rt)"
adm=$(sed -n 's/^# *admin *= *//p' "$conf")
case $adm in
"/run/$rt/"?*) ;;
*) fail "the config's admin example '$adm' is not in the unit's RuntimeDirectory /run/$rt" ;;
esac

# fs.pipe-user-pages-soft covers max_pipes auto (a quarter of the unit's
# LimitNOFILE) pipes of the config's pipe_size.
nofile=$(sed -n 's/^LimitNOFILE=//p' "$unit")
psize=$(sed -n 's/^pipe_size *= *\([0-9]*\)k$/\1/p' "$conf")
soft=$(sed -n 's/^fs.pipe-user-pages-soft *= *//p' "$root/usr/lib/sysctl.d/60-splicer.conf")
page=$(getconf PAGESIZE)
if [ -z "$nofile" ] || [ -z "$psize" ] || [ -z "$soft" ]; then
	fail "LimitNOFILE ($nofile), pipe_size in k ($psize) or fs.pipe-user-pages-soft ($soft) not found"
elif [ $((nofile / 4 * (psize * 1024 / page))) -gt "$soft" ]; then
	fail "fs.pipe-user-pages-soft = $soft < $((nofile / 4)) pipes of ${psize}k"
fi

# Uninstall removes every file; an edited config survives it and an install.
mk uninstall DESTDIR="$root" PREFIX=/usr
left=$(tree "$root")
[ -z "$left" ] || fail "uninstall left: $left"
mk install DESTDIR="$root" PREFIX=/usr
echo "# edited" >> "$conf"
cp "$conf" "$work/edited"
mk install DESTDIR="$root" PREFIX=/usr
cmp -s "$conf" "$work/edited" || fail "install wrote over an edited config"
grep -q "KEEP.*splicer.conf" "$work/make.log" || fail "install did not say it kept the config"
mk uninstall DESTDIR="$root" PREFIX=/usr
left=$(tree "$root")
[ "$left" = etc/splicer/splicer.conf ] || fail "uninstall after an edit left '$left', not the config alone"
grep -q "KEEP.*splicer.conf" "$work/make.log" || fail "uninstall did not say it kept the config"

# PREFIX=/usr/local: the unit where systemd reads local units, with the
# local paths; the config still in /etc.
root=$work/local-root
mk install DESTDIR="$root" PREFIX=/usr/local
unit=$root/usr/local/lib/systemd/system/splicer.service
grep -qx 'ExecStart=/usr/local/sbin/splicer -c /etc/splicer/splicer.conf' "$unit" 2>/dev/null ||
	fail "PREFIX=/usr/local: no unit with ExecStart=/usr/local/sbin/splicer at $unit"
[ -x "$root/usr/local/sbin/splicer" ] && [ -e "$root/etc/splicer/splicer.conf" ] ||
	fail "PREFIX=/usr/local: binary or config missing: $(tree "$root")"
mk uninstall DESTDIR="$root" PREFIX=/usr/local
left=$(tree "$root")
[ -z "$left" ] || fail "PREFIX=/usr/local: uninstall left: $left"

[ "$fails" = 0 ] || exit 1
echo "install tree: $(wc -l < "$work/want") files as expected, unit/config/logrotate/sysctl agree, uninstall clean"
