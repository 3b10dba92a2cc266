package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubectltest "github.com/skiff-sh/skiff/internal/testing/kubectl"
)

// TestKubectlWorkloadCommands: the kubectl commands a user runs on
// workloads, run as commands (the embedded kubectl) against the controller
// manager, the scheduler and simulated nodes: `rollout restart` of a
// Deployment, a DaemonSet and a StatefulSet replaces every pod and `rollout
// status` sees it through; `create job --from=cronjob/x` runs the
// CronJob's template once, now, as a Job the CronJob owns.
func TestKubectlWorkloadCommands(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 2)
	runScheduler(t, c)
	runManager(t, c)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 3*time.Minute)
	k := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, err := kubectltest.Run(t, c.Kubeconfig(), stdin, append([]string{"-n", ns}, args...)...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}

	k(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: web:1}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: c, image: agent:1}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: db:1}]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        metadata:
          labels: {app: nightly}
          annotations: {%q: "0.5"}
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox}]
`, "simulate.skiff.sh/run-seconds"), "apply", "-f", "-")

	workloads := []struct{ ref, app, printed string }{
		{"deployment/web", "web", "deployment.apps/web restarted"},
		{"daemonset/agent", "agent", "daemonset.apps/agent restarted"},
		{"statefulset/db", "db", "statefulset.apps/db restarted"},
	}
	before := map[string][]string{} // pod UIDs per app
	for _, w := range workloads {
		k("", "rollout", "status", w.ref, "--timeout=90s")
		before[w.app] = podUIDs(t, c, ns, w.app)
	}
	for _, w := range workloads {
		if out := k("", "rollout", "restart", w.ref); strings.TrimSpace(out) != w.printed {
			t.Errorf("rollout restart %s: %q", w.ref, out)
		}
	}
	for _, w := range workloads {
		k("", "rollout", "status", w.ref, "--timeout=120s")
		var pods []corev1.Pod
		eventually(t, 60*time.Second, w.ref+": the old pods gone", func() (bool, error) {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + w.app})
			if err != nil {
				return false, err
			}
			pods = list.Items
			for _, p := range pods {
				if slices.Contains(before[w.app], string(p.UID)) {
					return false, nil
				}
			}
			return len(pods) == len(before[w.app]), nil
		})
		for _, p := range pods {
			if p.Annotations["kubectl.kubernetes.io/restartedAt"] == "" || p.DeletionTimestamp != nil {
				t.Errorf("%s: pod %s after the restart: annotations %v", w.ref, p.Name, p.Annotations)
			}
		}
	}

	// A manual run of the CronJob.
	if out := k("", "create", "job", "manual", "--from=cronjob/nightly"); !strings.Contains(out, "job.batch/manual created") {
		t.Errorf("create job --from: %q", out)
	}
	j := waitJobCondition(t, ctx, cs, ns, "manual", batchv1.JobComplete)
	if ref := metav1.GetControllerOf(j); ref == nil || ref.Kind != "CronJob" || ref.Name != "nightly" {
		t.Errorf("job manual owners %v; want the CronJob nightly as controller", j.OwnerReferences)
	}
	if j.Annotations["cronjob.kubernetes.io/instantiate"] != "manual" || j.Status.Succeeded != 1 || j.Spec.Template.Labels["app"] != "nightly" {
		t.Errorf("job manual: annotations %v, succeeded %d, template labels %v", j.Annotations, j.Status.Succeeded, j.Spec.Template.Labels)
	}
	if out := k("", "get", "cronjob", "nightly", "-o", "jsonpath={.spec.suspend} {.status.lastScheduleTime}"); out != "false " {
		t.Errorf("the CronJob after a manual run: suspend, lastScheduleTime = %q; want it untouched", out)
	}
}

// podUIDs are the UIDs of the live pods labelled app=app.
func podUIDs(t *testing.T, c *cluster, ns, app string) []string {
	t.Helper()
	list, err := c.Clientset().CoreV1().Pods(ns).List(testCtx(t, 10*time.Second), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, p := range list.Items {
		uids = append(uids, string(p.UID))
	}
	if len(uids) == 0 {
		t.Fatalf("no pods of %s", app)
	}
	return uids
}
