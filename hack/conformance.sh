#!/usr/bin/env bash
# Upstream's conformance suite (Kubernetes v1.37.2's e2e.test) against a
# fresh two-node Skiff cluster, offline, in one command. `make conformance`
# runs `hack/conformance.sh all`. See docs/conformance.md.
#
#   hack/conformance.sh all       build, images, up, run (and SERIAL=1: the
#                                 [Serial] pass), summary, down
#   hack/conformance.sh build     skiff, e2e.test, ginkgo, agnhost, nnp,
#                                 sample-apiserver, etcd
#   hack/conformance.sh images    the test images (tarballs under $CACHE/images)
#   hack/conformance.sh up        start the cluster (KUBECONFIG: $WORK/kubeconfig)
#   hack/conformance.sh run       run the suite against it (FOCUS, SKIP, PROCS)
#   hack/conformance.sh summary   summarise $RESULTS/junit.xml by area
#   hack/conformance.sh down      stop the cluster, remove what it made
#
# Settings (environment):
#   FOCUS    ginkgo focus regexp   (default: \[Conformance\])
#   SKIP     ginkgo skip regexp    (default: \[Serial\]|\[Disruptive\])
#   SERIAL=1 `all` also runs the [Serial] [Conformance] tests (one process) after
#            the parallel pass, into $RESULTS/serial
#   PROCS    parallel ginkgo processes (default 4)
#   TIMEOUT  ginkgo's whole-suite timeout (default 6h)
#   KEEP=1   `all` leaves the cluster up
#   SKIFF_BIN  a skiff binary to test instead of building the working tree
#   WORK     cluster state (default /var/tmp/skiff-conformance)
#   RESULTS  JUnit report, logs and summary (default $WORK/results/<time>)
#   API_PORT, DNS_PORT, REGISTRY_PORT  the API server's, cluster DNS's
#            and the image registry's ports on the bridge (default 36443,
#            10053, 36500; a server elsewhere on the host listening on
#            *:PORT takes them too)
#   CACHE    upstream binaries, Debian packages, images
#            (default /var/cache/skiff-upstream; see hack/upstream/build.sh)
#
# The cluster stays off the host's node-agent state, so it needs no
# /tmp/skiff-agent.lock and runs beside other Skiff clusters: `skiff server
# --disable-agent` listens on a bridge of its own (skc0, 10.98.0.1; cluster
# DNS there on port 10053), and both nodes are `skiff agent`s in network
# namespaces of their own (skc-node1 10.98.0.2, skc-node2 10.98.0.3) with
# their own data dirs (so their containerd, CNI leases and images), cgroup
# roots (/skiff-conf-node1, /skiff-conf-node2) and pod network
# (10.244.0.0/16, routed from the host to each node so that the API server
# reaches pods). Their cni0 bridges, nftables and DNS clients stay inside
# their namespaces. Needs root, iproute2, nsenter, python3, apt-get (once,
# for the Debian packages the images carry) and network access to the Go
# module proxy the first time.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
CACHE=${CACHE:-/var/cache/skiff-upstream}
WORK=${WORK:-/var/tmp/skiff-conformance}
RESULTS=${RESULTS:-$WORK/results/$(date -u +%Y%m%dT%H%M%SZ)}
FOCUS=${FOCUS:-'\[Conformance\]'}
SKIP=${SKIP:-'\[Serial\]|\[Disruptive\]'}
PROCS=${PROCS:-4}
TIMEOUT=${TIMEOUT:-6h}
SKIFF=$WORK/bin/skiff
BRIDGE=skc0
HOST_IP=10.98.0.1
API_PORT=${API_PORT:-36443}
DNS_PORT=${DNS_PORT:-10053}
REGISTRY_PORT=${REGISTRY_PORT:-36500}
CLUSTER_CIDR=10.244.0.0/16
NODES=(skc-node1 skc-node2)
NODE_IPS=(10.98.0.2 10.98.0.3)
UPSTREAM=$REPO/hack/upstream/build.sh
KUBE_SRC=/root/go/pkg/mod/k8s.io/kubernetes@$(sed -n 's/^\(require\)\{0,1\}[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\)$/\2/p' hack/upstream/go.mod)
# The Debian packages the images carry that the host may lack (the rest of
# their libraries are the host's, Debian 12 too).
DEBS=(nginx netcat-openbsd socat bind9-dnsutils bind9-host bind9-libs libfstrm0 libjemalloc2 liblmdb0 libmaxminddb0 libprotobuf-c1 libuv1 libwrap0)

