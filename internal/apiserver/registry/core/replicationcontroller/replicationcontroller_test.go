package replicationcontroller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

func rc() *corev1.ReplicationController {
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ReplicationControllerSpec{Template: &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
		}},
	}
}

func TestDefaults(t *testing.T) {
	r := rc()
	r.Status.Replicas = 3
	Strategy{}.PrepareForCreate(ctx, r)
	want := []interface{}{map[string]string{"app": "web"}, map[string]string{"app": "web"}, int32(1), int64(1), int32(0), corev1.RestartPolicyAlways}
	got := []interface{}{r.Spec.Selector, r.Labels, *r.Spec.Replicas, r.Generation, r.Status.Replicas, r.Spec.Template.Spec.RestartPolicy}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The defaulted selector is a copy: changing template labels later must not move it.
	r.Spec.Template.Labels["app"] = "other"
	if r.Spec.Selector["app"] != "web" {
		t.Errorf("selector shares the template's label map")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.ReplicationController)
		want   []string
	}{
		{name: "valid"},
		{name: "no template", mutate: func(r *corev1.ReplicationController) { r.Spec.Template = nil }, want: []string{"spec.template: Required value"}},
		{name: "selector mismatch", mutate: func(r *corev1.ReplicationController) { r.Spec.Selector = map[string]string{"app": "x"} },
			want: []string{"spec.template.metadata.labels: Invalid value"}},
		{name: "empty selector", mutate: func(r *corev1.ReplicationController) { r.Spec.Selector = nil }, want: []string{"spec.selector: Required value"}},
		{name: "restart never", mutate: func(r *corev1.ReplicationController) { r.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			want: []string{"spec.template.spec.restartPolicy: Unsupported value"}},
		{name: "negative replicas", mutate: func(r *corev1.ReplicationController) { n := int32(-1); r.Spec.Replicas = &n },
			want: []string{"spec.replicas: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rc()
			Default(r)
			if tc.mutate != nil {
				tc.mutate(r)
			}
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, r))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusScaleTableFields(t *testing.T) {
	old := rc()
	Strategy{}.PrepareForCreate(ctx, old)
	old.Status = corev1.ReplicationControllerStatus{Replicas: 1, ReadyReplicas: 1}

	upd := old.DeepCopy()
	upd.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	upd.Status = corev1.ReplicationControllerStatus{}
	Strategy{}.PrepareForUpdate(ctx, upd, old)
	if upd.Generation != 2 || upd.Status.Replicas != 1 {
		t.Errorf("update: generation %d status %+v", upd.Generation, upd.Status)
	}

	st := old.DeepCopy()
	st.Spec.Selector = nil
	st.Status = corev1.ReplicationControllerStatus{Replicas: 1, ReadyReplicas: 2}
	Strategy{}.PrepareForStatusUpdate(ctx, st, old)
	if st.Spec.Selector == nil {
		t.Errorf("status update changed the spec")
	}
	if diff := cmp.Diff([]string{"status.readyReplicas: Invalid value"}, errStrings(Strategy{}.ValidateStatusUpdate(ctx, st, old))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	s, err := Strategy{}.ScaleOf(old)
	if err != nil || s.Spec.Replicas != 1 || s.Status.Selector != "app=web" || s.Status.Replicas != 1 {
		t.Fatalf("ScaleOf: %+v %v", s, err)
	}
	s.Spec.Replicas = 3
	if err := (Strategy{}).ApplyScale(old, s); err != nil || *old.Spec.Replicas != 3 {
		t.Errorf("ApplyScale: %v", err)
	}
	s.Spec.Replicas = -2
	if err := (Strategy{}).ApplyScale(old, s); !apierrors.IsInvalid(err) {
		t.Errorf("negative scale: %v", err)
	}

	row, err := Strategy{}.TableRow(old)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"web", int64(3), int64(1), int64(1), "<unknown>", "nginx", "nginx", "app=web"}, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if got := (Strategy{}).FieldSet(old); got["status.replicas"] != "1" {
		t.Errorf("field set %v", got)
	}
}
