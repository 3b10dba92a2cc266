// Package policy enforces admission policies written in CEL:
// ValidatingAdmissionPolicy and MutatingAdmissionPolicy with their bindings
// (admissionregistration.k8s.io/v1), as two plugins of Skiff's admission
// chain.
//
// Matching (matchConstraints, binding matchResources, namespace and object
// selectors, matchPolicy), params (paramKind, paramRef,
// parameterNotFoundAction), compilation and evaluation (matchConditions,
// variables, validations, messageExpression, auditAnnotations, mutations),
// failurePolicy, validationActions and the error texts are
// k8s.io/apiserver's policy packages (validating, mutating, generic,
// matching), used as libraries as kube-apiserver uses them. This package
// only feeds them: policies, bindings, params and namespaces are read from
// the server's cache on each request (registry.Reader), Skiff's
// attributes, user and authorizer are adapted to upstream's (adapt.go).
package policy

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/sets"
	upstream "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/warning"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Deps are what the policy plugins read.
type Deps struct {
	// Reader reads policies, bindings, params and namespaces.
	Reader registry.Reader
	// Scheme knows every built-in type (creating and converting objects).
	Scheme *runtime.Scheme
	// Mapper finds the resource of a param kind.
	Mapper Mapper
	// Authorizer is the CEL `authorizer` (nil: it has no opinion).
	Authorizer authz.Authorizer
	// Equivalents are the resources matchPolicy Equivalent matches besides
	// the requested one (nil: none).
	Equivalents runtime.EquivalentResourceMapper
	// TypeConverter returns the server-side apply types of a kind for
	// ApplyConfiguration mutations (nil result: the kind has none, and such
	// a mutation fails as upstream's does for an unknown kind).
	TypeConverter func(schema.GroupVersionKind) managedfields.TypeConverter
}

var (
	vapGVR  = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies")
	vapbGVR = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings")
	mapGVR  = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicies")
	mapbGVR = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicybindings")
)

// skipped are the resources no policy sees, as upstream: the policy
// resources themselves (a policy could lock itself in) and the
// non-persisted reviews (pkg/kubeapiserver/admission/exclusion).
var skipped = sets.New(
	vapGVR.GroupResource(), vapbGVR.GroupResource(), mapGVR.GroupResource(), mapbGVR.GroupResource(),
	schema.GroupResource{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
	schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"},
	schema.GroupResource{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
	schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
	schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
	schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
)

// shared is what both plugins hold.
type shared struct {
	deps    Deps
	objects objectInterfaces
	matcher *matching.Matcher
	authz   authorizerFor
}

func newShared(d Deps) shared {
	if d.Equivalents == nil {
		d.Equivalents = runtime.NewEquivalentResourceRegistry()
	}
	return shared{
		deps:    d,
		objects: objectInterfaces{scheme: d.Scheme, equivalents: d.Equivalents},
		matcher: matching.NewMatcher(namespaces{r: d.Reader}, namespaceClient{r: d.Reader}),
		authz:   authorizerFor{authz: d.Authorizer},
	}
}

// dispatch runs one upstream dispatcher on a Skiff request; the warnings
// it adds become Warning headers and its audit annotations are handed to
// the request's audit event (audit.AddAnnotations).
func dispatch[H any](ctx context.Context, s shared, a *admission.Attributes, d generic.Dispatcher[H], hooks func(context.Context) ([]H, error)) error {
	if skipped.Has(a.Resource.GroupResource()) {
		return nil
	}
	hs, err := hooks(ctx)
	if err != nil || len(hs) == 0 {
		return err
	}
	attrs := newRequestAttributes(a)
	ctx = warning.WithWarningRecorder(ctx, warnings{a: a})
	err = d.Dispatch(ctx, attrs, s.objects, hs)
	if rc := attrs.GetReinvocationContext(); err == nil && rc.ShouldReinvoke() {
		// A mutation changed the object after a policy with
		// reinvocationPolicy IfNeeded ran: those run once more, as in
		// upstream's reinvocation pass (here among the policies only).
		rc.SetIsReinvoke()
		err = d.Dispatch(ctx, attrs, s.objects, hs)
	}
	for k, v := range attrs.annotations {
		audit.AddAnnotations(ctx, k, v)
	}
	return err
}

// Validating is the ValidatingAdmissionPolicy plugin.
type Validating struct {
	s          shared
	source     *source[*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, validating.Validator]
	dispatcher generic.Dispatcher[validating.PolicyHook]
}

var _ admission.Validator = (*Validating)(nil)

// NewValidating returns the ValidatingAdmissionPolicy plugin.
func NewValidating(d Deps) *Validating {
	s := newShared(d)
	return &Validating{
		s: s,
		source: &source[*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, validating.Validator]{
			deps:    d,
			compile: compileValidating,
			paramKind: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ParamKind {
				return p.Spec.ParamKind
			},
			policyName: func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) string { return b.Spec.PolicyName },
			list: func(ctx context.Context) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
				var pl admissionregistrationv1.ValidatingAdmissionPolicyList
				var bl admissionregistrationv1.ValidatingAdmissionPolicyBindingList
				if err := d.Reader.List(ctx, vapGVR, "", false, &pl); err != nil {
					return nil, nil, err
				}
				if len(pl.Items) == 0 {
					return nil, nil, nil
				}
				if err := d.Reader.List(ctx, vapbGVR, "", false, &bl); err != nil {
					return nil, nil, err
				}
				return pointers(pl.Items), pointers(bl.Items), nil
			},
		},
		dispatcher: validating.NewDispatcher(s.authz, generic.NewPolicyMatcher(s.matcher)),
	}
}

