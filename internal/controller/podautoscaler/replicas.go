package podautoscaler

import (
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// podMetric is one pod's usage of a resource (milli-units: millicores for
// CPU, milli-bytes for memory, as upstream counts) at Timestamp over Window.
type podMetric struct {
	Value     int64
	Timestamp time.Time
	Window    time.Duration
}

// podMetrics are the usages by pod name.
type podMetrics map[string]podMetric

// tolerances are how far the usage ratio may stray from 1 before the
// replica count changes (upstream's --horizontal-pod-autoscaler-tolerance,
// 0.1, or the HPA's behavior).
type tolerances struct{ scaleDown, scaleUp float64 }

func (t tolerances) within(ratio float64) bool {
	return (1.0-t.scaleDown) <= ratio && ratio <= (1.0+t.scaleUp)
}

// calculator proposes replica counts from pod usages, upstream's
// ReplicaCalculator: pods that are pending, unready while starting or
// without metrics are weighed so that they can never flip the direction of
// a scale.
type calculator struct {
	now                           time.Time
	cpuInitializationPeriod       time.Duration
	delayOfInitialReadinessStatus time.Duration
}

var errNoPods = errors.New("no pods returned by selector while calculating replica count")

// utilizationReplicas proposes a count for a target utilization (percent
// of requests). It also returns the utilization and the raw average usage.
func (c calculator) utilizationReplicas(current, target int32, metrics podMetrics, pods []*corev1.Pod, res corev1.ResourceName, container string, tol tolerances) (int32, int32, int64, error) {
	if len(pods) == 0 {
		return 0, 0, 0, errNoPods
	}
	ready, unready, missing, ignored := c.groupPods(pods, metrics, res)
	metrics = without(metrics, ignored, unready)
	if len(metrics) == 0 {
		return 0, 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	requests, err := podRequests(pods, container, res)
	if err != nil {
		return 0, 0, 0, err
	}
	ratio, utilization, raw, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, 0, 0, err
	}
	scaleUpWithUnready := len(unready) > 0 && ratio > 1.0
	if !scaleUpWithUnready && len(missing) == 0 {
		if tol.within(ratio) {
			return current, utilization, raw, nil
		}
		return int32(math.Ceil(ratio * float64(ready))), utilization, raw, nil
	}
	if len(missing) > 0 {
		switch {
		case ratio < 1.0:
			// Scaling down: a pod without metrics counts as using all it
			// asked for (or the target, above 100%).
			fallback := int64(max(100, target))
			for name := range missing {
				metrics[name] = podMetric{Value: requests[name] * fallback / 100}
			}
		case ratio > 1.0:
			for name := range missing {
				metrics[name] = podMetric{Value: 0}
			}
		}
	}
	if scaleUpWithUnready {
		for name := range unready {
			metrics[name] = podMetric{Value: 0}
		}
	}
	newRatio, _, _, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, utilization, raw, err
	}
	return settle(current, ratio, newRatio, len(metrics), tol), utilization, raw, nil
}

