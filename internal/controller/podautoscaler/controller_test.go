package podautoscaler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

// The controller's decisions as scenarios in upstream's shape: a fake
// clock, informers the test feeds (the target's pods follow its scale, as
// a Deployment's would), the metrics the test says, and the API actions
// and events of each sync compared with the expected ones.

var start = time.Date(2026, 7, 8, 9, 0, 0, 0, time.UTC)

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	informer informers.SharedInformerFactory
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	c        *Controller

	replicas int32  // the Deployment's scale
	usage    string // each pod's CPU usage
	noTarget bool   // the Deployment is gone
	acts     []string
}

func newFixture(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, replicas int32, usage string) *fixture {
	f := &fixture{t: t, client: fake.NewClientset(hpa), clock: clocktesting.NewFakeClock(start), recorder: record.NewFakeRecorder(100), replicas: replicas, usage: usage}
	f.client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: "apps/v1",
		APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: []string{"get", "list"}},
			{Name: "deployments/scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Namespaced: true, Verbs: []string{"get", "update"}},
		},
	}}
	f.client.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() != "" && a.GetVerb() != "list" && a.GetVerb() != "watch" { // not discovery, nor the informers
			f.acts = append(f.acts, fmt.Sprintf("%s %s", a.GetVerb(), resourceOf(a)))
		}
		return false, nil, nil
	})
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{podMetricsGVR: "PodMetricsList"})
	dyn.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.acts = append(f.acts, "get "+resourceOf(a)+" "+a.(k8stesting.GetAction).GetName())
		if f.noTarget {
			return true, nil, fmt.Errorf(`deployments.apps "web" not found`)
		}
		return true, f.scale(), nil
	})
	dyn.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		f.acts = append(f.acts, fmt.Sprintf("update %s %s replicas=%d", resourceOf(a), u.GetName(), n))
		f.replicas = int32(n)
		f.feedPods()
		return true, f.scale(), nil
	})
	dyn.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList"}}
		for i := int32(0); i < f.replicas; i++ {
			list.Items = append(list.Items, unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
				"metadata":   map[string]any{"name": fmt.Sprintf("web-%d", i), "namespace": "ns", "labels": map[string]any{"app": "web"}},
				"timestamp":  f.clock.Now().UTC().Format(time.RFC3339),
				"window":     "15s",
				"containers": []any{map[string]any{"name": "c", "usage": map[string]any{"cpu": f.usage, "memory": "10Mi"}}},
			}})
		}
		return true, list, nil
	})
	f.informer = informers.NewSharedInformerFactory(f.client, 0)
	if err := f.informer.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Add(hpa); err != nil {
		t.Fatal(err)
	}
	f.feedPods()
	ctl, err := New(context.Background(), controllercontext.Context{Client: f.client, Dynamic: dyn, Informers: f.informer, Recorder: f.recorder, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.c = ctl.(*Controller)
	return f
}

func resourceOf(a k8stesting.Action) string {
	r := a.GetResource().Resource
	if s := a.GetSubresource(); s != "" {
		r += "/" + s
	}
	return r
}

func (f *fixture) scale() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling/v1", "kind": "Scale",
		"metadata": map[string]any{"name": "web", "namespace": "ns", "resourceVersion": "1"},
		"spec":     map[string]any{"replicas": int64(f.replicas)},
		"status":   map[string]any{"replicas": int64(f.replicas), "selector": "app=web"},
	}}
}

// feedPods makes the pod informer hold the target's replicas: Running and
// Ready for ten minutes, each requesting 100m of CPU.
func (f *fixture) feedPods() {
	idx := f.informer.Core().V1().Pods().Informer().GetIndexer()
	for _, o := range idx.List() {
		_ = idx.Delete(o)
	}
	started := metav1.NewTime(f.clock.Now().Add(-10 * time.Minute))
	for i := int32(0); i < f.replicas; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "ns", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}}},
		}
		if err := idx.Add(p); err != nil {
			f.t.Fatal(err)
		}
	}
}

// step is one sync at a time after start with the pods' usage: what it must
// do (actions, events) and the status it leaves.
type step struct {
	at      time.Duration
	usage   string
	actions []string
	events  []string
	status  string
}

