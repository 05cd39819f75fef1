#!/bin/sh
# SPDX-License-Identifier: MIT
# The unit `make install DESTDIR=... PREFIX=/usr` writes, and the fleet's
# template contrib/splicer@.service (as splicer@test.service), through
# systemd's own checks, offline (PID 1 need not be systemd):
#   systemd-analyze verify: no message at all (it exits 0 on unknown keys;
#     its executables must exist, so a copy points into the install tree);
#   systemd-analyze security --offline: exposure at most 3.0;
# and the socket unit contrib/splicer.socket (verify only: security rates
# services).
# Exit 0 pass, 1 fail, 77 skip (the reason on stdout).
set -u
command -v systemd-analyze > /dev/null ||
	{ echo "SKIP: systemd-analyze is not installed (Debian package systemd)"; exit 77; }
[ -r Makefile ] || { echo "FAIL: run from the source tree" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/splicer-unit.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM HUP PIPE
unset MAKEFLAGS MFLAGS MAKELEVEL
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

root=$work/root
make --no-print-directory install DESTDIR="$root" PREFIX=/usr > "$work/make.log" 2>&1 ||
	{ cat "$work/make.log" >&2; echo "FAIL: make install" >&2; exit 1; }
unit=${SPLICER_TEST_UNIT:-$root/lib/systemd/system/splicer.service}

mkdir "$work/v"
levels=
# check_unit FILE NAME: verify and rate FILE, installed as NAME
check_unit() {
	sed "s|/usr/sbin/splicer|$root/usr/sbin/splicer|g" "$1" > "$work/v/$2"
	out=$(systemd-analyze verify --man=no "$work/v/$2" 2>&1)
	rc=$?
	[ "$rc" = 0 ] && [ -z "$out" ] || fail "$2: systemd-analyze verify (exit $rc): $out"
	out=$(systemd-analyze security --offline=true "$work/v/$2" 2>&1)
	level=$(printf '%s\n' "$out" | sed -n "s/.*Overall exposure level for $2: \([0-9.]*\).*/\1/p")
	if [ -z "$level" ]; then
		fail "$2: systemd-analyze security gave no exposure level: $(printf '%s\n' "$out" | tail -5)"
	elif ! awk -v l="$level" 'BEGIN { exit !(l <= 3.0) }'; then
		fail "$2: systemd-analyze security rates it $level (at most 3.0): $(printf '%s\n' "$out" | grep '✗')"
	fi
	levels="$levels $2 $level,"
}
check_unit "$unit" splicer.service
check_unit contrib/splicer@.service splicer@test.service
# the socket unit (socket activation), beside the service it starts: its
# Service= must name a unit there, and splicer.service takes its sockets
sock=$root/lib/systemd/system/splicer.socket
if [ ! -r "$sock" ]; then
	fail "make install wrote no splicer.socket"
else
	cp "$sock" "$work/v/splicer.socket"
	out=$(systemd-analyze verify --man=no "$work/v/splicer.socket" 2>&1)
	rc=$?
	[ "$rc" = 0 ] && [ -z "$out" ] || fail "splicer.socket: systemd-analyze verify (exit $rc): $out"
	grep -q '^Service=splicer.service$' "$sock" && grep -q '^FileDescriptorName=web$' "$sock" &&
		grep -q '^ListenStream=' "$sock" ||
		fail "splicer.socket: expected ListenStream=, FileDescriptorName=web, Service=splicer.service"
	levels="$levels splicer.socket verified,"
fi

[ "$fails" = 0 ] || exit 1
echo "units: systemd-analyze verify clean, security exposure:${levels%,}"
