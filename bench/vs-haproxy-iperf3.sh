#!/bin/bash
# SPDX-License-Identifier: MIT
# Interleaved single-worker comparison through iperf3 on loopback: HAProxy
# (mode tcp, its defaults) vs splicer copy / splice 256k / splice 1m, 3 rounds.
# Figures: receiver Gbit/s and the proxy process's CPU seconds per GB.
#   STREAMS=1 bench/vs-haproxy-iperf3.sh    (needs haproxy and iperf3)
hz=$(getconf CLK_TCK)
iperf3 -s -p 5700 >/dev/null 2>&1 & S=$!
sleep 0.3
cat > ${TMPDIR:-/tmp}/splicer-hap.cfg <<'H'
global
    nbthread 1
defaults
    mode tcp
    timeout connect 5s
    timeout client 1m
    timeout server 1m
frontend fe
    bind 127.0.0.1:6700
    default_backend be
backend be
    server s1 127.0.0.1:5700
H
measure() { # name pid
  local t0=$(awk '{print $14+$15}' /proc/$2/stat)
  local out=$(iperf3 -c 127.0.0.1 -p 6700 -t 3 -P ${STREAMS:-1} -J)
  local t1=$(awk '{print $14+$15}' /proc/$2/stat)
  echo "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); r=d['end']['sum_received']; gb=r['bytes']/1e9; print('%-14s %6.2f Gbit/s %6.3f cpu-s/GB' % ('$1', r['bits_per_second']/1e9, ($t1-$t0)/$hz/gb))"
}
for rep in 1 2 3; do
  haproxy -f ${TMPDIR:-/tmp}/splicer-hap.cfg -db >/dev/null 2>&1 & H=$!; sleep 0.4; measure haproxy $H; kill $H; wait $H 2>/dev/null
  for a in "copy" "splice --pipe-size 256k" "splice --pipe-size 1m"; do
    ${SPLICER_BIN:-$(dirname "$0")/../build/splicer} -l 127.0.0.1:6700 -b 127.0.0.1:5700 -w 1 --engine $a 2>/dev/null & P=$!; sleep 0.3; measure "${a// --pipe-size /-}" $P; kill $P; wait $P
  done
done
kill $S
