package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestEphemeralContainersSubresource drives pods/ephemeralcontainers as
// kubectl debug does (a strategic merge patch) and through client-go's
// UpdateEphemeralContainers: containers are added with defaults, the rest
// of the pod is left alone, and removing or changing one is refused.
func TestEphemeralContainersSubresource(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cs := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, cs)

	pod, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"ephemeralContainers": []map[string]any{{
		"name": "debugger-1", "image": "busybox", "stdin": true, "tty": true, "targetContainerName": pod.Spec.Containers[0].Name,
	}}}})
	got, err := cs.CoreV1().Pods(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "ephemeralcontainers")
	if err != nil {
		t.Fatalf("patch pods/ephemeralcontainers: %v", err)
	}
	if len(got.Spec.EphemeralContainers) != 1 {
		t.Fatalf("ephemeral containers %+v", got.Spec.EphemeralContainers)
	}
	ec := got.Spec.EphemeralContainers[0]
	if ec.Name != "debugger-1" || ec.TargetContainerName != pod.Spec.Containers[0].Name || ec.TerminationMessagePolicy != corev1.TerminationMessageReadFile || ec.ImagePullPolicy == "" {
		t.Errorf("ephemeral container %+v: want the request with defaults", ec)
	}
	if got.Generation <= pod.Generation {
		t.Errorf("generation %d, want above %d", got.Generation, pod.Generation)
	}

	// Through the typed client: add a second one; other changes in the
	// body are ignored.
	want := got.DeepCopy()
	want.Spec.EphemeralContainers = append(want.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger-2", Image: "busybox", Command: []string{"sh"}}})
	want.Spec.Containers[0].Image = "other"
	got, err = cs.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, "web", want, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update pods/ephemeralcontainers: %v", err)
	}
	if len(got.Spec.EphemeralContainers) != 2 || got.Spec.Containers[0].Image != pod.Spec.Containers[0].Image {
		t.Errorf("after update: %d ephemeral containers, image %q", len(got.Spec.EphemeralContainers), got.Spec.Containers[0].Image)
	}

	// Removing one is refused with 422 and upstream's message.
	remove := got.DeepCopy()
	remove.Spec.EphemeralContainers = remove.Spec.EphemeralContainers[:1]
	_, err = cs.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, "web", remove, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `existing ephemeral containers "debugger-2" may not be removed`) {
		t.Errorf("removal: %v, want 422 may not be removed", err)
	}
	// A stale resourceVersion is a conflict.
	_, err = cs.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, "web", want, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v, want 409", err)
	}
	// A plain pod update may not add one.
	plain := got.DeepCopy()
	plain.Spec.EphemeralContainers = append(plain.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "sneaky", Image: "busybox"}})
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, plain, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("pod update adding an ephemeral container: %v, want 422", err)
	}
	// GET of the subresource is the pod.
	var viaSub corev1.Pod
	if err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name("web").SubResource("ephemeralcontainers").Do(ctx).Into(&viaSub); err != nil {
		t.Fatal(err)
	}
	if viaSub.Name != "web" || len(viaSub.Spec.EphemeralContainers) != 2 {
		t.Errorf("GET pods/ephemeralcontainers: %s with %d", viaSub.Name, len(viaSub.Spec.EphemeralContainers))
	}
}
