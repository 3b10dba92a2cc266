package apps

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
	}
}

func deployment(mutate ...func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(),
		},
	}
	for _, m := range mutate {
		m(d)
	}
	return d
}

func replicaSet(mutate ...func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(),
		},
	}
	for _, m := range mutate {
		m(rs)
	}
	return rs
}

func TestDeploymentDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   *appsv1.Deployment
		want appsv1.DeploymentSpec
	}{
		{name: "rolling update", in: deployment(), want: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%")),
			}},
			RevisionHistoryLimit: ptr.To[int32](10), ProgressDeadlineSeconds: ptr.To[int32](600),
		}},
		{name: "recreate keeps no rolling update", in: deployment(func(d *appsv1.Deployment) {
			d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
			d.Spec.Replicas = ptr.To[int32](0)
		}), want: appsv1.DeploymentSpec{
			Replicas:             ptr.To[int32](0),
			Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit: ptr.To[int32](10), ProgressDeadlineSeconds: ptr.To[int32](600),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			DeploymentStrategy{}.PrepareForCreate(ctx, tc.in)
			got := tc.in.Spec
			if got.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
				t.Errorf("template restartPolicy = %q; pod defaults not applied", got.Template.Spec.RestartPolicy)
			}
			got.Selector, got.Template = nil, corev1.PodTemplateSpec{}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("spec (-want +got):\n%s", d)
			}
			if tc.in.Generation != 1 {
				t.Errorf("generation = %d", tc.in.Generation)
			}
		})
	}
}

func TestDeploymentValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.Deployment)
		want   []string
	}{
		{name: "valid"},
		{name: "no selector", mutate: func(d *appsv1.Deployment) { d.Spec.Selector = nil },
			want: []string{"spec.selector: Required value"}},
		{name: "empty selector", mutate: func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} },
			want: []string{"spec.selector: Invalid value"}},
		{name: "selector does not match", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "api"} },
			want: []string{"spec.template.metadata.labels: Invalid value"}},
		{name: "negative replicas", mutate: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](-1) },
			want: []string{"spec.replicas: Invalid value"}},
		{name: "both zero", mutate: func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromString("0%"))}
		}, want: []string{"spec.strategy.rollingUpdate.maxUnavailable: Invalid value"}},
		{name: "bad percent and over 100", mutate: func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("abc")), MaxUnavailable: ptr.To(intstr.FromString("150%"))}
		}, want: []string{"spec.strategy.rollingUpdate.maxSurge: Invalid value", "spec.strategy.rollingUpdate.maxUnavailable: Invalid value"}},
		{name: "recreate with rolling update", mutate: func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}}
		}, want: []string{"spec.strategy.rollingUpdate: Forbidden"}},
		{name: "unknown strategy", mutate: func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" },
			want: []string{"spec.strategy.type: Unsupported value"}},
		{name: "restart policy", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			want: []string{"spec.template.spec.restartPolicy: Unsupported value"}},
		{name: "progress deadline", mutate: func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 700
		}, want: []string{"spec.progressDeadlineSeconds: Invalid value"}},
		{name: "pod spec errors surface", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" },
			want: []string{"spec.template.spec.containers[0].image: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := deployment()
			if tc.mutate != nil {
				tc.mutate(d)
			}
			DeploymentStrategy{}.PrepareForCreate(ctx, d)
			if diff := cmp.Diff(tc.want, errStrings(DeploymentStrategy{}.Validate(ctx, d))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectorMismatchMessage(t *testing.T) {
	d := deployment(func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "api"} })
	DeploymentStrategy{}.PrepareForCreate(ctx, d)
	errs := DeploymentStrategy{}.Validate(ctx, d)
	if len(errs) != 1 || errs[0].Detail != "`selector` does not match template `labels`" {
		t.Errorf("errors = %v", errs)
	}
}

func TestDeploymentUpdate(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*appsv1.Deployment)
		wantGen  int64
		wantErrs []string
	}{
		{name: "no change", mutate: func(d *appsv1.Deployment) {}, wantGen: 3},
		{name: "label only", mutate: func(d *appsv1.Deployment) { d.Labels = map[string]string{"x": "y"} }, wantGen: 3},
		{name: "image", mutate: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" }, wantGen: 4},
		{name: "annotation", mutate: func(d *appsv1.Deployment) { d.Annotations = map[string]string{"a": "b"} }, wantGen: 4},
		{name: "status ignored", mutate: func(d *appsv1.Deployment) { d.Status.Replicas = 9 }, wantGen: 3},
		{name: "selector", mutate: func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "fe"}}
			d.Spec.Template.Labels["tier"] = "fe"
		}, wantGen: 4, wantErrs: []string{"spec.selector: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := deployment()
			DeploymentStrategy{}.PrepareForCreate(ctx, old)
			old.Generation = 3
			old.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}
			d := old.DeepCopy()
			// A client's PUT lacks defaults the server would add again.
			d.Spec.RevisionHistoryLimit = nil
			tc.mutate(d)
			DeploymentStrategy{}.PrepareForUpdate(ctx, d, old)
			if d.Generation != tc.wantGen {
				t.Errorf("generation = %d, want %d", d.Generation, tc.wantGen)
			}
			if d.Status.Replicas != 1 {
				t.Errorf("status not kept: %+v", d.Status)
			}
			if diff := cmp.Diff(tc.wantErrs, errStrings(DeploymentStrategy{}.ValidateUpdate(ctx, d, old))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusUpdates(t *testing.T) {
	old := deployment()
	DeploymentStrategy{}.PrepareForCreate(ctx, old)
	d := old.DeepCopy()
	d.Spec.Replicas = ptr.To[int32](5)
	d.Labels = map[string]string{"x": "y"}
	d.Status = appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
	DeploymentStrategy{}.PrepareForStatusUpdate(ctx, d, old)
	if *d.Spec.Replicas != 1 || d.Labels != nil {
		t.Errorf("status update changed spec or labels: %v %v", *d.Spec.Replicas, d.Labels)
	}
	if diff := cmp.Diff([]string{"status.updatedReplicas: Invalid value"}, errStrings(DeploymentStrategy{}.ValidateStatusUpdate(ctx, d, old))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	oldRS := replicaSet()
	ReplicaSetStrategy{}.PrepareForCreate(ctx, oldRS)
	rs := oldRS.DeepCopy()
	rs.Spec.Replicas = ptr.To[int32](5)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1, AvailableReplicas: 2}
	ReplicaSetStrategy{}.PrepareForStatusUpdate(ctx, rs, oldRS)
	if *rs.Spec.Replicas != 1 {
		t.Errorf("status update changed spec")
	}
	if diff := cmp.Diff([]string{"status.availableReplicas: Invalid value"}, errStrings(ReplicaSetStrategy{}.ValidateStatusUpdate(ctx, rs, oldRS))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestReplicaSet(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.ReplicaSet)
		want   []string
	}{
		{name: "valid"},
		{name: "empty selector", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = &metav1.LabelSelector{} },
			want: []string{"spec.selector: Invalid value"}},
		{name: "mismatch and negative", mutate: func(rs *appsv1.ReplicaSet) {
			rs.Spec.Replicas = ptr.To[int32](-2)
			rs.Spec.Template.Labels = nil
		}, want: []string{"spec.replicas: Invalid value", "spec.template.metadata.labels: Invalid value"}},
		{name: "active deadline", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) },
			want: []string{"spec.template.spec.activeDeadlineSeconds: Forbidden"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := replicaSet()
			if tc.mutate != nil {
				tc.mutate(rs)
			}
			ReplicaSetStrategy{}.PrepareForCreate(ctx, rs)
			if *rs.Spec.Replicas == 0 || rs.Generation != 1 {
				t.Errorf("defaults: replicas %d generation %d", *rs.Spec.Replicas, rs.Generation)
			}
			if diff := cmp.Diff(tc.want, errStrings(ReplicaSetStrategy{}.Validate(ctx, rs))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("generation and immutable selector", func(t *testing.T) {
		old := replicaSet()
		ReplicaSetStrategy{}.PrepareForCreate(ctx, old)
		rs := old.DeepCopy()
		rs.Annotations = map[string]string{"deployment.kubernetes.io/revision": "2"}
		ReplicaSetStrategy{}.PrepareForUpdate(ctx, rs, old)
		if rs.Generation != 1 {
			t.Errorf("annotation bumped generation to %d", rs.Generation)
		}
		rs.Spec.Replicas = ptr.To[int32](3)
		rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}
		ReplicaSetStrategy{}.PrepareForUpdate(ctx, rs, old)
		if rs.Generation != 2 {
			t.Errorf("generation = %d, want 2", rs.Generation)
		}
		if diff := cmp.Diff([]string{"spec.selector: Invalid value"}, errStrings(ReplicaSetStrategy{}.ValidateUpdate(ctx, rs, old))); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("field set", func(t *testing.T) {
		rs := replicaSet(func(rs *appsv1.ReplicaSet) { rs.Status.Replicas = 3 })
		if got := (ReplicaSetStrategy{}).FieldSet(rs)["status.replicas"]; got != "3" {
			t.Errorf("status.replicas = %q", got)
		}
	})
}

func TestScale(t *testing.T) {
	d := deployment(func(d *appsv1.Deployment) {
		d.UID, d.ResourceVersion = "uid-1", "42"
		d.Spec.Replicas = ptr.To[int32](3)
		d.Status.Replicas = 2
		d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"fe"}}}
	})
	s, err := ScaleOf(d)
	if err != nil {
		t.Fatal(err)
	}
	want := &autoscalingv1.Scale{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", ResourceVersion: "42"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
		Status:     autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web,tier in (fe)"},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("scale (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name     string
		obj      runtime.Object
		replicas int32
		wantErr  string
	}{
		{name: "deployment up", obj: deployment(), replicas: 5},
		{name: "replica set to zero", obj: replicaSet(), replicas: 0},
		{name: "negative", obj: deployment(), replicas: -1, wantErr: "spec.replicas: Invalid value: -1: must be greater than or equal to 0"},
		{name: "unsupported", obj: &corev1.Pod{}, replicas: 1, wantErr: "unsupported object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ApplyScale(tc.obj, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: autoscalingv1.ScaleSpec{Replicas: tc.replicas}})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if tc.replicas < 0 && !apierrors.IsInvalid(err) {
					t.Errorf("not a 422: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := ScaleOf(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.Replicas != tc.replicas {
				t.Errorf("replicas = %d, want %d", got.Spec.Replicas, tc.replicas)
			}
		})
	}
}

