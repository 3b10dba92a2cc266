package integration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// testEventsBothGroups: core/v1 and events.k8s.io/v1 Events are the same
// objects, served from one watch cache: an Event written through either
// group is listed and watched through the other, in that group's shape,
// with that group's field selectors, at the same resourceVersions. Both
// wire formats, since each keeps its own cached encodings.
func testEventsBothGroups(t *testing.T, c *cluster) {
	protoCfg := rest.CopyConfig(c.Config)
	protoCfg.ContentType = "application/vnd.kubernetes.protobuf"
	for _, tc := range []struct {
		name string
		cs   kubernetes.Interface
	}{{"json", c.Clientset()}, {"protobuf", kubernetes.NewForConfigOrDie(protoCfg)}} {
		t.Run(tc.name, func(t *testing.T) { eventsBothGroups(t, c, tc.cs) })
	}
}

func eventsBothGroups(t *testing.T, c *cluster, cs kubernetes.Interface) {
	ns := newNamespace(t, c.Clientset())
	ctx := testCtx(t, 30*time.Second)
	core, events := cs.CoreV1().Events(ns), cs.EventsV1().Events(ns)
	l, err := core.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	from := l.ResourceVersion
	watchFrom := func(w watch.Interface, err error) watch.Interface {
		t.Helper()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	// Each watch selects one of the two Events, by the other group's
	// names for the same field.
	wEventsA := watchFrom(events.Watch(ctx, metav1.ListOptions{ResourceVersion: from, FieldSelector: "regarding.name=pod-a"}))
	wCoreB := watchFrom(core.Watch(ctx, metav1.ListOptions{ResourceVersion: from, FieldSelector: "involvedObject.name=pod-b"}))
	wEventsAll := watchFrom(events.Watch(ctx, metav1.ListOptions{ResourceVersion: from}))

	now := metav1.NewTime(time.Now().Truncate(time.Second))
	a, err := core.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "a"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-a", APIVersion: "v1"},
		Reason:         "Scheduled", Message: "assigned pod-a", Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "default-scheduler"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create core event: %v", err)
	}
	b, err := events.Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "b"},
		EventTime:  metav1.NewMicroTime(time.Now()),
		Regarding:  corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-b", APIVersion: "v1"},
		Reason:     "Pulled", Note: "pulled pod-b's image", Type: corev1.EventTypeNormal, Action: "Pull",
		ReportingController: "example.com/puller", ReportingInstance: "puller-1",
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create events.k8s.io event: %v", err)
	}

	// The watches see each Event in their own group's shape.
	got := nextEvent(t, wEventsA)
	if ev, ok := got.Object.(*eventsv1.Event); !ok || got.Type != watch.Added || ev.Name != "a" || ev.ResourceVersion != a.ResourceVersion ||
		ev.Regarding.Name != "pod-a" || ev.Note != "assigned pod-a" || ev.DeprecatedSource.Component != "default-scheduler" {
		t.Errorf("events.k8s.io watch of regarding.name=pod-a: %s %#v", got.Type, got.Object)
	}
	got = nextEvent(t, wCoreB)
	if ev, ok := got.Object.(*corev1.Event); !ok || got.Type != watch.Added || ev.Name != "b" || ev.ResourceVersion != b.ResourceVersion ||
		ev.InvolvedObject.Name != "pod-b" || ev.Message != "pulled pod-b's image" || ev.ReportingController != "example.com/puller" {
		t.Errorf("core watch of involvedObject.name=pod-b: %s %#v", got.Type, got.Object)
	}

	// Lists, from the cache (resourceVersion 0 and consistent) and from
	// etcd (a limit), with each group's field selectors.
	for _, opts := range []metav1.ListOptions{{ResourceVersion: "0"}, {}, {Limit: 10}} {
		for _, tc := range []struct {
			selector string
			want     []string
		}{
			{"regarding.name=pod-a", []string{"a"}},
			{"regarding.kind=Pod,reason=Pulled", []string{"b"}},
			{"reportingController=example.com/puller", []string{"b"}},
			{"type=Normal", []string{"a", "b"}},
			{"regarding.name=pod-c", nil},
		} {
			o := opts
			o.FieldSelector = tc.selector
			el, err := events.List(ctx, o)
			if err != nil {
				t.Fatalf("events.k8s.io list %q: %v", tc.selector, err)
			}
			var names []string
			for _, ev := range el.Items {
				names = append(names, ev.Name)
				if ev.Name == "a" && (ev.Note != "assigned pod-a" || ev.Regarding.Name != "pod-a" || ev.ResourceVersion != a.ResourceVersion) {
					t.Errorf("events.k8s.io list: core event a as %+v", ev)
				}
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("events.k8s.io list %+v (-want +got):\n%s", o, diff)
			}
		}
		for _, tc := range []struct {
			selector string
			want     []string
		}{
			{"involvedObject.name=pod-b", []string{"b"}},
			{"reportingComponent=example.com/puller", []string{"b"}},
			{"source=default-scheduler", []string{"a"}},
			{"involvedObject.kind=Pod", []string{"a", "b"}},
		} {
			o := opts
			o.FieldSelector = tc.selector
			cl, err := core.List(ctx, o)
			if err != nil {
				t.Fatalf("core list %q: %v", tc.selector, err)
			}
			var names []string
			for _, ev := range cl.Items {
				names = append(names, ev.Name)
				if ev.Name == "b" && (ev.Message != "pulled pod-b's image" || ev.InvolvedObject.Name != "pod-b" || ev.ResourceVersion != b.ResourceVersion) {
					t.Errorf("core list: events.k8s.io event b as %+v", ev)
				}
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("core list %+v (-want +got):\n%s", o, diff)
			}
		}
	}
	// The other group's names are not selectable, as upstream.
	if _, err := events.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pod-a"}); err == nil {
		t.Error("events.k8s.io list by involvedObject.name: no error, want 400")
	}

	// An update through events.k8s.io and a delete through core reach the
	// events.k8s.io watch, in order, at the writes' resourceVersions.
	ea, err := events.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ea.Labels = map[string]string{"seen": "yes"}
	ea, err = events.Update(ctx, ea, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update through events.k8s.io: %v", err)
	}
	if err := core.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []watchRecord{{watch.Added, "a", a.ResourceVersion}, {watch.Added, "b", b.ResourceVersion}, {watch.Modified, "a", ea.ResourceVersion}, {watch.Deleted, "b", ""}}
	records := readEvents(t, wEventsAll, len(want), 10*time.Second)
	if len(records) == len(want) {
		records[3].RV = ""
	}
	if diff := cmp.Diff(want, records); diff != "" {
		t.Errorf("events.k8s.io watch of all (-want +got):\n%s", diff)
	}
	ca, err := core.List(ctx, metav1.ListOptions{LabelSelector: "seen=yes", ResourceVersion: "0"})
	if err != nil || len(ca.Items) != 1 || ca.Items[0].ResourceVersion != ea.ResourceVersion {
		t.Errorf("core list of the label set through events.k8s.io: %v %+v", err, ca)
	}
}

