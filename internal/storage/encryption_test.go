package storage

import (
	"bytes"
	"context"
	"crypto/aes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/storage/value"
	upstreamaes "k8s.io/apiserver/pkg/storage/value/encrypt/aes"
	upstreamsecretbox "k8s.io/apiserver/pkg/storage/value/encrypt/secretbox"
)

var (
	key16  = bytes.Repeat([]byte{1}, 16)
	key32  = bytes.Repeat([]byte{2}, 32)
	key32b = bytes.Repeat([]byte{3}, 32)
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func encryptionConfig(resources string, providers ...string) string {
	return fmt.Sprintf("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [%s]\n  providers:\n%s", resources, strings.Join(providers, ""))
}

func keys(provider string, ks ...string) string {
	s := "  - " + provider + ":\n      keys:\n"
	for i := 0; i < len(ks); i += 2 {
		s += fmt.Sprintf("      - name: %s\n        secret: %s\n", ks[i], ks[i+1])
	}
	return s
}

const identityProvider = "  - identity: {}\n"

func mustTransformer(t *testing.T, cfg string) Transformer {
	t.Helper()
	e, err := ParseEncryptionConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	tr := e.For("", "secrets")
	if tr == nil {
		t.Fatal("no transformer for secrets")
	}
	return tr
}

// TestEncryptionProviders: every provider writes upstream's prefix, reads
// its own output back, and reads and writes what upstream's transformers
// (k8s.io/apiserver) read and write, key for key.
func TestEncryptionProviders(t *testing.T) {
	block16, _ := aes.NewCipher(key16)
	gcm, err := upstreamaes.NewGCMTransformer(block16)
	if err != nil {
		t.Fatal(err)
	}
	block32, _ := aes.NewCipher(key32)
	var sbKey [32]byte
	copy(sbKey[:], key32)
	cases := []struct {
		provider string
		secret   []byte
		upstream value.Transformer
	}{
		{"aescbc", key32, upstreamaes.NewCBCTransformer(block32)},
		{"aesgcm", key16, gcm},
		{"secretbox", key32, upstreamsecretbox.NewSecretboxTransformer(sbKey)},
	}
	const etcdKey = "/registry/secrets/default/s1"
	plain := []byte("k8s\x00 a secret value: hunter2")
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			tr := mustTransformer(t, encryptionConfig("secrets", keys(tc.provider, "key1", b64(tc.secret))))
			prefix := "k8s:enc:" + tc.provider + ":v1:key1:"
			stored, err := tr.TransformToStorage(plain, etcdKey)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(stored, []byte(prefix)) || bytes.Contains(stored, []byte("hunter2")) {
				t.Fatalf("stored = %q, want prefix %q and no clear text", stored, prefix)
			}
			got, stale, err := tr.TransformFromStorage(stored, etcdKey)
			if err != nil || stale || !bytes.Equal(got, plain) {
				t.Fatalf("read back = %q, stale %v, %v", got, stale, err)
			}
			ctx := context.Background()
			// upstream reads ours
			up, _, err := tc.upstream.TransformFromStorage(ctx, stored[len(prefix):], value.DefaultContext(etcdKey))
			if err != nil || !bytes.Equal(up, plain) {
				t.Errorf("upstream read ours: %q, %v", up, err)
			}
			// we read upstream's
			theirs, err := tc.upstream.TransformToStorage(ctx, plain, value.DefaultContext(etcdKey))
			if err != nil {
				t.Fatal(err)
			}
			got, _, err = tr.TransformFromStorage(append([]byte(prefix), theirs...), etcdKey)
			if err != nil || !bytes.Equal(got, plain) {
				t.Errorf("read upstream's: %q, %v", got, err)
			}
			if tc.provider == "aesgcm" {
				if _, _, err := tr.TransformFromStorage(stored, "/registry/secrets/default/other"); err == nil {
					t.Errorf("aesgcm value moved to another key was read")
				}
			}
		})
	}
}

