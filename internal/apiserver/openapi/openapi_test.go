package openapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientopenapi "k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	explainv2 "k8s.io/kubectl/pkg/explain/v2"
	kubectlopenapi "k8s.io/kubectl/pkg/util/openapi"
	"k8s.io/kubectl/pkg/validation"

	"github.com/skiff-sh/skiff/internal/apiserver/openapi"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// testResources mirrors the server's built-in resources without their
// strategies, which the documents do not read.
func testResources() []registry.Resource {
	r := func(gv schema.GroupVersion, plural, kind string, namespaced bool, newFn, newList func() runtime.Object, subs ...string) registry.Resource {
		res := registry.Resource{GroupVersion: gv, Resource: plural, Kind: kind, ListKind: kind + "List",
			Namespaced: namespaced, New: newFn, NewList: newList}
		if len(subs) > 0 {
			res.Subresources = map[string]registry.Subresource{}
			for _, s := range subs {
				res.Subresources[s] = map[string]registry.Subresource{
					"status": registry.StatusSubresource(), "scale": registry.ScaleSubresource(),
					"binding": registry.BindingSubresource(), "finalize": registry.FinalizeSubresource(),
					"proxy": registry.ProxySubresource(kind + "ProxyOptions"),
				}[s]
			}
		}
		return res
	}
	core := corev1.SchemeGroupVersion
	returnsObject := func(r registry.Resource, documented bool) registry.Resource {
		r.ReturnDeletedObject, r.DeleteDocumentedAsStatus = true, !documented
		return r
	}
	return []registry.Resource{
		returnsObject(r(core, "pods", "Pod", true, func() runtime.Object { return &corev1.Pod{} }, func() runtime.Object { return &corev1.PodList{} }, "status", "binding", "proxy"), true),
		r(core, "nodes", "Node", false, func() runtime.Object { return &corev1.Node{} }, func() runtime.Object { return &corev1.NodeList{} }, "status", "proxy"),
		returnsObject(r(core, "namespaces", "Namespace", false, func() runtime.Object { return &corev1.Namespace{} }, func() runtime.Object { return &corev1.NamespaceList{} }, "status", "finalize"), false),
		returnsObject(r(core, "services", "Service", true, func() runtime.Object { return &corev1.Service{} }, func() runtime.Object { return &corev1.ServiceList{} }, "status", "proxy"), true),
		r(core, "configmaps", "ConfigMap", true, func() runtime.Object { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} }),
		r(core, "secrets", "Secret", true, func() runtime.Object { return &corev1.Secret{} }, func() runtime.Object { return &corev1.SecretList{} }),
		r(core, "endpoints", "Endpoints", true, func() runtime.Object { return &corev1.Endpoints{} }, func() runtime.Object { return &corev1.EndpointsList{} }),
		r(core, "events", "Event", true, func() runtime.Object { return &corev1.Event{} }, func() runtime.Object { return &corev1.EventList{} }),
		r(core, "serviceaccounts", "ServiceAccount", true, func() runtime.Object { return &corev1.ServiceAccount{} }, func() runtime.Object { return &corev1.ServiceAccountList{} }),
		r(appsv1.SchemeGroupVersion, "deployments", "Deployment", true, func() runtime.Object { return &appsv1.Deployment{} }, func() runtime.Object { return &appsv1.DeploymentList{} }, "status", "scale"),
		r(appsv1.SchemeGroupVersion, "replicasets", "ReplicaSet", true, func() runtime.Object { return &appsv1.ReplicaSet{} }, func() runtime.Object { return &appsv1.ReplicaSetList{} }, "status", "scale"),
		r(coordinationv1.SchemeGroupVersion, "leases", "Lease", true, func() runtime.Object { return &coordinationv1.Lease{} }, func() runtime.Object { return &coordinationv1.LeaseList{} }),
		r(discoveryv1.SchemeGroupVersion, "endpointslices", "EndpointSlice", true, func() runtime.Object { return &discoveryv1.EndpointSlice{} }, func() runtime.Object { return &discoveryv1.EndpointSliceList{} }),
		r(eventsv1.SchemeGroupVersion, "events", "Event", true, func() runtime.Object { return &eventsv1.Event{} }, func() runtime.Object { return &eventsv1.EventList{} }),
	}
}

