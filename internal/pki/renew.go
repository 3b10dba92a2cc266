package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Renew re-issues, in place, every leaf certificate of the PKI directory
// dir (and of its etcd/ directory) that is within RenewBefore of expiry:
// the same subject, names and usages, a new key, LeafValidity, signed by
// the CA of that directory that signed it (ca, front-proxy-ca, etcd/ca).
// It returns the certificate files it renewed, in name order. Ensure does
// the same at start; Renew is for a server that keeps running: the files
// are written through a rename and their readers reload them
// (CertificateFiles for serving certificates, FileClientCertificate and
// client-go's file-based credentials for client certificates, etcd per
// handshake). A file that is not a leaf of one of those CAs is left alone.
func Renew(dir string, opts Options) (renewed []string, err error) {
	return renew(dir, opts, func(string, *x509.Certificate) bool { return false })
}

// Reissue re-issues the leaf certificates of dir named by files (relative
// to dir: "apiserver.crt", "etcd/server.crt") now, due or not, as Renew
// does; a named file that is no leaf of dir's CAs is an error.
func Reissue(dir string, opts Options, files ...string) error {
	want := map[string]bool{}
	for _, f := range files {
		want[filepath.Join(dir, f)] = true
	}
	renewed, err := renew(dir, opts, func(path string, _ *x509.Certificate) bool { return want[path] })
	if err != nil {
		return err
	}
	for _, f := range renewed {
		delete(want, f)
	}
	for f := range want {
		return fmt.Errorf("%s is not a leaf certificate of %s", f, dir)
	}
	return nil
}

// renew re-issues the leaves that are due or that force names.
func renew(dir string, opts Options, force func(path string, cert *x509.Certificate) bool) (renewed []string, err error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for _, d := range []string{dir, filepath.Join(dir, EtcdDir)} {
		var cas []*Bundle
		for _, ca := range [][2]string{{CACertFile, CAKeyFile}, {FrontProxyCACertFile, FrontProxyCAKeyFile}} {
			certPEM, errC := os.ReadFile(filepath.Join(d, ca[0]))
			keyPEM, errK := os.ReadFile(filepath.Join(d, ca[1]))
			if errC != nil || errK != nil {
				continue
			}
			cert, key, err := parsePair(certPEM, keyPEM)
			if err != nil {
				return renewed, fmt.Errorf("load CA %s: %w", filepath.Join(d, ca[0]), err)
			}
			cas = append(cas, &Bundle{Dir: d, CA: cert, CAPEM: certPEM, caKey: key})
		}
		certs, _ := filepath.Glob(filepath.Join(d, "*.crt"))
		sort.Strings(certs)
		for _, certFile := range certs {
			keyFile := strings.TrimSuffix(certFile, ".crt") + ".key"
			certPEM, errC := os.ReadFile(certFile)
			keyPEM, errK := os.ReadFile(keyFile)
			if errC != nil || errK != nil {
				continue
			}
			cert, _, err := parsePair(certPEM, keyPEM)
			if err != nil || cert.IsCA || (!opts.Now().Add(RenewBefore).After(cert.NotAfter) && !force(certFile, cert)) {
				continue
			}
			for _, ca := range cas {
				if cert.CheckSignatureFrom(ca.CA) != nil {
					continue
				}
				if err := ca.reissue(cert, certFile, keyFile, opts.Now()); err != nil {
					return renewed, fmt.Errorf("renew %s: %w", certFile, err)
				}
				renewed = append(renewed, certFile)
				break
			}
		}
	}
	return renewed, nil
}

// reissue signs a copy of old's subject, names and usages for a new key,
// valid from now for LeafValidity (not past the CA), and writes key and
// certificate.
func (b *Bundle) reissue(old *x509.Certificate, certFile, keyFile string, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	t := &x509.Certificate{
		SerialNumber: newSerial(),
		Subject:      old.Subject,
		DNSNames:     old.DNSNames,
		IPAddresses:  old.IPAddresses,
		KeyUsage:     old.KeyUsage,
		ExtKeyUsage:  old.ExtKeyUsage,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(LeafValidity),
	}
	if t.NotAfter.After(b.CA.NotAfter) {
		t.NotAfter = b.CA.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, t, b.CA, key.Public(), b.caKey)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	// The key first: until the certificate follows, the files do not form
	// a pair and every reader keeps the one it has.
	if err := writeFile(keyFile, keyPEM); err != nil {
		return err
	}
	return writeFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// FileClientCertificate returns a tls.Config.GetClientCertificate that
// presents the pair in certFile and keyFile, read again whenever either
// file's modification time changes (so a renewed client certificate is
// used for new connections); a pair that does not load keeps the last
// good one.
func FileClientCertificate(certFile, keyFile string) (func(*tls.CertificateRequestInfo) (*tls.Certificate, error), error) {
	var (
		mu     sync.Mutex
		cur    *tls.Certificate
		stamps [2]time.Time
	)
	load := func() (*tls.Certificate, error) {
		mu.Lock()
		defer mu.Unlock()
		var now [2]time.Time
		for i, f := range []string{certFile, keyFile} {
			if st, err := os.Stat(f); err == nil {
				now[i] = st.ModTime()
			}
		}
		if cur != nil && now == stamps {
			return cur, nil
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			if cur != nil {
				return cur, nil
			}
			return nil, err
		}
		cur, stamps = &pair, now
		return cur, nil
	}
	if _, err := load(); err != nil {
		return nil, err
	}
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return load() }, nil
}
