package volume

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ephemeralhelpers "k8s.io/component-helpers/storage/ephemeral"
)

// ephemeralPath resolves a generic ephemeral volume: its claim
// <pod>-<volume>, made by the ephemeral volume controller, must be
// controlled by the pod (as upstream's kubelet checks), and is then
// mounted as any persistentVolumeClaim (claimPath).
func (m *Manager) ephemeralPath(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (string, error) {
	name := ephemeralhelpers.VolumeClaimName(pod, v)
	pvc, err := m.getter.PersistentVolumeClaim(ctx, pod.Namespace, name)
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("persistentvolumeclaim %q not found", name)
	}
	if err != nil {
		return "", err
	}
	if err := ephemeralhelpers.VolumeIsForPod(pod, pvc); err != nil {
		return "", err
	}
	return m.claimPath(ctx, pod.Namespace, name)
}
