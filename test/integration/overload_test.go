package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/pki"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestOverload: the API server holds under a flood and hostile input
// (issue #15). One cluster with few seats (20) for the whole test.
func TestOverload(t *testing.T) {
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.MaxRequestsInflight = 10
		cfg.MaxMutatingRequestsInflight = 10
	}})
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *cluster)
	}{
		{"FlowControlObjectsServed", testFlowControlObjects},
		{"FloodGets429NodesKeepLeases", testFloodDoesNotStarveNodes},
		{"HugeBodyRejectedUnread", testHugeBody},
		{"ObjectOverEtcdLimit", testObjectOverEtcdLimit},
		{"MetricLabelsBounded", testMetricLabelsBounded},
		{"ComponentStatusesTellTheTruth", testComponentStatuses},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, c) })
	}
}

// testFlowControlObjects: upstream's mandatory and suggested objects are
// served, with upstream's specs.
func testFlowControlObjects(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ctx := testCtx(t, 30*time.Second)
	fss, err := cs.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fs := range fss.Items {
		names = append(names, fs.Name)
	}
	sort.Strings(names)
	want := []string{"catch-all", "exempt", "global-default", "kube-controller-manager", "kube-scheduler",
		"kube-system-service-accounts", "probes", "service-accounts", "system-leader-election", "system-node-high", "system-nodes"}
	if !containsAll(names, want) {
		t.Fatalf("flow schemas %v, want upstream's (%v)", names, want)
	}
	pls, err := cs.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]flowcontrolv1.PriorityLevelConfiguration{}
	for _, pl := range pls.Items {
		byName[pl.Name] = pl
	}
	wl := byName["workload-low"]
	if wl.Spec.Limited == nil || ptr.Deref(wl.Spec.Limited.NominalConcurrencyShares, 0) != 100 || wl.Spec.Limited.LimitResponse.Queuing == nil ||
		wl.Spec.Limited.LimitResponse.Queuing.Queues != 128 {
		t.Fatalf("workload-low: %+v, want upstream's (100 shares, 128 queues)", wl.Spec)
	}
	if byName["exempt"].Spec.Type != flowcontrolv1.PriorityLevelEnablementExempt {
		t.Fatalf("exempt level: %+v", byName["exempt"].Spec)
	}
	// Validation: a bad priority level is 422 with the field.
	_, err = cs.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{
				Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 8, QueueLengthLimit: 1}}}},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "handSize") {
		t.Fatalf("hand larger than the deck: got %v, want 422 on handSize", err)
	}
}

