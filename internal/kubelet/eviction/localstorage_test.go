package eviction

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestLocalStorageViolation(t *testing.T) {
	limit := func(s string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(s)}}
	}
	size := resource.MustParse("10Mi")
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}},
			{Name: "ram", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}},
		},
		Containers:     []corev1.Container{{Name: "app", Resources: limit("50Mi")}, {Name: "free"}},
		InitContainers: []corev1.Container{{Name: "side", RestartPolicy: &always, Resources: limit("20Mi")}},
	}}
	for _, tc := range []struct {
		name     string
		usage    LocalUsage
		msg, sig string
	}{
		{name: "within every limit", usage: LocalUsage{Volumes: map[string]int64{"scratch": 5 * mi, "ram": 50 * mi}, Containers: map[string]int64{"app": 40 * mi}, Total: 60 * mi}},
		{name: "emptyDir over its size limit", usage: LocalUsage{Volumes: map[string]int64{"scratch": 11 * mi}, Total: 11 * mi},
			msg: `Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". `, sig: SignalEmptyDirFsLimit},
		{name: "pod over the sum of its containers' limits", usage: LocalUsage{Containers: map[string]int64{"app": 40 * mi}, Total: 71 * mi},
			msg: "Pod ephemeral local storage usage exceeds the total limit of containers 70Mi. ", sig: SignalEphemeralPodFsLimit},
		{name: "sidecar over its own limit", usage: LocalUsage{Containers: map[string]int64{"side": 21 * mi}, Total: 21 * mi},
			msg: `Container side exceeded its local ephemeral storage limit "20Mi". `, sig: SignalEphemeralContainerFsLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, sig, ok := LocalStorageViolation(pod, tc.usage)
			if ok != (tc.msg != "") || msg != tc.msg || sig != tc.sig {
				t.Errorf("got %v %q %q, want %q %q", ok, msg, sig, tc.msg, tc.sig)
			}
		})
	}
	if !HasLocalStorageLimits(pod) || HasLocalStorageLimits(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}) {
		t.Error("HasLocalStorageLimits")
	}
}
