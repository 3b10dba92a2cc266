package routes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/proxy/netnstest"
	"github.com/skiff-sh/skiff/internal/proxy/nft"
)

// TestKernel runs the Manager against a real network namespace: node "a"
// in namespace A is linked by a veth to namespace B (node "b"); node "c"
// is somewhere beyond B. The routes appear, follow a changed InternalIP,
// and go with the Node; the masquerade table is in place.
func TestKernel(t *testing.T) {
	if err := netnstest.Available(); err != nil {
		t.Skipf("kernel test: %v", err)
	}
	nsA, nsB := fmt.Sprintf("skiff-rt-a-%d", os.Getpid()), fmt.Sprintf("skiff-rt-b-%d", os.Getpid())
	for _, line := range []string{
		"ip netns add " + nsA, "ip netns add " + nsB,
		"ip -n " + nsA + " link add va type veth peer name vb netns " + nsB,
		"ip -n " + nsA + " addr add 10.98.0.1/24 dev va", "ip -n " + nsB + " addr add 10.98.0.2/24 dev vb",
		"ip -n " + nsA + " link set va up", "ip -n " + nsB + " link set vb up",
		"ip -n " + nsA + " route add default via 10.98.0.2",
	} {
		if err := netnstest.Sh(line); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = netnstest.Sh("ip netns del " + nsA)
		_ = netnstest.Sh("ip netns del " + nsB)
	})
	ns, err := netns.GetFromName(nsA)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	kernel := NewNetlinkKernelWith(h, nft.NFT{Prefix: []string{"ip", "netns", "exec", nsA}})

	client := fake.NewClientset(
		node("a", 1, "10.98.0.1", "10.42.0.0/24"),
		node("b", 2, "10.98.0.2", "10.42.1.0/24"),
		node("c", 3, "203.0.113.5", "10.42.2.0/24"),
	)
	m := New(client, "a", Options{Kernel: kernel, ResyncPeriod: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	select {
	case <-m.Ready():
	case err := <-done:
		t.Fatalf("Start returned before Ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("not ready in 20s")
	}

	ipRoutes := func() string {
		out, err := exec.Command("ip", "-n", nsA, "route", "show", "proto", fmt.Sprint(Protocol)).CombinedOutput()
		if err != nil {
			t.Fatalf("ip route: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	waitRoutes := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := ipRoutes()
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("routes:\n%s\nwant:\n%s", got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitRoutes("10.42.1.0/24 via 10.98.0.2 dev va \n10.42.2.0/24 via 10.98.0.2 dev va")

	out, err := exec.Command("ip", "netns", "exec", nsA, "nft", "list", "table", "ip", Table).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ip saddr 10.42.0.0/16 ip daddr != 10.42.0.0/16") {
		t.Fatalf("masquerade table: %v\n%s", err, out)
	}

	// Node b's InternalIP changes; node c goes.
	b, _ := client.CoreV1().Nodes().Get(ctx, "b", metav1.GetOptions{})
	b.Status.Addresses[1].Address = "10.98.0.7"
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRoutes("10.42.1.0/24 via 10.98.0.7 dev va")

	// With the last other node gone no route of ours is left, and a route
	// someone else added is not ours to remove.
	if err := netnstest.Sh("ip -n " + nsA + " route add 10.42.9.0/24 via 10.98.0.2"); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRoutes("")
	if out, _ := exec.Command("ip", "-n", nsA, "route", "show", "10.42.9.0/24").CombinedOutput(); !strings.Contains(string(out), "via 10.98.0.2") {
		t.Errorf("a foreign route was touched: %q", out)
	}
}
