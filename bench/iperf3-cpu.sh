#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Throughput and proxy CPU seconds per GB through splicer with iperf3 on
# loopback, one row per engine setting. The quick figure behind the core's
# closing note; `splicer bench` (issue 3) is the full experiment.
#   bench/iperf3-cpu.sh [SECONDS] [STREAMS] -- [extra splicer options]
#   BYTES=4G sends that much per run (iperf3 -n) instead of SECONDS.
# Needs iperf3. Every process it starts is stopped by PID.
set -euo pipefail
secs=${1:-5}; streams=${2:-1}; shift $(( $# >= 2 ? 2 : $# )); [ "${1:-}" = "--" ] && shift
bin=${SPLICER_BIN:-$(dirname "$0")/../build/splicer}
port_srv=$((20000 + RANDOM % 10000)); port_px=$((port_srv + 1))
hz=$(getconf CLK_TCK)
iperf3 -s -p "$port_srv" >/dev/null 2>&1 & srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null || true' EXIT
sleep 0.3
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
printf '%-26s %10s %12s %12s\n' case Gbit/s GB cpu_s/GB
run_case() {
	local name=$1; shift
	"$bin" -l 127.0.0.1:$port_px -b 127.0.0.1:$port_srv "$@" 2>/tmp/splicer-bench.$$.log & local px=$!
	for _ in $(seq 50); do grep -q 'ready:' /tmp/splicer-bench.$$.log 2>/dev/null && break; sleep 0.05; done
	local t0; t0=$(cpu_ticks $px)
	local len=(-t "$secs"); [ -n "${BYTES:-}" ] && len=(-n "$BYTES")
	local out; out=$(iperf3 -c 127.0.0.1 -p $port_px "${len[@]}" -P "$streams" -J)
	local t1; t1=$(cpu_ticks $px)
	kill $px; wait $px || true
	python3 - "$name" "$t0" "$t1" "$hz" <<PY
import json,sys
name,t0,t1,hz=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4])
d=json.loads('''$out''')
rx=d['end']['sum_received']
gb=rx['bytes']/1e9
cpu=(t1-t0)/hz
print(f"{name:<26} {rx['bits_per_second']/1e9:10.2f} {gb:12.2f} {cpu/gb:12.3f}")
PY
}
if [ -n "${CASES:-}" ]; then :; else
CASES="copy:--engine=copy splice-64k:--engine=splice,--pipe-size=64k splice-256k:--engine=splice,--pipe-size=256k splice-1m:--engine=splice,--pipe-size=1m auto:--engine=auto"
fi
for c in $CASES; do
	name=${c%%:*}; opts=${c#*:}
	run_case "$name" ${opts//,/ } "$@"
done
rm -f /tmp/splicer-bench.$$.log
