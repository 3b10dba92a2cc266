package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestKubeletEvictsEmptyDirOverSizeLimit: a pod that writes more into its
// disk-backed emptyDir than the volume's sizeLimit is evicted by the
// kubelet (a real eviction that touches only this pod): phase Failed,
// reason Evicted, upstream's message, an Evicted event, its container
// stopped.
func TestKubeletEvictsEmptyDirOverSizeLimit(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "kubelet-eviction")
	p := busyboxPod(ns, "filler", c.image, "sh", "-c", "dd if=/dev/zero of=/scratch/fill bs=1M count=3 && sync && sleep 3600")
	size := resource.MustParse("1Mi")
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	c.create(t, p)
	got := c.waitPod(t, ns, "filler", 60*time.Second, "evicted", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	want := `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `
	if got.Status.Reason != "Evicted" || got.Status.Message != want {
		t.Errorf("status reason %q message %q, want Evicted %q", got.Status.Reason, got.Status.Message, want)
	}
	if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
		t.Errorf("container statuses %+v, want the container terminated", cs)
	}
	waitFor(t, 10*time.Second, "an Evicted event", func() bool { return c.hasEvent(ns, "filler", "Evicted", want) })
	waitFor(t, 10*time.Second, "the container stopped", func() bool { return c.runningContainers(t, got.UID) == 0 })
}
