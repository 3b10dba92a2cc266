package authn

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/satoken"
)

// fakeObjects is a store of the objects tokens name.
type fakeObjects map[string]any

func (f fakeObjects) get(kind, ns, name string) (any, error) {
	if o, ok := f[kind+"/"+ns+"/"+name]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: kind}, name)
}
func (f fakeObjects) ServiceAccount(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	o, err := f.get("serviceaccounts", ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.ServiceAccount), nil
}
func (f fakeObjects) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	o, err := f.get("pods", ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Pod), nil
}
func (f fakeObjects) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	o, err := f.get("secrets", ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Secret), nil
}
func (f fakeObjects) Node(_ context.Context, name string) (*corev1.Node, error) {
	o, err := f.get("nodes", "", name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Node), nil
}

func meta(ns, name, uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}
}

func TestServiceAccountTokens(t *testing.T) {
	const iss = "https://kubernetes.default.svc.cluster.local"
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	signer, err := satoken.NewSigner(iss, key)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, _ := satoken.NewSigner(iss, other)
	verifier, err := satoken.NewVerifier([]crypto.PublicKey{key.Public()}, satoken.VerifierOptions{Issuers: []string{iss}, Audiences: []string{iss}})
	if err != nil {
		t.Fatal(err)
	}
	sa := satoken.Account{Namespace: "ns", Name: "robot", UID: "sa-1"}
	pod := &satoken.Ref{Name: "web", UID: "pod-1"}
	node := &satoken.Ref{Name: "n1", UID: "node-1"}
	bound := func(b satoken.Binding, auds []string, issued time.Time, ttl time.Duration) string {
		tok, err := signer.Sign(satoken.BoundClaims(sa, b, auds, issued, ttl, 0, "jti-1"))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	legacy, _ := signer.Sign(satoken.LegacyClaims(sa, "robot-token"))
	wrongKey, _ := otherSigner.Sign(satoken.BoundClaims(sa, satoken.Binding{}, []string{iss}, now, time.Hour, 0, "x"))

	objects := func() fakeObjects {
		return fakeObjects{
			"serviceaccounts/ns/robot": &corev1.ServiceAccount{ObjectMeta: meta("ns", "robot", "sa-1")},
			"pods/ns/web":              &corev1.Pod{ObjectMeta: meta("ns", "web", "pod-1")},
			"nodes//n1":                &corev1.Node{ObjectMeta: meta("", "n1", "node-1")},
			"secrets/ns/robot-token": &corev1.Secret{ObjectMeta: meta("ns", "robot-token", "sec-1"), Type: corev1.SecretTypeServiceAccountToken,
				Data: map[string][]byte{corev1.ServiceAccountTokenKey: []byte(legacy)}},
		}
	}
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:ns", AllAuthenticated}
	tests := []struct {
		name    string
		token   string
		edit    func(fakeObjects)
		want    *User
		noIdea  bool
		wantErr bool
	}{
		{name: "pod-bound token", token: bound(satoken.Binding{Pod: pod, Node: node}, []string{iss}, now, time.Hour),
			want: &User{Name: "system:serviceaccount:ns:robot", UID: "sa-1", Groups: groups, Extra: map[string][]string{
				satoken.ExtraPodName: {"web"}, satoken.ExtraPodUID: {"pod-1"}, satoken.ExtraNodeName: {"n1"}, satoken.ExtraNodeUID: {"node-1"},
				satoken.ExtraCredentialID: {"JTI=jti-1"}}}},
		{name: "account only", token: bound(satoken.Binding{}, []string{iss}, now, time.Hour),
			want: &User{Name: "system:serviceaccount:ns:robot", UID: "sa-1", Groups: groups, Extra: map[string][]string{satoken.ExtraCredentialID: {"JTI=jti-1"}}}},
		{name: "legacy token", token: legacy, want: &User{Name: "system:serviceaccount:ns:robot", UID: "sa-1", Groups: groups}},
		{name: "expired", token: bound(satoken.Binding{}, []string{iss}, now.Add(-2*time.Hour), time.Hour), wantErr: true},
		{name: "expired within the leeway still works", token: bound(satoken.Binding{}, []string{iss}, now.Add(-time.Hour-30*time.Second), time.Hour),
			want: &User{Name: "system:serviceaccount:ns:robot", UID: "sa-1", Groups: groups, Extra: map[string][]string{satoken.ExtraCredentialID: {"JTI=jti-1"}}}},
		{name: "not yet valid", token: bound(satoken.Binding{}, []string{iss}, now.Add(10*time.Minute), time.Hour), wantErr: true},
		{name: "signed by another key", token: wrongKey, wantErr: true},
		{name: "audience of someone else", token: bound(satoken.Binding{}, []string{"vault"}, now, time.Hour), wantErr: true},
		{name: "account deleted", token: bound(satoken.Binding{}, []string{iss}, now, time.Hour),
			edit: func(f fakeObjects) { delete(f, "serviceaccounts/ns/robot") }, wantErr: true},
		{name: "account recreated with another uid", token: bound(satoken.Binding{}, []string{iss}, now, time.Hour),
			edit: func(f fakeObjects) {
				f["serviceaccounts/ns/robot"] = &corev1.ServiceAccount{ObjectMeta: meta("ns", "robot", "sa-2")}
			}, wantErr: true},
		{name: "bound pod deleted", token: bound(satoken.Binding{Pod: pod}, []string{iss}, now, time.Hour),
			edit: func(f fakeObjects) { delete(f, "pods/ns/web") }, wantErr: true},
		{name: "bound pod recreated", token: bound(satoken.Binding{Pod: pod}, []string{iss}, now, time.Hour),
			edit: func(f fakeObjects) { f["pods/ns/web"] = &corev1.Pod{ObjectMeta: meta("ns", "web", "pod-2")} }, wantErr: true},
		{name: "node-bound token of a deleted node", token: bound(satoken.Binding{Node: node}, []string{iss}, now, time.Hour),
			edit: func(f fakeObjects) { delete(f, "nodes//n1") }, wantErr: true},
		{name: "legacy token whose secret holds another token", token: legacy,
			edit: func(f fakeObjects) {
				f["secrets/ns/robot-token"].(*corev1.Secret).Data[corev1.ServiceAccountTokenKey] = []byte("other")
			}, wantErr: true},
		{name: "legacy token whose secret is gone", token: legacy, edit: func(f fakeObjects) { delete(f, "secrets/ns/robot-token") }, wantErr: true},
		{name: "not a JWT", token: "abcdef.0123456789abcdef", noIdea: true},
		{name: "JWT of another issuer", token: func() string {
			s, _ := satoken.NewSigner("https://elsewhere", key)
			tok, _ := s.Sign(satoken.BoundClaims(sa, satoken.Binding{}, []string{iss}, now, time.Hour, 0, ""))
			return tok
		}(), noIdea: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects()
			if tc.edit != nil {
				tc.edit(objs)
			}
			a := &ServiceAccountTokens{Verifier: verifier, Objects: objs, Clock: clocktesting.NewFakePassiveClock(now)}
			r, _ := http.NewRequest("GET", "https://x/api/v1/pods", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			u, ok, err := a.Authenticate(r)
			switch {
			case tc.noIdea:
				if ok || err != nil {
					t.Fatalf("got %v, %v, %v; want no opinion", u, ok, err)
				}
			case tc.wantErr:
				if err == nil || ok {
					t.Fatalf("got %+v, %v, nil; want an error", u, ok)
				}
			default:
				if err != nil || !ok {
					t.Fatalf("got %v, %v", ok, err)
				}
				if d := cmp.Diff(tc.want, u); d != "" {
					t.Errorf("user (-want +got):\n%s", d)
				}
			}
		})
	}
	t.Run("audience asked by a TokenReview", func(t *testing.T) {
		a := &ServiceAccountTokens{Verifier: verifier, Objects: objects(), Clock: clocktesting.NewFakePassiveClock(now)}
		tok := bound(satoken.Binding{}, []string{"vault", iss}, now, time.Hour)
		_, auds, err := a.AuthenticateToken(context.Background(), tok, []string{"vault"})
		if err != nil || !cmp.Equal(auds, []string{"vault"}) {
			t.Fatalf("got %v, %v; want [vault]", auds, err)
		}
		if _, _, err := a.AuthenticateToken(context.Background(), tok, []string{"other"}); err == nil || errors.Is(err, satoken.ErrNotServiceAccountToken) {
			t.Fatalf("audience other: got %v, want an audience error", err)
		}
	})
}
