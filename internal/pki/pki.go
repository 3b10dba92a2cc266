// Package pki creates and reuses the cluster's certificate authority and the
// certificates signed by it: the API server's serving certificate and the
// admin client certificate. Everything lives in one directory (normally
// <data-dir>/pki) as PEM files with mode 0600; Ensure creates what is missing
// and reuses what is valid, so a restarted server keeps its identity.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names inside the PKI directory.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "apiserver.crt"
	ServingKeyFile  = "apiserver.key"
	AdminCertFile   = "admin.crt"
	AdminKeyFile    = "admin.key"
)

// Validity periods.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
	// RenewBefore is how close to expiry a leaf certificate is re-issued
	// when the server starts (k3s's 90 days: a server restarted at least
	// once a quarter never runs on an expired certificate, with no command
	// to remember).
	RenewBefore = 90 * 24 * time.Hour
)

// AdminUser and AdminGroup are the identity in the admin client certificate.
const (
	AdminUser  = "system:admin"
	AdminGroup = "system:masters"
)

// DefaultServiceIP is the ClusterIP of the default/kubernetes Service; it is
// always in the serving certificate.
const DefaultServiceIP = "10.43.0.1"

// Options tune Ensure. The zero value gives the defaults.
type Options struct {
	// BindAddress is the address the API server listens on; it is added to
	// the serving certificate unless it is unspecified (0.0.0.0, ::) or empty.
	// An unspecified one adds the host's primary address instead (that of
	// the default route's interface: the address joining agents dial, and
	// the one the API server advertises).
	BindAddress string
	// ExtraSANs are more DNS names or IP addresses for the serving certificate.
	ExtraSANs []string
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Bundle is the loaded PKI.
type Bundle struct {
	// Dir is the directory the files live in.
	Dir string
	// CA is the certificate authority and CAPEM its PEM encoding.
	CA    *x509.Certificate
	CAPEM []byte
	// CAPool holds only CA; it verifies clients and the server.
	CAPool *x509.CertPool
	// Serving is the API server's certificate with its key.
	Serving tls.Certificate
	// AdminCertPEM and AdminKeyPEM are the admin client credentials.
	AdminCertPEM []byte
	AdminKeyPEM  []byte
	// ServiceAccountKey signs service-account tokens (sa.key; its public
	// half is sa.pub).
	ServiceAccountKey crypto.Signer

	caKey crypto.Signer
}

// ServingSANs returns the DNS names and IP addresses the serving certificate
// must carry for the given options.
func ServingSANs(opts Options) (dnsNames []string, ips []net.IP) {
	names := []string{
		"localhost", "127.0.0.1", DefaultServiceIP,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		names = append(names, host)
	}
	if ip := net.ParseIP(opts.BindAddress); opts.BindAddress != "" && (ip == nil || !ip.IsUnspecified()) {
		names = append(names, opts.BindAddress)
	} else if ip != nil && ip.IsUnspecified() {
		if primary := primaryAddress(); primary != "" {
			names = append(names, primary)
		}
	}
	names = append(names, opts.ExtraSANs...)
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
			continue
		}
		if !slices.Contains(dnsNames, n) {
			dnsNames = append(dnsNames, n)
		}
	}
	return dnsNames, ips
}

// Ensure loads the PKI from dir, creating the directory, the CA and any
// missing, expiring or (for the serving certificate) no longer matching
// certificate. A CA that cannot be read is an error: it is never replaced
// silently, because every issued credential depends on it.
func Ensure(dir string, opts Options) (*Bundle, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	b := &Bundle{Dir: dir}
	if err := b.ensureCA(opts, "skiff-ca"); err != nil {
		return nil, err
	}

	dnsNames, ips := ServingSANs(opts)
	servingTmpl := func(now time.Time) *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			DNSNames:    dnsNames,
			IPAddresses: ips,
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(LeafValidity),
		}
	}
	servingOK := func(c *x509.Certificate) bool {
		for _, n := range dnsNames {
			if !slices.Contains(c.DNSNames, n) {
				return false
			}
		}
		for _, ip := range ips {
			if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
				return false
			}
		}
		return true
	}
	certPEM, keyPEM, err := b.ensureLeaf(ServingCertFile, ServingKeyFile, servingTmpl, servingOK, opts)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if b.Serving, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}

	adminTmpl := func(now time.Time) *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(LeafValidity),
		}
	}
	adminOK := func(c *x509.Certificate) bool {
		return c.Subject.CommonName == AdminUser && slices.Equal(c.Subject.Organization, []string{AdminGroup})
	}
	if b.AdminCertPEM, b.AdminKeyPEM, err = b.ensureLeaf(AdminCertFile, AdminKeyFile, adminTmpl, adminOK, opts); err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	if b.ServiceAccountKey, err = EnsureServiceAccountKey(dir); err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	return b, nil
}

