package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/polymorphichelpers"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/localpath"
	"github.com/skiff-sh/skiff/internal/simulate"
)

// The DaemonSet and StatefulSet tests run the whole controller manager,
// the scheduler and simulated nodes in process, and drive the workloads
// with kubectl's own rollout code (polymorphichelpers), as a user would.

// rolloutStatus is `kubectl rollout status` once: its message and whether
// the rollout is done.
func rolloutStatus(t *testing.T, cs kubernetes.Interface, obj runtime.Object, kind string) (string, bool) {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := polymorphichelpers.StatusViewerFor(appsv1.SchemeGroupVersion.WithKind(kind).GroupKind())
	if err != nil {
		t.Fatal(err)
	}
	msg, done, err := viewer.Status(&unstructured.Unstructured{Object: u}, 0)
	if err != nil {
		return err.Error(), false
	}
	return msg, done
}

// waitRollout polls `kubectl rollout status` until done.
func waitRollout(t *testing.T, cs kubernetes.Interface, ns, kind, name string, timeout time.Duration) {
	t.Helper()
	ctx := testCtx(t, timeout+5*time.Second)
	var last string
	eventually(t, timeout, fmt.Sprintf("rollout status %s/%s", kind, name), func() (bool, error) {
		var obj runtime.Object
		var err error
		switch kind {
		case "DaemonSet":
			obj, err = cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		case "StatefulSet":
			obj, err = cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return false, err
		}
		msg, done := rolloutStatus(t, cs, obj, kind)
		if msg != last {
			t.Logf("rollout status %s: %s", name, strings.TrimSpace(msg))
			last = msg
		}
		return done, nil
	})
}

// podsByNode maps node names to the images of the live pods there.
func imagesByNode(t *testing.T, cs kubernetes.Interface, ns string) map[string][]string {
	out := map[string][]string{}
	for _, p := range livePodsOf(t, cs, ns) {
		out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Spec.Containers[0].Image)
	}
	return out
}

