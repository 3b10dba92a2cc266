package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/volume/ephemeral"
	"github.com/skiff-sh/skiff/internal/controller/volume/expand"
	"github.com/skiff-sh/skiff/internal/controller/volume/persistentvolume"
	"github.com/skiff-sh/skiff/internal/localpath"
	"github.com/skiff-sh/skiff/internal/simulate"
)

// TestStorage drives the PV binder, the ephemeral volume controller, the
// scheduler's VolumeBinding and a local-path provisioner for one simulated
// node against a real API server and etcd: static binding and release,
// a pod waiting for an Immediate claim, WaitForFirstConsumer provisioning
// on the pod's node, reclaim Delete removing directory and volume, and a
// generic ephemeral volume.
func TestStorage(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runMaintControllers(t, c, controllercontext.Options{}, persistentvolume.New, ephemeral.New, expand.New)
	schedRunSimNodes(t, c, simulate.Options{Nodes: 2, NamePrefix: "stor-"})
	schedRunScheduler(t, c, schedDefaultSchedulerConfig(false), "storage-test")
	// The provisioner runs as its node, as in an agent (RBAC
	// skiff:node-local-path, the Node authorizer, NodeRestriction).
	root := runLocalPath(t, as(t, c, "system:node:stor-1", "system:nodes"), "stor-1")["stor-1"]
	ctx := testCtx(t, 3*time.Minute)
	ns := newNamespace(t, cs)

	sc, err := cs.StorageV1().StorageClasses().Get(ctx, localpath.ClassName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bootstrap's local-path class: %v", err)
	}
	if sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("local-path class: %+v", sc)
	}

	t.Run("static binding and Retain", func(t *testing.T) {
		createPV(t, cs, staticPV("stor-static", "5Gi", "", corev1.PersistentVolumeReclaimRetain))
		createPVC(t, cs, ns, claimOf("static", "1Gi", ptr.To("")))
		waitClaim(t, cs, ns, "static", func(c *corev1.PersistentVolumeClaim) bool {
			return c.Status.Phase == corev1.ClaimBound && c.Spec.VolumeName == "stor-static" && c.Status.Capacity.Storage().String() == "5Gi"
		})
		waitPV(t, cs, "stor-static", func(v *corev1.PersistentVolume) bool { return v.Status.Phase == corev1.VolumeBound })
		deleteClaim(t, cs, ns, "static")
		waitPV(t, cs, "stor-static", func(v *corev1.PersistentVolume) bool {
			return v.Status.Phase == corev1.VolumeReleased && v.Spec.ClaimRef != nil
		})
	})

	t.Run("a pod waits for its Immediate claim", func(t *testing.T) {
		mode := storagev1.VolumeBindingImmediate
		if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: "stor-manual"}, Provisioner: storagehelpers.NotSupportedProvisioner, VolumeBindingMode: &mode,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createPVC(t, cs, ns, claimOf("manual", "1Gi", ptr.To("stor-manual")))
		createPodWithClaim(t, cs, ns, "waiter", "manual", nil)
		waitPodCond(t, cs, ns, "waiter", func(p *corev1.Pod) bool {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse &&
					strings.Contains(cond.Message, "pod has unbound immediate PersistentVolumeClaims") {
					return true
				}
			}
			return false
		})
		// A volume appears: the binder binds the claim, the pod goes.
		createPV(t, cs, staticPV("stor-manual-1", "2Gi", "stor-manual", corev1.PersistentVolumeReclaimRetain))
		waitClaim(t, cs, ns, "manual", func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
		waitPodCond(t, cs, ns, "waiter", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	})

	t.Run("WaitForFirstConsumer provisions on the pod's node and Delete cleans up", func(t *testing.T) {
		createPVC(t, cs, ns, claimOf("lp", "1Gi", nil)) // the default class
		waitClaim(t, cs, ns, "lp", func(c *corev1.PersistentVolumeClaim) bool {
			return ptr.Deref(c.Spec.StorageClassName, "") == localpath.ClassName && c.Status.Phase == corev1.ClaimPending
		})
		if _, err := cs.CoreV1().PersistentVolumes().Get(ctx, "pvc-"+string(waitClaim(t, cs, ns, "lp", func(*corev1.PersistentVolumeClaim) bool { return true }).UID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a volume before any consumer: %v", err)
		}
		createPodWithClaim(t, cs, ns, "consumer", "lp", map[string]string{corev1.LabelHostname: "stor-1"})
		claim := waitClaim(t, cs, ns, "lp", func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
		if got := claim.Annotations[storagehelpers.AnnSelectedNode]; got != "stor-1" {
			t.Errorf("selected node %q, want stor-1", got)
		}
		pv := waitPV(t, cs, claim.Spec.VolumeName, func(v *corev1.PersistentVolume) bool { return v.Status.Phase == corev1.VolumeBound })
		dir := localpath.VolumePath(pv)
		if localpath.NodeOf(pv) != "stor-1" || filepath.Dir(dir) != root {
			t.Errorf("volume on %q at %q", localpath.NodeOf(pv), dir)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("volume directory: %v", err)
		}
		waitPodCond(t, cs, ns, "consumer", func(p *corev1.Pod) bool { return p.Spec.NodeName == "stor-1" })
		eventually(t, 30*time.Second, "the provisioner's event", func() (bool, error) {
			return hasEventFor(ctx, cs, ns, "lp", "ProvisioningSucceeded"), nil
		})

		if err := cs.CoreV1().Pods(ns).Delete(ctx, "consumer", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the pod gone", func() (bool, error) {
			_, err := cs.CoreV1().Pods(ns).Get(ctx, "consumer", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		deleteClaim(t, cs, ns, "lp")
		// Deleted by the provisioner (the pv-protection finalizer, another
		// controller's, may hold the object a little longer).
		eventually(t, 60*time.Second, "the volume deleted", func() (bool, error) {
			v, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && v.DeletionTimestamp != nil), nil
		})
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("volume directory still there: %v", err)
		}
	})

	t.Run("a local-path claim grows; a class without expansion refuses", func(t *testing.T) {
		createPVC(t, cs, ns, claimOf("grow", "1Gi", nil))
		createPodWithClaim(t, cs, ns, "grower", "grow", map[string]string{corev1.LabelHostname: "stor-1"})
		claim := waitClaim(t, cs, ns, "grow", func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
		claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("3Gi")
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("growing the claim: %v", err)
		}
		waitClaim(t, cs, ns, "grow", func(c *corev1.PersistentVolumeClaim) bool {
			return c.Status.Capacity.Storage().String() == "3Gi" && len(c.Status.AllocatedResourceStatuses) == 0
		})
		waitPV(t, cs, claim.Spec.VolumeName, func(v *corev1.PersistentVolume) bool { return v.Spec.Capacity.Storage().String() == "3Gi" })
		// (The expander's ExternalExpanding event may not come: the agent can
		// finish before the expander looks, as upstream. Its unit test has it.)
		for _, reason := range []string{"Resizing", "VolumeResizeSuccessful"} {
			eventually(t, 30*time.Second, "event "+reason, func() (bool, error) { return hasEventFor(ctx, cs, ns, "grow", reason), nil })
		}
		// Shrinking below what the volume has is invalid.
		claim = waitClaim(t, cs, ns, "grow", func(*corev1.PersistentVolumeClaim) bool { return true })
		claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Update(ctx, claim, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity") {
			t.Errorf("shrinking: %v, want 422 naming spec.resources.requests.storage", err)
		}

		// A bound claim of a class without allowVolumeExpansion: 403.
		immediate := storagev1.VolumeBindingImmediate
		if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: "stor-fixed"}, Provisioner: storagehelpers.NotSupportedProvisioner, VolumeBindingMode: &immediate,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createPV(t, cs, staticPV("stor-fixed", "1Gi", "stor-fixed", corev1.PersistentVolumeReclaimRetain))
		createPVC(t, cs, ns, claimOf("fixed", "1Gi", ptr.To("stor-fixed")))
		fixed := waitClaim(t, cs, ns, "fixed", func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
		fixed.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		_, err = cs.CoreV1().PersistentVolumeClaims(ns).Update(ctx, fixed, metav1.UpdateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize") {
			t.Errorf("growing a claim of a fixed class: %v, want 403", err)
		}
	})

	t.Run("a ReadWriteOncePod claim serves one pod", func(t *testing.T) {
		pv := staticPV("stor-once", "1Gi", "", corev1.PersistentVolumeReclaimRetain)
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
		createPV(t, cs, pv)
		pvc := claimOf("once", "1Gi", ptr.To(""))
		pvc.Spec.AccessModes = pv.Spec.AccessModes
		createPVC(t, cs, ns, pvc)
		createPodWithClaim(t, cs, ns, "first", "once", nil)
		waitPodCond(t, cs, ns, "first", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		createPodWithClaim(t, cs, ns, "second", "once", nil)
		waitPodCond(t, cs, ns, "second", func(p *corev1.Pod) bool {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse &&
					strings.Contains(cond.Message, "PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod") {
					return true
				}
			}
			return false
		})
	})

	t.Run("generic ephemeral volume", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "eph", Namespace: ns},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{corev1.LabelHostname: "stor-1"},
				Containers:   []corev1.Container{{Name: "c", Image: "busybox"}},
				Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
					VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: claimOf("", "1Gi", nil).Spec},
				}}}},
			},
		}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claim := waitClaim(t, cs, ns, "eph-scratch", func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
		if ref := metav1.GetControllerOf(claim); ref == nil || ref.UID != created.UID {
			t.Errorf("claim's controller %+v, want the pod", ref)
		}
		waitPodCond(t, cs, ns, "eph", func(p *corev1.Pod) bool { return p.Spec.NodeName == "stor-1" })
	})
}

