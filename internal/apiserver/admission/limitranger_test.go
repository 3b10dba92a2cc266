package admission

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	podsRes = corev1.SchemeGroupVersion.WithResource("pods")
	pvcsRes = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
)

func limitRange(ns string, items ...corev1.LimitRangeItem) *corev1.LimitRange {
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: ns}, Spec: corev1.LimitRangeSpec{Limits: items}}
}

func podWith(name string, res ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	for i, r := range res {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: "busybox", Resources: r})
	}
	return p
}

func TestLimitRangerDefaults(t *testing.T) {
	lr := limitRange("ns", corev1.LimitRangeItem{
		Type:           corev1.LimitTypeContainer,
		Default:        corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("256Mi")},
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("128Mi")},
	})
	l := NewLimitRanger(newObjects(limitRangesGVR, lr), clocktesting.NewFakePassiveClock(time.Now()))
	pod := podWith("p",
		corev1.ResourceRequirements{},
		corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("200m")}},
	)
	a := &Attributes{Operation: Create, Resource: podsRes, Namespace: "ns", Name: "p", Object: pod}
	if err := l.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got := []corev1.ResourceRequirements{pod.Spec.Containers[0].Resources, pod.Spec.Containers[1].Resources}
	want := []corev1.ResourceRequirements{
		{Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("128Mi")}, Limits: corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("256Mi")}},
		{Requests: corev1.ResourceList{corev1.ResourceCPU: q("200m"), corev1.ResourceMemory: q("128Mi")}, Limits: corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("256Mi")}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	wantNote := "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; memory request for container b; cpu, memory limit for container b"
	if diff := cmp.Diff(wantNote, pod.Annotations[limitRangerAnnotation]); diff != "" {
		t.Errorf("annotation (-want +got):\n%s", diff)
	}
	if err := l.Validate(context.Background(), a); err != nil {
		t.Errorf("defaulted pod refused: %v", err)
	}
}

func TestLimitRangerValidate(t *testing.T) {
	res := func(req, lim string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{}
		if req != "" {
			r.Requests = corev1.ResourceList{corev1.ResourceCPU: q(req)}
		}
		if lim != "" {
			r.Limits = corev1.ResourceList{corev1.ResourceCPU: q(lim)}
		}
		return r
	}
	container := corev1.LimitRangeItem{
		Type:                 corev1.LimitTypeContainer,
		Min:                  corev1.ResourceList{corev1.ResourceCPU: q("100m")},
		Max:                  corev1.ResourceList{corev1.ResourceCPU: q("2")},
		MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: q("4")},
	}
	podItem := corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: corev1.ResourceList{corev1.ResourceCPU: q("3")}}
	pvcItem := corev1.LimitRangeItem{Type: corev1.LimitTypePersistentVolumeClaim, Min: corev1.ResourceList{corev1.ResourceStorage: q("1Gi")}, Max: corev1.ResourceList{corev1.ResourceStorage: q("10Gi")}}
	claim := func(size string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q(size)}}}}
	}
	tests := []struct {
		name  string
		items []corev1.LimitRangeItem
		obj   any
		want  string // "" admitted
	}{
		{"within the range", []corev1.LimitRangeItem{container}, podWith("p", res("500m", "1")), ""},
		{"below min", []corev1.LimitRangeItem{container}, podWith("p", res("50m", "100m")),
			`pods "p" is forbidden: minimum cpu usage per Container is 100m, but request is 50m`},
		{"no request with a min", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Min: corev1.ResourceList{corev1.ResourceCPU: q("100m")}}}, podWith("p", res("", "")),
			`pods "p" is forbidden: minimum cpu usage per Container is 100m.  No request is specified`},
		{"above max", []corev1.LimitRangeItem{container}, podWith("p", res("1", "3")),
			`pods "p" is forbidden: maximum cpu usage per Container is 2, but limit is 3`},
		{"no limit with a max", []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: q("2")}}}, podWith("p", res("1", "")),
			`pods "p" is forbidden: maximum cpu usage per Container is 2.  No limit is specified`},
		{"ratio too high", []corev1.LimitRangeItem{container}, podWith("p", res("200m", "2")),
			`pods "p" is forbidden: cpu max limit to request ratio per Container is 4, but provided ratio is 10.000000`},
		{"two violations", []corev1.LimitRangeItem{container}, podWith("p", res("50m", "3")),
			`pods "p" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m, maximum cpu usage per Container is 2, but limit is 3, cpu max limit to request ratio per Container is 4, but provided ratio is 60.000000]`},
		{"pod total above max", []corev1.LimitRangeItem{podItem}, podWith("p", res("1", "2"), res("1", "2")),
			`pods "p" is forbidden: maximum cpu usage per Pod is 3, but limit is 4`},
		{"claim within", []corev1.LimitRangeItem{pvcItem}, claim("5Gi"), ""},
		{"claim too big", []corev1.LimitRangeItem{pvcItem}, claim("20Gi"),
			`persistentvolumeclaims "c" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi`},
		{"claim too small", []corev1.LimitRangeItem{pvcItem}, claim("500Mi"),
			`persistentvolumeclaims "c" is forbidden: minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLimitRanger(newObjects(limitRangesGVR, limitRange("ns", tc.items...)), clocktesting.NewFakePassiveClock(time.Now()))
			a := &Attributes{Operation: Create, Resource: podsRes, Namespace: "ns"}
			switch o := tc.obj.(type) {
			case *corev1.Pod:
				a.Object, a.Name = o, o.Name
			case *corev1.PersistentVolumeClaim:
				a.Object, a.Name, a.Resource = o, o.Name, pvcsRes
			}
			got := ""
			if err := l.Validate(context.Background(), a); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLimitRangerIgnores: pod updates (containers are immutable), other
// namespaces and objects being deleted are left alone.
func TestLimitRangerIgnores(t *testing.T) {
	lr := limitRange("ns", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: corev1.ResourceList{corev1.ResourceCPU: q("1")}})
	l := NewLimitRanger(newObjects(limitRangesGVR, lr), clocktesting.NewFakePassiveClock(time.Now()))
	now := metav1.Now()
	deleting := podWith("p")
	deleting.DeletionTimestamp = &now
	for name, a := range map[string]*Attributes{
		"pod update":      {Operation: Update, Resource: podsRes, Namespace: "ns", Object: podWith("p", corev1.ResourceRequirements{}), OldObject: podWith("p")},
		"other namespace": {Operation: Create, Resource: podsRes, Namespace: "other", Object: podWith("p", corev1.ResourceRequirements{})},
		"being deleted":   {Operation: Update, Resource: pvcsRes, Namespace: "ns", Object: &corev1.PersistentVolumeClaim{}, OldObject: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}},
	} {
		if err := l.Validate(context.Background(), a); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
}
