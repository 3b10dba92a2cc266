package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// servedResource is what discovery must say about one resource.
type servedResource struct {
	gv         string
	name       string
	kind       string
	namespaced bool
	verbs      []string // must all be present
	shortNames []string // exactly these
	categories []string // must all be present
}

var crudVerbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}

func withVerbs(extra ...string) []string {
	return append(append([]string(nil), crudVerbs...), extra...)
}

// coreSurface is the part of the API every client depends on; it is
// asserted strictly.
var coreSurface = []servedResource{
	{gv: "v1", name: "pods", kind: "Pod", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"po"}, categories: []string{"all"}},
	{gv: "v1", name: "services", kind: "Service", namespaced: true, verbs: crudVerbs, shortNames: []string{"svc"}, categories: []string{"all"}},
	{gv: "v1", name: "configmaps", kind: "ConfigMap", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"cm"}},
	{gv: "v1", name: "secrets", kind: "Secret", namespaced: true, verbs: withVerbs("deletecollection")},
	{gv: "v1", name: "namespaces", kind: "Namespace", verbs: crudVerbs, shortNames: []string{"ns"}},
	{gv: "v1", name: "nodes", kind: "Node", verbs: withVerbs("deletecollection"), shortNames: []string{"no"}},
	// The proxy subresources, as upstream lists them: the options kind, the
	// verbs of the methods they relay.
	{gv: "v1", name: "pods/proxy", kind: "PodProxyOptions", namespaced: true, verbs: []string{"create", "delete", "get", "patch", "update"}},
	{gv: "v1", name: "services/proxy", kind: "ServiceProxyOptions", namespaced: true, verbs: []string{"create", "delete", "get", "patch", "update"}},
	{gv: "v1", name: "nodes/proxy", kind: "NodeProxyOptions", verbs: []string{"create", "delete", "get", "patch", "update"}},
	{gv: "v1", name: "endpoints", kind: "Endpoints", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"ep"}},
	{gv: "v1", name: "events", kind: "Event", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"ev"}},
	{gv: "v1", name: "serviceaccounts", kind: "ServiceAccount", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"sa"}},
	{gv: "apps/v1", name: "deployments", kind: "Deployment", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"deploy"}, categories: []string{"all"}},
	{gv: "apps/v1", name: "replicasets", kind: "ReplicaSet", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"rs"}, categories: []string{"all"}},
	{gv: "coordination.k8s.io/v1", name: "leases", kind: "Lease", namespaced: true, verbs: withVerbs("deletecollection")},
	{gv: "discovery.k8s.io/v1", name: "endpointslices", kind: "EndpointSlice", namespaced: true, verbs: withVerbs("deletecollection")},
	{gv: "events.k8s.io/v1", name: "events", kind: "Event", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"ev"}},
}

