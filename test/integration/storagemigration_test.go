package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/storageversionmigrator"
	"github.com/skiff-sh/skiff/internal/storage"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestStorageVersionMigrationReencrypts is key rotation as upstream
// documents it: a new key goes first, a StorageVersionMigration for
// secrets rewrites every Secret under it, and the old key can then be
// removed with every Secret still readable.
func TestStorageVersionMigrationReencrypts(t *testing.T) {
	key := func(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }
	config := func(providers string) *storage.Encryption {
		e, err := storage.ParseEncryptionConfig([]byte("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n" + providers))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	key1 := "  - aesgcm:\n      keys:\n      - name: old\n        secret: " + key(7) + "\n"
	key2 := "  - aescbc:\n      keys:\n      - name: new\n        secret: " + key(8) + "\n"
	enc := config(key1)
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) { cfg.Encryption = enc }})
	ctx := testCtx(t, 120*time.Second)
	ns := newNamespace(t, c.Clientset())
	const n = 5
	for i := range n {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)}, StringData: map[string]string{"k": "v"}}
		if _, err := c.Clientset().CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	prefixes := func() map[string]int {
		resp, err := c.Etcd().Get(ctx, "/registry/secrets/"+ns+"/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, kv := range resp.Kvs {
			// k8s:enc:<provider>:v1:<key>:<ciphertext>
			parts := strings.SplitN(string(kv.Value), ":", 6)
			out[strings.Join(parts[:min(5, len(parts))], ":")]++
		}
		return out
	}
	if got := prefixes(); got["k8s:enc:aesgcm:v1:old"] != n {
		t.Fatalf("before rotation the secrets are stored as %v, want all under aesgcm key old", got)
	}

	enc = config(key2 + key1)
	c.Restart()
	cs := c.Clientset()
	factory := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := storageversionmigrator.New(ctx, controllercontext.Context{Client: cs, Dynamic: c.Dynamic(), Informers: factory})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	factory.Start(runCtx.Done())
	go func() { _ = ctrl.Start(runCtx) }()

	if _, err := cs.StoragemigrationV1().StorageVersionMigrations().Create(ctx, &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "secrets-to-new-key"},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: "secrets"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var done *svmv1.StorageVersionMigration
	eventually(t, 60*time.Second, "the migration to succeed", func() (bool, error) {
		svm, err := cs.StoragemigrationV1().StorageVersionMigrations().Get(ctx, "secrets-to-new-key", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationFailed)) {
			t.Fatalf("migration failed: %+v", svm.Status.Conditions)
		}
		done = svm
		return meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationSucceeded)), nil
	})
	if done.Status.ResourceVersion == "" {
		t.Error("status.resourceVersion (the checkpoint) is empty")
	}
	if r := meta.FindStatusCondition(done.Status.Conditions, string(svmv1.MigrationRunning)); r == nil || !strings.Contains(r.Message, "objects verified migrated") {
		t.Errorf("Running condition = %+v, want upstream's verified-migrated message", r)
	}
	if got := prefixes(); got["k8s:enc:aescbc:v1:new"] != n {
		t.Fatalf("after the migration the secrets are stored as %v, want all under aescbc key new", got)
	}

	// The old key can go: every Secret still reads.
	enc = config(key2)
	c.Restart()
	list, err := c.Clientset().CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != n {
		t.Fatalf("secrets after removing the old key: %d, %v; want %d readable", len(list.Items), err, n)
	}
}
