// Package customresources tests CustomResourceDefinitions and the custom
// resources they declare against an in-process API server on a real etcd,
// driven by client-go's apiextensions clientset and dynamic client, and by
// the embedded kubectl.
package customresources

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"io"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// cronTabCRD is the seed's CronTab CRD (stable.example.com/v1, short name
// ct) with a status and a scale subresource, printer columns, defaults, a
// CEL rule and a second served version.
const cronTabCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.labelSelector
    additionalPrinterColumns:
    - name: Spec
      type: string
      jsonPath: .spec.cronSpec
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.minReplicas <= self.replicas"
              message: "replicas should be greater than or equal to minReplicas"
            - rule: "!has(oldSelf.image) || self.image == oldSelf.image"
              messageExpression: "'image is immutable, was ' + oldSelf.image"
            properties:
              cronSpec:
                type: string
                pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'
              image:
                type: string
                maxLength: 64
              replicas:
                type: integer
                minimum: 0
                maximum: 10
                default: 1
              minReplicas:
                type: integer
                default: 0
              mode:
                type: string
                enum: [Fast, Slow]
              port:
                x-kubernetes-int-or-string: true
              tags:
                type: array
                x-kubernetes-list-type: set
                items:
                  type: string
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
            required: [cronSpec]
          status:
            type: object
            properties:
              replicas:
                type: integer
              labelSelector:
                type: string
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

var cronTabs = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}

func decodeCRD(t testing.TB, y string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(y), crd); err != nil {
		t.Fatalf("decode CRD: %v", err)
	}
	return crd
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
}