// issueSurface is what issue #3 adds; also asserted strictly.
var issueSurface = []servedResource{
	{gv: "apps/v1", name: "daemonsets", kind: "DaemonSet", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"ds"}, categories: []string{"all"}},
	{gv: "apps/v1", name: "statefulsets", kind: "StatefulSet", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"sts"}, categories: []string{"all"}},
	{gv: "apps/v1", name: "controllerrevisions", kind: "ControllerRevision", namespaced: true, verbs: withVerbs("deletecollection")},
	{gv: "batch/v1", name: "jobs", kind: "Job", namespaced: true, verbs: withVerbs("deletecollection"), categories: []string{"all"}},
	{gv: "batch/v1", name: "cronjobs", kind: "CronJob", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"cj"}, categories: []string{"all"}},
	{gv: "autoscaling/v2", name: "horizontalpodautoscalers", kind: "HorizontalPodAutoscaler", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"hpa"}, categories: []string{"all"}},
	{gv: "policy/v1", name: "poddisruptionbudgets", kind: "PodDisruptionBudget", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"pdb"}},
	{gv: "v1", name: "persistentvolumes", kind: "PersistentVolume", verbs: withVerbs("deletecollection"), shortNames: []string{"pv"}},
	{gv: "v1", name: "persistentvolumeclaims", kind: "PersistentVolumeClaim", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"pvc"}},
	{gv: "v1", name: "limitranges", kind: "LimitRange", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"limits"}},
	{gv: "v1", name: "resourcequotas", kind: "ResourceQuota", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"quota"}},
	{gv: "v1", name: "replicationcontrollers", kind: "ReplicationController", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"rc"}, categories: []string{"all"}},
	{gv: "v1", name: "componentstatuses", kind: "ComponentStatus", verbs: []string{"get", "list"}, shortNames: []string{"cs"}},
	{gv: "storage.k8s.io/v1", name: "storageclasses", kind: "StorageClass", verbs: withVerbs("deletecollection"), shortNames: []string{"sc"}},
	{gv: "networking.k8s.io/v1", name: "ingresses", kind: "Ingress", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"ing"}},
	{gv: "networking.k8s.io/v1", name: "networkpolicies", kind: "NetworkPolicy", namespaced: true, verbs: withVerbs("deletecollection"), shortNames: []string{"netpol"}},
	{gv: "scheduling.k8s.io/v1", name: "priorityclasses", kind: "PriorityClass", verbs: withVerbs("deletecollection"), shortNames: []string{"pc"}},
	{gv: "node.k8s.io/v1", name: "runtimeclasses", kind: "RuntimeClass", verbs: withVerbs("deletecollection")},
	{gv: "certificates.k8s.io/v1", name: "certificatesigningrequests", kind: "CertificateSigningRequest", verbs: withVerbs("deletecollection"), shortNames: []string{"csr"}},
	{gv: "rbac.authorization.k8s.io/v1", name: "clusterroles", kind: "ClusterRole", verbs: withVerbs("deletecollection")},
	{gv: "admissionregistration.k8s.io/v1", name: "validatingwebhookconfigurations", kind: "ValidatingWebhookConfiguration", verbs: withVerbs("deletecollection")},
	{gv: "authorization.k8s.io/v1", name: "selfsubjectaccessreviews", kind: "SelfSubjectAccessReview", verbs: []string{"create"}},
}

// subresources that discovery must list.
var servedSubresources = map[string][]string{
	"v1":      {"pods/status", "pods/binding", "pods/log", "pods/exec", "namespaces/status", "namespaces/finalize", "services/status", "nodes/status"},
	"apps/v1": {"deployments/status", "deployments/scale", "replicasets/status", "replicasets/scale"},
}

// indexResources maps "group/version" → resource name → APIResource.
func indexResources(lists []*metav1.APIResourceList) map[string]map[string]metav1.APIResource {
	idx := map[string]map[string]metav1.APIResource{}
	for _, l := range lists {
		if idx[l.GroupVersion] == nil {
			idx[l.GroupVersion] = map[string]metav1.APIResource{}
		}
		for _, r := range l.APIResources {
			idx[l.GroupVersion][r.Name] = r
		}
	}
	return idx
}

func checkServed(t *testing.T, idx map[string]map[string]metav1.APIResource, want servedResource) {
	t.Helper()
	r, ok := idx[want.gv][want.name]
	if !ok {
		if _, ok := idx[want.gv]; !ok {
			t.Errorf("%s %s: not served (group version %s is not served)", want.gv, want.name, want.gv)
		} else {
			t.Errorf("%s %s: not served", want.gv, want.name)
		}
		return
	}
	if r.Kind != want.kind || r.Namespaced != want.namespaced {
		t.Errorf("%s %s: kind %q namespaced %v, want %q %v", want.gv, want.name, r.Kind, r.Namespaced, want.kind, want.namespaced)
	}
	if missing := sets.New(want.verbs...).Difference(sets.New(r.Verbs...)); missing.Len() > 0 {
		t.Errorf("%s %s: verbs %v lack %v", want.gv, want.name, r.Verbs, sets.List(missing))
	}
	if diff := cmp.Diff(sortedCopy(want.shortNames), sortedCopy(r.ShortNames)); diff != "" {
		t.Errorf("%s %s: short names (-want +got):\n%s", want.gv, want.name, diff)
	}
	if missing := sets.New(want.categories...).Difference(sets.New(r.Categories...)); missing.Len() > 0 {
		t.Errorf("%s %s: categories %v lack %v", want.gv, want.name, r.Categories, sets.List(missing))
	}
}

func sortedCopy(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}

