package integration

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// TestPodResizeSubresource drives pods/resize as kubectl (`patch
// --subresource resize`, a strategic merge patch and a JSON patch) and
// client-go's UpdateResize do: resources change and the generation grows,
// anything else in the request is ignored, bad resizes are 422 with
// upstream's field paths, one beyond the node's allocatable is 403
// (PodResizeValidator), and a plain update may not touch resources.
func TestPodResizeSubresource(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cs := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, cs)

	node := newNode("resize-node")
	node, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: mustQuantity("2"), corev1.ResourceMemory: mustQuantity("4Gi"), corev1.ResourcePods: mustQuantity("110")}
	node.Status.Capacity = node.Status.Allocatable
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	original := newPod("web")
	original.Spec.NodeName = "resize-node"
	original.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("20m"), corev1.ResourceMemory: mustQuantity("35Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: mustQuantity("30m"), corev1.ResourceMemory: mustQuantity("45Mi")},
	}
	original.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, original, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// A two-way strategic merge patch, as the conformance tests make it.
	desired := original.DeepCopy()
	desired.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = mustQuantity("25m")
	desired.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = mustQuantity("35m")
	from, _ := json.Marshal(original)
	to, _ := json.Marshal(desired)
	patch, err := strategicpatch.CreateTwoWayMergePatch(from, to, corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Pods(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
	if err != nil {
		t.Fatalf("patch pods/resize: %v", err)
	}
	if q := got.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; q.String() != "35m" || got.Generation != pod.Generation+1 {
		t.Errorf("after resize: cpu limit %s, generation %d; want 35m, %d", q.String(), got.Generation, pod.Generation+1)
	}
	found := false
	for _, mf := range got.ManagedFields {
		found = found || mf.Subresource == "resize"
	}
	if !found {
		t.Errorf("no managedFields entry for the resize subresource: %+v", got.ManagedFields)
	}

	// A JSON patch, as `kubectl patch --type json --subresource resize`.
	got, err = cs.CoreV1().Pods(ns).Patch(ctx, "web", types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/spec/containers/0/resources/requests/memory","value":"40Mi"}]`), metav1.PatchOptions{}, "resize")
	if err != nil {
		t.Fatalf("JSON patch pods/resize: %v", err)
	}
	if q := got.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; q.String() != "40Mi" {
		t.Errorf("memory request %s, want 40Mi", q.String())
	}

	// UpdateResize: only resources are taken from the body.
	want := got.DeepCopy()
	want.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = mustQuantity("30m")
	want.Spec.Containers[0].Image = "other"
	want.Labels["app"] = "changed"
	got, err = cs.CoreV1().Pods(ns).UpdateResize(ctx, "web", want, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("UpdateResize: %v", err)
	}
	if q := got.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "30m" || got.Spec.Containers[0].Image != "busybox" || got.Labels["app"] != "it" {
		t.Errorf("after UpdateResize: cpu %s, image %q, label %q; want 30m, busybox, it", q.String(), got.Spec.Containers[0].Image, got.Labels["app"])
	}
	// A stale resourceVersion is a conflict.
	if _, err := cs.CoreV1().Pods(ns).UpdateResize(ctx, "web", want, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale UpdateResize: %v, want 409", err)
	}

	// Refusals: 422 with the field path and upstream's message.
	for _, tc := range []struct {
		name, patch, want string
	}{
		{"QoS class change", `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"35m","memory":"45Mi"}}}]}}`,
			"Pod QOS Class may not change as a result of resizing"},
		{"limits removed", `{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":null}}}]}}`,
			"spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed"},
		{"not cpu or memory", `{"spec":{"containers":[{"name":"c","resources":{"requests":{"ephemeral-storage":"1Gi"}}}]}}`,
			"spec: Forbidden: only cpu and memory resources are mutable"},
		{"request above limit", `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}`,
			"spec.containers[0].resources.requests[cpu]: Invalid value: \"1\": must be less than or equal to cpu limit of 35m"},
	} {
		_, err := cs.CoreV1().Pods(ns).Patch(ctx, "web", types.StrategicMergePatchType, []byte(tc.patch), metav1.PatchOptions{}, "resize")
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want 422 with %q", tc.name, err, tc.want)
		}
	}

	// Beyond the node: 403 with the NodeCapacity cause.
	_, err = cs.CoreV1().Pods(ns).Patch(ctx, "web", types.StrategicMergePatchType,
		[]byte(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"3"},"limits":{"cpu":"3"}}}]}}`), metav1.PatchOptions{}, "resize")
	var se *apierrors.StatusError
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "node didn't have enough allocatable resources: cpu, requested: 3000, allocatable: 2000") ||
		!errors.As(err, &se) || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) == 0 || se.ErrStatus.Details.Causes[0].Type != "NodeCapacity" {
		t.Errorf("resize beyond the node: %v, want 403 NodeCapacity", err)
	}

	// A plain update may not change resources.
	if got, err = cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	plain := got.DeepCopy()
	plain.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = mustQuantity("22m")
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, plain, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "pod updates may not change fields") {
		t.Errorf("pod update changing resources: %v, want 422", err)
	}

	// GET of the subresource is the pod.
	var viaSub corev1.Pod
	if err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name("web").SubResource("resize").Do(ctx).Into(&viaSub); err != nil {
		t.Fatal(err)
	}
	if viaSub.Name != "web" || viaSub.ResourceVersion != got.ResourceVersion {
		t.Errorf("GET pods/resize: %s at %s, want web at %s", viaSub.Name, viaSub.ResourceVersion, got.ResourceVersion)
	}

	// Discovery lists pods/resize with its verbs.
	list, err := cs.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, r := range list.APIResources {
		if r.Name == "pods/resize" {
			verbs = r.Verbs
		}
	}
	if strings.Join(verbs, ",") != "get,patch,update" {
		t.Errorf("discovery pods/resize verbs %v, want get,patch,update", verbs)
	}
}
