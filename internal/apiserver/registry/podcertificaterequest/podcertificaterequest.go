// Package podcertificaterequest holds certificates.k8s.io/v1
// podcertificaterequests (GA and on by default in v1.37): a node agent
// asks a signer for a certificate for one pod; the signer answers in
// status (Issued with a chain, or Denied, or Failed). Rules as upstream,
// except that a status change is not checked against the caller's "sign"
// permission on the signer (Skiff's authorizer allows every
// authenticated user today).
package podcertificaterequest

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Upstream's limits.
const (
	minMaxExpirationSeconds           = 60 * 60
	maxMaxExpirationSeconds           = 91 * 24 * 60 * 60
	kubernetesMaxMaxExpirationSeconds = 24 * 60 * 60
	maxStubPKCS10RequestSize          = 10 * 1024
	maxCertificateChainSize           = 100 * 1024
	maxUIDLength                      = 128
)

// Resources lists certificates.k8s.io/v1 podcertificaterequests.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{Resource()}
}

// Resource describes certificates.k8s.io/v1 podcertificaterequests.
// Field selectors: spec.signerName, spec.podName, spec.nodeName.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  certificatesv1.SchemeGroupVersion,
		Resource:      "podcertificaterequests",
		Kind:          "PodCertificateRequest",
		ListKind:      "PodCertificateRequestList",
		SingularName:  "podcertificaterequest",
		Namespaced:    true,
		StoragePrefix: "podcertificaterequests",
		New:           func() runtime.Object { return &certificatesv1.PodCertificateRequest{} },
		NewList:       func() runtime.Object { return &certificatesv1.PodCertificateRequestList{} },
		Strategy:      Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// Strategy is the podcertificaterequests strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// PrepareForCreate clears the status and defaults maxExpirationSeconds
// to 24 hours, as upstream's defaulting does.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	r := obj.(*certificatesv1.PodCertificateRequest)
	r.Status = certificatesv1.PodCertificateRequestStatus{}
	if r.Spec.MaxExpirationSeconds == nil {
		r.Spec.MaxExpirationSeconds = ptr.To[int32](kubernetesMaxMaxExpirationSeconds)
	}
}

// PrepareForUpdate keeps the status.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*certificatesv1.PodCertificateRequest).Status = old.(*certificatesv1.PodCertificateRequest).Status
}

// PrepareForStatusUpdate keeps the spec.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*certificatesv1.PodCertificateRequest).Spec = old.(*certificatesv1.PodCertificateRequest).Spec
}

// IsKubernetesSignerName says the signer is one of the Kubernetes
// project's (kubernetes.io or a subdomain).
func IsKubernetesSignerName(signer string) bool {
	host, _, _ := strings.Cut(signer, "/")
	return host == "kubernetes.io" || strings.HasSuffix(host, ".kubernetes.io")
}

// ValidateSignerName checks "<domain with a dot>/<path of DNS
// subdomains>", as upstream's ValidateSignerName.
func ValidateSignerName(path *field.Path, signer string) field.ErrorList {
	if signer == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	segs := strings.Split(signer, "/")
	if len(segs) != 2 {
		return field.ErrorList{field.Invalid(path, signer, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	if len(segs[0]) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(path, "", validation.DNS1123SubdomainMaxLength))
	}
	labels := strings.Split(segs[0], ".")
	for _, l := range labels {
		if msgs := validation.IsDNS1123Label(l); len(msgs) > 0 {
			for _, m := range msgs {
				errs = append(errs, field.Invalid(path, segs[0], fmt.Sprintf("validating label %q: %s", l, m)))
			}
			break
		}
	}
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(path, segs[0], "should be a domain with at least two segments separated by dots"))
	}
	for _, l := range strings.Split(segs[1], ".") {
		if msgs := validation.IsDNS1123Subdomain(l); len(msgs) > 0 {
			for _, m := range msgs {
				errs = append(errs, field.Invalid(path, segs[1], fmt.Sprintf("validating label %q: %s", l, m)))
			}
			break
		}
	}
	maxLen := validation.DNS1123SubdomainMaxLength + validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 2
	if len(signer) > maxLen {
		errs = append(errs, field.TooLong(path, "", maxLen))
	}
	return errs
}

