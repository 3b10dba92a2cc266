package storagek8s

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func storageClass(mutate ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "rancher.io/local-path"}
	for _, m := range mutate {
		m(sc)
	}
	return sc
}

func TestStorageClassDefaults(t *testing.T) {
	sc := storageClass()
	StorageClassStrategy{}.PrepareForCreate(ctx, sc)
	if diff := cmp.Diff(ptr.To(corev1.PersistentVolumeReclaimDelete), sc.ReclaimPolicy); diff != "" {
		t.Errorf("reclaimPolicy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ptr.To(storagev1.VolumeBindingImmediate), sc.VolumeBindingMode); diff != "" {
		t.Errorf("volumeBindingMode (-want +got):\n%s", diff)
	}
	kept := storageClass(func(sc *storagev1.StorageClass) {
		sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	})
	StorageClassStrategy{}.PrepareForCreate(ctx, kept)
	if *kept.ReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *kept.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("defaults overwrote set values: %v %v", *kept.ReclaimPolicy, *kept.VolumeBindingMode)
	}
}

func TestStorageClassValidate(t *testing.T) {
	tests := []struct {
		name string
		sc   *storagev1.StorageClass
		want []string
	}{
		{name: "valid", sc: storageClass()},
		{name: "no provisioner", sc: storageClass(func(sc *storagev1.StorageClass) { sc.Provisioner = "" }), want: []string{"provisioner: Required value"}},
		{name: "bad provisioner", sc: storageClass(func(sc *storagev1.StorageClass) { sc.Provisioner = "a b" }), want: []string{"provisioner: Invalid value"}},
		{name: "recycle not supported", sc: storageClass(func(sc *storagev1.StorageClass) {
			sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRecycle)
		}), want: []string{"reclaimPolicy: Unsupported value"}},
		{name: "bad binding mode", sc: storageClass(func(sc *storagev1.StorageClass) {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingMode("Later"))
		}), want: []string{"volumeBindingMode: Unsupported value"}},
		{name: "empty parameter key", sc: storageClass(func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{"": "x"} }),
			want: []string{"parameters: Invalid value"}},
		{name: "parameters too large", sc: storageClass(func(sc *storagev1.StorageClass) {
			sc.Parameters = map[string]string{"k": strings.Repeat("x", maxParametersSize)}
		}), want: []string{"parameters: Too long"}},
		{name: "empty topology term", sc: storageClass(func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{{}}
		}), want: []string{"allowedTopologies[0].matchLabelExpressions: Required value"}},
		{name: "topology values required", sc: storageClass(func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone"}}}}
		}), want: []string{"allowedTopologies[0].matchLabelExpressions[0].values: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := StorageClassStrategy{}
			s.PrepareForCreate(ctx, tc.sc)
			if diff := cmp.Diff(tc.want, errStrings(s.Validate(ctx, tc.sc))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStorageClassValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*storagev1.StorageClass)
		want   []string
	}{
		{name: "allowVolumeExpansion may change", mutate: func(sc *storagev1.StorageClass) { sc.AllowVolumeExpansion = ptr.To(true) }},
		{name: "provisioner", mutate: func(sc *storagev1.StorageClass) { sc.Provisioner = "other.io/x" }, want: []string{"provisioner: Forbidden"}},
		{name: "parameters", mutate: func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{"a": "b"} }, want: []string{"parameters: Forbidden"}},
		{name: "reclaimPolicy", mutate: func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain) },
			want: []string{"reclaimPolicy: Forbidden"}},
		{name: "volumeBindingMode", mutate: func(sc *storagev1.StorageClass) {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
		}, want: []string{"volumeBindingMode: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := StorageClassStrategy{}
			old := storageClass()
			s.PrepareForCreate(ctx, old)
			next := old.DeepCopy()
			tc.mutate(next)
			s.PrepareForUpdate(ctx, next, old)
			if diff := cmp.Diff(tc.want, errStrings(s.ValidateUpdate(ctx, next, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCSIDriverDefaultsAndValidation(t *testing.T) {
	d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com"}}
	s := CSIDriverStrategy{}
	s.PrepareForCreate(ctx, d)
	want := storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false), StorageCapacity: ptr.To(false),
		RequiresRepublish: ptr.To(false), SELinuxMount: ptr.To(false),
		FSGroupPolicy:        ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
	}
	if diff := cmp.Diff(want, d.Spec); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if errs := s.Validate(ctx, d); len(errs) != 0 {
		t.Errorf("defaulted driver invalid: %v", errs)
	}

	tests := []struct {
		name   string
		mutate func(*storagev1.CSIDriver)
		want   []string
	}{
		{name: "bad mode", mutate: func(d *storagev1.CSIDriver) {
			d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{"Forever"}
		}, want: []string{"spec.volumeLifecycleModes[0]: Unsupported value"}},
		{name: "short token", mutate: func(d *storagev1.CSIDriver) {
			d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "a", ExpirationSeconds: ptr.To[int64](60)}, {Audience: "a"}}
		}, want: []string{"spec.tokenRequests[0].expirationSeconds: Invalid value", "spec.tokenRequests[1].audience: Duplicate value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := d.DeepCopy()
			tc.mutate(next)
			if diff := cmp.Diff(tc.want, errStrings(s.Validate(ctx, next))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}

	upd := d.DeepCopy()
	upd.Spec.AttachRequired = ptr.To(false)
	upd.Spec.PodInfoOnMount = ptr.To(true)
	if diff := cmp.Diff([]string{"spec.attachRequired: Invalid value"}, errStrings(s.ValidateUpdate(ctx, upd, d))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
	if got := s.ValidateName(strings.Repeat("a", 64), false); len(got) == 0 {
		t.Errorf("64-character driver name accepted")
	}
}

func TestCSINodeValidate(t *testing.T) {
	node := func(drivers ...storagev1.CSINodeDriver) *storagev1.CSINode {
		return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: drivers}}
	}
	tests := []struct {
		name string
		n    *storagev1.CSINode
		want []string
	}{
		{name: "valid", n: node(storagev1.CSINodeDriver{Name: "csi.example.com", NodeID: "n1", TopologyKeys: []string{"topology.kubernetes.io/zone"}})},
		{name: "missing nodeID and dup", n: node(storagev1.CSINodeDriver{Name: "d", NodeID: "x"}, storagev1.CSINodeDriver{Name: "d"}),
			want: []string{"spec.drivers[1].name: Duplicate value", "spec.drivers[1].nodeID: Required value"}},
		{name: "negative count", n: node(storagev1.CSINodeDriver{Name: "d", NodeID: "x", Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](-1)}}),
			want: []string{"spec.drivers[0].allocatable.count: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(CSINodeStrategy{}.Validate(ctx, tc.n))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	old := node(storagev1.CSINodeDriver{Name: "d", NodeID: "x"})
	next := node(storagev1.CSINodeDriver{Name: "d", NodeID: "y"}, storagev1.CSINodeDriver{Name: "e", NodeID: "z"})
	if diff := cmp.Diff([]string{"spec.drivers[0].nodeID: Invalid value"}, errStrings(CSINodeStrategy{}.ValidateUpdate(ctx, next, old))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
}

func TestVolumeAttachment(t *testing.T) {
	va := func(mutate ...func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
		v := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: "csi-123"},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "n1",
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv1")}},
		}
		for _, m := range mutate {
			m(v)
		}
		return v
	}
	tests := []struct {
		name string
		va   *storagev1.VolumeAttachment
		want []string
	}{
		{name: "valid", va: va()},
		{name: "nothing", va: &storagev1.VolumeAttachment{},
			want: []string{"spec.attacher: Required value", "spec.source: Required value", "spec.nodeName: Required value"}},
		{name: "both sources", va: va(func(v *storagev1.VolumeAttachment) {
			v.Spec.Source.InlineVolumeSpec = &corev1.PersistentVolumeSpec{}
		}), want: []string{"spec.source: Forbidden"}},
		{name: "empty pv name", va: va(func(v *storagev1.VolumeAttachment) { v.Spec.Source.PersistentVolumeName = ptr.To("") }),
			want: []string{"spec.source.persistentVolumeName: Required value"}},
	}
	s := VolumeAttachmentStrategy{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(s.Validate(ctx, tc.va))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}

	created := va(func(v *storagev1.VolumeAttachment) { v.Status.Attached = true })
	s.PrepareForCreate(ctx, created)
	if created.Status.Attached {
		t.Errorf("create kept status")
	}
	old := va(func(v *storagev1.VolumeAttachment) { v.Status.Attached = true })
	next := va(func(v *storagev1.VolumeAttachment) { v.Spec.NodeName = "n2" })
	s.PrepareForUpdate(ctx, next, old)
	if !next.Status.Attached {
		t.Errorf("update dropped status")
	}
	if diff := cmp.Diff([]string{"spec: Invalid value"}, errStrings(s.ValidateUpdate(ctx, next, old))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
	st := old.DeepCopy()
	st.Spec.NodeName = "n3"
	st.Status.Attached = false
	s.PrepareForStatusUpdate(ctx, st, old)
	if st.Spec.NodeName != "n1" || st.Status.Attached {
		t.Errorf("status update: spec %q attached %v", st.Spec.NodeName, st.Status.Attached)
	}
}

func TestCSIStorageCapacityValidate(t *testing.T) {
	neg := resource.MustParse("-1Gi")
	c := &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "kube-system"}, Capacity: &neg}
	want := []string{"storageClassName: Required value", "capacity: Invalid value"}
	if diff := cmp.Diff(want, errStrings(CSIStorageCapacityStrategy{}.Validate(ctx, c))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	old := &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "c"}, StorageClassName: "fast"}
	next := old.DeepCopy()
	next.StorageClassName = "slow"
	if diff := cmp.Diff([]string{"storageClassName: Invalid value"}, errStrings(CSIStorageCapacityStrategy{}.ValidateUpdate(ctx, next, old))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
}

func TestTables(t *testing.T) {
	gi := resource.MustParse("10Gi")
	tests := []struct {
		name     string
		strategy registry.Strategy
		obj      runtime.Object
		columns  []string
		want     []interface{}
	}{
		{
			name: "default storage class", strategy: StorageClassStrategy{},
			obj: storageClass(func(sc *storagev1.StorageClass) {
				sc.Annotations = map[string]string{IsDefaultClassAnnotation: "true"}
				sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
			}),
			columns: []string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"},
			want:    []interface{}{"standard (default)", "rancher.io/local-path", "Delete", "WaitForFirstConsumer", false, "<unknown>"},
		},
		{
			name: "csidriver", strategy: CSIDriverStrategy{},
			obj:     &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: storagev1.CSIDriverSpec{TokenRequests: []storagev1.TokenRequest{{Audience: "a"}, {Audience: "b"}}}},
			columns: []string{"Name", "AttachRequired", "PodInfoOnMount", "StorageCapacity", "TokenRequests", "RequiresRepublish", "Modes", "Age"},
			want:    []interface{}{"d", true, false, false, "a,b", false, "<none>", "<unknown>"},
		},
		{
			name: "csinode", strategy: CSINodeStrategy{},
			obj:     &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "d"}}}},
			columns: []string{"Name", "Drivers", "Age"},
			want:    []interface{}{"n1", int64(1), "<unknown>"},
		},
		{
			name: "volumeattachment", strategy: VolumeAttachmentStrategy{},
			obj: &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va"}, Spec: storagev1.VolumeAttachmentSpec{
				Attacher: "csi.example.com", NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv1")}},
				Status: storagev1.VolumeAttachmentStatus{Attached: true}},
			columns: []string{"Name", "Attacher", "PV", "Node", "Attached", "Age"},
			want:    []interface{}{"va", "csi.example.com", "pv1", "n1", true, "<unknown>"},
		},
		{
			name: "capacity", strategy: CSIStorageCapacityStrategy{},
			obj:     &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "c"}, StorageClassName: "fast", Capacity: &gi},
			columns: []string{"Name", "StorageClassName", "Capacity"},
			want:    []interface{}{"c", "fast", "10Gi"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cols []string
			for _, c := range tc.strategy.TableColumns() {
				cols = append(cols, c.Name)
			}
			if diff := cmp.Diff(tc.columns, cols); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			row, err := tc.strategy.TableRow(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, row); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResources(t *testing.T) {
	var got []string
	for _, r := range Resources(registry.Deps{}) {
		got = append(got, r.StoragePrefix)
		if r.New == nil || r.NewList == nil || r.Strategy == nil {
			t.Errorf("%s: incomplete resource", r.Resource)
		}
	}
	want := []string{"storageclasses", "csinodes", "csidrivers", "volumeattachments", "csistoragecapacities", "volumeattributesclasses"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prefixes (-want +got):\n%s", diff)
	}
}
