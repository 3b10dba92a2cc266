// Package cni writes the node's CNI network configuration: a bridge (cni0)
// with host-local IPAM on the node's pod CIDR, portmap for hostPort, and
// loopback is implied by the runtime. The plugins are Debian's
// containernetworking-plugins in /usr/lib/cni.
package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// Defaults.
const (
	DefaultBridge      = "cni0"
	DefaultNetworkName = "skiff"
	DefaultBinDir      = "/usr/lib/cni"
	// FileName is the config file's name; the runtime loads the first
	// config in its directory in lexical order.
	FileName   = "10-skiff.conflist"
	cniVersion = "1.0.0"
)

// Config describes the network of one node.
type Config struct {
	// PodCIDR is the node's spec.podCIDR (required); PodCIDRs may add an
	// IPv6 range.
	PodCIDRs []string
	// Bridge is the bridge device (default cni0).
	Bridge string
	// Name is the network name (default skiff).
	Name string
	// MTU of the bridge and veths (0: the kernel's default).
	MTU int
	// NoMasquerade leaves traffic from pods to addresses outside the pod
	// CIDR unmasqueraded (by default the bridge plugin masquerades it). The
	// node agent sets it: its pod-routes loop masquerades only traffic that
	// leaves the whole cluster's pod network, so pods on different nodes
	// see each other's own addresses (internal/agent/routes).
	NoMasquerade bool
	// IPAMDataDir is where host-local keeps its leases (default
	// /var/lib/cni/networks). Each agent on a host needs its own: the
	// store is keyed by network name, which every Skiff node shares.
	IPAMDataDir string
}

// Generate returns the conflist JSON.
func Generate(c Config) ([]byte, error) {
	if len(c.PodCIDRs) == 0 {
		return nil, fmt.Errorf("cni: no pod CIDR")
	}
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if c.Name == "" {
		c.Name = DefaultNetworkName
	}
	var ranges [][]map[string]string
	for _, cidr := range c.PodCIDRs {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return nil, fmt.Errorf("cni: pod CIDR %q: %w", cidr, err)
		}
		p = p.Masked()
		gw := p.Addr().Next()
		ranges = append(ranges, []map[string]string{{"subnet": p.String(), "gateway": gw.String()}})
	}
	ipam := map[string]any{"type": "host-local", "ranges": ranges}
	if c.IPAMDataDir != "" {
		ipam["dataDir"] = c.IPAMDataDir
	}
	bridge := map[string]any{
		"type":             "bridge",
		"bridge":           c.Bridge,
		"isDefaultGateway": true,
		"ipMasq":           !c.NoMasquerade,
		"hairpinMode":      true,
		// isDefaultGateway makes the bridge's address each pod's default
		// route, so IPAM adds no routes of its own (a second default
		// route would fail with "file exists").
		"ipam": ipam,
	}
	if c.MTU > 0 {
		bridge["mtu"] = c.MTU
	}
	conf := map[string]any{
		"cniVersion": cniVersion,
		"name":       c.Name,
		"plugins": []any{
			bridge,
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// Write writes the config into dir (created if missing) through a
// temporary file and a rename, and reports whether the file changed.
func Write(dir string, c Config) (bool, error) {
	b, err := Generate(c)
	if err != nil {
		return false, err
	}
	path := filepath.Join(dir, FileName)
	if old, err := os.ReadFile(path); err == nil && string(old) == string(b) {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("cni: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return false, fmt.Errorf("cni: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, fmt.Errorf("cni: %w", err)
	}
	return true, nil
}
