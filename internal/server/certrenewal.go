package server

import (
	"context"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/pki"
)

// CertificateCheckInterval is how often a running server looks for
// certificates to renew.
const CertificateCheckInterval = 12 * time.Hour

// certRenewal renews the server's certificates while it runs: every
// CertificateCheckInterval, each leaf in the PKI directory within
// pki.RenewBefore (90 days) of expiry is re-issued in place (pki.Renew),
// the rule k3s applies at each start, which Ensure applies here too. So a
// server that is never restarted never serves, or presents, an expired
// certificate. Its readers reload the files: the API server's and the
// kubelet's serving certificates (pki.CertificateFiles), the components'
// identities and the admin client (client-go's file credentials), the
// kubelet client (pki.FileClientCertificate), the embedded etcd (per
// handshake). The admin kubeconfig, which embeds its credentials, is
// written again. The CAs (10 years) are not renewed.
type certRenewal struct {
	dir        string
	kubeconfig string
	serverURL  string
	clock      clock.WithTicker
	ready      chan struct{}
}

func newCertRenewal(dataDir, serverURL string) *certRenewal {
	return &certRenewal{dir: PKIDir(dataDir), kubeconfig: AdminKubeconfigPath(dataDir), serverURL: serverURL, clock: clock.RealClock{}, ready: make(chan struct{})}
}

func (r *certRenewal) Ready() <-chan struct{} { return r.ready }

// Start checks now and every CertificateCheckInterval until ctx is done;
// a failed renewal is logged and tried at the next check.
func (r *certRenewal) Start(ctx context.Context) error {
	close(r.ready)
	t := r.clock.NewTicker(CertificateCheckInterval)
	defer t.Stop()
	for {
		if _, err := r.renew(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Certificate renewal failed; trying again later", "in", CertificateCheckInterval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// renew renews what is due and returns the files it renewed.
func (r *certRenewal) renew(ctx context.Context) ([]string, error) {
	renewed, err := pki.Renew(r.dir, pki.Options{Now: r.clock.Now})
	for _, f := range renewed {
		klog.FromContext(ctx).Info("Renewed certificate", "file", f)
	}
	if slices.Contains(renewed, filepath.Join(r.dir, pki.AdminCertFile)) {
		bundle, berr := pki.Ensure(r.dir, pki.Options{Now: r.clock.Now})
		if berr == nil {
			berr = bundle.WriteAdminKubeconfig(r.kubeconfig, r.serverURL)
		}
		if berr != nil && err == nil {
			err = berr
		}
	}
	return renewed, err
}