// rolloutRestart is `kubectl rollout restart`: kubectl's own patch (the
// restartedAt annotation on the template), applied as kubectl applies it.
func rolloutRestart(t *testing.T, cs kubernetes.Interface, obj runtime.Object) {
	t.Helper()
	patch, err := polymorphichelpers.ObjectRestarterFn(obj)
	if err != nil {
		t.Fatalf("rollout restart: %v", err)
	}
	m := obj.(metav1.Object)
	ctx := testCtx(t, 10*time.Second)
	switch obj.(type) {
	case *appsv1.DaemonSet:
		_, err = cs.AppsV1().DaemonSets(m.GetNamespace()).Patch(ctx, m.GetName(), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	case *appsv1.StatefulSet:
		_, err = cs.AppsV1().StatefulSets(m.GetNamespace()).Patch(ctx, m.GetName(), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		t.Fatalf("rollout restart patch: %v", err)
	}
}

// restartedPods waits until every live pod in ns carries the restartedAt
// annotation and there are n of them.
func waitRestarted(t *testing.T, cs kubernetes.Interface, ns string, n int) {
	t.Helper()
	eventually(t, 90*time.Second, "every pod restarted", func() (bool, error) {
		pods := livePodsOf(t, cs, ns)
		for _, p := range pods {
			if p.Annotations["kubectl.kubernetes.io/restartedAt"] == "" || p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return len(pods) == n, nil
	})
}

func TestDaemonSetE2E(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 4)
	runScheduler(t, c)
	runManager(t, c)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 4*time.Minute)

	one := intstr.FromInt32(1)
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:a"}}},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one}},
		},
	}
	if _, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every node gets one pod. (Daemon pods do not tolerate the not-ready
	// NoSchedule taint a new node starts with, as upstream: until the node
	// lifecycle controller lifts it, a node is not counted as desired, and
	// `rollout status` may call a DaemonSet of fewer nodes done.)
	eventually(t, 60*time.Second, "a pod available on each of the 4 nodes", func() (bool, error) {
		got, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, done := rolloutStatus(t, cs, got, "DaemonSet")
		return done && got.Status.DesiredNumberScheduled == 4 && got.Status.NumberAvailable == 4, nil
	})
	byNode := imagesByNode(t, cs, ns)
	if len(byNode) != 4 {
		t.Fatalf("pods by node = %v; want one on each of 4 nodes", byNode)
	}
	for node, images := range byNode {
		if len(images) != 1 || !strings.HasPrefix(node, "e2e-node-") {
			t.Errorf("node %q runs %v", node, images)
		}
	}

	// A node added later gets its pod.
	late := simulate.New(cs, simulate.Options{Nodes: 1, NamePrefix: "late-node-", StatusUpdateFrequency: time.Second, KeepNotReadyTaint: true})
	lateCtx, stopLate := context.WithCancel(context.Background())
	lateDone := make(chan error, 1)
	go func() { lateDone <- late.Start(lateCtx) }()
	t.Cleanup(func() { stopLate(); <-lateDone })
	eventually(t, 60*time.Second, "a pod on the late node", func() (bool, error) {
		got, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.DesiredNumberScheduled == 5 && got.Status.NumberAvailable == 5 && len(imagesByNode(t, cs, ns)["late-node-0"]) == 1, nil
	})

	// Roll to a new template: never more than maxUnavailable (1) nodes
	// without an available pod.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "agent:b"
		_, err = cs.AppsV1().DaemonSets(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	minAvailable := int32(5)
	eventually(t, 90*time.Second, "rolled to agent:b", func() (bool, error) {
		got, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.ObservedGeneration == got.Generation {
			minAvailable = min(minAvailable, got.Status.NumberAvailable)
		}
		_, done := rolloutStatus(t, cs, got, "DaemonSet")
		return done, nil
	})
	if minAvailable < 4 {
		t.Errorf("available pods dropped to %d during the rollout; maxUnavailable is 1 of 5", minAvailable)
	}
	for node, images := range imagesByNode(t, cs, ns) {
		if len(images) != 1 || images[0] != "agent:b" {
			t.Errorf("after the rollout node %s runs %v", node, images)
		}
	}

	// kubectl rollout history lists both revisions; undo goes back to a.
	hv, err := polymorphichelpers.HistoryViewerFor(appsv1.SchemeGroupVersion.WithKind("DaemonSet").GroupKind(), cs)
	if err != nil {
		t.Fatal(err)
	}
	history, err := hv.ViewHistory(ns, "agent", 0)
	if err != nil {
		t.Fatalf("rollout history: %v", err)
	}
	t.Logf("rollout history:\n%s", history)
	if !strings.Contains(history, "1 ") || !strings.Contains(history, "2 ") {
		t.Errorf("history lacks revisions 1 and 2:\n%s", history)
	}
	rb, err := polymorphichelpers.RollbackerFor(appsv1.SchemeGroupVersion.WithKind("DaemonSet").GroupKind(), cs)
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	msg, err := rb.Rollback(cur, nil, 0, cmdutil.DryRunNone)
	if err != nil {
		t.Fatalf("rollout undo: %v", err)
	}
	t.Logf("rollout undo: %s", msg)
	eventually(t, 90*time.Second, "rolled back to agent:a", func() (bool, error) {
		got, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if _, done := rolloutStatus(t, cs, got, "DaemonSet"); !done || got.Spec.Template.Spec.Containers[0].Image != "agent:a" {
			return false, nil
		}
		for _, images := range imagesByNode(t, cs, ns) {
			if len(images) != 1 || images[0] != "agent:a" {
				return false, nil
			}
		}
		return true, nil
	})
	revs, err := cs.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var numbers []int64
	for _, r := range revs.Items {
		numbers = append(numbers, r.Revision)
	}
	sort.Slice(numbers, func(i, j int) bool { return numbers[i] < numbers[j] })
	if fmt.Sprint(numbers) != "[2 3]" {
		t.Errorf("revision numbers after undo = %v; want [2 3] (a renumbered to 3)", numbers)
	}

	// kubectl rollout restart replaces every pod.
	cur, _ = cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	rolloutRestart(t, cs, cur)
	waitRestarted(t, cs, ns, 5)
	waitRollout(t, cs, ns, "DaemonSet", "agent", 60*time.Second)
}

func TestStatefulSetE2E(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 3)
	runScheduler(t, c)
	runManager(t, c)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 4*time.Minute)

	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](3),
			ServiceName: "web",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:a"}}},
			},
		},
	}
	// Watch the pods' creation order.
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Stop() }()
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, cs, ns, "StatefulSet", "web", 90*time.Second)
	var created, deleted []string
	collect := func(until func() bool) {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for !until() {
			select {
			case ev := <-w.ResultChan():
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				switch ev.Type {
				case "ADDED":
					created = append(created, p.Name)
				case "DELETED":
					deleted = append(deleted, p.Name)
				}
			case <-timeout:
				t.Fatalf("watch: created %v deleted %v", created, deleted)
			}
		}
	}
	collect(func() bool { return len(created) == 3 })
	if fmt.Sprint(created) != "[web-0 web-1 web-2]" {
		t.Errorf("pods created in order %v; want web-0, web-1, web-2", created)
	}
	for _, p := range livePodsOf(t, cs, ns) {
		if p.Spec.Hostname != p.Name || p.Spec.Subdomain != "web" || p.Labels["statefulset.kubernetes.io/pod-name"] != p.Name {
			t.Errorf("pod %s: hostname %q subdomain %q labels %v", p.Name, p.Spec.Hostname, p.Spec.Subdomain, p.Labels)
		}
	}

	// Roll to b, then undo with kubectl's rollback.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "web:b"
		_, err = cs.AppsV1().StatefulSets(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitImages := func(image string) {
		t.Helper()
		eventually(t, 90*time.Second, "every pod at "+image, func() (bool, error) {
			got, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if _, done := rolloutStatus(t, cs, got, "StatefulSet"); !done {
				return false, nil
			}
			pods := livePodsOf(t, cs, ns)
			for _, p := range pods {
				if p.Spec.Containers[0].Image != image {
					return false, nil
				}
			}
			return len(pods) == 3, nil
		})
	}
	waitImages("web:b")
	rb, err := polymorphichelpers.RollbackerFor(appsv1.SchemeGroupVersion.WithKind("StatefulSet").GroupKind(), cs)
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
	msg, err := rb.Rollback(cur, nil, 0, cmdutil.DryRunNone)
	if err != nil {
		t.Fatalf("rollout undo: %v", err)
	}
	t.Logf("rollout undo: %s", msg)
	waitImages("web:a")

	// kubectl rollout restart replaces every pod.
	cur, _ = cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
	rolloutRestart(t, cs, cur)
	waitRestarted(t, cs, ns, 3)
	waitRollout(t, cs, ns, "StatefulSet", "web", 60*time.Second)

	// Scale down to 1: web-2 goes before web-1. A new watch from the
	// current resource version, so the rollouts' deletions are not counted.
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if w, err = cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	created, deleted = nil, nil
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := cs.AppsV1().StatefulSets(ns).GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = 1
		_, err = cs.AppsV1().StatefulSets(ns).UpdateScale(ctx, "web", s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	collect(func() bool { return len(deleted) == 2 })
	if fmt.Sprint(deleted) != "[web-2 web-1]" {
		t.Errorf("pods deleted in order %v; want web-2, web-1", deleted)
	}
}

func TestStatefulSetClaimsE2E(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 2)
	runLocalPath(t, cs, "e2e-node-0", "e2e-node-1") // the claims' volumes (storage_test.go)
	runScheduler(t, c)
	runManager(t, c)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 2*time.Minute)
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](2),
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:a",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}},
			},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What a user sees: the claim data-db-0 exists before (and is mounted
	// by) the pod db-0; the pod runs once local-path has made its volume.
	eventually(t, 60*time.Second, "claim data-db-0 and pod db-0", func() (bool, error) {
		pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if pvc.Labels["app"] != "db" {
			return false, fmt.Errorf("claim labels %v", pvc.Labels)
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == "data" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "data-db-0" {
				return true, nil
			}
		}
		return false, fmt.Errorf("pod volumes %v", pod.Spec.Volumes)
	})

	// The retention policy, through ownerReferences the garbage collector
	// acts on: scaled down, data-db-1 goes with db-1; the set deleted,
	// data-db-0 goes with it.
	claimGone := func(name string) func() (bool, error) {
		return func() (bool, error) {
			_, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}
	}
	eventually(t, 60*time.Second, "claim data-db-1 exists", func() (bool, error) {
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-1", metav1.GetOptions{})
		return err == nil, nil
	})
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := cs.AppsV1().StatefulSets(ns).GetScale(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = 1
		_, err = cs.AppsV1().StatefulSets(ns).UpdateScale(ctx, "db", s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "data-db-1 deleted after the scale down", claimGone("data-db-1"))
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("data-db-0 after the scale down: %v", err)
	}
	if ref := metav1.GetControllerOf(pvc); ref == nil || ref.Kind != "StatefulSet" || ref.Name != "db" {
		t.Errorf("data-db-0 owners %v; want the StatefulSet as controller", pvc.OwnerReferences)
	}
	if err := cs.AppsV1().StatefulSets(ns).Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "data-db-0 deleted with the set", claimGone("data-db-0"))
}

