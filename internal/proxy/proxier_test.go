package proxy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeRunner keeps the scripts it was given and fails while fail is set.
type fakeRunner struct {
	mu      sync.Mutex
	fail    bool
	scripts []string
	lists   int
}

func (f *fakeRunner) Apply(_ context.Context, script string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("nft: Error: Could not process rule: No such file or directory")
	}
	f.scripts = append(f.scripts, script)
	return nil
}

func (f *fakeRunner) List(context.Context, string, string) (*Existing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return &Existing{Chains: map[string]bool{}, Sets: map[string]bool{}}, nil
}

func (f *fakeRunner) state() (int, int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := ""
	if len(f.scripts) > 0 {
		last = f.scripts[len(f.scripts)-1]
	}
	return len(f.scripts), f.lists, last
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProxierSyncs: a change is programmed; a failing sync leaves the last
// good rules (nothing applied), counts a failure, records a Warning event
// on the Node, and the next sync after recovery relists the table and
// programs the change.
func TestProxierSyncs(t *testing.T) {
	client := fake.NewClientset(svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}))
	runner := &fakeRunner{}
	reg := prometheus.NewRegistry()
	p := New(client, Options{NodeName: "n1", Runner: runner, Metrics: reg, MinSyncPeriod: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Start(ctx) }()
	<-p.Ready()
	if n, lists, last := runner.state(); n != 1 || lists != 1 || !strings.Contains(last, "10.43.0.20 . tcp . 80 : goto reject-chain") {
		t.Fatalf("first sync: %d scripts, %d lists, last:\n%s", n, lists, last)
	}

	runner.mu.Lock()
	runner.fail = true
	runner.mu.Unlock()
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx,
		slice("default", "web", "http", v1.ProtocolTCP, 8080, ep{ip: "10.42.1.2"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a failure counted", func() bool {
		return counterValue(t, reg, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total") >= 1
	})
	waitFor(t, "a SyncProxyRulesFailed event", func() bool {
		evs, _ := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			if e.Reason == "SyncProxyRulesFailed" && e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == "n1" && e.Type == v1.EventTypeWarning {
				return true
			}
		}
		return false
	})

	runner.mu.Lock()
	runner.fail = false
	runner.mu.Unlock()
	waitFor(t, "the change programmed after recovery", func() bool {
		_, _, last := runner.state()
		return strings.Contains(last, "10.43.0.20 . tcp . 80 : goto service-")
	})
	if _, lists, _ := runner.state(); lists < 2 {
		t.Errorf("table listed %d times, want a relist after the failure", lists)
	}
	for _, name := range []string{"kubeproxy_network_programming_duration_seconds", "kubeproxy_sync_proxy_rules_duration_seconds"} {
		if n := counterValue(t, reg, name); n < 2 {
			t.Errorf("%s has %v observations, want at least 2", name, n)
		}
	}
}

// counterValue is a counter's value or a histogram's sample count.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			if m.Histogram != nil {
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// TestProxierServiceCIDRs: traffic to unallocated addresses of every
// ServiceCIDR of the cluster is dropped, not only of the configured range
// (upstream's kube-proxy watches them); one inside the configured range
// adds nothing, and a deleted one is dropped from the rule.
func TestProxierServiceCIDRs(t *testing.T) {
	client := fake.NewClientset(svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}),
		&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.43.0.0/16"}}},
		&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "inside"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.43.8.0/24"}}})
	runner := &fakeRunner{}
	p := New(client, Options{NodeName: "n1", Runner: runner, Metrics: prometheus.NewRegistry(), MinSyncPeriod: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Start(ctx) }()
	<-p.Ready()
	lastHas := func(s string) func() bool {
		return func() bool { _, _, last := runner.state(); return strings.Contains(last, s) }
	}
	waitFor(t, "the configured range dropped", lastHas("cluster-ips-check ip daddr 10.43.0.0/16 drop"))

	extra := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/24", "fd00:96::/112"}}}
	if _, err := client.NetworkingV1().ServiceCIDRs().Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new ServiceCIDR dropped too", lastHas("cluster-ips-check ip daddr { 10.43.0.0/16, 10.96.0.0/24 } drop"))
	if _, _, last := runner.state(); strings.Contains(last, "10.43.8.0/24") || strings.Contains(last, "fd00:96::") {
		t.Errorf("a range inside the configured one or of the other family is in the IPv4 rule:\n%s", last)
	}
	if err := client.NetworkingV1().ServiceCIDRs().Delete(ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted ServiceCIDR gone from the rule", lastHas("cluster-ips-check ip daddr 10.43.0.0/16 drop"))
}
