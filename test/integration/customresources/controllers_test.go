package customresources

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/controller/manager"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestCustomResourcesWithControllers: Skiff's own controller manager
// treats custom resources like built-ins: the garbage collector deletes a
// CronTab whose owner (a ConfigMap) is deleted, and deleting a namespace
// deletes the CronTabs in it before the namespace goes.
func TestCustomResourcesWithControllers(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	createCRD(t, ctx, c, decodeCRD(t, cronTabCRD))
	m, err := manager.New(c.Config, manager.Options{Controller: manager.DefaultControllerOptions()})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	cs := kubernetes.NewForConfigOrDie(c.Config)
	dyn := dynamic.NewForConfigOrDie(c.Config)
	ns := "crons"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newCronTab := func(name string, owned bool) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "stable.example.com/v1", "kind": "CronTab",
			"metadata": map[string]interface{}{"name": name},
			"spec":     map[string]interface{}{"cronSpec": "* * * * *"},
		}}
		if owned {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}})
		}
		if _, err := dyn.Resource(cronTabs).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	newCronTab("owned", true)
	newCronTab("free", false)

	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the garbage collector to delete the owned CronTab", func() (bool, error) {
		_, err := dyn.Resource(cronTabs).Namespace(ns).Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if _, err := dyn.Resource(cronTabs).Namespace(ns).Get(ctx, "free", metav1.GetOptions{}); err != nil {
		t.Errorf("the CronTab without owner: %v", err)
	}

	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the namespace and its CronTab gone", func() (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if keys := etcdKeys(t, c, "/registry/stable.example.com/crontabs/"+ns+"/"); len(keys) != 0 {
		t.Errorf("CronTabs left after the namespace went: %v", keys)
	}
}
