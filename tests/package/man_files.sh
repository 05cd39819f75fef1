#!/bin/sh
# SPDX-License-Identifier: MIT
# man_files.sh ROOT [MAN]: every file installed under ROOT (an unpacked
# package, or make install PREFIX=/usr into it) is named by the FILES
# section of MAN (doc/splicer.8), itself or a directory of it ending in
# '/'; the man pages themselves need not be. Run by install_tree.sh and
# deb.sh. Exit 0, or 1 with the paths FILES does not name on stderr.
set -u
root=$1
man=${2:-doc/splicer.8}
[ -d "$root" ] && [ -r "$man" ] || { echo "FAIL: man_files.sh: no $root or $man" >&2; exit 1; }
named=$(sed -n '/^\.SH FILES/,/^\.SH /p' "$man" | sed -n 's/^\.I //p' | sed 's/\\-/-/g')
[ -n "$named" ] || { echo "FAIL: $man has no FILES section with .I paths" >&2; exit 1; }
missing=
for f in $(cd "$root" && find . ! -type d | sed 's|^\.||' | sort); do
	case $f in /usr/share/man/*) continue ;; esac
	ok=
	for p in $named; do
		case $p in
		*/) case $f in "$p"*) ok=1 ;; esac ;;
		*) [ "$f" = "$p" ] && ok=1 ;;
		esac
	done
	[ -n "$ok" ] || missing="$missing $f"
done
[ -z "$missing" ] || { echo "FAIL: $man FILES does not name:$missing" >&2; exit 1; }
exit 0
