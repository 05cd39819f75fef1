#!/bin/sh
# SPDX-License-Identifier: MIT
# The .deb `make deb` built (SPLICER_DEB): unpacked with dpkg-deb -x into a
# throwaway root, its metadata checked, and its own `splicer check` run on
# its own config, unchanged. The config says `user = splicer` and logs to
# /var/log/splicer, which this host may not have: check runs in a private
# mount namespace where /etc/passwd and /etc/group are copies holding that
# user and /var/log is an empty tmpfs with /var/log/splicer in it (what the
# postinst makes), as root (an admin's check) and as the user with the
# unit's capability (ExecStartPre). Nothing outside the namespace changes.
# First, from the source tree: `make deb` installs (make deps pkg-deps)
# every package of debian/control's Build-Depends, so it builds on a fresh
# box. Exit 0 pass, 1 fail, 77 skip (the reason on stdout).
set -u
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

if [ -r debian/control ] && [ -r Makefile ]; then
	pkgs=$(printf 'splicer-print-pkgs:\n\t@echo $(DEB_PKGS) $(PKG_PKGS)\n' |
		env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -f Makefile -f - splicer-print-pkgs)
	build=$(sed -n '/^Build-Depends:/,/^[A-Z][A-Za-z-]*:/p' debian/control | sed '$d' |
		sed 's/^Build-Depends://' | tr ',' '\n' | sed 's/([^)]*)//; s/^[[:space:]]*//; s/[[:space:]]*$//')
	[ -n "$build" ] || fail "no Build-Depends found in debian/control"
	for b in $build; do
		[ "$b" = debhelper-compat ] && b=debhelper # debhelper provides it
		case " $pkgs " in
		*" $b "*) ;;
		*) fail "debian/control Build-Depends $b, which make deb does not install (DEB_PKGS, PKG_PKGS)" ;;
		esac
	done
fi

deb=${SPLICER_DEB:-}
if ! [ -n "$deb" ] || ! [ -f "$deb" ]; then
	[ "$fails" = 0 ] || exit 1
	echo "SKIP: no package: SPLICER_DEB='$deb' (make deb builds build/splicer_VERSION_ARCH.deb)"
	exit 77