// TestDiscoveryClient reads the server's API surface the way kubectl,
// Helm and controllers do: aggregated discovery (client-go's default)
// and the legacy per-group documents must both describe every resource
// with its verbs, short names and categories, and agree with each other.
func TestDiscoveryClient(t *testing.T) {
	c := startCluster(t)

	aggregated, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	legacy.UseLegacyDiscovery = true

	results := map[string]map[string]map[string]metav1.APIResource{}
	for name, dc := range map[string]*discovery.DiscoveryClient{"aggregated": aggregated, "legacy": legacy} {
		t.Run(name, func(t *testing.T) {
			groups, lists, err := dc.ServerGroupsAndResources()
			if err != nil {
				t.Fatalf("ServerGroupsAndResources: %v", err)
			}
			if len(groups) == 0 || groups[0].Name != "" {
				t.Errorf("first group = %v, want the legacy core group", groups)
			}
			idx := indexResources(lists)
			results[name] = idx
			t.Run("core resources", func(t *testing.T) {
				for _, want := range coreSurface {
					checkServed(t, idx, want)
				}
				for gv, subs := range servedSubresources {
					for _, s := range subs {
						if _, ok := idx[gv][s]; !ok {
							t.Errorf("%s: subresource %s not in discovery", gv, s)
						}
					}
				}
			})
			t.Run("issue 3 resources", func(t *testing.T) {
				for _, want := range issueSurface {
					checkServed(t, idx, want)
				}
			})
			// Every served group has a preferred version listed among its versions.
			for _, g := range groups {
				found := false
				for _, v := range g.Versions {
					found = found || v.GroupVersion == g.PreferredVersion.GroupVersion
				}
				if !found {
					t.Errorf("group %q: preferred version %q not among %v", g.Name, g.PreferredVersion.GroupVersion, g.Versions)
				}
			}
		})
	}
	if len(results) != 2 {
		return
	}
	t.Run("aggregated and legacy agree", func(t *testing.T) {
		summary := func(idx map[string]map[string]metav1.APIResource) map[string]string {
			out := map[string]string{}
			for gv, rs := range idx {
				for name, r := range rs {
					out[gv+" "+name] = fmt.Sprintf("kind=%s ns=%v verbs=%v short=%v cat=%v",
						r.Kind, r.Namespaced, sortedCopy(r.Verbs), sortedCopy(r.ShortNames), sortedCopy(r.Categories))
				}
			}
			return out
		}
		if diff := cmp.Diff(summary(results["legacy"]), summary(results["aggregated"])); diff != "" {
			t.Errorf("discovery documents differ (-legacy +aggregated):\n%s", diff)
		}
	})

	t.Run("server version", func(t *testing.T) {
		v, err := aggregated.ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.Major != "1" || !strings.HasPrefix(v.GitVersion, "v1.") {
			t.Errorf("server version = %+v, want a v1.x release", v)
		}
	})
}

// TestCachedDiscoveryRESTMapper: the memory-cached discovery client and
// the deferred REST mapper built on it (what kubectl and Helm use) map
// kinds to resources, expand short names and survive Invalidate.
func TestCachedDiscoveryRESTMapper(t *testing.T) {
	c := startCluster(t)
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	expander := restmapper.NewShortcutExpander(mapper, cached, func(string) {})

	mappings := []struct {
		gk       schema.GroupKind
		resource schema.GroupVersionResource
		scope    meta.RESTScopeName
	}{
		{schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, meta.RESTScopeNameNamespace},
		{schema.GroupKind{Kind: "Pod"}, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, meta.RESTScopeNameNamespace},
		{schema.GroupKind{Kind: "Namespace"}, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, meta.RESTScopeNameRoot},
		{schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "batch", Kind: "Job"}, schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, meta.RESTScopeNameRoot},
	}
	for _, m := range mappings {
		t.Run("mapping "+m.gk.String(), func(t *testing.T) {
			got, err := mapper.RESTMapping(m.gk)
			if err != nil {
				t.Fatalf("RESTMapping(%s): %v", m.gk, err)
			}
			if got.Resource != m.resource || got.Scope.Name() != m.scope {
				t.Errorf("RESTMapping(%s) = %s scope %s, want %s scope %s", m.gk, got.Resource, got.Scope.Name(), m.resource, m.scope)
			}
		})
	}

	shortNames := []struct {
		short string
		want  schema.GroupVersionKind
	}{
		{"po", schema.GroupVersionKind{Version: "v1", Kind: "Pod"}},
		{"svc", schema.GroupVersionKind{Version: "v1", Kind: "Service"}},
		{"deploy", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}},
		{"rs", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}},
		{"cm", schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}},
		{"ns", schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}},
		{"sa", schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}},
	}
	for _, s := range shortNames {
		t.Run("short name "+s.short, func(t *testing.T) {
			got, err := expander.KindFor(schema.GroupVersionResource{Resource: s.short})
			if err != nil {
				t.Fatalf("KindFor(%s): %v", s.short, err)
			}
			if got != s.want {
				t.Errorf("KindFor(%s) = %s, want %s", s.short, got, s.want)
			}
		})
	}

	t.Run("unknown kind, then invalidate", func(t *testing.T) {
		_, err := mapper.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"})
		if !meta.IsNoMatchError(err) {
			t.Errorf("RESTMapping(Widget) error = %v, want a no-match error", err)
		}
		if !cached.Fresh() {
			t.Errorf("cache is not fresh after the first lookups")
		}
		mapper.Reset()
		if cached.Fresh() {
			t.Errorf("cache still fresh after Reset")
		}
		if _, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
			t.Errorf("RESTMapping after Reset: %v", err)
		}
	})
}

