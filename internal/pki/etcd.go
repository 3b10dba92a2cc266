package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// EtcdDir is the embedded etcd's PKI, inside the PKI directory (kubeadm's
// layout): a CA of its own, so that nothing the cluster CA signs (a node,
// a user) can reach etcd.
const EtcdDir = "etcd"

// Files inside EtcdDir.
const (
	EtcdCACertFile     = "ca.crt"
	EtcdCAKeyFile      = "ca.key"
	EtcdServerCertFile = "server.crt"
	EtcdServerKeyFile  = "server.key"
	EtcdPeerCertFile   = "peer.crt"
	EtcdPeerKeyFile    = "peer.key"
	EtcdClientCertFile = "apiserver-etcd-client.crt"
	EtcdClientKeyFile  = "apiserver-etcd-client.key"
)

// EtcdClientUser is the common name of the API server's etcd client
// certificate (kubeadm's).
const EtcdClientUser = "kube-apiserver-etcd-client"

// EtcdFiles are the paths of the embedded etcd's credentials.
type EtcdFiles struct {
	// CA verifies the member and its clients and peers.
	CA string
	// ServerCert/ServerKey serve the client URL; PeerCert/PeerKey serve
	// and dial the peer URL.
	ServerCert, ServerKey string
	PeerCert, PeerKey     string
	// ClientCert/ClientKey are the API server's client credentials.
	ClientCert, ClientKey string
}

// EnsureEtcd creates (or reuses) the etcd CA and its three leaves in
// <pkiDir>/etcd: the member's serving and peer certificates (SANs
// localhost, 127.0.0.1, ::1 and the host name; server and client usage, as
// etcd dials its peers with them) and the API server's client certificate.
// Leaves are renewed as the cluster CA's are.
func EnsureEtcd(pkiDir string, opts Options) (EtcdFiles, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	dir := filepath.Join(pkiDir, EtcdDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return EtcdFiles{}, fmt.Errorf("create etcd pki dir: %w", err)
	}
	b := &Bundle{Dir: dir}
	if err := b.ensureCA(opts, "etcd-ca"); err != nil {
		return EtcdFiles{}, fmt.Errorf("etcd CA: %w", err)
	}
	dnsNames := []string{"localhost"}
	if host, err := os.Hostname(); err == nil && host != "" && host != "localhost" {
		dnsNames = append(dnsNames, host)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	member := func(cn string) func(time.Time) *x509.Certificate {
		return func(now time.Time) *x509.Certificate {
			return &x509.Certificate{
				Subject:     pkix.Name{CommonName: cn},
				DNSNames:    dnsNames,
				IPAddresses: ips,
				KeyUsage:    x509.KeyUsageDigitalSignature,
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
				NotBefore:   now.Add(-time.Hour),
				NotAfter:    now.Add(LeafValidity),
			}
		}
	}
	memberOK := func(c *x509.Certificate) bool {
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
	files := EtcdFiles{
		CA:         filepath.Join(dir, EtcdCACertFile),
		ServerCert: filepath.Join(dir, EtcdServerCertFile),
		ServerKey:  filepath.Join(dir, EtcdServerKeyFile),
		PeerCert:   filepath.Join(dir, EtcdPeerCertFile),
		PeerKey:    filepath.Join(dir, EtcdPeerKeyFile),
		ClientCert: filepath.Join(dir, EtcdClientCertFile),
		ClientKey:  filepath.Join(dir, EtcdClientKeyFile),
	}
	if _, _, err := b.ensureLeaf(EtcdServerCertFile, EtcdServerKeyFile, member("skiff-etcd"), memberOK, opts); err != nil {
		return EtcdFiles{}, fmt.Errorf("etcd serving certificate: %w", err)
	}
	if _, _, err := b.ensureLeaf(EtcdPeerCertFile, EtcdPeerKeyFile, member("skiff-etcd-peer"), memberOK, opts); err != nil {
		return EtcdFiles{}, fmt.Errorf("etcd peer certificate: %w", err)
	}
	clientOK := func(c *x509.Certificate) bool { return c.Subject.CommonName == EtcdClientUser }
	if _, _, err := b.ensureLeaf(EtcdClientCertFile, EtcdClientKeyFile, clientTemplate(EtcdClientUser, nil), clientOK, opts); err != nil {
		return EtcdFiles{}, fmt.Errorf("etcd client certificate: %w", err)
	}
	return files, nil
}
