package apps

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func daemonSet(mutate ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(),
		},
	}
	for _, m := range mutate {
		m(ds)
	}
	return ds
}

func statefulSet(mutate ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template:    template(),
		},
	}
	for _, m := range mutate {
		m(sts)
	}
	return sts
}

func TestDaemonSetDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   *appsv1.DaemonSet
		want appsv1.DaemonSetUpdateStrategy
	}{
		{name: "rolling update", in: daemonSet(), want: appsv1.DaemonSetUpdateStrategy{
			Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0)),
			},
		}},
		{name: "on delete gets no rolling update", in: daemonSet(func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
		}), want: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := tc.in
			ds.Status.NumberReady = 3
			DaemonSetStrategy{}.PrepareForCreate(ctx, ds)
			if diff := cmp.Diff(tc.want, ds.Spec.UpdateStrategy); diff != "" {
				t.Errorf("update strategy (-want +got):\n%s", diff)
			}
			if *ds.Spec.RevisionHistoryLimit != 10 || ds.Generation != 1 || ds.Status.NumberReady != 0 {
				t.Errorf("revisionHistoryLimit %d generation %d status %+v", *ds.Spec.RevisionHistoryLimit, ds.Generation, ds.Status)
			}
			if ds.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
				t.Errorf("pod template not defaulted: restartPolicy %q", ds.Spec.Template.Spec.RestartPolicy)
			}
		})
	}
}

func TestDaemonSetValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.DaemonSet)
		want   []string
	}{
		{name: "valid"},
		{name: "no selector", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Selector = nil },
			want: []string{"spec.selector: Required value"}},
		{name: "empty selector", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} },
			want: []string{"spec.selector: Invalid value"}},
		{name: "selector mismatch", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Labels = map[string]string{"app": "other"} },
			want: []string{"spec.template.metadata.labels: Invalid value"}},
		{name: "restart never", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			want: []string{"spec.template.spec.restartPolicy: Unsupported value"}},
		{name: "surge and unavailable", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(1))}
		}, want: []string{"spec.updateStrategy.rollingUpdate.maxSurge: Invalid value"}},
		{name: "both zero", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("0%"))}
		}, want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Required value"}},
		{name: "over 100%", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("150%")), MaxSurge: ptr.To(intstr.FromInt32(0))}
		}, want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value"}},
		{name: "bad type", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = "Sometimes" },
			want: []string{"spec.updateStrategy: Unsupported value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := daemonSet()
			DefaultDaemonSet(ds)
			if tc.mutate != nil {
				tc.mutate(ds)
			}
			if diff := cmp.Diff(tc.want, errStrings(DaemonSetStrategy{}.Validate(ctx, ds))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDaemonSetUpdateAndStatus(t *testing.T) {
	old := daemonSet()
	DaemonSetStrategy{}.PrepareForCreate(ctx, old)
	old.Status = appsv1.DaemonSetStatus{NumberReady: 2, DesiredNumberScheduled: 2}

	same := old.DeepCopy()
	same.Status = appsv1.DaemonSetStatus{}
	DaemonSetStrategy{}.PrepareForUpdate(ctx, same, old)
	if same.Generation != 1 || same.Status.NumberReady != 2 {
		t.Errorf("unchanged spec: generation %d status %+v", same.Generation, same.Status)
	}

	changed := old.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	DaemonSetStrategy{}.PrepareForUpdate(ctx, changed, old)
	if changed.Generation != 2 {
		t.Errorf("changed spec: generation %d, want 2", changed.Generation)
	}
	if got := []string{old.Annotations[templateGenerationAnnotation], same.Annotations[templateGenerationAnnotation], changed.Annotations[templateGenerationAnnotation]}; !cmp.Equal(got, []string{"1", "1", "2"}) {
		t.Errorf("template generation annotation on create, unchanged and changed template = %q, want 1, 1, 2", got)
	}
	forged := old.DeepCopy()
	forged.Annotations[templateGenerationAnnotation] = "40"
	DaemonSetStrategy{}.PrepareForUpdate(ctx, forged, old)
	if got := forged.Annotations[templateGenerationAnnotation]; got != "1" {
		t.Errorf("a client-set template generation was kept: %q, want the server's 1", got)
	}

	moved := old.DeepCopy()
	moved.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "x": "y"}}
	moved.Spec.Template.Labels["x"] = "y"
	if diff := cmp.Diff([]string{"spec.selector: Invalid value"}, errStrings(DaemonSetStrategy{}.ValidateUpdate(ctx, moved, old))); diff != "" {
		t.Errorf("selector change (-want +got):\n%s", diff)
	}

	st := old.DeepCopy()
	st.Spec.Template.Spec.Containers[0].Image = "evil"
	st.Status.NumberReady = -1
	DaemonSetStrategy{}.PrepareForStatusUpdate(ctx, st, old)
	if st.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("status update changed the spec")
	}
	if diff := cmp.Diff([]string{"status.numberReady: Invalid value"}, errStrings(DaemonSetStrategy{}.ValidateStatusUpdate(ctx, st, old))); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestStatefulSetDefaults(t *testing.T) {
	sts := statefulSet(func(s *appsv1.StatefulSet) {
		s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	})
	StatefulSetStrategy{}.PrepareForCreate(ctx, sts)
	fs := corev1.PersistentVolumeFilesystem
	want := appsv1.StatefulSetSpec{
		Replicas:            ptr.To[int32](1),
		PodManagementPolicy: appsv1.OrderedReadyPodManagement,
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
			Type:          appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0), MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		},
		RevisionHistoryLimit: ptr.To[int32](10),
		PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeMode: &fs},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
		}},
	}
	got := sts.Spec
	got.Selector, got.Template, got.ServiceName = nil, corev1.PodTemplateSpec{}, ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if sts.Generation != 1 {
		t.Errorf("generation %d", sts.Generation)
	}
}

func TestStatefulSetValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.StatefulSet)
		want   []string
	}{
		{name: "valid"},
		{name: "bad pod management", mutate: func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Random" },
			want: []string{"spec.podManagementPolicy: Invalid value"}},
		{name: "on delete with rolling update", mutate: func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
		}, want: []string{"spec.updateStrategy.rollingUpdate: Invalid value"}},
		{name: "negative partition", mutate: func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](-1) },
			want: []string{"spec.updateStrategy.rollingUpdate.partition: Invalid value"}},
		{name: "zero maxUnavailable", mutate: func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		}, want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value"}},
		{name: "bad retention", mutate: func(s *appsv1.StatefulSet) { s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = "Keep" },
			want: []string{"spec.persistentVolumeClaimRetentionPolicy.whenScaled: Unsupported value"}},
		{name: "empty selector", mutate: func(s *appsv1.StatefulSet) { s.Spec.Selector = &metav1.LabelSelector{} },
			want: []string{"spec.selector: Invalid value"}},
		{name: "active deadline", mutate: func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) },
			want: []string{"spec.template.spec.activeDeadlineSeconds: Forbidden"}},
		{name: "claim template without storage", mutate: func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec:       corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
			}}
		}, want: []string{"spec.volumeClaimTemplates[0].spec.resources[storage]: Required value"}},
		{name: "mount of a claim template", mutate: func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}}
			s.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}},
		{name: "mount of neither volume nor claim template", mutate: func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, want: []string{"spec.template.spec.containers[0].volumeMounts[0].name: Not found"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := statefulSet()
			DefaultStatefulSet(s)
			if tc.mutate != nil {
				tc.mutate(s)
			}
			if diff := cmp.Diff(tc.want, errStrings(StatefulSetStrategy{}.Validate(ctx, s))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatefulSetValidateUpdate(t *testing.T) {
	old := statefulSet()
	StatefulSetStrategy{}.PrepareForCreate(ctx, old)
	tests := []struct {
		name   string
		mutate func(*appsv1.StatefulSet)
		want   []string
	}{
		{name: "replicas and template may change", mutate: func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = ptr.To[int32](5)
			s.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
			s.Spec.MinReadySeconds = 3
		}},
		{name: "service name may not", mutate: func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" },
			want: []string{"spec: Forbidden"}},
		{name: "claim templates may not", mutate: func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}}
		}, want: []string{"spec: Forbidden"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := old.DeepCopy()
			tc.mutate(s)
			StatefulSetStrategy{}.PrepareForUpdate(ctx, s, old)
			errs := StatefulSetStrategy{}.ValidateUpdate(ctx, s, old)
			if diff := cmp.Diff(tc.want, errStrings(errs)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(errs) > 0 && !strings.Contains(errs[0].Detail, "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden") {
				t.Errorf("detail %q", errs[0].Detail)
			}
			if len(errs) == 0 && s.Generation != 2 {
				t.Errorf("generation %d, want 2", s.Generation)
			}
		})
	}
}

