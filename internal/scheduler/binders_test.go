package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	fwruntime "github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

// gate holds binding calls until opened and counts those in flight.
type gate struct {
	open chan struct{}

	mu       sync.Mutex
	inFlight int
	most     int
}

func (g *gate) counts() (inFlight, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.most
}

// gatedClient is the fake clientset whose pods' Bind waits at the gate, as
// a binding call waits on a busy API server. (The fake's reactors run
// under its lock, so the wait must be outside it.)
type gatedClient struct {
	*fake.Clientset
	g *gate
}

func (c gatedClient) CoreV1() typedcorev1.CoreV1Interface {
	return gatedCore{c.Clientset.CoreV1(), c.g}
}

type gatedCore struct {
	typedcorev1.CoreV1Interface
	g *gate
}

func (c gatedCore) Pods(ns string) typedcorev1.PodInterface {
	return gatedPods{c.CoreV1Interface.Pods(ns), c.g}
}

type gatedPods struct {
	typedcorev1.PodInterface
	g *gate
}

func (p gatedPods) Bind(ctx context.Context, b *v1.Binding, opts metav1.CreateOptions) error {
	p.g.mu.Lock()
	p.g.inFlight++
	p.g.most = max(p.g.most, p.g.inFlight)
	p.g.mu.Unlock()
	defer func() {
		p.g.mu.Lock()
		p.g.inFlight--
		p.g.mu.Unlock()
	}()
	select {
	case <-p.g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.PodInterface.Bind(ctx, b, opts)
}

var _ kubernetes.Interface = gatedClient{}

// TestBindingsInFlightAreBounded: with a backlog of placed pods and a slow
// API server, the scheduler keeps placing pods but has at most Binders
// binding calls in flight, and binds every pod once the server answers.
func TestBindingsInFlightAreBounded(t *testing.T) {
	const pods, binders = 60, 4
	cs := fake.NewClientset(st.MakeNode("n").Capacity(map[string]string{"cpu": "100", "memory": "100Gi", "pods": "110"}).Obj())
	b := &binder{cs: cs, failFirst: map[string]bool{}, binds: map[string]int{}}
	cs.PrependReactor("create", "pods", b.react)
	g := &gate{open: make(chan struct{})}
	client := gatedClient{cs, g}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(client, 0)
	s, err := New(ctx, client, factory, Options{
		Profiles: []fwruntime.Profile{plugins.DefaultProfile()},
		Registry: plugins.NewInTreeRegistry(),
		Binders:  binders,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for i := range pods {
		p := st.MakePod().Name(fmt.Sprintf("p%d", i)).Req(map[string]string{"cpu": "1"}).Obj()
		p.Spec.SchedulerName = "default-scheduler"
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every pod is placed (assumed) while the server holds the binds.
	waitUntil(t, func() bool { return s.Cache().AssumedPodCount() == pods }, "every pod assumed")
	waitUntil(t, func() bool { n, _ := g.counts(); return n == binders }, fmt.Sprintf("%d binds in flight", binders))
	if _, most := g.counts(); most != binders {
		t.Errorf("%d binding calls were in flight at once, want at most %d", most, binders)
	}
	close(g.open)
	waitUntil(t, func() bool {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName == "n" {
				bound++
			}
		}
		return bound == pods
	}, "every pod bound")
	if _, most := g.counts(); most > binders {
		t.Errorf("%d binding calls were in flight at once, want at most %d", most, binders)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 20s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
