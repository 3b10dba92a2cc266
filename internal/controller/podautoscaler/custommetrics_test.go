package podautoscaler

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	"k8s.io/utils/ptr"
)

// fakeMetrics answers the custom and external metrics APIs: pod values by
// pod name, one object value, external series values.
type fakeMetrics struct {
	pods     map[string]string
	object   string
	external []string
	err      error
}

func (f *fakeMetrics) RootScopedMetrics() customclient.MetricsInterface { return f }
func (f *fakeMetrics) NamespacedMetrics(string) customclient.MetricsInterface {
	return f
}

func (f *fakeMetrics) GetForObject(gk schema.GroupKind, name, metric string, _ labels.Selector) (*cmv1beta2.MetricValue, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &cmv1beta2.MetricValue{Value: resource.MustParse(f.object)}, nil
}

func (f *fakeMetrics) GetForObjects(gk schema.GroupKind, _ labels.Selector, metric string, _ labels.Selector) (*cmv1beta2.MetricValueList, error) {
	if f.err != nil {
		return nil, f.err
	}
	list := &cmv1beta2.MetricValueList{}
	for name, v := range f.pods {
		list.Items = append(list.Items, cmv1beta2.MetricValue{DescribedObject: corev1.ObjectReference{Name: name}, Value: resource.MustParse(v)})
	}
	return list, nil
}

type fakeExternal struct{ f *fakeMetrics }

func (e fakeExternal) NamespacedMetrics(string) externalclient.MetricsInterface { return e }
func (e fakeExternal) List(metric string, _ labels.Selector) (*emv1beta1.ExternalMetricValueList, error) {
	if e.f.err != nil {
		return nil, e.f.err
	}
	list := &emv1beta1.ExternalMetricValueList{}
	for _, v := range e.f.external {
		list.Items = append(list.Items, emv1beta1.ExternalMetricValue{MetricName: metric, Value: resource.MustParse(v)})
	}
	return list, nil
}