func containsAll(have, want []string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

func clientFor(t *testing.T, c *cluster, user string, groups []string) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	cert, key, err := c.PKI.IssueClient(user, groups, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.PKI.ClientRESTConfig(c.Config.Host, cert, key)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the server must hold
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, cs
}

// testFloodDoesNotStarveNodes: one client floods writes as fast as it can
// while nodes renew their leases. The flood is answered 429 with
// Retry-After (not timeouts); every lease renewal succeeds promptly.
func testFloodDoesNotStarveNodes(t *testing.T, c *cluster) {
	admin := c.Clientset()
	ctx := testCtx(t, 2*time.Minute)
	ns := newNamespace(t, admin)

	// The flooder's own level: few seats and one short queue, configured
	// through the API (APF reads it within a second).
	shares := int32(5)
	if _, err := admin.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "flood-test"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: &shares, LimitResponse: flowcontrolv1.LimitResponse{
				Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: 4}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "flood-test"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "flood-test"},
			MatchingPrecedence:         600,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "flooder"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}, ClusterScope: true}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	const nodes = 20
	for i := 0; i < nodes; i++ {
		if _, err := admin.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(fmt.Sprintf("node-%d", i)), LeaseDurationSeconds: ptr.To(int32(40))},
		}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	floodCfg, _ := clientFor(t, c, "flooder", []string{"system:authenticated"})
	httpClient, err := rest.HTTPClientFor(floodCfg)
	if err != nil {
		t.Fatal(err)
	}
	var codes sync.Map // code -> *atomic.Int64
	count := func(code int) {
		v, _ := codes.LoadOrStore(code, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	var missingRetryAfter atomic.Int64
	stop := make(chan struct{})
	var flood sync.WaitGroup
	var seq atomic.Int64
	floodURL := c.Config.Host + "/api/v1/namespaces/" + ns + "/configmaps"
	for i := 0; i < 64; i++ {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"flood-%d"},"data":{"k":%q}}`, seq.Add(1), strings.Repeat("x", 2048))
				resp, err := httpClient.Post(floodURL, "application/json", strings.NewReader(body))
				if err != nil {
					count(-1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				count(resp.StatusCode)
				if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
					missingRetryAfter.Add(1)
				}
			}
		}()
	}

	// Nodes renew their leases meanwhile, each as its own node identity.
	var renewals, failures atomic.Int64
	var worst atomic.Int64
	var nodesWG sync.WaitGroup
	for i := 0; i < nodes; i++ {
		_, cs := clientFor(t, c, fmt.Sprintf("system:node:node-%d", i), []string{"system:nodes", "system:authenticated"})
		nodesWG.Add(1)
		go func(i int, cs kubernetes.Interface) {
			defer nodesWG.Done()
			for r := 0; r < 10; r++ {
				start := time.Now()
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				lease, err := cs.CoordinationV1().Leases("kube-node-lease").Get(rctx, fmt.Sprintf("node-%d", i), metav1.GetOptions{})
				if err == nil {
					lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
					_, err = cs.CoordinationV1().Leases("kube-node-lease").Update(rctx, lease, metav1.UpdateOptions{})
				}
				cancel()
				if err != nil {
					failures.Add(1)
					t.Errorf("node-%d lease renewal: %v", i, err)
				} else {
					renewals.Add(1)
				}
				if d := time.Since(start).Milliseconds(); d > worst.Load() {
					worst.Store(d)
				}
				time.Sleep(200 * time.Millisecond) // the renew interval
			}
		}(i, cs)
	}
	nodesWG.Wait()
	// Keep flooding until the flood has seen 429s (APF picks up the new
	// level within a second).
	deadline := time.Now().Add(30 * time.Second)
	for load(&codes, http.StatusTooManyRequests) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	flood.Wait()

	got := map[int]int64{}
	codes.Range(func(k, v any) bool { got[k.(int)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("flood answers by code: %v; lease renewals %d (failed %d), slowest %d ms", got, renewals.Load(), failures.Load(), worst.Load())
	if failures.Load() != 0 || renewals.Load() != nodes*10 {
		t.Fatalf("lease renewals: %d ok, %d failed; want %d ok", renewals.Load(), failures.Load(), nodes*10)
	}
	if got[http.StatusTooManyRequests] == 0 || got[http.StatusCreated] == 0 {
		t.Fatalf("flood answers %v: want both 201s and 429s", got)
	}
	if got[http.StatusGatewayTimeout] != 0 || got[-1] != 0 || got[http.StatusInternalServerError] != 0 {
		t.Fatalf("flood answers %v: want no timeouts, transport errors or 500s", got)
	}
	if missingRetryAfter.Load() != 0 {
		t.Fatalf("%d 429s without Retry-After", missingRetryAfter.Load())
	}
	// The rejections are counted under the flooder's level.
	metrics := fetchMetrics(t, c)
	if !strings.Contains(metrics, `apiserver_flowcontrol_rejected_requests_total{flow_schema="flood-test",priority_level="flood-test",reason="queue-full"}`) {
		t.Fatalf("no apiserver_flowcontrol_rejected_requests_total for the flood in /metrics")
	}
}

func load(m *sync.Map, code int) int64 {
	v, ok := m.Load(code)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func fetchMetrics(t *testing.T, c *cluster) string {
	t.Helper()
	body, err := c.Clientset().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(testCtx(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// countingReader produces n bytes of JSON-ish filler, counting what was read.
type countingReader struct {
	n, read int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.read >= r.n {
		return 0, io.EOF
	}
	k := int64(len(p))
	if k > r.n-r.read {
		k = r.n - r.read
	}
	for i := range p[:k] {
		p[i] = ' '
	}
	r.read += k
	return int(k), nil
}

// testHugeBody: a 100 MB body is answered 413 without the server reading
// it (the client sends only a small part).
func testHugeBody(t *testing.T, c *cluster) {
	cfg := rest.CopyConfig(c.Config)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body := &countingReader{n: 100 << 20}
	req, err := http.NewRequest(http.MethodPost, c.Config.Host+"/api/v1/namespaces/default/configmaps", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = body.n
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(msg, []byte("RequestEntityTooLarge")) {
		t.Fatalf("100 MB body: %d %s, want 413", resp.StatusCode, msg)
	}
	if body.read > 20<<20 {
		t.Fatalf("the client sent %d bytes of a 100 MB body before the 413", body.read)
	}
}

// testObjectOverEtcdLimit: an object under the 3 MiB body limit but over
// etcd's 1.5 MiB request limit is 413, not 500.
func testObjectOverEtcdLimit(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	// A ControllerRevision's data has no size rule of its own.
	_, err := cs.AppsV1().ControllerRevisions(ns).Create(testCtx(t, 30*time.Second), &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "huge"},
		Data:       runtime.RawExtension{Raw: []byte(`{"k":"` + strings.Repeat("x", 1700<<10) + `"}`)},
		Revision:   1,
	}, metav1.CreateOptions{})
	if !apierrors.IsRequestEntityTooLargeError(err) {
		t.Fatalf("create of a 1.7 MiB object: got %v, want 413", err)
	}
}

// testMetricLabelsBounded: random paths, even unauthenticated, do not
// become metric labels.
func testMetricLabelsBounded(t *testing.T, c *cluster) {
	anon := rest.AnonymousClientConfig(c.Config)
	httpClient, err := rest.HTTPClientFor(anon)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		resp, err := httpClient.Get(fmt.Sprintf("%s/random-path-%d", c.Config.Host, i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := httpClient.Get(c.Config.Host + "/apis/nope.example.com/v1/frobs-1")
	if err == nil {
		resp.Body.Close()
	}
	m := fetchMetrics(t, c)
	for _, bad := range []string{"random-path-", "frobs-1"} {
		if strings.Contains(m, bad) {
			t.Fatalf("/metrics holds a label from a random path (%s)", bad)
		}
	}
	if !strings.Contains(m, `subresource="other"`) {
		t.Fatal(`/metrics has no subresource="other" series for unknown paths`)
	}
}

// testComponentStatuses: componentstatuses report what the components
// say: a stopped in-process scheduler is Unhealthy with its error, and a
// controller manager that runs nowhere is Unhealthy (its healthz port does
// not answer), never "Healthy" by default.
func testComponentStatuses(t *testing.T, c *cluster) {
	ctx := testCtx(t, 30*time.Second)
	cs := c.Clientset()
	c.Server().SetComponentHealth("scheduler", func(context.Context) error { return fmt.Errorf("scheduler stopped: lost its lease") })
	c.Server().SetComponentHealth("controller-manager", func(context.Context) error { return nil })
	got := map[string]string{}
	list, err := cs.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		got[s.Name] = string(s.Conditions[0].Status) + " " + s.Conditions[0].Error
	}
	want := map[string]string{"controller-manager": "True ", "scheduler": "False scheduler stopped: lost its lease", "etcd-0": "True "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("componentstatuses (-want +got):\n%s", diff)
	}
}
