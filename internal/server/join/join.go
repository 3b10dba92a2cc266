// Package join is the server side of joining nodes (the agent side is
// internal/agent/bootstrap): the join token in <data-dir>/token and its
// bootstrap-token Secret, the authenticator that accepts it, and the
// serving chain that lets an agent check the server by the token's CA hash.
package join

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/agent/bootstrap"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

// TokenFile is the join token's file name in the data directory.
const TokenFile = "token"

// ExtraGroup is the auth-extra-groups entry of Skiff's join token
// (kubeadm names its default the same way).
const ExtraGroup = "system:bootstrappers:skiff:default-node-token"

// Join holds the server's join state.
type Join struct {
	caDER  []byte
	client atomic.Pointer[kubernetes.Interface]
	auth   *authn.BootstrapToken
}

// New returns the join state for the cluster CA whose certificate is caDER.
// It has no side effects.
func New(caDER []byte) *Join {
	j := &Join{caDER: caDER}
	j.auth = &authn.BootstrapToken{Get: j.getSecret}
	return j
}

// Authenticator accepts bootstrap tokens once Ensure has given it a client
// (until then a bootstrap token gets an error, so 401).
func (j *Join) Authenticator() authn.Authenticator { return j.auth }

func (j *Join) getSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	c := j.client.Load()
	if c == nil {
		return nil, errors.New("bootstrap tokens are not served yet")
	}
	return (*c).CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// ServingCert is serving with the CA certificate appended to its chain, so
// a joining agent can find the CA its token pins in the TLS handshake.
func (j *Join) ServingCert(serving tls.Certificate) tls.Certificate {
	serving.Certificate = append(append([][]byte(nil), serving.Certificate...), j.caDER)
	return serving
}

// Ensure makes sure the join token in tokenFile exists, names this CA and
// has its bootstrap-token Secret in kube-system; it creates a new token
// when the file is missing or is for another CA. The client (an admin)
// also serves the authenticator's Secret lookups from now on.
func (j *Join) Ensure(ctx context.Context, client kubernetes.Interface, tokenFile string) (bootstrap.Token, error) {
	j.client.Store(&client)
	token, err := readToken(tokenFile)
	if err != nil || token.CAHash != bootstrap.CAHash(j.caDER) {
		if token, err = bootstrap.NewToken(j.caDER); err != nil {
			return token, err
		}
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: authn.BootstrapTokenSecretPrefix + token.ID, Namespace: "kube-system"},
		Type:       authn.BootstrapTokenSecretType,
		Data: map[string][]byte{
			authn.BootstrapTokenIDKey:          []byte(token.ID),
			authn.BootstrapTokenSecretKey:      []byte(token.Secret),
			authn.BootstrapTokenUsageAuthKey:   []byte("true"),
			"usage-bootstrap-signing":          []byte("true"),
			authn.BootstrapTokenExtraGroupsKey: []byte(ExtraGroup),
			"description":                      []byte("The join token of skiff server (<data-dir>/token)."),
		},
	}
	secrets := client.CoreV1().Secrets("kube-system")
	have, err := secrets.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := secrets.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return token, fmt.Errorf("join token secret: %w", err)
		}
	case err != nil:
		return token, fmt.Errorf("join token secret: %w", err)
	case have.Type != want.Type || string(have.Data[authn.BootstrapTokenSecretKey]) != token.Secret ||
		string(have.Data[authn.BootstrapTokenUsageAuthKey]) != "true" || len(have.Data[authn.BootstrapTokenExpirationKey]) > 0:
		if err := secrets.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return token, fmt.Errorf("join token secret: %w", err)
		}
		if _, err := secrets.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return token, fmt.Errorf("join token secret: %w", err)
		}
	}
	if err := writeToken(tokenFile, token); err != nil {
		return token, err
	}
	return token, nil
}

func readToken(file string) (bootstrap.Token, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return bootstrap.Token{}, err
	}
	return bootstrap.ParseToken(strings.TrimSpace(string(b)))
}

func writeToken(file string, t bootstrap.Token) error {
	if have, err := readToken(file); err == nil && have == t {
		return nil
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(t.String()+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
