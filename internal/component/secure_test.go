package component

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/pki"
)

func TestSecureServingValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       SecureServing
		wantErr string
	}{
		{"defaults", DefaultSecureServing(10257), ""},
		{"port out of range", SecureServing{BindAddress: "0.0.0.0", SecurePort: 70000}, "--secure-port 70000 must be between 0 and 65535"},
		{"not an address", SecureServing{BindAddress: "localhost", SecurePort: 1}, `--bind-address "localhost" is not an IP address`},
		{"certificate without key", SecureServing{BindAddress: "::", SecurePort: 1, CertFile: "c"}, "--tls-cert-file and --tls-private-key-file go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestSecureServingListen: the secure port by default, with the API
// server's client CA; --address serves plain HTTP instead; port 0 nothing.
func TestSecureServingListen(t *testing.T) {
	b, err := pki.Ensure(t.TempDir(), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"},
		Data:       map[string]string{"client-ca-file": string(b.CAPEM)},
	})
	ctx := context.Background()
	addr, cfg, err := SecureServing{BindAddress: "127.0.0.1", SecurePort: 10259}.Listen(ctx, cs)
	if err != nil || addr != "127.0.0.1:10259" || cfg == nil || cfg.ClientCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("secure port: %q %+v %v", addr, cfg, err)
	}
	if addr, cfg, err := (SecureServing{BindAddress: "0.0.0.0", SecurePort: 10259, Address: "127.0.0.1:9"}).Listen(ctx, cs); addr != "127.0.0.1:9" || cfg != nil || err != nil {
		t.Errorf("--address: %q %v %v, want plain HTTP there", addr, cfg, err)
	}
	if addr, _, err := (SecureServing{BindAddress: "0.0.0.0"}).Listen(ctx, cs); addr != "" || err != nil {
		t.Errorf("--secure-port 0: %q %v, want nothing served", addr, err)
	}
}
