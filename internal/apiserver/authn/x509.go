package authn

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// X509 authenticates requests by their TLS client certificate. The leaf
// certificate must chain to a certificate in Roots, be valid now and allow
// client authentication. The subject's CommonName becomes the user name and
// its Organizations the groups, to which system:authenticated is added.
type X509 struct {
	// Roots are the trusted client CAs.
	Roots *x509.CertPool
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// NewX509 returns an X509 authenticator trusting roots.
func NewX509(roots *x509.CertPool) *X509 { return &X509{Roots: roots} }

var _ Authenticator = (*X509)(nil)

// Authenticate implements Authenticator. A request without a client
// certificate gets no opinion; one whose certificate does not verify gets an
// error.
func (a *X509) Authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	if a.Roots == nil {
		return nil, false, errors.New("x509: no client CA configured")
	}
	certs := r.TLS.PeerCertificates
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	opts := x509.VerifyOptions{
		Roots:         a.Roots,
		Intermediates: x509.NewCertPool(),
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	leaf := certs[0]
	if _, err := leaf.Verify(opts); err != nil {
		return nil, false, fmt.Errorf("verify client certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if leaf.Subject.CommonName == "" {
		return nil, false, errors.New("x509: client certificate has no common name")
	}
	groups := make([]string, 0, len(leaf.Subject.Organization)+1)
	groups = append(groups, leaf.Subject.Organization...)
	u := &User{Name: leaf.Subject.CommonName, Groups: groups}
	if !u.InGroup(AllAuthenticated) {
		u.Groups = append(u.Groups, AllAuthenticated)
	}
	return u, true, nil
}
