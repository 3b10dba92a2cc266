package integration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func newDeployment(name string, containers ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: podTemplate(name),
	}}
	if len(containers) > 0 {
		d.Spec.Template.Spec.Containers = nil
		for _, c := range containers {
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
		}
	}
	return d
}

// testDeploymentGenerationStatusScale: generation moves with the spec
// only; status and spec change only through their own endpoints; scale
// reads and writes spec.replicas.
func testDeploymentGenerationStatusScale(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	dc := cs.AppsV1().Deployments(ns)

	d, err := dc.Create(ctx, newDeployment("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if d.Generation != 1 {
		t.Errorf("generation after create = %d, want 1", d.Generation)
	}

	// a metadata change keeps the generation
	d.Labels = map[string]string{"tier": "web"}
	d, err = dc.Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update labels: %v", err)
	}
	if d.Generation != 1 {
		t.Errorf("generation after a label change = %d, want 1", d.Generation)
	}

	// a spec change bumps it
	d.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	d, err = dc.Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update spec: %v", err)
	}
	if d.Generation != 2 {
		t.Errorf("generation after a spec change = %d, want 2", d.Generation)
	}

	// an update of the main resource ignores status
	d.Status.Replicas = 7
	d, err = dc.Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update with status: %v", err)
	}
	if d.Status.Replicas != 0 {
		t.Errorf("main-resource update wrote status.replicas = %d, want 0", d.Status.Replicas)
	}

	// status update writes status, ignores spec, keeps generation
	d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, ObservedGeneration: d.Generation}
	d.Spec.Replicas = ptr.To[int32](9)
	d, err = dc.UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if d.Status.Replicas != 1 || d.Status.ReadyReplicas != 1 || *d.Spec.Replicas != 1 || d.Generation != 2 {
		t.Errorf("after status update: status.replicas %d ready %d spec.replicas %d generation %d; want 1 1 1 2",
			d.Status.Replicas, d.Status.ReadyReplicas, *d.Spec.Replicas, d.Generation)
	}

	// scale
	sc, err := dc.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if sc.Spec.Replicas != 1 || sc.Status.Replicas != 1 || sc.Name != "web" || sc.Namespace != ns {
		t.Errorf("scale = %+v; want web/%s with spec and status replicas 1", sc, ns)
	}
	if sc.Status.Selector != "app=web" {
		t.Errorf("scale status.selector = %q, want app=web", sc.Status.Selector)
	}
	sc.Spec.Replicas = 3
	if _, err := dc.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	d, err = dc.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if *d.Spec.Replicas != 3 || d.Generation != 3 {
		t.Errorf("after scale to 3: spec.replicas %d generation %d, want 3 and 3", *d.Spec.Replicas, d.Generation)
	}
	// a scale with a stale resourceVersion conflicts
	if _, err := dc.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update scale with stale resourceVersion: err %v, want Conflict", err)
	}
	// patching scale
	if _, err := dc.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("patch scale: %v", err)
	}
	d, _ = dc.Get(ctx, "web", metav1.GetOptions{})
	if *d.Spec.Replicas != 5 {
		t.Errorf("after scale patch: spec.replicas %d, want 5", *d.Spec.Replicas)
	}
	// a negative scale is invalid
	bad := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: -1}}
	if _, err := dc.UpdateScale(ctx, "web", bad, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("scale to -1: err %v, want Invalid", err)
	}
}

