package authn

import (
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
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

	// verified remembers chains that verified, so that a client's many
	// requests pay for one signature check (about 140 µs), not one each.
	mu       sync.Mutex
	verified map[[sha256.Size]byte]verifiedChain
}

// verifiedChain is a cached verification: good while now is inside
// [notBefore, notAfter] of every certificate in the chain.
type verifiedChain struct {
	user                *User
	notBefore, notAfter time.Time
}

// maxVerifiedChains bounds the cache; it is emptied when full.
const maxVerifiedChains = 4096

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
	h := sha256.New()
	for _, c := range certs {
		h.Write(c.Raw)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	a.mu.Lock()
	hit, ok := a.verified[key]
	a.mu.Unlock()
	if ok && !now.Before(hit.notBefore) && !now.After(hit.notAfter) {
		return hit.user.clone(), true, nil
	}
	chains, err := leaf.Verify(opts)
	if err != nil {
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
	entry := verifiedChain{user: u.clone(), notBefore: leaf.NotBefore, notAfter: leaf.NotAfter}
	for _, c := range chains[0] {
		if c.NotBefore.After(entry.notBefore) {
			entry.notBefore = c.NotBefore
		}
		if c.NotAfter.Before(entry.notAfter) {
			entry.notAfter = c.NotAfter
		}
	}
	a.mu.Lock()
	if a.verified == nil || len(a.verified) >= maxVerifiedChains {
		a.verified = map[[sha256.Size]byte]verifiedChain{}
	}
	a.verified[key] = entry
	a.mu.Unlock()
	return u, true, nil
}

func (u *User) clone() *User {
	c := *u
	c.Groups = append([]string(nil), u.Groups...)
	if u.Extra != nil {
		c.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			c.Extra[k] = append([]string(nil), v...)
		}
	}
	return &c
}
