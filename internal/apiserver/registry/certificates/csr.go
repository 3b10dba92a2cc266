// Package certificates holds the rules of certificates.k8s.io/v1
// certificatesigningrequests: validation of the PEM request, signer name,
// usages and conditions; the requester filled from the authenticated user;
// an immutable spec; and the separate rules of the status and approval
// subresources (PrepareForApprovalUpdate, ValidateApprovalUpdate).
package certificates

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

const (
	// LegacyUnknownSignerName is refused by the v1 API.
	LegacyUnknownSignerName = "kubernetes.io/legacy-unknown"
	// minExpirationSeconds is the shortest duration a request may ask for.
	minExpirationSeconds = 600
)

// Resources lists the certificates.k8s.io/v1 resources: certificatesigningrequests.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{Resource()}
}

// Resource describes certificates.k8s.io/v1 certificatesigningrequests,
// with the status and approval subresources.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  certificatesv1.SchemeGroupVersion,
		Resource:      "certificatesigningrequests",
		Kind:          "CertificateSigningRequest",
		ListKind:      "CertificateSigningRequestList",
		SingularName:  "certificatesigningrequest",
		ShortNames:    []string{"csr"},
		StoragePrefix: "certificatesigningrequests",
		New:           func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		NewList:       func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		Strategy:      Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource(), "approval": registry.ApprovalSubresource()},
	}
}

// Strategy is the certificatesigningrequests strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// SetRequester records who asked for the certificate. Upstream takes these
// from the authenticated user on create and never from the client.
func SetRequester(csr *certificatesv1.CertificateSigningRequest, user string, uid string, groups []string, extra map[string][]string) {
	csr.Spec.Username = user
	csr.Spec.UID = uid
	csr.Spec.Groups = append([]string(nil), groups...)
	csr.Spec.Extra = nil
	if len(extra) > 0 {
		csr.Spec.Extra = make(map[string]certificatesv1.ExtraValue, len(extra))
		for k, v := range extra {
			csr.Spec.Extra[k] = append(certificatesv1.ExtraValue(nil), v...)
		}
	}
}

// PrepareForCreate clears the status (a request cannot be created already
// approved) and fills the requester from the user in ctx, when there is
// one; otherwise the requester fields are cleared.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	csr := obj.(*certificatesv1.CertificateSigningRequest)
	csr.Status = certificatesv1.CertificateSigningRequestStatus{}
	if u, ok := authn.UserFrom(ctx); ok && u != nil {
		SetRequester(csr, u.Name, u.UID, u.Groups, u.Extra)
	} else {
		SetRequester(csr, "", "", nil, nil)
	}
}

// PrepareForUpdate keeps spec and status: neither changes through the main
// resource, as upstream.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	csr, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	csr.Spec = o.Spec
	csr.Status = o.Status
}

// PrepareForStatusUpdate keeps the spec and, as upstream, the Approved and
// Denied conditions where they are (their values from old, when the update
// has as many of each; adding or removing them is refused by
// ValidateStatusUpdate), and stamps new conditions' times.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	prepareStatus(obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest), time.Now())
}

func prepareStatus(csr, old *certificatesv1.CertificateSigningRequest, now time.Time) {
	csr.Spec = old.Spec
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
		was, is := conditionIndices(old.Status.Conditions, t), conditionIndices(csr.Status.Conditions, t)
		if len(was) != len(is) {
			continue
		}
		for i, j := range is {
			csr.Status.Conditions[j] = old.Status.Conditions[was[i]]
		}
	}
	stampConditions(csr, old, now)
}

func conditionIndices(conds []certificatesv1.CertificateSigningRequestCondition, t certificatesv1.RequestConditionType) []int {
	var out []int
	for i, c := range conds {
		if c.Type == t {
			out = append(out, i)
		}
	}
	return out
}

// PrepareForApprovalUpdate applies the rules of the approval subresource:
// status.conditions come from obj (all of them, as upstream's);
// everything else (spec, the rest of the status) is kept from old.
func PrepareForApprovalUpdate(obj, old *certificatesv1.CertificateSigningRequest) {
	PrepareForApprovalUpdateAt(obj, old, time.Now())
}