// testHPABothVersions: an autoscaling/v2 HPA is listed and watched
// through autoscaling/v1 (one cache serves both).
func testHPABothVersions(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	v1, v2 := cs.AutoscalingV1().HorizontalPodAutoscalers(ns), cs.AutoscalingV2().HorizontalPodAutoscalers(ns)
	l, err := v1.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := v1.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, FieldSelector: "metadata.name=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	h, err := v2.Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    4,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(70))},
			}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := nextEvent(t, w)
	if h1, ok := got.Object.(*autoscalingv1.HorizontalPodAutoscaler); !ok || got.Type != watch.Added || h1.ResourceVersion != h.ResourceVersion ||
		h1.Spec.TargetCPUUtilizationPercentage == nil || *h1.Spec.TargetCPUUtilizationPercentage != 70 {
		t.Errorf("autoscaling/v1 watch: %s %#v", got.Type, got.Object)
	}
	for _, rv := range []string{"0", ""} {
		hl, err := v1.List(ctx, metav1.ListOptions{ResourceVersion: rv, FieldSelector: "metadata.name=web"})
		if err != nil || len(hl.Items) != 1 || hl.Items[0].Spec.MaxReplicas != 4 || hl.Items[0].Spec.TargetCPUUtilizationPercentage == nil ||
			*hl.Items[0].Spec.TargetCPUUtilizationPercentage != 70 || hl.Items[0].APIVersion != "" && hl.Items[0].APIVersion != "autoscaling/v1" {
			t.Errorf("autoscaling/v1 list (rv %q): %v %+v", rv, err, hl)
		}
	}
}

// nextEvent is the watch's next event other than a bookmark.
func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			if ev.Type != watch.Bookmark {
				return ev
			}
		case <-timeout:
			t.Fatal("no watch event in 10s")
		}
	}
}
