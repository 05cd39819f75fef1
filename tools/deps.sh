#!/bin/sh
# tools/deps.sh PKG...: installs the Debian packages named that are missing,
# and only those (`make deps`, `make peer-deps`, `make bench-deps`).
#
# Some of them ship services (HAProxy, nginx): the suite and the bench run
# them as their own children, so the system copies must neither start nor
# stay enabled:
#   - while apt runs, /usr/sbin/policy-rc.d refuses every service start (exit
#     101); one that already exists is moved aside and put back afterwards,
#     even when apt fails or we are interrupted; ours is removed otherwise;
#   - the services the install enabled (symlinks that appeared under
#     /etc/systemd/system/*.wants/ and /etc/rc?.d/S*) are disabled after it:
#     `systemctl disable` works without a running systemd, `update-rc.d NAME
#     disable` turns the sysv start links into stop links. Services that were
#     enabled before are left alone.
set -u
export LC_ALL=C

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

policy=/usr/sbin/policy-rc.d
work=$(mktemp -d /tmp/splicer-deps.XXXXXX) || exit 1
saved=
ours=
restore() {
	[ -n "$ours" ] && rm -f "$policy"
	[ -n "$saved" ] && mv -f "$saved" "$policy"
	rm -rf "$work"
}
trap 'restore' EXIT
trap 'exit 130' INT TERM HUP

# What starts at boot now: systemd units wanted by a target, sysv start links.
enabled() {
	find /etc/systemd/system -path '*.wants/*' -printf 'unit %f\n' 2>/dev/null
	find /etc/rc0.d /etc/rc1.d /etc/rc2.d /etc/rc3.d /etc/rc4.d /etc/rc5.d /etc/rc6.d \
		/etc/rcS.d -name 'S[0-9]*' -printf '%f\n' 2>/dev/null | sed 's/^S[0-9]*/sysv /'
}
enabled | sort -u > "$work/before"

if [ -e "$policy" ] || [ -L "$policy" ]; then
	saved="$work/policy-rc.d"
	mv "$policy" "$saved" || exit 1
fi
ours=1
printf '#!/bin/sh\n# splicer tools/deps.sh: no service starts while packages install\nexit 101\n' > "$policy"
chmod 755 "$policy"

apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
rc=$?

enabled | sort -u > "$work/after"
comm -13 "$work/before" "$work/after" | while read -r kind name; do
	case $kind in
	unit)
		echo "  DEPS    disabling $name (enabled by the install)"
		systemctl disable --quiet "$name" >/dev/null 2>&1 ||
			echo "deps: could not disable $name" >&2
		;;
	sysv)
		update-rc.d "$name" disable >/dev/null 2>&1 ||
			echo "deps: could not disable the sysv links of $name" >&2
		;;
	esac
done
exit $rc