// TestDynamicClientAcrossGroups: the dynamic client creates, reads,
// lists, patches and deletes objects in every group it is pointed at,
// namespaced or cluster-scoped.
func TestDynamicClientAcrossGroups(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	dyn := c.Dynamic()
	ctx := testCtx(t, 60*time.Second)

	podTemplate := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "dyn"}},
		"spec": map[string]any{
			"containers":    []any{map[string]any{"name": "c", "image": "busybox"}},
			"restartPolicy": "Never",
		},
	}
	tests := []struct {
		gvr        schema.GroupVersionResource
		kind       string
		namespaced bool
		body       map[string]any // fields besides apiVersion, kind, metadata
	}{
		{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, kind: "ConfigMap", namespaced: true,
			body: map[string]any{"data": map[string]any{"k": "v"}}},
		{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, kind: "Deployment", namespaced: true,
			body: map[string]any{"spec": map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"app": "dyn"}},
				"template": map[string]any{
					"metadata": podTemplate["metadata"],
					"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}},
				},
			}}},
		{gvr: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, kind: "Lease", namespaced: true,
			body: map[string]any{"spec": map[string]any{"holderIdentity": "me", "leaseDurationSeconds": int64(15)}}},
		{gvr: schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, kind: "EndpointSlice", namespaced: true,
			body: map[string]any{"addressType": "IPv4", "endpoints": []any{map[string]any{"addresses": []any{"10.0.0.1"}}}}},
		{gvr: schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, kind: "Event", namespaced: true,
			body: map[string]any{
				"eventTime": "2025-01-01T00:00:00.000000Z", "reportingController": "it/dynamic", "reportingInstance": "it-1",
				"action": "Test", "reason": "Testing", "type": "Normal",
				"regarding": map[string]any{"kind": "ConfigMap", "name": "x", "namespace": ns, "apiVersion": "v1"},
			}},
		{gvr: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, kind: "Job", namespaced: true,
			body: map[string]any{"spec": map[string]any{"template": podTemplate}}},
		{gvr: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}, kind: "Ingress", namespaced: true,
			body: map[string]any{"spec": map[string]any{"defaultBackend": map[string]any{"service": map[string]any{"name": "web", "port": map[string]any{"number": int64(80)}}}}}},
		{gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, kind: "Role", namespaced: true,
			body: map[string]any{"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get"}}}}},
		{gvr: schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}, kind: "PriorityClass",
			body: map[string]any{"value": int64(1000)}},
		{gvr: schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, kind: "StorageClass",
			body: map[string]any{"provisioner": "example.com/none"}},
	}
	for _, tc := range tests {
		t.Run(tc.gvr.String(), func(t *testing.T) {
			name := "dyn-" + strings.ToLower(tc.kind)
			if !tc.namespaced {
				name += "-" + ns
			}
			obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(tc.body)}
			obj.SetAPIVersion(tc.gvr.GroupVersion().String())
			obj.SetKind(tc.kind)
			obj.SetName(name)
			obj.SetLabels(map[string]string{"suite": "dynamic"})
			var iface dynamic.ResourceInterface = dyn.Resource(tc.gvr)
			if tc.namespaced {
				iface = dyn.Resource(tc.gvr).Namespace(ns)
			}
			created, err := iface.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetKind() != tc.kind || created.GetAPIVersion() != tc.gvr.GroupVersion().String() {
				t.Errorf("created object: uid %q rv %q %s %s", created.GetUID(), created.GetResourceVersion(), created.GetAPIVersion(), created.GetKind())
			}
			got, err := iface.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if got.GetUID() != created.GetUID() {
				t.Errorf("get uid %s, want %s", got.GetUID(), created.GetUID())
			}
			list, err := iface.List(ctx, metav1.ListOptions{LabelSelector: "suite=dynamic"})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			var names []string
			for _, it := range list.Items {
				names = append(names, it.GetName())
			}
			if !tc.namespaced {
				if !sets.New(names...).Has(name) {
					t.Errorf("list names %v lack %s", names, name)
				}
			} else if diff := cmp.Diff([]string{name}, names); diff != "" {
				t.Errorf("list names (-want +got):\n%s", diff)
			}
			if list.GetKind() != tc.kind+"List" || list.GetResourceVersion() == "" {
				t.Errorf("list kind %q rv %q, want %sList with a resourceVersion", list.GetKind(), list.GetResourceVersion(), tc.kind)
			}
			patched, err := iface.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"touched":"yes"}}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatalf("merge patch: %v", err)
			}
			if patched.GetAnnotations()["touched"] != "yes" || patched.GetResourceVersion() == created.GetResourceVersion() {
				t.Errorf("patched: annotations %v rv %s (created rv %s)", patched.GetAnnotations(), patched.GetResourceVersion(), created.GetResourceVersion())
			}
			if err := iface.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			eventually(t, 10*time.Second, "object gone", func() (bool, error) {
				_, err := iface.Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), err
			})
		})
	}
}

