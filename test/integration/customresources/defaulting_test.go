package customresources

import (
	"strings"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

const gizmoCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.defaults.example.com}
spec:
  group: defaults.example.com
  scope: Cluster
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          a: {type: string}
          b: {type: string}
`

// TestCustomResourceDefaultingFromStorage: a default added to the schema
// after an object was stored shows on GET, LIST and WATCH of that object,
// which etcd still holds without it (as upstream's conformance test
// "custom resource defaulting for requests and from storage works"); a
// field removed from the schema no longer shows, though etcd holds it.
func TestCustomResourceDefaultingFromStorage(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	ax := apiextensionsclient.NewForConfigOrDie(c.Config)
	gizmos := dynamic.NewForConfigOrDie(c.Config).Resource(crdGVR("defaults.example.com", "v1", "gizmos"))
	createCRD(t, ctx, c, decodeCRD(t, gizmoCRD))
	eventually(t, 10*time.Second, "gizmos served", func() (bool, error) {
		_, err := gizmos.List(ctx, metav1.ListOptions{})
		return err == nil, err
	})

	cr := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "defaults.example.com/v1", "kind": "Gizmo",
		"metadata": map[string]interface{}{"name": "old"},
	}}
	if _, err := gizmos.Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, "gizmos.defaults.example.com", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/a/default","value":"A"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("add default: %v", err)
	}
	eventually(t, 10*time.Second, "GET shows the new default", func() (bool, error) {
		got, err := gizmos.Get(ctx, "old", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		a, _, _ := unstructured.NestedString(got.Object, "a")
		return a == "A", nil
	})
	list, err := gizmos.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v, %d items", err, len(list.Items))
	}
	if a, _, _ := unstructured.NestedString(list.Items[0].Object, "a"); a != "A" {
		t.Errorf("LIST: a = %q, want the default A", a)
	}
	w, err := gizmos.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			t.Fatalf("watch event %s %T", ev.Type, ev.Object)
		}
		if a, _, _ := unstructured.NestedString(u.Object, "a"); a != "A" {
			t.Errorf("WATCH %s: a = %q, want the default A", ev.Type, a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	// Reading does not rewrite the object.
	resp, err := c.Etcd().Get(ctx, "/registry/defaults.example.com/gizmos/old")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get: %v", err)
	}
	if v := string(resp.Kvs[0].Value); strings.Contains(v, `"a"`) {
		t.Errorf("etcd holds %s; want the object as written, without the default", v)
	}

	created, err := gizmos.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "defaults.example.com/v1", "kind": "Gizmo",
		"metadata": map[string]interface{}{"name": "new"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create after the default: %v", err)
	}
	if a, _, _ := unstructured.NestedString(created.Object, "a"); a != "A" {
		t.Errorf("create: a = %q, want the default A", a)
	}

	// A field the schema stops declaring is pruned as the object is read,
	// as upstream's storage decoder does, while etcd still holds it.
	if _, err := gizmos.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "defaults.example.com/v1", "kind": "Gizmo",
		"metadata": map[string]interface{}{"name": "with-b"}, "b": "B",
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create with b: %v", err)
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, "gizmos.defaults.example.com", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/spec/versions/0/schema/openAPIV3Schema/properties/b"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("remove b: %v", err)
	}
	eventually(t, 10*time.Second, "GET no longer shows b", func() (bool, error) {
		got, err := gizmos.Get(ctx, "with-b", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, found, _ := unstructured.NestedString(got.Object, "b")
		return !found, nil
	})
	resp, err = c.Etcd().Get(ctx, "/registry/defaults.example.com/gizmos/with-b")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get: %v", err)
	}
	if v := string(resp.Kvs[0].Value); !strings.Contains(v, `"b":"B"`) {
		t.Errorf("etcd holds %s; want the object as written, with b", v)
	}
}
