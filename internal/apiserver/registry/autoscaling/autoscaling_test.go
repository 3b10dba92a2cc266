package autoscaling

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func hpa(mutate ...func(*autoscalingv2.HorizontalPodAutoscaler)) *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    5,
		},
	}
	for _, m := range mutate {
		m(h)
	}
	return h
}

func TestDefaults(t *testing.T) {
	h := hpa(func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(60))},
		}
		h.Status.CurrentReplicas = 3
	})
	Strategy{}.PrepareForCreate(ctx, h)
	want := autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: h.Spec.ScaleTargetRef,
		MinReplicas:    ptr(int32(1)),
		MaxReplicas:    5,
		Metrics:        []autoscalingv2.MetricSpec{cpuMetric(80)},
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: scaleUpRules(),
			ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr(int32(60)),
				SelectPolicy:               ptr(autoscalingv2.MaxChangePolicySelect),
				Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
			},
		},
	}
	if diff := cmp.Diff(want, h.Spec); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if h.Status.CurrentReplicas != 0 {
		t.Errorf("status kept on create: %+v", h.Status)
	}
	if h.Spec.Behavior.ScaleUp.Policies[0].Type != autoscalingv2.PodsScalingPolicy || h.Spec.Behavior.ScaleUp.Policies[0].Value != 4 {
		t.Errorf("scale up policies %+v", h.Spec.Behavior.ScaleUp.Policies)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*autoscalingv2.HorizontalPodAutoscaler)
		want   []string
	}{
		{name: "valid"},
		{name: "min zero", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr(int32(0)) },
			want: []string{"spec.minReplicas: Invalid value"}},
		{name: "max below min", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr(int32(7)) },
			want: []string{"spec.maxReplicas: Invalid value"}},
		{name: "no target kind", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Kind = "" },
			want: []string{"spec.scaleTargetRef.kind: Required value"}},
		{name: "zero utilization", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Resource.Target.AverageUtilization = ptr(int32(0))
		}, want: []string{"spec.metrics[0].resource.target.averageUtilization: Invalid value"}},
		{name: "pods without average", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType},
			}}}
		}, want: []string{"spec.metrics[0].pods.target.averageValue: Required value"}},
		{name: "type without source", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType}}
		}, want: []string{"spec.metrics[0].external: Required value"}},
		{name: "bad policy", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 0, PeriodSeconds: 3600}},
			}}
		}, want: []string{"spec.behavior.scaleUp.policies[0].value: Invalid value", "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := hpa()
			Default(h)
			if tc.mutate != nil {
				tc.mutate(h)
			}
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, h))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusRules(t *testing.T) {
	old := hpa()
	Strategy{}.PrepareForCreate(ctx, old)
	old.Status.CurrentReplicas = 2

	upd := old.DeepCopy()
	upd.Spec.MaxReplicas = 9
	upd.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
	Strategy{}.PrepareForUpdate(ctx, upd, old)
	if upd.Status.CurrentReplicas != 2 || upd.Generation != 0 {
		t.Errorf("update: status %+v generation %d", upd.Status, upd.Generation)
	}

	st := old.DeepCopy()
	st.Spec.MaxReplicas = 9
	st.Status.DesiredReplicas = -1
	Strategy{}.PrepareForStatusUpdate(ctx, st, old)
	if st.Spec.MaxReplicas != 5 {
		t.Errorf("status update changed the spec")
	}
	if diff := cmp.Diff([]string{"status.desiredReplicas: Invalid value"}, errStrings(Strategy{}.ValidateStatusUpdate(ctx, st, old))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRoundTripV2ThroughV1(t *testing.T) {
	tests := []struct {
		name string
		in   *autoscalingv2.HorizontalPodAutoscaler
	}{
		{name: "cpu only", in: hpa(func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.MinReplicas = ptr(int32(2))
			h.Spec.Metrics = []autoscalingv2.MetricSpec{cpuMetric(60)}
			h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 3, CurrentMetrics: []autoscalingv2.MetricStatus{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{
					AverageUtilization: ptr(int32(75)), AverageValue: q("150m"),
				}},
			}}}
		})},
		{name: "every metric kind, conditions and behavior", in: hpa(func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Annotations = map[string]string{"team": "web"}
			h.Spec.Metrics = []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("500Mi")}}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "qps", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("10")}}},
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
					DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"},
					Metric:          autoscalingv2.MetricIdentifier{Name: "hits"},
					Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("2k")}}},
				{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
					Name: corev1.ResourceCPU, Container: "app",
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(70))}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("30")}}},
				cpuMetric(50),
			}
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: scaleUpRules(), ScaleDown: scaleDownRules()}
			h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
				ObservedGeneration: ptr(int64(4)),
				CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
					Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Current: autoscalingv2.MetricValueStatus{AverageValue: q("7")}}}},
				Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{
					Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale",
					LastTransitionTime: metav1.Date(2024, 1, 2, 3, 4, 5, 0, metav1.Now().Location()),
				}},
			}
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v1, err := ToV1(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ToV2(v1)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.in, back); diff != "" {
				t.Errorf("v2 -> v1 -> v2 (-want +got):\n%s", diff)
			}
		})
	}
}

