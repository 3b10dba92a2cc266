package integration

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

// TestListContinueAfterCompaction: a continue token whose revision was
// compacted is 410 Gone carrying a token that goes on from the same key at
// the newest revision (an inconsistent list), as upstream's API chunking
// conformance test expects; following it lists the rest, writes made since
// the first page included.
func TestListContinueAfterCompaction(t *testing.T) {
	t.Parallel()
	c := testapiserver.Start(t)
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	create := func(name string) {
		t.Helper()
		if _, err := cs.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		create(fmt.Sprintf("template-%04d", i))
	}
	first, err := cs.CoreV1().PodTemplates(ns).List(ctx, metav1.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if first.Continue == "" || first.RemainingItemCount == nil || *first.RemainingItemCount != 4 {
		t.Fatalf("first page: continue %q, remaining %v; want a token and 4", first.Continue, first.RemainingItemCount)
	}
	create("template-0099") // after the first page's revision
	rev := etcdRevision(t, c)
	if _, err := c.Etcd().Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}

	_, err = cs.CoreV1().PodTemplates(ns).List(ctx, metav1.ListOptions{Limit: 3, Continue: first.Continue})
	var status apierrors.APIStatus
	if !apierrors.IsResourceExpired(err) || !errors.As(err, &status) {
		t.Fatalf("list with a compacted continue token: got %v, want 410 Expired", err)
	}
	token := status.Status().ListMeta.Continue
	if token == "" || !strings.Contains(status.Status().Message, "inconsistent list") {
		t.Fatalf("410 without an inconsistent continue token: %+v", status.Status())
	}

	var names []string
	opts := metav1.ListOptions{Limit: 3, Continue: token}
	for {
		page, err := cs.CoreV1().PodTemplates(ns).List(ctx, opts)
		if err != nil {
			t.Fatalf("list with continue %q: %v", opts.Continue, err)
		}
		if page.ResourceVersion == first.ResourceVersion {
			t.Fatalf("inconsistent page served at the first page's revision %s", page.ResourceVersion)
		}
		for _, p := range page.Items {
			names = append(names, p.Name)
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	want := []string{"template-0003", "template-0004", "template-0005", "template-0006", "template-0099"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("rest of the list after the inconsistent continue (-want +got):\n%s", diff)
	}
}
