package admission

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func class(name string, created time.Time, isDefault bool) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}, Provisioner: "p"}
	if isDefault {
		c.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return c
}

func TestDefaultStorageClass(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := newObjects(storageClassesGVR, class("old-default", t0, true), class("new-default", t0.Add(time.Hour), true), class("plain", t0.Add(2*time.Hour), false))
	tests := []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want *string
	}{
		{"no class: the newest default", &corev1.PersistentVolumeClaim{}, ptrTo("new-default")},
		{"a class is kept", &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptrTo("plain")}}, ptrTo("plain")},
		{"an empty class means none", &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptrTo("")}}, ptrTo("")},
		{"the beta annotation counts as a class", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.BetaStorageClassAnnotation: "x"}}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Attributes{Operation: Create, Resource: pvcsRes, Namespace: "ns", Object: tc.pvc}
			if err := NewDefaultStorageClass(r).Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.pvc.Spec.StorageClassName); diff != "" {
				t.Errorf("class (-want +got):\n%s", diff)
			}
		})
	}
	none := &corev1.PersistentVolumeClaim{}
	if err := NewDefaultStorageClass(newObjects(storageClassesGVR, class("plain", t0, false))).Admit(context.Background(), &Attributes{Operation: Create, Resource: pvcsRes, Object: none}); err != nil || none.Spec.StorageClassName != nil {
		t.Errorf("no default class: got %v, %v; want the claim unchanged", err, none.Spec.StorageClassName)
	}
}

func TestStorageObjectInUseProtection(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"other"}}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{PVProtectionFinalizer}}}
	p := StorageObjectInUseProtection{}
	for _, a := range []*Attributes{
		{Operation: Create, Resource: pvcsRes, Object: pvc},
		{Operation: Create, Resource: corev1.SchemeGroupVersion.WithResource("persistentvolumes"), Object: pv},
	} {
		if err := p.Admit(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"other", PVCProtectionFinalizer}, pvc.Finalizers); diff != "" {
		t.Errorf("claim finalizers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{PVProtectionFinalizer}, pv.Finalizers); diff != "" {
		t.Errorf("volume finalizers (-want +got):\n%s", diff)
	}
}

func TestDefaultIngressClass(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ic := func(name string, created time.Time, isDefault bool) *networkingv1.IngressClass {
		c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
		if isDefault {
			c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
		}
		return c
	}
	r := newObjects(ingressClassesGVR, ic("a", t0, true), ic("b", t0, true), ic("c", t0.Add(-time.Hour), false))
	ingresses := networkingv1.SchemeGroupVersion.WithResource("ingresses")
	for name, tc := range map[string]struct {
		ing  *networkingv1.Ingress
		want *string
	}{
		"defaulted (same age: by name)": {&networkingv1.Ingress{}, ptrTo("a")},
		"annotation kept":               {&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"kubernetes.io/ingress.class": "nginx"}}}, nil},
		"class kept":                    {&networkingv1.Ingress{Spec: networkingv1.IngressSpec{IngressClassName: ptrTo("c")}}, ptrTo("c")},
	} {
		if err := NewDefaultIngressClass(r).Admit(context.Background(), &Attributes{Operation: Create, Resource: ingresses, Object: tc.ing}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, tc.ing.Spec.IngressClassName); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestRuntimeClass(t *testing.T) {
	overhead := corev1.ResourceList{corev1.ResourceCPU: q("100m")}
	r := newObjects(runtimeClassesGVR,
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata",
			Overhead: &nodev1.Overhead{PodFixed: overhead},
			Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "kata"},
				Tolerations: []corev1.Toleration{{Key: "kata", Operator: corev1.TolerationOpExists}}}},
	)
	rc := NewRuntimeClass(r)
	pod := func(class string, sel map[string]string, oh corev1.ResourceList) *corev1.Pod {
		p := podWith("p", corev1.ResourceRequirements{})
		if class != "" {
			p.Spec.RuntimeClassName = ptrTo(class)
		}
		p.Spec.NodeSelector, p.Spec.Overhead = sel, oh
		return p
	}
	run := func(p *corev1.Pod) string {
		a := &Attributes{Operation: Create, Resource: podsRes, Namespace: "ns", Name: "p", Object: p}
		if err := rc.Admit(context.Background(), a); err != nil {
			return err.Error()
		}
		if err := rc.Validate(context.Background(), a); err != nil {
			return err.Error()
		}
		return ""
	}
	ok := pod("kata", map[string]string{"zone": "a"}, nil)
	if err := run(ok); err != "" {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"zone": "a", "runtime": "kata"}, ok.Spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	if !cmp.Equal(overhead, ok.Spec.Overhead) || len(ok.Spec.Tolerations) != 1 {
		t.Errorf("overhead %v, tolerations %v", ok.Spec.Overhead, ok.Spec.Tolerations)
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"missing class":      {pod("gvisor", nil, nil), `pods "p" is forbidden: pod rejected: RuntimeClass "gvisor" not found`},
		"selector conflict":  {pod("kata", map[string]string{"runtime": "runc"}, nil), `pods "p" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[runtime] = kata; pod.spec.nodeSelector[runtime] = runc`},
		"different overhead": {pod("kata", nil, corev1.ResourceList{corev1.ResourceCPU: q("1")}), `pods "p" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead`},
		"overhead, no class": {pod("", nil, overhead), `pods "p" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`},
	} {
		if got := run(tc.pod); got != tc.want {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
}
