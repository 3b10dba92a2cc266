package discovery

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/version"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var (
	coreV1     = schema.GroupVersion{Version: "v1"}
	appsV1     = schema.GroupVersion{Group: "apps", Version: "v1"}
	batchV1    = schema.GroupVersion{Group: "batch", Version: "v1"}
	asV1       = schema.GroupVersion{Group: "autoscaling", Version: "v1"}
	asV2       = schema.GroupVersion{Group: "autoscaling", Version: "v2"}
	exV1alpha1 = schema.GroupVersion{Group: "example.com", Version: "v1alpha1"}
	exV1beta1  = schema.GroupVersion{Group: "example.com", Version: "v1beta1"}
)

// verbsStrategy declares its own verbs.
type verbsStrategy struct {
	registry.Strategy
	verbs []string
}

func (s verbsStrategy) Verbs() []string { return s.verbs }

func testResources() []registry.Resource {
	return []registry.Resource{
		// Groups and resources deliberately out of order.
		{GroupVersion: batchV1, Resource: "jobs", Kind: "Job", SingularName: "job", Namespaced: true, Categories: []string{"all"}, Subresources: map[string]registry.Subresource{"status": registry.StatusSubresource()}},
		{GroupVersion: coreV1, Resource: "pods", Kind: "Pod", SingularName: "pod", Namespaced: true, ShortNames: []string{"po"}, Categories: []string{"all"},
			Subresources: map[string]registry.Subresource{"status": registry.StatusSubresource(), "binding": registry.BindingSubresource(), "eviction": registry.EvictionSubresource(), "log": registry.ConnectSubresource("", "get")}},
		{GroupVersion: coreV1, Resource: "namespaces", Kind: "Namespace", SingularName: "namespace", ShortNames: []string{"ns"},
			Strategy:     verbsStrategy{verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}},
			Subresources: map[string]registry.Subresource{"status": registry.StatusSubresource(), "finalize": registry.FinalizeSubresource()}},
		{GroupVersion: coreV1, Resource: "bindings", Kind: "Binding", SingularName: "binding", Namespaced: true, Strategy: verbsStrategy{verbs: []string{"create"}}},
		{GroupVersion: coreV1, Resource: "replicationcontrollers", Kind: "ReplicationController", SingularName: "replicationcontroller", Namespaced: true,
			ShortNames: []string{"rc"}, Subresources: map[string]registry.Subresource{"scale": registry.ScaleSubresource(), "status": registry.StatusSubresource()}},
		{GroupVersion: coreV1, Resource: "nodes", Kind: "Node", SingularName: "node", Subresources: map[string]registry.Subresource{"proxy": registry.ConnectSubresource("NodeProxyOptions", "create", "delete", "get", "patch", "update")}},
		{GroupVersion: asV1, Resource: "horizontalpodautoscalers", Kind: "HorizontalPodAutoscaler", SingularName: "horizontalpodautoscaler", Namespaced: true, ShortNames: []string{"hpa"}},
		{GroupVersion: appsV1, Resource: "deployments", Kind: "Deployment", SingularName: "deployment", Namespaced: true, ShortNames: []string{"deploy"},
			Categories: []string{"all"}, Subresources: map[string]registry.Subresource{"scale": registry.ScaleSubresource(), "status": registry.StatusSubresource()}},
		{GroupVersion: asV2, Resource: "horizontalpodautoscalers", Kind: "HorizontalPodAutoscaler", SingularName: "horizontalpodautoscaler", Namespaced: true, ShortNames: []string{"hpa"}},
		{GroupVersion: exV1alpha1, Resource: "widgets", Kind: "Widget", SingularName: "widget", Namespaced: true},
		{GroupVersion: exV1beta1, Resource: "widgets", Kind: "Widget", SingularName: "widget", Namespaced: true,
			Strategy: verbsStrategy{verbs: []string{"list", "get"}}},
	}
}

func testVersion() version.Info {
	return VersionInfo("v1.37.2+skiff", "abc123", "2026-01-02T03:04:05Z")
}

