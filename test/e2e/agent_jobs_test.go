package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAgentIndexedJob runs an Indexed Job of 5 on the real node: each
// index runs once, in a container that sees its index in
// JOB_COMPLETION_INDEX and its hostname <job>-<index>, and `kubectl wait
// --for=condition=complete` returns.
func TestAgentIndexedJob(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-indexed-job")
	kubectlStdin(t, c.kubeconfig, fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: idx, namespace: %s}
spec:
  completions: 5
  parallelism: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: work
        image: %s
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "echo index=$JOB_COMPLETION_INDEX host=$(hostname)"]
`, ns, c.image), "apply", "-f", "-")
	// kubectl wait, in 20 s slices (each kubectl gets 30 s).
	waitFor(t, 180*time.Second, "kubectl wait --for=condition=complete job/idx", func() bool {
		out, _, err := kubectlResult(c.kubeconfig, "", "-n", ns, "wait", "--for=condition=complete", "job/idx", "--timeout=20s")
		return err == nil && strings.Contains(out, "condition met")
	})

	j, err := c.client.BatchV1().Jobs(ns).Get(context.Background(), "idx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status.Succeeded != 5 || j.Status.Failed != 0 || j.Status.CompletedIndexes != "0-4" {
		t.Errorf("job status: succeeded %d failed %d completedIndexes %q", j.Status.Succeeded, j.Status.Failed, j.Status.CompletedIndexes)
	}
	pods, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=idx"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pods.Items {
		got = append(got, strings.TrimSpace(kubectl(t, c.kubeconfig, "-n", ns, "logs", p.Name)))
	}
	sort.Strings(got)
	want := []string{"index=0 host=idx-0", "index=1 host=idx-1", "index=2 host=idx-2", "index=3 host=idx-3", "index=4 host=idx-4"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the pods said:\n%s\nwant each index once:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAgentCronJob runs a CronJob every minute on the real node: its Jobs
// run and succeed, `kubectl get cronjob` shows the last schedule, and with
// successfulJobsHistoryLimit 1 only the newest finished Job is kept.
func TestAgentCronJob(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-cronjob")
	kubectlStdin(t, c.kubeconfig, fmt.Sprintf(`apiVersion: batch/v1
kind: CronJob
metadata: {name: tick, namespace: %s}
spec:
  schedule: "* * * * *"
  successfulJobsHistoryLimit: 1
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          containers:
          - name: tick
            image: %s
            imagePullPolicy: IfNotPresent
            command: [sh, -c, "echo tick"]
`, ns, c.image), "apply", "-f", "-")

	// Two runs a minute apart; the first one's Job is then deleted.
	seen := map[string]bool{}
	var kept []string
	waitFor(t, 200*time.Second, "two Jobs succeeded and only the newest kept", func() bool {
		jobs, err := c.client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		kept = kept[:0]
		for _, j := range jobs.Items {
			if j.Status.Succeeded == 1 {
				seen[j.Name] = true
			}
			if j.DeletionTimestamp == nil {
				kept = append(kept, j.Name)
			}
		}
		return len(seen) >= 2 && len(kept) == 1 && seen[kept[0]]
	})
	for name := range seen {
		if !strings.HasPrefix(name, "tick-") {
			t.Errorf("job %s: want tick-<minutes since the epoch>", name)
		}
	}
	cj := kubectl(t, c.kubeconfig, "-n", ns, "get", "cronjob", "tick", "-o", "jsonpath={.status.lastScheduleTime} {.status.lastSuccessfulTime}")
	if f := strings.Fields(cj); len(f) != 2 {
		t.Errorf("cronjob status times %q; want both set", cj)
	}
}