func TestV1ToV2(t *testing.T) {
	tests := []struct {
		name        string
		in          autoscalingv1.HorizontalPodAutoscalerSpec
		wantMetrics []autoscalingv2.MetricSpec
	}{
		{name: "cpu target", in: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr(int32(50))},
			wantMetrics: []autoscalingv2.MetricSpec{cpuMetric(50)}},
		{name: "no target gets the default", in: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3},
			wantMetrics: []autoscalingv2.MetricSpec{cpuMetric(80)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v2, err := ToV2(&autoscalingv1.HorizontalPodAutoscaler{Spec: tc.in})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantMetrics, v2.Spec.Metrics); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			v1, err := ToV1(v2)
			if err != nil {
				t.Fatal(err)
			}
			if len(v1.Annotations) != 0 {
				t.Errorf("cpu-only HPA got annotations %v", v1.Annotations)
			}
		})
	}
	if _, err := ToV2(&autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{MetricSpecsAnnotation: "{not json"}}}); err == nil {
		t.Errorf("bad annotation decoded without error")
	}
}

func TestV1StrategyAndStorage(t *testing.T) {
	v1 := &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
			MaxReplicas:    4,
		},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{CurrentReplicas: 9},
	}
	V1Strategy{}.PrepareForCreate(ctx, v1)
	if *v1.Spec.MinReplicas != 1 || *v1.Spec.TargetCPUUtilizationPercentage != 80 || v1.Status.CurrentReplicas != 0 {
		t.Errorf("create: %+v", v1)
	}
	bad := v1.DeepCopy()
	bad.Spec.MaxReplicas = 0
	if diff := cmp.Diff([]string{"spec.maxReplicas: Invalid value", "spec.maxReplicas: Invalid value"}, errStrings(V1Strategy{}.Validate(ctx, bad))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	st := StoredAsV2()
	stored, err := st.ToStored(v1)
	if err != nil {
		t.Fatal(err)
	}
	v2 := stored.(*autoscalingv2.HorizontalPodAutoscaler)
	v2.Spec.Metrics = append(v2.Spec.Metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("1")}}})
	var read autoscalingv1.HorizontalPodAutoscaler
	if err := st.FromStored(v2, &read); err != nil {
		t.Fatal(err)
	}
	if *read.Spec.TargetCPUUtilizationPercentage != 80 || read.Annotations[MetricSpecsAnnotation] == "" {
		t.Errorf("read back: %+v", read)
	}

	row, err := V1Strategy{}.TableRow(&read)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"web", "Deployment/web", "<unknown>/1, cpu: <unknown>/80%", "1", int64(4), int64(0)}, row[:6]); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestFormatMetrics(t *testing.T) {
	specs := []autoscalingv2.MetricSpec{
		cpuMetric(80),
		{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("1Gi")}}},
		{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "q"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("3")}}},
	}
	statuses := []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
		Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(int32(20))}}}}
	tests := []struct {
		name  string
		specs []autoscalingv2.MetricSpec
		want  string
	}{
		{name: "none", want: "<none>"},
		{name: "one", specs: specs[:1], want: "cpu: 20%/80%"},
		{name: "more than two", specs: specs, want: "cpu: 20%/80%, memory: <unknown>/1Gi + 1 more..."},
		{name: "external avg", specs: specs[2:], want: "<unknown>/3 (avg)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FormatMetrics(tc.specs, statuses); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
