package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/simulate"
)

// TestDynamicResourceAllocation is issue #12's DRA scenario on simulated
// nodes, with the whole controller manager and Skiff's scheduler: two nodes
// publish eight simulated GPUs each; sixteen pods each get one GPU through
// a ResourceClaimTemplate and run, every device used once; the seventeenth
// stays Pending saying why; deleting one pod frees its device (its claim is
// deallocated and deleted) and the waiting pod gets it.
func TestDynamicResourceAllocation(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	ctx := context.Background()
	runManager(t, c)
	runScheduler(t, c)
	// Leases renewed as runNodes's are: the manager here notices a silent
	// node within 3 s.
	sim := simulate.New(cs, simulate.Options{
		Nodes: 2, NamePrefix: "gpu-node-", Devices: 8, Workers: 2,
		LeaseDuration: 2 * time.Second, LeaseRenewInterval: 500 * time.Millisecond, StatusUpdateFrequency: time.Second,
	})
	runSimulator(t, sim)
	slices, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil || len(slices.Items) != 2 {
		t.Fatalf("resource slices = %d (err %v), want one per node", len(slices.Items), err)
	}

	if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.skiff.sh" && device.attributes["gpu.skiff.sh"].model == "skiff-simulated-gpu"`},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, cs)
	if _, err := cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu"}}},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What the claims looked like, for a failure's reader.
		claims, _ := cs.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		for _, cl := range claims.Items {
			t.Logf("claim %s: deleting %v finalizers %v allocated %v reservedFor %v", cl.Name, cl.DeletionTimestamp != nil, cl.Finalizers, cl.Status.Allocation != nil, cl.Status.ReservedFor)
		}
		if p, err := cs.CoreV1().Pods(ns).Get(ctx, "train-16", metav1.GetOptions{}); err == nil {
			t.Logf("train-16: node %q phase %s conditions %+v claims %+v", p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, p.Status.ResourceClaimStatuses)
		}
	})
	newPod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name: "train", Image: "registry.k8s.io/pause:3.10.2",
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
				}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
			},
		}
	}
	for i := range 16 {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod(fmt.Sprintf("train-%02d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 90*time.Second, "sixteen GPU pods Running", func() (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		return n == 16, nil
	})
	// Every claim is allocated one distinct device on its pod's node and
	// reserved for its pod.
	claims, err := cs.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := sets.New[string]()
	perNode := map[string]int{}
	for _, cl := range claims.Items {
		a := cl.Status.Allocation
		if a == nil || len(a.Devices.Results) != 1 || len(cl.Status.ReservedFor) != 1 {
			t.Fatalf("claim %s: allocation %+v reserved for %+v, want one device for one pod", cl.Name, a, cl.Status.ReservedFor)
		}
		r := a.Devices.Results[0]
		if r.Driver != "gpu.skiff.sh" || !strings.HasPrefix(r.Device, "gpu-") {
			t.Errorf("claim %s got device %+v", cl.Name, r)
		}
		id := r.Pool + "/" + r.Device
		if used.Has(id) {
			t.Errorf("device %s allocated twice", id)
		}
		used.Insert(id)
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, cl.Status.ReservedFor[0].Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != r.Pool {
			t.Errorf("pod %s runs on %s but its GPU is on %s", pod.Name, pod.Spec.NodeName, r.Pool)
		}
		perNode[pod.Spec.NodeName]++
		if len(pod.Status.ResourceClaimStatuses) != 1 || ptr.Deref(pod.Status.ResourceClaimStatuses[0].ResourceClaimName, "") != cl.Name {
			t.Errorf("pod %s resourceClaimStatuses = %+v, want its claim %s", pod.Name, pod.Status.ResourceClaimStatuses, cl.Name)
		}
	}
	if len(claims.Items) != 16 || len(perNode) != 2 {
		t.Fatalf("claims %d over nodes %v, want 16 over two nodes", len(claims.Items), perNode)
	}

	// The seventeenth waits, and says why.
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("train-16"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the seventeenth pod Unschedulable for want of a GPU", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "train-16", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable &&
				strings.Contains(cond.Message, "cannot allocate all claims") {
				return true, nil
			}
		}
		return false, nil
	})

	// Deleting a pod frees its GPU for the waiting one.
	victim, err := cs.CoreV1().Pods(ns).Get(ctx, "train-03", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	victimClaim := *victim.Status.ResourceClaimStatuses[0].ResourceClaimName
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "train-03", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the seventeenth pod Running on the freed GPU", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "train-16", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == victim.Spec.NodeName, err
	})
	eventually(t, 30*time.Second, "the deleted pod's claim gone", func() (bool, error) {
		_, err := cs.ResourceV1().ResourceClaims(ns).Get(ctx, victimClaim, metav1.GetOptions{})
		return err != nil, nil
	})
}
