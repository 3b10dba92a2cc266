package dra

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func gpuRequest(name string) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}
}

func TestResourceClaimValidate(t *testing.T) {
	tests := []struct {
		name string
		spec resourcev1.ResourceClaimSpec
		want []string
	}{
		{"one gpu", resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{gpuRequest("gpu")}}}, nil},
		{"no class", resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{}}}}},
			[]string{"FieldValueRequired spec.devices.requests[0].exactly.deviceClassName"}},
		{"neither exactly nor firstAvailable", resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu"}}}},
			[]string{"FieldValueRequired spec.devices.requests[0]"}},
		{"duplicate request", resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{gpuRequest("gpu"), gpuRequest("gpu")}}},
			[]string{"FieldValueDuplicate spec.devices.requests[1]"}},
		{"bad request name", resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{gpuRequest("GPU")}}},
			[]string{"FieldValueInvalid spec.devices.requests[0].name"}},
		{"selector without cel", resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", Selectors: []resourcev1.DeviceSelector{{}}}}}}},
			[]string{"FieldValueRequired spec.devices.requests[0].exactly.selectors[0].cel"}},
		{"constraint names unknown request", resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{gpuRequest("gpu")},
			Constraints: []resourcev1.DeviceConstraint{{Requests: []string{"nic"}, MatchAttribute: ptr.To(resourcev1.FullyQualifiedName("example.com/numa"))}}}},
			[]string{"FieldValueInvalid spec.devices.constraints[0].requests[0]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &resourcev1.ResourceClaim{Spec: tc.spec}
			s := ResourceClaimStrategy{}
			s.PrepareForCreate(context.Background(), c)
			if diff := cmp.Diff(tc.want, errorStrings(s.Validate(context.Background(), c))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResourceClaimDefaultsAndStatus(t *testing.T) {
	s := ResourceClaimStrategy{}
	ctx := context.Background()
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec:   resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{gpuRequest("gpu")}}},
		Status: resourcev1.ResourceClaimStatus{ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "1"}}}}
	s.PrepareForCreate(ctx, c)
	got := []any{c.Spec.Devices.Requests[0].Exactly.AllocationMode, c.Spec.Devices.Requests[0].Exactly.Count, len(c.Status.ReservedFor)}
	if diff := cmp.Diff([]any{resourcev1.DeviceAllocationModeExactCount, int64(1), 0}, got); diff != "" {
		t.Errorf("after create (-want +got):\n%s", diff)
	}

	alloc := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}}}}
	pod := resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: "p", UID: "1"}
	tests := []struct {
		name   string
		old    resourcev1.ResourceClaimStatus
		status resourcev1.ResourceClaimStatus
		want   []string
	}{
		{"allocate and reserve", resourcev1.ResourceClaimStatus{}, resourcev1.ResourceClaimStatus{Allocation: alloc, ReservedFor: []resourcev1.ResourceClaimConsumerReference{pod}}, nil},
		{"reserved without allocation", resourcev1.ResourceClaimStatus{}, resourcev1.ResourceClaimStatus{ReservedFor: []resourcev1.ResourceClaimConsumerReference{pod}},
			[]string{"FieldValueForbidden status.reservedFor"}},
		{"allocation for an unknown request", resourcev1.ResourceClaimStatus{}, resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "nic", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}}}}},
			[]string{"FieldValueInvalid status.allocation.devices.results[0].request"}},
		{"allocation changed", resourcev1.ResourceClaimStatus{Allocation: alloc}, resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-1"}}}}},
			[]string{"FieldValueInvalid status.allocation"}},
		{"deallocate", resourcev1.ResourceClaimStatus{Allocation: alloc}, resourcev1.ResourceClaimStatus{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := c.DeepCopy()
			old.Status = tc.old
			next := c.DeepCopy()
			next.Status = tc.status
			next.Spec = resourcev1.ResourceClaimSpec{} // a status update keeps the spec
			s.PrepareForStatusUpdate(ctx, next, old)
			if diff := cmp.Diff(old.Spec, next.Spec); diff != "" {
				t.Errorf("status update changed the spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, errorStrings(s.ValidateStatusUpdate(ctx, next, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	changed := c.DeepCopy()
	changed.Spec.Devices.Requests[0].Name = "other"
	if diff := cmp.Diff([]string{"FieldValueInvalid spec"}, errorStrings(s.ValidateUpdate(ctx, changed, c))); diff != "" {
		t.Errorf("spec update (-want +got):\n%s", diff)
	}
}

func TestResourceSliceValidate(t *testing.T) {
	valid := resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To("node-1"),
		Pool:    resourcev1.ResourcePool{Name: "node-1", ResourceSliceCount: 1},
		Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}}
	tests := []struct {
		name   string
		mutate func(*resourcev1.ResourceSliceSpec)
		want   []string
	}{
		{"valid", func(*resourcev1.ResourceSliceSpec) {}, nil},
		{"no node selection", func(s *resourcev1.ResourceSliceSpec) { s.NodeName = nil }, []string{"FieldValueRequired spec"}},
		{"two node selections", func(s *resourcev1.ResourceSliceSpec) { s.AllNodes = ptr.To(true) }, []string{"FieldValueInvalid spec"}},
		{"no driver", func(s *resourcev1.ResourceSliceSpec) { s.Driver = "" }, []string{"FieldValueRequired spec.driver"}},
		{"no pool", func(s *resourcev1.ResourceSliceSpec) { s.Pool = resourcev1.ResourcePool{} },
			[]string{"FieldValueRequired spec.pool.name", "FieldValueInvalid spec.pool.resourceSliceCount"}},
		{"duplicate device", func(s *resourcev1.ResourceSliceSpec) { s.Devices[1].Name = "gpu-0" }, []string{"FieldValueDuplicate spec.devices[1]"}},
		{"taint without effect", func(s *resourcev1.ResourceSliceSpec) {
			s.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "example.com/broken"}}
		},
			[]string{"FieldValueRequired spec.devices[0].taints[0].effect"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &resourcev1.ResourceSlice{Spec: *valid.DeepCopy()}
			tc.mutate(&s.Spec)
			if diff := cmp.Diff(tc.want, errorStrings(ResourceSliceStrategy{}.Validate(context.Background(), s))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	old := &resourcev1.ResourceSlice{Spec: *valid.DeepCopy()}
	moved := old.DeepCopy()
	moved.Spec.NodeName = ptr.To("node-2")
	if diff := cmp.Diff([]string{"FieldValueInvalid spec.nodeName"}, errorStrings(ResourceSliceStrategy{}.ValidateUpdate(context.Background(), moved, old))); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
	wantFields := fields.Set{"spec.nodeName": "node-1", "spec.driver": "gpu.example.com", "spec.pool.name": "node-1"}
	if diff := cmp.Diff(wantFields, ResourceSliceStrategy{}.FieldSet(old)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestDeviceTaintRule(t *testing.T) {
	ctx := context.Background()
	s := DeviceTaintRuleStrategy{}
	r := &resourcev1.DeviceTaintRule{Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}
	s.PrepareForCreate(ctx, r)
	if r.Spec.Taint.TimeAdded == nil || r.Generation != 1 {
		t.Fatalf("after create: timeAdded %v generation %d, want set and 1", r.Spec.Taint.TimeAdded, r.Generation)
	}
	if errs := s.Validate(ctx, r); len(errs) != 0 {
		t.Fatalf("valid rule: %v", errs)
	}
	bad := r.DeepCopy()
	bad.Spec.Taint.Effect = "Evict"
	if diff := cmp.Diff([]string{"FieldValueNotSupported spec.taint.effect"}, errorStrings(s.Validate(ctx, bad))); diff != "" {
		t.Errorf("bad effect (-want +got):\n%s", diff)
	}
	next := r.DeepCopy()
	next.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	next.Spec.Taint.TimeAdded = r.Spec.Taint.TimeAdded.DeepCopy()
	s.PrepareForUpdate(ctx, next, r)
	if next.Generation != 2 {
		t.Errorf("generation %d after an effect change, want 2", next.Generation)
	}
}

func TestTables(t *testing.T) {
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{}, ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Name: "p"}}}}
	row, err := ResourceClaimStrategy{}.TableRow(claim)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"c", "allocated,reserved", "<unknown>"}, row); diff != "" {
		t.Errorf("claim row (-want +got):\n%s", diff)
	}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourcev1.ResourceSliceSpec{Driver: "d", AllNodes: ptr.To(true), Pool: resourcev1.ResourcePool{Name: "p"}}}
	row, err = ResourceSliceStrategy{}.TableRow(slice)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"s", "", "d", "p", "<unknown>"}, row); diff != "" {
		t.Errorf("slice row (-want +got):\n%s", diff)
	}
}
