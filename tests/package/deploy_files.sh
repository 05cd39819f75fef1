#!/bin/sh
# SPDX-License-Identifier: MIT
# deploy_files.sh [BIN]: the deployment files in contrib/ agree with each
# other and pass the binary's check (tests/package/deploy_files.py says what
# is compared). Exit 0, 1, or 77 without python3 or BIN.
set -u
bin=${1:-build/splicer}
[ -x "$bin" ] || { echo "no $bin: build it first"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "no python3 on this host"; exit 77; }
exec python3 tests/package/deploy_files.py "$bin"
