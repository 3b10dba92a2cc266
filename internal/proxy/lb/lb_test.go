package lb

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func lbSvc(name string, age int, ip string, ports ...int32) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+age), 0))},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
	}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Protocol: v1.ProtocolTCP, Port: p})
	}
	if ip != "" {
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
	}
	return s
}

func TestParseRange(t *testing.T) {
	for in, want := range map[string]Range{
		"192.168.50.0/30":             {First: mustAddr("192.168.50.1"), Last: mustAddr("192.168.50.2")},
		"192.168.50.10-192.168.50.12": {First: mustAddr("192.168.50.10"), Last: mustAddr("192.168.50.12")},
		"10.0.0.5":                    {First: mustAddr("10.0.0.5"), Last: mustAddr("10.0.0.5")},
		"fd00:50::/64":                {First: mustAddr("fd00:50::1"), Last: mustAddr("fd00:50::ffff:ffff:ffff:ffff")},
		"fd00:50::5-fd00:50::9":       {First: mustAddr("fd00:50::5"), Last: mustAddr("fd00:50::9")},
	} {
		got, err := ParseRange(in)
		if err != nil || got != want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "10.0.0.9-10.0.0.1", "10.0.0.1-fd00::1"} {
		if _, err := ParseRange(bad); err == nil {
			t.Errorf("ParseRange(%q) accepted", bad)
		}
	}
	if got, err := ParseRanges("10.9.0.1-10.9.0.2, fd00:50::/120"); err != nil || len(got) != 2 || !got[1].v6() {
		t.Errorf("ParseRanges dual = %v, %v", got, err)
	}
	if _, err := ParseRanges("10.9.0.1,10.9.0.2"); err == nil {
		t.Error("ParseRanges accepted two IPv4 ranges")
	}
}

func TestPlan(t *testing.T) {
	pool, _ := ParseRange("10.9.0.1-10.9.0.2")
	one, _ := ParseRange("192.168.1.5")
	v6pool, _ := ParseRange("fd00:50::1-fd00:50::2")
	tests := []struct {
		name string
		pool Range
		svcs []*v1.Service
		want map[string]string
	}{
		{name: "first free address", pool: pool, svcs: []*v1.Service{lbSvc("a", 0, "", 80)}, want: map[string]string{"default/a": "10.9.0.1"}},
		{name: "kept address is not rewritten", pool: pool, svcs: []*v1.Service{lbSvc("a", 0, "10.9.0.2", 80)}, want: map[string]string{}},
		{name: "ports that do not clash share an address", pool: one, svcs: []*v1.Service{lbSvc("a", 0, "", 80), lbSvc("b", 1, "", 443)},
			want: map[string]string{"default/a": "192.168.1.5", "default/b": "192.168.1.5"}},
		{name: "a clash stays pending; the older wins", pool: one, svcs: []*v1.Service{lbSvc("new", 5, "", 80), lbSvc("old", 1, "", 80)},
			want: map[string]string{"default/old": "192.168.1.5", "default/new": ""}},
		{name: "no longer a load balancer releases", pool: pool, svcs: []*v1.Service{func() *v1.Service {
			s := lbSvc("a", 0, "10.9.0.1", 80)
			s.Spec.Type = v1.ServiceTypeClusterIP
			return s
		}()}, want: map[string]string{"default/a": ""}},
		{name: "address outside the pool is replaced", pool: pool, svcs: []*v1.Service{lbSvc("a", 0, "1.2.3.4", 80)}, want: map[string]string{"default/a": "10.9.0.1"}},
		{name: "an ipv6 pool serves the services with ipv6", pool: v6pool, svcs: []*v1.Service{
			lbSvc("v4only", 0, "10.9.0.1", 80), dualSvc(lbSvc("dual", 1, "10.9.0.1", 443))},
			want: map[string]string{"default/dual": "fd00:50::1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Plan(tc.svcs, tc.pool)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllocator(t *testing.T) {
	client := fake.NewClientset(lbSvc("web", 0, "", 80))
	pool, _ := ParseRange("10.9.0.1-10.9.0.2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = New(client, pool).Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err == nil && currentIP(s) == "10.9.0.1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status not written: %v %v", s.Status, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func dualSvc(s *v1.Service) *v1.Service {
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	return s
}

// TestAllocatorDualStack: with an IPv4 and an IPv6 pool, a dual-stack
// Service gets an address of each family, in the order of its families; an
// IPv4 one gets only the IPv4 address.
func TestAllocatorDualStack(t *testing.T) {
	dual := dualSvc(lbSvc("dual", 0, "", 80))
	dual.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
	client := fake.NewClientset(dual, lbSvc("v4", 1, "", 80))
	pools, err := ParseRanges("10.9.0.1-10.9.0.2,fd00:50::/120")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = New(client, pools...).Start(ctx) }()
	want := map[string][]string{"dual": {"fd00:50::1", "10.9.0.1"}, "v4": {"10.9.0.2"}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string][]string{}
		for name := range want {
			s, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ing := range s.Status.LoadBalancer.Ingress {
				got[name] = append(got[name], ing.IP)
			}
		}
		if cmp.Diff(want, got) == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingress (-want +got):\n%s", cmp.Diff(want, got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
