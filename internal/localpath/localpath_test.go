package localpath

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

func claim(node string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "1234", ResourceVersion: "7", Annotations: map[string]string{
			storagehelpers.AnnStorageProvisioner: ProvisionerName,
			storagehelpers.AnnSelectedNode:       node,
		}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(ClassName),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
		},
	}
}

func TestVolume(t *testing.T) {
	pv, err := Volume(claim("n1"), StorageClass(), "n1", "/var/lib/skiff/storage")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{pv.Name, VolumePath(pv), NodeOf(pv), string(pv.Spec.PersistentVolumeReclaimPolicy), pv.Spec.StorageClassName,
		pv.Annotations[storagehelpers.AnnDynamicallyProvisioned], pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name + "/" + string(pv.Spec.ClaimRef.UID),
		pv.Spec.Capacity.Storage().String()}
	want := []string{"pvc-1234", "/var/lib/skiff/storage/pvc-1234_ns_data", "n1", "Delete", "local-path", "rancher.io/local-path", "ns/data/1234", "2Gi"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name string
		mod  func(*corev1.PersistentVolumeClaim)
		want string
	}{
		{"ReadWriteMany", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}, "NodePath only supports ReadWriteOnce and ReadWriteOncePod (1 node) access modes"},
		{"selector", func(c *corev1.PersistentVolumeClaim) { c.Spec.Selector = &metav1.LabelSelector{} }, "claim.Spec.Selector is not supported"},
		{"data source", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
		}, "claim.Spec.DataSource is not supported"},
		{"block", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) }, "block volumes are not supported"},
	} {
		c := claim("n1")
		tc.mod(c)
		if _, err := Volume(c, StorageClass(), "n1", "/x"); err == nil || err.Error() != tc.want {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestWithin(t *testing.T) {
	for path, want := range map[string]bool{"/r/a": true, "/r/a/b": true, "/r": false, "/r/../etc": false, "/other": false, "/r2/a": false} {
		if got := within("/r", path); got != want {
			t.Errorf("within(/r, %s) = %v, want %v", path, got, want)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProvisionAndDelete runs the provisioner on a fake clientset: a claim
// handed to this node gets a directory and a pre-bound volume; a claim for
// another node gets nothing; the released volume loses both.
func TestProvisionAndDelete(t *testing.T) {
	root := filepath.Join(t.TempDir(), "storage")
	other := claim("n2")
	other.Name, other.UID = "elsewhere", "5678"
	client := fake.NewClientset(StorageClass(), claim("n1"), other)
	p, err := New(client, "n1", root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Start(ctx) }()
	defer func() { cancel(); <-done }()

	var pv *corev1.PersistentVolume
	waitFor(t, "the volume", func() bool {
		pv, err = client.CoreV1().PersistentVolumes().Get(ctx, "pvc-1234", metav1.GetOptions{})
		return err == nil
	})
	dir := filepath.Join(root, "pvc-1234_ns_data")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Fatalf("directory %s: %v %v", dir, fi, err)
	}
	if VolumePath(pv) != dir || NodeOf(pv) != "n1" {
		t.Errorf("volume path %s node %s", VolumePath(pv), NodeOf(pv))
	}
	if l, _ := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); len(l.Items) != 1 {
		t.Errorf("%d volumes, want only this node's", len(l.Items))
	}

	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Released with Delete: the directory, then the volume, go.
	pv.Status.Phase = corev1.VolumeReleased
	if _, err := client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the volume's deletion", func() bool {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, "pvc-1234", metav1.GetOptions{})
		return err != nil
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory still there: %v", err)
	}
}

func TestRetainKeepsDirectory(t *testing.T) {
	root := filepath.Join(t.TempDir(), "storage")
	sc := StorageClass()
	sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
	pv, err := Volume(claim("n1"), sc, "n1", root)
	if err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeReleased
	if ShouldDelete(pv) {
		t.Error("a Retain volume would be deleted")
	}
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	if !ShouldDelete(pv) {
		t.Error("a released Delete volume would be kept")
	}
}

// TestResize runs the provisioner on a fake clientset: a bound claim of
// this node's volume that asks for more storage gets it, on the volume and
// in the claim's status, with nothing left in progress.
func TestResize(t *testing.T) {
	root := filepath.Join(t.TempDir(), "storage")
	c := claim("n1")
	pv, err := Volume(c, StorageClass(), "n1", root)
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.VolumeName = pv.Name
	c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}
	c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Gi")
	client := fake.NewClientset(StorageClass(), c, pv)
	p, err := New(client, "n1", root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Start(ctx) }()
	defer func() { cancel(); <-done }()

	five := resource.MustParse("5Gi")
	var got *corev1.PersistentVolumeClaim
	waitFor(t, "the claim's new capacity", func() bool {
		got, err = client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
		q := got.Status.Capacity[corev1.ResourceStorage]
		return err == nil && q.Cmp(five) == 0
	})
	if q := got.Status.AllocatedResources[corev1.ResourceStorage]; q.Cmp(five) != 0 {
		t.Errorf("allocatedResources %s, want 5Gi", q.String())
	}
	if len(got.Status.AllocatedResourceStatuses) != 0 || len(got.Status.Conditions) != 0 {
		t.Errorf("resize left status %v and conditions %v", got.Status.AllocatedResourceStatuses, got.Status.Conditions)
	}
	v, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := v.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(five) != 0 {
		t.Errorf("volume capacity %s, want 5Gi", q.String())
	}
}

func TestWantsResize(t *testing.T) {
	bound := func(request, capacity string) *corev1.PersistentVolumeClaim {
		c := claim("n1")
		c.Spec.VolumeName = "pv"
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(request)
		c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}}
		return c
	}
	pending := claim("n1")
	for _, tc := range []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		{"larger request", bound("3Gi", "2Gi"), true},
		{"same size", bound("2Gi", "2Gi"), false},
		{"smaller request (recovering from a failed resize)", bound("1Gi", "2Gi"), false},
		{"unbound", pending, false},
	} {
		if got := wantsResize(tc.claim); got != tc.want {
			t.Errorf("%s: wantsResize %v, want %v", tc.name, got, tc.want)
		}
	}
}
