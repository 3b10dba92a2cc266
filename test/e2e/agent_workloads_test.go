package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAgentDaemonSet runs a DaemonSet on the real node (containerd, runc,
// CNI) and drives it with `skiff kubectl rollout`, as a user does.
func TestAgentDaemonSet(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-daemonset")
	manifest := func(version string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: %s}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: agent
        image: %s
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "echo %s; exec sleep 3600"]
        env: [{name: VERSION, value: %q}]
`, ns, c.image, version, version)
	}
	kubectlStdin(t, c.kubeconfig, manifest("a"), "apply", "-f", "-")
	kubectl(t, c.kubeconfig, "-n", ns, "rollout", "status", "ds/agent", "--timeout=90s")
	pods := c.daemonPods(t, ns)
	if len(pods) != 1 {
		t.Fatalf("daemon pods %v; want one on the one node", pods)
	}

	kubectlStdin(t, c.kubeconfig, manifest("b"), "apply", "-f", "-")
	kubectl(t, c.kubeconfig, "-n", ns, "rollout", "status", "ds/agent", "--timeout=90s")
	if got := c.daemonPods(t, ns); len(got) != 1 || got[0] == pods[0] {
		t.Errorf("after the update daemon pods %v (before %v); want one new pod", got, pods)
	}
	wantLines(t, kubectl(t, c.kubeconfig, "-n", ns, "rollout", "history", "ds/agent"), "1         <none>", "2         <none>")

	kubectl(t, c.kubeconfig, "-n", ns, "rollout", "undo", "ds/agent")
	kubectl(t, c.kubeconfig, "-n", ns, "rollout", "status", "ds/agent", "--timeout=90s")
	env := kubectl(t, c.kubeconfig, "-n", ns, "get", "ds", "agent", "-o", "jsonpath={.spec.template.spec.containers[0].env[0].value}")
	if env != "a" {
		t.Errorf("after undo VERSION = %q, want a", env)
	}
	waitFor(t, 60*time.Second, "the undone pod logging a", func() bool {
		pods := c.daemonPods(t, ns)
		if len(pods) != 1 {
			return false
		}
		out, _, err := kubectlResult(c.kubeconfig, "", "-n", ns, "logs", pods[0])
		return err == nil && strings.TrimSpace(out) == "a"
	})
}

// daemonPods names the live pods of namespace ns that are Running and Ready.
func (c *agentCluster) daemonPods(t *testing.T, ns string) []string {
	t.Helper()
	list, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp == nil && podRunningReady(p) {
			out = append(out, p.Name)
		}
	}
	return out
}

// TestAgentStatefulSet runs a StatefulSet of 3 on the real node: the pods
// come up in order with their stable names as hostnames, a deleted pod
// comes back under its name, and a scale down removes the highest first.
func TestAgentStatefulSet(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-statefulset")
	kubectlStdin(t, c.kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec: {clusterIP: None, selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: %[1]s}
spec:
  serviceName: web
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: %[2]s
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "hostname; exec sleep 3600"]
`, ns, c.image), "apply", "-f", "-")
	kubectl(t, c.kubeconfig, "-n", ns, "rollout", "status", "sts/web", "--timeout=120s")

	var started []time.Time
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("web-%d", i)
		p := c.waitPod(t, ns, name, 30*time.Second, "Running and Ready", podRunningReady)
		if p.Spec.Hostname != name || p.Spec.Subdomain != "web" {
			t.Errorf("%s: hostname %q subdomain %q", name, p.Spec.Hostname, p.Spec.Subdomain)
		}
		if out := strings.TrimSpace(kubectl(t, c.kubeconfig, "-n", ns, "logs", name)); out != name {
			t.Errorf("%s: the container's hostname is %q", name, out)
		}
		started = append(started, p.CreationTimestamp.Time)
	}
	if started[1].Before(started[0]) || started[2].Before(started[1]) {
		t.Errorf("pods created at %v; want in ordinal order", started)
	}

	old := c.waitPod(t, ns, "web-1", time.Second, "present", podRunningReady)
	kubectl(t, c.kubeconfig, "-n", ns, "delete", "pod", "web-1")
	c.waitPod(t, ns, "web-1", 60*time.Second, "web-1 back, Running and Ready", func(p *corev1.Pod) bool {
		return p.UID != old.UID && podRunningReady(p)
	})

	kubectl(t, c.kubeconfig, "-n", ns, "scale", "sts/web", "--replicas=1")
	waitFor(t, 60*time.Second, "scaled down to web-0", func() bool {
		pods := c.daemonPods(t, ns)
		return len(pods) == 1 && pods[0] == "web-0"
	})
}
