package admission

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"reflect"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

var csrResource = certificatesv1.Resource("certificatesigningrequests")

// signerAllowed asks authorizer whether the request's user may verb
// ("approve", "sign") the signer: the signer's own name, or its domain's
// wildcard "<domain>/*", as upstream's IsAuthorizedForSignerName.
func signerAllowed(ctx context.Context, authorizer authz.Authorizer, a *Attributes, verb, signer string) bool {
	if authorizer == nil || a.User == nil {
		return true // no authorizer wired, or an in-process request
	}
	attrs := authz.Attributes{User: a.User, Verb: verb, APIGroup: certificatesv1.GroupName, APIVersion: "*", Resource: "signers", Name: signer, ResourceRequest: true}
	if d, _, err := authorizer.Authorize(ctx, attrs); err == nil && d == authz.Allow {
		return true
	}
	if i := strings.Index(signer, "/"); i > 0 {
		attrs.Name = signer[:i] + "/*"
		if d, _, err := authorizer.Authorize(ctx, attrs); err == nil && d == authz.Allow {
			return true
		}
	}
	return false
}

// CertificateApproval lets only users allowed to "approve" a CSR's signer
// (resource signers in certificates.k8s.io, named by the signer or
// "<domain>/*") update its approval, as upstream's plugin of that name.
type CertificateApproval struct{ authorizer authz.Authorizer }

var _ Validator = CertificateApproval{}

// NewCertificateApproval asks authorizer.
func NewCertificateApproval(authorizer authz.Authorizer) CertificateApproval {
	return CertificateApproval{authorizer: authorizer}
}

// Name is the upstream name.
func (CertificateApproval) Name() string { return "CertificateApproval" }

// Handles updates.
func (CertificateApproval) Handles(op Operation) bool { return op == Update }

// Validate checks the approve permission.
func (p CertificateApproval) Validate(ctx context.Context, a *Attributes) error {
	if a.Subresource != "approval" || a.Resource.GroupResource() != csrResource {
		return nil
	}
	old, ok := a.OldObject.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return forbidden(a, fmt.Errorf("expected type CertificateSigningRequest, got: %T", a.OldObject))
	}
	if !signerAllowed(ctx, p.authorizer, a, "approve", old.Spec.SignerName) {
		return forbidden(a, fmt.Errorf("user not permitted to approve requests with signerName %q", old.Spec.SignerName))
	}
	return nil
}

// CertificateSigning lets only users allowed to "sign" a CSR's signer
// change its status (certificate or conditions), as upstream's plugin of
// that name.
type CertificateSigning struct{ authorizer authz.Authorizer }

var _ Validator = CertificateSigning{}

// NewCertificateSigning asks authorizer.
func NewCertificateSigning(authorizer authz.Authorizer) CertificateSigning {
	return CertificateSigning{authorizer: authorizer}
}

// Name is the upstream name.
func (CertificateSigning) Name() string { return "CertificateSigning" }

// Handles updates.
func (CertificateSigning) Handles(op Operation) bool { return op == Update }

// Validate checks the sign permission when the status changes.
func (p CertificateSigning) Validate(ctx context.Context, a *Attributes) error {
	if a.Subresource != "status" || a.Resource.GroupResource() != csrResource {
		return nil
	}
	old, ok1 := a.OldObject.(*certificatesv1.CertificateSigningRequest)
	next, ok2 := a.Object.(*certificatesv1.CertificateSigningRequest)
	if !ok1 || !ok2 {
		return forbidden(a, fmt.Errorf("expected type CertificateSigningRequest, got: %T", a.Object))
	}
	if reflect.DeepEqual(old.Status.Certificate, next.Status.Certificate) && apiequality.Semantic.DeepEqual(old.Status.Conditions, next.Status.Conditions) {
		return nil
	}
	if !signerAllowed(ctx, p.authorizer, a, "sign", old.Spec.SignerName) {
		return forbidden(a, fmt.Errorf("user not permitted to sign requests with signerName %q", old.Spec.SignerName))
	}
	return nil
}

// CertificateSubjectRestriction refuses a CSR for the
// kubernetes.io/kube-apiserver-client signer whose subject names the
// system:masters group, as upstream's plugin of that name.
type CertificateSubjectRestriction struct{}

var _ Validator = CertificateSubjectRestriction{}

// Name is the upstream name.
func (CertificateSubjectRestriction) Name() string { return "CertificateSubjectRestriction" }

// Handles creates.
func (CertificateSubjectRestriction) Handles(op Operation) bool { return op == Create }

// Validate parses the request's subject.
func (CertificateSubjectRestriction) Validate(ctx context.Context, a *Attributes) error {
	csr, ok := a.Object.(*certificatesv1.CertificateSigningRequest)
	if !ok || a.Subresource != "" || a.Resource.GroupResource() != csrResource {
		return nil
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return nil
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return forbidden(a, errors.New("failed to parse CSR: PEM block type must be CERTIFICATE REQUEST"))
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return forbidden(a, fmt.Errorf("failed to parse CSR: %v", err))
	}
	for _, org := range req.Subject.Organization {
		if org == "system:masters" {
			return forbidden(a, fmt.Errorf("use of %s signer with system:masters group is not allowed", certificatesv1.KubeAPIServerClientSignerName))
		}
	}
	return nil
}
