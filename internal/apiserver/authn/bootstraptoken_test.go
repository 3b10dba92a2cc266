package authn

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestBootstrapToken(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	secret := func(mut func(*corev1.Secret)) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"},
			Type:       BootstrapTokenSecretType,
			Data: map[string][]byte{
				BootstrapTokenIDKey:          []byte("abcdef"),
				BootstrapTokenSecretKey:      []byte("0123456789abcdef"),
				BootstrapTokenUsageAuthKey:   []byte("true"),
				BootstrapTokenExtraGroupsKey: []byte("system:bootstrappers:skiff,system:masters"),
			},
		}
		if mut != nil {
			mut(s)
		}
		return s
	}
	const csrPath = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	tests := []struct {
		name     string
		secret   *corev1.Secret
		header   string
		path     string
		wantUser *User
		wantOK   bool
		wantErr  bool
	}{
		{name: "valid", secret: secret(nil), header: "Bearer abcdef.0123456789abcdef", path: csrPath, wantOK: true,
			wantUser: &User{Name: "system:bootstrap:abcdef", Groups: []string{"system:bootstrappers", "system:bootstrappers:skiff", "system:authenticated"}}},
		{name: "wrong secret", secret: secret(nil), header: "Bearer abcdef.0000000000000000", path: csrPath, wantErr: true},
		{name: "no such token", header: "Bearer abcdef.0123456789abcdef", path: csrPath, wantErr: true},
		{name: "expired", secret: secret(func(s *corev1.Secret) { s.Data[BootstrapTokenExpirationKey] = []byte("2026-12-01T11:00:00Z") }), header: "Bearer abcdef.0123456789abcdef", path: csrPath, wantErr: true},
		{name: "not expired yet", secret: secret(func(s *corev1.Secret) { s.Data[BootstrapTokenExpirationKey] = []byte("2026-12-01T13:00:00Z") }), header: "Bearer abcdef.0123456789abcdef", path: csrPath, wantOK: true,
			wantUser: &User{Name: "system:bootstrap:abcdef", Groups: []string{"system:bootstrappers", "system:bootstrappers:skiff", "system:authenticated"}}},
		{name: "not for authentication", secret: secret(func(s *corev1.Secret) { delete(s.Data, BootstrapTokenUsageAuthKey) }), header: "Bearer abcdef.0123456789abcdef", path: csrPath, wantErr: true},
		{name: "wrong type", secret: secret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), header: "Bearer abcdef.0123456789abcdef", path: csrPath, wantErr: true},
		{name: "outside the certificates API", secret: secret(nil), header: "Bearer abcdef.0123456789abcdef", path: "/api/v1/secrets"},
		{name: "another kind of bearer token", secret: secret(nil), header: "Bearer eyJhbGciOi.x.y", path: csrPath},
		{name: "no header", secret: secret(nil), path: csrPath},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &BootstrapToken{
				Now: func() time.Time { return now },
				Get: func(_ context.Context, ns, name string) (*corev1.Secret, error) {
					if tc.secret == nil || ns != tc.secret.Namespace || name != tc.secret.Name {
						return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
					}
					return tc.secret, nil
				},
			}
			r := httptest.NewRequest("GET", tc.path, nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			u, ok, err := a.Authenticate(r)
			if (err != nil) != tc.wantErr || ok != tc.wantOK {
				t.Fatalf("Authenticate = %v, %v, %v; want ok %v, error %v", u, ok, err, tc.wantOK, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantUser, u); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}