// Name is the upstream plugin name.
func (*Validating) Name() string { return "ValidatingAdmissionPolicy" }

// Handles every operation, as upstream.
func (*Validating) Handles(admission.Operation) bool { return true }

// Validate refuses the request when a bound policy with the Deny action
// fails, warns for Warn and annotates the audit event for Audit.
func (v *Validating) Validate(ctx context.Context, a *admission.Attributes) error {
	return dispatch(ctx, v.s, a, v.dispatcher, v.source.hooks)
}

// Mutating is the MutatingAdmissionPolicy plugin.
type Mutating struct {
	s          shared
	source     *source[*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding, mutating.PolicyEvaluator]
	dispatcher generic.Dispatcher[mutating.PolicyHook]
}

var _ admission.Mutator = (*Mutating)(nil)

// NewMutating returns the MutatingAdmissionPolicy plugin.
func NewMutating(d Deps) *Mutating {
	s := newShared(d)
	return &Mutating{
		s: s,
		source: &source[*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding, mutating.PolicyEvaluator]{
			deps:    d,
			compile: compileMutating,
			paramKind: func(p *admissionregistrationv1.MutatingAdmissionPolicy) *admissionregistrationv1.ParamKind {
				return p.Spec.ParamKind
			},
			policyName: func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) string { return b.Spec.PolicyName },
			list: func(ctx context.Context) ([]*admissionregistrationv1.MutatingAdmissionPolicy, []*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
				var pl admissionregistrationv1.MutatingAdmissionPolicyList
				var bl admissionregistrationv1.MutatingAdmissionPolicyBindingList
				if err := d.Reader.List(ctx, mapGVR, "", false, &pl); err != nil {
					return nil, nil, err
				}
				if len(pl.Items) == 0 {
					return nil, nil, nil
				}
				if err := d.Reader.List(ctx, mapbGVR, "", false, &bl); err != nil {
					return nil, nil, err
				}
				return pointers(pl.Items), pointers(bl.Items), nil
			},
		},
		dispatcher: mutating.NewDispatcher(s.authz, s.matcher, typeConverters{d.TypeConverter}),
	}
}

// Name is the upstream plugin name.
func (*Mutating) Name() string { return "MutatingAdmissionPolicy" }

// Handles creates, updates and connects: a delete has no object to mutate.
func (*Mutating) Handles(op admission.Operation) bool { return op != admission.Delete }

// Admit applies the mutations of the bound policies, in order.
func (m *Mutating) Admit(ctx context.Context, a *admission.Attributes) error {
	return dispatch(ctx, m.s, a, m.dispatcher, m.source.hooks)
}

// typeConverters is the mutating dispatcher's TypeConverterManager.
type typeConverters struct {
	f func(schema.GroupVersionKind) managedfields.TypeConverter
}

func (t typeConverters) GetTypeConverter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	if t.f == nil {
		return nil
	}
	return t.f(gvk)
}

func (typeConverters) Run(context.Context) {}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

var _ upstream.Attributes = (*requestAttributes)(nil)
