package integration

import (
	"github.com/google/go-cmp/cmp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// testGenerateNameUIDTimestamp: the server names, identifies and dates
// new objects.
func testGenerateNameUIDTimestamp(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	before := time.Now().Add(-time.Second)
	seen := map[string]bool{}
	uids := map[types.UID]bool{}
	for i := 0; i < 3; i++ {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if !strings.HasPrefix(cm.Name, "gen-") || len(cm.Name) != len("gen-")+5 {
			t.Errorf("generated name %q, want gen- and 5 random characters", cm.Name)
		}
		if seen[cm.Name] || uids[cm.UID] {
			t.Errorf("name %q or uid %q repeated", cm.Name, cm.UID)
		}
		seen[cm.Name], uids[cm.UID] = true, true
		if cm.UID == "" || len(cm.UID) != 36 {
			t.Errorf("uid %q, want a UUID", cm.UID)
		}
		if ts := cm.CreationTimestamp.Time; ts.Before(before) || ts.After(time.Now().Add(time.Second)) {
			t.Errorf("creationTimestamp %v, want about now", ts)
		}
		if cm.GenerateName != "gen-" {
			t.Errorf("generateName = %q, want kept", cm.GenerateName)
		}
		if _, _, found := etcdGet(t, c, "/registry/configmaps/"+ns+"/"+cm.Name); !found {
			t.Errorf("configmap %s not stored at its upstream key", cm.Name)
		}
	}
	// a client cannot choose uid or creationTimestamp
	old := metav1.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "chosen", UID: "not-a-uuid", CreationTimestamp: old}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if cm.UID == "not-a-uuid" || cm.CreationTimestamp.Equal(&old) {
		t.Errorf("server kept client-set uid %q / creationTimestamp %v", cm.UID, cm.CreationTimestamp)
	}
}

// testDryRun: dryRun=All answers as the write would, and writes nothing.
func testDryRun(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	cms := cs.CoreV1().ConfigMaps(ns)
	dry := []string{metav1.DryRunAll}
	key := "/registry/configmaps/" + ns + "/"

	// create
	before := nsSnapshot(t, c, ns)
	got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{DryRun: dry})
	if err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	if got.Name != "dry" || got.Data["k"] != "v" {
		t.Errorf("dry-run create returned %s %v", got.Name, got.Data)
	}
	if _, _, found := etcdGet(t, c, key+"dry"); found {
		t.Errorf("dry-run create stored %sdry", key)
	}
	if diff := cmp.Diff(before, nsSnapshot(t, c, ns)); diff != "" {
		t.Errorf("a dry-run create changed etcd (-before +after):\n%s", diff)
	}
	if _, err := cms.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after dry-run create: err %v, want NotFound", err)
	}
	// a dry-run service create allocates no IP for good
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dry"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, ClusterIP: "10.43.200.200"}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{DryRun: dry}); err != nil {
		t.Fatalf("dry-run service create: %v", err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc.DeepCopy(), metav1.CreateOptions{}); err != nil {
		t.Errorf("create of the IP a dry run asked for: %v (the dry run kept the allocation)", err)
	}

	// update, patch, delete of a real object
	real, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "real"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	val, mod, _ := etcdGet(t, c, key+"real")
	before = nsSnapshot(t, c, ns)
	checkUnchanged := func(op string) {
		t.Helper()
		v, m, found := etcdGet(t, c, key+"real")
		if !found || m != mod || string(v) != string(val) {
			t.Errorf("%s with dryRun changed etcd: found %v modRevision %d (was %d)", op, found, m, mod)
		}
		if diff := cmp.Diff(before, nsSnapshot(t, c, ns)); diff != "" {
			t.Errorf("%s with dryRun changed etcd (-before +after):\n%s", op, diff)
		}
	}
	upd := real.DeepCopy()
	upd.Data["k"] = "changed"
	got, err = cms.Update(ctx, upd, metav1.UpdateOptions{DryRun: dry})
	if err != nil {
		t.Fatalf("dry-run update: %v", err)
	}
	if got.Data["k"] != "changed" {
		t.Errorf("dry-run update returned data %v, want the updated object", got.Data)
	}
	checkUnchanged("update")
	got, err = cms.Patch(ctx, "real", types.MergePatchType, []byte(`{"data":{"k":"patched"}}`), metav1.PatchOptions{DryRun: dry})
	if err != nil {
		t.Fatalf("dry-run patch: %v", err)
	}
	if got.Data["k"] != "patched" {
		t.Errorf("dry-run patch returned data %v", got.Data)
	}
	checkUnchanged("patch")
	if err := cms.Delete(ctx, "real", metav1.DeleteOptions{DryRun: dry}); err != nil {
		t.Fatalf("dry-run delete: %v", err)
	}
	checkUnchanged("delete")
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{DryRun: dry}, metav1.ListOptions{}); err != nil {
		t.Fatalf("dry-run deletecollection: %v", err)
	}
	checkUnchanged("deletecollection")
	// an unknown dryRun value is a 400
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{DryRun: []string{"Some"}})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("dryRun=Some: err %v, want BadRequest", err)
	}
}

