package component

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestServeWithAuth: /metrics needs a token the API server accepts and a
// grant on the path; the health paths stay open.
func TestServeWithAuth(t *testing.T) {
	var reviews atomic.Int32
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		switch tr.Spec.Token {
		case "prom":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "prometheus", Groups: []string{"system:monitoring", "system:authenticated"}}}
		case "plain":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "plain", Groups: []string{"system:authenticated"}}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		nra := sar.Spec.NonResourceAttributes
		if nra != nil && nra.Path == "/metrics" && nra.Verb == "get" && strings.Contains(strings.Join(sar.Spec.Groups, ","), "system:monitoring") {
			sar.Status.Allowed = true
		}
		return true, sar, nil
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "probe_total"}))
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, stop, err := ServeEndpoints(ctx, "test", "127.0.0.1:0", Endpoints{Metrics: reg, Auth: &Auth{Client: cs, Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	tests := []struct {
		path, token string
		code        int
		body        string
	}{
		{"/healthz", "", 200, "ok"},
		{"/readyz", "", 200, "ok"},
		{"/metrics", "", 401, "Unauthorized"},
		{"/metrics", "bogus", 401, "Unauthorized"},
		{"/metrics", "plain", 403, `forbidden: User "plain" cannot get path "/metrics"`},
		{"/metrics", "prom", 200, "probe_total 0"},
	}
	for _, tt := range tests {
		code, body := get(tt.path, tt.token)
		if code != tt.code || !strings.Contains(body, tt.body) {
			t.Errorf("GET %s (token %q) = %d %q, want %d %q", tt.path, tt.token, code, body, tt.code, tt.body)
		}
	}
	// Answers are cached for DelegatedCacheTTL.
	before := reviews.Load()
	get("/metrics", "prom")
	if n := reviews.Load() - before; n != 0 {
		t.Errorf("%d reviews for a cached answer", n)
	}
	clk.Step(DelegatedCacheTTL + time.Second)
	get("/metrics", "prom")
	if n := reviews.Load() - before; n != 2 {
		t.Errorf("%d reviews after the TTL, want 2", n)
	}
}
