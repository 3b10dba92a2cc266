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
//
// With Serving it keeps the kubelet serving certificate
// (<Dir>/pki/kubelet.{crt,key}) fresh instead, as upstream's kubelet does
// with --rotate-server-certificates: signer kubelet-serving, the node name
// and Addresses as SANs; the kubelet API serves those files through
// pki.CertificateFiles, which reloads them. csrapproving approves a node's
// request for itself; a request made by another user (an agent started
// with someone's --kubeconfig) waits for `kubectl certificate approve`.
type Rotator struct {
	// Dir is the agent's directory (Options.Dir of Join).
	Dir string
	// Node is the node name.
	Node string
	// Serving renews the serving certificate, for the node name and
	// Addresses, instead of the client certificate.
	Serving   bool
	Addresses []string
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
			logger.Error(err, "Certificate renewal failed; retrying", "certificate", r.what(), "in", RetryInterval)
			wait = RetryInterval
		} else {
			logger.V(2).Info("Certificate renewal scheduled", "certificate", r.what(), "at", next)
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
	signer, usage, sans := certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.UsageClientAuth, []string(nil)
	if r.Serving {
		certFile, keyFile = filepath.Join(r.Dir, ServingCertFile), filepath.Join(r.Dir, ServingKeyFile)
		signer, usage, sans = certificatesv1.KubeletServingSignerName, certificatesv1.UsageServerAuth, append([]string{r.Node}, r.Addresses...)
	}
	leaf, err := loadLeaf(certFile, keyFile)
	if err != nil {
		return time.Time{}, fmt.Errorf("certificate rotation: %w", err)
	}
	if RenewAt(leaf).After(r.clock().Now()) {
		return RenewAt(leaf), nil
	}
	keyPEM, certPEM, err := requestCertificateFor(ctx, r.Config, signer, r.Node, sans,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, usage}, r.Lifetime)
	if err != nil {
		return time.Time{}, fmt.Errorf("renew the %s certificate (expires %v): %w", r.what(), leaf.NotAfter, err)
	}
	// The key first: until the certificate follows, the pair on disk does
	// not match and client-go (or the serving certificate's watcher) keeps
	// the one it has.
	if err := writeFile(keyFile, keyPEM); err != nil {
		return time.Time{}, err
	}
	if err := writeFile(certFile, certPEM); err != nil {
		return time.Time{}, err
	}
	klog.FromContext(ctx).Info("Certificate renewed", "certificate", r.what(), "node", r.Node)
	if leaf, err = loadLeaf(certFile, keyFile); err != nil {
		return time.Time{}, fmt.Errorf("certificate rotation: %w", err)
	}
	return RenewAt(leaf), nil
}

func (r *Rotator) what() string {
	if r.Serving {
		return "kubelet serving"
	}
	return "client"
}

func loadLeaf(certFile, keyFile string) (*x509.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(pair.Certificate[0])
}
