#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/podman.sh COMMAND [ARGS...]: podman with the settings that build and
# run containers on hosts like the project's (doc/deployment.md, "The
# container image"), for `make image` and the image's tests:
#   --runtime runc             crun, podman's choice when both are installed,
#                              fails to start containers on this kind of host
#                              (PODMAN_RUNTIME=crun to try it elsewhere);
#   --cgroup-manager=cgroupfs  no systemd runs as PID 1 to ask for scopes;
#   --ulimit nofile=N:N --ulimit nproc=N:N   (build, run, create) at this
#                              shell's hard limits: podman's defaults are above
#                              them, and the runtime fails to set them.
# Anything else passes through; `sh tools/podman.sh run --rm IMAGE --version`.
set -u
[ $# -ge 1 ] || { echo "usage: tools/podman.sh COMMAND [ARGS...]" >&2; exit 2; }
command -v podman >/dev/null 2>&1 || { echo "podman: not installed (make image-deps)" >&2; exit 127; }

# A hard limit as a number no higher than it ("unlimited" becomes cap).
hard() {
	v=$(ulimit -H "$1" 2>/dev/null) || v=unlimited
	case $v in
	'' | unlimited) echo "$2" ;;
	*) [ "$v" -lt "$2" ] && echo "$v" || echo "$2" ;;
	esac
}

cmd=$1
shift
case $cmd in
build | run | create)
	nofile=$(hard -n "$(cat /proc/sys/fs/nr_open 2>/dev/null || echo 1048576)")
	nproc=$(hard -u 32768)
	set -- --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" "$@"
	;;
esac
exec podman --runtime "${PODMAN_RUNTIME:-runc}" --cgroup-manager=cgroupfs "$cmd" "$@"
