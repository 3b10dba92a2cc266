package containerd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// paths are the files and directories of one agent's containerd.
type paths struct {
	base       string // <data-dir>/agent/containerd
	root       string // persistent data: content, snapshots, metadata
	state      string // runtime state: task bundles, runc state
	socket     string
	config     string
	log        string
	pidFile    string
	hostsDir   string // containerd's hosts.d (config_path), from registries.yaml
	binDir     string // <data-dir>/agent/bin: the shim symlink, first on the child's PATH
	cniConfDir string
	imagesDir  string
	registries string
}

func newPaths(dataDir string) paths {
	agent := filepath.Join(dataDir, "agent")
	base := filepath.Join(agent, "containerd")
	return paths{
		base:       base,
		root:       filepath.Join(base, "root"),
		state:      filepath.Join(base, "state"),
		socket:     filepath.Join(base, "containerd.sock"),
		config:     filepath.Join(base, "config.toml"),
		log:        filepath.Join(base, "containerd.log"),
		pidFile:    filepath.Join(base, "containerd.pid"),
		hostsDir:   filepath.Join(base, "certs.d"),
		binDir:     filepath.Join(agent, "bin"),
		cniConfDir: filepath.Join(agent, "etc", "cni", "net.d"),
		imagesDir:  filepath.Join(agent, "images"),
		registries: filepath.Join(agent, "registries.yaml"),
	}
}

// configInput is what the config file is rendered from.
type configInput struct {
	paths
	Snapshotter  string
	SandboxImage string
	RuncPath     string
	Runtimes     []Runtime // beside runc, each a runc shim with its own BinaryName
	CNIBinDirs   []string
	CNIConfDir   string
	StreamAddr   string
	StreamPort   int
	Auths        map[string]Auth // registry host → credentials
	LogLevel     string
	// RestrictOOMScoreAdj keeps containers' OOM score adjustments at or
	// above containerd's own: needed where the agent cannot lower them (no
	// CAP_SYS_RESOURCE, e.g. this project's build VMs and rootless setups).
	RestrictOOMScoreAdj bool
}

// q quotes a TOML basic string.
func q(s string) string { return strconv.Quote(s) }

func qs(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = q(s)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// renderConfig is containerd's config (version 3 layout, which 2.x reads):
// its own root, state and sockets; plugins a node does not use disabled
// (the other snapshotters, NRI, the TCP and debug servers); CRI with runc
// from the host, cgroupfs, the CNI dirs, the sandbox image, the streaming
// server on loopback and registry settings from hostsDir.
func renderConfig(in configInput) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Written by the skiff agent at every start; edits are overwritten.")
	p("version = 3")
	p("root = %s", q(in.root))
	p("state = %s", q(in.state))
	p("disabled_plugins = %s", qs([]string{
		"io.containerd.nri.v1.nri",
		"io.containerd.snapshotter.v1.btrfs",
		"io.containerd.snapshotter.v1.zfs",
		"io.containerd.snapshotter.v1.devmapper",
		"io.containerd.snapshotter.v1.blockfile",
		"io.containerd.snapshotter.v1.erofs",
		"io.containerd.differ.v1.erofs",
		"io.containerd.tracing.processor.v1.otlp",
		"io.containerd.internal.v1.tracing",
	}))
	p("")
	p("[grpc]")
	p("  address = %s", q(in.socket))
	p("[ttrpc]")
	p("  address = %s", q(in.socket+".ttrpc"))
	p("[debug]")
	p("  level = %s", q(in.LogLevel))
	p("")
	p("[plugins.'io.containerd.internal.v1.opt']")
	p("  path = %s", q(filepath.Join(in.root, "opt")))
	p("")
	p("[plugins.'io.containerd.cri.v1.images']")
	p("  snapshotter = %s", q(in.Snapshotter))
	p("  [plugins.'io.containerd.cri.v1.images'.pinned_images]")
	p("    sandbox = %s", q(in.SandboxImage))
	p("  [plugins.'io.containerd.cri.v1.images'.registry]")
	p("    config_path = %s", q(in.hostsDir))
	for _, host := range sortedKeys(in.Auths) {
		a := in.Auths[host]
		p("    [plugins.'io.containerd.cri.v1.images'.registry.configs.%s.auth]", q(host))
		p("      username = %s", q(a.Username))
		p("      password = %s", q(a.Password))
		p("      auth = %s", q(a.Auth))
		p("      identitytoken = %s", q(a.IdentityToken))
	}
	p("")
	p("[plugins.'io.containerd.cri.v1.runtime']")
	p("  enable_unprivileged_ports = true")
	p("  enable_unprivileged_icmp = true")
	p("  restrict_oom_score_adj = %t", in.RestrictOOMScoreAdj)
	p("  [plugins.'io.containerd.cri.v1.runtime'.containerd]")
	p("    default_runtime_name = 'runc'")
	p("    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]")
	p("      runtime_type = 'io.containerd.runc.v2'")
	p("      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]")
	p("        BinaryName = %s", q(in.RuncPath))
	p("        Root = %s", q(filepath.Join(in.state, "runc")))
	p("        SystemdCgroup = false")
	for _, rt := range in.Runtimes {
		// Another OCI runtime through the same runc v2 shim (it runs any
		// runc-compatible binary), as k3s offers crun: pods choose it by a
		// RuntimeClass whose handler is rt.Name.
		p("    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%s]", q(rt.Name))
		p("      runtime_type = 'io.containerd.runc.v2'")
		p("      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%s.options]", q(rt.Name))
		p("        BinaryName = %s", q(rt.Path))
		p("        Root = %s", q(filepath.Join(in.state, rt.Name)))
		p("        SystemdCgroup = false")
	}
	p("  [plugins.'io.containerd.cri.v1.runtime'.cni]")
	p("    bin_dirs = %s", qs(in.CNIBinDirs))
	p("    conf_dir = %s", q(in.CNIConfDir))
	// containerd brings each pod's lo up itself (netlink) instead of
	// running the CNI loopback plugin: one plugin execution less per pod
	// start and per teardown (bench/podstartup).
	p("    use_internal_loopback = true")
	p("")
	p("[plugins.'io.containerd.grpc.v1.cri']")
	p("  disable_tcp_service = true")
	p("  stream_server_address = %s", q(in.StreamAddr))
	p("  stream_server_port = %s", q(strconv.Itoa(in.StreamPort)))
	p("")
	p("[plugins.'io.containerd.transfer.v1.local']")
	p("  config_path = %s", q(in.hostsDir))
	return b.Bytes()
}

// canLowerOOMScoreAdj reports whether this process holds CAP_SYS_RESOURCE,
// which lowering an OOM score adjustment below its current value needs.
func canLowerOOMScoreAdj() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<24) != 0 // CAP_SYS_RESOURCE
		}
	}
	return false
}

// writeFileAtomic writes data through a temporary file and a rename.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
