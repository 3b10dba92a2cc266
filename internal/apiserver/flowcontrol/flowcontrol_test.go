package flowcontrol

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClassifyBootstrap(t *testing.T) {
	a := NewAPF(Options{})
	node := Request{User: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	cases := []struct {
		name     string
		req      Request
		wantFS   string
		wantPL   string
		wantFlow string
	}{
		{"admin", Request{User: "admin", Groups: []string{"system:masters"}, Verb: "create", Resource: "pods", Namespace: "x", ResourceRequest: true}, "exempt", "exempt", ""},
		{"probe", Request{User: "system:anonymous", Groups: []string{"system:unauthenticated"}, Verb: "get", Path: "/readyz"}, "probes", "exempt", ""},
		{"node lease", withRes(node, "update", "coordination.k8s.io", "leases", "kube-node-lease"), "system-node-high", "node-high", "system:node:n1"},
		{"node status", withRes(node, "patch", "", "nodes", ""), "system-node-high", "node-high", "system:node:n1"},
		{"node reads pods", withRes(node, "list", "", "pods", ""), "system-nodes", "system", "system:node:n1"},
		{"scheduler leader election", Request{User: "system:kube-scheduler", Verb: "update", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", ResourceRequest: true}, "system-leader-election", "leader-election", "system:kube-scheduler"},
		{"scheduler binds", Request{User: "system:kube-scheduler", Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "ns1", ResourceRequest: true}, "kube-scheduler", "workload-high", "ns1"},
		{"kube-system service account", Request{User: "system:serviceaccount:kube-system:foo", Groups: []string{"system:serviceaccounts"}, Verb: "get", Resource: "pods", Namespace: "a", ResourceRequest: true}, "kube-system-service-accounts", "workload-high", "a"},
		{"other service account", Request{User: "system:serviceaccount:app:bot", Groups: []string{"system:serviceaccounts", "system:authenticated"}, Verb: "get", Resource: "pods", Namespace: "app", ResourceRequest: true}, "service-accounts", "workload-low", "system:serviceaccount:app:bot"},
		{"a user", Request{User: "alice", Groups: []string{"system:authenticated"}, Verb: "create", Resource: "configmaps", Namespace: "a", ResourceRequest: true}, "global-default", "global-default", "alice"},
		{"anonymous resource", Request{User: "system:anonymous", Groups: []string{"system:unauthenticated"}, Verb: "list", Resource: "pods", ResourceRequest: true}, "global-default", "global-default", "system:anonymous"},
		{"no groups at all", Request{User: "x", Verb: "list", Resource: "pods", ResourceRequest: true}, "catch-all", "catch-all", "x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a.mu.Lock()
			fs, l := a.classifyLocked(tc.req)
			a.mu.Unlock()
			got := []string{fs.Name, l.name, flowDistinguisher(fs, tc.req)}
			if diff := cmp.Diff([]string{tc.wantFS, tc.wantPL, tc.wantFlow}, got); diff != "" {
				t.Fatalf("schema, level, flow (-want +got):\n%s", diff)
			}
		})
	}
}

func withRes(r Request, verb, group, resource, ns string) Request {
	r.Verb, r.APIGroup, r.Resource, r.Namespace, r.ResourceRequest = verb, group, resource, ns, true
	return r
}

func TestShuffleShard(t *testing.T) {
	for _, tc := range []struct{ deck, hand int }{{64, 8}, {128, 6}, {8, 8}, {1, 1}} {
		for h := uint64(0); h < 2000; h += 7 {
			hand := shuffleShard(h*0x9e3779b97f4a7c15, tc.deck, tc.hand)
			seen := map[int]bool{}
			for _, c := range hand {
				if c < 0 || c >= tc.deck || seen[c] {
					t.Fatalf("deck %d hand %d hash %d: bad hand %v", tc.deck, tc.hand, h, hand)
				}
				seen[c] = true
			}
			if len(hand) != tc.hand {
				t.Fatalf("hand %v, want %d cards", hand, tc.hand)
			}
		}
	}
}

func limited(name string, shares int32, queues, hand, qlen int32) flowcontrolv1.PriorityLevelConfiguration {
	pl := flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: &shares,
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}
	if queues > 0 {
		pl.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
			Queuing: &flowcontrolv1.QueuingConfiguration{Queues: queues, HandSize: hand, QueueLengthLimit: qlen}}
	}
	return pl
}

func schemaFor(name, level string, precedence int32, group string, byUser bool) flowcontrolv1.FlowSchema {
	fs := flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
		MatchingPrecedence:         precedence,
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: group}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}, ClusterScope: true}},
		}},
	}}
	if byUser {
		fs.Spec.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType}
	}
	return fs
}

// blocker runs requests that hold their seat until released.
type blocker struct {
	a       *APF
	release chan struct{}
	started chan string
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
}

func newBlocker(a *APF) *blocker {
	return &blocker{a: a, release: make(chan struct{}), started: make(chan string, 1000)}
}

func (b *blocker) submit(user, group, id string) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		err := b.a.Do(context.Background(), Request{User: user, Groups: []string{group}, Verb: "create", Resource: "configmaps", Namespace: "n", ResourceRequest: true, Mutating: true}, func() {
			b.started <- id
			<-b.release
		})
		if err != nil {
			b.mu.Lock()
			b.errs = append(b.errs, err)
			b.mu.Unlock()
			b.started <- "rejected:" + id
		}
	}()
}

