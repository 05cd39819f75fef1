#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/deps.sh against a fake host: a policy-rc.d path and an /etc of its
# own (SPLICER_DEPS_POLICY, SPLICER_DEPS_ETC) and an install command that
# checks the policy and enables services the way a package's postinst does
# (SPLICER_DEPS_INSTALL). No package is installed, nothing outside the temp
# dir changes. Exit 0 pass, 1 fail (the reason on stderr).
set -u
deps=${1:-tools/deps.sh}
[ -r "$deps" ] || { echo "FAIL: $deps not found (run from the source tree)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: deps.sh installs as root only; this is uid $(id -u)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/splicer-deps-test.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM HUP PIPE
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# a package name no archive has, so dpkg-query calls it missing
pkg=splicer-test-no-such-package-$$
etc=$work/etc
policy=$work/sbin/policy-rc.d

# The "postinst": the policy must refuse starts, then two services get
# enabled (a unit wanted by multi-user.target, sysv start links).
cat > "$work/install" <<'EOS'
#!/bin/sh
"$SPLICER_DEPS_POLICY" nginx start
echo "policy-rc.d said $?" > "$SPLICER_TEST_OUT/policy-rc"
ln -s /lib/systemd/system/newsvc.service "$SPLICER_DEPS_ETC/systemd/system/multi-user.target.wants/newsvc.service"
ln -s /lib/systemd/system/newsvc.service "$SPLICER_DEPS_ETC/systemd/system/newalias.service"
for r in 2 3 4 5; do ln -s ../init.d/newsvc "$SPLICER_DEPS_ETC/rc$r.d/S01newsvc"; done
case ${SPLICER_TEST_MODE:-ok} in
fail) exit 100 ;;
term) kill -TERM "$PPID"; exit 0 ;;
esac
exit 0
EOS
chmod 755 "$work/install"

# A fresh fake host: one unit and one sysv service enabled before.
setup() {
	rm -rf "$etc" "$work/sbin" "$work/out"
	mkdir -p "$etc/systemd/system/multi-user.target.wants" "$work/sbin" "$work/out"
	for r in 0 1 2 3 4 5 6 S; do mkdir -p "$etc/rc$r.d"; done
	ln -s /lib/systemd/system/oldsvc.service "$etc/systemd/system/multi-user.target.wants/oldsvc.service"
	ln -s ../init.d/oldsvc "$etc/rc2.d/S02oldsvc"
	ln -s /lib/systemd/system/oldsvc.service "$etc/systemd/system/oldalias.service"
}

run_deps() {
	SPLICER_DEPS_POLICY=$policy SPLICER_DEPS_ETC=$etc SPLICER_DEPS_INSTALL=$work/install \
		SPLICER_TEST_OUT=$work/out sh "$deps" "$pkg" > "$work/out/log" 2>&1
}

# What the links say after a run: the new ones undone, the old ones kept.
check_links() {
	[ -L "$etc/systemd/system/multi-user.target.wants/oldsvc.service" ] ||
		fail "$1: the unit enabled before was disabled"
	[ -L "$etc/rc2.d/S02oldsvc" ] || fail "$1: the sysv service enabled before was disabled"
	[ -L "$etc/systemd/system/oldalias.service" ] || fail "$1: the alias made before was removed"
	[ ! -L "$etc/systemd/system/newalias.service" ] ||
		fail "$1: the alias the install made (systemctl is-enabled: enabled) is still there"
	[ ! -e "$etc/systemd/system/multi-user.target.wants/newsvc.service" ] &&
		[ ! -L "$etc/systemd/system/multi-user.target.wants/newsvc.service" ] ||
		fail "$1: the unit the install enabled is still wanted by multi-user.target"
	for r in 2 3 4 5; do
		[ ! -L "$etc/rc$r.d/S01newsvc" ] || fail "$1: rc$r.d/S01newsvc still starts it"
		[ -L "$etc/rc$r.d/K01newsvc" ] || fail "$1: rc$r.d/K01newsvc (the stop link) is missing"
	done
	grep -qx 'policy-rc.d said 101' "$work/out/policy-rc" 2>/dev/null ||
		fail "$1: during the install policy-rc.d did not refuse starts ($(cat "$work/out/policy-rc" 2>/dev/null))"
}

# One run of deps.sh in install mode $2 (ok, fail, term) that must exit $3.
run_case() {
	SPLICER_TEST_MODE=$2 run_deps
	rc=$?
	[ "$rc" = "$3" ] || fail "$1: deps.sh exited $rc, not $3: $(cat "$work/out/log")"
}

# The admin's policy-rc.d is back, byte for byte, with its mode, and alone.
policy_back() {
	cmp -s "$work/admin-policy" "$policy" || fail "$1: the admin's policy-rc.d is not back byte for byte"
	[ "$(stat -c %a "$policy" 2>/dev/null)" = 750 ] || fail "$1: mode not kept ($(stat -c %a "$policy" 2>/dev/null))"
	[ ! -e "$policy.splicer-saved" ] || fail "$1: the saved copy was left behind"
}

printf '#!/bin/sh\n# the admin'"'"'s own\n\001\377exit 0\n' > "$work/admin-policy"
chmod 750 "$work/admin-policy"

# 1. an admin's policy-rc.d, odd bytes and mode
setup
cp -p "$work/admin-policy" "$policy"
run_case "existing policy" ok 0
policy_back "existing policy"
check_links "existing policy"

# 2. no policy-rc.d before: none after
setup
run_case "no policy" ok 0
[ ! -e "$policy" ] || fail "no policy: ours was left in place"
check_links "no policy"

# 3. the install fails: its status comes out, the policy comes back
setup
cp -p "$work/admin-policy" "$policy"
run_case "failed install" fail 100
policy_back "failed install"
check_links "failed install"

# 4. interrupted (SIGTERM while the install runs): exit 130, links undone, policy back
setup
cp -p "$work/admin-policy" "$policy"
run_case "interrupted" term 130
policy_back "interrupted"
check_links "interrupted"

# 5. a run killed outright left ours in place and the admin's beside it:
#    the next run puts the admin's back before anything else
setup
cp -p "$work/admin-policy" "$policy.splicer-saved"
printf '#!/bin/sh\n# splicer tools/deps.sh: no service starts while packages install\nexit 101\n' > "$policy"
run_case "after a killed run" ok 0
policy_back "after a killed run"

[ "$fails" = 0 ] || exit 1
echo "deps.sh: policy-rc.d restored byte for byte in 4 cases (one after a killed run), new services disabled, old ones kept"
