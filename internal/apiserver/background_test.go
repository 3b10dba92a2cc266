package apiserver

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/storage"
)

// memStore is a reapStore over a map of key → object.
type memStore struct {
	mu      sync.Mutex
	objs    map[string]runtime.Object
	deleted []string
}

func (m *memStore) ListDeleting(ctx context.Context, prefix string) ([]*storage.CachedObject, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*storage.CachedObject
	for k, o := range m.objs {
		if o.(metav1.Object).GetDeletionTimestamp() != nil {
			out = append(out, storage.NewCachedObject(k, o, 0))
		}
	}
	return out, nil
}

func (m *memStore) Delete(ctx context.Context, key string, out runtime.Object, pre *storage.Preconditions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	m.deleted = append(m.deleted, key)
	sort.Strings(m.deleted)
	return nil
}

func (m *memStore) gone() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.deleted...)
}

// waitForTicker blocks until the component has made its ticker, so that a
// Step reaches it.
func waitForTicker(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the component never started its ticker")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReaper(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(start.Add(d)); return &t }
	pod := func(name string, deletion *metav1.Time, finalizers ...string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", DeletionTimestamp: deletion, Finalizers: finalizers}}
	}
	store := &memStore{objs: map[string]runtime.Object{
		"running":       pod("running", nil),
		"grace-over":    pod("grace-over", at(time.Second)),
		"grace-left":    pod("grace-left", at(time.Hour)),
		"held":          pod("held", at(time.Second), "example.com/hold"),
		"grace-over-2s": pod("grace-over-2s", at(2*time.Second)),
	}}
	clk := clocktesting.NewFakeClock(start)
	swept := make(chan struct{}, 1)
	r := &reaper{targets: []reapTarget{{name: "pods", store: store, prefix: "/registry/pods/"}}, clock: clk, interval: 2 * time.Second,
		swept: func() { swept <- struct{}{} }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()

	waitForTicker(t, clk)
	clk.Step(2 * time.Second)
	select {
	case <-swept:
	case <-time.After(10 * time.Second):
		t.Fatal("no sweep after one interval")
	}
	if diff := cmp.Diff([]string{"grace-over", "grace-over-2s"}, store.gone()); diff != "" {
		t.Errorf("reaped (-want +got):\n%s", diff)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}

// fakeEtcd answers the compactor: the revision grows by one each Get.
type fakeEtcd struct {
	mu        sync.Mutex
	rev       int64
	compacted []int64
}

func (f *fakeEtcd) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev += 10
	return &clientv3.GetResponse{Header: &etcdserverpb.ResponseHeader{Revision: f.rev}}, nil
}

func (f *fakeEtcd) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compacted = append(f.compacted, rev)
	return &clientv3.CompactResponse{}, nil
}

// TestCompactor checks that each tick compacts to the revision seen at
// the tick before (nothing at the first).
func TestCompactor(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	etcd := &fakeEtcd{}
	compacted := make(chan int64, 3)
	c := &compactor{etcd: etcd, clock: clk, interval: 5 * time.Minute, compacted: func(rev int64) { compacted <- rev }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()

	waitForTicker(t, clk)
	var got []int64
	for len(got) < 2 {
		clk.Step(5 * time.Minute)
		select {
		case rev := <-compacted:
			got = append(got, rev)
		case <-time.After(100 * time.Millisecond):
			// The first tick only reads a revision; step again.
		}
	}
	if diff := cmp.Diff([]int64{10, 20}, got); diff != "" {
		t.Errorf("compacted revisions (-want +got):\n%s", diff)
	}
}

// TestCompactorDisabled: a negative interval never compacts and returns
// when ctx is done.
func TestCompactorDisabled(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := &compactor{etcd: &fakeEtcd{}, clock: clk, interval: -1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if clk.HasWaiters() {
		t.Error("a disabled compactor made a ticker")
	}
}