// Validate checks a new request: signer, pod, service account and node
// names and UIDs, maxExpirationSeconds in range (24 h for Kubernetes
// signers, 91 days for others), and a signed PKCS#10 stub with an
// Ed25519, ECDSA (P256/P384/P521) or RSA (3072/4096) key.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	r := obj.(*certificatesv1.PodCertificateRequest)
	s, sp := &r.Spec, field.NewPath("spec")
	errs := ValidateSignerName(sp.Child("signerName"), s.SignerName)
	if s.UnverifiedUserAnnotations != nil {
		errs = append(errs, apimachineryvalidation.ValidateAnnotations(s.UnverifiedUserAnnotations, sp.Child("unverifiedUserAnnotations"))...)
	}
	name := func(v, child string) {
		for _, m := range validation.IsDNS1123Subdomain(v) {
			errs = append(errs, field.Invalid(sp.Child(child), v, m))
		}
	}
	uid := func(v, child string) {
		switch {
		case v == "":
			errs = append(errs, field.Invalid(sp.Child(child), v, "must not be empty"))
		case len(v) > maxUIDLength:
			errs = append(errs, field.TooLong(sp.Child(child), v, maxUIDLength))
		}
	}
	name(s.PodName, "podName")
	uid(string(s.PodUID), "podUID")
	name(s.ServiceAccountName, "serviceAccountName")
	uid(string(s.ServiceAccountUID), "serviceAccountUID")
	name(string(s.NodeName), "nodeName")
	uid(string(s.NodeUID), "nodeUID")
	if s.MaxExpirationSeconds == nil {
		return append(errs, field.Required(sp.Child("maxExpirationSeconds"), "must be set"))
	}
	upper := int32(maxMaxExpirationSeconds)
	if IsKubernetesSignerName(s.SignerName) {
		upper = kubernetesMaxMaxExpirationSeconds
	}
	if m := *s.MaxExpirationSeconds; m < minMaxExpirationSeconds || m > upper {
		errs = append(errs, field.Invalid(sp.Child("maxExpirationSeconds"), m, fmt.Sprintf("must be in the range [%d, %d]", minMaxExpirationSeconds, upper)))
	}
	if len(s.StubPKCS10Request) == 0 {
		return append(errs, field.Invalid(sp, field.OmitValueType{}, "exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set"))
	}
	return append(errs, validateStub(s.StubPKCS10Request, sp.Child("stubPKCS10Request"))...)
}

func validateStub(stub []byte, path *field.Path) field.ErrorList {
	if len(stub) > maxStubPKCS10RequestSize {
		return field.ErrorList{field.TooLong(path, "", maxStubPKCS10RequestSize)}
	}
	req, err := x509.ParseCertificateRequest(stub)
	if err != nil {
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, "must be a valid PKCS#10 CSR")}
	}
	switch pub := req.PublicKey.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() && pub.Curve != elliptic.P384() && pub.Curve != elliptic.P521() {
			return field.ErrorList{field.Invalid(path, "curve "+pub.Curve.Params().Name, "elliptic public keys must use curve P256, P384, or P521")}
		}
	case *rsa.PublicKey:
		if bits := pub.Size() * 8; bits != 3072 && bits != 4096 {
			return field.ErrorList{field.Invalid(path, fmt.Sprintf("%d-bit modulus", bits), "RSA keys must have modulus size 3072 or 4096")}
		}
	default:
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, "unknown public key type; supported types are Ed25519, ECDSA, and RSA")}
	}
	if err := req.CheckSignature(); err != nil {
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, "invalid signature")}
	}
	return nil
}

// ValidateUpdate: the spec is immutable.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	r, o := obj.(*certificatesv1.PodCertificateRequest), old.(*certificatesv1.PodCertificateRequest)
	return apimachineryvalidation.ValidateImmutableField(r.Spec, o.Spec, field.NewPath("spec"))
}

var terminalTypes = []string{
	certificatesv1.PodCertificateRequestConditionTypeIssued,
	certificatesv1.PodCertificateRequestConditionTypeDenied,
	certificatesv1.PodCertificateRequestConditionTypeFailed,
}

// State is "Pending", or the request's terminal condition (Issued,
// Denied, Failed), as kubectl shows it.
func State(r *certificatesv1.PodCertificateRequest) string {
	state := "Pending"
	for _, c := range r.Status.Conditions {
		for _, t := range terminalTypes {
			if c.Type == t {
				state = t
			}
		}
	}
	return state
}

// ValidateStatusUpdate: only the Issued, Denied and Failed conditions,
// at most one, with status True; a terminal status is immutable; Denied
// and Failed carry nothing else; Issued carries a certificate chain of
// CERTIFICATE blocks whose leaf parses and matches notBefore and
// notAfter, lives at least an hour and at most maxExpirationSeconds, and
// a beginRefreshAt at least 10 minutes inside that window.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	r, o := obj.(*certificatesv1.PodCertificateRequest), old.(*certificatesv1.PodCertificateRequest)
	cp := field.NewPath("status", "conditions")
	var errs field.ErrorList
	known := 0
	for i, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			known++
			if known > 1 {
				errs = append(errs, field.Invalid(cp.Index(i).Child("type"), c.Type, `There may be at most one condition with type "Issued", "Denied", or "Failed"`))
			}
			if c.Status != metav1.ConditionTrue {
				errs = append(errs, field.NotSupported(cp.Index(i).Child("status"), c.Status, []metav1.ConditionStatus{metav1.ConditionTrue}))
			}
		default:
			errs = append(errs, field.NotSupported(cp.Index(i).Child("type"), c.Type, terminalTypes))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(r.Status.Conditions, cp)...)
	if len(errs) > 0 {
		return errs
	}
	sp := field.NewPath("status")
	if State(o) != "Pending" {
		if !apiequality.Semantic.DeepEqual(r.Status, o.Status) {
			errs = append(errs, field.Invalid(sp, field.OmitValueType{}, "immutable after PodCertificateRequest is issued, denied, or failed"))
		}
		return errs
	}
	switch State(r) {
	case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
		if !apiequality.Semantic.DeepEqual(r.Status, certificatesv1.PodCertificateRequestStatus{Conditions: r.Status.Conditions}) {
			errs = append(errs, field.Invalid(sp, field.OmitValueType{}, "non-condition status fields must be empty when denying or failing the PodCertificateRequest"))
		}
	case certificatesv1.PodCertificateRequestConditionTypeIssued:
		errs = append(errs, validateIssued(r)...)
	}
	return errs
}