fi
command -v dpkg-deb > /dev/null || { echo "SKIP: dpkg-deb is not installed"; exit 77; }
# in /tmp itself, not $TMPDIR: the user splicer must reach the config
work=$(mktemp -d /tmp/splicer-deb.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM HUP PIPE
chmod 755 "$work"

root=$work/root
ctl=$work/control
dpkg-deb -x "$deb" "$root" && dpkg-deb -e "$deb" "$ctl" || { echo "FAIL: dpkg-deb could not unpack $deb" >&2; exit 1; }
for f in usr/sbin/splicer etc/splicer/splicer.conf lib/systemd/system/splicer.service \
	etc/logrotate.d/splicer usr/lib/sysctl.d/60-splicer.conf \
	usr/share/doc/splicer/README.md usr/share/doc/splicer/deployment.md; do
	[ -e "$root/$f" ] || fail "the package has no /$f"
done
# the template unit's Documentation= names the uncompressed page
grep -q 'file:/usr/share/doc/splicer/deployment.md' contrib/splicer@.service ||
	fail "contrib/splicer@.service does not point to /usr/share/doc/splicer/deployment.md"

for f in /etc/splicer/splicer.conf /etc/logrotate.d/splicer; do
	grep -qx "$f" "$ctl/conffiles" 2>/dev/null || fail "$f is not a conffile"
done
sh tests/package/man_files.sh "$root" doc/splicer.8 || fail "splicer.8's FILES section misses packaged paths"
grep -q '^[[:space:]]*adduser --system .*splicer$' "$ctl/postinst" 2>/dev/null || fail "the postinst does not create the user splicer"
grep -q '^Depends:.*adduser' "$ctl/control" || fail "the package does not depend on adduser"
grep -qx 'ExecStart=/usr/sbin/splicer -c /etc/splicer/splicer.conf' "$root/lib/systemd/system/splicer.service" ||
	fail "the unit's ExecStart is not /usr/sbin/splicer -c /etc/splicer/splicer.conf"
grep -qx 'User=splicer' "$root/lib/systemd/system/splicer.service" || fail "the unit does not run as User=splicer"
grep -qx 'user = splicer' "$root/etc/splicer/splicer.conf" || fail "the config does not say user = splicer"

if command -v lintian > /dev/null; then
	lintian --fail-on error "$deb" > "$work/lintian" 2>&1 ||
		fail "lintian reports errors: $(grep -v 'root privileges' "$work/lintian")"
	lint="lintian: no error"
else
	lint="lintian not installed: not run"
fi

bin=$root/usr/sbin/splicer
conf=$root/etc/splicer/splicer.conf
if ! unshare -m --propagation private true 2> /dev/null; then
	echo "SKIP: no private mount namespace here (unshare -m needs CAP_SYS_ADMIN)"
	exit 77
fi
# a uid and gid no one has, for the user and group splicer
id=999
while [ "$id" -gt 100 ] && { getent passwd "$id" || getent group "$id"; } > /dev/null; do id=$((id - 1)); done
cp /etc/passwd "$work/passwd"
cp /etc/group "$work/group"
getent passwd splicer > /dev/null || echo "splicer:x:$id:$id::/nonexistent:/usr/sbin/nologin" >> "$work/passwd"
getent group splicer > /dev/null || echo "splicer:x:$id:" >> "$work/group"
# Inside the namespace: check as root and as the user, then run the proxy
# as the unit would (user splicer, CAP_NET_BIND_SERVICE only) until /health
# answers, reload it, and stop it; its stderr is run.log.
cat > "$work/ns.sh" <<'EOS'
set -e
mount --bind "$work/passwd" /etc/passwd
mount --bind "$work/group" /etc/group
mount -t tmpfs -o mode=0755 splicer-test /var/log
install -d -o splicer -g splicer -m 0750 /var/log/splicer
as_unit() {
	setpriv --reuid=splicer --regid=splicer --clear-groups --pdeathsig=TERM --inh-caps=+net_bind_service \
		--ambient-caps=+net_bind_service "$@"
}
health() {
	bash -c 'exec 3<>/dev/tcp/127.0.0.1/9180 && printf "GET /health HTTP/1.0\r\n\r\n" >&3 &&
		timeout 2 cat <&3' 2> /dev/null | grep -q '^HTTP/1.[01] 200'
}
echo "check as root:"
"$bin" check -c "$conf"
echo "check as splicer, as ExecStartPre:"
as_unit "$bin" check -c "$conf"
if health || bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080' 2> /dev/null; then
	echo "not run: 127.0.0.1:9180 or :8080 (the packaged config's) is in use on this host"
	exit 0
fi
# setpriv itself in the background (not the function, a subshell), so $pid
# is the proxy; it is stopped whatever happens, and its output is not ours
setpriv --reuid=splicer --regid=splicer --clear-groups --pdeathsig=TERM --inh-caps=+net_bind_service \
	--ambient-caps=+net_bind_service "$bin" -c "$conf" > "$work/run.log" 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null || true' EXIT
n=0
until health; do
	n=$((n + 1))
	if [ $n -ge 100 ] || ! kill -0 $pid 2> /dev/null; then
		echo "the packaged proxy did not answer /health"; exit 1
	fi
	sleep 0.1
done
kill -HUP $pid
sleep 0.2
health || { echo "no /health after SIGHUP"; exit 1; }
[ "$(stat -c %U /var/log/splicer/access.log)" = splicer ] ||
	{ echo "no access log of the user splicer in /var/log/splicer"; exit 1; }
kill -TERM $pid
wait $pid || { echo "the proxy exited $? on SIGTERM"; exit 1; }
echo "ran as user splicer: /health answered before and after SIGHUP, access log made, clean stop"
EOS
if ! out=$(work=$work bin=$bin conf=$conf unshare -m --propagation private sh "$work/ns.sh" 2>&1); then
	fail "the packaged splicer failed on the packaged config:
$out
$(cat "$work/run.log" 2>/dev/null)"
fi

[ "$fails" = 0 ] || exit 1
printf '%s\n' "$out"
echo "package: unpacked, conffiles, postinst, unit and config agree; $lint"
