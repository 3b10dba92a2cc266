package integration

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestPeriodicCompaction: the server compacts etcd on its own, one interval
// behind, so old revisions go away and a watch from one of them is 410.
func TestPeriodicCompaction(t *testing.T) {
	t.Parallel()
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.CompactionInterval = 300 * time.Millisecond
	}})
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := cm.ResourceVersion
	firstRev := etcdRevision(t, c)
	key := "/registry/configmaps/" + ns + "/old"
	deadline := time.Now().Add(20 * time.Second)
	for {
		cm.Data["v"] = time.Now().String()
		if cm, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Etcd().Get(ctx, key, clientv3.WithRev(firstRev))
		if errors.Is(err, rpctypes.ErrCompacted) {
			break
		}
		if err != nil {
			t.Fatalf("read at old revision: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision %d still readable after 20s with a 300ms compaction interval", firstRev)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The old revision is gone from etcd; listing exactly at it is 410.
	_, err = cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: first, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("exact list at a compacted revision: got %v, want 410", err)
	}
	// The current state is intact.
	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "old", metav1.GetOptions{})
	if err != nil || got.Data["v"] != cm.Data["v"] {
		t.Fatalf("current object after compaction: %v %v", err, got)
	}
}
