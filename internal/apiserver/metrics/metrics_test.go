package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics code %d", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestScrape(t *testing.T) {
	m := New(prometheus.NewRegistry())
	get := LabelsFor(RequestInfo{Method: "GET", Verb: "get", IsResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "default", Name: "p"}, ComponentAPIServer)
	m.ObserveRequestSize(get, 200, 30*time.Millisecond, 1500)
	m.ObserveRequest(get, 404, 3*time.Millisecond)
	done := m.TrackLongRunning(LabelsFor(RequestInfo{Method: "GET", Verb: "watch", IsResourceRequest: true, APIGroup: "apps", APIVersion: "v1", Resource: "deployments"}, ComponentAPIServer))
	inflight := m.TrackInflight(true)
	m.ObserveEtcd("get", "pods", 2*time.Millisecond)
	m.ObserveEtcd("list", "deployments.apps", 70*time.Millisecond)
	m.SetStorageObjects("pods", 12)
	m.SetStorageObjects("deployments.apps", 3)

	body := scrape(t, m)
	want := []string{
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 1`,
		`apiserver_request_total{code="404",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 1`,
		`apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1",le="0.005"} 1`,
		`apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1",le="0.05"} 2`,
		`apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1",le="60"} 2`,
		`apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 2`,
		`apiserver_response_sizes_count{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 1`,
		`apiserver_longrunning_requests{component="apiserver",group="apps",resource="deployments",scope="cluster",subresource="",verb="WATCH",version="v1"} 1`,
		`apiserver_current_inflight_requests{request_kind="mutating"} 1`,
		`apiserver_current_inflight_requests{request_kind="readOnly"} 0`,
		`etcd_request_duration_seconds_bucket{group="",operation="get",resource="pods",le="0.005"} 1`,
		`etcd_request_duration_seconds_bucket{group="apps",operation="list",resource="deployments",le="0.05"} 0`,
		`etcd_request_duration_seconds_bucket{group="apps",operation="list",resource="deployments",le="0.1"} 1`,
		`etcd_requests_total{group="apps",operation="list",resource="deployments"} 1`,
		`apiserver_storage_objects{resource="pods"} 12`,
		`apiserver_storage_objects{resource="deployments.apps"} 3`,
		`apiserver_resource_objects{group="apps",resource="deployments"} 3`,
	}
	for _, line := range want {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %s", line)
		}
	}
	if strings.Contains(body, "go_goroutines") {
		t.Error("a caller-supplied registry got the Go collector")
	}

	done()
	inflight()
	body = scrape(t, m)
	for _, line := range []string{
		`apiserver_longrunning_requests{component="apiserver",group="apps",resource="deployments",scope="cluster",subresource="",verb="WATCH",version="v1"} 0`,
		`apiserver_current_inflight_requests{request_kind="mutating"} 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("after done, scrape lacks %s", line)
		}
	}
}

func TestStorageObjectsError(t *testing.T) {
	m := New(prometheus.NewRegistry())
	m.SetStorageObjects("pods", -5)
	if body := scrape(t, m); !strings.Contains(body, `apiserver_storage_objects{resource="pods"} -1`+"\n") {
		t.Errorf("failed count not reported as -1:\n%s", body)
	}
}

func TestNilRegistry(t *testing.T) {
	m := New(nil)
	m.ObserveEtcd("create", "pods", time.Millisecond)
	body := scrape(t, m)
	for _, name := range []string{"go_goroutines", "etcd_requests_total"} {
		if !strings.Contains(body, name) {
			t.Errorf("scrape lacks %s", name)
		}
	}
}

// registererOnly hides the Gatherer side of a registry.
type registererOnly struct{ prometheus.Registerer }

func TestRegistererWithoutGatherer(t *testing.T) {
	m := New(registererOnly{prometheus.NewRegistry()})
	m.SetStorageObjects("secrets", 4)
	if body := scrape(t, m); !strings.Contains(body, `apiserver_storage_objects{resource="secrets"} 4`) {
		t.Errorf("scrape lacks our metric:\n%s", body)
	}
}

func TestTwoInstances(t *testing.T) {
	// No package-level state: two servers in one process each have their own.
	a, b := New(prometheus.NewRegistry()), New(prometheus.NewRegistry())
	a.SetStorageObjects("pods", 1)
	if strings.Contains(scrape(t, b), `apiserver_storage_objects{resource="pods"}`) {
		t.Error("metrics leaked between instances")
	}
}

func TestLabelsFor(t *testing.T) {
	tests := []struct {
		name string
		info RequestInfo
		want RequestLabels
	}{
		{
			name: "get one pod",
			info: RequestInfo{Method: "GET", Verb: "get", IsResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "ns", Name: "p"},
			want: RequestLabels{Verb: "GET", Version: "v1", Resource: "pods", Scope: "resource", Component: "apiserver"},
		},
		{
			name: "list in namespace",
			info: RequestInfo{Method: "GET", Verb: "list", IsResourceRequest: true, APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Namespace: "ns"},
			want: RequestLabels{Verb: "LIST", Group: "apps", Version: "v1", Resource: "deployments", Scope: "namespace", Component: "apiserver"},
		},
		{
			name: "list across namespaces",
			info: RequestInfo{Method: "GET", Verb: "list", IsResourceRequest: true, APIVersion: "v1", Resource: "pods"},
			want: RequestLabels{Verb: "LIST", Version: "v1", Resource: "pods", Scope: "cluster", Component: "apiserver"},
		},
		{
			name: "watch",
			info: RequestInfo{Method: "GET", Verb: "watch", IsResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "ns"},
			want: RequestLabels{Verb: "WATCH", Version: "v1", Resource: "pods", Scope: "namespace", Component: "apiserver"},
		},
		{
			name: "create is resource scope",
			info: RequestInfo{Method: "POST", Verb: "create", IsResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "ns"},
			want: RequestLabels{Verb: "POST", Version: "v1", Resource: "pods", Scope: "resource", Component: "apiserver"},
		},
		{
			name: "binding subresource",
			info: RequestInfo{Method: "POST", Verb: "create", IsResourceRequest: true, APIVersion: "v1", Resource: "pods", Subresource: "binding", Namespace: "ns", Name: "p"},
			want: RequestLabels{Verb: "POST", Version: "v1", Resource: "pods", Subresource: "binding", Scope: "resource", Component: "apiserver"},
		},
		{
			name: "update status",
			info: RequestInfo{Method: "PUT", Verb: "update", IsResourceRequest: true, APIVersion: "v1", Resource: "nodes", Subresource: "status", Name: "n"},
			want: RequestLabels{Verb: "PUT", Version: "v1", Resource: "nodes", Subresource: "status", Scope: "resource", Component: "apiserver"},
		},
		{
			name: "server-side apply",
			info: RequestInfo{Method: "PATCH", Verb: "patch", ContentType: "application/apply-patch+yaml; charset=utf-8", IsResourceRequest: true, APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Namespace: "ns", Name: "d"},
			want: RequestLabels{Verb: "APPLY", Group: "apps", Version: "v1", Resource: "deployments", Scope: "resource", Component: "apiserver"},
		},
		{
			name: "merge patch with dry run",
			info: RequestInfo{Method: "PATCH", Verb: "patch", ContentType: "application/merge-patch+json", DryRun: []string{"All", "All"}, IsResourceRequest: true, APIVersion: "v1", Resource: "configmaps", Namespace: "ns", Name: "c"},
			want: RequestLabels{Verb: "PATCH", DryRun: "All", Version: "v1", Resource: "configmaps", Scope: "resource", Component: "apiserver"},
		},
		{
			name: "invalid dry run",
			info: RequestInfo{Method: "DELETE", Verb: "delete", DryRun: []string{"yes"}, IsResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "ns", Name: "p"},
			want: RequestLabels{Verb: "DELETE", DryRun: "invalid", Version: "v1", Resource: "pods", Scope: "resource", Component: "apiserver"},
		},
		{
			name: "deletecollection reports DELETE",
			info: RequestInfo{Method: "DELETE", Verb: "deletecollection", IsResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "ns"},
			want: RequestLabels{Verb: "DELETE", Version: "v1", Resource: "pods", Scope: "namespace", Component: "apiserver"},
		},
		{
			name: "non-resource path",
			info: RequestInfo{Method: "GET", Verb: "get", Path: "/healthz"},
			want: RequestLabels{Verb: "GET", Subresource: "/healthz", Component: "apiserver"},
		},
		{
			name: "unknown method",
			info: RequestInfo{Method: "BREW", Path: "/coffee"},
			want: RequestLabels{Verb: "other", Subresource: "/coffee", Component: "apiserver"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, LabelsFor(tc.info, ComponentAPIServer)); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}