// testStrategicMergePatch: a strategic merge patch merges a list by its
// merge key where a merge patch replaces it.
func testStrategicMergePatch(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	dc := cs.AppsV1().Deployments(ns)
	for _, name := range []string{"smp", "merge"} {
		if _, err := dc.Create(ctx, newDeployment(name, "a", "b"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	body := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"busybox:2"}]}}}}`)
	tests := []struct {
		name string
		pt   types.PatchType
		want map[string]string // container name -> image
	}{
		{"smp", types.StrategicMergePatchType, map[string]string{"a": "busybox:2", "b": "busybox"}},
		{"merge", types.MergePatchType, map[string]string{"a": "busybox:2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := dc.Patch(ctx, tc.name, tc.pt, body, metav1.PatchOptions{})
			if err != nil {
				t.Fatalf("patch: %v", err)
			}
			got := map[string]string{}
			for _, c := range d.Spec.Template.Spec.Containers {
				got[c.Name] = c.Image
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("containers after %s (-want +got):\n%s", tc.pt, diff)
			}
		})
	}
	// a patch to an object that does not exist is NotFound
	if _, err := dc.Patch(ctx, "missing", types.StrategicMergePatchType, body, metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("patch missing: err %v, want NotFound", err)
	}
	// a malformed JSON patch is a 400 or 422, never a write
	if _, err := dc.Patch(ctx, "smp", types.JSONPatchType, []byte(`[{"op":"frobnicate"}]`), metav1.PatchOptions{}); !apierrors.IsBadRequest(err) && !apierrors.IsInvalid(err) {
		t.Errorf("bad json patch: err %v, want BadRequest", err)
	}
}

// testNodeStatus: status changes only through nodes/status.
func testNodeStatus(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ctx := testCtx(t, 20*time.Second)
	nc := cs.CoreV1().Nodes()
	n, err := nc.Create(ctx, newNode("status-node"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
	n.Status.Conditions = []corev1.NodeCondition{ready}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: mustQuantity("4"), corev1.ResourcePods: mustQuantity("110")}

	// an update of the node does not write status
	updated, err := nc.Update(ctx, n.DeepCopy(), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if len(updated.Status.Conditions) != 0 {
		t.Errorf("main-resource update wrote status conditions %v", updated.Status.Conditions)
	}
	n.ResourceVersion = updated.ResourceVersion
	n.Spec.Unschedulable = true // ignored by the status update
	got, err := nc.UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != corev1.NodeReady || got.Spec.Unschedulable {
		t.Errorf("after status update: conditions %v unschedulable %v; want Ready and false", got.Status.Conditions, got.Spec.Unschedulable)
	}
	if q := got.Status.Capacity[corev1.ResourcePods]; q.Value() != 110 {
		t.Errorf("capacity pods = %v, want 110", q.String())
	}
	// merge patch of status (what the kubelet does)
	p := []byte(`{"status":{"nodeInfo":{"kubeletVersion":"v1.37.2"}}}`)
	got, err = nc.PatchStatus(ctx, "status-node", p)
	if err != nil {
		t.Fatalf("patch status: %v", err)
	}
	if got.Status.NodeInfo.KubeletVersion != "v1.37.2" || len(got.Status.Conditions) != 1 {
		t.Errorf("after status patch: kubeletVersion %q conditions %d", got.Status.NodeInfo.KubeletVersion, len(got.Status.Conditions))
	}
}

// testNamespaceStatusFinalize: delete marks a namespace Terminating; its
// spec finalizers are removed only through finalize, after which it goes.
func testNamespaceStatusFinalize(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ctx := testCtx(t, 20*time.Second)
	nc := cs.CoreV1().Namespaces()
	ns, err := nc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("phase = %q, want Active", ns.Status.Phase)
	}
	if diff := cmp.Diff([]corev1.FinalizerName{corev1.FinalizerKubernetes}, ns.Spec.Finalizers); diff != "" {
		t.Errorf("spec.finalizers (-want +got):\n%s", diff)
	}
	if ns.Labels[corev1.LabelMetadataName] != "doomed" {
		t.Errorf("labels = %v, want %s=doomed", ns.Labels, corev1.LabelMetadataName)
	}

	// status update: conditions written
	ns.Status.Conditions = []corev1.NamespaceCondition{{Type: corev1.NamespaceDeletionDiscoveryFailure, Status: corev1.ConditionFalse, Reason: "ResourcesDiscovered"}}
	ns, err = nc.UpdateStatus(ctx, ns, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if len(ns.Status.Conditions) != 1 {
		t.Errorf("conditions after status update = %v", ns.Status.Conditions)
	}
	// an update cannot drop spec.finalizers
	ns.Spec.Finalizers = nil
	ns, err = nc.Update(ctx, ns, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if len(ns.Spec.Finalizers) != 1 {
		t.Errorf("update removed spec.finalizers: %v", ns.Spec.Finalizers)
	}

	// delete: Terminating, kept
	if err := nc.Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	ns, err = nc.Get(ctx, "doomed", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after delete: %v", err)
	}
	if ns.DeletionTimestamp == nil || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("after delete: deletionTimestamp %v phase %q; want set and Terminating", ns.DeletionTimestamp, ns.Status.Phase)
	}
	// creating in a terminating namespace is forbidden
	_, err = cs.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create in terminating namespace: err %v, want Forbidden", err)
	}

	// finalize: empty spec.finalizers, the namespace is removed
	ns.Spec.Finalizers = nil
	if _, err := nc.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	eventually(t, 5*time.Second, "namespace gone after finalize", func() (bool, error) {
		_, err := nc.Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	if _, _, found := etcdGet(t, c, "/registry/namespaces/doomed"); found {
		t.Errorf("etcd still holds /registry/namespaces/doomed")
	}
}
