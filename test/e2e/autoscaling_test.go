package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAutoscaling runs a Deployment whose pod burns CPU on the real node:
// `kubectl top` shows its usage from metrics.k8s.io (served by the API
// server from the kubelet's /metrics/resource), and a HorizontalPodAutoscaler
// created with `kubectl autoscale` scales it to its maximum, with upstream's
// conditions, status and event.
func TestAutoscaling(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "autoscaling")
	kubectlStdin(t, c.kubeconfig, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: burner, namespace: %s}
spec:
  replicas: 1
  selector: {matchLabels: {app: burner}}
  template:
    metadata: {labels: {app: burner}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: burn
        image: %s
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "while :; do :; done"]
        resources: {requests: {cpu: 20m, memory: 8Mi}, limits: {cpu: 100m}}
`, ns, c.image), "apply", "-f", "-")
	kubectl(t, c.kubeconfig, "-n", ns, "rollout", "status", "deploy/burner", "--timeout=90s")

	// kubectl top reads metrics.k8s.io. The busy loop is held to its limit
	// of 100 millicores (so that three of them leave the machine to the
	// other tests), far above its request of 20: 500% utilization.
	waitFor(t, 60*time.Second, "kubectl top pod to show the burner busy", func() bool {
		out, _, err := kubectlResult(c.kubeconfig, "", "-n", ns, "top", "pod", "--no-headers")
		if err != nil {
			return false
		}
		f := strings.Fields(out)
		return len(f) >= 3 && strings.HasPrefix(f[0], "burner-") && strings.HasSuffix(f[1], "m") && f[1] != "0m" && len(f[1]) >= 3
	})
	out := kubectl(t, c.kubeconfig, "top", "node", "--no-headers")
	if f := strings.Fields(out); len(f) < 5 || f[0] != c.node {
		t.Errorf("kubectl top node = %q, want a row for node %s", out, c.node)
	}

	kubectl(t, c.kubeconfig, "-n", ns, "autoscale", "deployment", "burner", "--min=1", "--max=3", "--cpu=50%")
	waitFor(t, 90*time.Second, "the HPA to scale the burner to 3", func() bool {
		d, err := c.client.AppsV1().Deployments(ns).Get(context.Background(), "burner", metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 3
	})
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	waitFor(t, 30*time.Second, "the HPA's status to show the rescale", func() bool {
		h, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "burner", metav1.GetOptions{})
		if err != nil || h.Status.LastScaleTime == nil || h.Status.DesiredReplicas != 3 || len(h.Status.CurrentMetrics) != 1 {
			return false
		}
		hpa = h
		return true
	})
	m := hpa.Status.CurrentMetrics[0]
	if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil || m.Resource.Name != corev1.ResourceCPU ||
		m.Resource.Current.AverageUtilization == nil || *m.Resource.Current.AverageUtilization <= 50 {
		t.Errorf("current metric = %+v, want cpu utilization above the 50%% target", m)
	}
	conds := map[autoscalingv2.HorizontalPodAutoscalerConditionType]autoscalingv2.HorizontalPodAutoscalerCondition{}
	for _, cond := range hpa.Status.Conditions {
		conds[cond.Type] = cond
	}
	if c := conds[autoscalingv2.AbleToScale]; c.Status != corev1.ConditionTrue {
		t.Errorf("AbleToScale = %+v, want True", c)
	}
	if c := conds[autoscalingv2.ScalingActive]; c.Status != corev1.ConditionTrue || c.Reason != "ValidMetricFound" {
		t.Errorf("ScalingActive = %+v, want True ValidMetricFound", c)
	}
	waitFor(t, 30*time.Second, "a SuccessfulRescale event", func() bool {
		evs, err := c.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler"})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "SuccessfulRescale" && strings.HasPrefix(e.Message, "New size: ") && strings.Contains(e.Message, "cpu resource utilization (percentage of request) above target") {
				return true
			}
		}
		return false
	})
	// And back when they stop: no stabilization window (the default would
	// hold the scale-down for five minutes), and pods that only sleep.
	kubectl(t, c.kubeconfig, "-n", ns, "patch", "hpa", "burner", "--type=merge", "-p", `{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":0}}}}`)
	kubectl(t, c.kubeconfig, "-n", ns, "patch", "deployment", "burner", "--type=json", "-p", `[{"op":"replace","path":"/spec/template/spec/containers/0/command","value":["sh","-c","exec sleep 3600"]}]`)
	waitFor(t, 120*time.Second, "the HPA to scale the idle Deployment back to 1", func() bool {
		d, err := c.client.AppsV1().Deployments(ns).Get(context.Background(), "burner", metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 1
	})
}
