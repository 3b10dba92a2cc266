package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/satoken"
)

func TestTokensSync(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	verifier, _ := satoken.NewVerifier([]crypto.PublicKey{key.Public()}, satoken.VerifierOptions{Audiences: []string{"api"}})
	robot := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "robot", UID: "sa-1"}}
	secret := func(uid string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "robot-token", UID: "sec-1",
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "robot"}}, Type: corev1.SecretTypeServiceAccountToken}
		if uid != "" {
			s.Annotations[corev1.ServiceAccountUIDKey] = uid
		}
		return s
	}
	tests := []struct {
		name      string
		objects   []runtime.Object
		wantToken bool
		wantGone  bool
	}{
		{name: "a secret that asks gets a token", objects: []runtime.Object{robot, secret("")}, wantToken: true},
		{name: "a secret of a gone account is deleted", objects: []runtime.Object{secret("")}, wantGone: true},
		{name: "a secret of a recreated account is deleted", objects: []runtime.Object{robot, secret("sa-0")}, wantGone: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs := fake.NewClientset(tc.objects...)
			f := informers.NewSharedInformerFactory(cs, 0)
			ctrl, err := NewTokensWithKey(controllercontext.Context{Client: cs, Informers: f, Clock: clocktesting.NewFakeClock(time.Now()),
				Options: controllercontext.Options{RootCAPEM: []byte("CA")}}, key)
			if err != nil {
				t.Fatal(err)
			}
			f.Start(ctx.Done())
			f.WaitForCacheSync(ctx.Done())
			if err := ctrl.sync(ctx, "ns/robot-token"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			got, err := cs.CoreV1().Secrets("ns").Get(ctx, "robot-token", metav1.GetOptions{})
			if tc.wantGone {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("secret still there: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(map[string]string{"ca.crt": "CA", "namespace": "ns"}, map[string]string{"ca.crt": string(got.Data["ca.crt"]), "namespace": string(got.Data["namespace"])}); d != "" {
				t.Errorf("data (-want +got):\n%s", d)
			}
			if got.Annotations[corev1.ServiceAccountUIDKey] != "sa-1" {
				t.Errorf("uid annotation = %q", got.Annotations[corev1.ServiceAccountUIDKey])
			}
			c, _, err := verifier.Verify(string(got.Data["token"]), time.Now(), nil)
			if err != nil {
				t.Fatalf("token does not verify: %v", err)
			}
			if !c.IsLegacy() || c.Subject != "system:serviceaccount:ns:robot" || c.LegacySecretName != "robot-token" || c.LegacyServiceAccountUID != "sa-1" {
				t.Errorf("claims = %+v", c)
			}
			// A second sync writes nothing.
			cs.ClearActions()
			f.Core().V1().Secrets().Informer().GetStore().Update(got)
			if err := ctrl.sync(ctx, "ns/robot-token"); err != nil {
				t.Fatal(err)
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() == "update" {
					t.Errorf("second sync updated the secret")
				}
			}
		})
	}
}
