#!/bin/sh
# SPDX-License-Identifier: MIT
# doc-region.sh FILE COMMAND...: replaces the lines between FILE's
# "BEGIN GENERATED" and "END GENERATED" marker lines with COMMAND's output
# (make doc). The markers stay; FILE is untouched when COMMAND fails or
# either marker is missing. tests/integration/test_docs.c compares the same
# region with the binary's output.
set -eu
file=$1
shift
tmp=$(mktemp)
out=$(mktemp)
trap 'rm -f "$tmp" "$out"' EXIT
"$@" > "$out"
if [ "$(grep -c 'BEGIN GENERATED' "$file")" != 1 ] || [ "$(grep -c 'END GENERATED' "$file")" != 1 ]; then
	echo "$file: needs exactly one BEGIN GENERATED and one END GENERATED line" >&2
	exit 1
fi
awk -v gen="$out" '
	/END GENERATED/ { skip = 0 }
	!skip { print }
	/BEGIN GENERATED/ { while ((getline l < gen) > 0) print l; skip = 1 }
' "$file" > "$tmp"
cat "$tmp" > "$file"