// ensureCA loads or creates the CA of b.Dir; a new one is named
// <name>@<unix time>.
func (b *Bundle) ensureCA(opts Options, name string) error {
	certPath, keyPath := filepath.Join(b.Dir, CACertFile), filepath.Join(b.Dir, CAKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		cert, key, err := parsePair(certPEM, keyPEM)
		if err != nil {
			return fmt.Errorf("load CA from %s: %w", b.Dir, err)
		}
		b.CA, b.CAPEM, b.caKey = cert, certPEM, key
	case errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist):
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("generate CA key: %w", err)
		}
		now := opts.Now()
		tmpl := &x509.Certificate{
			SerialNumber:          newSerial(),
			Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", name, now.Unix())},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.Add(CAValidity),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			return fmt.Errorf("create CA: %w", err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("parse CA: %w", err)
		}
		keyPEM, err := encodeKey(key)
		if err != nil {
			return err
		}
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if err := writeFile(keyPath, keyPEM); err != nil {
			return err
		}
		if err := writeFile(certPath, certPEM); err != nil {
			return err
		}
		b.CA, b.CAPEM, b.caKey = cert, certPEM, key
	default:
		return fmt.Errorf("CA in %s is incomplete (cert: %v, key: %v); remove both files to create a new CA", b.Dir, certErr, keyErr)
	}
	b.CAPool = x509.NewCertPool()
	b.CAPool.AddCert(b.CA)
	return nil
}

// ensureLeaf returns the PEM pair stored under certFile/keyFile if it is
// signed by the CA, not close to expiry and accepted by ok; otherwise it
// issues a new one from tmpl and stores it.
func (b *Bundle) ensureLeaf(certFile, keyFile string, tmpl func(time.Time) *x509.Certificate, ok func(*x509.Certificate) bool, opts Options) (certPEM, keyPEM []byte, err error) {
	certPath, keyPath := filepath.Join(b.Dir, certFile), filepath.Join(b.Dir, keyFile)
	now := opts.Now()
	if c, errC := os.ReadFile(certPath); errC == nil {
		if k, errK := os.ReadFile(keyPath); errK == nil {
			if cert, _, err := parsePair(c, k); err == nil && b.valid(cert, now) && ok(cert) {
				return c, k, nil
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	t := tmpl(now)
	t.SerialNumber = newSerial()
	if t.NotAfter.After(b.CA.NotAfter) {
		t.NotAfter = b.CA.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, t, b.CA, key.Public(), b.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	if err := writeFile(keyPath, keyPEM); err != nil {
		return nil, nil, err
	}
	if err := writeFile(certPath, certPEM); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func (b *Bundle) valid(cert *x509.Certificate, now time.Time) bool {
	if now.Add(RenewBefore).After(cert.NotAfter) || now.Before(cert.NotBefore) {
		return false
	}
	return cert.CheckSignatureFrom(b.CA) == nil
}

// ClientTLS returns a TLS config that trusts the CA and presents the admin
// certificate.
func (b *Bundle) ClientTLS() (*tls.Config, error) {
	pair, err := tls.X509KeyPair(b.AdminCertPEM, b.AdminKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("admin key pair: %w", err)
	}
	return &tls.Config{RootCAs: b.CAPool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("no CERTIFICATE PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse certificate: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("no key PEM block")
	}
	var key crypto.Signer
	switch kb.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	case "PRIVATE KEY":
		var k any
		k, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
		if err == nil {
			s, isSigner := k.(crypto.Signer)
			if !isSigner {
				return nil, nil, fmt.Errorf("unsupported key type %T", k)
			}
			key = s
		}
	default:
		return nil, nil, fmt.Errorf("unsupported key PEM type %q", kb.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("parse key: %w", err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, nil, fmt.Errorf("key does not match certificate: %w", err)
	}
	return cert, key, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func newSerial() *big.Int {
	limit := new(big.Int).Lsh(big.NewInt(1), 126)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		// crypto/rand never fails on supported platforms.
		panic(fmt.Sprintf("read random serial: %v", err))
	}
	return n.Add(n, big.NewInt(1))
}

// writeFile writes data with mode 0600 through a temporary file and rename,
// so a crash never leaves a half-written credential.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// primaryAddress is the address of the default route's interface (IPv4
// first), or "" when there is none.
func primaryAddress() string {
	for _, target := range []string{"192.0.2.1:9", "[2001:db8::1]:9"} {
		c, err := net.Dial("udp", target)
		if err != nil {
			continue
		}
		ip := c.LocalAddr().(*net.UDPAddr).IP
		c.Close()
		if !ip.IsLoopback() && !ip.IsUnspecified() {
			return ip.String()
		}
	}
	return ""
}
