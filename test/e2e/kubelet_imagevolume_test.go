package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeletImageVolume: a pod mounts an image as a read-only volume (the
// whole image, and a subPath of it), as upstream's ImageVolume conformance
// test does; an image volume whose image is missing with pull policy Never
// keeps its container waiting with ErrImageNeverPull, and the API server
// defaults and validates the volume's pull policy.
func TestKubeletImageVolume(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "kubelet-imagevolume")
	ctx := context.Background()

	p := busyboxPod(ns, "mounted", c.image, "sh", "-c", "exec sleep 3600")
	p.Spec.Volumes = []corev1.Volume{{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: c.image}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "img", MountPath: "/volume"},
		{Name: "img", MountPath: "/volume-bin", SubPath: "bin"},
	}
	created := c.create(t, p)
	if got := created.Spec.Volumes[0].Image.PullPolicy; got != corev1.PullIfNotPresent {
		t.Errorf("image volume pull policy defaulted to %q, want IfNotPresent", got)
	}
	c.waitPod(t, ns, "mounted", 60*time.Second, "Running", podRunningReady)
	exec := func(args ...string) (string, string, error) {
		return kubectlResult(c.kubeconfig, "", append([]string{"-n", ns, "exec", "mounted", "--"}, args...)...)
	}
	if out, errOut, err := exec("ls", "/volume/bin/busybox", "/volume-bin/busybox"); err != nil {
		t.Fatalf("the image's files are not in the volume: %v %s %s", err, out, errOut)
	}
	if _, errOut, err := exec("touch", "/volume/new"); err == nil || !strings.Contains(errOut, "Read-only file system") {
		t.Errorf("writing into the image volume: err %v, %q; want a read-only file system", err, errOut)
	}

	missing := busyboxPod(ns, "missing", c.image, "sleep", "3600")
	missing.Spec.Volumes = []corev1.Volume{{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
		Reference: "registry.invalid/skiff/absent:1", PullPolicy: corev1.PullNever}}}}
	missing.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "img", MountPath: "/volume"}}
	c.create(t, missing)
	c.waitPod(t, ns, "missing", 60*time.Second, "ErrImageNeverPull", func(p *corev1.Pod) bool { return waiting(p, "ErrImageNeverPull") })
	waitFor(t, 10*time.Second, "the pod's ErrImageNeverPull event", func() bool {
		return c.hasEvent(ns, "missing", "ErrImageNeverPull", `Container image "registry.invalid/skiff/absent:1" is not present with pull policy of Never`)
	})

	bad := busyboxPod(ns, "bad", c.image, "sleep", "3600")
	bad.Spec.Volumes = []corev1.Volume{{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{PullPolicy: "Sometimes"}}}}
	_, err := c.client.CoreV1().Pods(ns).Create(ctx, bad, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.volumes[0].image.reference: Required value") ||
		!strings.Contains(err.Error(), `spec.volumes[0].image.pullPolicy: Unsupported value: "Sometimes"`) {
		t.Errorf("invalid image volume: %v", err)
	}
}