func (f *fixture) run(steps []step) {
	f.t.Helper()
	for _, s := range steps {
		f.clock.SetTime(start.Add(s.at))
		f.usage = s.usage
		f.acts = nil
		err := f.c.Sync(context.Background(), "ns/web")
		if err == nil || !strings.HasPrefix(err.Error(), "requeue after 15s") {
			f.t.Errorf("at %v: sync returned %v; want a requeue after the sync period", s.at, err)
		}
		if d := cmp.Diff(s.actions, f.acts); d != "" {
			f.t.Errorf("at %v: actions (-want +got):\n%s", s.at, d)
		}
		var evs []string
		for len(f.recorder.Events) > 0 {
			evs = append(evs, <-f.recorder.Events)
		}
		if d := cmp.Diff(s.events, evs); d != "" {
			f.t.Errorf("at %v: events (-want +got):\n%s", s.at, d)
		}
		hpa, err := f.client.AutoscalingV2().HorizontalPodAutoscalers("ns").Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		if d := cmp.Diff(s.status, render(hpa)); d != "" {
			f.t.Errorf("at %v: status (-want +got):\n%s", s.at, d)
		}
		// The informer sees the status the controller wrote.
		if err := f.informer.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Update(hpa); err != nil {
			f.t.Fatal(err)
		}
	}
}

// render is the status a user reads with kubectl describe hpa.
func render(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var conds []string
	for _, c := range h.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	sort.Strings(conds)
	util := "-"
	for _, m := range h.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
			util = fmt.Sprintf("%d%%", *m.Resource.Current.AverageUtilization)
		}
	}
	last := "-"
	if h.Status.LastScaleTime != nil {
		last = h.Status.LastScaleTime.Sub(start).String()
	}
	return fmt.Sprintf("current=%d desired=%d cpu=%s lastScale=%s %s", h.Status.CurrentReplicas, h.Status.DesiredReplicas, util, last, strings.Join(conds, " "))
}

func cpuHPA(mutate func(*autoscalingv2.HorizontalPodAutoscaler)) *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 1},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		},
	}
	if mutate != nil {
		mutate(h)
	}
	return h
}

var (
	syncActions  = []string{"get deployments/scale web", "update horizontalpodautoscalers/status"}
	scaleActions = func(n int) []string {
		return []string{"get deployments/scale web", fmt.Sprintf("update deployments/scale web replicas=%d", n), "update horizontalpodautoscalers/status"}
	}
)

// TestScenarioWithoutBehavior: a busy Deployment at most doubles (at
// least to four) per sync. Without a behavior, upstream keeps the highest
// unlimited recommendation of the last five minutes and applies it both
// ways: the 8 wanted at first is reached at the next sync even though the
// load has eased (with upstream's empty reason, no metric being above
// target), and the idle Deployment is held at 8 until that recommendation
// leaves the window, then steps down as the later ones leave it.
func TestScenarioWithoutBehavior(t *testing.T) {
	f := newFixture(t, cpuHPA(nil), 2, "200m")
	f.run([]step{{
		at: 0, usage: "200m", // 200% of the request against 50%: 8 wanted, 4 allowed
		actions: scaleActions(4),
		events:  []string{"Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target"},
		status:  "current=2 desired=4 cpu=200% lastScale=0s AbleToScale=True/SucceededRescale ScalingActive=True/ValidMetricFound ScalingLimited=True/ScaleUpLimit",
	}, {
		at: 15 * time.Second, usage: "52m", // 52%: within the 10% tolerance, 4 wanted; 8 still recommended
		actions: scaleActions(8),
		events:  []string{"Normal SuccessfulRescale New size: 8; reason: "},
		status:  "current=4 desired=8 cpu=52% lastScale=15s AbleToScale=True/SucceededRescale ScalingActive=True/ValidMetricFound ScalingLimited=False/DesiredWithinRange",
	}, {
		at: 30 * time.Second, usage: "5m", // idle: 1 wanted, 8 held
		actions: syncActions,
		status:  "current=8 desired=8 cpu=5% lastScale=15s AbleToScale=True/ScaleDownStabilized ScalingActive=True/ValidMetricFound ScalingLimited=False/DesiredWithinRange",
	}, {
		at: 5*time.Minute + 10*time.Second, usage: "5m", // the 8 of 0s has left the window, the 4 of 15s has not
		actions: scaleActions(4),
		events:  []string{"Normal SuccessfulRescale New size: 4; reason: All metrics below target"},
		status:  "current=8 desired=4 cpu=5% lastScale=5m10s AbleToScale=True/SucceededRescale ScalingActive=True/ValidMetricFound ScalingLimited=False/DesiredWithinRange",
	}, {
		at: 5*time.Minute + 20*time.Second, usage: "5m",
		actions: scaleActions(1),
		events:  []string{"Normal SuccessfulRescale New size: 1; reason: All metrics below target"},
		status:  "current=4 desired=1 cpu=5% lastScale=5m20s AbleToScale=True/SucceededRescale ScalingActive=True/ValidMetricFound ScalingLimited=False/DesiredWithinRange",
	}, {
		at: 5*time.Minute + 35*time.Second, usage: "5m", // at minReplicas: nothing to do
		actions: syncActions,
		status:  "current=1 desired=1 cpu=5% lastScale=5m20s AbleToScale=True/ReadyForNewScale ScalingActive=True/ValidMetricFound ScalingLimited=False/DesiredWithinRange",
	}})
}