# Upstream's busybox (the e2e images are busybox 1.37: its ash passes
# environment variables named like "data-1" on, and says "/bin/sh: can't
# create ..." as the tests expect), built from Debian's copy of the
# upstream tarball (Debian's own build reverts that ash change).
BUSYBOX_VERSION=1.37.0
BUSYBOX_SHA256=3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4

log() { echo "conformance: $*" >&2; }
die() {
	log "$*"
	exit 1
}
kubectl() { "$SKIFF" kubectl --kubeconfig "$WORK/kubeconfig" "$@"; }

wait_for() { # wait_for SECONDS WHAT COMMAND...
	local secs=$1 what=$2
	shift 2
	for _ in $(seq $((secs * 2))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		if [ -s "$WORK/server.pid" ] && ! kill -0 "$(cat "$WORK/server.pid")" 2>/dev/null; then
			tail -5 "$WORK/server.log" >&2
			die "skiff server exited while waiting for $what"
		fi
		sleep 0.5
	done
	die "timed out after ${secs}s waiting for $what (logs in $WORK)"
}

build() {
	mkdir -p "$WORK/bin"
	local t=$SECONDS
	if [ -n "${SKIFF_BIN:-}" ]; then
		cp "$SKIFF_BIN" "$SKIFF.tmp" && mv "$SKIFF.tmp" "$SKIFF"
	else
		make -s build BIN="$SKIFF"
		log "skiff built in $((SECONDS - t)) s"
	fi
	go build -o "$WORK/bin/conformance-registry" ./hack/conformance-registry
	"$UPSTREAM" e2e.test ginkgo agnhost nnp sample-apiserver etcd >/dev/null
}

# busybox_build prints the path of a static upstream busybox, built once.
busybox_build() {
	local dir=$CACHE/busybox-$BUSYBOX_VERSION tmp
	if [ ! -x "$dir/busybox" ]; then
		log "building busybox $BUSYBOX_VERSION (static, defconfig without tc)"
		command -v gcc >/dev/null && command -v make >/dev/null && command -v bzip2 >/dev/null ||
			apt-get install -y -qq gcc make bzip2 libc6-dev >/dev/null
		tmp=$(mktemp -d)
		curl -fsS "http://deb.debian.org/debian/pool/main/b/busybox/busybox_$BUSYBOX_VERSION.orig.tar.bz2" -o "$tmp/src.tar.bz2"
		echo "$BUSYBOX_SHA256  $tmp/src.tar.bz2" | sha256sum -c --quiet >&2 || die "busybox source: checksum mismatch"
		tar -xjf "$tmp/src.tar.bz2" -C "$tmp"
		# tc needs the CBQ headers that newer kernels dropped.
		(cd "$tmp/busybox-$BUSYBOX_VERSION" && make -s defconfig >/dev/null &&
			sed -i 's/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/; s/^CONFIG_TC=y/# CONFIG_TC is not set/' .config &&
			make -s -j"$(nproc)" >/dev/null 2>&1) || die "busybox build failed (in $tmp)"
		mkdir -p "$dir"
		cp "$tmp/busybox-$BUSYBOX_VERSION/busybox" "$dir/busybox.tmp" && mv "$dir/busybox.tmp" "$dir/busybox"
		rm -rf "$tmp"
	fi
	echo "$dir/busybox"
}

images() {
	local debs=$CACHE/debs root=$CACHE/debroot
	# .done holds the package list it was made from: a changed list
	# downloads again.
	if [ "$(cat "$root/.done" 2>/dev/null)" != "${DEBS[*]}" ]; then
		log "downloading Debian packages: ${DEBS[*]}"
		mkdir -p "$debs"
		rm -rf "$root"
		mkdir -p "$root"
		(cd "$debs" && apt-get download "${DEBS[@]}" >/dev/null)
		for d in "$debs"/*.deb; do dpkg -x "$d" "$root"; done
		echo "${DEBS[*]}" >"$root/.done"
	fi
	# The aggregator test's two images only when their programs were built.
	local opt=() p
	for p in sample-apiserver etcd; do
		if [ -x "$("$UPSTREAM" path $p)" ]; then opt+=("-$p" "$("$UPSTREAM" path $p)"); fi
	done
	local busybox
	busybox=$(busybox_build)
	rm -rf "$CACHE/images"
	go run ./hack/conformance-images -out "$CACHE/images" -busybox "$busybox" -deb-root "$root" -kube-images "$KUBE_SRC/test/images" \
		-agnhost "$("$UPSTREAM" path agnhost)" -nnp "$("$UPSTREAM" path nnp)" "${opt[@]}" >&2
}

node_ready() {
	[ "$(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

up() {
	[ "$(id -u)" = 0 ] || die "needs root (containerd, runc, CNI, network namespaces)"
	[ -x "$SKIFF" ] || die "no $SKIFF; run: $0 build"
	[ -d "$CACHE/images" ] || die "no images in $CACHE/images; run: $0 images"
	[ -e "$WORK/server.pid" ] && die "already up ($WORK/server.pid exists); run: $0 down"
	mkdir -p "$WORK"
	# e2e's kubectl tests run `kubectl`: Skiff's own, as users run it.
	printf '#!/bin/sh\nexec %q kubectl "$@"\n' "$SKIFF" >"$WORK/bin/kubectl"
	chmod +x "$WORK/bin/kubectl"

	log "bridge $BRIDGE $HOST_IP/24; nodes ${NODES[*]} at ${NODE_IPS[*]}"
	ip link add "$BRIDGE" type bridge
	ip addr add "$HOST_IP/24" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	local i n
	for i in "${!NODES[@]}"; do
		n=${NODES[$i]}
		ip netns add "$n"
		ip link add "skc-v$i" type veth peer name eth0 netns "$n"
		ip link set "skc-v$i" master "$BRIDGE" up
		ip -n "$n" addr add "${NODE_IPS[$i]}/24" dev eth0
		ip -n "$n" link set lo up
		ip -n "$n" link set eth0 up
		ip -n "$n" route add default via "$HOST_IP"
		ip netns exec "$n" sysctl -qw net.ipv4.ip_forward=1
	done

	log "skiff server (API on $HOST_IP:$API_PORT, no agent), log in $WORK/server.log"
	setsid "$SKIFF" server --data-dir "$WORK/server" --disable-agent \
		--bind-address "$HOST_IP" --https-listen-port "$API_PORT" \
		--etcd-client-port 0 --etcd-peer-port 0 \
		--cluster-dns-port "$DNS_PORT" --cluster-cidr "$CLUSTER_CIDR" \
		>"$WORK/server.log" 2>&1 </dev/null &
	echo $! >"$WORK/server.pid"
	wait_for 180 "the join token" test -s "$WORK/server/token"
	sed "s#server: https://[^ ]*#server: https://$HOST_IP:$API_PORT#" "$WORK/server/admin.kubeconfig" >"$WORK/kubeconfig"
	wait_for 60 "the API server" kubectl get --raw /readyz

	# The images again as a registry, mirroring registry.k8s.io and
	# docker.io for the agents: what the suite pulls (pull policy Always,
	# image volumes) comes from there, the rest is preloaded.
	log "image registry on $HOST_IP:$REGISTRY_PORT, log in $WORK/registry.log"
	setsid "$WORK/bin/conformance-registry" -addr "$HOST_IP:$REGISTRY_PORT" -images "$CACHE/images" -dir "$WORK/registry" \
		>"$WORK/registry.log" 2>&1 </dev/null &
	echo $! >"$WORK/registry.pid"
	wait_for 300 "the image registry" grep -q "^serving on" "$WORK/registry.log"

	for i in "${!NODES[@]}"; do
		n=${NODES[$i]}
		mkdir -p "$WORK/$n/agent/images"
		cp "$CACHE"/images/*.tar "$WORK/$n/agent/images/"
		cat >"$WORK/$n/agent/registries.yaml" <<-EOF
			mirrors:
			  registry.k8s.io:
			    endpoint: ["http://$HOST_IP:$REGISTRY_PORT"]
			  docker.io:
			    endpoint: ["http://$HOST_IP:$REGISTRY_PORT"]
		EOF
		log "skiff agent $n in its namespace, log in $WORK/$n.log"
		nsenter --net="/run/netns/$n" setsid "$SKIFF" agent --data-dir "$WORK/$n" \
			--server "https://$HOST_IP:$API_PORT" --token "$(cat "$WORK/server/token")" \
			--node-name "$n" --node-ip "${NODE_IPS[$i]}" --cgroup-root "/skiff-conf-$n" \
			--cluster-cidr "$CLUSTER_CIDR" \
			--image-gc-high-threshold 100 --eviction-hard 'memory.available<100Mi' \
			>"$WORK/$n.log" 2>&1 </dev/null &
		echo $! >"$WORK/$n.pid"
	done
	local cidr
	for i in "${!NODES[@]}"; do
		n=${NODES[$i]}
		wait_for 300 "node $n Ready" node_ready "$n"
		cidr=$(kubectl get node "$n" -o jsonpath='{.spec.podCIDR}')
		[ -n "$cidr" ] || die "node $n has no podCIDR"
		# The API server reaches pods (webhooks, aggregated APIs, proxy).
		ip route replace "$cidr" via "${NODE_IPS[$i]}" dev "$BRIDGE"
		echo "$cidr" >>"$WORK/routes"
	done
	kubectl get nodes -o wide >&2
	log "up: export KUBECONFIG=$WORK/kubeconfig"
}

run_suite() { # run_suite DIR FOCUS SKIP PROCS
	local dir=$1 focus=$2 skip=$3 procs=$4
	mkdir -p "$dir"
	log "e2e: focus '$focus' skip '$skip', $procs processes; output in $dir"
	local t=$SECONDS rc=0
	PATH="$WORK/bin:$PATH" KUBECONFIG="$WORK/kubeconfig" "$("$UPSTREAM" path ginkgo)" \
		--procs="$procs" --timeout="$TIMEOUT" --focus="$focus" --skip="$skip" \
		--no-color --silence-skips --output-dir="$dir" --junit-report=junit.xml \
		"$("$UPSTREAM" path e2e.test)" -- \
		--kubeconfig="$WORK/kubeconfig" --provider=skeleton --kubectl-path="$WORK/bin/kubectl" \
		--report-dir="$dir/e2e" --e2e-output-dir="$dir/e2e" --dump-logs-on-failure=false \
		>"$dir/e2e.log" 2>&1 || rc=$?
	log "e2e finished in $((SECONDS - t)) s (exit $rc)"
	summary "$dir" | tee "$dir/summary.md"
}

# summary DIR: passed/failed/skipped per area ([sig-*]) from DIR/junit.xml,
# then every failure's name and first line.
summary() {
	python3 - "$1/junit.xml" <<'EOF'
import re, sys, collections
import xml.etree.ElementTree as ET
cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
areas = collections.defaultdict(collections.Counter)
failures = []
for c in cases:
    name = c.get("name", "")
    m = re.search(r"\[sig-([a-z-]+)\]", name)
    if not m or not name.startswith("[It]"):
        continue  # suite setup/teardown and report nodes
    if c.find("skipped") is not None:
        msg = c.find("skipped").get("message", "")
        if msg.strip() == "skipped":
            continue  # not selected by focus/skip
        status = "skipped"
    elif c.find("failure") is not None or c.find("error") is not None:
        f = c.find("failure") if c.find("failure") is not None else c.find("error")
        failures.append((m.group(1), name, (f.get("message") or f.text or "").strip().splitlines()[:1]))
        status = "failed"
    else:
        status = "passed"
    areas[m.group(1)][status] += 1
print("| area | passed | failed | skipped |")
print("|---|---|---|---|")
tot = collections.Counter()
for a in sorted(areas):
    c = areas[a]
    tot.update(c)
    print(f"| {a} | {c['passed']} | {c['failed']} | {c['skipped']} |")
print(f"| **total** | {tot['passed']} | {tot['failed']} | {tot['skipped']} |")
if failures:
    print()
    print("Failures:")
    for area, name, first in sorted(failures):
        print(f"- {name}: {first[0] if first else ''}")
EOF
}

run() {
	[ -e "$WORK/server.pid" ] || die "not up; run: $0 up"
	run_suite "$RESULTS" "$FOCUS" "$SKIP" "$PROCS"
}

run_serial() {
	# The labels come last in a test's text, in either order.
	run_suite "$RESULTS/serial" '\[Serial\].*\[Conformance\]|\[Conformance\].*\[Serial\]' '\[Disruptive\]' 1
}

stop_pid() { # stop_pid FILE: SIGTERM, SIGKILL after 30 s
	local f=$1 pid
	[ -s "$f" ] || return 0
	pid=$(cat "$f")
	if kill -TERM "$pid" 2>/dev/null; then
		for _ in $(seq 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

# kill_under DIR: the processes whose command line names DIR (an agent's
# containerd and runc shims).
kill_under() {
	local d=$1 p
	for p in /proc/[0-9]*; do
		if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "$d/"; then
			kill -KILL "${p#/proc/}" 2>/dev/null || true
		fi
	done
}

down() {
	local n p cg
	for n in "${NODES[@]}"; do stop_pid "$WORK/$n.pid"; done
	stop_pid "$WORK/server.pid"
	stop_pid "$WORK/registry.pid"
	for n in "${NODES[@]}"; do
		kill_under "$WORK/$n"
		# The pods' processes, by their cgroups (every hierarchy).
		for cg in /sys/fs/cgroup/*/"skiff-conf-$n" /sys/fs/cgroup/"skiff-conf-$n"; do
			[ -d "$cg" ] || continue
			find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r p; do kill -KILL "$p" 2>/dev/null || true; done
		done
	done
	kill_under "$WORK/server"
	sleep 1
	{ grep -F " $WORK/" /proc/self/mountinfo || true; } | awk '{print $5}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	if [ -s "$WORK/routes" ]; then
		while read -r r; do ip route del "$r" dev "$BRIDGE" 2>/dev/null || true; done <"$WORK/routes"
		rm -f "$WORK/routes"
	fi
	for n in "${NODES[@]}"; do
		ip netns del "$n" 2>/dev/null || true
		find /sys/fs/cgroup -depth -type d -path "*/skiff-conf-$n*" -exec rmdir {} + 2>/dev/null || true
	done
	ip link del "$BRIDGE" 2>/dev/null || true
	rm -rf "$WORK/server" "$WORK/registry" "$WORK/kubeconfig" "${NODES[@]/#/$WORK/}"
	log "down"
}

all() {
	local t=$SECONDS
	build
	log "builds done in $((SECONDS - t)) s"
	images
	[ -e "$WORK/server.pid" ] && down
	[ "${KEEP:-}" = 1 ] || trap down EXIT
	up
	run
	if [ "${SERIAL:-}" = 1 ]; then run_serial; fi
	log "results in $RESULTS"
}

case "${1:-}" in
all) all ;;
build) build ;;
images) images ;;
up) up ;;
run) run ;;
serial) run_serial ;;
summary) summary "${2:-$RESULTS}" ;;
down) down ;;
*) die "usage: $0 all|build|images|up|run|serial|summary [DIR]|down" ;;
esac
