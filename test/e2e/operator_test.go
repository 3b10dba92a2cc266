package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// cronTabCRD is the seed's CronTab (stable.example.com/v1, short name ct)
// with a status subresource.
const cronTabCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Phase, type: string, jsonPath: .status.phase}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
              message: {type: string}
          status:
            type: object
            properties:
              phase: {type: string}
              job: {type: string}
`

// TestOperatorRunsCronTabsAsJobs is issue #13's operator: built with
// controller-runtime, run beside the real binary, it reconciles each
// CronTab into a Job (owned by the CronTab) that runs on the real node,
// and writes the outcome into the CronTab's status through /status. The
// user drives it with kubectl; deleting the CronTab garbage-collects the
// Job.
func TestOperatorRunsCronTabsAsJobs(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "operator")
	kubectlStdin(t, c.kubeconfig, cronTabCRD, "apply", "-f", "-")
	kubectl(t, c.kubeconfig, "wait", "--for=condition=Established", "crd/crontabs.stable.example.com", "--timeout=30s")

	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(klog.NewKlogr())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
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
	image := c.image
	err = ctrl.NewControllerManagedBy(mgr).For(cronTab()).Owns(&batchv1.Job{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			ct := cronTab()
			if err := cl.Get(ctx, req.NamespacedName, ct); err != nil {
				return reconcile.Result{}, ctrlclient.IgnoreNotFound(err)
			}
			msg, _, _ := unstructured.NestedString(ct.Object, "spec", "message")
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: ct.GetName() + "-run", Namespace: ct.GetNamespace()}}
			if _, err := ctrl.CreateOrUpdate(ctx, cl, job, func() error {
				if job.CreationTimestamp.IsZero() {
					job.Spec = batchv1.JobSpec{
						BackoffLimit: ptr.To[int32](2),
						Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
							RestartPolicy:                 corev1.RestartPolicyNever,
							TerminationGracePeriodSeconds: ptr.To[int64](1),
							Containers: []corev1.Container{{
								Name: "run", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
								Command: []string{"sh", "-c", "echo " + msg},
							}},
						}},
					}
				}
				return ctrl.SetControllerReference(ct, job, scheme)
			}); err != nil {
				return reconcile.Result{}, err
			}
			phase := "Running"
			switch {
			case job.Status.Succeeded > 0:
				phase = "Succeeded"
			case job.Status.Failed > 0 && job.Status.Active == 0:
				phase = "Failed"
			}
			if old, _, _ := unstructured.NestedString(ct.Object, "status", "phase"); old == phase {
				return reconcile.Result{}, nil
			}
			ct.Object["status"] = map[string]any{"phase": phase, "job": job.Name}
			return reconcile.Result{}, cl.Status().Update(ctx, ct)
		}))
	if err != nil {
		t.Fatalf("controller: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	kubectlStdin(t, c.kubeconfig, fmt.Sprintf(`apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: nightly, namespace: %s}
spec: {cronSpec: "0 3 * * *", message: hello-from-nightly}
`, ns), "apply", "-f", "-")
	waitFor(t, 120*time.Second, "the CronTab's phase Succeeded", func() bool {
		out, _, err := kubectlResult(c.kubeconfig, "", "-n", ns, "get", "ct", "nightly", "-o", "jsonpath={.status.phase}")
		return err == nil && out == "Succeeded"
	})
	if got := kubectl(t, c.kubeconfig, "-n", ns, "logs", "job/nightly-run"); strings.TrimSpace(got) != "hello-from-nightly" {
		t.Errorf("the Job's log %q, want hello-from-nightly", got)
	}
	wantLines(t, kubectl(t, c.kubeconfig, "-n", ns, "get", "ct"), "nightly   0 3 * * *   Succeeded")
	owner := kubectl(t, c.kubeconfig, "-n", ns, "get", "job", "nightly-run", "-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}")
	if owner != "CronTab/nightly" {
		t.Errorf("the Job's owner %q, want CronTab/nightly", owner)
	}

	kubectl(t, c.kubeconfig, "-n", ns, "delete", "ct", "nightly", "--wait=true")
	waitFor(t, 60*time.Second, "the Job garbage-collected", func() bool {
		_, err := c.client.BatchV1().Jobs(ns).Get(context.Background(), "nightly-run", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
