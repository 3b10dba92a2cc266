package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync/atomic"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/klog/v2"
)

// CertificateFiles serves a certificate and key kept in files, reloaded
// when the files change, as kube-apiserver and the kubelet serve
// --tls-cert-file: k8s.io/apiserver's dynamiccertificates watches both
// files (fsnotify, rewatching after a rename or removal) and reads them
// again; a pair that does not load (a key written before its certificate)
// keeps the last good one and is retried. So a certificate renewed on
// disk, by Skiff or by hand, is served to new connections without a
// restart.
type CertificateFiles struct {
	content *dynamiccertificates.DynamicCertKeyPairContent
	chain   [][]byte
	cur     atomic.Pointer[tls.Certificate]
	ready   chan struct{}
}

// NewCertificateFiles loads certFile and keyFile (an error if they do not
// form a pair); chain, DER certificates, is appended to every loaded
// certificate's chain (the join sends the CA). It watches nothing until
// Start.
func NewCertificateFiles(purpose, certFile, keyFile string, chain ...[]byte) (*CertificateFiles, error) {
	content, err := dynamiccertificates.NewDynamicServingContentFromFiles(purpose, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s certificate: %w", purpose, err)
	}
	c := &CertificateFiles{content: content, chain: chain, ready: make(chan struct{})}
	if err := c.load(); err != nil {
		return nil, fmt.Errorf("%s certificate: %w", purpose, err)
	}
	content.AddListener(c)
	return c, nil
}

func (c *CertificateFiles) load() error {
	certPEM, keyPEM := c.content.CurrentCertKeyContent()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return err
		}
	}
	pair.Certificate = append(pair.Certificate, c.chain...)
	c.cur.Store(&pair)
	return nil
}

// Enqueue is called by the watcher when the files hold a new pair
// (dynamiccertificates.Listener).
func (c *CertificateFiles) Enqueue() {
	if err := c.load(); err != nil {
		klog.ErrorS(err, "Reloading certificate", "name", c.content.Name())
		return
	}
	klog.InfoS("Reloaded certificate", "name", c.content.Name(), "notAfter", c.cur.Load().Leaf.NotAfter)
}

// Start watches the files until ctx is done.
func (c *CertificateFiles) Start(ctx context.Context) error {
	close(c.ready)
	c.content.Run(ctx, 1)
	return nil
}

// Ready is closed once Start runs.
func (c *CertificateFiles) Ready() <-chan struct{} { return c.ready }

// GetCertificate returns the current pair (tls.Config.GetCertificate).
func (c *CertificateFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cur.Load(), nil
}

// Current is the certificate served now.
func (c *CertificateFiles) Current() *x509.Certificate { return c.cur.Load().Leaf }
