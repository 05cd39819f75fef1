#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/deps.sh PKG...: installs the Debian packages named that are missing,
# and only those (`make deps`, `make peer-deps`, `make bench-deps`,
# `make pkg-deps`, `make browser-deps`).
#
# Some of them ship services (HAProxy, nginx, Prometheus): the suite and the
# bench run them as their own children, so the system copies must neither
# start nor stay enabled at boot:
#   - while apt runs, /usr/sbin/policy-rc.d refuses every service start
#     (exit 101: invoke-rc.d and deb-systemd-invoke obey it). One that
#     already exists is renamed beside itself first and renamed back after,
#     so it comes back byte for byte with its mode, even when apt fails or we
#     are interrupted; a run killed outright (SIGKILL) is repaired by the
#     next one. Ours is removed otherwise.
#   - what the install enabled at boot is undone, also when apt fails or is
#     interrupted: the symlinks that appeared under /etc/systemd/system/
#     *.wants/ and the unit aliases beside them are removed (what `systemctl disable` removes; no running
#     systemd needed), the sysv start links that appeared in /etc/rc?.d/
#     become stop links (S01nginx -> K01nginx, as `update-rc.d nginx
#     disable` does; `update-rc.d defaults` on an upgrade then leaves them
#     alone). deb-systemd-helper keeps its record of the unit, so an upgrade
#     sees a unit that was disabled and does not enable it again. Services
#     enabled before are left alone.
#
# For tests (tests/package/deps_policy.sh) three variables replace the host:
# SPLICER_DEPS_POLICY (the policy-rc.d path), SPLICER_DEPS_ETC (the /etc
# whose links are compared) and SPLICER_DEPS_INSTALL (a command run with the
# missing names instead of apt-get).
set -u
export LC_ALL=C

policy=${SPLICER_DEPS_POLICY:-/usr/sbin/policy-rc.d}
etc=${SPLICER_DEPS_ETC:-/etc}
saved=$policy.splicer-saved
marker='# splicer tools/deps.sh: no service starts while packages install'

missing=
for p in "$@"; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q ' installed$' || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
echo "  DEPS    installing:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "deps: installing needs root (apt-get): run as root, or install:$missing" >&2
	exit 1
fi

apt_install() {
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# A run killed while apt ran left ours in place and the admin's beside it.
if [ -e "$saved" ] || [ -L "$saved" ]; then
	if [ ! -e "$policy" ] || grep -qxF "$marker" "$policy" 2>/dev/null; then
		echo "  DEPS    restoring $policy from $saved (left by an interrupted run)"
		mv -f "$saved" "$policy" || exit 1
	else
		echo "deps: $saved is left from an interrupted run, and $policy is not ours: compare them by hand" >&2
		exit 1
	fi
fi

work=$(mktemp -d /tmp/splicer-deps.XXXXXX) || exit 1
moved=
ours=
snapped=
# What starts at boot now: units wanted by a target, the aliases an enable
# makes (/etc/systemd/system/redis.service -> redis-server.service: `systemctl
# is-enabled` says enabled while one is there), sysv start links.
enabled() {
	find "$etc/systemd/system" -path '*.wants/*' 2>/dev/null
	find "$etc/systemd/system" -maxdepth 1 -type l \( -lname '/lib/systemd/system/*' -o \
		-lname '/usr/lib/systemd/system/*' \) 2>/dev/null
	for d in 0 1 2 3 4 5 6 S; do
		find "$etc/rc$d.d" -name 'S[0-9]*' 2>/dev/null
	done
}

# Undoes the boot links that appeared since "before" (see the top).
disable_new() {
	enabled | sort -u > "$work/after"
	comm -13 "$work/before" "$work/after" | while read -r link; do
		case $link in
		*.wants/*|"$etc"/systemd/system/*)
			echo "  DEPS    disabling ${link##*/} (enabled by the install): rm $link"
			rm -f "$link" || echo "deps: could not remove $link" >&2
			;;
		*)
			stop=${link%/*}/K${link##*/S}
			echo "  DEPS    disabling ${link##*/} (enabled by the install): $link -> $stop"
			mv -f "$link" "$stop" || echo "deps: could not rename $link" >&2
			;;
		esac
	done
}

# On every exit, apt done, failed or interrupted: the links, then the policy.
restore() {
	[ -n "$snapped" ] && disable_new
	[ -n "$ours" ] && rm -f "$policy"
	if [ -n "$moved" ]; then
		mv -f "$saved" "$policy" ||
			echo "deps: could not put $policy back: it is $saved" >&2
	fi
	rm -rf "$work"
}
trap 'restore' EXIT
trap 'exit 130' INT TERM HUP

enabled | sort -u > "$work/before"
snapped=1

if [ -e "$policy" ] || [ -L "$policy" ]; then
	mv "$policy" "$saved" || exit 1
	moved=1
fi
ours=1
printf '#!/bin/sh\n%s\nexit 101\n' "$marker" > "$policy"
chmod 755 "$policy"

# shellcheck disable=SC2086 # the names are words
${SPLICER_DEPS_INSTALL:-apt_install} $missing
exit $?