func readyPod(name string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

// TestCustomAndExternalMetrics re-states upstream's replica calculator
// cases for Pods, Object and External metrics.
func TestCustomAndExternalMetrics(t *testing.T) {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	three := []*corev1.Pod{readyPod("a", corev1.PodRunning), readyPod("b", corev1.PodRunning), readyPod("c", corev1.PodRunning)}
	podsSpec := func(target string) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q(target)}}}
	}
	objectSpec := func(target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "web"},
			Metric:          autoscalingv2.MetricIdentifier{Name: "rps"}, Target: target}}
	}
	externalSpec := func(target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: target}}
	}
	tests := []struct {
		name             string
		spec             autoscalingv2.MetricSpec
		metrics          fakeMetrics
		pods             []*corev1.Pod
		specN, statusN   int32
		want             int32
		wantName, wantV  string
		wantErr, wantWhy string
	}{
		{name: "pods scale up", spec: podsSpec("15"), metrics: fakeMetrics{pods: map[string]string{"a": "20", "b": "10", "c": "30"}},
			pods: three, specN: 3, statusN: 3, want: 4, wantName: "pods metric qps", wantV: "20"},
		{name: "pods scale down", spec: podsSpec("20"), metrics: fakeMetrics{pods: map[string]string{"a": "12", "b": "12", "c": "12"}},
			pods: three, specN: 3, statusN: 3, want: 2, wantName: "pods metric qps", wantV: "12"},
		{name: "pods within tolerance", spec: podsSpec("20"), metrics: fakeMetrics{pods: map[string]string{"a": "20", "b": "21", "c": "21"}},
			pods: three, specN: 3, statusN: 3, want: 3, wantName: "pods metric qps", wantV: "20666m"},
		{name: "pods: a pending pod counts as zero on a scale up", spec: podsSpec("100"), metrics: fakeMetrics{pods: map[string]string{"a": "300", "b": "300"}},
			pods:  []*corev1.Pod{readyPod("a", corev1.PodRunning), readyPod("b", corev1.PodRunning), readyPod("c", corev1.PodPending)},
			specN: 3, statusN: 3, want: 6, wantName: "pods metric qps", wantV: "300"},
		{name: "pods: no values", spec: podsSpec("100"), metrics: fakeMetrics{pods: map[string]string{}}, pods: three, specN: 3, statusN: 3,
			wantErr: "failed to get pods metric value: unable to get metric qps: no metrics returned from custom metrics API", wantWhy: "FailedGetPodsMetric"},
		{name: "object value", spec: objectSpec(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("30")}), metrics: fakeMetrics{object: "40"},
			pods: three, specN: 3, statusN: 3, want: 4, wantName: "Ingress metric rps", wantV: "40"},
		{name: "object average value", spec: objectSpec(autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("2")}),
			metrics: fakeMetrics{object: "9"}, pods: three, specN: 3, statusN: 3, want: 5, wantName: "external metric rps(nil)", wantV: "3"},
		{name: "object unreachable", spec: objectSpec(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("30")}),
			metrics: fakeMetrics{err: errors.New("the server is currently unable to handle the request")}, pods: three, specN: 3, statusN: 3,
			wantErr: "failed to get object metric value: unable to get metric rps on Ingress default/web: unable to fetch metrics from custom metrics API: the server is currently unable to handle the request", wantWhy: "FailedGetObjectMetric"},
		{name: "external value", spec: externalSpec(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("5")}),
			metrics: fakeMetrics{external: []string{"4", "6"}}, pods: three[:1], specN: 1, statusN: 1, want: 2, wantName: "external metric queue(nil)", wantV: "10"},
		{name: "external value within tolerance", spec: externalSpec(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("10")}),
			metrics: fakeMetrics{external: []string{"10"}}, pods: three[:1], specN: 1, statusN: 1, want: 1, wantName: "external metric queue(nil)", wantV: "10"},
		{name: "external average value", spec: externalSpec(autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("2")}),
			metrics: fakeMetrics{external: []string{"10"}}, pods: three[:2], specN: 2, statusN: 2, want: 5, wantName: "external metric queue(nil)", wantV: "5"},
		{name: "external: no series", spec: externalSpec(autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("2")}),
			metrics: fakeMetrics{}, pods: three, specN: 3, statusN: 3,
			wantErr: "failed to get queue external metric value: failed to get queue external metric: unable to get external metric default/queue/: no metrics returned from external metrics API", wantWhy: "FailedGetExternalMetric"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.metrics
			c := &Controller{custom: &f, external: fakeExternal{&f}, recorder: &record.FakeRecorder{}}
			hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "h"}}
			scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: tc.specN}, Status: autoscalingv1.ScaleStatus{Replicas: tc.statusN}}
			var status autoscalingv2.MetricStatus
			got, name, cond, err := c.computeMetric(hpa, tc.spec, scale, labels.Everything(), tc.pods, calculator{}, tolerances{0.1, 0.1}, nil, &status)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || cond.Reason != tc.wantWhy {
					t.Fatalf("error %v (condition %s), want %q (%s)", err, cond.Reason, tc.wantErr, tc.wantWhy)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var current *resource.Quantity
			switch {
			case status.Pods != nil:
				current = status.Pods.Current.AverageValue
			case status.Object != nil && status.Object.Current.Value != nil:
				current = status.Object.Current.Value
			case status.Object != nil:
				current = status.Object.Current.AverageValue
			case status.External != nil && status.External.Current.Value != nil:
				current = status.External.Current.Value
			case status.External != nil:
				current = status.External.Current.AverageValue
			}
			if diff := cmp.Diff([]string{tc.wantName, tc.wantV}, []string{name, current.String()}); diff != "" || got != tc.want {
				t.Errorf("replicas %d (want %d); name, current (-want +got):\n%s", got, tc.want, diff)
			}
		})
	}
}
