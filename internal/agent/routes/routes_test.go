package routes

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, created int, ip string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))}}
	n.Spec.PodCIDRs = cidrs
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

func TestCompute(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		want  []Target
	}{
		{
			name:  "every other node's pod CIDR via its InternalIP",
			nodes: []*corev1.Node{node("a", 1, "192.0.2.2", "10.42.0.0/24"), node("b", 2, "10.99.0.2", "10.42.1.0/24"), node("c", 3, "10.99.0.3", "10.42.2.0/24")},
			want: []Target{
				{Node: "b", Dst: pfx("10.42.1.0/24"), NodeIP: addr("10.99.0.2")},
				{Node: "c", Dst: pfx("10.42.2.0/24"), NodeIP: addr("10.99.0.3")},
			},
		},
		{
			name: "no pod CIDR, no InternalIP, IPv6 only: skipped",
			nodes: []*corev1.Node{
				node("a", 1, "192.0.2.2", "10.42.0.0/24"), node("b", 2, "10.99.0.2"), node("c", 3, "", "10.42.2.0/24"),
				node("d", 4, "fd00::4", "10.42.3.0/24"), node("e", 5, "10.99.0.5", "fd42::/64"),
			},
		},
		{
			name: "an overlap with our own CIDR and a CIDR claimed twice",
			nodes: []*corev1.Node{
				node("a", 1, "192.0.2.2", "10.42.0.0/24"), node("b", 2, "10.99.0.2", "10.42.0.0/25"),
				node("d", 4, "10.99.0.4", "10.42.5.0/24"), node("c", 3, "10.99.0.3", "10.42.5.0/24"),
			},
			want: []Target{{Node: "c", Dst: pfx("10.42.5.0/24"), NodeIP: addr("10.99.0.3")}},
		},
		{
			name:  "only the legacy podCIDR field, not masked",
			nodes: []*corev1.Node{node("a", 1, "192.0.2.2"), {ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: corev1.NodeSpec{PodCIDR: "10.42.7.9/24"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.99.0.2"}}}}},
			want:  []Target{{Node: "b", Dst: pfx("10.42.7.0/24"), NodeIP: addr("10.99.0.2")}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Compute("a", tc.nodes), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("Compute (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	// The kernel's view: 10.99.0.0/24 is attached (link 4), everything
	// else goes through 10.99.0.1; 10.99.0.9 is ours.
	resolve := func(a netip.Addr) (Nexthop, error) {
		switch {
		case a == addr("10.99.0.9"):
			return Nexthop{Local: true}, nil
		case a == addr("203.0.113.1"):
			return Nexthop{}, errors.New("network is unreachable")
		case pfx("10.99.0.0/24").Contains(a):
			return Nexthop{LinkIndex: 4}, nil
		}
		return Nexthop{Gateway: addr("10.99.0.1"), LinkIndex: 4}, nil
	}
	targets := []Target{
		{Node: "b", Dst: pfx("10.42.1.0/24"), NodeIP: addr("10.99.0.2")},
		{Node: "server", Dst: pfx("10.42.0.0/24"), NodeIP: addr("192.0.2.2")},
		{Node: "self-ip", Dst: pfx("10.42.3.0/24"), NodeIP: addr("10.99.0.9")},
		{Node: "far", Dst: pfx("10.42.4.0/24"), NodeIP: addr("203.0.113.1")},
	}
	existing := []Route{
		{Dst: pfx("10.42.1.0/24"), Gateway: addr("10.99.0.2"), LinkIndex: 4},  // right already
		{Dst: pfx("10.42.0.0/24"), Gateway: addr("10.99.0.7"), LinkIndex: 4},  // node moved
		{Dst: pfx("10.42.9.0/24"), Gateway: addr("10.99.0.9"), LinkIndex: 4},  // node gone
		{Dst: pfx("10.42.4.0/24"), Gateway: addr("10.99.0.1"), LinkIndex: 4},  // no longer reachable
		{Dst: pfx("10.42.1.0/24"), Gateway: addr("10.99.0.20"), LinkIndex: 4}, // duplicate
	}
	replace, del, skipped := Plan(targets, existing, resolve)
	cmpOpts := []cmp.Option{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })}
	wantReplace := []Route{{Dst: pfx("10.42.0.0/24"), Gateway: addr("10.99.0.1"), LinkIndex: 4}}
	if diff := cmp.Diff(wantReplace, replace, cmpOpts...); diff != "" {
		t.Errorf("replace (-want +got):\n%s", diff)
	}
	wantDel := []Route{
		{Dst: pfx("10.42.1.0/24"), Gateway: addr("10.99.0.20"), LinkIndex: 4},
		{Dst: pfx("10.42.4.0/24"), Gateway: addr("10.99.0.1"), LinkIndex: 4},
		{Dst: pfx("10.42.9.0/24"), Gateway: addr("10.99.0.9"), LinkIndex: 4},
	}
	if diff := cmp.Diff(wantDel, del, cmpOpts...); diff != "" {
		t.Errorf("delete (-want +got):\n%s", diff)
	}
	if len(skipped) != 2 {
		t.Errorf("skipped = %v, want the local InternalIP and the unreachable one", skipped)
	}

	// Applying the plan gives a plan with nothing to do.
	after := []Route{
		{Dst: pfx("10.42.1.0/24"), Gateway: addr("10.99.0.2"), LinkIndex: 4},
		{Dst: pfx("10.42.0.0/24"), Gateway: addr("10.99.0.1"), LinkIndex: 4},
	}
	if replace, del, _ := Plan(targets, after, resolve); len(replace)+len(del) != 0 {
		t.Errorf("second plan: replace %v delete %v, want nothing", replace, del)
	}
}

func TestMasqueradeRules(t *testing.T) {
	want := `add table ip skiff-routes
delete table ip skiff-routes
table ip skiff-routes {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr 10.42.0.0/16 ip daddr != 10.42.0.0/16 ip daddr != 224.0.0.0/4 masquerade fully-random
	}
}
`
	if diff := cmp.Diff(want, MasqueradeRules(pfx("10.42.0.0/16"))); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}
