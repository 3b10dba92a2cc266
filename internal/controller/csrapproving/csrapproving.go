// Package csrapproving auto-approves the CertificateSigningRequests nodes
// make when they join, the way upstream's csrapproving controller does:
//
//   - signer kubernetes.io/kube-apiserver-client-kubelet: a node client
//     certificate (CN system:node:<name>, O system:nodes, no SANs, usages
//     client auth with digital signature and/or key encipherment) asked for
//     by a bootstrap token user (group system:bootstrappers: "nodeclient")
//     or by that node itself (renewal: "selfnodeclient"). Upstream asks a
//     SubjectAccessReview for each; Skiff has no authorization yet, so the
//     group and the name are the rule.
//   - signer kubernetes.io/kubelet-serving (Skiff's addition; upstream
//     leaves these to the administrator): a node's serving certificate
//     asked for by that node itself (user system:node:<name> in
//     system:nodes), CN and O as above, only DNS and IP SANs, usages server
//     auth with digital signature and/or key encipherment. Without it
//     `kubectl logs`/`exec` would need a manual approval per node.
//
// Anything else is left alone (neither approved nor denied), as upstream.
package csrapproving

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
const Name = "csrapproving"

const (
	nodeUserPrefix     = "system:node:"
	nodesGroup         = "system:nodes"
	bootstrappersGroup = "system:bootstrappers"
)

// Controller approves node certificate requests.
type Controller struct {
	client kubernetes.Interface
	lister certlisters.CertificateSigningRequestLister
	synced cache.InformerSynced
	clock  clock.Clock
	queue  *worker.Queue[string]
}

// New builds the controller.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	inf := cc.Informers.Certificates().V1().CertificateSigningRequests()
	c := &Controller{client: cc.Client, lister: inf.Lister(), synced: inf.Informer().HasSynced, clock: cc.Clock}
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
	if len(csr.Status.Certificate) > 0 || Decided(csr) {
		return nil
	}
	ok, message := Approvable(csr)
	if !ok {
		return nil
	}
	csr = csr.DeepCopy()
	now := metav1.NewTime(c.clock.Now())
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type:               certificatesv1.CertificateApproved,
		Status:             corev1.ConditionTrue,
		Reason:             "AutoApproved",
		Message:            message,
		LastUpdateTime:     now,
		LastTransitionTime: now,
	})
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("approve %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Approved certificate request", "csr", name, "signer", csr.Spec.SignerName, "requester", csr.Spec.Username)
	return nil
}

// Decided reports whether csr is already approved, denied or failed.
func Decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return true
		}
	}
	return false
}

// Approvable decides whether csr is one this controller approves, and the
// approval's message. It is pure: everything comes from csr.
func Approvable(csr *certificatesv1.CertificateSigningRequest) (bool, string) {
	req, err := certrequest.Parse(csr.Spec.Request)
	if err != nil {
		return false, ""
	}
	node, ok := strings.CutPrefix(req.Subject.CommonName, nodeUserPrefix)
	if !ok || node == "" || !slices.Equal(req.Subject.Organization, []string{nodesGroup}) ||
		len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return false, ""
	}
	switch csr.Spec.SignerName {
	case certificatesv1.KubeAPIServerClientKubeletSignerName:
		if len(req.DNSNames) > 0 || len(req.IPAddresses) > 0 || !usagesOK(csr.Spec.Usages, certificatesv1.UsageClientAuth) {
			return false, ""
		}
		switch {
		case slices.Contains(csr.Spec.Groups, bootstrappersGroup):
			return true, "Auto approving kubelet client certificate after SubjectAccessReview."
		case csr.Spec.Username == req.Subject.CommonName:
			return true, "Auto approving self kubelet client certificate after SubjectAccessReview."
		}
	case certificatesv1.KubeletServingSignerName:
		if len(req.DNSNames)+len(req.IPAddresses) == 0 || !usagesOK(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
			return false, ""
		}
		if csr.Spec.Username == req.Subject.CommonName && slices.Contains(csr.Spec.Groups, nodesGroup) {
			return true, "Auto approving the kubelet serving certificate of its own node."
		}
	}
	return false, ""
}

// usagesOK: the usages include want, and besides it only digital
// signature and key encipherment.
func usagesOK(usages []certificatesv1.KeyUsage, want certificatesv1.KeyUsage) bool {
	if !slices.Contains(usages, want) {
		return false
	}
	for _, u := range usages {
		switch u {
		case want, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		default:
			return false
		}
	}
	return true
}
