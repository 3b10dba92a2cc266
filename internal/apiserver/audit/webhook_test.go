package audit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// sink is an audit webhook: it records each POSTed EventList's audit IDs,
// failing the first fail POSTs with 503.
type sink struct {
	mu      sync.Mutex
	fail    int
	batches [][]string
	got     chan struct{}
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var list auditv1.EventList
	if err := json.NewDecoder(r.Body).Decode(&list); err != nil || list.Kind != "EventList" || list.APIVersion != "audit.k8s.io/v1" {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if s.fail > 0 {
		s.fail--
		s.mu.Unlock()
		http.Error(w, "later", http.StatusServiceUnavailable)
		return
	}
	var ids []string
	for _, ev := range list.Items {
		ids = append(ids, string(ev.AuditID))
	}
	s.batches = append(s.batches, ids)
	s.mu.Unlock()
	s.got <- struct{}{}
}

func (s *sink) take() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batches
	s.batches = nil
	return b
}

func sinkKubeconfig(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["audit"] = &clientcmdapi.Cluster{Server: srv.URL + "/events"}
	cfg.Contexts["audit"] = &clientcmdapi.Context{Cluster: "audit"}
	cfg.CurrentContext = "audit"
	path := filepath.Join(t.TempDir(), "audit.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWebhookBatch(t *testing.T) {
	s := &sink{got: make(chan struct{}, 10), fail: 1}
	srv := httptest.NewServer(s)
	defer srv.Close()
	a, err := New(&Policy{}, LogOptions{Webhook: WebhookOptions{ConfigFile: sinkKubeconfig(t, srv), BatchMaxSize: 2, BatchMaxWait: 200 * time.Millisecond, InitialBackoff: time.Millisecond}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		a.write(&auditv1.Event{AuditID: types.UID(id)})
	}
	// a and b fill a batch (the first POST fails and is retried); c
	// goes after BatchMaxWait.
	for range 2 {
		select {
		case <-s.got:
		case <-time.After(10 * time.Second):
			t.Fatal("no batch")
		}
	}
	if diff := cmp.Diff([][]string{{"a", "b"}, {"c"}}, s.take()); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	// Close sends what is queued.
	a.write(&auditv1.Event{AuditID: "d"})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]string{{"d"}}, s.take()); diff != "" {
		t.Errorf("batch at Close (-want +got):\n%s", diff)
	}
}

func TestWebhookBlocking(t *testing.T) {
	s := &sink{got: make(chan struct{}, 10)}
	srv := httptest.NewServer(s)
	defer srv.Close()
	a, err := New(&Policy{}, LogOptions{Path: filepath.Join(t.TempDir(), "audit.log"), Webhook: WebhookOptions{ConfigFile: sinkKubeconfig(t, srv), Mode: "blocking"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.write(&auditv1.Event{AuditID: "x"})
	if diff := cmp.Diff([][]string{{"x"}}, s.take()); diff != "" {
		t.Errorf("blocking: sent before write returned (-want +got):\n%s", diff)
	}
	for _, bad := range []WebhookOptions{{ConfigFile: "/nonexistent"}, {ConfigFile: sinkKubeconfig(t, srv), Mode: "blocking-strict"}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", bad)
		}
	}
}
