package podtemplate

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var ctx = context.Background()

func TestPodTemplate(t *testing.T) {
	pt := &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "base", Namespace: "default"},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "nginx"}, {Name: "b", Image: "busybox"}}},
		},
	}
	Strategy{}.PrepareForCreate(ctx, pt)
	if pt.Generation != 1 || pt.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("create: generation %d restartPolicy %q", pt.Generation, pt.Template.Spec.RestartPolicy)
	}
	if errs := (Strategy{}).Validate(ctx, pt); len(errs) > 0 {
		t.Errorf("valid template: %v", errs)
	}
	bad := pt.DeepCopy()
	bad.Template.Spec.Containers = nil
	errs := Strategy{}.Validate(ctx, bad)
	if len(errs) != 1 || errs[0].Field != "template.spec.containers" {
		t.Errorf("errors %v, want template.spec.containers", errs)
	}

	same := pt.DeepCopy()
	same.Labels = map[string]string{"x": "y"}
	Strategy{}.PrepareForUpdate(ctx, same, pt)
	changed := pt.DeepCopy()
	changed.Template.Spec.Containers[0].Image = "nginx:2"
	Strategy{}.PrepareForUpdate(ctx, changed, pt)
	if same.Generation != 1 || changed.Generation != 2 {
		t.Errorf("generations: metadata-only %d, template change %d", same.Generation, changed.Generation)
	}

	row, err := Strategy{}.TableRow(pt)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"base", "a,b", "nginx,busybox", "app=web"}, row); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
