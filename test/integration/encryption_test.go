package integration

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/storage"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestEncryptionAtRest: Secrets are kept in etcd under upstream's
// k8s:enc:<provider>:v1:<key>: prefix, never in clear text; a new key added
// first takes over for writes while the old one still reads; rewriting
// every Secret moves it to the new key, after which the old key can go.
func TestEncryptionAtRest(t *testing.T) {
	key := func(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }
	config := func(providers string) *storage.Encryption {
		e, err := storage.ParseEncryptionConfig([]byte("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n" + providers))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	key1 := "  - aescbc:\n      keys:\n      - name: key1\n        secret: " + key(1) + "\n"
	key2 := "  - secretbox:\n      keys:\n      - name: key2\n        secret: " + key(2) + "\n"
	identity := "  - identity: {}\n"

	enc := config(key1 + identity)
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) { cfg.Encryption = enc }})
	ctx := testCtx(t, 90*time.Second)
	ns := newNamespace(t, c.Clientset())
	raw := func(resource, name string) []byte {
		t.Helper()
		resp, err := c.Etcd().Get(ctx, "/registry/"+resource+"/"+ns+"/"+name)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("etcd get %s/%s: %v %v", resource, name, resp, err)
		}
		return resp.Kvs[0].Value
	}
	wantPrefix := func(resource, name, prefix string) {
		t.Helper()
		v := raw(resource, name)
		if !bytes.HasPrefix(v, []byte(prefix)) {
			t.Errorf("%s/%s in etcd begins %q, want %q", resource, name, v[:min(len(v), 32)], prefix)
		}
		if bytes.Contains(v, []byte("hunter2")) {
			t.Errorf("%s/%s in etcd holds the clear text", resource, name)
		}
	}
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"password": "hunter2"}}
	}
	cs := c.Clientset()
	for _, n := range []string{"s1", "s2"} {
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, secret(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Data: map[string]string{"k": "hunter2-in-a-configmap"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantPrefix("secrets", "s1", "k8s:enc:aescbc:v1:key1:")
	if v := raw("configmaps", "plain"); !bytes.HasPrefix(v, []byte("k8s\x00")) {
		t.Errorf("configmap stored as %q, want upstream's protobuf envelope", v[:8])
	}
	readBack := func(name string) *corev1.Secret {
		t.Helper()
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		if string(s.Data["password"]) != "hunter2" {
			t.Fatalf("get %s: data %q", name, s.Data)
		}
		return s
	}
	s1 := readBack("s1")
	// An update that changes nothing writes nothing, encrypted or not.
	same, err := cs.CoreV1().Secrets(ns).Update(ctx, s1, metav1.UpdateOptions{})
	if err != nil || same.ResourceVersion != s1.ResourceVersion {
		t.Errorf("no-op update: rv %s -> %s, %v; want unchanged", s1.ResourceVersion, same.ResourceVersion, err)
	}

	// Rotation: the new key first, the old one still listed.
	enc = config(key2 + key1 + identity)
	c.Restart()
	cs = c.Clientset()
	s1 = readBack("s1")
	readBack("s2")
	list, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list after rotation: %v, %v", list, err)
	}
	// Rewriting the unchanged object moves it to the new key (stale values
	// are always written).
	rewritten, err := cs.CoreV1().Secrets(ns).Update(ctx, s1, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rewritten.ResourceVersion == s1.ResourceVersion {
		t.Errorf("rewrite of a stale value kept rv %s", s1.ResourceVersion)
	}
	wantPrefix("secrets", "s1", "k8s:enc:secretbox:v1:key2:")
	wantPrefix("secrets", "s2", "k8s:enc:aescbc:v1:key1:")

	// The old key removed: what was rewritten reads, what was not does not.
	enc = config(key2)
	c.Restart()
	cs = c.Clientset()
	readBack("s1")
	_, err = cs.CoreV1().Secrets(ns).Get(ctx, "s2", metav1.GetOptions{})
	if err == nil || !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "no matching prefix found") {
		t.Errorf("get of a Secret under a removed key: %v, want 500 naming the missing key", err)
	}
}