func TestTables(t *testing.T) {
	age := metav1.NewTime(time.Now().Add(-90 * time.Second))
	d := deployment(func(d *appsv1.Deployment) {
		d.CreationTimestamp = age
		d.Spec.Replicas = ptr.To[int32](3)
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
		d.Status = appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}
	})
	got, err := DeploymentStrategy{}.TableRow(d)
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{"web", "2/3", int64(3), int64(2), "90s", "nginx,sidecar", "nginx:1.27,busybox", "app=web"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deployment row (-want +got):\n%s", diff)
	}
	if n := len(DeploymentStrategy{}.TableColumns()); n != len(want) {
		t.Errorf("%d deployment columns for %d cells", n, len(want))
	}

	rs := replicaSet(func(rs *appsv1.ReplicaSet) {
		rs.CreationTimestamp = age
		rs.Spec.Replicas = ptr.To[int32](2)
		rs.Status = appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1}
	})
	got, err = ReplicaSetStrategy{}.TableRow(rs)
	if err != nil {
		t.Fatal(err)
	}
	want = []interface{}{"web-5d4f", int64(2), int64(2), int64(1), "90s", "nginx", "nginx:1.27", "app=web"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replicaset row (-want +got):\n%s", diff)
	}
	cols := ReplicaSetStrategy{}.TableColumns()
	var names []string
	for _, c := range cols {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"}, names); diff != "" {
		t.Errorf("replicaset columns (-want +got):\n%s", diff)
	}
}

func TestResources(t *testing.T) {
	rs := Resources(registry.Deps{})
	if len(rs) != 5 || rs[0].StoragePrefix != "deployments" || rs[1].StoragePrefix != "replicasets" ||
		!rs[0].HasSubresource("scale") || rs[1].ShortNames[0] != "rs" || rs[0].Categories[0] != "all" {
		t.Errorf("resources = %+v", rs)
	}
}