// serve starts a server answering the OpenAPI paths and 404 elsewhere, as
// the API server's chain does.
func serve(t *testing.T) (*openapi.OpenAPI, *rest.Config) {
	t.Helper()
	o := openapi.New(testResources(), "v1.37.2-skiff")
	if err := o.Err(); err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.Handles(r.URL.Path) {
			o.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return o, &rest.Config{Host: srv.URL}
}

func discoveryClient(t *testing.T, cfg *rest.Config) *discovery.DiscoveryClient {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

func TestOpenAPIV3Root(t *testing.T) {
	_, cfg := serve(t)
	root := openapi3.NewRoot(discoveryClient(t, cfg).OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, gv := range gvs {
		got = append(got, gv.String())
	}
	sort.Strings(got)
	want := []string{"apps/v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1", "events.k8s.io/v1", "v1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("group versions (-want +got):\n%s", diff)
	}

	tests := []struct {
		gv      schema.GroupVersion
		schemas []string // must be in components/schemas
		paths   []string // must be in paths
		absent  []string // must not be in components/schemas
	}{
		{
			gv: corev1.SchemeGroupVersion,
			schemas: []string{"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodList", "io.k8s.api.core.v1.Container",
				"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
				"io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
				"io.k8s.apimachinery.pkg.apis.meta.v1.Patch", "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
				"io.k8s.apimachinery.pkg.api.resource.Quantity", "io.k8s.api.core.v1.Binding"},
			paths: []string{"/api/v1/namespaces/{namespace}/pods", "/api/v1/namespaces/{namespace}/pods/{name}",
				"/api/v1/namespaces/{namespace}/pods/{name}/status", "/api/v1/namespaces/{namespace}/pods/{name}/binding",
				"/api/v1/pods", "/api/v1/nodes", "/api/v1/nodes/{name}", "/api/v1/nodes/{name}/status",
				"/api/v1/namespaces/{name}/finalize"},
			absent: []string{"io.k8s.api.apps.v1.Deployment", "io.k8s.api.autoscaling.v1.Scale"},
		},
		{
			gv:      appsv1.SchemeGroupVersion,
			schemas: []string{"io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.PodTemplateSpec", "io.k8s.api.autoscaling.v1.Scale"},
			paths: []string{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
				"/apis/apps/v1/deployments", "/apis/apps/v1/namespaces/{namespace}/replicasets/{name}/status"},
			absent: []string{"io.k8s.api.core.v1.Service"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.gv.String(), func(t *testing.T) {
			doc, err := root.GVSpec(tc.gv)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range tc.schemas {
				if doc.Components.Schemas[name] == nil {
					t.Errorf("schema %s missing", name)
				}
			}
			for _, name := range tc.absent {
				if doc.Components.Schemas[name] != nil {
					t.Errorf("schema %s should not be in %s", name, tc.gv)
				}
			}
			for _, p := range tc.paths {
				if doc.Paths.Paths[p] == nil {
					t.Errorf("path %s missing", p)
				}
			}
			// Every reference resolves inside the document.
			raw, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, ref := range refs(raw, "#/components/schemas/") {
				if doc.Components.Schemas[ref] == nil {
					t.Errorf("dangling reference %s", ref)
				}
			}
		})
	}
}

// refs lists the definition names a JSON document refers to.
func refs(raw []byte, prefix string) []string {
	var out []string
	s := string(raw)
	for {
		i := strings.Index(s, `"$ref":"`+prefix)
		if i < 0 {
			return out
		}
		s = s[i+len(`"$ref":"`+prefix):]
		out = append(out, s[:strings.IndexByte(s, '"')])
	}
}

func TestOperations(t *testing.T) {
	_, cfg := serve(t)
	root := openapi3.NewRoot(discoveryClient(t, cfg).OpenAPIV3())
	tests := []struct {
		path, method, wantID, wantAction string
		wantGVK                          map[string]string
		wantParams                       []string
	}{
		{"/api/v1/namespaces/{namespace}/pods/{name}", "get", "readCoreV1NamespacedPod", "get",
			map[string]string{"group": "", "version": "v1", "kind": "Pod"}, nil},
		{"/api/v1/namespaces/{namespace}/configmaps/{name}", "patch", "patchCoreV1NamespacedConfigMap", "patch",
			map[string]string{"group": "", "version": "v1", "kind": "ConfigMap"}, []string{"dryRun", "fieldManager", "fieldValidation", "force"}},
		{"/api/v1/namespaces/{namespace}/configmaps", "get", "listCoreV1NamespacedConfigMap", "list",
			map[string]string{"group": "", "version": "v1", "kind": "ConfigMap"},
			[]string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"}},
		{"/api/v1/namespaces/{namespace}/configmaps", "delete", "deleteCoreV1CollectionNamespacedConfigMap", "deletecollection",
			map[string]string{"group": "", "version": "v1", "kind": "ConfigMap"},
			[]string{"continue", "dryRun", "fieldSelector", "gracePeriodSeconds", "labelSelector", "limit", "orphanDependents", "propagationPolicy", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds"}},
		{"/api/v1/configmaps", "get", "listCoreV1ConfigMapForAllNamespaces", "list",
			map[string]string{"group": "", "version": "v1", "kind": "ConfigMap"},
			[]string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"}},
		{"/api/v1/nodes/{name}", "put", "replaceCoreV1Node", "put",
			map[string]string{"group": "", "version": "v1", "kind": "Node"}, []string{"dryRun", "fieldManager", "fieldValidation"}},
		{"/api/v1/namespaces/{namespace}/pods/{name}/binding", "post", "createCoreV1NamespacedPodBinding", "post",
			map[string]string{"group": "", "version": "v1", "kind": "Binding"}, []string{"dryRun", "fieldManager", "fieldValidation"}},
		{"/api/v1/namespaces/{name}/finalize", "put", "replaceCoreV1NamespaceFinalize", "put",
			map[string]string{"group": "", "version": "v1", "kind": "Namespace"}, []string{"dryRun", "fieldManager", "fieldValidation"}},
		{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", "patch", "patchAppsV1NamespacedDeployment", "patch",
			map[string]string{"group": "apps", "version": "v1", "kind": "Deployment"}, []string{"dryRun", "fieldManager", "fieldValidation", "force"}},
		{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "put", "replaceAppsV1NamespacedDeploymentScale", "put",
			map[string]string{"group": "autoscaling", "version": "v1", "kind": "Scale"}, []string{"dryRun", "fieldManager", "fieldValidation"}},
		{"/apis/apps/v1/namespaces/{namespace}/replicasets/{name}/status", "get", "readAppsV1NamespacedReplicaSetStatus", "get",
			map[string]string{"group": "apps", "version": "v1", "kind": "ReplicaSet"}, nil},
		{"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", "post", "createCoordinationV1NamespacedLease", "post",
			map[string]string{"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"}, []string{"dryRun", "fieldManager", "fieldValidation"}},
	}
	for _, tc := range tests {
		t.Run(tc.wantID, func(t *testing.T) {
			gv, err := gvOfPath(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := root.GVSpec(gv)
			if err != nil {
				t.Fatal(err)
			}
			item := doc.Paths.Paths[tc.path]
			if item == nil {
				t.Fatalf("path %s missing", tc.path)
			}
			op := map[string]*spec3.Operation{"get": item.Get, "put": item.Put, "post": item.Post, "patch": item.Patch, "delete": item.Delete}[tc.method]
			if op == nil {
				t.Fatalf("%s %s missing", tc.method, tc.path)
			}
			var gvk map[string]string
			if err := op.Extensions.GetObject("x-kubernetes-group-version-kind", &gvk); err != nil {
				t.Fatal(err)
			}
			action, _ := op.Extensions.GetString("x-kubernetes-action")
			var params []string
			for _, p := range op.Parameters {
				if p.In != "query" {
					t.Errorf("parameter %s is in %s", p.Name, p.In)
				}
				params = append(params, p.Name)
			}
			got := []any{op.OperationId, action, gvk, params}
			want := []any{tc.wantID, tc.wantAction, tc.wantGVK, tc.wantParams}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("operation (-want +got):\n%s", diff)
			}
			if tc.method == "patch" {
				var types []string
				for ct := range op.RequestBody.Content {
					types = append(types, ct)
				}
				sort.Strings(types)
				want := []string{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}
				if diff := cmp.Diff(want, types); diff != "" {
					t.Errorf("patch content types (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// The proxy subresources are documented as upstream's: a path without
// and one with {path}, a connect operation for each method it relays,
// named connectCoreV1<Method><scope><Kind>Proxy[WithPath], of the options
// kind, answering a string of any type.
func TestProxyOperations(t *testing.T) {
	_, cfg := serve(t)
	doc, err := openapi3.NewRoot(discoveryClient(t, cfg).OpenAPIV3()).GVSpec(schema.GroupVersion{Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, idPart, kind string
		wantParams         []string
	}{
		{"/api/v1/namespaces/{namespace}/pods/{name}/proxy", "NamespacedPodProxy", "PodProxyOptions", []string{"path name", "path namespace", "query path"}},
		{"/api/v1/namespaces/{namespace}/pods/{name}/proxy/{path}", "NamespacedPodProxyWithPath", "PodProxyOptions", []string{"path name", "path namespace", "path path", "query path"}},
		{"/api/v1/namespaces/{namespace}/services/{name}/proxy/{path}", "NamespacedServiceProxyWithPath", "ServiceProxyOptions", []string{"path name", "path namespace", "path path", "query path"}},
		{"/api/v1/nodes/{name}/proxy", "NodeProxy", "NodeProxyOptions", []string{"path name", "query path"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			item := doc.Paths.Paths[tc.path]
			if item == nil {
				t.Fatalf("path %s missing", tc.path)
			}
			var params []string
			for _, p := range item.Parameters {
				params = append(params, p.In+" "+p.Name)
			}
			sort.Strings(params)
			if diff := cmp.Diff(tc.wantParams, params); diff != "" {
				t.Errorf("parameters (-want +got):\n%s", diff)
			}
			ops := map[string]*spec3.Operation{"Delete": item.Delete, "Get": item.Get, "Head": item.Head, "Options": item.Options,
				"Patch": item.Patch, "Post": item.Post, "Put": item.Put}
			for method, op := range ops {
				if op == nil {
					t.Errorf("%s missing", method)
					continue
				}
				var gvk map[string]string
				if err := op.Extensions.GetObject("x-kubernetes-group-version-kind", &gvk); err != nil {
					t.Fatal(err)
				}
				action, _ := op.Extensions.GetString("x-kubernetes-action")
				resp := op.Responses.StatusCodeResponses[200]
				var types []string
				if resp != nil {
					for ct, media := range resp.Content {
						types = append(types, ct+" "+strings.Join(media.Schema.Type, ","))
					}
				}
				got := []any{op.OperationId, action, gvk, types}
				want := []any{"connectCoreV1" + method + tc.idPart, "connect", map[string]string{"group": "", "version": "v1", "kind": tc.kind}, []string{"*/* string"}}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", method, diff)
				}
			}
		})
	}
}

func gvOfPath(p string) (schema.GroupVersion, error) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if parts[0] == "api" {
		return schema.GroupVersion{Version: parts[1]}, nil
	}
	return schema.GroupVersion{Group: parts[1], Version: parts[2]}, nil
}

// kubectl asks whether the server validates fields itself through the
// PATCH operations of each kind.
func TestFieldValidationSupport(t *testing.T) {
	_, cfg := serve(t)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	verifier := resource.NewQueryParamVerifierV3(dyn, discoveryClient(t, cfg).OpenAPIV3(), resource.QueryParamFieldValidation)
	tests := []struct {
		gvk  schema.GroupVersionKind
		want bool
	}{
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), true},
		{corev1.SchemeGroupVersion.WithKind("Pod"), true},
		{corev1.SchemeGroupVersion.WithKind("Node"), true},
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), true},
		{eventsv1.SchemeGroupVersion.WithKind("Event"), true},
		{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.gvk.String(), func(t *testing.T) {
			err := verifier.HasSupport(tc.gvk)
			if got := err == nil; got != tc.want {
				t.Errorf("HasSupport(%s) = %v, want support %v", tc.gvk, err, tc.want)
			}
		})
	}
}

// The strategic merge patch that kubectl apply computes merges containers by
// name, from either document version.
func TestStrategicMergePatchMetadata(t *testing.T) {
	_, cfg := serve(t)
	dc := discoveryClient(t, cfg)

	// OpenAPI v2, fetched as protobuf like kubectl does.
	v2doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	resources, err := kubectlopenapi.NewOpenAPIData(v2doc)
	if err != nil {
		t.Fatal(err)
	}
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	podSchema := resources.LookupResource(podGVK)
	if podSchema == nil {
		t.Fatal("v2: no schema for v1 Pod")
	}
	consumes := resources.GetConsumes(appsv1.SchemeGroupVersion.WithKind("Deployment"), "PATCH")
	if !contains(consumes, "application/strategic-merge-patch+json") {
		t.Errorf("v2: Deployment PATCH consumes %v, want strategic merge patches", consumes)
	}

	// OpenAPI v3, as kubectl apply's patcher reads it.
	v3doc, err := openapi3.NewRoot(dc.OpenAPIV3()).GVSpec(corev1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	v3meta := strategicpatch.PatchMetaFromOpenAPIV3{
		Schema: v3doc.Components.Schemas["io.k8s.api.core.v1.Pod"], SchemaList: v3doc.Components.Schemas,
	}

	for name, meta := range map[string]strategicpatch.LookupPatchMeta{
		"v2": strategicpatch.NewPatchMetaFromOpenAPI(podSchema),
		"v3": v3meta,
	} {
		t.Run(name, func(t *testing.T) {
			spec, _, err := meta.LookupPatchMetadataForStruct("spec")
			if err != nil {
				t.Fatal(err)
			}
			_, pm, err := spec.LookupPatchMetadataForSlice("containers")
			if err != nil {
				t.Fatal(err)
			}
			got := []any{pm.GetPatchStrategies(), pm.GetPatchMergeKey()}
			if diff := cmp.Diff([]any{[]string{"merge"}, "name"}, got); diff != "" {
				t.Errorf("containers patch meta (-want +got):\n%s", diff)
			}

			original := `{"spec":{"containers":[{"name":"a","image":"a:1"},{"name":"b","image":"b:1"}]}}`
			modified := `{"spec":{"containers":[{"name":"a","image":"a:2"},{"name":"b","image":"b:1"}]}}`
			current := `{"spec":{"containers":[{"name":"a","image":"a:1","imagePullPolicy":"IfNotPresent"},{"name":"b","image":"b:1"}]}}`
			patch, err := strategicpatch.CreateThreeWayMergePatch([]byte(original), []byte(modified), []byte(current), meta, false)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"spec":{"$setElementOrder/containers":[{"name":"a"},{"name":"b"}],"containers":[{"image":"a:2","name":"a"}]}}`
			if diff := cmp.Diff(want, string(patch)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// kubectl explain renders from the OpenAPI v3 documents.
func TestExplain(t *testing.T) {
	_, cfg := serve(t)
	client := discoveryClient(t, cfg).OpenAPIV3()
	tests := []struct {
		name   string
		gvr    schema.GroupVersionResource
		path   []string
		want   []string
		reject []string
	}{
		{
			name: "pod containers",
			gvr:  corev1.SchemeGroupVersion.WithResource("pods"),
			path: []string{"spec", "containers"},
			want: []string{"KIND:       Pod", "VERSION:    v1", "FIELD: containers <[]Container>",
				"List of containers belonging to the pod.",
				"image\t<string>", "name\t<string> -required-", "ports\t<[]ContainerPort>",
				"resources\t<ResourceRequirements>"},
		},
		{
			name: "deployment",
			gvr:  appsv1.SchemeGroupVersion.WithResource("deployments"),
			want: []string{"GROUP:      apps", "KIND:       Deployment",
				"Deployment enables declarative updates for Pods and ReplicaSets.",
				"metadata\t<ObjectMeta>", "spec\t<DeploymentSpec>", "status\t<DeploymentStatus>"},
		},
		{
			name: "int or string",
			gvr:  appsv1.SchemeGroupVersion.WithResource("deployments"),
			path: []string{"spec", "strategy", "rollingUpdate", "maxSurge"},
			want: []string{"FIELD: maxSurge <IntOrString>", "IntOrString"},
		},
		{
			name: "metadata timestamps",
			gvr:  corev1.SchemeGroupVersion.WithResource("configmaps"),
			path: []string{"metadata"},
			want: []string{"creationTimestamp\t<string>", "labels\t<map[string]string>", "ownerReferences\t<[]OwnerReference>"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := explainv2.PrintModelDescription(tc.path, &buf, client, tc.gvr, false, 0, "plaintext"); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestSchemas(t *testing.T) {
	_, cfg := serve(t)
	root := openapi3.NewRoot(discoveryClient(t, cfg).OpenAPIV3())
	schemas := map[string]any{}
	for _, gv := range []schema.GroupVersion{corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion} {
		doc, err := root.GVSpecAsMap(gv)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
			schemas[k] = v
		}
	}
	get := func(path ...string) any {
		var v any = schemas
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[p]
		}
		return v
	}
	tests := []struct {
		name string
		path []string
		want any
	}{
		{"container required", []string{"io.k8s.api.core.v1.Container", "required"}, []any{"name"}},
		{"podspec required", []string{"io.k8s.api.core.v1.PodSpec", "required"}, []any{"containers"}},
		{"objectmeta has no required", []string{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "required"}, nil},
		{"optional marker beats json tag", []string{"io.k8s.api.core.v1.TypedLocalObjectReference", "required"}, []any{"kind", "name"}},
		{"required marker on a pointer", []string{"io.k8s.api.apps.v1.DeploymentSpec", "required"}, []any{"selector", "template"}},
		{"optional marker on conditions", []string{"io.k8s.api.apps.v1.DeploymentCondition", "required"}, nil},
		{"required marker beats omitempty", []string{"io.k8s.api.apps.v1.Deployment", "required"}, []any{"spec"}},
		{"core event", []string{"io.k8s.api.core.v1.Event", "required"}, []any{"involvedObject", "metadata"}},
		{"int32", []string{"io.k8s.api.core.v1.ContainerPort", "properties", "containerPort"},
			map[string]any{"type": "integer", "format": "int32", "description": corev1.ContainerPort{}.SwaggerDoc()["containerPort"]}},
		{"int64", []string{"io.k8s.api.core.v1.PodSpec", "properties", "activeDeadlineSeconds"},
			map[string]any{"type": "integer", "format": "int64", "description": corev1.PodSpec{}.SwaggerDoc()["activeDeadlineSeconds"]}},
		{"bytes map", []string{"io.k8s.api.core.v1.Secret", "properties", "data", "additionalProperties"},
			map[string]any{"type": "string", "format": "byte"}},
		{"string map", []string{"io.k8s.api.core.v1.ConfigMap", "properties", "data", "additionalProperties"},
			map[string]any{"type": "string"}},
		{"time", []string{"io.k8s.apimachinery.pkg.apis.meta.v1.Time", "format"}, "date-time"},
		{"int or string", []string{"io.k8s.apimachinery.pkg.util.intstr.IntOrString", "x-kubernetes-int-or-string"}, true},
		{"quantity map", []string{"io.k8s.api.core.v1.ResourceRequirements", "properties", "limits", "additionalProperties"},
			map[string]any{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
		{"ref in allOf", []string{"io.k8s.api.core.v1.Pod", "properties", "spec", "allOf"},
			[]any{map[string]any{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}}},
		{"kind gvk", []string{"io.k8s.api.core.v1.Pod", "x-kubernetes-group-version-kind"},
			[]any{map[string]any{"group": "", "version": "v1", "kind": "Pod"}}},
		{"list gvk", []string{"io.k8s.api.core.v1.PodList", "x-kubernetes-group-version-kind"},
			[]any{map[string]any{"group": "", "version": "v1", "kind": "PodList"}}},
		{"patch merge key", []string{"io.k8s.api.core.v1.PodSpec", "properties", "volumes", "x-kubernetes-patch-merge-key"}, "name"},
		{"patch strategy", []string{"io.k8s.api.core.v1.PodSpec", "properties", "volumes", "x-kubernetes-patch-strategy"}, "merge,retainKeys"},
		{"list map keys", []string{"io.k8s.api.core.v1.Container", "properties", "ports", "x-kubernetes-list-map-keys"}, []any{"containerPort", "protocol"}},
		{"list type", []string{"io.k8s.api.core.v1.Container", "properties", "ports", "x-kubernetes-list-type"}, "map"},
		{"atomic list", []string{"io.k8s.api.core.v1.Container", "properties", "command", "x-kubernetes-list-type"}, "atomic"},
		{"atomic struct", []string{"io.k8s.api.core.v1.LocalObjectReference", "x-kubernetes-map-type"}, "atomic"},
		{"inlined type meta", []string{"io.k8s.api.core.v1.Pod", "properties", "apiVersion", "type"}, "string"},
		{"type description", []string{"io.k8s.api.core.v1.Pod", "description"}, corev1.Pod{}.SwaggerDoc()[""]},
		{"delete options gvks cover every group", []string{"io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", "x-kubernetes-group-version-kind"},
			[]any{
				map[string]any{"group": "", "version": "v1", "kind": "DeleteOptions"},
				map[string]any{"group": "apps", "version": "v1", "kind": "DeleteOptions"},
				map[string]any{"group": "coordination.k8s.io", "version": "v1", "kind": "DeleteOptions"},
				map[string]any{"group": "discovery.k8s.io", "version": "v1", "kind": "DeleteOptions"},
				map[string]any{"group": "events.k8s.io", "version": "v1", "kind": "DeleteOptions"},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, get(tc.path...)); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

func TestHTTP(t *testing.T) {
	o, cfg := serve(t)
	rootResp := get(t, cfg.Host+"/openapi/v3", nil)
	var disco handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(rootResp.body, &disco); err != nil {
		t.Fatal(err)
	}
	coreURL := disco.Paths["api/v1"].ServerRelativeURL
	if !strings.HasPrefix(coreURL, "/openapi/v3/api/v1?hash=") {
		t.Fatalf("api/v1 URL = %q", coreURL)
	}
	hash := strings.TrimPrefix(coreURL, "/openapi/v3/api/v1?hash=")

	tests := []struct {
		name        string
		path        string
		header      map[string]string
		wantCode    int
		wantType    string
		wantCache   string
		wantETag    string
		wantLocated string
	}{
		{name: "root", path: "/openapi/v3", wantCode: 200, wantType: "application/json"},
		{name: "group by hash", path: coreURL, wantCode: 200, wantType: "application/json", wantCache: "public, immutable", wantETag: `"` + hash + `"`},
		{name: "group without hash", path: "/openapi/v3/api/v1", wantCode: 200, wantType: "application/json", wantETag: `"` + hash + `"`},
		{name: "stale hash redirects", path: "/openapi/v3/api/v1?hash=ABC", wantCode: 301, wantLocated: coreURL},
		{name: "not modified", path: coreURL, header: map[string]string{"If-None-Match": `"` + hash + `"`}, wantCode: 304, wantCache: "public, immutable"},
		{name: "v3 protobuf", path: coreURL, header: map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"},
			wantCode: 200, wantType: "application/com.github.proto-openapi.spec.v3.v1.0+protobuf", wantCache: "public, immutable"},
		{name: "unknown group", path: "/openapi/v3/apis/batch/v1", wantCode: 404},
		{name: "unacceptable", path: "/openapi/v3/api/v1", header: map[string]string{"Accept": "text/html"}, wantCode: 406},
		{name: "v2 json", path: "/openapi/v2", wantCode: 200, wantType: "application/json"},
		{name: "v2 protobuf", path: "/openapi/v2", header: map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
			wantCode: 200, wantType: "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
		{name: "v2 prefers first acceptable", path: "/openapi/v2",
			header:   map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json;q=0.5"},
			wantCode: 200, wantType: "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := get(t, cfg.Host+tc.path, tc.header)
			got := []any{r.code, r.header.Get("Content-Type"), r.header.Get("Cache-Control"), r.header.Get("Location")}
			want := []any{tc.wantCode, tc.wantType, tc.wantCache, tc.wantLocated}
			if tc.wantCode != 200 {
				got[1], want[1] = "", ""
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("code, type, cache, location (-want +got):\n%s", diff)
			}
			if tc.wantETag != "" && r.header.Get("Etag") != tc.wantETag {
				t.Errorf("Etag = %q, want %q", r.header.Get("Etag"), tc.wantETag)
			}
		})
	}

	for _, p := range []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/apis/apps/v1"} {
		if !o.Handles(p) {
			t.Errorf("Handles(%q) = false", p)
		}
	}
	for _, p := range []string{"/openapi", "/openapi/v1", "/api/v1"} {
		if o.Handles(p) {
			t.Errorf("Handles(%q) = true", p)
		}
	}
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

func get(t *testing.T, u string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: body}
}

// Two builds of the same resources give byte-identical documents, so their
// hashes (and clients' caches) stay valid across restarts.
func TestDeterministic(t *testing.T) {
	_, a := serve(t)
	_, b := serve(t)
	for _, p := range []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/apps/v1"} {
		ra, rb := get(t, a.Host+p, nil), get(t, b.Host+p, nil)
		if ra.code != 200 || !bytes.Equal(ra.body, rb.body) || ra.header.Get("Etag") != rb.header.Get("Etag") {
			t.Errorf("%s: builds differ (codes %d/%d, etags %s/%s)", p, ra.code, rb.code, ra.header.Get("Etag"), rb.header.Get("Etag"))
		}
	}
}

// resourcesGetter hands kubectl's validator the parsed v2 document.
type resourcesGetter struct{ r kubectlopenapi.Resources }

func (g resourcesGetter) OpenAPISchema() (kubectlopenapi.Resources, error) { return g.r, nil }

// kubectl validates on the client, against /openapi/v2, what the server
// cannot validate itself (such as the items of a v1 List).
func TestClientSideValidation(t *testing.T) {
	_, cfg := serve(t)
	doc, err := discoveryClient(t, cfg).OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	resources, err := kubectlopenapi.NewOpenAPIData(doc)
	if err != nil {
		t.Fatal(err)
	}
	validator := validation.NewSchemaValidation(resourcesGetter{resources})
	deployment := func(extra string) string {
		return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},
"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
"strategy":{"rollingUpdate":{"maxSurge":"25%","maxUnavailable":1}},
"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx",
"ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"500m","memory":"128Mi"}},
"readinessProbe":{"httpGet":{"port":"http","path":"/"}}` + extra + `}]}}}}`
	}
	tests := []struct {
		name    string
		doc     string
		wantErr string
	}{
		{name: "valid deployment", doc: deployment("")},
		{name: "unknown field", doc: deployment(`,"imagePolicy":"x"`), wantErr: `unknown field "imagePolicy"`},
		{name: "wrong type", doc: deployment(`,"stdin":"yes"`), wantErr: "stdin"},
		{name: "missing required", doc: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"image":"nginx"}]}}`,
			wantErr: `missing required field "name"`},
		{name: "list of items", doc: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := validator.ValidateBytes([]byte(tc.doc))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// Server-side apply's structured merge reads the same schemas: lists merge
// by their x-kubernetes-list-map-keys.
func TestTypeConverter(t *testing.T) {
	_, cfg := serve(t)
	tc, err := clientopenapi.NewTypeConverter(discoveryClient(t, cfg).OpenAPIV3(), false)
	if err != nil {
		t.Fatal(err)
	}
	pod := func(containers ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
			Spec:       corev1.PodSpec{Containers: containers},
		}
	}
	live, err := tc.ObjectToTyped(pod(corev1.Container{Name: "a", Image: "a:1"}, corev1.Container{Name: "b", Image: "b:1"}))
	if err != nil {
		t.Fatal(err)
	}
	applied, err := tc.ObjectToTyped(pod(corev1.Container{Name: "b", Image: "b:2"}))
	if err != nil {
		t.Fatal(err)
	}
	merged, err := live.Merge(applied)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := tc.TypedToObject(merged)
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &got); err != nil {
		t.Fatal(err)
	}
	want := []corev1.Container{{Name: "a", Image: "a:1"}, {Name: "b", Image: "b:2"}}
	if diff := cmp.Diff(want, got.Spec.Containers); diff != "" {
		t.Errorf("merged containers (-want +got):\n%s", diff)
	}
}

// TestDeleteResponses checks what DELETE is documented to answer: the
// object for the resources whose upstream store returns it (pods,
// services), a Status for the rest, and a Status for namespaces, which
// upstream documents so although it returns the namespace.
func TestDeleteResponses(t *testing.T) {
	_, cfg := serve(t)
	root := openapi3.NewRoot(discoveryClient(t, cfg).OpenAPIV3())
	tests := []struct{ path, want string }{
		{"/api/v1/namespaces/{namespace}/pods/{name}", "io.k8s.api.core.v1.Pod"},
		{"/api/v1/namespaces/{namespace}/services/{name}", "io.k8s.api.core.v1.Service"},
		{"/api/v1/namespaces/{name}", "io.k8s.apimachinery.pkg.apis.meta.v1.Status"},
		{"/api/v1/namespaces/{namespace}/configmaps/{name}", "io.k8s.apimachinery.pkg.apis.meta.v1.Status"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			gv, err := gvOfPath(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := root.GVSpec(gv)
			if err != nil {
				t.Fatal(err)
			}
			item := doc.Paths.Paths[tc.path]
			if item == nil || item.Delete == nil {
				t.Fatalf("DELETE %s missing", tc.path)
			}
			resp := item.Delete.Responses.StatusCodeResponses[200]
			if resp == nil {
				t.Fatalf("DELETE %s: no 200 response", tc.path)
			}
			ref := resp.Content["application/json"].Schema.Ref.String()
			if got := strings.TrimPrefix(ref, "#/components/schemas/"); got != tc.want {
				t.Errorf("DELETE %s answers %s, want %s", tc.path, got, tc.want)
			}
		})
	}
}
