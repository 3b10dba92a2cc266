#!/usr/bin/env bash
# Upstream kube-scheduler and kube-controller-manager (v1.37.2) against
# `skiff server --disable-scheduler --disable-controller-manager` on
# simulated nodes (test/upstream). Builds what is missing first: the two
# upstream binaries with hack/upstream/build.sh (cached), and skiff into
# $BIN (default bin/skiff). Never part of `make test`.
#
# UPSTREAM_GOCACHE/UPSTREAM_GOTMPDIR are passed to build.sh (e.g. /dev/shm
# when the disk is short); SKIFF_UPSTREAM_LOGS=dir keeps the four logs.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BIN=${BIN:-bin/skiff}
bash hack/upstream/build.sh kube-scheduler kube-controller-manager >/dev/null
SKIFF_UPSTREAM_BIN=$(dirname "$(bash hack/upstream/build.sh path kube-scheduler)")
make --no-print-directory build BIN="$BIN"
SKIFF_BINARY=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") \
	SKIFF_UPSTREAM_BIN=$SKIFF_UPSTREAM_BIN \
	${GO:-go} test -count=1 -v -timeout 10m ./test/upstream/ "$@"
