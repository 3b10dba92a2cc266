package customresources

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestControllerRuntimeReconcilesCronTabs: an operator built with
// controller-runtime watches CronTabs (an unstructured informer on the
// custom resource, fed by the watch cache) and the ConfigMaps it owns,
// creates one ConfigMap per CronTab with the schedule, follows updates
// and writes the CronTab's status through /status; deleting the CronTab
// lets the garbage collector's owner reference semantics apply (the
// ConfigMap names it as owner).
func TestControllerRuntimeReconcilesCronTabs(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	createCRD(t, ctx, c, decodeCRD(t, cronTabCRD))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	cronTab := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("stable.example.com/v1")
		u.SetKind("CronTab")
		return u
	}
	cl := mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).For(cronTab()).Owns(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			ct := cronTab()
			if err := cl.Get(ctx, req.NamespacedName, ct); err != nil {
				return reconcile.Result{}, ctrlclient.IgnoreNotFound(err)
			}
			schedule, _, _ := unstructured.NestedString(ct.Object, "spec", "cronSpec")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ct.GetName() + "-schedule", Namespace: ct.GetNamespace()}}
			if _, err := ctrl.CreateOrUpdate(ctx, cl, cm, func() error {
				cm.Data = map[string]string{"schedule": schedule}
				return ctrl.SetControllerReference(ct, cm, scheme)
			}); err != nil {
				return reconcile.Result{}, err
			}
			if err := unstructured.SetNestedField(ct.Object, int64(1), "status", "replicas"); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, cl.Status().Update(ctx, ct)
		}))
	if err != nil {
		t.Fatalf("controller: %v", err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})

	ct := cronTab()
	ct.SetName("nightly")
	ct.SetNamespace("default")
	ct.Object["spec"] = map[string]interface{}{"cronSpec": "0 3 * * *"}
	direct, err := ctrlclient.New(c.Config, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.Create(ctx, ct); err != nil {
		t.Fatalf("create CronTab: %v", err)
	}
	schedule := func() (string, error) {
		cm := &corev1.ConfigMap{}
		if err := direct.Get(ctx, ctrlclient.ObjectKey{Namespace: "default", Name: "nightly-schedule"}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return "", nil
			}
			return "", err
		}
		if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].Kind != "CronTab" || cm.OwnerReferences[0].UID != ct.GetUID() {
			t.Errorf("owner references = %+v", cm.OwnerReferences)
		}
		return cm.Data["schedule"], nil
	}
	eventually(t, 20*time.Second, "the ConfigMap of the CronTab", func() (bool, error) {
		s, err := schedule()
		return s == "0 3 * * *", err
	})
	eventually(t, 10*time.Second, "the CronTab's status", func() (bool, error) {
		got := cronTab()
		if err := direct.Get(ctx, ctrlclient.ObjectKeyFromObject(ct), got); err != nil {
			return false, err
		}
		r, _, _ := unstructured.NestedInt64(got.Object, "status", "replicas")
		return r == 1, nil
	})

	patch := []byte(`{"spec":{"cronSpec":"30 4 * * *"}}`)
	if err := direct.Patch(ctx, ct, ctrlclient.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("patch CronTab: %v", err)
	}
	eventually(t, 20*time.Second, "the ConfigMap to follow the update", func() (bool, error) {
		s, err := schedule()
		return s == "30 4 * * *", err
	})
}
