// Package csrsigning signs approved CertificateSigningRequests with the
// cluster CA, for upstream's built-in signers that chain to it:
// kubernetes.io/kube-apiserver-client-kubelet (node client certificates),
// kubernetes.io/kube-apiserver-client and kubernetes.io/kubelet-serving.
// As upstream: a request whose usages or names do not fit its signer gets
// a Failed condition (reason SignerValidationFailure) instead of a
// certificate; certificates are back-dated 5 minutes for clock skew, last
// spec.expirationSeconds (at least 10 minutes) or else the configured
// duration (default one year), and never outlive the CA.
package csrsigning

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/certrequest"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry (upstream's).
const Name = "csrsigning"

// DefaultDuration is upstream's --cluster-signing-duration default.
const DefaultDuration = 365 * 24 * time.Hour

// backdate is how far NotBefore is set in the past (upstream's 5 minutes).
const backdate = 5 * time.Minute

// CA is a signing certificate with its key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// LoadCA reads a PEM certificate and key.
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load signing CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("signing CA key cannot sign")
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Controller signs approved requests.
type Controller struct {
	client   kubernetes.Interface
	lister   certlisters.CertificateSigningRequestLister
	synced   cache.InformerSynced
	clock    clock.Clock
	ca       *CA
	duration time.Duration
	queue    *worker.Queue[string]
}

// New builds the controller from the manager's signing CA files; without
// them the controller is disabled (nil, nil).
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	if cc.Options.ClusterSigningCertFile == "" || cc.Options.ClusterSigningKeyFile == "" {
		klog.FromContext(ctx).Info("No cluster signing CA configured; certificate requests will not be signed")
		return nil, nil
	}
	if _, err := os.Stat(cc.Options.ClusterSigningKeyFile); err != nil {
		return nil, fmt.Errorf("csrsigning: %w", err)
	}
	ca, err := LoadCA(cc.Options.ClusterSigningCertFile, cc.Options.ClusterSigningKeyFile)
	if err != nil {
		return nil, err
	}
	return NewWithCA(cc, ca, DefaultDuration)
}

// NewWithCA builds the controller signing with ca; certificates last
// duration unless the request asks for less.
func NewWithCA(cc controllercontext.Context, ca *CA, duration time.Duration) (*Controller, error) {
	inf := cc.Informers.Certificates().V1().CertificateSigningRequests()
	c := &Controller{client: cc.Client, lister: inf.Lister(), synced: inf.Informer().HasSynced, clock: cc.Clock, ca: ca, duration: duration}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.queue = worker.NewQueue(Name, c.sync, worker.Options[string]{Workers: 2, Clock: cc.Clock})
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Start implements controllercontext.Controller.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, []cache.InformerSynced{c.synced}, c.queue)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	csr, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(csr.Status.Certificate) > 0 || !approved(csr) || !signs(csr.Spec.SignerName) {
		return nil
	}
	csr = csr.DeepCopy()
	certPEM, err := c.Sign(csr)
	if err != nil {
		now := metav1.NewTime(c.clock.Now())
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type:               certificatesv1.CertificateFailed,
			Status:             corev1.ConditionTrue,
			Reason:             "SignerValidationFailure",
			Message:            err.Error(),
			LastUpdateTime:     now,
			LastTransitionTime: now,
		})
	} else {
		csr.Status.Certificate = certPEM
	}
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("sign %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Signed certificate request", "csr", name, "signer", csr.Spec.SignerName, "failed", err != nil)
	return nil
}

func approved(csr *certificatesv1.CertificateSigningRequest) bool {
	ok := false
	for _, cond := range csr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved:
			ok = true
		case certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return false
		}
	}
	return ok
}

func signs(signer string) bool {
	switch signer {
	case certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.KubeAPIServerClientSignerName, certificatesv1.KubeletServingSignerName:
		return true
	}
	return false
}

// Sign checks csr against its signer's rules and returns the PEM
// certificate.
func (c *Controller) Sign(csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	req, err := certrequest.Parse(csr.Spec.Request)
	if err != nil {
		return nil, fmt.Errorf("unable to parse csr %q: %v", csr.Name, err)
	}
	if err := validate(csr.Spec.SignerName, req, csr.Spec.Usages); err != nil {
		return nil, err
	}
	keyUsage, extUsage := x509Usages(csr.Spec.Usages)
	now := c.clock.Now()
	lifetime := c.duration
	if s := csr.Spec.ExpirationSeconds; s != nil {
		lifetime = min(lifetime, max(time.Duration(*s)*time.Second, 10*time.Minute))
	}
	notAfter := now.Add(lifetime)
	if notAfter.After(c.ca.Cert.NotAfter) {
		notAfter = c.ca.Cert.NotAfter
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               req.Subject,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPAddresses,
		EmailAddresses:        req.EmailAddresses,
		URIs:                  req.URIs,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              keyUsage,
		ExtKeyUsage:           extUsage,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca.Cert, req.PublicKey, c.ca.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// validate applies the signer's rules (upstream's
// isKubeletServing/isKubeletClient checks in the signer).
func validate(signer string, req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	allowed := func(want certificatesv1.KeyUsage) error {
		if !slices.Contains(usages, want) {
			return fmt.Errorf("usages did not include %q", want)
		}
		for _, u := range usages {
			switch u {
			case want, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
			default:
				return fmt.Errorf("usage %q is not allowed for signer %s", u, signer)
			}
		}
		return nil
	}
	switch signer {
	case certificatesv1.KubeAPIServerClientKubeletSignerName:
		if !strings.HasPrefix(req.Subject.CommonName, "system:node:") || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
			return errors.New("subject must be CN=system:node:<name>, O=system:nodes")
		}
		if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
			return errors.New("subject alternative names are not allowed")
		}
		return allowed(certificatesv1.UsageClientAuth)
	case certificatesv1.KubeletServingSignerName:
		if !strings.HasPrefix(req.Subject.CommonName, "system:node:") || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
			return errors.New("subject must be CN=system:node:<name>, O=system:nodes")
		}
		if len(req.DNSNames)+len(req.IPAddresses) == 0 || len(req.EmailAddresses)+len(req.URIs) > 0 {
			return errors.New("need at least one DNS or IP subject alternative name, and no email or URI")
		}
		return allowed(certificatesv1.UsageServerAuth)
	default: // kube-apiserver-client
		return allowed(certificatesv1.UsageClientAuth)
	}
}

func x509Usages(usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage) {
	var ku x509.KeyUsage
	var ext []x509.ExtKeyUsage
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature:
			ku |= x509.KeyUsageDigitalSignature
		case certificatesv1.UsageKeyEncipherment:
			ku |= x509.KeyUsageKeyEncipherment
		case certificatesv1.UsageClientAuth:
			ext = append(ext, x509.ExtKeyUsageClientAuth)
		case certificatesv1.UsageServerAuth:
			ext = append(ext, x509.ExtKeyUsageServerAuth)
		}
	}
	return ku, ext
}
