package podautoscaler

import (
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// runningPod is Ready since well before now, started long ago (past the
// CPU initialization period), requesting cpuRequest millicores.
func runningPod(name string, cpuRequest int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpuRequest, resource.DecimalSI)}},
		}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			StartTime:  &metav1.Time{Time: t0.Add(-time.Hour)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0.Add(-time.Hour)}}},
		},
	}
}

func usage(values ...int64) podMetrics {
	out := podMetrics{}
	for i, v := range values {
		out[fmt.Sprintf("p%d", i)] = podMetric{Value: v, Timestamp: t0, Window: 15 * time.Second}
	}
	return out
}

func pods(n int, request int64) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, runningPod(fmt.Sprintf("p%d", i), request))
	}
	return out
}

func TestUtilizationReplicas(t *testing.T) {
	calc := calculator{now: t0, cpuInitializationPeriod: DefaultCPUInitializationPeriod, delayOfInitialReadinessStatus: DefaultInitialReadinessDelay}
	tol := tolerances{0.1, 0.1}
	pending := func(p []*corev1.Pod, i int) []*corev1.Pod { p[i].Status.Phase = corev1.PodPending; return p }
	starting := func(p []*corev1.Pod, i int) []*corev1.Pod {
		// Started a minute ago and Ready only now: its sample predates a
		// whole window of readiness.
		p[i].Status.StartTime = &metav1.Time{Time: t0.Add(-time.Minute)}
		p[i].Status.Conditions[0].LastTransitionTime = metav1.Time{Time: t0.Add(-5 * time.Second)}
		return p
	}
	deleted := func(p []*corev1.Pod, i int) []*corev1.Pod { p[i].DeletionTimestamp = &metav1.Time{Time: t0}; return p }
	cases := []struct {
		name        string
		current     int32
		target      int32
		metrics     podMetrics
		pods        []*corev1.Pod
		want        int32
		wantUtil    int32
		wantRaw     int64
		wantErrText string
	}{
		{name: "double the target doubles the pods", current: 3, target: 50, metrics: usage(100, 100, 100), pods: pods(3, 100), want: 6, wantUtil: 100, wantRaw: 100},
		{name: "within tolerance keeps the count", current: 3, target: 50, metrics: usage(52, 54, 50), pods: pods(3, 100), want: 3, wantUtil: 52, wantRaw: 52},
		{name: "half the target halves the pods", current: 4, target: 50, metrics: usage(25, 25, 25, 25), pods: pods(4, 100), want: 2, wantUtil: 25, wantRaw: 25},
		{name: "a pending pod does not count as zero when scaling down", current: 3, target: 50, metrics: usage(10, 10), pods: pending(pods(3, 100), 2), want: 1, wantUtil: 10, wantRaw: 10},
		{name: "a pending pod counts as zero when scaling up", current: 3, target: 50, metrics: usage(100, 100), pods: pending(pods(3, 100), 2), want: 4, wantUtil: 100, wantRaw: 100},
		{name: "a missing pod counts as using its request when scaling down", current: 3, target: 50, metrics: usage(10, 10), pods: pods(3, 100), want: 3, wantUtil: 10, wantRaw: 10},
		{name: "a missing pod counts as zero when scaling up", current: 3, target: 50, metrics: usage(200, 200), pods: pods(3, 100), want: 8, wantUtil: 200, wantRaw: 200},
		{name: "a starting pod's early CPU sample is ignored on scale up", current: 2, target: 50, metrics: usage(100, 500), pods: starting(pods(2, 100), 1), want: 2, wantUtil: 100, wantRaw: 100},
		{name: "a pod being deleted is ignored", current: 3, target: 50, metrics: usage(100, 100, 900), pods: deleted(pods(3, 100), 2), want: 4, wantUtil: 100, wantRaw: 100},
		{name: "no pods", current: 3, target: 50, metrics: usage(100), wantErrText: "no pods returned by selector while calculating replica count"},
		{name: "no metrics for ready pods", current: 2, target: 50, metrics: podMetrics{}, pods: pending(pending(pods(2, 100), 0), 1), wantErrText: "did not receive metrics for targeted pods (pods might be unready)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, util, raw, err := calc.utilizationReplicas(tc.current, tc.target, tc.metrics, tc.pods, corev1.ResourceCPU, "", tol)
			if tc.wantErrText != "" {
				if err == nil || err.Error() != tc.wantErrText {
					t.Fatalf("err = %v, want %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || util != tc.wantUtil || raw != tc.wantRaw {
				t.Errorf("replicas, utilization, raw = %d, %d, %d; want %d, %d, %d", got, util, raw, tc.want, tc.wantUtil, tc.wantRaw)
			}
		})
	}
}

func TestUtilizationNeedsRequests(t *testing.T) {
	p := pods(1, 100)
	p[0].Spec.Containers[0].Resources.Requests = nil
	_, _, _, err := calculator{now: t0}.utilizationReplicas(1, 50, usage(10), p, corev1.ResourceCPU, "", tolerances{0.1, 0.1})
	if want := "missing request for cpu in container app of Pod p0"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestValueReplicas(t *testing.T) {
	calc := calculator{now: t0, cpuInitializationPeriod: DefaultCPUInitializationPeriod}
	got, avg, err := calc.valueReplicas(2, 200, usage(400, 400), pods(2, 100), corev1.ResourceMemory, tolerances{0.1, 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if got != 4 || avg != 400 {
		t.Errorf("replicas, average = %d, %d; want 4, 400", got, avg)
	}
}

func TestNormalizeWithoutBehavior(t *testing.T) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 10}}
	h := newHistory()
	// Scaling up is limited to double (at least 4) per sync.
	l := h.normalize(hpa, "k", t0, 5*time.Minute, 2, 9, 1)
	if l.replicas != 4 || l.reason != "ScaleUpLimit" || !l.limited {
		t.Errorf("scale up from 2 to 9 = %+v, want 4 by ScaleUpLimit", l)
	}
	// The earlier recommendation of 9 holds a scale-down back for the
	// stabilization window...
	l = h.normalize(hpa, "k", t0.Add(time.Minute), 5*time.Minute, 4, 2, 1)
	if l.replicas != 8 || !l.stabilized || l.stabilizedReason != "ScaleDownStabilized" {
		t.Errorf("scale down within the window = %+v, want 8 (double of 4), stabilized", l)
	}
	// ...and lets it through once the window has passed.
	l = h.normalize(hpa, "k", t0.Add(7*time.Minute), 5*time.Minute, 4, 2, 1)
	if l.replicas != 2 || l.stabilized || l.reason != "DesiredWithinRange" {
		t.Errorf("scale down after the window = %+v, want 2 within range", l)
	}
	// The minimum holds.
	l = newHistory().normalize(hpa, "k", t0, 5*time.Minute, 3, 0, 2)
	if l.replicas != 2 || l.reason != "TooFewReplicas" {
		t.Errorf("below min = %+v, want 2 by TooFewReplicas", l)
	}
}

func TestNormalizeWithBehavior(t *testing.T) {
	pods := autoscalingv2.PodsScalingPolicy
	hpa := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		MaxReplicas: 20,
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: pods, Value: 2, PeriodSeconds: 60}}},
			ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr.To[int32](0),
				Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: pods, Value: 1, PeriodSeconds: 60}},
			},
		},
	}}
	h := newHistory()
	l := h.normalize(hpa, "k", t0, 5*time.Minute, 2, 10, 1)
	if l.replicas != 4 || l.reason != "ScaleUpLimit" {
		t.Fatalf("first scale up = %+v, want 4 (2 pods per minute)", l)
	}
	h.storeScale(hpa, "k", t0, 5*time.Minute, 2, 4)
	// Within the same minute the 2 pods are spent.
	l = h.normalize(hpa, "k", t0.Add(15*time.Second), 5*time.Minute, 4, 10, 1)
	if l.replicas != 4 || l.reason != "ScaleUpLimit" {
		t.Errorf("second scale up in the period = %+v, want to stay at 4", l)
	}
	// A minute later, two more.
	l = h.normalize(hpa, "k", t0.Add(61*time.Second), 5*time.Minute, 4, 10, 1)
	if l.replicas != 6 {
		t.Errorf("scale up a period later = %+v, want 6", l)
	}
	// Scaling down: one pod per minute, no stabilization window.
	l = newHistory().normalize(hpa, "d", t0, 5*time.Minute, 6, 1, 1)
	if l.replicas != 5 || l.reason != "ScaleDownLimit" {
		t.Errorf("scale down = %+v, want 5 (1 pod per minute)", l)
	}
}
