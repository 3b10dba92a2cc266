package join

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/agent/bootstrap"
)

func TestEnsureKeepsAndRepairsTheToken(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	file := filepath.Join(t.TempDir(), TokenFile)
	caA, caB := []byte("ca-a"), []byte("ca-b")

	first, err := New(caA).Ensure(ctx, client, file)
	if err != nil {
		t.Fatal(err)
	}
	if first.CAHash != bootstrap.CAHash(caA) {
		t.Errorf("token pins %s, want the CA's hash", first.CAHash)
	}
	b, _ := os.ReadFile(file)
	if strings.TrimSpace(string(b)) != first.String() {
		t.Errorf("token file = %q, want %s", b, first)
	}
	secretName := "bootstrap-token-" + first.ID
	s, err := client.CoreV1().Secrets("kube-system").Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["token-secret"]) != first.Secret || string(s.Data["usage-bootstrap-authentication"]) != "true" || s.Type != "bootstrap.kubernetes.io/token" {
		t.Errorf("secret = %+v", s)
	}

	// A restart keeps the token.
	again, err := New(caA).Ensure(ctx, client, file)
	if err != nil || again != first {
		t.Errorf("second Ensure = %v, %v; want the same token", again, err)
	}
	// A deleted Secret comes back with the same token.
	if err := client.CoreV1().Secrets("kube-system").Delete(ctx, secretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if again, err = New(caA).Ensure(ctx, client, file); err != nil || again != first {
		t.Errorf("Ensure after the Secret was deleted = %v, %v; want the same token", again, err)
	}
	if _, err := client.CoreV1().Secrets("kube-system").Get(ctx, secretName, metav1.GetOptions{}); err != nil {
		t.Errorf("the Secret was not re-created: %v", err)
	}
	// A new CA means a new token.
	other, err := New(caB).Ensure(ctx, client, file)
	if err != nil || other == first || other.CAHash != bootstrap.CAHash(caB) {
		t.Errorf("Ensure with another CA = %v, %v; want a new token for it", other, err)
	}
}
