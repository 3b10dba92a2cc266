package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// RenewFraction is how far into its lifetime (from NotBefore to NotAfter)
// a node's client certificate is renewed: upstream's kubelet picks a
// jittered point between 70 and 90%; Skiff takes 80%, which leaves a
// year-long certificate 73 days and a 10-minute one 2 minutes.
const RenewFraction = 0.8

// RetryInterval is how long Rotator waits after a failed renewal.
const RetryInterval = 30 * time.Second

// RenewAt is when a certificate is renewed.
func RenewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(time.Duration(float64(life) * RenewFraction))
}

// Rotator keeps a joined node's client certificate
// (<Dir>/pki/kubelet-client.{crt,key}) fresh, as upstream's kubelet does
// with --rotate-certificates: at RenewAt it asks for a new one by a
// CertificateSigningRequest (signer kube-apiserver-client-kubelet, made
// with the current certificate, which csrapproving approves as the node's
// own renewal) and replaces the files. The node's client config names those
// files, and client-go reloads them, so the new certificate is used
// without a restart.
type Rotator struct {
	// Dir is the agent's directory (Options.Dir of Join).
	Dir string
	// Node is the node name.
	Node string
	// Config talks to the API server with the current certificate.
	Config *rest.Config
	// Lifetime asks the signer for this lifetime (0: its default, a year).
	Lifetime time.Duration
	// Clock decides when to renew (default the real clock).
	Clock clock.WithTicker
}

// Start renews the certificate whenever it is due, until ctx is done; a
// failed renewal is tried again after RetryInterval.
func (r *Rotator) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("certificate-rotation")
	for {
		next, err := r.RenewIfDue(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := next.Sub(r.clock().Now())
		if err != nil {
			logger.Error(err, "Client certificate renewal failed; retrying", "in", RetryInterval)
			wait = RetryInterval
		} else {
			logger.V(2).Info("Client certificate renewal scheduled", "at", next)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.clock().After(wait):
		}
	}
}

func (r *Rotator) clock() clock.WithTicker {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// RenewIfDue renews the certificate if RenewAt has come, and returns when
// the (new) certificate is due.
func (r *Rotator) RenewIfDue(ctx context.Context) (next time.Time, err error) {
	certFile, keyFile := filepath.Join(r.Dir, ClientCertFile), filepath.Join(r.Dir, ClientKeyFile)
	leaf, err := loadLeaf(certFile, keyFile)
	if err != nil {
		return time.Time{}, fmt.Errorf("certificate rotation: %w", err)
	}
	if RenewAt(leaf).After(r.clock().Now()) {
		return RenewAt(leaf), nil
	}
	keyPEM, certPEM, err := requestCertificateFor(ctx, r.Config, certificatesv1.KubeAPIServerClientKubeletSignerName, r.Node, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, r.Lifetime)
	if err != nil {
		return time.Time{}, fmt.Errorf("renew the client certificate (expires %v): %w", leaf.NotAfter, err)
	}
	// The key first: until the certificate follows, the pair on disk does
	// not match and client-go keeps the one it has.
	if err := writeFile(keyFile, keyPEM); err != nil {
		return time.Time{}, err
	}
	if err := writeFile(certFile, certPEM); err != nil {
		return time.Time{}, err
	}
	klog.FromContext(ctx).Info("Client certificate renewed", "node", r.Node)
	if leaf, err = loadLeaf(certFile, keyFile); err != nil {
		return time.Time{}, fmt.Errorf("certificate rotation: %w", err)
	}
	return RenewAt(leaf), nil
}

func loadLeaf(certFile, keyFile string) (*x509.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(pair.Certificate[0])
}
