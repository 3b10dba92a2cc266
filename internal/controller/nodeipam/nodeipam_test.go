package nodeipam

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

func node(name string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
		n.Spec.PodCIDRs = cidrs
	}
	return n
}

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	recorder *record.FakeRecorder
}

// start runs the controller on a fake clientset seeded with objs, the
// cluster CIDR and mask given, until the test ends.
func start(t *testing.T, cluster string, mask int, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(100)}
	inf := informers.NewSharedInformerFactory(f.client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := New(ctx, controllercontext.Context{
		Client: f.client, Informers: inf, Recorder: f.recorder,
		Options: controllercontext.Options{ClusterCIDR: cluster, NodeCIDRMaskSize: mask},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	inf.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		inf.Shutdown()
	})
	return f
}

// cidrs is every Node's podCIDRs ("-" for none), as "name=cidr,...".
func (f *fixture) cidrs() []string {
	list, err := f.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		v := strings.Join(n.Spec.PodCIDRs, ",")
		if v == "" {
			v = "-"
		}
		if len(n.Spec.PodCIDRs) == 0 && n.Spec.PodCIDR != "" || len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDR != n.Spec.PodCIDRs[0] {
			v += " (podCIDR " + n.Spec.PodCIDR + ")"
		}
		out = append(out, n.Name+"="+v)
	}
	sort.Strings(out)
	return out
}

// waitCIDRs waits until the Nodes' CIDRs are want.
func (f *fixture) waitCIDRs(want []string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.cidrs()
		if cmp.Equal(want, got) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("node CIDRs (-want +got):\n%s", cmp.Diff(want, got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSettled waits until every Node has a pod CIDR.
func (f *fixture) waitSettled() {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.cidrs()
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasSuffix(s, "=-") }) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("nodes without a CIDR after 10s: %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitEvent waits for an event with the given text.
func (f *fixture) waitEvent(want string) {
	f.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-f.recorder.Events:
			if e == want {
				return
			}
		case <-timeout:
			f.t.Fatalf("no event %q", want)
		}
	}
}

func (f *fixture) create(n *corev1.Node) {
	f.t.Helper()
	if _, err := f.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) delete(name string) {
	f.t.Helper()
	if err := f.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func TestAllocation(t *testing.T) {
	cases := []struct {
		name     string
		existing []runtime.Object
		// later are created one at a time once the existing ones are
		// settled (several nodes without a CIDR are served in any order).
		later []*corev1.Node
		want  []string
	}{
		{
			name:  "new nodes get /24s in order",
			later: []*corev1.Node{node("a"), node("b"), node("c")},
			want:  []string{"a=10.42.0.0/24", "b=10.42.1.0/24", "c=10.42.2.0/24"},
		},
		{
			// Rebuilt from the Nodes at start: set blocks are never handed out again.
			name:     "blocks already on nodes are kept and skipped",
			existing: []runtime.Object{node("a", "10.42.0.0/24"), node("b", "10.42.2.0/24"), node("c")},
			later:    []*corev1.Node{node("d")},
			want:     []string{"a=10.42.0.0/24", "b=10.42.2.0/24", "c=10.42.1.0/24", "d=10.42.3.0/24"},
		},
		{
			// skiff simulate sets its own podCIDRs: inside the range they are
			// marked used, outside it they are left alone.
			name:     "simulated nodes' CIDRs",
			existing: []runtime.Object{node("sim-0", "10.42.0.0/24"), node("sim-256", "10.43.0.0/24"), node("v6", "fd00::/64")},
			later:    []*corev1.Node{node("real")},
			want:     []string{"real=10.42.1.0/24", "sim-0=10.42.0.0/24", "sim-256=10.43.0.0/24", "v6=fd00::/64"},
		},
		{
			name:     "podCIDR alone counts",
			existing: []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Spec: corev1.NodeSpec{PodCIDR: "10.42.0.0/24"}}},
			later:    []*corev1.Node{node("new")},
			want:     []string{"new=10.42.1.0/24", "old=- (podCIDR 10.42.0.0/24)"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, "10.42.0.0/16", 24, tc.existing...)
			f.waitSettled()
			for _, n := range tc.later {
				f.create(n)
				f.waitSettled()
			}
			f.waitCIDRs(tc.want)
		})
	}
}

func TestExhaustedAndReleased(t *testing.T) {
	// Two /24 blocks in all.
	f := start(t, "10.42.0.0/23", 24)
	for _, n := range []string{"a", "b"} {
		f.create(node(n))
		f.waitSettled()
	}
	f.waitCIDRs([]string{"a=10.42.0.0/24", "b=10.42.1.0/24"})

	f.create(node("c"))
	f.waitEvent("Normal CIDRNotAvailable Node c status is now: CIDRNotAvailable")
	f.waitCIDRs([]string{"a=10.42.0.0/24", "b=10.42.1.0/24", "c=-"})

	// Deleting a releases its block; c gets it on its next (backed-off) try.
	f.delete("a")
	f.waitCIDRs([]string{"b=10.42.1.0/24", "c=10.42.0.0/24"})
}

func TestMaskSize(t *testing.T) {
	f := start(t, "10.42.0.0/16", 26)
	for _, n := range []string{"a", "b"} {
		f.create(node(n))
		f.waitSettled()
	}
	f.waitCIDRs([]string{"a=10.42.0.0/26", "b=10.42.0.64/26"})
}

func TestBadOptions(t *testing.T) {
	_, err := New(context.Background(), controllercontext.Context{
		Client: fake.NewClientset(), Informers: informers.NewSharedInformerFactory(fake.NewClientset(), 0),
		Options: controllercontext.Options{ClusterCIDR: "10.42.0.0/16", NodeCIDRMaskSize: 8},
	})
	if err == nil || !strings.Contains(err.Error(), "node CIDR mask size 8") {
		t.Errorf("New with mask 8 = %v, want an error about the mask size", err)
	}
}