func TestStatefulSetScale(t *testing.T) {
	sts := statefulSet()
	StatefulSetStrategy{}.PrepareForCreate(ctx, sts)
	sts.Status.Replicas = 1
	var sc StatefulSetStrategy
	s, err := sc.ScaleOf(sts)
	if err != nil {
		t.Fatal(err)
	}
	want := autoscalingv1.ScaleSpec{Replicas: 1}
	if diff := cmp.Diff(want, s.Spec); diff != "" || s.Status.Selector != "app=web" || s.Status.Replicas != 1 {
		t.Errorf("scale %+v (-want +got spec):\n%s", s, diff)
	}
	s.Spec.Replicas = 4
	if err := sc.ApplyScale(sts, s); err != nil || *sts.Spec.Replicas != 4 {
		t.Errorf("ApplyScale: %v, replicas %d", err, *sts.Spec.Replicas)
	}
	s.Spec.Replicas = -1
	if err := sc.ApplyScale(sts, s); !apierrors.IsInvalid(err) || *sts.Spec.Replicas != 4 {
		t.Errorf("negative scale: %v, replicas %d", err, *sts.Spec.Replicas)
	}
}

func TestStatefulSetStatus(t *testing.T) {
	old := statefulSet()
	StatefulSetStrategy{}.PrepareForCreate(ctx, old)
	st := old.DeepCopy()
	st.Spec.Replicas = ptr.To[int32](9)
	st.Status = appsv1.StatefulSetStatus{Replicas: 1, ReadyReplicas: 2, AvailableReplicas: 1}
	StatefulSetStrategy{}.PrepareForStatusUpdate(ctx, st, old)
	if *st.Spec.Replicas != 1 {
		t.Errorf("status update changed spec.replicas to %d", *st.Spec.Replicas)
	}
	if diff := cmp.Diff([]string{"status.readyReplicas: Invalid value"}, errStrings(StatefulSetStrategy{}.ValidateStatusUpdate(ctx, st, old))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestControllerRevision(t *testing.T) {
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f", Namespace: "default", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", Controller: ptr.To(true),
		}}},
		Data:     runtime.RawExtension{Raw: []byte(`{"spec":{}}`)},
		Revision: 3,
	}
	if errs := (ControllerRevisionStrategy{}).Validate(ctx, cr); len(errs) > 0 {
		t.Errorf("valid revision: %v", errs)
	}
	bad := cr.DeepCopy()
	bad.Data = runtime.RawExtension{}
	bad.Revision = -1
	if diff := cmp.Diff([]string{"data: Required value", "revision: Invalid value"}, errStrings(ControllerRevisionStrategy{}.Validate(ctx, bad))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	changed := cr.DeepCopy()
	changed.Data.Raw = []byte(`{"spec":{"x":1}}`)
	if diff := cmp.Diff([]string{"data: Invalid value"}, errStrings(ControllerRevisionStrategy{}.ValidateUpdate(ctx, changed, cr))); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
	row, err := ControllerRevisionStrategy{}.TableRow(cr)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"web-5d4f", "statefulset.apps/web", int64(3)}, row[:3]); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestDaemonSetStatefulSetRevisionTables(t *testing.T) {
	ds := daemonSet()
	DefaultDaemonSet(ds)
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 3, NumberAvailable: 2}
	sts := statefulSet()
	DefaultStatefulSet(sts)
	sts.Spec.Replicas = ptr.To[int32](3)
	sts.Status.ReadyReplicas = 2
	tests := []struct {
		name string
		s    interface {
			TableRow(runtime.Object) ([]interface{}, error)
		}
		obj  runtime.Object
		want []interface{}
	}{
		{name: "daemonset", s: DaemonSetStrategy{}, obj: ds, want: []interface{}{
			"agent", int64(3), int64(3), int64(2), int64(3), int64(2), "kubernetes.io/os=linux", "<unknown>", "nginx", "nginx:1.27", "app=web"}},
		{name: "statefulset", s: StatefulSetStrategy{}, obj: sts, want: []interface{}{"db", "2/3", "<unknown>", "nginx", "nginx:1.27"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.TableRow(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
