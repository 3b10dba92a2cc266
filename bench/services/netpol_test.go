package services_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/netpol"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// BenchmarkNetworkPolicyApply: a real API server with 100 pods on the
// node; the time from a NetworkPolicy's create call returning to its rule
// being in the kernel (the enforcer's nft transaction done), 30 policies
// 300 ms apart, with the enforcer's defaults.
func BenchmarkNetworkPolicyApply(b *testing.B) {
	_, runner := node(b, "skn")
	cluster := testapiserver.Start(b)
	client := cluster.Clientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const pods = 100
	for i := 0; i < pods; i++ {
		p, err := client.CoreV1().Pods("default").Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Labels: map[string]string{"app": fmt.Sprintf("pod-%d", i)}},
			Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ip := fmt.Sprintf("10.42.0.%d", 2+i)
		p.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}}}
		if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	rec := &recorder{NFT: runner, waiters: map[string]chan time.Time{}}
	e := netpol.New(client, netpol.Options{NodeName: "n1", Runner: rec})
	go func() { _ = e.Start(ctx) }()
	<-e.Ready()
	samples := 30
	var lat []time.Duration
	for i := 0; i < b.N*samples; i++ {
		time.Sleep(300 * time.Millisecond)
		cidr := fmt.Sprintf("198.18.%d.0/24", i%256)
		done := rec.wait("ip saddr " + cidr)
		np := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("np-%d", i)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("pod-%d", i%pods)}},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}}}},
			},
		}
		if _, err := client.NetworkingV1().NetworkPolicies("default").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		select {
		case t := <-done:
			lat = append(lat, t.Sub(t0))
		case <-time.After(30 * time.Second):
			b.Fatal("policy not programmed in 30 s")
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
}
