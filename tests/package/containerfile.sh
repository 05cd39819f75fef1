#!/bin/sh
# SPDX-License-Identifier: MIT
# containerfile.sh [BIN]: contrib/Containerfile installs what the build and
# the binary need, checked without a container tool (test_image.c runs the
# image where one is): its build stage every package of debian/control's
# Build-Depends, its runtime stage the Debian package that owns each shared
# library BIN (build/splicer) names (NEEDED), libc6 excepted (in every base image).
# Exit 0, 1 with what is missing, or 77 when BIN or dpkg is not here.
set -u
bin=${1:-build/splicer}
cf=contrib/Containerfile
[ -x "$bin" ] || { echo "no $bin: build it first"; exit 77; }
command -v dpkg >/dev/null 2>&1 || { echo "no dpkg on this host"; exit 77; }
[ -r "$cf" ] && [ -r debian/control ] || { echo "FAIL: no $cf or debian/control" >&2; exit 1; }

# the package names of each stage's apt-get install lines (continuations joined)
stage_pkgs() {
	awk -v want="$1" '
		/^FROM / { n++ }
		n == want { print }' "$cf" |
		sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}' |
		grep 'apt-get install' | sed -e 's/.*apt-get install//' -e 's/&&.*//' | tr ' \t' '\n\n' |
		grep -E '^[a-z0-9][a-z0-9.+-]+$'
}
build=$(stage_pkgs 1)
run=$(stage_pkgs 2)
missing=
for p in $(awk '/^Build-Depends:/ { on = 1; sub(/^Build-Depends:/, "") } /^[A-Z]/ && !/^Build-Depends:/ { on = 0 } on' debian/control |
	   tr ',' '\n' | sed 's/(.*)//' | tr -d ' \t' | grep -v '^debhelper-compat$' | grep -v '^$'); do
	echo "$build" | grep -qx "$p" || missing="$missing build:$p"
done
# the libraries the binary names itself (theirs come with their packages)
for name in $(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
	lib=$(ldd "$bin" | awk -v n="$name" '$1 == n && $3 ~ /^\// { print $3 }')
	[ -n "$lib" ] || { missing="$missing runtime:$name(not-found)"; continue; }
	pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -1 | cut -d: -f1) ||
		pkg=
	[ -n "$pkg" ] || pkg=$(dpkg -S "$lib" 2>/dev/null | head -1 | cut -d: -f1)
	[ -n "$pkg" ] || { missing="$missing runtime:$lib(no-package)"; continue; }
	[ "$pkg" = libc6 ] && continue
	echo "$run" | grep -qx "$pkg" || missing="$missing runtime:$pkg($lib)"
done
[ -z "$missing" ] || { echo "FAIL: $cf does not install:$missing" >&2; exit 1; }
echo "$cf: build stage has every Build-Depends, runtime stage every library's package"
exit 0
