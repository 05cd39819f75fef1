#!/bin/sh
# SPDX-License-Identifier: MIT
# make fleet: a splicer fleet behind ECMP in network namespaces, the VIP
# announced over BGP (see tests/fleet/fleet.py, tests/fleet/bgp.py and
# doc/deployment.md).
# Usage: fleet.sh [--short] [--balance roundrobin|leastconn|maglev] [--only LETTERS] [BIN]
# Prints the scenario table and one summary line; "fleet: skipped: REASON"
# and status 77 when this machine cannot run it. Every namespace this run
# made is deleted on the way out, whatever happened, and the processes in
# them (only ours: the namespaces are this run's) are killed first. HUP,
# INT and TERM stop the run at once (exit 129, 130, 143): the driver gets
# TERM, prints the table so far and keeps its logs.
set -u
opts=
bin=build/splicer
while [ $# -gt 0 ]; do
	case $1 in
	--short) opts="$opts $1" ;;
	--balance) opts="$opts $1 ${2:?--balance needs a value}"; shift ;;
	--only) opts="$opts $1 ${2:?--only needs scenario letters}"; shift ;;
	-*) echo "fleet.sh: unknown option $1" >&2; exit 2 ;;
	*) bin=$1 ;;
	esac
	shift
done
here=$(dirname "$0")
P=fl$$

skip() {
	echo "fleet: skipped: $*"
	exit 77
}

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
[ -x "$bin" ] || skip "no proxy binary at $bin"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v python3 >/dev/null || skip "no python3"
# the control plane: FRR on the router, BIRD 2 on the instances (make fleet-deps)
for d in zebra bgpd bfdd; do
	[ -x /usr/lib/frr/$d ] || skip "no /usr/lib/frr/$d (Debian: frr; make fleet-deps)"
done
command -v vtysh >/dev/null || skip "no vtysh (Debian: frr; make fleet-deps)"
# zebra streams its FIB to tests/fleet/fib_agent.py through this module
fpm=
for m in /usr/lib/*/frr/modules/dplane_fpm_nl.so /usr/lib/frr/modules/dplane_fpm_nl.so; do
	[ -e "$m" ] && fpm=$m
done
[ -n "$fpm" ] || skip "no FRR module dplane_fpm_nl (Debian: frr; make fleet-deps)"
command -v bird >/dev/null || skip "no bird (Debian: bird2; make fleet-deps)"
id frr >/dev/null 2>&1 || skip "no user frr (Debian's frr package makes it)"

# Kills what runs in a namespace of ours, and removes the directory each FRR
# daemon keeps in /var/tmp/frr while it runs (a killed one cannot).
kill_ns() {
	for pid in $(ip netns pids "$1" 2>/dev/null); do
		comm=$(cat "/proc/$pid/comm" 2>/dev/null)
		kill -9 "$pid" 2>/dev/null
		case $comm in zebra|bgpd|bfdd) rm -rf "/var/tmp/frr/$comm.$pid" ;; esac
	done
}

cleanup() {
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P-"); do
		kill_ns "$ns"
		ip netns del "$ns" 2>/dev/null
	done
}
trap cleanup EXIT
# a signal before the driver runs: straight to the cleanup
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# A run killed outright (SIGKILL: no trap) leaves its namespaces: they are
# named after its shell's PID, so those of a PID that is gone, or is no
# longer a fleet.sh (the PID reused), are deleted; a running one's stay.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^fl[0-9][0-9]*-'); do
	pid=${ns%%-*}
	pid=${pid#fl}
	if ! cat "/proc/$pid/cmdline" 2>/dev/null | tr '\0' ' ' | grep -q 'fleet\.sh'; then
		kill_ns "$ns"
		ip netns del "$ns" 2>/dev/null
	fi
done

# Can this kernel and ip do it? A scratch namespace with one resilient group.
ip netns add "$P-probe" 2>/dev/null || skip "cannot create a network namespace"
ip -n "$P-probe" link set lo up
ip -n "$P-probe" nexthop add id 1 dev lo >/dev/null 2>&1 ||
	skip "ip nexthop: nexthop objects not supported here"
ip -n "$P-probe" nexthop add id 2 group 1 type resilient buckets 8 >/dev/null 2>&1 ||
	skip "ip nexthop: resilient groups not supported here (kernel >= 5.13, iproute2 >= 5.13)"
ip netns del "$P-probe"

# bounded: SIGTERM lets the driver stop its processes, then the EXIT trap
# runs. In the background and waited for: a shell runs a trap only once
# its foreground command has ended, so HUP, INT or TERM would otherwise
# wait out the whole run; they are passed on to the driver (as TERM: a
# background command ignores INT) and the namespaces go at once.
case $opts in *--short*) limit=150 ;; *) limit=600 ;; esac
timeout -k 10 "$limit" python3 "$here/fleet.py" --prefix "$P" --bin "$bin" $opts &
driver=$!
stop() {
	kill -TERM "$driver" 2>/dev/null
	wait "$driver"
	exit "$1"
}
trap 'stop 129' HUP
trap 'stop 130' INT
trap 'stop 143' TERM
wait "$driver"
exit $?
