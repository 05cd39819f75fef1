#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/run-suite.sh TESTS [CRITERION_ARGS...]: the suite in two shards that
# run at once, each a sequence of Criterion test processes (`make test`).
#
# Most cases wait on sockets, not on a CPU, so two at a time finish in a
# little more than half the time on 2 CPUs. The shards are split so that
# each holds about half the seconds: the heavy one has the cases that load
# the machine (thousands of sessions, the bench, the fleet, the fuzzers,
# the package build, the differential suite, the upgrade of 1,000 sessions,
# the real servers that health
# checks are tested against: redis, postgresql), the other everything else;
# no heavy case runs beside another heavy one. Each shard writes its output
# and its TAP file apart; both are printed whole, one after the other, then
# the failures (tools/test-failures.sh) and one last line:
#   N passed, N failed
# The exit status is 0 only when both shards passed and ran a test.
set -u
tests=${1:?usage: run-suite.sh TESTS [CRITERION_ARGS...]}
shift
out=${SPLICER_SUITE_OUT:-build/suite}
mkdir -p "$out"
rm -f "$out"/*.tap "$out"/*.log

heavy_cases='load_*|uring_4000*|upgrade_hands_over_1000*|concurrent_*|bench_*|fleet_*|fuzz_*|package_*|valgrind_*|soak_*|servers_*'
heavy="@(peer/*|integ/@($heavy_cases))"
light="!($heavy)"

"$tests" --filter "$heavy" --tap="$out/heavy.tap" "$@" > "$out/heavy.log" 2>&1 &
hpid=$!
"$tests" --filter "$light" --tap="$out/light.tap" "$@" > "$out/light.log" 2>&1 &
lpid=$!
# stop both (by pid) if this script is interrupted
trap 'kill $hpid $lpid 2>/dev/null; exit 130' INT TERM
wait $hpid
hrc=$?
wait $lpid
lrc=$?

for s in light heavy; do
	echo "==== shard $s ===="
	cat "$out/$s.log"
done
# a shard's TAP lists the other shard's cases as skipped: they are not
cat "$out/light.tap" "$out/heavy.tap" 2>/dev/null | grep -v '# SKIP test was skipped$' > "$out/all.tap"
sh tools/test-failures.sh "$out/all.tap" | grep -v '^[0-9]* passed, [0-9]* failed$'
awk '
/^not ok/ { failed++; next }
/^ok/ { if ($0 !~ /# SKIP/) passed++; else skipped++ }
END { if (skipped) printf "%d skipped (each with its reason above)\n", skipped
      printf "%d passed, %d failed\n", passed, failed
      exit (passed == 0 || failed > 0) }
' "$out/all.tap"
arc=$?
[ "$hrc" = 0 ] && [ "$lrc" = 0 ] && [ "$arc" = 0 ]
