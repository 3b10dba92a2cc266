package pki

import (
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
	"os"
	"path/filepath"
	"time"
)

// Files of API aggregation's front proxy (kubeadm's names).
const (
	FrontProxyCACertFile     = "front-proxy-ca.crt"
	FrontProxyCAKeyFile      = "front-proxy-ca.key"
	FrontProxyClientCertFile = "front-proxy-client.crt"
	FrontProxyClientKeyFile  = "front-proxy-client.key"
)

// FrontProxyClientUser is the name the API server presents to extension
// API servers; they accept it through requestheader-allowed-names.
const FrontProxyClientUser = "front-proxy-client"

// FrontProxy is the requestheader CA and the client certificate it signs.
type FrontProxy struct {
	CAPEM  []byte
	Client tls.Certificate
}

// EnsureFrontProxy returns the front-proxy CA (its own CA, as upstream:
// extension servers trust it for request headers only) and the API
// server's front-proxy client certificate (CN front-proxy-client),
// creating what is missing or expiring in the bundle's directory.
func (b *Bundle) EnsureFrontProxy(opts Options) (*FrontProxy, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ca := &Bundle{Dir: b.Dir}
	if err := ca.ensureFrontProxyCA(opts); err != nil {
		return nil, err
	}
	tmpl := func(now time.Time) *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: FrontProxyClientUser},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(LeafValidity),
		}
	}
	ok := func(c *x509.Certificate) bool { return c.Subject.CommonName == FrontProxyClientUser }
	certPEM, keyPEM, err := ca.ensureLeaf(FrontProxyClientCertFile, FrontProxyClientKeyFile, tmpl, ok, opts)
	if err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	return &FrontProxy{CAPEM: ca.CAPEM, Client: pair}, nil
}

// ensureFrontProxyCA loads or creates front-proxy-ca.{crt,key} into b.
func (b *Bundle) ensureFrontProxyCA(opts Options) error {
	certPath, keyPath := filepath.Join(b.Dir, FrontProxyCACertFile), filepath.Join(b.Dir, FrontProxyCAKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		cert, key, err := parsePair(certPEM, keyPEM)
		if err != nil {
			return fmt.Errorf("load front-proxy CA: %w", err)
		}
		b.CA, b.CAPEM, b.caKey = cert, certPEM, key
		return nil
	case !errors.Is(certErr, fs.ErrNotExist) || !errors.Is(keyErr, fs.ErrNotExist):
		return fmt.Errorf("front-proxy CA in %s is incomplete (cert: %v, key: %v); remove both files to create a new one", b.Dir, certErr, keyErr)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate front-proxy CA key: %w", err)
	}
	now := opts.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("skiff-front-proxy-ca@%d", now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("create front-proxy CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeFile(keyPath, keyPEM); err != nil {
		return err
	}
	if err := writeFile(certPath, certPEM); err != nil {
		return err
	}
	b.CA, b.CAPEM, b.caKey = cert, certPEM, key
	return nil
}
