package apiserver

import (
	"context"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestHarness(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	cs := c.Clientset()

	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ns := range nss.Items {
		names = append(names, ns.Name)
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"default", "kube-node-lease", "kube-public", "kube-system"}, names); diff != "" {
		t.Errorf("namespaces (-want +got):\n%s", diff)
	}
	svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.43.0.1" {
		t.Errorf("kubernetes service ClusterIP = %q, want 10.43.0.1", svc.Spec.ClusterIP)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Etcd().Get(ctx, "/registry/configmaps/default/survivor")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("configmap not stored under its upstream key: %v %v", resp, err)
	}

	c.Restart()

	// The old clientset keeps working: same host and credentials.
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"k": "v"}, got.Data); diff != "" {
		t.Errorf("configmap data after restart (-want +got):\n%s", diff)
	}
	u, err := c.Dynamic().Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default").Get(ctx, "survivor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("dynamic get: %v", err)
	}
	if u.GetName() != "survivor" {
		t.Errorf("dynamic get name = %q", u.GetName())
	}
}
