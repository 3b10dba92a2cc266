#!/usr/bin/env bash
# Builds upstream Kubernetes programs (the release this module pins, see
# go.mod) on demand, for running them beside or against Skiff: upstream's
# conformance suite (e2e.test), upstream control-plane components to compare
# with Skiff's, upstream's kubectl, agnhost (the e2e suite's test server).
#
#   hack/upstream/build.sh NAME...     build what is missing, print each path
#   hack/upstream/build.sh path NAME   print where NAME is (or would be) kept
#   hack/upstream/build.sh clean-gocache
#                                      drop the Go build cache kept for these
#                                      builds (the binaries stay)
#
# NAME is one of: e2e.test kube-apiserver kube-controller-manager
# kube-scheduler kubectl kubelet, agnhost and nnp (programs of the e2e suite's test
# images), ginkgo (the test runner's CLI, at the version the suite pins: it
# runs e2e.test in parallel), sample-apiserver and etcd (the aggregator
# test's images; etcd is etcdmain at the version kubernetes pins); `all` is
# every one.
#
# Binaries are kept under $UPSTREAM_CACHE/<version>/bin (default
# /var/cache/skiff-upstream/v1.37.2/bin) and reused while present: delete one
# to rebuild it. They are static (CGO_ENABLED=0), built with -trimpath and
# stamped with the release's version, as upstream's own build does. The Go
# build cache for them is separate from the machine's ($UPSTREAM_CACHE/
# <version>/gocache, a few GB; UPSTREAM_GOCACHE moves it, e.g. to a tmpfs
# such as /dev/shm when the disk is short) so that it can be dropped on its
# own; UPSTREAM_GOTMPDIR moves the go command's work directory (GOTMPDIR,
# default $TMPDIR or /tmp).
#
# Never part of `make test`. Needs network access to the Go module proxy only
# the first time (modules land in the usual module cache). Building stops if
# the file system holding the Go cache or the work directory falls under
# MIN_FREE_GB (default 8) free.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
VERSION=$(sed -n 's/^\(require\)\{0,1\}[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\)$/\2/p' "$HERE/go.mod")
[ -n "$VERSION" ] || { echo "upstream: no k8s.io/kubernetes version in $HERE/go.mod" >&2; exit 1; }
ROOT=${UPSTREAM_CACHE:-/var/cache/skiff-upstream}/$VERSION
GOCACHE_DIR=${UPSTREAM_GOCACHE:-$ROOT/gocache}
GOTMP_DIR=${UPSTREAM_GOTMPDIR:-${TMPDIR:-/tmp}}
MIN_FREE_GB=${MIN_FREE_GB:-8}

log() { echo "upstream: $*" >&2; }
die() { log "$*"; exit 1; }

pkg_of() {
	case "$1" in
	e2e.test) echo k8s.io/kubernetes/test/e2e ;;
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet) echo "k8s.io/kubernetes/cmd/$1" ;;
	agnhost) echo k8s.io/kubernetes/test/images/agnhost ;;
	nnp) echo k8s.io/kubernetes/test/images/nonewprivs ;;
	ginkgo) echo github.com/onsi/ginkgo/v2/ginkgo ;;
	sample-apiserver) echo k8s.io/sample-apiserver ;;
	etcd) echo github.com/skiff-sh/skiff/hack/upstream/etcd ;;
	*) return 1 ;;
	esac
}

free_gb() { df -P --block-size=1G "$1" | awk 'NR==2{print $4}'; }

# enough_disk: the Go build cache and work directory (where a build's GBs
# go) have MIN_FREE_GB free, the binaries' directory 1 GB.
enough_disk() {
	[ "$(free_gb "$GOCACHE_DIR")" -ge "$MIN_FREE_GB" ] &&
		[ "$(free_gb "$GOTMP_DIR")" -ge "$MIN_FREE_GB" ] &&
		[ "$(free_gb "$ROOT")" -ge 1 ]
}

# The release's version in the places upstream's build stamps it
# (hack/lib/version.sh): kubectl version, the e2e suite's log and the
# components' /version report it.
ldflags() {
	local minor p out=""
	minor=$(echo "$VERSION" | cut -d. -f2)
	for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		out+=" -X $p.gitVersion=$VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
		out+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	echo "-s -w$out"
}

build_one() {
	local name=$1 pkg out start watchdog rc
	pkg=$(pkg_of "$name") || die "unknown program $name (e2e.test kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet agnhost nnp ginkgo sample-apiserver etcd)"
	out=$ROOT/bin/$name
	if [ -x "$out" ]; then echo "$out"; return 0; fi
	mkdir -p "$ROOT/bin" "$GOCACHE_DIR" "$GOTMP_DIR"
	local free
	free="$(free_gb "$GOCACHE_DIR") GB (Go cache), $(free_gb "$GOTMP_DIR") GB (work dir), $(free_gb "$ROOT") GB (binaries)"
	enough_disk || die "only $free free (need $MIN_FREE_GB, and 1 for binaries); not building $name"
	log "building $name ($pkg $VERSION), $free free before"
	start=$(date +%s)
	local args=(-trimpath -ldflags "$(ldflags)" -o "$out.tmp")
	local cmd=(build "${args[@]}" "$pkg")
	[ "$name" = e2e.test ] && cmd=(test -c "${args[@]}" "$pkg")
	(cd "$HERE" && exec env CGO_ENABLED=0 GOCACHE="$GOCACHE_DIR" GOTMPDIR="$GOTMP_DIR" GOFLAGS=-mod=mod go "${cmd[@]}") &
	local gopid=$!
	# Stop the build rather than fill the disk other people's work needs.
	(
		while kill -0 "$gopid" 2>/dev/null; do
			if ! enough_disk; then
				log "disk under $MIN_FREE_GB GB free: stopping the build of $name"
				pkill -TERM -P "$gopid" 2>/dev/null
				kill -TERM "$gopid" 2>/dev/null
				exit 0
			fi
			sleep 5
		done
	) &
	watchdog=$!
	rc=0
	wait "$gopid" || rc=$?
	kill "$watchdog" 2>/dev/null || true
	wait "$watchdog" 2>/dev/null || true
	[ "$rc" = 0 ] || { rm -f "$out.tmp"; die "building $name failed (exit $rc)"; }
	mv "$out.tmp" "$out"
	log "built $name in $(($(date +%s) - start)) s, $(du -sh "$out" | cut -f1); free before: $free; after: $(free_gb "$GOCACHE_DIR") GB (Go cache), $(free_gb "$GOTMP_DIR") GB (work dir); Go cache $(du -sh "$GOCACHE_DIR" | cut -f1)"
	echo "$out"
}

case "${1:-}" in
"" | -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
path)
	pkg_of "${2:-}" >/dev/null || die "usage: $0 path NAME"
	echo "$ROOT/bin/$2"
	exit 0
	;;
clean-gocache)
	rm -rf "$GOCACHE_DIR"
	exit 0
	;;
esac

mkdir -p "$ROOT"
# One build at a time per cache: two would race on the same outputs and
# double the disk the builds use.
exec 9>"$ROOT/.build.lock"
if ! flock -n 9; then
	log "another build holds $ROOT/.build.lock; waiting for it"
	flock 9
fi
names=("$@")
[ "${names[*]}" = all ] && names=(e2e.test kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet agnhost nnp ginkgo sample-apiserver etcd)
for n in "${names[@]}"; do build_one "$n"; done