func do(t *testing.T, h http.Handler, method, path, accept string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	r.Host = "10.0.0.1:6443"
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func gv(g string, v string) metav1.GroupVersionForDiscovery {
	return metav1.GroupVersionForDiscovery{GroupVersion: schema.GroupVersion{Group: g, Version: v}.String(), Version: v}
}

func TestLegacyJSON(t *testing.T) {
	d := New(testResources(), testVersion())
	allVerbs := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	tests := []struct {
		name string
		path string
		// want is the decoded document; raw the exact JSON start when set.
		want    runtime.Object
		newObj  func() runtime.Object
		rawWant string
	}{
		{
			name:   "api",
			path:   "/api",
			newObj: func() runtime.Object { return &metav1.APIVersions{} },
			want: &metav1.APIVersions{
				TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
				Versions:                   []string{"v1"},
				ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "10.0.0.1:6443"}},
			},
		},
		{
			name:   "apis lists groups, apps first",
			path:   "/apis",
			newObj: func() runtime.Object { return &metav1.APIGroupList{} },
			want: &metav1.APIGroupList{
				TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
				Groups: []metav1.APIGroup{
					{Name: "apps", Versions: []metav1.GroupVersionForDiscovery{gv("apps", "v1")}, PreferredVersion: gv("apps", "v1")},
					{Name: "autoscaling", Versions: []metav1.GroupVersionForDiscovery{gv("autoscaling", "v2"), gv("autoscaling", "v1")}, PreferredVersion: gv("autoscaling", "v2")},
					{Name: "batch", Versions: []metav1.GroupVersionForDiscovery{gv("batch", "v1")}, PreferredVersion: gv("batch", "v1")},
					{Name: "example.com", Versions: []metav1.GroupVersionForDiscovery{gv("example.com", "v1beta1"), gv("example.com", "v1alpha1")}, PreferredVersion: gv("example.com", "v1beta1")},
				},
			},
		},
		{
			name:   "one group",
			path:   "/apis/autoscaling",
			newObj: func() runtime.Object { return &metav1.APIGroup{} },
			want: &metav1.APIGroup{
				TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
				Name:     "autoscaling", Versions: []metav1.GroupVersionForDiscovery{gv("autoscaling", "v2"), gv("autoscaling", "v1")}, PreferredVersion: gv("autoscaling", "v2"),
			},
		},
		{
			name:   "core resources with subresources",
			path:   "/api/v1",
			newObj: func() runtime.Object { return &metav1.APIResourceList{} },
			want: &metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList"},
				GroupVersion: "v1",
				APIResources: []metav1.APIResource{
					{Name: "bindings", SingularName: "binding", Namespaced: true, Kind: "Binding", Verbs: metav1.Verbs{"create"}, StorageVersionHash: StorageVersionHash(coreV1, "Binding")},
					{Name: "namespaces", SingularName: "namespace", Kind: "Namespace", Verbs: metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}, ShortNames: []string{"ns"}, StorageVersionHash: "Q3oi5N2YM8M="},
					{Name: "namespaces/finalize", Kind: "Namespace", Verbs: metav1.Verbs{"update"}},
					{Name: "namespaces/status", Kind: "Namespace", Verbs: metav1.Verbs{"get", "patch", "update"}},
					{Name: "nodes", SingularName: "node", Kind: "Node", Verbs: allVerbs, StorageVersionHash: "XwShjMxG9Fs="},
					{Name: "nodes/proxy", Kind: "NodeProxyOptions", Verbs: metav1.Verbs{"create", "delete", "get", "patch", "update"}},
					{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: allVerbs, ShortNames: []string{"po"}, Categories: []string{"all"}, StorageVersionHash: "xPOwRZ+Yhw8="},
					{Name: "pods/binding", Namespaced: true, Kind: "Binding", Verbs: metav1.Verbs{"create"}},
					{Name: "pods/eviction", Namespaced: true, Group: "policy", Version: "v1", Kind: "Eviction", Verbs: metav1.Verbs{"create"}},
					{Name: "pods/log", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get"}},
					{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get", "patch", "update"}},
					{Name: "replicationcontrollers", SingularName: "replicationcontroller", Namespaced: true, Kind: "ReplicationController", Verbs: allVerbs, ShortNames: []string{"rc"}, StorageVersionHash: "Jond2If31h0="},
					{Name: "replicationcontrollers/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get", "patch", "update"}},
					{Name: "replicationcontrollers/status", Namespaced: true, Kind: "ReplicationController", Verbs: metav1.Verbs{"get", "patch", "update"}},
				},
			},
		},
		{
			name:   "group version resources, strategy verbs",
			path:   "/apis/example.com/v1beta1",
			newObj: func() runtime.Object { return &metav1.APIResourceList{} },
			want: &metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: "example.com/v1beta1",
				APIResources: []metav1.APIResource{
					{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"get", "list"}, StorageVersionHash: StorageVersionHash(exV1beta1, "Widget")},
				},
			},
		},
		{
			name:   "older version reports the storage version hash",
			path:   "/apis/autoscaling/v1",
			newObj: func() runtime.Object { return &metav1.APIResourceList{} },
			want: &metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: "autoscaling/v1",
				APIResources: []metav1.APIResource{
					{Name: "horizontalpodautoscalers", SingularName: "horizontalpodautoscaler", Namespaced: true, Kind: "HorizontalPodAutoscaler", Verbs: allVerbs, ShortNames: []string{"hpa"}, StorageVersionHash: StorageVersionHash(asV2, "HorizontalPodAutoscaler")},
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, d, "GET", tc.path, "application/json, */*")
			if rec.Code != http.StatusOK {
				t.Fatalf("code = %d: %s", rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			got := tc.newObj()
			if err := json.Unmarshal(rec.Body.Bytes(), got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("document (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	d := New(testResources(), testVersion())
	tests := []struct {
		name       string
		method     string
		path       string
		accept     string
		wantCode   int
		wantReason metav1.StatusReason
	}{
		{name: "unknown group", path: "/apis/nope.example.com", wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "unknown version", path: "/apis/apps/v1beta1", wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "unknown core version", path: "/api/v2", wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "not a discovery path", path: "/apis/apps/v1/deployments", wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "post", method: "POST", path: "/apis", wantCode: 405, wantReason: metav1.StatusReasonMethodNotAllowed},
		{name: "unacceptable", path: "/apis/apps", accept: "text/html", wantCode: 406, wantReason: metav1.StatusReasonNotAcceptable},
		{name: "aggregated only, on a group path", path: "/apis/apps", accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", wantCode: 406, wantReason: metav1.StatusReasonNotAcceptable},
		{name: "unknown aggregated version only", path: "/apis", accept: "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", wantCode: 406, wantReason: metav1.StatusReasonNotAcceptable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "GET"
			}
			rec := do(t, d, method, tc.path, tc.accept)
			if rec.Code != tc.wantCode {
				t.Fatalf("code = %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var st metav1.Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || st.Code != int32(tc.wantCode) || st.Reason != tc.wantReason {
				t.Errorf("status = %+v", st)
			}
		})
	}
	rec := do(t, d, "GET", "/apis/nope", "")
	if want := "the server could not find the requested resource"; !bytes.Contains(rec.Body.Bytes(), []byte(want)) {
		t.Errorf("404 body %s lacks %q", rec.Body, want)
	}
}

func protobufSerializer(t *testing.T) runtime.Serializer {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(serializer.NewCodecFactory(NewScheme()).SupportedMediaTypes(), "application/vnd.kubernetes.protobuf")
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	return info.Serializer
}

func TestProtobufMatchesJSON(t *testing.T) {
	d := New(testResources(), testVersion())
	pb := protobufSerializer(t)
	for _, path := range []string{"/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1"} {
		t.Run(path, func(t *testing.T) {
			rec := do(t, d, "GET", path, "application/vnd.kubernetes.protobuf, application/json")
			if rec.Code != 200 {
				t.Fatalf("code %d: %s", rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf" {
				t.Errorf("Content-Type = %q", ct)
			}
			if !bytes.HasPrefix(rec.Body.Bytes(), []byte("k8s\x00")) {
				t.Fatalf("body lacks the protobuf envelope: %q", rec.Body.Bytes()[:8])
			}
			got, _, err := pb.Decode(rec.Body.Bytes(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			jsonRec := do(t, d, "GET", path, "application/json")
			want := got.DeepCopyObject()
			if err := json.Unmarshal(jsonRec.Body.Bytes(), want); err != nil {
				t.Fatal(err)
			}
			// JSON of /api and /api/v1 carries no apiVersion; protobuf must.
			want.GetObjectKind().SetGroupVersionKind(got.GetObjectKind().GroupVersionKind())
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("protobuf differs from JSON (-json +protobuf):\n%s", diff)
			}
		})
	}
}

const acceptAggregatedJSON = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

func TestAggregated(t *testing.T) {
	d := New(testResources(), testVersion())
	tests := []struct {
		name       string
		path       string
		accept     string
		wantCT     string
		wantGroups []string
	}{
		{name: "core json", path: "/api", accept: acceptAggregatedJSON + ",application/json", wantCT: acceptAggregatedJSON, wantGroups: []string{""}},
		{name: "groups json", path: "/apis", accept: acceptAggregatedJSON + ",application/json", wantCT: acceptAggregatedJSON, wantGroups: []string{"apps", "autoscaling", "batch", "example.com"}},
		{
			name: "nopeer profile first", path: "/apis",
			accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer," + acceptAggregatedJSON + ",application/json",
			wantCT: acceptAggregatedJSON, wantGroups: []string{"apps", "autoscaling", "batch", "example.com"},
		},
		{
			name: "protobuf", path: "/apis",
			accept: "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
			wantCT: "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", wantGroups: []string{"apps", "autoscaling", "batch", "example.com"},
		},
		{name: "v2beta1 only falls back to legacy", path: "/apis", accept: "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", wantCT: "application/json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, d, "GET", tc.path, tc.accept)
			if rec.Code != 200 {
				t.Fatalf("code %d: %s", rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != tc.wantCT {
				t.Fatalf("Content-Type = %q, want %q", ct, tc.wantCT)
			}
			if rec.Header().Get("Vary") != "Accept" {
				t.Errorf("Vary = %q", rec.Header().Get("Vary"))
			}
			if tc.wantGroups == nil {
				var legacy metav1.APIGroupList
				if err := json.Unmarshal(rec.Body.Bytes(), &legacy); err != nil || legacy.Kind != "APIGroupList" {
					t.Fatalf("not a legacy group list: %v %s", err, rec.Body)
				}
				return
			}
			list := &apidiscoveryv2.APIGroupDiscoveryList{}
			if tc.wantCT == acceptAggregatedJSON {
				if err := json.Unmarshal(rec.Body.Bytes(), list); err != nil {
					t.Fatal(err)
				}
			} else {
				obj, _, err := protobufSerializer(t).Decode(rec.Body.Bytes(), nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				list = obj.(*apidiscoveryv2.APIGroupDiscoveryList)
			}
			if list.Kind != "APIGroupDiscoveryList" || list.APIVersion != "apidiscovery.k8s.io/v2" {
				t.Errorf("type = %v", list.TypeMeta)
			}
			var names []string
			for _, g := range list.Items {
				names = append(names, g.Name)
			}
			if diff := cmp.Diff(tc.wantGroups, names); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
			if rec.Header().Get("ETag") == "" {
				t.Error("no ETag")
			}
		})
	}
}

func TestAggregatedDocument(t *testing.T) {
	d := New(testResources(), testVersion())
	rec := do(t, d, "GET", "/apis", acceptAggregatedJSON)
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	apps := list.Items[0]
	want := apidiscoveryv2.APIGroupDiscovery{
		ObjectMeta: metav1.ObjectMeta{Name: "apps"},
		Versions: []apidiscoveryv2.APIVersionDiscovery{{
			Version:   "v1",
			Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
			Resources: []apidiscoveryv2.APIResourceDiscovery{{
				Resource:         "deployments",
				ResponseKind:     &metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
				Scope:            apidiscoveryv2.ScopeNamespace,
				SingularResource: "deployment",
				Verbs:            []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
				ShortNames:       []string{"deploy"},
				Categories:       []string{"all"},
				Subresources: []apidiscoveryv2.APISubresourceDiscovery{
					{Subresource: "scale", ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Verbs: []string{"get", "patch", "update"}},
					{Subresource: "status", ResponseKind: &metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Verbs: []string{"get", "patch", "update"}},
				},
			}},
		}},
	}
	if diff := cmp.Diff(want, apps); diff != "" {
		t.Errorf("apps (-want +got):\n%s", diff)
	}
	if got := list.Items[1].Versions[0].Version; got != "v2" {
		t.Errorf("autoscaling's first (preferred) version = %q, want v2", got)
	}
}

func TestAggregatedETag(t *testing.T) {
	d := New(testResources(), testVersion())
	first := do(t, d, "GET", "/apis", acceptAggregatedJSON)
	etag := first.Header().Get("ETag")
	r := httptest.NewRequest("GET", "/apis", nil)
	r.Header.Set("Accept", acceptAggregatedJSON)
	r.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, r)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("If-None-Match: code %d, %d bytes; want 304, empty", rec.Code, rec.Body.Len())
	}
	d.SetResources(testResources()[:3])
	if again := do(t, d, "GET", "/apis", acceptAggregatedJSON); again.Header().Get("ETag") == etag {
		t.Error("ETag unchanged after SetResources changed the groups")
	}
}

func TestVersion(t *testing.T) {
	d := New(nil, testVersion())
	rec := do(t, d, "GET", "/version", "")
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("code %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var got version.Info
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := testVersion()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version (-want +got):\n%s", diff)
	}
	if got.Major != "1" || got.Minor != "37" || got.GitVersion != "v1.37.2+skiff" || got.Platform == "" || got.GoVersion == "" || got.MinCompatibilityMinor != "36" {
		t.Errorf("version fields: %+v", got)
	}
	// An empty server still answers /api and /apis.
	if rec := do(t, d, "GET", "/apis", ""); rec.Code != 200 {
		t.Errorf("/apis with no resources: %d", rec.Code)
	}
}

func TestHandles(t *testing.T) {
	d := New(nil, version.Info{})
	for path, want := range map[string]bool{
		"/api": true, "/api/": true, "/api/v1": true, "/apis": true, "/apis/apps": true, "/apis/apps/v1": true, "/version": true,
		"/api/v1/pods": false, "/apis/apps/v1/deployments": false, "/healthz": false, "/": false, "/openapi/v2": false,
	} {
		if got := d.Handles(path); got != want {
			t.Errorf("Handles(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestNegotiate(t *testing.T) {
	tests := []struct {
		accept     string
		aggregated bool
		want       choice
		wantOK     bool
	}{
		{accept: "", want: choice{mediaType: mediaJSON}, wantOK: true},
		{accept: "*/*", want: choice{mediaType: mediaJSON}, wantOK: true},
		{accept: "application/*", want: choice{mediaType: mediaJSON}, wantOK: true},
		{accept: "application/yaml", want: choice{mediaType: mediaYAML}, wantOK: true},
		{accept: "application/json;charset=utf-8", want: choice{mediaType: mediaJSON}, wantOK: true},
		{accept: "application/json;q=0.5, application/vnd.kubernetes.protobuf", want: choice{mediaType: mediaProtobuf}, wantOK: true},
		{accept: "application/vnd.kubernetes.protobuf;q=0, application/json", want: choice{mediaType: mediaJSON}, wantOK: true},
		{accept: acceptAggregatedJSON, aggregated: true, want: choice{mediaType: mediaJSON, aggregated: true}, wantOK: true},
		{accept: acceptAggregatedJSON + ",application/json", aggregated: false, want: choice{mediaType: mediaJSON}, wantOK: true},
		{accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=other,application/yaml", aggregated: true, want: choice{mediaType: mediaYAML}, wantOK: true},
		{accept: "application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", aggregated: true},
		{accept: "text/plain"},
		{accept: "garbage;;;"},
	}
	for _, tc := range tests {
		t.Run(tc.accept, func(t *testing.T) {
			got, ok := negotiate(tc.accept, tc.aggregated)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("negotiate = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestHead(t *testing.T) {
	d := New(testResources(), testVersion())
	rec := do(t, d, "HEAD", "/apis", "")
	if rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("HEAD: code %d, %d bytes", rec.Code, rec.Body.Len())
	}
	_, _ = io.Copy(io.Discard, rec.Body)
}

// TestPriorityOrder: with priorities set, groups are listed by their
// highest groupPriorityMinimum (ties by APIService name) and versions by
// versionPriority before version order, in the legacy and the aggregated
// documents, as upstream's aggregator lists them.
func TestPriorityOrder(t *testing.T) {
	netV1 := schema.GroupVersion{Group: "networking.k8s.io", Version: "v1"}
	calicoV1 := schema.GroupVersion{Group: "crd.projectcalico.org", Version: "v1"}
	rs := append(testResources(),
		registry.Resource{GroupVersion: netV1, Resource: "networkpolicies", Kind: "NetworkPolicy", SingularName: "networkpolicy", Namespaced: true},
		registry.Resource{GroupVersion: calicoV1, Resource: "networkpolicies", Kind: "NetworkPolicy", SingularName: "networkpolicy", Namespaced: true})
	prio := map[schema.GroupVersion][2]int32{
		appsV1: {17800, 15}, asV1: {17500, 15}, asV2: {17500, 30}, batchV1: {17400, 15}, netV1: {17200, 15},
		// A CRD group's (upstream's crdregistration: 1000/100) and one
		// whose older version asks to be preferred.
		calicoV1: {1000, 100}, exV1alpha1: {1000, 200}, exV1beta1: {1000, 100},
	}
	d := New(rs, testVersion())
	d.SetPriority(func(gv schema.GroupVersion) (int32, int32) { p := prio[gv]; return p[0], p[1] })

	var groups metav1.APIGroupList
	rec := do(t, d, http.MethodGet, "/apis", "application/json")
	if err := json.Unmarshal(rec.Body.Bytes(), &groups); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range groups.Groups {
		var vs []string
		for _, v := range g.Versions {
			vs = append(vs, v.Version)
		}
		got = append(got, g.Name+"="+strings.Join(vs, ",")+" preferred "+g.PreferredVersion.Version)
	}
	want := []string{
		"apps=v1 preferred v1", "autoscaling=v2,v1 preferred v2", "batch=v1 preferred v1", "networking.k8s.io=v1 preferred v1",
		"crd.projectcalico.org=v1 preferred v1", "example.com=v1alpha1,v1beta1 preferred v1alpha1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/apis (-want +got):\n%s", diff)
	}

	var agg apidiscoveryv2.APIGroupDiscoveryList
	rec = do(t, d, http.MethodGet, "/apis", acceptAggregatedJSON)
	if err := json.Unmarshal(rec.Body.Bytes(), &agg); err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, g := range agg.Items {
		var vs []string
		for _, v := range g.Versions {
			vs = append(vs, v.Version)
		}
		got = append(got, g.Name+"="+strings.Join(vs, ","))
	}
	want = []string{"apps=v1", "autoscaling=v2,v1", "batch=v1", "networking.k8s.io=v1", "crd.projectcalico.org=v1", "example.com=v1alpha1,v1beta1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("aggregated /apis (-want +got):\n%s", diff)
	}
}