// valueReplicas proposes a count for a target average value per pod
// (milli-units) and returns the average usage.
func (c calculator) valueReplicas(current int32, target int64, metrics podMetrics, pods []*corev1.Pod, res corev1.ResourceName, tol tolerances) (int32, int64, error) {
	if len(pods) == 0 {
		return 0, 0, errNoPods
	}
	ready, unready, missing, ignored := c.groupPods(pods, metrics, res)
	metrics = without(metrics, ignored, unready)
	if len(metrics) == 0 {
		return 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	ratio, usage := usageRatio(metrics, target)
	scaleUpWithUnready := len(unready) > 0 && ratio > 1.0
	if !scaleUpWithUnready && len(missing) == 0 {
		if tol.within(ratio) {
			return current, usage, nil
		}
		return int32(math.Ceil(ratio * float64(ready))), usage, nil
	}
	if len(missing) > 0 {
		switch {
		case ratio < 1.0:
			for name := range missing {
				metrics[name] = podMetric{Value: target}
			}
		case ratio > 1.0:
			for name := range missing {
				metrics[name] = podMetric{Value: 0}
			}
		}
	}
	if scaleUpWithUnready {
		for name := range unready {
			metrics[name] = podMetric{Value: 0}
		}
	}
	newRatio, _ := usageRatio(metrics, target)
	return settle(current, ratio, newRatio, len(metrics), tol), usage, nil
}

// settle is the second look, with missing and unready pods filled in: no
// change when the new ratio is within tolerance or points the other way,
// or when the count would move against the ratio.
func settle(current int32, ratio, newRatio float64, n int, tol tolerances) int32 {
	if tol.within(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return current
	}
	proposed := int32(math.Ceil(newRatio * float64(n)))
	if (newRatio < 1.0 && proposed > current) || (newRatio > 1.0 && proposed < current) {
		return current
	}
	return proposed
}

// groupPods sorts pods as upstream does: deleted and failed pods are
// ignored; pending ones are unready; pods without a metric are missing;
// for CPU, a pod is unready while it is not Ready, or, in its first
// cpuInitializationPeriod, until a whole metric window has passed since it
// became Ready.
func (c calculator) groupPods(pods []*corev1.Pod, metrics podMetrics, res corev1.ResourceName) (ready int, unready, missing, ignored sets.Set[string]) {
	unready, missing, ignored = sets.New[string](), sets.New[string](), sets.New[string]()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			ignored.Insert(pod.Name)
			continue
		}
		if pod.Status.Phase == corev1.PodPending {
			unready.Insert(pod.Name)
			continue
		}
		m, ok := metrics[pod.Name]
		if !ok {
			missing.Insert(pod.Name)
			continue
		}
		if res == corev1.ResourceCPU && c.cpuUnready(pod, m) {
			unready.Insert(pod.Name)
			continue
		}
		ready++
	}
	return ready, unready, missing, ignored
}

func (c calculator) cpuUnready(pod *corev1.Pod, m podMetric) bool {
	var cond *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			cond = &pod.Status.Conditions[i]
		}
	}
	if cond == nil || pod.Status.StartTime == nil {
		return true
	}
	if pod.Status.StartTime.Add(c.cpuInitializationPeriod).After(c.now) {
		return cond.Status == corev1.ConditionFalse || m.Timestamp.Before(cond.LastTransitionTime.Add(m.Window))
	}
	return cond.Status == corev1.ConditionFalse && pod.Status.StartTime.Add(c.delayOfInitialReadinessStatus).After(cond.LastTransitionTime.Time)
}

func without(metrics podMetrics, drop ...sets.Set[string]) podMetrics {
	out := make(podMetrics, len(metrics))
	for name, m := range metrics {
		keep := true
		for _, d := range drop {
			if d.Has(name) {
				keep = false
			}
		}
		if keep {
			out[name] = m
		}
	}
	return out
}

// podRequests sums each pod's requests of res (of one container, if
// named), in milli-units; a container without a request is an error.
func podRequests(pods []*corev1.Pod, container string, res corev1.ResourceName) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, pod := range pods {
		var sum int64
		for _, ctr := range pod.Spec.Containers {
			if container != "" && ctr.Name != container {
				continue
			}
			q, ok := ctr.Resources.Requests[res]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", res, ctr.Name, pod.Name)
			}
			sum += q.MilliValue()
		}
		out[pod.Name] = sum
	}
	return out, nil
}

// utilizationRatio is upstream's GetResourceUtilizationRatio over the pods
// that have both a metric and a request.
func utilizationRatio(metrics podMetrics, requests map[string]int64, target int32) (float64, int32, int64, error) {
	var usage, requested int64
	n := 0
	for name, m := range metrics {
		req, ok := requests[name]
		if !ok {
			continue
		}
		usage += m.Value
		requested += req
		n++
	}
	if requested == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization := int32((usage * 100) / requested)
	return float64(utilization) / float64(target), utilization, usage / int64(n), nil
}

// usageRatio is upstream's GetMetricUsageRatio: the average over the target.
func usageRatio(metrics podMetrics, target int64) (float64, int64) {
	var sum int64
	for _, m := range metrics {
		sum += m.Value
	}
	avg := sum / int64(len(metrics))
	return float64(avg) / float64(target), avg
}