// TestStatefulSetClaimCannotBeProvisioned: the bad input. A
// StatefulSet whose claims name a StorageClass that does not exist gets
// the binder's ProvisioningFailed event on the claim and a Pending pod
// whose PodScheduled condition says why, not a silent hang; once the class
// is created the same pod is scheduled, its volume provisioned, and it
// runs.
func TestStatefulSetClaimCannotBeProvisioned(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 2)
	runLocalPath(t, cs, "e2e-node-0", "e2e-node-1")
	runScheduler(t, c)
	runManager(t, c)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 2*time.Minute)
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](1),
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:a",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: ptr.To("fast"),
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ctx, cs, ns, "data-db-0", "ProvisioningFailed")
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=data-db-0,reason=ProvisioningFailed"})
	if err != nil || len(evs.Items) == 0 || evs.Items[0].Type != corev1.EventTypeWarning || evs.Items[0].Message != `storageclass.storage.k8s.io "fast" not found` {
		t.Errorf("ProvisioningFailed events %+v, %v; want the Warning %q", evs, err, `storageclass.storage.k8s.io "fast" not found`)
	}
	var why string
	eventually(t, 60*time.Second, "db-0 Pending with the scheduler's reason", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				why = cond.Message
				return p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "", nil
			}
		}
		return false, nil
	})
	if !strings.Contains(why, "pod has unbound immediate PersistentVolumeClaims") {
		t.Errorf("db-0's PodScheduled message %q does not name the unbound claim", why)
	}
	if !hasEventFor(ctx, cs, ns, "db-0", "FailedScheduling") {
		t.Errorf("no FailedScheduling event for db-0")
	}

	// The class appears: the scheduler tries again, local-path provisions
	// on the chosen node, the pod runs.
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "fast"},
		Provisioner:       localpath.ProvisionerName,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.StorageV1().StorageClasses().Delete(context.Background(), "fast", metav1.DeleteOptions{})
	})
	eventually(t, 90*time.Second, "db-0 Running with its claim bound", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, nil
	})
}
