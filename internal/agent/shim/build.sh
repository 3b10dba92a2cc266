#!/bin/sh
# Builds containerd's runc v2 shim (the version in go.mod) into this
# directory for `go build -tags skiffshim` to embed (see shim.go). Run by
# `make build`. Concurrent runs are safe: each writes temporary files and
# renames them, and the build is reproducible.
set -e
cd "$(dirname "$0")"
GO=${GO:-go}
tmp=$(mktemp .containerd-shim-runc-v2.XXXXXX)
trap 'rm -f "$tmp" "$tmp.sha256"' EXIT
"$GO" build -trimpath -ldflags "-s -w" -o "$tmp" github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
sha256sum "$tmp" | cut -d' ' -f1 >"$tmp.sha256"
mv -f "$tmp.sha256" containerd-shim-runc-v2.sha256
mv -f "$tmp" containerd-shim-runc-v2
