#!/usr/bin/env bash
# A two-node Skiff cluster on this machine: `skiff server` with its own node
# agent on the host, and a second node (`skiff agent`, joined with the
# server's token) in a network namespace linked to the host by a veth pair.
#
#   hack/two-node-cluster.sh up     start it (prints how to use kubectl)
#   hack/two-node-cluster.sh down   stop it and remove everything it made
#
# Settings (environment): SKIFF (binary; default bin/skiff, built if
# missing), DIR (state and logs; default /tmp/skiff-two-node), API_PORT
# (6443), NETNS (skiff-node2), NODE2 (node name; node2), HOST_IP/NODE2_IP
# (the veth pair's addresses; 10.99.0.1 and 10.99.0.2, /24).
#
# Needs root, iproute2, nsenter and nftables. A node agent's state is
# host-wide (see docs/architecture.md, "Testing"): do not run this beside
# another Skiff cluster with an agent (make test's e2e tests among them);
# the e2e tests take /tmp/skiff-agent.lock, and so does this script while
# the cluster is up (the lock is released by `down`).
set -euo pipefail

cd "$(dirname "$0")/.."
SKIFF=${SKIFF:-$PWD/bin/skiff}
DIR=${DIR:-/tmp/skiff-two-node}
API_PORT=${API_PORT:-6443}
NETNS=${NETNS:-skiff-node2}
NODE2=${NODE2:-node2}
HOST_IP=${HOST_IP:-10.99.0.1}
NODE2_IP=${NODE2_IP:-10.99.0.2}
VETH_HOST=${VETH_HOST:-skiff-veth0}
LOCK=/tmp/skiff-agent.lock

log() { echo "two-node: $*" >&2; }
die() { log "$*"; exit 1; }
kubectl() { "$SKIFF" kubectl --kubeconfig "$DIR/server/admin.kubeconfig" "$@"; }

wait_for() { # wait_for SECONDS WHAT COMMAND...
	local secs=$1 what=$2
	shift 2
	for _ in $(seq $((secs * 5))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	die "timed out after ${secs}s waiting for $what (logs in $DIR)"
}

up() {
	[ "$(id -u)" = 0 ] || die "needs root (containerd, runc, CNI, network namespaces)"
	[ -x "$SKIFF" ] || { log "building $SKIFF"; make build BIN="$SKIFF"; }
	[ -e "$DIR/server.pid" ] && die "already up ($DIR/server.pid exists); run: $0 down"
	mkdir -p "$DIR"
	# Hold the host's agent lock for as long as the cluster runs: a
	# background flock whose pid `down` ends.
	flock -n "$LOCK" -c "echo \$\$ >'$DIR/lock.pid'; exec sleep infinity" </dev/null >/dev/null 2>&1 &
	sleep 0.3
	[ -s "$DIR/lock.pid" ] && kill -0 "$(cat "$DIR/lock.pid")" 2>/dev/null ||
		die "another node agent holds $LOCK (a test run or another cluster)"

	log "network namespace $NETNS: $NODE2_IP/24 <-> host $HOST_IP/24"
	ip netns add "$NETNS"
	ip link add "$VETH_HOST" type veth peer name eth0 netns "$NETNS"
	ip addr add "$HOST_IP/24" dev "$VETH_HOST"
	ip link set "$VETH_HOST" up
	ip -n "$NETNS" addr add "$NODE2_IP/24" dev eth0
	ip -n "$NETNS" link set lo up
	ip -n "$NETNS" link set eth0 up
	ip -n "$NETNS" route add default via "$HOST_IP"
	sysctl -qw net.ipv4.ip_forward=1

	log "skiff server (API on :$API_PORT), logs in $DIR/server.log"
	setsid "$SKIFF" server --data-dir "$DIR/server" --https-listen-port "$API_PORT" >"$DIR/server.log" 2>&1 &
	echo $! >"$DIR/server.pid"
	wait_for 180 "the server and its node" grep -q "Node agent ready" "$DIR/server.log"
	wait_for 30 "the join token" test -s "$DIR/server/token"
	# Agents dial the address the API server advertises (the host's
	# primary address, in its serving certificate).
	local adv
	adv=$(kubectl get endpoints kubernetes -o jsonpath='{.subsets[0].addresses[0].ip}')
	[ -n "$adv" ] || die "the server advertises no address"

	log "skiff agent $NODE2 in $NETNS, joining https://$adv:$API_PORT, logs in $DIR/$NODE2.log"
	nsenter --net="/run/netns/$NETNS" setsid "$SKIFF" agent --data-dir "$DIR/$NODE2" \
		--server "https://$adv:$API_PORT" --token "$(cat "$DIR/server/token")" \
		--node-name "$NODE2" --node-ip "$NODE2_IP" --cgroup-root "/skiff-$NODE2" \
		>"$DIR/$NODE2.log" 2>&1 &
	echo $! >"$DIR/$NODE2.pid"
	wait_for 180 "node $NODE2 Ready" sh -c "'$SKIFF' kubectl --kubeconfig '$DIR/server/admin.kubeconfig' get node '$NODE2' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
	kubectl get nodes -o wide
	cat <<EOF

Up. Use it with:
  export KUBECONFIG=$DIR/server/admin.kubeconfig
  $SKIFF kubectl get nodes
Stop it with: $0 down
EOF
}

stop_pid() { # stop_pid FILE: SIGTERM, SIGKILL after 30 s
	local f=$1 pid
	[ -s "$f" ] || return 0
	pid=$(cat "$f")
	if kill -TERM "$pid" 2>/dev/null; then
		for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

# kill_under DIR: the processes whose command line names DIR (containerd
# and the runc shims of an agent whose state is there; the pods'
# containers are their children and go with them).
kill_under() {
	local d=$1 p
	for p in /proc/[0-9]*; do
		if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "$d/"; then
			kill -KILL "${p#/proc/}" 2>/dev/null || true
		fi
	done
}

down() {
	if [ -s "$DIR/server.pid" ] && kill -0 "$(cat "$DIR/server.pid")" 2>/dev/null; then
		log "deleting every pod so that their containers and addresses go"
		kubectl delete pods --all --all-namespaces --grace-period=1 --timeout=60s >/dev/null 2>&1 || true
	fi
	stop_pid "$DIR/$NODE2.pid"
	stop_pid "$DIR/server.pid"
	kill_under "$DIR/$NODE2"
	kill_under "$DIR/server"
	# Mounts the agents left (pod volumes, containerd's snapshots).
	{ grep -F " $DIR/" /proc/self/mountinfo || true; } | awk '{print $5}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	ip netns del "$NETNS" 2>/dev/null || true
	ip link del "$VETH_HOST" 2>/dev/null || true
	# The host agent's rules and routes (the namespace's went with it).
	for t in skiff-proxy skiff-netpol skiff-routes; do nft delete table ip "$t" 2>/dev/null || true; done
	ip route flush proto 83 2>/dev/null || true
	ip link del cni0 2>/dev/null || true
	# The second node's (now empty) cgroups, in every hierarchy.
	find /sys/fs/cgroup -depth -type d -path "*/skiff-$NODE2*" -exec rmdir {} + 2>/dev/null || true
	stop_pid "$DIR/lock.pid"
	rm -rf "$DIR"
	log "down"
}

case "${1:-}" in
up) up ;;
down) down ;;
*) die "usage: $0 up|down" ;;
esac
