package health

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func newTestHealth(etcdErr *error) *Health {
	return New(Options{
		Livez:  []Check{{Name: "etcd", Fn: func(context.Context) error { return *etcdErr }}},
		Readyz: []Check{{Name: "informer-sync", Fn: func(context.Context) error { return nil }}},
	})
}

func TestHealth(t *testing.T) {
	down := errors.New("connection refused")
	tests := []struct {
		name     string
		path     string
		etcdErr  error
		shutdown bool
		wantCode int
		wantBody string
	}{
		{name: "healthz ok", path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "livez ok", path: "/livez", wantCode: 200, wantBody: "ok"},
		{name: "readyz ok", path: "/readyz", wantCode: 200, wantBody: "ok"},
		{
			name: "healthz verbose", path: "/healthz?verbose", wantCode: 200,
			wantBody: "[+]ping ok\n[+]etcd ok\nhealthz check passed\n",
		},
		{
			name: "readyz verbose", path: "/readyz?verbose=1", wantCode: 200,
			wantBody: "[+]ping ok\n[+]etcd ok\n[+]informer-sync ok\n[+]shutdown ok\nreadyz check passed\n",
		},
		{
			name: "livez failed is always verbose", path: "/livez", etcdErr: down, wantCode: 500,
			wantBody: "[+]ping ok\n[-]etcd failed: reason withheld\nlivez check failed\n",
		},
		{
			name: "readyz failed", path: "/readyz", etcdErr: down, wantCode: 500,
			wantBody: "[+]ping ok\n[-]etcd failed: reason withheld\n[+]informer-sync ok\n[+]shutdown ok\nreadyz check failed\n",
		},
		{
			name: "excluded failing check", path: "/readyz?verbose&exclude=etcd", etcdErr: down, wantCode: 200,
			wantBody: "[+]ping ok\n[+]etcd excluded: ok\n[+]informer-sync ok\n[+]shutdown ok\nreadyz check passed\n",
		},
		{
			name: "exclude unknown check", path: "/livez?verbose&exclude=nope&exclude=etcd", wantCode: 200,
			wantBody: "[+]ping ok\n[+]etcd excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nlivez check passed\n",
		},
		{
			name: "shutting down", path: "/readyz?verbose", shutdown: true, wantCode: 500,
			wantBody: "[+]ping ok\n[+]etcd ok\n[+]informer-sync ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n",
		},
		{name: "livez unaffected by shutdown", path: "/livez", shutdown: true, wantCode: 200, wantBody: "ok"},
		{name: "single check ok", path: "/readyz/ping", wantCode: 200, wantBody: "ok"},
		{name: "single check failed shows reason", path: "/healthz/etcd", etcdErr: down, wantCode: 500, wantBody: "internal server error: connection refused\n"},
		{name: "readyz-only check not under livez", path: "/livez/informer-sync", wantCode: 404, wantBody: "404 page not found\n"},
		{name: "unknown check", path: "/readyz/nope", wantCode: 404, wantBody: "404 page not found\n"},
		{name: "unknown endpoint", path: "/statusz", wantCode: 404, wantBody: "404 page not found\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			etcdErr := tc.etcdErr
			h := newTestHealth(&etcdErr)
			if tc.shutdown {
				h.SetShuttingDown()
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tc.wantCode {
				t.Errorf("code = %d, want %d", rec.Code, tc.wantCode)
			}
			got := string(body)
			if diff := cmp.Diff(tc.wantBody, got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}

func TestHandles(t *testing.T) {
	var none error
	h := newTestHealth(&none)
	for path, want := range map[string]bool{
		"/healthz": true, "/livez": true, "/readyz": true, "/readyz/shutdown": true,
		"/healthz/etcd": true, "/livez/shutdown": false, "/readyz/": false, "/api": false, "/healthzx": false,
	} {
		if got := h.Handles(path); got != want {
			t.Errorf("Handles(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestCheckGetsRequestContext(t *testing.T) {
	type key struct{}
	var saw any
	h := New(Options{Livez: []Check{{Name: "ctx", Fn: func(ctx context.Context) error {
		saw = ctx.Value(key{})
		return nil
	}}}})
	r := httptest.NewRequest("GET", "/livez", nil)
	r = r.WithContext(context.WithValue(r.Context(), key{}, "v"))
	h.ServeHTTP(httptest.NewRecorder(), r)
	if saw != "v" {
		t.Errorf("check saw %v, want the request context", saw)
	}
}

// TestAddReadyz: a check added later shows in /readyz before "shutdown",
// fails it while it fails, is served alone, and is not part of /livez.
func TestAddReadyz(t *testing.T) {
	var etcdErr error
	h := newTestHealth(&etcdErr)
	dnsErr := errors.New("no answer")
	h.AddReadyz(Check{Name: "cluster-dns", Fn: func(context.Context) error { return dnsErr }})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	code, body := get("/readyz")
	if diff := cmp.Diff("[+]ping ok\n[+]etcd ok\n[+]informer-sync ok\n[-]cluster-dns failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n", body); code != 500 || diff != "" {
		t.Errorf("readyz with DNS down = %d (-want +got):\n%s", code, diff)
	}
	if code, _ := get("/livez"); code != 200 {
		t.Errorf("livez = %d, want 200 (DNS is a readiness check only)", code)
	}
	dnsErr = nil
	code, body = get("/readyz?verbose")
	if diff := cmp.Diff("[+]ping ok\n[+]etcd ok\n[+]informer-sync ok\n[+]cluster-dns ok\n[+]shutdown ok\nreadyz check passed\n", body); code != 200 || diff != "" {
		t.Errorf("readyz with DNS up = %d (-want +got):\n%s", code, diff)
	}
	if code, body := get("/readyz/cluster-dns"); code != 200 || body != "ok" {
		t.Errorf("/readyz/cluster-dns = %d %q", code, body)
	}
	// Added again: replaced, not doubled.
	h.AddReadyz(Check{Name: "cluster-dns", Fn: func(context.Context) error { return nil }})
	if _, body := get("/readyz?verbose"); strings.Count(body, "cluster-dns") != 1 {
		t.Errorf("after a second AddReadyz:\n%s", body)
	}
}
