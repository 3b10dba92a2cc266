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

// TestGarbageCollectorOwnerOfANewResource: an operator's CRD is created
// after the controller manager started, and its custom resource owns a
// ConfigMap; the CronTab is deleted before the garbage collector's next
// discovery (every 30 s) has added a monitor for CronTabs. The ConfigMap
// is still collected, within seconds: the collector looks again at
// objects whose owners it cannot watch yet, as upstream's virtual nodes
// are requeued until observed.
func TestGarbageCollectorOwnerOfANewResource(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
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
	// The controllers run before the CRD exists: the serviceaccount
	// controller has given a new namespace its default account.
	ns := "gc-new-resource"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the namespace's default ServiceAccount", func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})

	createCRD(t, ctx, c, decodeCRD(t, cronTabCRD))
	dyn := dynamic.NewForConfigOrDie(c.Config)
	owner, err := dyn.Resource(cronTabs).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]any{"name": "owner"},
		"spec":     map[string]any{"cronSpec": "* * * * *"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "owned", OwnerReferences: []metav1.OwnerReference{{APIVersion: "stable.example.com/v1", Kind: "CronTab", Name: "owner", UID: owner.GetUID()}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Give the collector time to look at the ConfigMap while its owner
	// lives (it keeps it); what matters is what happens after that.
	time.Sleep(2 * time.Second)
	if err := dyn.Resource(cronTabs).Namespace(ns).Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(t, 20*time.Second, "the owned ConfigMap collected before the next discovery", func() (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	t.Logf("collected %v after its owner's deletion", time.Since(deleted).Round(time.Millisecond))
}
