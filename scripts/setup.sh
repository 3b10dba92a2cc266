#!/usr/bin/env bash
# Installs what building, running and testing Skiff needs on a Debian machine,
# and nothing that is already there. Safe to run again and again.
set -euo pipefail

cd "$(dirname "$0")/.."

# ---------------------------------------------------------------------------
# Debian packages Skiff needs at run or test time.
# ADD PACKAGES HERE, one a line, with a comment saying what needs them.
# ---------------------------------------------------------------------------
APT_PACKAGES=(
	runc                        # node agent: containerd runs every container with /usr/sbin/runc
	crun                        # node agent: a second OCI runtime, RuntimeClass crun (runc stays the default)
	containernetworking-plugins # node agent: CNI bridge, host-local, portmap, loopback in /usr/lib/cni
	nftables                    # service proxy and pod masquerade rules
	iproute2                    # node agent routes; network namespaces in multi-node tests
	iptables                    # CNI portmap and bridge ipMasq call iptables
	conntrack                   # service proxy: flush stale UDP conntrack entries
	busybox-static              # test images: internal/testing/images packs /bin/busybox
	util-linux                  # nsenter/mount/unshare in agent tests
)

log() { echo "setup: $*" >&2; }

# Go: the toolchain named in go.mod must be available; it is not installed
# from Debian (whose Go is older than the one this module needs).
need_go=$(sed -n 's/^go \([0-9.]*\).*/\1/p' go.mod)
if ! command -v go >/dev/null 2>&1; then
	log "Go ${need_go} or newer is required and 'go' is not on PATH"
	exit 1
fi
have_go=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]; then
	log "Go ${need_go} or newer is required, found ${have_go}"
	exit 1
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$pkg")
	fi
done

if [ "${#missing[@]}" -gt 0 ]; then
	log "installing ${missing[*]}"
	sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1; then
			sudo=(sudo)
		else
			log "need root (or sudo) to install ${missing[*]}"
			exit 1
		fi
	fi
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
log "ok (go ${have_go})"
