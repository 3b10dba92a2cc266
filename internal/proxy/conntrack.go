package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ConntrackFlow names UDP flows to forget: to a service address (or, with
// an invalid Dst, any local address: a NodePort) and port, answered by an
// endpoint that is gone.
type ConntrackFlow struct {
	Dst      netip.Addr
	DstPort  int32
	Endpoint netip.Addr
}

// Conntrack deletes stale UDP flows. UDP has no connection to end, so
// without this a client keeps sending to an endpoint that is gone for as
// long as its flow lives (upstream kube-proxy does the same cleanup).
type Conntrack interface {
	DeleteUDP(ctx context.Context, flows []ConntrackFlow) error
}

// ConntrackTool runs the conntrack binary (Prefix as for NFT).
type ConntrackTool struct{ Prefix []string }

// DeleteUDP deletes each flow; "0 flow entries" is not an error.
func (c ConntrackTool) DeleteUDP(ctx context.Context, flows []ConntrackFlow) error {
	var errs []string
	for _, f := range flows {
		args := []string{"-D", "-p", "udp", "--orig-port-dst", fmt.Sprint(f.DstPort), "--reply-src", f.Endpoint.String()}
		if f.Dst.IsValid() {
			args = append(args, "--orig-dst", f.Dst.String())
		}
		if f.Endpoint.Is6() {
			args = append(args, "-f", "ipv6")
		}
		argv := append(append(append([]string(nil), c.Prefix...), "conntrack"), args...)
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "0 flow entries") {
			errs = append(errs, fmt.Sprintf("conntrack %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out))))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// staleUDPFlows compares two snapshots: for every UDP service port, the
// endpoints that traffic could reach before and cannot now, on each of
// the port's addresses and its node port.
func staleUDPFlows(prev, next Input) []ConntrackFlow {
	now := map[string]map[netip.AddrPort]bool{}
	for _, p := range next.Ports {
		if p.Protocol != v1.ProtocolUDP {
			continue
		}
		m := map[netip.AddrPort]bool{}
		for _, ep := range usable(p.Endpoints) {
			m[netip.AddrPortFrom(ep.IP, uint16(ep.Port))] = true
		}
		now[portKey(p)] = m
	}
	var out []ConntrackFlow
	for _, p := range prev.Ports {
		if p.Protocol != v1.ProtocolUDP {
			continue
		}
		for _, ep := range usable(p.Endpoints) {
			if now[portKey(p)][netip.AddrPortFrom(ep.IP, uint16(ep.Port))] {
				continue
			}
			for _, ip := range append(append([]netip.Addr{p.ClusterIP}, p.ExternalIPs...), p.LoadBalancerIPs...) {
				out = append(out, ConntrackFlow{Dst: ip, DstPort: p.Port, Endpoint: ep.IP})
			}
			if p.NodePort != 0 {
				out = append(out, ConntrackFlow{DstPort: p.NodePort, Endpoint: ep.IP})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out
}
