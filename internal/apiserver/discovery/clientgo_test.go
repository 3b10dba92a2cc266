package discovery

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// TestClientGo drives the handler with client-go's own discovery client, in
// aggregated mode (its default) and in legacy mode.
func TestClientGo(t *testing.T) {
	d := New(testResources(), testVersion())
	var mu sync.Mutex
	served := map[string]string{} // path -> Content-Type of the last answer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.ServeHTTP(w, r)
		mu.Lock()
		served[r.URL.Path] = w.Header().Get("Content-Type")
		mu.Unlock()
	}))
	defer srv.Close()

	wantGroups := []string{"", "apps", "autoscaling", "batch", "example.com"}
	wantResources := map[string][]string{
		"v1": {"bindings", "namespaces", "namespaces/finalize", "namespaces/status", "nodes", "nodes/proxy",
			"pods", "pods/binding", "pods/eviction", "pods/log", "pods/status",
			"replicationcontrollers", "replicationcontrollers/scale", "replicationcontrollers/status"},
		"apps/v1":              {"deployments", "deployments/scale", "deployments/status"},
		"autoscaling/v1":       {"horizontalpodautoscalers"},
		"autoscaling/v2":       {"horizontalpodautoscalers"},
		"batch/v1":             {"jobs", "jobs/status"},
		"example.com/v1alpha1": {"widgets"},
		"example.com/v1beta1":  {"widgets"},
	}
	// Preferred resources: one version per group, no subresources.
	wantPreferred := map[string][]string{
		"v1":                  {"bindings", "namespaces", "nodes", "pods", "replicationcontrollers"},
		"apps/v1":             {"deployments"},
		"autoscaling/v2":      {"horizontalpodautoscalers"},
		"batch/v1":            {"jobs"},
		"example.com/v1beta1": {"widgets"},
	}

	for _, legacy := range []bool{false, true} {
		name := "aggregated"
		if legacy {
			name = "legacy"
		}
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			clear(served)
			mu.Unlock()
			dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			dc.UseLegacyDiscovery = legacy

			groups, lists, err := dc.ServerGroupsAndResources()
			if err != nil {
				t.Fatalf("ServerGroupsAndResources: %v", err)
			}
			var groupNames []string
			for _, g := range groups {
				groupNames = append(groupNames, g.Name)
			}
			if diff := cmp.Diff(wantGroups, groupNames); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantResources, names(lists)); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			for _, g := range groups {
				if g.Name == "autoscaling" && g.PreferredVersion.Version != "v2" {
					t.Errorf("autoscaling preferred %q, want v2", g.PreferredVersion.Version)
				}
			}
			scale, ok := find(lists, "apps/v1", "deployments/scale")
			if !ok || scale.Group != "autoscaling" || scale.Version != "v1" || scale.Kind != "Scale" || !scale.Namespaced {
				t.Errorf("deployments/scale = %+v", scale)
			}
			pods, _ := find(lists, "v1", "pods")
			if diff := cmp.Diff(metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}, pods.Verbs); diff != "" {
				t.Errorf("pods verbs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"po"}, pods.ShortNames); diff != "" {
				t.Errorf("pods shortNames (-want +got):\n%s", diff)
			}

			preferred, err := dc.ServerPreferredResources()
			if err != nil {
				t.Fatalf("ServerPreferredResources: %v", err)
			}
			if diff := cmp.Diff(wantPreferred, names(preferred)); diff != "" {
				t.Errorf("preferred resources (-want +got):\n%s", diff)
			}

			// kubectl's REST mapper is built from the same calls.
			grs, err := restmapper.GetAPIGroupResources(dc)
			if err != nil {
				t.Fatal(err)
			}
			mapper := restmapper.NewDiscoveryRESTMapper(grs)
			gvk, err := mapper.KindFor(schema.GroupVersionResource{Resource: "horizontalpodautoscalers"})
			if err != nil || gvk != (schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}) {
				t.Errorf("KindFor(hpa) = %v, %v", gvk, err)
			}

			// Make sure the format under test is the one that was served.
			mu.Lock()
			wantCT := acceptAggregatedJSON
			if legacy {
				wantCT = "application/json"
			}
			for _, p := range []string{"/api", "/apis"} {
				if served[p] != wantCT {
					t.Errorf("%s answered %q, want %q", p, served[p], wantCT)
				}
			}
			_, fetchedGroupVersion := served["/apis/apps/v1"]
			mu.Unlock()
			if fetchedGroupVersion == !legacy {
				t.Errorf("fetched /apis/apps/v1: %v; aggregated discovery should make it unnecessary", fetchedGroupVersion)
			}

			info, err := dc.ServerVersion()
			if err != nil || info.GitVersion != "v1.37.2+skiff" || info.Minor != "37" {
				t.Errorf("ServerVersion = %+v, %v", info, err)
			}
		})
	}
}

func names(lists []*metav1.APIResourceList) map[string][]string {
	out := map[string][]string{}
	for _, l := range lists {
		if len(l.APIResources) == 0 {
			continue // client-go keeps empty lists for non-preferred versions
		}
		var ns []string
		for _, r := range l.APIResources {
			ns = append(ns, r.Name)
		}
		sort.Strings(ns)
		out[l.GroupVersion] = ns
	}
	return out
}

func find(lists []*metav1.APIResourceList, gv, name string) (metav1.APIResource, bool) {
	for _, l := range lists {
		if l.GroupVersion != gv {
			continue
		}
		for _, r := range l.APIResources {
			if r.Name == name {
				return r, true
			}
		}
	}
	return metav1.APIResource{}, false
}