// runLocalPath runs the local-path provisioner of each named (simulated)
// node, as their agents would, until the test ends; it returns each node's
// storage directory.
func runLocalPath(t *testing.T, cs kubernetes.Interface, nodes ...string) map[string]string {
	t.Helper()
	roots := map[string]string{}
	for _, node := range nodes {
		root := filepath.Join(t.TempDir(), "storage")
		prov, err := localpath.New(cs, node, root, localpath.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- prov.Start(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		roots[node] = root
	}
	return roots
}

// deleteClaim deletes a claim and, standing in for the pvc-protection
// controller (not run here), drops its kubernetes.io/pvc-protection
// finalizer: no pod uses the claim at this point.
func deleteClaim(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "claim "+name+" gone", func() (bool, error) {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil || len(c.Finalizers) == 0 {
			return false, err
		}
		c.Finalizers = nil
		_, err = cs.CoreV1().PersistentVolumeClaims(ns).Update(ctx, c, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			err = nil
		}
		return false, err
	})
}

func staticPV(name, size, class string, reclaim corev1.PersistentVolumeReclaimPolicy) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
}

func claimOf(name, size string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			StorageClassName: class,
		},
	}
}

func createPV(t *testing.T, cs kubernetes.Interface, pv *corev1.PersistentVolume) {
	t.Helper()
	if _, err := cs.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPVC(t *testing.T, cs kubernetes.Interface, ns string, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPodWithClaim(t *testing.T, cs kubernetes.Interface, ns, name, claim string, nodeSelector map[string]string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: nodeSelector,
			Containers:   []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitClaim(t *testing.T, cs kubernetes.Interface, ns, name string, cond func(*corev1.PersistentVolumeClaim) bool) *corev1.PersistentVolumeClaim {
	t.Helper()
	var last *corev1.PersistentVolumeClaim
	eventually(t, 60*time.Second, "claim "+name, func() (bool, error) {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		last = c
		return cond(c), nil
	})
	return last
}

func waitPV(t *testing.T, cs kubernetes.Interface, name string, cond func(*corev1.PersistentVolume) bool) *corev1.PersistentVolume {
	t.Helper()
	var last *corev1.PersistentVolume
	eventually(t, 60*time.Second, "volume "+name, func() (bool, error) {
		v, err := cs.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		last = v
		return cond(v), nil
	})
	return last
}

func waitPodCond(t *testing.T, cs kubernetes.Interface, ns, name string, cond func(*corev1.Pod) bool) {
	t.Helper()
	eventually(t, 60*time.Second, "pod "+name, func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cond(p), nil
	})
}

func hasEventFor(ctx context.Context, cs kubernetes.Interface, ns, name, reason string) bool {
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			return true
		}
	}
	return false
}