func validateIssued(r *certificatesv1.PodCertificateRequest) field.ErrorList {
	st := &r.Status
	chain := field.NewPath("status", "certificateChain")
	if len(st.CertificateChain) > maxCertificateChainSize {
		return field.ErrorList{field.TooLong(chain, "", maxCertificateChainSize)}
	}
	block, _ := pem.Decode([]byte(st.CertificateChain))
	if block == nil {
		return field.ErrorList{field.Invalid(chain, st.CertificateChain, "issued certificate chain must contain at least one certificate")}
	}
	if block.Type != "CERTIFICATE" {
		return field.ErrorList{field.Invalid(chain, st.CertificateChain, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")}
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return field.ErrorList{field.Invalid(chain, st.CertificateChain, "leaf certificate does not parse as valid X.509")}
	}
	var errs field.ErrorList
	sp := field.NewPath("status")
	if st.NotBefore == nil {
		errs = append(errs, field.Required(sp.Child("notBefore"), "must be present and consistent with the issued certificate"))
	}
	if st.NotAfter == nil {
		errs = append(errs, field.Required(sp.Child("notAfter"), "must be present and consistent with the issued certificate"))
	}
	if st.BeginRefreshAt == nil {
		errs = append(errs, field.Required(sp.Child("beginRefreshAt"), "must be present and in the range [notbefore+10min, notafter-10min]"))
	}
	if len(errs) > 0 {
		return errs
	}
	if !st.NotBefore.Time.Equal(leaf.NotBefore) {
		errs = append(errs, field.Invalid(sp.Child("notBefore"), st.NotBefore.Time, "must be set to the NotBefore time encoded in the leaf certificate"))
	}
	if !st.NotAfter.Time.Equal(leaf.NotAfter) {
		errs = append(errs, field.Invalid(sp.Child("notAfter"), st.NotAfter.Time, "must be set to the NotAfter time encoded in the leaf certificate"))
	}
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	if life.Hours() < 1 {
		errs = append(errs, field.Invalid(chain, life, "leaf certificate lifetime must be >= 1 hour"))
	}
	if m := r.Spec.MaxExpirationSeconds; m != nil && life.Seconds() > float64(*m) {
		errs = append(errs, field.Invalid(chain, life, fmt.Sprintf("leaf certificate lifetime must be <= spec.maxExpirationSeconds (%v)", *m)))
	}
	if st.BeginRefreshAt.Time.Before(st.NotBefore.Time.Add(10 * 60e9)) {
		errs = append(errs, field.Invalid(sp.Child("beginRefreshAt"), st.BeginRefreshAt.Time, "must be at least 10 minutes after status.notBefore"))
	}
	if st.BeginRefreshAt.Time.After(st.NotAfter.Time.Add(-10 * 60e9)) {
		errs = append(errs, field.Invalid(sp.Child("beginRefreshAt"), st.BeginRefreshAt.Time, "must be at least 10 minutes before status.notAfter"))
	}
	return errs
}

// FieldSet: spec.signerName, spec.podName, spec.nodeName.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	r := obj.(*certificatesv1.PodCertificateRequest)
	return fields.Set{"spec.signerName": r.Spec.SignerName, "spec.podName": r.Spec.PodName, "spec.nodeName": string(r.Spec.NodeName)}
}

// TableColumns are kubectl's; UnverifiedUserAnnotations only with -o wide.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	doc := certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "PodName", Type: "string", Description: doc["podName"]},
		{Name: "ServiceAccountName", Type: "string", Description: doc["serviceAccountName"]},
		{Name: "NodeName", Type: "string", Description: doc["nodeName"]},
		{Name: "SignerName", Type: "string", Description: doc["signerName"]},
		{Name: "State", Type: "string", Description: "Is the request Pending, Issued, Denied, or Failed?"},
		{Name: "UnverifiedUserAnnotations", Type: "string", Priority: 1, Description: doc["unverifiedUserAnnotations"]},
	}
}

// TableRow renders one request.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	r, ok := obj.(*certificatesv1.PodCertificateRequest)
	if !ok {
		return nil, fmt.Errorf("podcertificaterequest table: unexpected object %T", obj)
	}
	return []interface{}{r.Name, r.Spec.PodName, r.Spec.ServiceAccountName, string(r.Spec.NodeName), r.Spec.SignerName, State(r),
		labels.FormatLabels(r.Spec.UnverifiedUserAnnotations)}, nil
}
