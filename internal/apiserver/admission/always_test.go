package admission

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAlwaysPullImages(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	pod := func(policy corev1.PullPolicy, images ...string) *corev1.Pod {
		p := &corev1.Pod{}
		for _, img := range images {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Image: img, ImagePullPolicy: policy})
		}
		p.Spec.InitContainers = []corev1.Container{{Image: "init", ImagePullPolicy: policy}}
		return p
	}
	policies := func(p *corev1.Pod) []corev1.PullPolicy {
		var out []corev1.PullPolicy
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			out = append(out, c.ImagePullPolicy)
		}
		return out
	}
	tests := []struct {
		name    string
		a       *Attributes
		want    []corev1.PullPolicy
		wantErr string
	}{
		{name: "create", a: &Attributes{Operation: Create, Resource: pods, Object: pod(corev1.PullIfNotPresent, "a", "b")},
			want: []corev1.PullPolicy{"Always", "Always", "Always"}},
		{name: "update with a new image", a: &Attributes{Operation: Update, Resource: pods, Object: pod(corev1.PullNever, "a", "c"), OldObject: pod(corev1.PullNever, "a", "b")},
			want: []corev1.PullPolicy{"Always", "Always", "Always"}},
		{name: "update without a new image", a: &Attributes{Operation: Update, Resource: pods, Object: pod(corev1.PullNever, "a"), OldObject: pod(corev1.PullNever, "a")},
			want: []corev1.PullPolicy{"Never", "Never"}},
		{name: "status", a: &Attributes{Operation: Create, Resource: pods, Subresource: "status", Object: pod(corev1.PullNever, "a")},
			want: []corev1.PullPolicy{"Never", "Never"}},
	}
	p := AlwaysPullImages{}
	for _, tt := range tests {
		if err := p.Admit(context.Background(), tt.a); err != nil {
			t.Fatalf("%s: Admit: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, policies(tt.a.Object.(*corev1.Pod))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
		if err := p.Validate(context.Background(), tt.a); err != nil {
			t.Errorf("%s: Validate after Admit: %v", tt.name, err)
		}
	}
	// A later mutation that undoes it is refused.
	a := &Attributes{Operation: Create, Resource: pods, Name: "p", Object: pod(corev1.PullIfNotPresent, "a")}
	err := p.Validate(context.Background(), a)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `spec.containers[0].imagePullPolicy: Unsupported value: "IfNotPresent": supported values: "Always"`) {
		t.Errorf("Validate = %v", err)
	}
}

func TestAlwaysDenyAndAdmit(t *testing.T) {
	a := &Attributes{Operation: Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Name: "x"}
	err := AlwaysDeny{}.Validate(context.Background(), a)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "admission control is denying all modifications") {
		t.Errorf("AlwaysDeny = %v", err)
	}
	if err := (AlwaysAdmit{}).Validate(context.Background(), a); err != nil {
		t.Errorf("AlwaysAdmit = %v", err)
	}
	if _, err := NewChain(AlwaysAdmit{}, AlwaysPullImages{}, AlwaysDeny{}); err != nil {
		t.Errorf("NewChain: %v", err)
	}
}
