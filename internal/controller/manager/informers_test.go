package manager_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestInformersDropManagedFields: the shared informers, typed and
// metadata-only, cache objects without managedFields, as
// kube-controller-manager's do, while the API server still tracks them.
func TestInformersDropManagedFields(t *testing.T) {
	c := testapiserver.Start(t)
	client := c.Clientset()
	ctx := context.Background()
	newNamespace(t, client, "trim")
	if _, err := client.CoreV1().ConfigMaps("trim").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "b"},
	}, metav1.CreateOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	stored, err := client.CoreV1().ConfigMaps("trim").Get(ctx, "cm", metav1.GetOptions{})
	if err != nil || len(stored.ManagedFields) == 0 {
		t.Fatalf("the API server keeps no managedFields (%v): nothing to test", err)
	}

	type cached struct{ typed, meta int }
	got := make(chan cached, 1)
	probe := func(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
		typed := cc.Informers.Core().V1().ConfigMaps()
		meta := cc.MetadataInformers.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps"))
		typed.Informer()
		meta.Informer()
		return controllercontext.ControllerFunc(func(ctx context.Context) error {
			if !cache.WaitForCacheSync(ctx.Done(), typed.Informer().HasSynced, meta.Informer().HasSynced) {
				return ctx.Err()
			}
			cm, err := typed.Lister().ConfigMaps("trim").Get("cm")
			if err != nil {
				return err
			}
			pm, err := meta.Lister().ByNamespace("trim").Get("cm")
			if err != nil {
				return err
			}
			pmm, _ := pm.(metav1.Object)
			got <- cached{typed: len(cm.ManagedFields), meta: len(pmm.GetManagedFields())}
			<-ctx.Done()
			return nil
		}), nil
	}
	startManager(t, c.Config, manager.Options{
		Controllers: manager.Selection{"probe"},
		InitFuncs:   map[string]controllercontext.InitFunc{"probe": probe},
	})
	select {
	case g := <-got:
		if g.typed != 0 || g.meta != 0 {
			t.Errorf("cached managedFields entries: typed informer %d, metadata informer %d; want none", g.typed, g.meta)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the probe controller never saw the ConfigMap")
	}
}
