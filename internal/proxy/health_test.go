package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestHealthz: /livez fails once a change has waited more than twice the
// sync period; /healthz also when the node is missing, being deleted or
// tainted for removal, as kube-proxy's.
func TestHealthz(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := New(fake.NewClientset(), Options{NodeName: "n1", Clock: clk, SyncPeriod: 30 * time.Second, Runner: &fakeRunner{}})
	get := func(path string) int {
		rec := httptest.NewRecorder()
		p.HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	p.health.updated(clk.Now())
	steps := []struct {
		name         string
		do           func()
		livez, healz int
	}{
		{"synced, node unknown", func() {}, 200, 503},
		{"node seen", func() { p.node.Store(node) }, 200, 200},
		{"a change waits 59 s", func() { p.changed(clk.Now()); clk.Step(59 * time.Second) }, 200, 200},
		{"a change waits 61 s", func() { clk.Step(2 * time.Second) }, 503, 503},
		{"synced again", func() { p.health.updated(clk.Now()) }, 200, 200},
		{"node tainted for removal", func() {
			n := node.DeepCopy()
			n.Spec.Taints = []v1.Taint{{Key: ToBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}
			p.node.Store(n)
		}, 200, 503},
		{"node being deleted", func() {
			n := node.DeepCopy()
			n.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
			p.node.Store(n)
		}, 200, 503},
	}
	for _, s := range steps {
		s.do()
		if l, h := get("/livez"), get("/healthz"); l != s.livez || h != s.healz {
			t.Errorf("%s: livez %d healthz %d, want %d %d", s.name, l, h, s.livez, s.healz)
		}
	}
}
