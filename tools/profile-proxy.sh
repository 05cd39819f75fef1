#!/bin/sh
# SPDX-License-Identifier: MIT
# profile-proxy.sh CASE WORKLOAD [SECONDS]: where one bench case's proxy
# spends its CPU during one workload (doc/performance.md, "Where the time
# goes"). Runs `splicer bench --cases CASE --workloads WORKLOAD --reps 1`,
# and while it runs profiles the proxy process (the bench's child) for
# SECONDS (default 2): `perf record -e cpu-clock -g` (this machine has no
# hardware counters), then `strace -c -f` for as long. Prints the share of
# kernel, libc and the proxy's own code, the top kernel and user symbols,
# and the system calls counted. Root; perf and strace (make deps).
# With BASELINE=PATH, the same case run by that build (bench --baseline).
#   tools/profile-proxy.sh auto rr
#   tools/profile-proxy.sh haproxy conn 3
#   BASELINE=build/baseline/splicer tools/profile-proxy.sh auto rr
set -eu
case=${1:?CASE (a bench case: auto, copy, haproxy, ...)}
workload=${2:?WORKLOAD (bulk1, rr, conn, lat, ...)}
secs=${3:-2}
bin=${SPLICER_BIN:-build/splicer}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM

"$bin" bench --cases "$case" --workloads "$workload" --reps 1 --seconds $((secs * 2 + 4)) \
	--peers haproxy --links loopback ${BASELINE:+--baseline "base=$BASELINE"} >"$out/bench.txt" 2>&1 &
bench=$!
# the proxy: the child that is not a bench helper (sink, peers' wrappers);
# with BASELINE, the one that runs that build (it starts after the case's own)
want=${BASELINE:+$(readlink -f "$BASELINE")}
pid=
for _ in $(seq 60); do
	sleep 1
	for child in $(pgrep -P "$bench"); do
		case $(cat /proc/"$child"/comm 2>/dev/null) in
		splicer|haproxy|nginx|socat)
			[ -z "$want" ] || [ "$(readlink /proc/"$child"/exe)" = "$want" ] && pid=$child ;;
		esac
	done
	[ -z "$pid" ] || break
done
sleep 2 # into the workload
[ -n "$pid" ] || { echo "no proxy process under the bench (pid $bench):" >&2; cat "$out/bench.txt" >&2; exit 1; }
echo "proxy: pid $pid, $(tr '\0' ' ' < /proc/"$pid"/cmdline | cut -c1-100)"
perf record -q -e cpu-clock -g -p "$pid" -o "$out/perf.data" -- sleep "$secs" 2>/dev/null
timeout "$secs" strace -c -f -p "$pid" -o "$out/strace.txt" 2>/dev/null || true
wait "$bench" || { echo "the bench failed:" >&2; tail -20 "$out/bench.txt" >&2; exit 1; }

echo "== CPU by object (kernel, libc: system call wrappers and their traps, the proxy's code)"
perf report -i "$out/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -6
echo "== top symbols"
perf report -i "$out/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -20
echo "== system calls in ${secs} s (strace -c; futex and signal waits are the proxy's idle threads)"
grep -vE 'rt_sigtimedwait|restart_syscall' "$out/strace.txt" | head -25
echo "== the bench's figures for this run"
grep -E "^ *(case|workload|  *$case|.*  $case )" "$out/bench.txt" | head -12