// TestScenarioBehaviorPolicies: behavior's policies pace the scale:
// up by at most 2 pods a minute, down by at most 1 pod a minute with no
// stabilization window.
func TestScenarioBehaviorPolicies(t *testing.T) {
	f := newFixture(t, cpuHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0),
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 60}}},
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0),
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}},
		}
	}), 2, "200m")
	limitedUp := "AbleToScale=True/SucceededRescale ScalingActive=True/ValidMetricFound ScalingLimited=True/ScaleUpLimit"
	limitedDown := "AbleToScale=True/SucceededRescale ScalingActive=True/ValidMetricFound ScalingLimited=True/ScaleDownLimit"
	f.run([]step{{
		at: 0, usage: "200m",
		actions: scaleActions(4),
		events:  []string{"Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target"},
		status:  "current=2 desired=4 cpu=200% lastScale=0s " + limitedUp,
	}, {
		at: 15 * time.Second, usage: "200m", // 2 pods already added this minute
		actions: syncActions,
		status:  "current=4 desired=4 cpu=200% lastScale=0s AbleToScale=True/ReadyForNewScale ScalingActive=True/ValidMetricFound ScalingLimited=True/ScaleUpLimit",
	}, {
		at: 61 * time.Second, usage: "200m",
		actions: scaleActions(6),
		events:  []string{"Normal SuccessfulRescale New size: 6; reason: cpu resource utilization (percentage of request) above target"},
		status:  "current=4 desired=6 cpu=200% lastScale=1m1s " + limitedUp,
	}, {
		// More than a minute after the last scale-up (a scale-up within
		// the period would count against the scale-down's start, as
		// upstream's periodStartReplicas does).
		at: 2*time.Minute + 5*time.Second, usage: "5m",
		actions: scaleActions(5),
		events:  []string{"Normal SuccessfulRescale New size: 5; reason: All metrics below target"},
		status:  "current=6 desired=5 cpu=5% lastScale=2m5s " + limitedDown,
	}, {
		at: 2*time.Minute + 30*time.Second, usage: "5m",
		actions: syncActions,
		status:  "current=5 desired=5 cpu=5% lastScale=2m5s AbleToScale=True/ReadyForNewScale ScalingActive=True/ValidMetricFound ScalingLimited=True/ScaleDownLimit",
	}, {
		at: 3*time.Minute + 10*time.Second, usage: "5m",
		actions: scaleActions(4),
		events:  []string{"Normal SuccessfulRescale New size: 4; reason: All metrics below target"},
		status:  "current=5 desired=4 cpu=5% lastScale=3m10s " + limitedDown,
	}})
}

// TestScenarioBadTarget: a target that is gone is an event and a False
// AbleToScale condition, looked at again one period later, never a loop.
func TestScenarioBadTarget(t *testing.T) {
	f := newFixture(t, cpuHPA(nil), 2, "200m")
	f.noTarget = true
	f.run([]step{{
		at: 0, usage: "200m",
		actions: syncActions,
		events:  []string{`Warning FailedGetScale deployments.apps "web" not found`},
		status:  "current=0 desired=0 cpu=- lastScale=- AbleToScale=False/FailedGetScale",
	}, {
		at: 15 * time.Second, usage: "200m",
		actions: syncActions[:1],
		events:  []string{`Warning FailedGetScale deployments.apps "web" not found`},
		status:  "current=0 desired=0 cpu=- lastScale=- AbleToScale=False/FailedGetScale",
	}})
}
