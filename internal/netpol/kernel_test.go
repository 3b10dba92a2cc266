package netpol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/proxy/netnstest"
	"github.com/skiff-sh/skiff/internal/proxy/nft"
)

func dial(ns, addr string) error {
	return netnstest.Run(ns, func() error {
		c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = io.ReadAll(c)
		return err
	})
}

// expect polls until dialing gives the wanted outcome (nil or refused):
// both are positive signals, so the wait ends as soon as rules apply.
func expect(t *testing.T, what, ns, addr string, allowed bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := dial(ns, addr)
		if allowed && err == nil {
			return
		}
		if !allowed && errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: dial %s from %s: %v, want allowed=%v", what, addr, ns, err, allowed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKernel enforces policies with real nftables in network namespaces:
// pod1 (prod, app=web) serves; pod2 (prod, role=client) and pod3 (dev,
// role=client, namespace team=dev) are clients; pod3 serves too.
func TestKernel(t *testing.T) {
	if err := netnstest.Available(); err != nil {
		t.Skipf("kernel test needs root, ip and nft: %v", err)
	}
	topo, err := netnstest.New(fmt.Sprintf("skn%d", os.Getpid()), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(topo.Close)
	for _, i := range []int{1, 3} {
		ln, err := netnstest.Serve(topo.Pods[i-1], netnstest.PodIP(i)+":8080", "hi")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	web := netnstest.PodIP(1) + ":8080"
	tool := netnstest.PodIP(3) + ":8080"
	client := fake.NewClientset(
		mkNS("prod", nil), mkNS("dev", map[string]string{"team": "dev"}),
		mkPod("prod", "web", netnstest.PodIP(1), "n1", map[string]string{"app": "web"}, v1.ContainerPort{Name: "http", ContainerPort: 8080}),
		mkPod("prod", "client", netnstest.PodIP(2), "n1", map[string]string{"role": "client"}),
		mkPod("dev", "tool", netnstest.PodIP(3), "n1", map[string]string{"role": "client"}),
	)
	runner := nft.NFT{Prefix: []string{"ip", "netns", "exec", topo.Node}}
	e := New(client, Options{NodeName: "n1", Runner: runner})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	<-e.Ready()
	policies := client.NetworkingV1().NetworkPolicies("prod")

	expect(t, "no policy", topo.Pods[1], web, true)
	expect(t, "no policy", topo.Pods[2], web, true)

	deny := policy("prod", "deny", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}})
	if _, err := policies.Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, "default deny", topo.Pods[1], web, false)
	expect(t, "default deny", topo.Pods[2], web, false)

	allow := policy("prod", "allow-clients", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
			Ports: []networkingv1.NetworkPolicyPort{tcpPort(intstr.FromString("http"))},
		}},
	})
	if _, err := policies.Create(ctx, allow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, "allow by pod label", topo.Pods[1], web, true)
	expect(t, "pod label in another namespace", topo.Pods[2], web, false)

	allow.Spec.Ingress[0].From = append(allow.Spec.Ingress[0].From,
		networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "dev"}}})
	if _, err := policies.Update(ctx, allow, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, "allow by namespace label", topo.Pods[2], web, true)

	egress := policy("prod", "client-egress", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.42.0.0/16", Except: []string{"10.42.1.0/24"}}}},
		}},
	})
	if _, err := policies.Create(ctx, egress, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, "egress to an excepted block", topo.Pods[1], web, false)
	expect(t, "egress inside the block", topo.Pods[1], tool, true)

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
	if err := Cleanup(context.Background(), runner); err != nil {
		t.Fatal(err)
	}
}
