#!/bin/sh
# SPDX-License-Identifier: MIT
# build-baseline.sh REV DIR: splicer as it was at git revision REV, for
# `splicer bench --baseline` (make perf-baseline, make perf-doc). Checks REV
# out into a temporary git worktree, builds it there with that revision's
# own Makefile (`make all`, no deps: the packages of this tree are there),
# and installs DIR/splicer by rename, so a bench still running the previous
# baseline keeps its copy. DIR/REVISION says which commit it is; a second
# call for the same commit builds nothing.
#   tools/build-baseline.sh v0.1.0 build/baseline
#   tools/build-baseline.sh 9844184 build/baseline-9844184
set -eu
rev=${1:-}
dir=${2:-build/baseline}
me="make perf-baseline"
if [ -z "$rev" ]; then
	echo "$me: REV=<git revision> is required (a tag, a commit or a branch)" >&2
	exit 2
fi
if ! commit=$(git rev-parse --verify --quiet "$rev^{commit}"); then
	echo "$me: '$rev' is not a revision of this repository (a clone without tags? git fetch --tags)" >&2
	exit 2
fi
short=$(git rev-parse --short "$commit")
if [ -x "$dir/splicer" ] && [ "$(cut -d' ' -f2 "$dir/REVISION" 2>/dev/null)" = "$commit" ]; then
	echo "$me: $dir/splicer is $rev ($short) already"
	exit 0
fi
src=$(mktemp -d "${TMPDIR:-/tmp}/splicer-baseline-XXXXXX")
log="$src.log"
cleanup() {
	git worktree remove --force "$src" >/dev/null 2>&1 || true
	rm -rf "$src"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rmdir "$src"
git worktree add --detach --quiet "$src" "$commit"
echo "$me: building $rev ($short) in $src"
if ! make -C "$src" --no-print-directory -j"$(nproc 2>/dev/null || echo 2)" all >"$log" 2>&1 ||
	[ ! -x "$src/build/splicer" ]; then
	echo "$me: $rev ($short) did not build with its own 'make all'; its last lines:" >&2
	tail -n 20 "$log" >&2
	echo "$me: (whole log: $log)" >&2
	exit 1
fi
rm -f "$log"
mkdir -p "$dir"
cp "$src/build/splicer" "$dir/.splicer.new"
mv -f "$dir/.splicer.new" "$dir/splicer"
echo "$rev $commit" >"$dir/REVISION"
echo "$me: $dir/splicer is $rev ($short)"