// PrepareForApprovalUpdateAt is PrepareForApprovalUpdate with the time used
// for new conditions' timestamps given.
func PrepareForApprovalUpdateAt(obj, old *certificatesv1.CertificateSigningRequest, now time.Time) {
	// As upstream's: the conditions are the request's, all of them (the
	// validation keeps Approved and Denied once set); the rest of the
	// status and the spec stay.
	obj.Spec = old.Spec
	conds := obj.Status.Conditions
	obj.Status = *old.Status.DeepCopy()
	obj.Status.Conditions = conds
	stampConditions(obj, old, now)
}

// ValidateApprovalUpdate checks an update through /approval: the
// conditions must be valid, an Approved or Denied condition, once set, may
// be neither removed nor changed, and a Failed one not removed.
func ValidateApprovalUpdate(obj, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	path := field.NewPath("status", "conditions")
	errs := validateConditions(obj.Status.Conditions, path)
	if _, had := findCondition(old.Status.Conditions, certificatesv1.CertificateFailed); had {
		if _, has := findCondition(obj.Status.Conditions, certificatesv1.CertificateFailed); !has {
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("updates may not remove a condition of type %q", certificatesv1.CertificateFailed)))
		}
	}
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
		before, had := findCondition(old.Status.Conditions, t)
		if !had {
			continue
		}
		after, has := findCondition(obj.Status.Conditions, t)
		switch {
		case !has:
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		case after.Status != before.Status:
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("updates may not change the status of a condition of type %q", t)))
		}
	}
	return errs
}

// stampConditions fills missing lastUpdateTime and lastTransitionTime:
// the transition time is carried from old when the status is unchanged.
func stampConditions(csr, old *certificatesv1.CertificateSigningRequest, now time.Time) {
	t := metav1.NewTime(now)
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = t
		}
		if c.LastTransitionTime.IsZero() {
			if prev, ok := findCondition(old.Status.Conditions, c.Type); ok && prev.Status == c.Status && !prev.LastTransitionTime.IsZero() {
				c.LastTransitionTime = prev.LastTransitionTime
			} else {
				c.LastTransitionTime = t
			}
		}
	}
}

func isApprovalCondition(t certificatesv1.RequestConditionType) bool {
	return t == certificatesv1.CertificateApproved || t == certificatesv1.CertificateDenied
}

func findCondition(conds []certificatesv1.CertificateSigningRequestCondition, t certificatesv1.RequestConditionType) (certificatesv1.CertificateSigningRequestCondition, bool) {
	for _, c := range conds {
		if c.Type == t {
			return c, true
		}
	}
	return certificatesv1.CertificateSigningRequestCondition{}, false
}

// Validate checks a new request.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	csr := obj.(*certificatesv1.CertificateSigningRequest)
	errs := ValidateSpec(&csr.Spec, field.NewPath("spec"))
	return append(errs, validateStatus(&csr.Status, field.NewPath("status"))...)
}

// ValidateUpdate checks an update and that the spec did not change.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	csr, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	errs := s.Validate(ctx, obj)
	if !apiequality.Semantic.DeepEqual(csr.Spec, o.Spec) {
		errs = append(errs, field.Invalid(field.NewPath("spec"), "", "field is immutable"))
	}
	return errs
}

