package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeAPI answers TokenReviews from tokens (token -> user) and
// SubjectAccessReviews from grants ("user verb subresource"), and records
// what it was asked.
type fakeAPI struct {
	mu      sync.Mutex
	tokens  map[string]authenticationv1.UserInfo
	grants  map[string]bool
	reviews []string // "token <t>" or "sar <user> <verb> nodes/<sub> <node>"
	fail    bool
}

func (f *fakeAPI) clientset() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.reviews = append(f.reviews, "token "+tr.Spec.Token)
		if u, ok := f.tokens[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fail {
			return true, nil, fmt.Errorf("connection refused")
		}
		ra := sar.Spec.ResourceAttributes
		f.reviews = append(f.reviews, fmt.Sprintf("sar %s %s %s/%s %s", sar.Spec.User, ra.Verb, ra.Resource, ra.Subresource, ra.Name))
		sar.Status.Allowed = f.grants[sar.Spec.User+" "+ra.Verb+" "+ra.Subresource]
		return true, sar, nil
	})
	return cs
}

func (f *fakeAPI) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.reviews
	f.reviews = nil
	return got
}

func TestAttributesOf(t *testing.T) {
	tests := []struct {
		method, path string
		want         nodeAttributes
	}{
		{"GET", "/metrics", nodeAttributes{"get", []string{"metrics"}}},
		{"GET", "/metrics/resource", nodeAttributes{"get", []string{"metrics"}}},
		{"GET", "/metricsfoo", nodeAttributes{"get", []string{"proxy"}}},
		{"GET", "/stats/summary", nodeAttributes{"get", []string{"stats"}}},
		{"GET", "/logs/syslog", nodeAttributes{"get", []string{"log"}}},
		{"GET", "/pods", nodeAttributes{"get", []string{"pods", "proxy"}}},
		{"GET", "/runningpods/", nodeAttributes{"get", []string{"pods", "proxy"}}},
		{"GET", "/healthz", nodeAttributes{"get", []string{"healthz", "proxy"}}},
		{"GET", "/configz", nodeAttributes{"get", []string{"configz", "proxy"}}},
		{"POST", "/checkpoint/ns/p/c", nodeAttributes{"create", []string{"checkpoint"}}},
		{"GET", "/containerLogs/ns/p/c", nodeAttributes{"get", []string{"proxy"}}},
		{"POST", "/exec/ns/p/c", nodeAttributes{"create", []string{"proxy"}}},
		{"GET", "/exec/ns/p/c", nodeAttributes{"get", []string{"proxy"}}}, // websocket
		{"POST", "/portForward/ns/p", nodeAttributes{"create", []string{"proxy"}}},
		{"POST", "/run/ns/p/c", nodeAttributes{"create", []string{"proxy"}}},
		{"PUT", "/x", nodeAttributes{"update", []string{"proxy"}}},
		{"PATCH", "/x", nodeAttributes{"patch", []string{"proxy"}}},
		{"DELETE", "/x", nodeAttributes{"delete", []string{"proxy"}}},
		{"HEAD", "/healthz", nodeAttributes{"", []string{"healthz", "proxy"}}},
	}
	for _, tt := range tests {
		got := attributesOf(httptest.NewRequest(tt.method, tt.path, nil))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tt.method, tt.path, diff)
		}
	}
}

