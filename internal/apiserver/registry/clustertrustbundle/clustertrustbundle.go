// Package clustertrustbundle holds certificates.k8s.io/v1
// clustertrustbundles (GA and on by default in v1.37): cluster-wide sets
// of X.509 trust anchors, optionally owned by a signer. Rules as upstream.
package clustertrustbundle

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/podcertificaterequest"
)

// maxTrustBundleSize is the largest trustBundle upstream accepts (1 MiB).
const maxTrustBundleSize = 1 << 20

// Resources lists certificates.k8s.io/v1 clustertrustbundles (beside the
// group's certificatesigningrequests in package certificates).
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{Resource()}
}

// Resource describes certificates.k8s.io/v1 clustertrustbundles.
// Field selector: spec.signerName.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  certificatesv1.SchemeGroupVersion,
		Resource:      "clustertrustbundles",
		Kind:          "ClusterTrustBundle",
		ListKind:      "ClusterTrustBundleList",
		SingularName:  "clustertrustbundle",
		StoragePrefix: "clustertrustbundles",
		New:           func() runtime.Object { return &certificatesv1.ClusterTrustBundle{} },
		NewList:       func() runtime.Object { return &certificatesv1.ClusterTrustBundleList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the clustertrustbundles strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// ValidateName allows the "<signer with : for />:" prefix; Validate
// checks the prefix against spec.signerName.
func (Strategy) ValidateName(name string, prefix bool) []string {
	if i := strings.LastIndex(name, ":"); i >= 0 {
		name = name[i+1:]
	}
	return registry.NameIsDNSSubdomain(name, prefix)
}

// Validate: the name matches the signer, the signer name is well formed,
// and trustBundle holds at least one distinct CA certificate.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	b := obj.(*certificatesv1.ClusterTrustBundle)
	return validate(b, true)
}

func validate(b *certificatesv1.ClusterTrustBundle, parseBundle bool) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range nameForSigner(b.Spec.SignerName, b.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), b.Name, msg))
	}
	if b.Spec.SignerName != "" {
		errs = append(errs, podcertificaterequest.ValidateSignerName(field.NewPath("spec", "signerName"), b.Spec.SignerName)...)
	}
	if parseBundle {
		errs = append(errs, validateTrustBundle(field.NewPath("spec", "trustBundle"), b.Spec.TrustBundle)...)
	}
	return errs
}

// nameForSigner: a bundle without a signer has no ":" in its name; one
// with a signer is named "<signer, / as :>:<anything>".
func nameForSigner(signer, name string) []string {
	if signer == "" {
		if strings.Contains(name, ":") {
			return []string{`ClusterTrustBundle without signer name must not have ":" in its name`}
		}
		return nil
	}
	want := strings.ReplaceAll(signer, "/", ":") + ":"
	if !strings.HasPrefix(name, want) {
		return []string{fmt.Sprintf("ClusterTrustBundle for signerName %s must be named with prefix %s", signer, want)}
	}
	return nil
}

// ValidateUpdate: signerName is immutable; an unchanged trustBundle is not
// parsed again.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	b, o := obj.(*certificatesv1.ClusterTrustBundle), old.(*certificatesv1.ClusterTrustBundle)
	errs := validate(b, b.Spec.TrustBundle != o.Spec.TrustBundle)
	return append(errs, apimachineryvalidation.ValidateImmutableField(b.Spec.SignerName, o.Spec.SignerName, field.NewPath("spec", "signerName"))...)
}

func validateTrustBundle(path *field.Path, in string) field.ErrorList {
	if len(in) > maxTrustBundleSize {
		return field.ErrorList{field.TooLong(path, "", maxTrustBundleSize)}
	}
	var errs field.ErrorList
	seen := map[string][]int{}
	rest := []byte(in)
	for i := 0; ; i++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		bad := func(msg string) {
			errs = append(errs, field.Invalid(path, "<value omitted>", fmt.Sprintf("entry %d %s", i, msg)))
		}
		if b.Type != "CERTIFICATE" {
			bad("has bad block type: " + b.Type)
			continue
		}
		if len(b.Headers) != 0 {
			bad("has PEM block headers")
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		switch {
		case err != nil:
			bad("does not parse as X.509")
			continue
		case !cert.IsCA:
			bad("does not have the CA bit set")
			continue
		case !cert.BasicConstraintsValid:
			bad("has invalid basic constraints")
			continue
		}
		seen[string(b.Bytes)] = append(seen[string(b.Bytes)], i)
	}
	if len(errs) > 0 {
		return errs
	}
	if len(seen) == 0 {
		errs = append(errs, field.Invalid(path, "<value omitted>", "at least one trust anchor must be provided"))
	}
	for _, idx := range seen {
		if len(idx) > 1 {
			errs = append(errs, field.Invalid(path, "<value omitted>", fmt.Sprintf("duplicate trust anchor (indices %v)", idx)))
		}
	}
	return errs
}

// FieldSet: spec.signerName.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	return fields.Set{"spec.signerName": obj.(*certificatesv1.ClusterTrustBundle).Spec.SignerName}
}

// TableColumns are kubectl's: NAME SIGNERNAME.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "SignerName", Type: "string", Description: certificatesv1.ClusterTrustBundleSpec{}.SwaggerDoc()["signerName"]},
	}
}

// TableRow renders one bundle.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	b, ok := obj.(*certificatesv1.ClusterTrustBundle)
	if !ok {
		return nil, fmt.Errorf("clustertrustbundle table: unexpected object %T", obj)
	}
	signer := b.Spec.SignerName
	if signer == "" {
		signer = "<none>"
	}
	return []interface{}{b.Name, signer}, nil
}
