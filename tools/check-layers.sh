#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/check-layers.sh: the layer rules of doc/architecture.md, checked on
# the sources (run by `make`). The Makefile compiles each folder with the
# include paths of the folders it may use (USES_*), so a wrong include
# fails to compile; this script says which rule in words, and checks what
# include paths cannot: which engine headers the core and ctl may see, and
# that the core names no engine.
set -u
cd "$(dirname "$0")/.."

CTL_DIRS="src/ctl/config src/ctl/admin src/ctl/health src/ctl/stats src/ctl/sandbox"
DIRS="src/lib src/proto src/engine src/core $CTL_DIRS src/app tools/bench tools/xfer"
uses() {
	case $1 in
	src/lib) echo "src/lib" ;;
	src/proto) echo "src/lib src/proto" ;;
	src/engine) echo "src/lib src/proto src/engine src/core" ;;
	src/core) echo "src/lib src/proto src/core src/engine" ;;
	src/ctl/*) echo "src/lib src/proto src/core src/engine $CTL_DIRS" ;;
	src/app) echo "$DIRS" ;;
	tools/bench) echo "src/lib tools/bench src/engine" ;;
	tools/xfer) echo "src/lib tools/xfer" ;;
	esac
}
# the engine headers a folder outside src/engine may include
engine_api() {
	case $1 in
	src/core) echo "engine.h pipe_pool.h" ;;
	src/ctl/*) echo "engine.h" ;;
	tools/bench) echo "bpf_sockmap.h" ;; # `splicer bench` asks whether sockmap rows can run
	*) echo "*" ;;
	esac
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for dir in $DIRS; do
	for f in "$dir"/*.c "$dir"/*.h; do
		[ -e "$f" ] || continue
		grep -n '^#include "' "$f" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1 \2/' |
		while read -r line inc; do
			case $inc in ../*) continue ;; esac
			[ -e "$dir/$inc" ] && continue
			home=
			for d in $DIRS; do [ -e "$d/$inc" ] && home=$d; done
			[ -n "$home" ] || continue # a system or test header
			ok=
			for u in $(uses "$dir"); do [ "$u" = "$home" ] && ok=1; done
			if [ -z "$ok" ]; then
				echo "$f:$line: includes $home/$inc; $dir may use only: $(uses "$dir")" >> "$out"
				continue
			fi
			if [ "$home" = src/engine ] && [ "$dir" != src/engine ] && [ "$dir" != src/app ]; then
				api=$(engine_api "$dir")
				case " $api " in
				*" $inc "*) ;;
				*) echo "$f:$line: includes src/engine/$inc; $dir may see only the engine interface ($api)" >> "$out" ;;
				esac
			fi
		done
	done
done
# the core names no engine: it calls the hooks of engine.h
grep -nE 'engine_(copy|splice|sockmap|uring|tiny)\b|\b(sm|uring)_[a-z_]+\(' src/core/*.c src/core/*.h |
	sed 's/$/  <- the core names an engine (use the hooks of engine.h)/' >> "$out"
if [ -s "$out" ]; then
	cat "$out" >&2
	echo "check-layers: $(wc -l < "$out") violation(s) of the layer rules (doc/architecture.md)" >&2
	exit 1
fi
exit 0
