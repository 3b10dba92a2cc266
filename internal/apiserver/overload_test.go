package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/apiserver/discovery"
	"github.com/skiff-sh/skiff/internal/apiserver/health"
	"github.com/skiff-sh/skiff/internal/apiserver/metrics"
	"github.com/skiff-sh/skiff/internal/apiserver/openapi"
)

// TestJSONPatchCopyLimit: copies that double a value on every step are
// stopped at upstream's 3 MiB of accumulated copies (422), before they
// exhaust memory.
func TestJSONPatchCopyLimit(t *testing.T) {
	cur := []byte(`{"metadata":{"name":"x"},"data":{"a":"` + strings.Repeat("x", 64<<10) + `"}}`)
	var ops []string
	ops = append(ops, `{"op":"add","path":"/data/l","value":[]}`, `{"op":"copy","from":"/data/a","path":"/data/l/-"}`)
	for i := 0; i < 10; i++ { // 64 KiB * 2^10 = 64 MiB if unbounded
		ops = append(ops, `{"op":"copy","from":"/data/l","path":"/data/l/-"}`)
	}
	_, err := applyPatch(types.JSONPatchType, cur, []byte("["+strings.Join(ops, ",")+"]"), &corev1.ConfigMap{})
	if err == nil {
		t.Fatal("an amplifying JSON patch was applied")
	}
	if code := errorToStatus(err).Code; code != http.StatusUnprocessableEntity {
		t.Fatalf("code %d (%v), want 422", code, err)
	}
	// A patch that copies less than the limit works.
	small := `[{"op":"copy","from":"/data/a","path":"/data/b"}]`
	if _, err := applyPatch(types.JSONPatchType, cur, []byte(small), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("small copy: %v", err)
	}
}

func TestWatchTimeout(t *testing.T) {
	min := 1800 * time.Second
	if got := watchTimeout(36000, min); got != 2*min {
		t.Fatalf("a 10-hour watch lasts %s, want it capped at %s", got, 2*min)
	}
	if got := watchTimeout(60, min); got != time.Minute {
		t.Fatalf("timeoutSeconds=60: %s", got)
	}
	for i := 0; i < 100; i++ {
		if got := watchTimeout(0, min); got < min || got >= 2*min {
			t.Fatalf("no timeoutSeconds: %s, want in [%s, %s)", got, min, 2*min)
		}
	}
}

func TestLongRunning(t *testing.T) {
	cases := map[string]RequestInfo{
		"watch": {Verb: "watch"}, "exec": {Verb: "create", Subresource: "exec"}, "logs": {Verb: "get", Subresource: "log"},
		"portforward": {Verb: "create", Subresource: "portforward"}, "proxy": {Verb: "get", Subresource: "proxy"},
	}
	for name, info := range cases {
		if !longRunning(info) {
			t.Errorf("%s: not long-running", name)
		}
	}
	for name, info := range map[string]RequestInfo{"list": {Verb: "list"}, "create": {Verb: "create"}, "status": {Verb: "update", Subresource: "status"}} {
		if longRunning(info) {
			t.Errorf("%s: long-running", name)
		}
	}
}

// newTestServer is a server with no storage for the chain's own behaviour.
func newTestServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	c, err := newCodecs()
	if err != nil {
		t.Fatal(err)
	}
	cfg = withOverloadDefaults(cfg)
	return &Server{cfg: cfg, codecs: c, health: health.New(health.Options{}),
		disco: discovery.New(nil, discovery.VersionInfo(Version, "", "")), openapi: openapi.New(nil, Version)}
}

// TestRequestTimeout: a handler that does not answer within the request
// timeout gets 504 with upstream's message; the handler sees its context
// end.
func TestRequestTimeout(t *testing.T) {
	s := newTestServer(t, Config{RequestTimeout: 100 * time.Millisecond})
	handlerSawCancel := make(chan bool, 1)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/a/configmaps", nil)
	s.runWithTimeout(rec, req, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		handlerSawCancel <- true
		w.WriteHeader(http.StatusOK) // too late: refused
	})
	if rec.Code != http.StatusGatewayTimeout {
		t.Fatalf("code %d, want 504", rec.Code)
	}
	if !strings.Contains(rec.Body.String(), "request did not complete within the allotted timeout") {
		t.Fatalf("body %s", rec.Body.String())
	}
	if !<-handlerSawCancel {
		t.Fatal("handler's context did not end")
	}
}

// TestPanicHidesDetail: a panic answers 500 with a generic message, never
// the panic's text.
func TestPanicHidesDetail(t *testing.T) {
	s := newTestServer(t, Config{})
	rec := httptest.NewRecorder()
	s.codecs.writeError(rec, panicError())
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "secret") || !strings.Contains(rec.Body.String(), "InternalError") {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
	_ = fmt.Sprint()
}

// TestMetricLabelsBounded: random paths are counted as "other".
func TestMetricLabelsBounded(t *testing.T) {
	s := newTestServer(t, Config{})
	s.handlers = nil
	l := metrics.RequestLabels{Verb: "GET", Subresource: "/random-1234", Component: "apiserver"}
	got := s.metricLabels(l, RequestInfo{}, "/random-1234", 401)
	if diff := cmp.Diff(metrics.RequestLabels{Verb: "GET", Subresource: "other", Component: "apiserver"}, got); diff != "" {
		t.Fatalf("labels (-want +got):\n%s", diff)
	}
	res := metrics.RequestLabels{Verb: "LIST", Group: "nope.example", Version: "v1", Resource: "frobs" + fmt.Sprint(time.Now().UnixNano()), Scope: "cluster", Component: "apiserver"}
	got = s.metricLabels(res, RequestInfo{IsResourceRequest: true, APIGroup: "nope.example", APIVersion: "v1", Resource: res.Resource}, "/apis/nope.example/v1/x", 404)
	if got.Resource != "" || got.Subresource != "other" {
		t.Fatalf("unknown resource labels %+v", got)
	}
	_ = context.Background()
}