// TestDelegatedAuth runs the real TLS server with webhook authentication
// and authorization against a fake API server.
func TestDelegatedAuth(t *testing.T) {
	api := &fakeAPI{
		tokens: map[string]authenticationv1.UserInfo{
			"monitor-token": {Username: "system:serviceaccount:mon:scraper", Groups: []string{"system:serviceaccounts", "system:authenticated"}},
			"debug-token":   {Username: "dev", Groups: []string{"system:authenticated"}},
		},
		grants: map[string]bool{
			"system:serviceaccount:mon:scraper get metrics": true,
			"dev get proxy":                           true,
			"dev create proxy":                        true,
			"kube-apiserver-kubelet-client get stats": true,
		},
	}
	clk := clocktesting.NewFakeClock(time.Now())
	h := startHarness(t, func(o *Options) { o.APIClient, o.Clock = api.clientset(), clk })
	h.addPod(t, "2026-01-01T00:00:00.000000000Z stdout F hello\n", "")
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.bundle.CAPool}}}
	do := func(method, path, token string, c *http.Client) (int, string) {
		t.Helper()
		if c == nil {
			c = anon
		}
		req, _ := http.NewRequest(method, h.base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	tests := []struct {
		name         string
		method, path string
		token        string
		cert         bool
		wantCode     int
		wantBody     string // prefix
		wantAsked    []string
	}{
		{name: "anonymous", method: "GET", path: "/healthz", wantCode: 401, wantBody: "Unauthorized"},
		{name: "unknown token", method: "GET", path: "/pods", token: "nope", wantCode: 401, wantBody: "Unauthorized",
			wantAsked: []string{"token nope"}},
		{name: "unknown token cached", method: "GET", path: "/pods", token: "nope", wantCode: 401, wantBody: "Unauthorized"},
		{name: "scraper reads metrics", method: "GET", path: "/metrics/resource", token: "monitor-token", wantCode: 200,
			wantAsked: []string{"token monitor-token", "sar system:serviceaccount:mon:scraper get nodes/metrics node-a"}},
		{name: "scraper may not list pods", method: "GET", path: "/pods", token: "monitor-token", wantCode: 403,
			wantBody:  "Forbidden (user=system:serviceaccount:mon:scraper, verb=get, resource=nodes, subresource(s)=[pods proxy])",
			wantAsked: []string{"sar system:serviceaccount:mon:scraper get nodes/pods node-a", "sar system:serviceaccount:mon:scraper get nodes/proxy node-a"}},
		{name: "scraper may not exec", method: "POST", path: "/exec/default/web/app?command=ls", token: "monitor-token", wantCode: 403,
			wantBody:  "Forbidden (user=system:serviceaccount:mon:scraper, verb=create, resource=nodes, subresource(s)=[proxy])",
			wantAsked: []string{"sar system:serviceaccount:mon:scraper create nodes/proxy node-a"}},
		{name: "denial cached", method: "GET", path: "/pods", token: "monitor-token", wantCode: 403},
		{name: "nodes/proxy reads pods", method: "GET", path: "/pods", token: "debug-token", wantCode: 200,
			wantAsked: []string{"token debug-token", "sar dev get nodes/pods node-a", "sar dev get nodes/proxy node-a"}},
		{name: "nodes/proxy reads logs", method: "GET", path: "/containerLogs/default/web/app", token: "debug-token", wantCode: 200, wantBody: "hello"},
		{name: "nodes/proxy is not nodes/stats", method: "GET", path: "/stats/summary", token: "debug-token", wantCode: 403,
			wantAsked: []string{"sar dev get nodes/stats node-a"}},
		{name: "client certificate", method: "GET", path: "/stats/summary", cert: true, wantCode: 200,
			wantAsked: []string{"sar kube-apiserver-kubelet-client get nodes/stats node-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c *http.Client
			if tt.cert {
				c = h.httpClient(t)
			}
			code, body := do(tt.method, tt.path, tt.token, c)
			if code != tt.wantCode || !strings.HasPrefix(body, tt.wantBody) {
				t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, code, body, tt.wantCode, tt.wantBody)
			}
			if diff := cmp.Diff(tt.wantAsked, api.asked()); diff != "" {
				t.Errorf("reviews asked (-want +got):\n%s", diff)
			}
		})
	}

	// Denials are cached for 30 s, grants for 5 min, tokens for 2 min.
	clk.Step(31 * time.Second)
	api.mu.Lock()
	api.grants["system:serviceaccount:mon:scraper get pods"] = true
	api.mu.Unlock()
	if code, body := do("GET", "/pods", "monitor-token", nil); code != 200 {
		t.Errorf("after a new grant and the denial TTL: %d %q", code, body)
	}
	if diff := cmp.Diff([]string{"sar system:serviceaccount:mon:scraper get nodes/pods node-a"}, api.asked()); diff != "" {
		t.Errorf("reviews after 31 s (-want +got):\n%s", diff)
	}
	clk.Step(2 * time.Minute)
	if code, _ := do("GET", "/metrics", "monitor-token", nil); code != 200 {
		t.Errorf("/metrics after the token TTL: %d", code)
	}
	if diff := cmp.Diff([]string{"token monitor-token"}, api.asked()); diff != "" {
		t.Errorf("reviews after 2.5 min (-want +got):\n%s", diff)
	}

	// The API server cannot be asked: 500, as upstream.
	api.mu.Lock()
	api.fail = true
	api.mu.Unlock()
	if code, body := do("GET", "/configz", "debug-token", nil); code != 500 || !strings.HasPrefix(body, "Authorization error (user=dev, verb=get, resource=nodes, subresource=configz)") {
		t.Errorf("SAR failing: %d %q", code, body)
	}
}