// ValidateStatusUpdate checks the conditions and that an issued
// certificate is neither changed nor set on a request that is not approved.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	csr, o := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	sp := field.NewPath("status")
	errs := validateStatus(&csr.Status, sp)
	// Conditions: Approved, Denied and Failed are never removed; Approved
	// and Denied are neither added nor changed but through /approval.
	cond := sp.Child("conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		was, is := len(conditionIndices(o.Status.Conditions, t)), len(conditionIndices(csr.Status.Conditions, t))
		switch {
		case is < was:
			errs = append(errs, field.Forbidden(cond, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		case is > was && isApprovalCondition(t):
			errs = append(errs, field.Forbidden(cond, fmt.Sprintf("updates may not add a condition of type %q", t)))
		}
	}
	cp := sp.Child("certificate")
	if len(o.Status.Certificate) > 0 && string(o.Status.Certificate) != string(csr.Status.Certificate) {
		errs = append(errs, field.Forbidden(cp, "updates may not modify existing certificate content"))
	}
	if len(csr.Status.Certificate) > 0 && len(o.Status.Certificate) == 0 {
		if _, approved := findCondition(csr.Status.Conditions, certificatesv1.CertificateApproved); !approved {
			errs = append(errs, field.Forbidden(cp, "certificate may only be set on an approved request"))
		}
		if _, failed := findCondition(csr.Status.Conditions, certificatesv1.CertificateFailed); failed {
			errs = append(errs, field.Forbidden(cp, "certificate may not be set on a failed request"))
		}
	}
	return errs
}

// knownUsages are the key usages a request may list.
var knownUsages = func() []string {
	us := []certificatesv1.KeyUsage{
		certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
		certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment,
		certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly,
		certificatesv1.UsageDecipherOnly, certificatesv1.UsageAny, certificatesv1.UsageServerAuth,
		certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning, certificatesv1.UsageEmailProtection,
		certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem, certificatesv1.UsageIPsecTunnel,
		certificatesv1.UsageIPsecUser, certificatesv1.UsageTimestamping, certificatesv1.UsageOCSPSigning,
		certificatesv1.UsageMicrosoftSGC, certificatesv1.UsageNetscapeSGC,
	}
	out := make([]string, 0, len(us))
	for _, u := range us {
		out = append(out, string(u))
	}
	sort.Strings(out)
	return out
}()

func isKnownUsage(u certificatesv1.KeyUsage) bool {
	i := sort.SearchStrings(knownUsages, string(u))
	return i < len(knownUsages) && knownUsages[i] == string(u)
}

// ValidateSpec checks the PEM request, signer name, usages and duration.
func ValidateSpec(spec *certificatesv1.CertificateSigningRequestSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if err := parseCSR(spec.Request); err != nil {
		errs = append(errs, field.Invalid(path.Child("request"), spec.Request, err.Error()))
	}
	if len(spec.Usages) == 0 {
		errs = append(errs, field.Required(path.Child("usages"), "usages must be provided"))
	}
	seen := map[certificatesv1.KeyUsage]bool{}
	for i, u := range spec.Usages {
		up := path.Child("usages").Index(i)
		if !isKnownUsage(u) {
			errs = append(errs, field.NotSupported(up, u, knownUsages))
		}
		if seen[u] {
			errs = append(errs, field.Duplicate(up, u))
		}
		seen[u] = true
	}
	sp := path.Child("signerName")
	switch {
	case spec.SignerName == "":
		errs = append(errs, field.Required(sp, ""))
	case spec.SignerName == LegacyUnknownSignerName:
		errs = append(errs, field.Invalid(sp, spec.SignerName, "the legacy signerName is not allowed via this API version"))
	default:
		errs = append(errs, ValidateSignerName(spec.SignerName, sp)...)
	}
	if e := spec.ExpirationSeconds; e != nil && *e < minExpirationSeconds {
		errs = append(errs, field.Invalid(path.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	return errs
}

// parseCSR accepts a PEM block of type CERTIFICATE REQUEST holding a
// well-formed request.
func parseCSR(data []byte) error {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return fmt.Errorf("PEM block type must be CERTIFICATE REQUEST")
	}
	if _, err := x509.ParseCertificateRequest(block.Bytes); err != nil {
		return fmt.Errorf("parse certificate request: %w", err)
	}
	return nil
}

// ValidateSignerName requires "<fully qualified domain>/<path>", e.g.
// "example.com/signer-name".
func ValidateSignerName(name string, path *field.Path) field.ErrorList {
	domain, rest, ok := strings.Cut(name, "/")
	if !ok || rest == "" {
		return field.ErrorList{field.Invalid(path, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	return validation.IsFullyQualifiedDomainName(path, domain)
}

var conditionStatuses = []string{string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown)}

func validateStatus(st *certificatesv1.CertificateSigningRequestStatus, path *field.Path) field.ErrorList {
	errs := validateConditions(st.Conditions, path.Child("conditions"))
	if len(st.Certificate) > 0 {
		errs = append(errs, validateCertificatePEM(st.Certificate, path.Child("certificate"))...)
	}
	return errs
}

func validateConditions(conds []certificatesv1.CertificateSigningRequestCondition, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[certificatesv1.RequestConditionType]bool{}
	for i, c := range conds {
		cp := path.Index(i)
		if c.Type == "" {
			errs = append(errs, field.Required(cp.Child("type"), ""))
		}
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			if seen[c.Type] {
				errs = append(errs, field.Duplicate(cp.Child("type"), c.Type))
			}
			seen[c.Type] = true
		}
		switch {
		case c.Status == "":
			errs = append(errs, field.Required(cp.Child("status"), ""))
		case isApprovalCondition(c.Type) && c.Status != corev1.ConditionTrue:
			errs = append(errs, field.NotSupported(cp.Child("status"), c.Status, []string{string(corev1.ConditionTrue)}))
		case c.Status != corev1.ConditionTrue && c.Status != corev1.ConditionFalse && c.Status != corev1.ConditionUnknown:
			errs = append(errs, field.NotSupported(cp.Child("status"), c.Status, conditionStatuses))
		}
	}
	if seen[certificatesv1.CertificateApproved] && seen[certificatesv1.CertificateDenied] {
		errs = append(errs, field.Invalid(path, "", "Approved and Denied conditions are mutually exclusive"))
	}
	return errs
}

func validateCertificatePEM(data []byte, path *field.Path) field.ErrorList {
	rest := data
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return field.ErrorList{field.Invalid(path, "<certificate data>", "only CERTIFICATE PEM blocks are allowed, found "+block.Type)}
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return field.ErrorList{field.Invalid(path, "<certificate data>", err.Error())}
		}
		n++
	}
	if n == 0 || strings.TrimSpace(string(rest)) != "" {
		return field.ErrorList{field.Invalid(path, "<certificate data>", "must contain at least one CERTIFICATE PEM block and nothing else")}
	}
	return nil
}

// FieldSet offers spec.signerName to field selectors.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	return fields.Set{"spec.signerName": obj.(*certificatesv1.CertificateSigningRequest).Spec.SignerName}
}

// TableColumns are kubectl's columns for certificate signing requests.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	spec := certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		{Name: "SignerName", Type: "string", Description: spec["signerName"]},
		{Name: "Requestor", Type: "string", Description: spec["request"]},
		{Name: "RequestedDuration", Type: "string", Description: spec["expirationSeconds"]},
		{Name: "Condition", Type: "string", Description: certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]},
	}
}

// TableRow renders one request; the condition reads Pending, Approved or
// Denied, then ",Failed" and ",Issued" when they apply.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	csr := obj.(*certificatesv1.CertificateSigningRequest)
	signer := "<none>"
	if csr.Spec.SignerName != "" {
		signer = csr.Spec.SignerName
	}
	requested := "<none>"
	if e := csr.Spec.ExpirationSeconds; e != nil {
		requested = duration.HumanDuration(time.Duration(*e) * time.Second)
	}
	return []interface{}{csr.Name, registry.Age(csr.CreationTimestamp), signer, csr.Spec.Username, requested, ConditionSummary(csr)}, nil
}

// ConditionSummary is kubectl's CONDITION cell.
func ConditionSummary(csr *certificatesv1.CertificateSigningRequest) string {
	_, approved := findCondition(csr.Status.Conditions, certificatesv1.CertificateApproved)
	_, denied := findCondition(csr.Status.Conditions, certificatesv1.CertificateDenied)
	_, failed := findCondition(csr.Status.Conditions, certificatesv1.CertificateFailed)
	s := "Pending"
	switch {
	case denied:
		s = "Denied"
	case approved:
		s = "Approved"
	}
	if failed {
		s += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		s += ",Issued"
	}
	return s
}
