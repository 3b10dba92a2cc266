package kubelet

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReadOnlyVolumes: the kubelet's projections (configMap, secret,
// downwardAPI, projected) and a claim the pod asks for readOnly are
// mounted read-only whatever the volumeMount says, as upstream's volume
// plugins mount them; emptyDir and a writable claim are not.
func TestReadOnlyVolumes(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := h.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv"},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := bound("ro", corev1.RestartPolicyAlways)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "data-ro", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim", ReadOnly: true}}},
		{Name: "data-rw", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}},
	}
	for _, v := range pod.Spec.Volumes {
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
	}
	if _, err := h.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("ro", "running", running)
	cs := h.containers(pod.UID)
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	want := map[string]bool{"/cfg": true, "/info": true, "/scratch": false, "/data-ro": true, "/data-rw": false}
	for _, m := range cs[0].Config.Mounts {
		ro, ok := want[m.ContainerPath]
		if !ok {
			continue
		}
		delete(want, m.ContainerPath)
		if m.Readonly != ro {
			t.Errorf("%s mounted read-only %v, want %v", m.ContainerPath, m.Readonly, ro)
		}
	}
	if len(want) != 0 {
		t.Errorf("not mounted: %v", want)
	}
}
