package simulate

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DefaultDeviceDriver is the DRA driver name of simulated devices.
const DefaultDeviceDriver = "gpu.skiff.sh"

// resourceSlice describes a node's simulated devices as a DRA driver's
// kubelet plugin publishes them: one pool named after the node, devices
// gpu-0 … gpu-(n-1) with an index and model attribute and 80Gi of
// memory, owned by the Node so that they go with it.
func resourceSlice(node *corev1.Node, driver string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name + "-" + strings.ReplaceAll(driver, ".", "-"),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node.Name),
			Pool:     resourceapi.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
				"model": {StringValue: ptr.To("skiff-simulated-gpu")},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("80Gi")},
			},
		})
	}
	return s
}

// publishDevices creates (or, after a restart, replaces) the node's
// ResourceSlice when the simulator is asked for devices.
func (s *Simulator) publishDevices(ctx context.Context, node *corev1.Node) error {
	if s.opts.Devices <= 0 {
		return nil
	}
	want := resourceSlice(node, s.opts.DeviceDriver, s.opts.Devices)
	slices := s.client.ResourceV1().ResourceSlices()
	_, err := slices.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := slices.Get(ctx, want.Name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("get resource slice %s: %w", want.Name, gerr)
		}
		want.ResourceVersion = cur.ResourceVersion
		want.Spec.Pool.Generation = cur.Spec.Pool.Generation
		_, err = slices.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("publish resource slice of node %s: %w", node.Name, err)
	}
	return nil
}
