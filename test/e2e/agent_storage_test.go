package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAgentStorage: a StatefulSet of 3's volumeClaimTemplates get local-path
// volumes on the node that keep their data across a pod's deletion (and a
// subPath of the same volume); a claim of the WaitForFirstConsumer class
// binds only once a pod using it is scheduled; deleting the claim deletes
// the volume and its directory.
func TestAgentStorage(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-storage")
	ctx := context.Background()

	kubectlStdin(t, c.kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: db, namespace: %[1]s}
spec: {clusterIP: None, selector: {app: db}, ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: %[1]s}
spec:
  serviceName: db
  replicas: 3
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: db
        image: %[2]s
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "[ -f /data/id ] || echo $(hostname)-$RANDOM$RANDOM > /data/id; echo seen >> /sub/marker; cat /data/id; exec sleep 3600"]
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: data, mountPath: /sub, subPath: nested}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 64Mi}}
`, ns, c.image), "apply", "-f", "-")
	kubectl(t, c.kubeconfig, "-n", ns, "rollout", "status", "sts/db", "--timeout=120s")

	ids := map[string]string{}
	for i := 0; i < 3; i++ {
		pod := fmt.Sprintf("db-%d", i)
		c.waitPod(t, ns, pod, 30*time.Second, "Running and Ready", podRunningReady)
		claim, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-"+pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if claim.Status.Phase != corev1.ClaimBound || *claim.Spec.StorageClassName != "local-path" {
			t.Fatalf("claim %s: phase %s class %v", claim.Name, claim.Status.Phase, claim.Spec.StorageClassName)
		}
		pv, err := c.client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, filepath.Join(c.dataDir, "storage")+"/") {
			t.Fatalf("volume %s source %+v, want a directory under %s/storage", pv.Name, pv.Spec.PersistentVolumeSource, c.dataDir)
		}
		id := strings.TrimSpace(kubectl(t, c.kubeconfig, "-n", ns, "logs", pod))
		if !strings.HasPrefix(id, pod+"-") {
			t.Fatalf("%s wrote id %q", pod, id)
		}
		onNode, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "id"))
		if err != nil || strings.TrimSpace(string(onNode)) != id {
			t.Fatalf("the node's copy of %s's id: %q, %v; the pod said %q", pod, onNode, err, id)
		}
		if b, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "nested", "marker")); err != nil || string(b) != "seen\n" {
			t.Errorf("subPath nested of %s: %q, %v", pv.Name, b, err)
		}
		ids[pod] = id
	}

	// The pod goes, its claim stays: the new db-0 reads the old id.
	old := c.waitPod(t, ns, "db-0", time.Second, "present", podRunningReady)
	kubectl(t, c.kubeconfig, "-n", ns, "delete", "pod", "db-0")
	c.waitPod(t, ns, "db-0", 90*time.Second, "back, Running and Ready", func(p *corev1.Pod) bool {
		return p.UID != old.UID && podRunningReady(p)
	})
	if got := strings.TrimSpace(kubectl(t, c.kubeconfig, "-n", ns, "logs", "db-0")); got != ids["db-0"] {
		t.Errorf("the new db-0 read id %q, want %q (written by the pod before it)", got, ids["db-0"])
	}

	// A claim alone waits for its first consumer.
	kubectlStdin(t, c.kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: lonely, namespace: %s}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 16Mi}}
`, ns), "apply", "-f", "-")
	waitFor(t, 30*time.Second, "the WaitForFirstConsumer event", func() bool {
		return c.hasEvent(ns, "lonely", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
	})
	claim, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "lonely", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Spec.VolumeName != "" || claim.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim without a consumer: volume %q phase %s", claim.Spec.VolumeName, claim.Status.Phase)
	}
	user := busyboxPod(ns, "user", c.image, "sh", "-c", "echo hi > /data/f && exec sleep 3600")
	user.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "lonely"}}}}
	user.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	c.create(t, user)
	c.waitPod(t, ns, "user", 90*time.Second, "Running and Ready", podRunningReady)
	claim, err = c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "lonely", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Phase != corev1.ClaimBound || claim.Annotations["volume.kubernetes.io/selected-node"] != c.node {
		t.Fatalf("claim with a consumer: phase %s, selected node %q (node %q)", claim.Status.Phase, claim.Annotations["volume.kubernetes.io/selected-node"], c.node)
	}
	pv, err := c.client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := pv.Spec.HostPath.Path
	waitFor(t, 30*time.Second, "the pod's file on the node", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "f"))
		return err == nil && string(b) == "hi\n"
	})

	// Reclaim Delete: the claim goes (once no pod uses it), then the volume
	// and its directory.
	kubectl(t, c.kubeconfig, "-n", ns, "delete", "pod", "user", "--wait=true")
	kubectl(t, c.kubeconfig, "-n", ns, "delete", "pvc", "lonely", "--wait=true", "--timeout=60s")
	waitFor(t, 60*time.Second, "volume "+pv.Name+" deleted", func() bool {
		_, err := c.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s still there: %v", dir, err)
	}
}