func (b *blocker) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-b.started:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("no request started or was rejected")
		return ""
	}
}

// TestFloodDoesNotStarveNodes: a flood from one user fills its own level's
// seats and queues and is rejected (429 queue-full) while the nodes' level
// keeps serving at once.
func TestFloodDoesNotStarveNodes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	a := NewAPF(Options{ServerConcurrencyLimit: 4, Metrics: m})
	a.Configure(
		[]flowcontrolv1.FlowSchema{schemaFor("nodes", "node-high", 100, "system:nodes", true), schemaFor("users", "users", 9000, "users", true)},
		[]flowcontrolv1.PriorityLevelConfiguration{limited("node-high", 50, 4, 1, 10), limited("users", 50, 8, 2, 3)})
	b := newBlocker(a)
	defer func() { close(b.release); b.wg.Wait() }()

	// users has 2 seats; the flood's hand is 2 queues of 3: 2 run, 6 wait,
	// the rest is rejected at once.
	for i := 0; i < 20; i++ {
		b.submit("flooder", "users", fmt.Sprint("flood", i))
	}
	running, rejected := 0, 0
	for running+rejected < 14 {
		if id := b.next(t); len(id) > 9 && id[:9] == "rejected:" {
			rejected++
		} else {
			running++
		}
	}
	if running != 2 || rejected != 12 {
		t.Fatalf("flood: %d running, %d rejected; want 2 and 12", running, rejected)
	}
	for _, err := range b.errs {
		var rej *RejectedError
		if !errors.As(err, &rej) || rej.Reason != "queue-full" || rej.PriorityLevel != "users" || rej.RetryAfterSeconds < 1 {
			t.Fatalf("flood rejection: %v", err)
		}
	}
	// Node heartbeats are served at once.
	b.submit("system:node:n1", "system:nodes", "lease1")
	b.submit("system:node:n2", "system:nodes", "lease2")
	got := map[string]bool{b.next(t): true, b.next(t): true}
	if diff := cmp.Diff(map[string]bool{"lease1": true, "lease2": true}, got); diff != "" {
		t.Fatalf("node requests (-want +got):\n%s", diff)
	}
	if v := testutil.ToFloat64(m.rejected.WithLabelValues("users", "users", "queue-full")); v != 12 {
		t.Fatalf("apiserver_flowcontrol_rejected_requests_total{queue-full} = %v, want 12", v)
	}
	if v := testutil.ToFloat64(m.inQueue.WithLabelValues("users", "users")); v != 6 {
		t.Fatalf("apiserver_flowcontrol_current_inqueue_requests = %v, want 6", v)
	}
	if v := testutil.ToFloat64(m.nominalSeats.WithLabelValues("users")); v != 2 {
		t.Fatalf("apiserver_flowcontrol_nominal_limit_seats{users} = %v, want 2", v)
	}
}

// TestFairQueuing: two flows share a level with one seat; the heavy flow
// queued first, yet as seats free up the light flow's request goes next,
// not after all of the heavy flow's.
func TestFairQueuing(t *testing.T) {
	a := NewAPF(Options{ServerConcurrencyLimit: 1})
	a.Configure([]flowcontrolv1.FlowSchema{schemaFor("users", "users", 9000, "users", true)},
		[]flowcontrolv1.PriorityLevelConfiguration{limited("users", 1, 64, 1, 50)})
	b := newBlocker(a)
	b.submit("heavy", "users", "heavy0")
	if id := b.next(t); id != "heavy0" {
		t.Fatalf("first: %s", id)
	}
	for i := 1; i <= 5; i++ {
		b.submit("heavy", "users", fmt.Sprint("heavy", i))
	}
	waitQueued(t, a, "users", 5)
	b.submit("light", "users", "light0")
	waitQueued(t, a, "users", 6)
	var order []string
	for i := 0; i < 6; i++ {
		b.release <- struct{}{}
		order = append(order, b.next(t))
	}
	b.release <- struct{}{}
	b.wg.Wait()
	// The heavy flow's queue holds the seat when it frees; the light
	// flow's queue holds none, so it goes next.
	if order[0] != "light0" {
		t.Fatalf("dispatch order %v: the light flow waited behind the heavy one", order)
	}
}

func waitQueued(t *testing.T, a *APF, level string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.mu.Lock()
		got := a.levels[level].waiting
		a.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestMaxInFlight(t *testing.T) {
	m := NewMaxInFlight(1, 1, nil)
	hold := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_ = m.Do(context.Background(), Request{User: "a"}, func() { close(started); <-hold })
	}()
	<-started
	var rej *RejectedError
	if err := m.Do(context.Background(), Request{User: "b"}, func() {}); !errors.As(err, &rej) || rej.RetryAfterSeconds != 1 {
		t.Fatalf("second read-only request: %v, want rejected with Retry-After 1", err)
	}
	ran := false
	if err := m.Do(context.Background(), Request{User: "b", Mutating: true}, func() { ran = true }); err != nil || !ran {
		t.Fatalf("a write is limited apart from reads: %v", err)
	}
	if err := m.Do(context.Background(), Request{User: "admin", Groups: []string{SystemMastersGroup}}, func() { ran = true }); err != nil {
		t.Fatalf("system:masters is exempt: %v", err)
	}
	close(hold)
}