// TestEncryptionRotation: the first key writes; every listed key reads; a
// value under any other key (or in clear text, with identity listed) is
// stale; a key that is no longer listed cannot be read.
func TestEncryptionRotation(t *testing.T) {
	const etcdKey = "/registry/secrets/ns/s"
	plain := []byte("k8s\x00payload")
	old := mustTransformer(t, encryptionConfig("secrets", keys("aescbc", "key1", b64(key32)), identityProvider))
	rotated := mustTransformer(t, encryptionConfig("secrets", keys("aesgcm", "key2", b64(key32b)), keys("aescbc", "key1", b64(key32)), identityProvider))
	onlyNew := mustTransformer(t, encryptionConfig("secrets", keys("aesgcm", "key2", b64(key32b))))

	oldValue, _ := old.TransformToStorage(plain, etcdKey)
	newValue, _ := rotated.TransformToStorage(plain, etcdKey)
	if !bytes.HasPrefix(newValue, []byte("k8s:enc:aesgcm:v1:key2:")) {
		t.Fatalf("rotated writes %q", newValue[:24])
	}
	cases := []struct {
		name      string
		tr        Transformer
		stored    []byte
		wantStale bool
		wantErr   string
	}{
		{"old key read by old config", old, oldValue, false, ""},
		{"clear text read through identity is stale", old, plain, true, ""},
		{"old key after rotation is stale", rotated, oldValue, true, ""},
		{"new key after rotation", rotated, newValue, false, ""},
		{"old key dropped", onlyNew, oldValue, false, "no matching prefix found"},
		{"clear text without identity", onlyNew, plain, false, "no matching prefix found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, stale, err := tc.tr.TransformFromStorage(tc.stored, etcdKey)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, plain) || stale != tc.wantStale {
				t.Errorf("got %q stale %v err %v; want the plain bytes, stale %v", got, stale, err, tc.wantStale)
			}
		})
	}
}

func TestEncryptionConfigErrors(t *testing.T) {
	cases := []struct {
		name, cfg, want string
	}{
		{"short key", encryptionConfig("secrets", keys("aescbc", "k", b64([]byte("short")))), "secret is not of the expected length, got 5, expected one of [16 24 32]"},
		{"secretbox 16 bytes", encryptionConfig("secrets", keys("secretbox", "k", b64(key16))), "expected one of [32]"},
		{"not base64", encryptionConfig("secrets", keys("aesgcm", "k", "not-base64!")), "secrets must be base64 encoded"},
		{"no keys", encryptionConfig("secrets", "  - aescbc:\n      keys: []\n"), "at least one key is required"},
		{"kms", encryptionConfig("secrets", "  - kms:\n      name: vault\n"), "Skiff does not support KMS providers"},
		{"bare star", encryptionConfig("'*'", identityProvider), "use '*.' to encrypt all the resources from core API group"},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\n", "want apiserver.config.k8s.io/v1 EncryptionConfiguration"},
		{"unknown field", encryptionConfig("secrets", "  - aescbc:\n      keyz: []\n"), `unknown field "keyz"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEncryptionConfig([]byte(tc.cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEncryptionResourceMatching(t *testing.T) {
	cfg := "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n" +
		"- resources: [secrets, deployments.apps]\n  providers:\n" + keys("aescbc", "exact", b64(key32)) +
		"- resources: ['*.apps']\n  providers:\n" + keys("aescbc", "apps", b64(key32)) +
		"- resources: ['*.']\n  providers:\n" + keys("aescbc", "core", b64(key32))
	e, err := ParseEncryptionConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	name := func(group, resource string) string {
		tr := e.For(group, resource)
		if tr == nil {
			return "none"
		}
		out, _ := tr.TransformToStorage([]byte("x"), "/k")
		return strings.Split(string(out), ":")[4]
	}
	got := map[string]string{
		"secrets": name("", "secrets"), "configmaps": name("", "configmaps"), "deployments.apps": name("apps", "deployments"),
		"statefulsets.apps": name("apps", "statefulsets"), "jobs.batch": name("batch", "jobs"),
	}
	want := map[string]string{"secrets": "exact", "configmaps": "core", "deployments.apps": "exact", "statefulsets.apps": "apps", "jobs.batch": "none"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("key names (-want +got):\n%s", diff)
	}
}

func TestEnsureDefaultEncryptionConfig(t *testing.T) {
	dir := t.TempDir()
	p1, err := EnsureDefaultEncryptionConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := LoadEncryptionConfig(p1)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := e1.For("", "secrets").TransformToStorage([]byte("x"), "/k")
	if !bytes.HasPrefix(stored, []byte("k8s:enc:aescbc:v1:skiff-default:")) {
		t.Errorf("default config writes %q", stored)
	}
	if e1.For("", "configmaps") != nil {
		t.Errorf("default config encrypts configmaps")
	}
	// A second start keeps the key.
	p2, _ := EnsureDefaultEncryptionConfig(dir)
	e2, err := LoadEncryptionConfig(p2)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := e2.For("", "secrets").TransformFromStorage(stored, "/k"); err != nil || string(got) != "x" {
		t.Errorf("second start reads %q, %v", got, err)
	}
}
