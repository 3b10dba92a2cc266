package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"time"
)

// Files of the kubelet connection.
const (
	KubeletClientCertFile = "apiserver-kubelet-client.crt"
	KubeletClientKeyFile  = "apiserver-kubelet-client.key"
	// The in-process agent's kubelet serving certificate.
	KubeletServingCertFile = "kubelet.crt"
	KubeletServingKeyFile  = "kubelet.key"
)

// KubeletClientUser is the identity the API server presents to kubelets
// (upstream kubeadm's name); kubelets let it use their whole API.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// EnsureKubeletClient returns the API server's client certificate for
// kubelets (CN kube-apiserver-kubelet-client), created in the bundle's
// directory if missing or expiring.
func (b *Bundle) EnsureKubeletClient(opts Options) (tls.Certificate, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	tmpl := func(now time.Time) *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: KubeletClientUser},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(LeafValidity),
		}
	}
	ok := func(c *x509.Certificate) bool { return c.Subject.CommonName == KubeletClientUser }
	certPEM, keyPEM, err := b.ensureLeaf(KubeletClientCertFile, KubeletClientKeyFile, tmpl, ok, opts)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("kubelet client certificate: %w", err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// KubeletClientTLS is the TLS config the API server dials kubelets with:
// it presents the kubelet client certificate, read from its files again
// when they change (Renew), and trusts the cluster CA.
func (b *Bundle) KubeletClientTLS(opts Options) (*tls.Config, error) {
	if _, err := b.EnsureKubeletClient(opts); err != nil {
		return nil, err
	}
	get, err := FileClientCertificate(filepath.Join(b.Dir, KubeletClientCertFile), filepath.Join(b.Dir, KubeletClientKeyFile))
	if err != nil {
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	return &tls.Config{GetClientCertificate: get, RootCAs: b.CAPool, MinVersion: tls.VersionTLS12}, nil
}

// EnsureKubeletServing returns a kubelet serving certificate for node
// (CN system:node:<node>, O system:nodes) whose SANs are the node name and
// addrs (IPs or DNS names), stored as certFile/keyFile in the bundle's
// directory and re-issued when missing, expiring or missing a SAN. The
// in-process agent uses it; joined agents get theirs by CSR.
func (b *Bundle) EnsureKubeletServing(certFile, keyFile, node string, addrs []string, opts Options) (tls.Certificate, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var dnsNames []string
	var ips []net.IP
	for _, a := range append([]string{node, "localhost", "127.0.0.1"}, addrs...) {
		if ip := net.ParseIP(a); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
		} else if a != "" && !slices.Contains(dnsNames, a) {
			dnsNames = append(dnsNames, a)
		}
	}
	cn := "system:node:" + node
	tmpl := func(now time.Time) *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
			DNSNames:    dnsNames,
			IPAddresses: ips,
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(LeafValidity),
		}
	}
	ok := func(c *x509.Certificate) bool {
		if c.Subject.CommonName != cn {
			return false
		}
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
	certPEM, keyPEM, err := b.ensureLeaf(certFile, keyFile, tmpl, ok, opts)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("kubelet serving certificate: %w", err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