// testFinalizers: delete marks an object with finalizers and keeps it;
// removing the last finalizer removes it.
func testFinalizers(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	cms := cs.CoreV1().ConfigMaps(ns)
	key := "/registry/configmaps/" + ns + "/held"
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/a", "example.com/b"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := cms.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	cm, err := cms.Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after delete: %v (want the object kept)", err)
	}
	if cm.DeletionTimestamp == nil {
		t.Fatalf("deletionTimestamp not set after delete")
	}
	if _, _, found := etcdGet(t, c, key); !found {
		t.Errorf("etcd lost %s while finalizers remain", key)
	}
	// a second delete changes nothing
	first := *cm.DeletionTimestamp
	if err := cms.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	cm, _ = cms.Get(ctx, "held", metav1.GetOptions{})
	if cm == nil || !cm.DeletionTimestamp.Equal(&first) {
		t.Errorf("second delete moved deletionTimestamp from %v", first)
	}
	// no new finalizer once deleting
	cm.Finalizers = append(cm.Finalizers, "example.com/c")
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("adding a finalizer to a deleting object: err %v, want 422 Invalid", err)
	}
	// remove one: kept
	cm, _ = cms.Get(ctx, "held", metav1.GetOptions{})
	cm.Finalizers = []string{"example.com/b"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("remove finalizer a: %v", err)
	}
	if _, err := cms.Get(ctx, "held", metav1.GetOptions{}); err != nil {
		t.Errorf("get with one finalizer left: %v", err)
	}
	// remove the last with a JSON patch: gone
	if _, err := cms.Patch(ctx, "held", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("remove last finalizer: %v", err)
	}
	if _, err := cms.Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after last finalizer removed: err %v, want NotFound", err)
	}
	if _, _, found := etcdGet(t, c, key); found {
		t.Errorf("etcd still holds %s", key)
	}
}

// bindPod creates a node (if needed) and binds pod to it through
// pods/binding.
func bindPod(t *testing.T, c *cluster, ns, pod, node string) {
	t.Helper()
	cs := c.Clientset()
	ctx := testCtx(t, 10*time.Second)
	if _, err := cs.CoreV1().Nodes().Create(ctx, newNode(node), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create node: %v", err)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := cs.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind %s to %s: %v", pod, node, err)
	}
}

// testBinding: a pod binds once; a second binding conflicts.
func testBinding(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	pods := cs.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, newPod("p"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	nodeA, nodeB := ns+"-a", ns+"-b"
	bindPod(t, c, ns, "p", nodeA)
	p, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if p.Spec.NodeName != nodeA {
		t.Errorf("spec.nodeName = %q, want %s", p.Spec.NodeName, nodeA)
	}
	var scheduled *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			scheduled = &p.Status.Conditions[i]
		}
	}
	if scheduled == nil || scheduled.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled condition = %+v, want True", scheduled)
	}
	_, mod, _ := etcdGet(t, c, "/registry/pods/"+ns+"/p")
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: nodeB}}
	err = pods.Bind(ctx, b, metav1.CreateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("second binding: err %v, want 409 Conflict", err)
	}
	if _, m, _ := etcdGet(t, c, "/registry/pods/"+ns+"/p"); m != mod {
		t.Errorf("rejected binding rewrote the pod (modRevision %d -> %d)", mod, m)
	}
	p, _ = pods.Get(ctx, "p", metav1.GetOptions{})
	if p.Spec.NodeName != nodeA {
		t.Errorf("after rejected binding spec.nodeName = %q, want %s", p.Spec.NodeName, nodeA)
	}
	// binding a pod that does not exist is NotFound
	b.Name = "missing"
	if err := pods.Bind(ctx, b, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("binding a missing pod: err %v, want NotFound", err)
	}
	// spec.nodeName cannot change through an update
	p.Spec.NodeName = nodeB
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("update of spec.nodeName: err %v, want 422 Invalid", err)
	}
}

// testGracefulPodDeletion: deleting a pod bound to a node keeps it for its
// grace period; a delete with grace 0 or the end of the period removes it.
func testGracefulPodDeletion(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	pods := cs.CoreV1().Pods(ns)
	for _, name := range []string{"forced", "waited"} {
		if _, err := pods.Create(ctx, newPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		bindPod(t, c, ns, name, ns+"-a")
	}
	// an unbound pod goes at once whatever the grace period
	if _, err := pods.Create(ctx, newPod("unbound"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := pods.Delete(ctx, "unbound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatalf("delete unbound: %v", err)
	}
	if _, err := pods.Get(ctx, "unbound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unbound pod after delete: err %v, want NotFound", err)
	}

	var waitedUntil time.Time // the deletionTimestamp of "waited"
	for _, name := range []string{"forced", "waited"} {
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](2)}); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s right after a graceful delete: %v (want it kept)", name, err)
		}
		if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 2 {
			t.Fatalf("%s: deletionTimestamp %v deletionGracePeriodSeconds %v; want set and 2", name, p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
		}
		waitedUntil = p.DeletionTimestamp.Time
	}
	// the kubelet confirms with grace 0: gone now
	if err := pods.Delete(ctx, "forced", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatalf("delete with grace 0: %v", err)
	}
	if _, err := pods.Get(ctx, "forced", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after delete with grace 0: err %v, want NotFound", err)
	}
	// left alone, the other goes once its deletionTimestamp (now + grace,
	// kept to the second as metav1.Time is) has passed, not before
	eventually(t, 10*time.Second, "pod removed after its grace period", func() (bool, error) {
		_, err := pods.Get(ctx, "waited", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if now := time.Now(); now.Before(waitedUntil) {
				t.Errorf("pod removed at %v, before its deletionTimestamp %v", now, waitedUntil)
			}
			return true, nil
		}
		return false, err
	})
	if _, _, found := etcdGet(t, c, "/registry/pods/"+ns+"/waited"); found {
		t.Errorf("etcd still holds the pod")
	}
}
