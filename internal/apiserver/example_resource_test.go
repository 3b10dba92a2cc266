package apiserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestVolumeAttributesClass drives the resource added by following "How to
// add a resource" in docs/architecture.md, as a client sees it:
// discovery, create with upstream's validation, kubectl's table,
// immutable fields, and DELETE answering with the object.
func TestVolumeAttributesClass(t *testing.T) {
	c := testapiserver.StartWithOptions(t, testapiserver.Options{SkipBootstrap: true})
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	list, err := cs.Discovery().ServerResourcesForGroupVersion("storage.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var found *metav1.APIResource
	for i := range list.APIResources {
		if list.APIResources[i].Name == "volumeattributesclasses" {
			found = &list.APIResources[i]
		}
	}
	if found == nil {
		t.Fatal("discovery does not list volumeattributesclasses")
	}
	got := []any{found.Kind, found.Namespaced, found.ShortNames, []string(found.Verbs)}
	want := []any{"VolumeAttributesClass", false, []string{"vac"}, []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("discovery (-want +got):\n%s", diff)
	}

	vacs := cs.StorageV1().VolumeAttributesClasses()
	_, err = vacs.Create(ctx, &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, DriverName: "csi.example.com"}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create without parameters: %v, want 422", err)
	}
	gold, err := vacs.Create(ctx, &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com",
		Parameters: map[string]string{"iops": "3000"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gold.Parameters["iops"] = "9000"
	if _, err := vacs.Update(ctx, gold, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("update of parameters: %v, want 422", err)
	}

	table := &metav1.Table{}
	err = cs.StorageV1().RESTClient().Get().AbsPath("/apis/storage.k8s.io/v1/volumeattributesclasses").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(table)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, col := range table.ColumnDefinitions {
		cols = append(cols, col.Name)
	}
	if diff := cmp.Diff([]string{"Name", "DriverName", "Age"}, cols); diff != "" {
		t.Errorf("table columns (-want +got):\n%s", diff)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "gold" || table.Rows[0].Cells[1] != "csi.example.com" {
		t.Errorf("table rows = %v", table.Rows)
	}

	deleted := deleteRaw(ctx, t, cs, "/apis/storage.k8s.io/v1/volumeattributesclasses/gold")
	if deleted["kind"] != "VolumeAttributesClass" {
		t.Errorf("DELETE answered kind %v, want the VolumeAttributesClass, as upstream", deleted["kind"])
	}
}

// deleteRaw deletes path and decodes the answer.
func deleteRaw(ctx context.Context, t *testing.T, cs kubernetes.Interface, path string) map[string]any {
	t.Helper()
	body, err := cs.CoreV1().RESTClient().Delete().AbsPath(path).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeleteAnswers checks what DELETE answers once an object is gone: the
// object for the resources upstream's stores return it for (services),
// a Status for the rest (configmaps).
func TestDeleteAnswers(t *testing.T) {
	c := testapiserver.Start(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := []any{
		deleteRaw(ctx, t, cs, "/api/v1/namespaces/default/services/s")["kind"],
		deleteRaw(ctx, t, cs, "/api/v1/namespaces/default/configmaps/c")["kind"],
	}
	if diff := cmp.Diff([]any{"Service", "Status"}, got); diff != "" {
		t.Errorf("DELETE answers (-want +got):\n%s", diff)
	}
}