// createCRD creates a CRD and waits until it is Established and its
// resource is in discovery; it returns how long that took.
func createCRD(t testing.TB, ctx context.Context, c *testapiserver.Cluster, crd *apiextensionsv1.CustomResourceDefinition) time.Duration {
	t.Helper()
	ax := apiextensionsclient.NewForConfigOrDie(c.Config)
	start := time.Now()
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	eventually(t, 10*time.Second, crd.Name+" Established", func() (bool, error) {
		got, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	return time.Since(start)
}

func TestCustomResourceDefinitionLifecycle(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	ax := apiextensionsclient.NewForConfigOrDie(c.Config)
	dyn := dynamic.NewForConfigOrDie(c.Config)

	took := createCRD(t, ctx, c, decodeCRD(t, cronTabCRD))
	t.Logf("created to Established (and served): %v", took)
	if took > time.Second {
		t.Errorf("CRD took %v to be Established, want under a second", took)
	}
	got, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "crontabs.stable.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds := map[apiextensionsv1.CustomResourceDefinitionConditionType]string{}
	for _, cond := range got.Status.Conditions {
		conds[cond.Type] = string(cond.Status) + "/" + cond.Reason
	}
	wantConds := map[apiextensionsv1.CustomResourceDefinitionConditionType]string{
		apiextensionsv1.NamesAccepted: "True/NoConflicts", apiextensionsv1.Established: "True/InitialNamesAccepted"}
	if diff := cmp.Diff(wantConds, conds); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"v1"}, got.Status.StoredVersions); diff != "" {
		t.Errorf("storedVersions (-want +got):\n%s", diff)
	}
	if got.Status.AcceptedNames.Plural != "crontabs" || got.Status.AcceptedNames.ShortNames[0] != "ct" {
		t.Errorf("acceptedNames = %+v", got.Status.AcceptedNames)
	}

	// Discovery: both versions, short name, categories, subresources.
	dc := discovery.NewDiscoveryClientForConfigOrDie(c.Config)
	rl, err := dc.ServerResourcesForGroupVersion("stable.example.com/v1")
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	names := map[string]metav1.APIResource{}
	for _, r := range rl.APIResources {
		names[r.Name] = r
	}
	if ct := names["crontabs"]; ct.Kind != "CronTab" || !ct.Namespaced || !cmp.Equal(ct.ShortNames, []string{"ct"}) || !cmp.Equal(ct.Categories, []string{"all"}) {
		t.Errorf("crontabs in discovery = %+v", ct)
	}
	for _, sub := range []string{"crontabs/status", "crontabs/scale"} {
		if _, ok := names[sub]; !ok {
			t.Errorf("%s missing from discovery", sub)
		}
	}
	groups, _, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("aggregated discovery: %v", err)
	}
	var versions []string
	for _, g := range groups {
		if g.Name == "stable.example.com" {
			for _, v := range g.Versions {
				versions = append(versions, v.Version)
			}
		}
	}
	if diff := cmp.Diff([]string{"v1", "v1beta1"}, versions); diff != "" {
		t.Errorf("stable.example.com versions (-want +got):\n%s", diff)
	}

	ns := "default"
	ct := dyn.Resource(cronTabs).Namespace(ns)
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]interface{}{"name": "my-new-cron-object"},
		"spec": map[string]interface{}{
			"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "unknown": "dropped",
			"extra":    map[string]interface{}{"anything": "kept"},
			"port":     "http",
			"template": map[string]interface{}{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]interface{}{"name": "p"}},
		},
		"status": map[string]interface{}{"replicas": int64(7)},
	}}
	created, err := ct.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create CronTab: %v", err)
	}
	spec := created.Object["spec"].(map[string]interface{})
	wantSpec := map[string]interface{}{
		"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": int64(1), "minReplicas": int64(0),
		"extra": map[string]interface{}{"anything": "kept"}, "port": "http",
		"template": map[string]interface{}{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]interface{}{"name": "p"}},
	}
	if diff := cmp.Diff(wantSpec, spec); diff != "" {
		t.Errorf("spec after create: defaults applied, unknown field pruned (-want +got):\n%s", diff)
	}
	if _, ok := created.Object["status"]; ok {
		t.Errorf("create set status through the main resource: %v", created.Object["status"])
	}
	if created.GetGeneration() != 1 || created.GetUID() == "" {
		t.Errorf("generation %d uid %q", created.GetGeneration(), created.GetUID())
	}

	// The same object through v1beta1 (conversion None: only apiVersion
	// differs).
	beta, err := dyn.Resource(crdGVR("stable.example.com", "v1beta1", "crontabs")).Namespace(ns).Get(ctx, "my-new-cron-object", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get through v1beta1: %v", err)
	}
	if beta.GetAPIVersion() != "stable.example.com/v1beta1" || beta.GetUID() != created.GetUID() {
		t.Errorf("v1beta1 object: apiVersion %s uid %s", beta.GetAPIVersion(), beta.GetUID())
	}

	// Status only through /status.
	st := created.DeepCopy()
	st.Object["status"] = map[string]interface{}{"replicas": int64(3), "labelSelector": "app=cron"}
	st.Object["spec"].(map[string]interface{})["image"] = "ignored-on-status"
	updated, err := ct.UpdateStatus(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if r, _, _ := unstructured.NestedInt64(updated.Object, "status", "replicas"); r != 3 {
		t.Errorf("status.replicas = %d, want 3", r)
	}
	if img, _, _ := unstructured.NestedString(updated.Object, "spec", "image"); img != "my-awesome-cron-image" {
		t.Errorf("a status update changed spec.image to %q", img)
	}
	if updated.GetGeneration() != 1 {
		t.Errorf("a status update bumped generation to %d", updated.GetGeneration())
	}

	// Scale subresource.
	scale, err := ct.Get(ctx, "my-new-cron-object", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if diff := cmp.Diff(map[string]interface{}{"replicas": int64(3), "selector": "app=cron"}, scale.Object["status"]); diff != "" {
		t.Errorf("scale status (-want +got):\n%s", diff)
	}
	patch := []byte(`{"spec":{"replicas":5}}`)
	if _, err := ct.Patch(ctx, "my-new-cron-object", types.MergePatchType, patch, metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("patch scale: %v", err)
	}
	after, err := ct.Get(ctx, "my-new-cron-object", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(after.Object, "spec", "replicas"); r != 5 || after.GetGeneration() != 2 {
		t.Errorf("after scale: spec.replicas %d generation %d, want 5 and 2", r, after.GetGeneration())
	}

	// Bad input: each failure names its field. As upstream, an error that
	// makes the object unfit for CEL (enum, type, length, required) adds
	// one without a field: "some validation rules were not checked".
	bad := func(mutate func(spec map[string]interface{})) error {
		o := obj.DeepCopy()
		o.SetName("bad")
		delete(o.Object, "status")
		mutate(o.Object["spec"].(map[string]interface{}))
		_, err := ct.Create(ctx, o, metav1.CreateOptions{})
		return err
	}
	for _, tc := range []struct {
		name   string
		mutate func(map[string]interface{})
		want   []string
	}{
		{"pattern", func(s map[string]interface{}) { s["cronSpec"] = "nope" }, []string{"spec.cronSpec"}},
		{"maximum", func(s map[string]interface{}) { s["replicas"] = int64(11) }, []string{"spec.replicas"}},
		{"enum", func(s map[string]interface{}) { s["mode"] = "Medium" }, []string{"spec.mode", "<nil>"}},
		{"type", func(s map[string]interface{}) { s["image"] = int64(3) }, []string{"spec.image", "<nil>"}},
		{"maxLength", func(s map[string]interface{}) { s["image"] = strings.Repeat("x", 65) }, []string{"spec.image", "<nil>"}},
		{"required", func(s map[string]interface{}) { delete(s, "cronSpec") }, []string{"spec.cronSpec", "<nil>"}},
		{"set", func(s map[string]interface{}) { s["tags"] = []interface{}{"a", "a"} }, []string{"spec.tags[1]"}},
		{"cel", func(s map[string]interface{}) { s["replicas"] = int64(1); s["minReplicas"] = int64(2) }, []string{"spec"}},
		{"embedded", func(s map[string]interface{}) {
			s["template"] = map[string]interface{}{"metadata": map[string]interface{}{"name": "x"}}
		}, []string{"spec.template.apiVersion", "spec.template.kind", "<nil>"}},
	} {
		t.Run("invalid "+tc.name, func(t *testing.T) {
			err := bad(tc.mutate)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: %v, want 422", err)
			}
			var fields []string
			for _, cause := range err.(apierrors.APIStatus).Status().Details.Causes {
				fields = append(fields, cause.Field)
			}
			if diff := cmp.Diff(tc.want, fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
	err = bad(func(s map[string]interface{}) { s["replicas"] = int64(1); s["minReplicas"] = int64(2) })
	if !strings.Contains(err.Error(), "replicas should be greater than or equal to minReplicas") {
		t.Errorf("CEL error does not carry the rule's message: %v", err)
	}
	// Transition rule with oldSelf and messageExpression.
	_, err = ct.Patch(ctx, "my-new-cron-object", types.MergePatchType, []byte(`{"spec":{"image":"other"}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "image is immutable, was my-awesome-cron-image") {
		t.Errorf("changing image: %v, want 422 with the messageExpression", err)
	}
	// Strict field validation refuses unknown fields with 400.
	strict := obj.DeepCopy()
	strict.SetName("strict")
	if _, err := ct.Create(ctx, strict, metav1.CreateOptions{FieldValidation: "Strict"}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "spec.unknown"`) {
		t.Errorf("strict create with an unknown field: %v, want 400 naming spec.unknown", err)
	}
	// Strategic merge patch is refused with 415, as upstream.
	if _, err := ct.Patch(ctx, "my-new-cron-object", types.StrategicMergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch: %v, want 415", err)
	}

	// Table output with the printer columns.
	res := rawGet(t, c, "/apis/stable.example.com/v1/namespaces/default/crontabs", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var table metav1.Table
	if err := json.Unmarshal(res, &table); err != nil {
		t.Fatalf("table: %v: %s", err, res)
	}
	var cols []string
	for _, col := range table.ColumnDefinitions {
		cols = append(cols, col.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Spec", "Replicas", "Age"}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "my-new-cron-object" || table.Rows[0].Cells[1] != "* * * * */5" || table.Rows[0].Cells[2] != float64(5) {
		t.Errorf("rows = %+v", table.Rows)
	}

	// Deleting the CRD deletes its objects first, then the CRD.
	if err := ax.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, "crontabs.stable.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete CRD: %v", err)
	}
	eventually(t, 20*time.Second, "the CRD gone", func() (bool, error) {
		_, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "crontabs.stable.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	if keys := etcdKeys(t, c, "/registry/stable.example.com/crontabs/"); len(keys) != 0 {
		t.Errorf("custom resources left in etcd: %v", keys)
	}
	eventually(t, 5*time.Second, "crontabs gone from discovery", func() (bool, error) {
		_, err := dc.ServerResourcesForGroupVersion("stable.example.com/v1")
		return apierrors.IsNotFound(err), err
	})
}

// rawGet GETs path with an Accept header and returns the body.
func rawGet(t testing.TB, c *testapiserver.Cluster, path, accept string) []byte {
	t.Helper()
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, c.Config.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body
}

// etcdKeys lists the keys under prefix.
func etcdKeys(t testing.TB, c *testapiserver.Cluster, prefix string) []string {
	t.Helper()
	resp, err := c.Etcd().Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

func crdGVR(group, version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}

// TestCustomResourcesAfterRestart: CRDs and their objects are kept in etcd
// (custom resources as JSON, as upstream stores them); after a restart,
// once /readyz answers ok (its crd-informer-synced check), the custom
// resource is served at once.
func TestCustomResourcesAfterRestart(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	createCRD(t, ctx, c, decodeCRD(t, cronTabCRD))
	dyn := dynamic.NewForConfigOrDie(c.Config)
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]interface{}{"name": "kept"},
		"spec":     map[string]interface{}{"cronSpec": "* * * * *"},
	}}
	created, err := dyn.Resource(cronTabs).Namespace("default").Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Etcd().Get(ctx, "/registry/stable.example.com/crontabs/default/kept")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get: %v", err)
	}
	var stored map[string]interface{}
	if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil || stored["apiVersion"] != "stable.example.com/v1" {
		t.Errorf("stored value is not the JSON object (%v): %s", err, resp.Kvs[0].Value)
	}

	c.Restart()
	eventually(t, 30*time.Second, "/readyz ok", func() (bool, error) {
		hc, err := rest.HTTPClientFor(c.Config)
		if err != nil {
			return false, err
		}
		r, err := hc.Get(c.Config.Host + "/readyz")
		if err != nil {
			return false, nil
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK, nil
	})
	got, err := dyn.Resource(cronTabs).Namespace("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after restart, once ready: %v", err)
	}
	if got.GetUID() != created.GetUID() {
		t.Errorf("uid %s after restart, want %s", got.GetUID(), created.GetUID())
	}
}
