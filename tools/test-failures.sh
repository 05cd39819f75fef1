#!/bin/sh
# SPDX-License-Identifier: MIT
# After a failed `make test`: names every failed test with the first lines
# of its report, taken from Criterion's TAP file, and ends with the counts,
# so the last lines of a CI log (often all one gets to see) say what failed.
tap=${1:?usage: test-failures.sh FILE.tap}
[ -r "$tap" ] || { echo "test-failures: no $tap (CRITERION_ARGS without --tap?)"; exit 0; }
awk '
/^not ok/ { failed++; show = 8; sub(/^not ok[ 0-9]*- /, ""); print "FAILED: " $0; next }
/^ok/ { show = 0; if ($0 !~ /# SKIP/) passed++; next }
show > 0 && /^  / && $0 !~ /^  (---|\.\.\.|assertions:|failures:)$/ && $0 !~ /^  assertions:/ {
	print "    " substr($0, 3); show--; next }
/^[^ ]/ { show = 0 }
END { printf "%d passed, %d failed\n", passed, failed }
' "$tap"
