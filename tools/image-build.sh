#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/image-build.sh [--state FILE] IMAGE: builds contrib/Containerfile
# into IMAGE (`make image`: splicer:VERSION, also tagged splicer:latest)
# with podman, as tools/podman.sh runs it, from the base images
# tools/image-base.sh provides (cached in build/image/). The build uses the
# host's network (`--network host`): its stages apt-get from the Debian
# mirror. Podman's layer cache makes a build whose sources did not change
# take seconds; what earlier builds left untagged is removed. The output
# goes to build/image/build.log, its tail to stderr on failure; the image's
# ID to build/image/id.
#
# --state FILE (`make test`): never fails; writes one line to FILE for the
# image's tests (tests/integration/test_image.c):
#   ok ID           built;
#   skip REASON     no container runtime here (not installed, or installed
#                   and `podman info` fails);
#   fail REASON     it should have built and did not (REASON names the log).
set -u
state=
if [ "${1:-}" = --state ]; then
	state=${2:?--state FILE}
	shift 2
fi
image=${1:?usage: tools/image-build.sh [--state FILE] IMAGE}
cache=build/image
log=$cache/build.log
mkdir -p "$cache" || exit 1
[ -z "$state" ] || rm -f "$state"

# Records the outcome: with --state, in the file (and succeeds); else on
# stderr, failing for anything but ok.
outcome() {
	if [ -n "$state" ]; then
		echo "$1 $2" > "$state"
		[ "$1" = ok ] || echo "  IMAGE   $1: $2" >&2
		exit 0
	fi
	[ "$1" = ok ] && exit 0
	echo "image: $2" >&2
	exit 1
}

command -v podman >/dev/null 2>&1 ||
	outcome skip "no container runtime: podman is not installed and could not be (make image-deps)"
if ! why=$(timeout 60 sh tools/podman.sh info 2>&1 >/dev/null); then
	outcome skip "no container runtime: podman is installed, \`podman info\` fails: $(echo "$why" | tail -3)"
fi

# one build at a time in this tree (make test and make image at once)
exec 9> "$cache/lock"
flock 9

t0=$(date +%s)
if ! sh tools/image-base.sh "$cache" 2> "$cache/base.log"; then
	cat "$cache/base.log" >&2
	outcome fail "the base images could not be made: $(tail -1 "$cache/base.log")"
fi
echo "  IMAGE   podman build -t $image -f contrib/Containerfile ."
# The build stage is tagged too (NAME-build:latest), so that it stays in
# the layer cache; then what earlier builds left untagged goes (the
# Containerfile's label marks ours: nobody else's images are touched).
name=${image%%:*}
build() {
	sh tools/podman.sh build --network host -f contrib/Containerfile "$@" . >> "$log" 2>&1
}
: > "$log"
if ! build --target build -t "$name-build:latest" ||
   ! build --iidfile "$cache/id" -t "$image" -t "$name:latest"; then
	tail -30 "$log" >&2
	outcome fail "podman build failed: $log"
fi
podman image prune -f --filter label=org.splicer.image >> "$log" 2>&1 ||
	echo "  IMAGE   (could not remove the untagged images of earlier builds: see $log)" >&2
id=$(sed 's/^sha256://' "$cache/id")
echo "  IMAGE   $image built in $(( $(date +%s) - t0 )) s (image $(echo "$id" | cut -c1-12))"
outcome ok "$id"
