package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/rest"
)

// Identities of Skiff's components (upstream's user names), each with a
// client certificate from the cluster CA and least privilege through the
// bootstrap RBAC policy.
const (
	SchedulerUser         = "system:kube-scheduler"
	ControllerManagerUser = "system:kube-controller-manager"
	ProxyUser             = "system:kube-proxy"
	NodesGroup            = "system:nodes"
)

// NodeUser is the user name of node's kubelet.
func NodeUser(node string) string { return "system:node:" + node }

func clientTemplate(user string, groups []string) func(time.Time) *x509.Certificate {
	return func(now time.Time) *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: user, Organization: groups},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(LeafValidity),
		}
	}
}

// IssueClient signs a client certificate for user in groups (CN and O, as
// the X.509 authenticator reads them) and returns it with its key, in PEM,
// without storing anything (tests, one-off identities).
func (b *Bundle) IssueClient(user string, groups []string, opts Options) (certPEM, keyPEM []byte, err error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	t := clientTemplate(user, groups)(opts.Now())
	t.SerialNumber = newSerial()
	if t.NotAfter.After(b.CA.NotAfter) {
		t.NotAfter = b.CA.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, t, b.CA, key.Public(), b.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign %s: %w", user, err)
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// EnsureClient returns the client certificate of user in groups stored as
// <name>.crt and <name>.key in the bundle's directory, issued when missing,
// expiring or of another identity.
func (b *Bundle) EnsureClient(name, user string, groups []string, opts Options) (certPEM, keyPEM []byte, err error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ok := func(c *x509.Certificate) bool {
		return c.Subject.CommonName == user && slices.Equal(c.Subject.Organization, groups)
	}
	certPEM, keyPEM, err = b.ensureLeaf(filepath.Base(name)+".crt", filepath.Base(name)+".key", clientTemplate(user, groups), ok, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%s client certificate: %w", user, err)
	}
	return certPEM, keyPEM, nil
}

// ClientRESTConfigFiles is a client-go config for the client certificate
// stored as <name>.crt and <name>.key in the bundle's directory, trusting
// the cluster CA. client-go reads the files again when they change, so a
// long-running component takes up a renewed certificate (Renew).
func (b *Bundle) ClientRESTConfigFiles(server, name string) *rest.Config {
	c := b.AdminRESTConfig(server)
	c.CertData, c.KeyData = nil, nil
	c.CertFile, c.KeyFile = filepath.Join(b.Dir, filepath.Base(name)+".crt"), filepath.Join(b.Dir, filepath.Base(name)+".key")
	return c
}

// ClientRESTConfig is a client-go config for a client certificate against
// server, trusting the cluster CA.
func (b *Bundle) ClientRESTConfig(server string, certPEM, keyPEM []byte) *rest.Config {
	c := b.AdminRESTConfig(server)
	c.CertData, c.KeyData = certPEM, keyPEM
	return c
}