// TestControllerRuntimeClient drives the server with controller-runtime's
// client, whose REST mapper is built from discovery: typed and
// unstructured objects, Create/Get/List/Update/Patch/Apply/Delete.
func TestControllerRuntimeClient(t *testing.T) {
	c := startCluster(t)
	ns := newNamespace(t, c.Clientset())
	ctx := testCtx(t, 60*time.Second)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	httpClient, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(c.Config, httpClient)
	if err != nil {
		t.Fatalf("dynamic REST mapper: %v", err)
	}
	t.Run("mapper", func(t *testing.T) {
		m, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1")
		if err != nil {
			t.Fatalf("RESTMapping: %v", err)
		}
		if m.Resource.Resource != "deployments" || m.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Errorf("mapping = %s %s, want deployments namespaced", m.Resource, m.Scope.Name())
		}
		namespaced, err := apiutil.IsGVKNamespaced(schema.GroupVersionKind{Version: "v1", Kind: "Node"}, mapper)
		if err != nil || namespaced {
			t.Errorf("IsGVKNamespaced(Node) = %v, %v; want false", namespaced, err)
		}
	})

	// Without a Mapper, the client builds its own dynamic REST mapper
	// from discovery, as a manager does.
	cl, err := ctrlclient.New(c.Config, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("controller-runtime client: %v", err)
	}

	t.Run("typed CRUD", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "crt", Namespace: ns, Labels: map[string]string{"via": "crt"}}, Data: map[string]string{"a": "1"}}
		if err := cl.Create(ctx, cm); err != nil {
			t.Fatalf("create: %v", err)
		}
		if cm.UID == "" || cm.ResourceVersion == "" {
			t.Errorf("create did not fill uid/resourceVersion: %+v", cm.ObjectMeta)
		}
		var got corev1.ConfigMap
		if err := cl.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "crt"}, &got); err != nil {
			t.Fatalf("get: %v", err)
		}
		got.Data["b"] = "2"
		if err := cl.Update(ctx, &got); err != nil {
			t.Fatalf("update: %v", err)
		}
		// A stale update is a conflict.
		cm.Data["c"] = "3"
		if err := cl.Update(ctx, cm); !apierrors.IsConflict(err) {
			t.Errorf("update with stale resourceVersion: %v, want Conflict", err)
		}
		base := got.DeepCopy()
		got.Data["a"] = "one"
		if err := cl.Patch(ctx, &got, ctrlclient.MergeFrom(base)); err != nil {
			t.Fatalf("merge patch: %v", err)
		}
		var list corev1.ConfigMapList
		if err := cl.List(ctx, &list, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{"via": "crt"}); err != nil {
			t.Fatalf("list: %v", err)
		}
		if len(list.Items) != 1 {
			t.Fatalf("list = %d items, want 1", len(list.Items))
		}
		if diff := cmp.Diff(map[string]string{"a": "one", "b": "2"}, list.Items[0].Data); diff != "" {
			t.Errorf("data (-want +got):\n%s", diff)
		}
		if err := cl.Delete(ctx, &got); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if err := cl.Get(ctx, ctrlclient.ObjectKeyFromObject(&got), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after delete: %v, want NotFound", err)
		}
	})

	t.Run("server-side apply", func(t *testing.T) {
		dep := appsv1ac.Deployment("crt-web", ns).
			WithLabels(map[string]string{"app": "crt-web"}).
			WithSpec(appsv1ac.DeploymentSpec().
				WithReplicas(2).
				WithSelector(metaSelector("crt-web")).
				WithTemplate(corev1ac.PodTemplateSpec().
					WithLabels(map[string]string{"app": "crt-web"}).
					WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("web").WithImage("nginx:1.27")))))
		if err := cl.Apply(ctx, dep, ctrlclient.FieldOwner("operator-a")); err != nil {
			t.Fatalf("apply as operator-a: %v", err)
		}
		var got appsv1.Deployment
		if err := cl.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "crt-web"}, &got); err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.Spec.Replicas == nil || *got.Spec.Replicas != 2 {
			t.Errorf("replicas = %v, want 2", got.Spec.Replicas)
		}
		managers := map[string]metav1.ManagedFieldsOperationType{}
		for _, mf := range got.ManagedFields {
			managers[mf.Manager] = mf.Operation
		}
		if managers["operator-a"] != metav1.ManagedFieldsOperationApply {
			t.Errorf("managedFields managers = %v, want operator-a Apply", managers)
		}

		other := appsv1ac.Deployment("crt-web", ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(5))
		err := cl.Apply(ctx, other, ctrlclient.FieldOwner("operator-b"))
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "operator-a") || !strings.Contains(err.Error(), ".spec.replicas") {
			t.Errorf("conflicting apply by operator-b: %v, want 409 naming operator-a and .spec.replicas", err)
		}
		if err := cl.Apply(ctx, other, ctrlclient.FieldOwner("operator-b"), ctrlclient.ForceOwnership); err != nil {
			t.Fatalf("forced apply: %v", err)
		}
		if err := cl.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "crt-web"}, &got); err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.Spec.Replicas == nil || *got.Spec.Replicas != 5 || got.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
			t.Errorf("after forced apply: replicas %v image %s, want 5 and nginx:1.27 kept", got.Spec.Replicas, got.Spec.Template.Spec.Containers[0].Image)
		}
		if err := cl.DeleteAllOf(ctx, &appsv1.Deployment{}, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{"app": "crt-web"}); err != nil {
			t.Fatalf("delete all of: %v", err)
		}
		eventually(t, 10*time.Second, "deployment gone", func() (bool, error) {
			err := cl.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "crt-web"}, &appsv1.Deployment{})
			return apierrors.IsNotFound(err), err
		})
	})

	t.Run("unstructured and metadata-only", func(t *testing.T) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"})
		u.SetNamespace(ns)
		u.SetName("crt-lease")
		if err := unstructured.SetNestedField(u.Object, "holder", "spec", "holderIdentity"); err != nil {
			t.Fatal(err)
		}
		if err := cl.Create(ctx, u); err != nil {
			t.Fatalf("create unstructured lease: %v", err)
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "LeaseList"})
		if err := cl.List(ctx, list, ctrlclient.InNamespace(ns)); err != nil {
			t.Fatalf("list PartialObjectMetadata: %v", err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != "crt-lease" || list.Items[0].UID == "" {
			t.Errorf("metadata list = %+v, want crt-lease with a uid", list.Items)
		}
		if err := cl.Delete(ctx, u); err != nil {
			t.Fatalf("delete: %v", err)
		}
	})
}

func metaSelector(app string) *metav1ac.LabelSelectorApplyConfiguration {
	return metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": app})
}
