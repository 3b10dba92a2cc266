package volume

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestEphemeralVolumes: a generic ephemeral volume mounts its claim
// <pod>-<volume> once bound; a claim of that name the pod does not own is
// refused; a local-path (hostPath DirectoryOrCreate) volume's directory is
// made if missing.
func TestEphemeralVolumes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "storage", "pvc-1_ns_web-scratch")
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "pod-uid", Controller: ptr.To(true)}}
	g := &fakeGetter{
		pvcs: map[string]*corev1.PersistentVolumeClaim{
			"web-scratch": {ObjectMeta: metav1.ObjectMeta{Name: "web-scratch", Namespace: "ns", UID: "c1", OwnerReferences: owner},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-1"}},
			"web-foreign": {ObjectMeta: metav1.ObjectMeta{Name: "web-foreign", Namespace: "ns", UID: "c2"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-1"}},
			"web-pending": {ObjectMeta: metav1.ObjectMeta{Name: "web-pending", Namespace: "ns", UID: "c3", OwnerReferences: owner}},
		},
		pvs: map[string]*corev1.PersistentVolume{"pvc-1": {ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}, Spec: corev1.PersistentVolumeSpec{
			ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "web-scratch", UID: "c1"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}}},
	}
	m := NewManager(t.TempDir(), g)
	pod := func(volume string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "pod-uid"},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: volume, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}}}
	}
	paths, err := m.Setup(context.Background(), pod("scratch"))
	if err != nil {
		t.Fatal(err)
	}
	if paths["scratch"] != dir {
		t.Errorf("path %q, want %q", paths["scratch"], dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("directory not made: %v", err)
	}
	for volume, want := range map[string]string{
		"foreign": `MountVolume.SetUp failed for volume "foreign" : PVC ns/web-foreign was not created for pod ns/web (pod is not owner)`,
		"pending": `MountVolume.SetUp failed for volume "pending" : PersistentVolumeClaim "web-pending" is not bound`,
		"missing": `MountVolume.SetUp failed for volume "missing" : persistentvolumeclaim "web-missing" not found`,
	} {
		if _, err := m.Setup(context.Background(), pod(volume)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", volume, err, want)
		}
	}
}
