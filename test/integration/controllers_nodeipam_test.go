package integration

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/controller/nodeipam"
	"github.com/skiff-sh/skiff/internal/simulate"
)

// runNodeIPAM runs the controller manager with node-ipam-controller alone
// on the cluster CIDR given, until stop (or the end of the test).
func runNodeIPAM(t *testing.T, c *cluster, clusterCIDR string) (stop func()) {
	t.Helper()
	opts := manager.DefaultControllerOptions()
	opts.ClusterCIDR = clusterCIDR
	opts.NodeCIDRMaskSize = 24
	m, err := manager.New(c.Config, manager.Options{
		Controllers: manager.Selection{nodeipam.Name}, Controller: opts, Metrics: e2eMetrics,
	})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// nodeCIDRs is every Node's podCIDRs as "name=cidr" ("-" for none),
// sorted; a podCIDR that disagrees with podCIDRs[0] is shown too.
func nodeCIDRs(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	list, err := cs.CoreV1().Nodes().List(testCtx(t, 10*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		v := strings.Join(n.Spec.PodCIDRs, ",")
		if v == "" {
			v = "-"
		}
		if len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDR != n.Spec.PodCIDRs[0] {
			v += " podCIDR=" + n.Spec.PodCIDR
		}
		out = append(out, n.Name+"="+v)
	}
	sort.Strings(out)
	return out
}

func waitNodeCIDRs(t *testing.T, cs kubernetes.Interface, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := nodeCIDRs(t, cs)
		if cmp.Equal(want, got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node CIDRs after 30s (-want +got):\n%s", cmp.Diff(want, got))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func createNode(t *testing.T, cs kubernetes.Interface, name, podCIDR string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	if _, err := cs.CoreV1().Nodes().Create(testCtx(t, 10*time.Second), n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
}

// TestControllersNodeIPAM: node-ipam-controller, run by the controller
// manager, next to simulated nodes that bring their own pod CIDRs. On a
// cluster CIDR of eight /24s (10.42.0.0/21):
//   - the three simulated nodes keep 10.42.{0,1,2}.0/24, a node that already
//     had 10.42.7.0/24 keeps it, one outside the range (as `skiff simulate`
//     gives its 257th node) is left alone;
//   - new nodes get the free blocks, also after the controller restarts (the
//     blocks in use are rebuilt from the Nodes);
//   - with every block in use a new node gets a CIDRNotAvailable event, and
//     the block of a deleted node goes to it.
func TestControllersNodeIPAM(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	sim := simulate.New(cs, simulate.Options{Nodes: 3, NamePrefix: "sim-", Workers: 2})
	simCtx, simCancel := context.WithCancel(context.Background())
	simDone := make(chan error, 1)
	go func() { simDone <- sim.Start(simCtx) }()
	t.Cleanup(func() {
		simCancel()
		if err := <-simDone; err != nil {
			t.Errorf("simulator: %v", err)
		}
	})
	select {
	case <-sim.Ready():
	case err := <-simDone:
		t.Fatalf("simulator stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("simulated nodes not ready after 60s")
	}
	createNode(t, cs, "old", "10.42.7.0/24")
	createNode(t, cs, "outside", "10.43.0.0/24")
	createNode(t, cs, "real-a", "")

	stop := runNodeIPAM(t, c, "10.42.0.0/21")
	want := []string{"old=10.42.7.0/24", "outside=10.43.0.0/24", "real-a=10.42.3.0/24",
		"sim-0=10.42.0.0/24", "sim-1=10.42.1.0/24", "sim-2=10.42.2.0/24"}
	waitNodeCIDRs(t, cs, want)

	// A new controller rebuilds what is in use from the Nodes.
	stop()
	runNodeIPAM(t, c, "10.42.0.0/21")
	for i, name := range []string{"real-b", "real-c", "real-d"} {
		createNode(t, cs, name, "")
		want = append(want, fmt.Sprintf("%s=10.42.%d.0/24", name, 4+i))
		waitNodeCIDRs(t, cs, want)
	}

	// Full: the next node waits, with upstream's event.
	createNode(t, cs, "real-e", "")
	schedWaitFor(t, 30*time.Second, "a CIDRNotAvailable event for real-e", func() bool {
		// Events about cluster-scoped objects go to the default namespace.
		evs, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(testCtx(t, 10*time.Second), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != "real-e" || e.Reason != nodeipam.ReasonCIDRNotAvailable {
				continue
			}
			if e.Type != corev1.EventTypeNormal || e.Message != "Node real-e status is now: CIDRNotAvailable" || e.Source.Component != "cidrAllocator" {
				t.Fatalf("event %s %q from %q, want Normal \"Node real-e status is now: CIDRNotAvailable\" from cidrAllocator", e.Type, e.Message, e.Source.Component)
			}
			return true
		}
		return false
	})
	waitNodeCIDRs(t, cs, append(slices.Clone(want), "real-e=-"))

	// Deleting a node gives its block to the waiting one.
	if err := cs.CoreV1().Nodes().Delete(testCtx(t, 10*time.Second), "real-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var next []string
	for _, w := range want {
		if !strings.HasPrefix(w, "real-a=") {
			next = append(next, w)
		}
	}
	waitNodeCIDRs(t, cs, append(next, "real-e=10.42.3.0/24"))
}
