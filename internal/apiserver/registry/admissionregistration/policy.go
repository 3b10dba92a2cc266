package admissionregistration

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// PolicyStrategy is the validatingadmissionpolicies strategy.
type PolicyStrategy struct{ registry.DefaultStrategy }

// BindingStrategy is the validatingadmissionpolicybindings strategy.
type BindingStrategy struct{ registry.DefaultStrategy }

var (
	_ registry.Strategy = PolicyStrategy{}
	_ registry.Strategy = BindingStrategy{}
)

// defaultMatchResources applies upstream's defaults to match constraints:
// matchPolicy Equivalent, match-all selectors and rule scope "*".
func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		p := admissionregistrationv1.Equivalent
		m.MatchPolicy = &p
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				s := admissionregistrationv1.AllScopes
				rules[i].Scope = &s
			}
		}
	}
}

// DefaultValidatingAdmissionPolicy applies upstream's defaults:
// failurePolicy Fail and defaulted match constraints.
func DefaultValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		f := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &f
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

// DefaultValidatingAdmissionPolicyBinding defaults the match resources and
// paramRef.parameterNotFoundAction (Deny).
func DefaultValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	defaultMatchResources(b.Spec.MatchResources)
	if r := b.Spec.ParamRef; r != nil && r.ParameterNotFoundAction == nil {
		a := admissionregistrationv1.DenyAction
		r.ParameterNotFoundAction = &a
	}
}

// PrepareForCreate clears the status, sets generation 1 and applies defaults.
func (PolicyStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	p := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	p.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
	p.Generation = 1
	DefaultValidatingAdmissionPolicy(p)
}

// PrepareForUpdate keeps the status, applies defaults and bumps generation
// on spec changes.
func (PolicyStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	p, o := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy), old.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	p.Status = o.Status
	DefaultValidatingAdmissionPolicy(p)
	p.Generation = bumped(o.Generation, p.Spec, o.Spec)
}

// PrepareForStatusUpdate keeps the spec.
func (PolicyStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec = old.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec
}

// Validate checks a new policy; its CEL expressions must compile
// (mutatingpolicy.go).
func (PolicyStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	spec, path := &obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec, field.NewPath("spec")
	return append(ValidateValidatingAdmissionPolicySpec(spec, path), ValidateValidatingAdmissionPolicyExpressions(spec, path, nil)...)
}

// ValidateUpdate checks an updated policy.
func (s PolicyStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	spec, path := &obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec, field.NewPath("spec")
	return append(ValidateValidatingAdmissionPolicySpec(spec, path),
		ValidateValidatingAdmissionPolicyExpressions(spec, path, &old.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec)...)
}

// ValidateStatusUpdate checks the status conditions.
func (PolicyStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	p := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	return metav1validation.ValidateConditions(p.Status.Conditions, field.NewPath("status", "conditions"))
}

// ValidateValidatingAdmissionPolicySpec checks the structure of a policy;
// CEL expressions are only required to be non-empty.
func ValidateValidatingAdmissionPolicySpec(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pk := spec.ParamKind; pk != nil {
		if pk.APIVersion == "" {
			errs = append(errs, field.Required(path.Child("paramKind", "apiVersion"), ""))
		}
		if pk.Kind == "" {
			errs = append(errs, field.Required(path.Child("paramKind", "kind"), ""))
		}
	}
	if spec.MatchConstraints == nil {
		errs = append(errs, field.Required(path.Child("matchConstraints"), ""))
	} else {
		errs = append(errs, validateMatchResources(spec.MatchConstraints, path.Child("matchConstraints"), true)...)
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		errs = append(errs, field.Required(path.Child("validations"), "validations or auditAnnotations must contain at least one item"))
	}
	for i, v := range spec.Validations {
		if v.Expression == "" {
			errs = append(errs, field.Required(path.Child("validations").Index(i).Child("expression"), "expression is not specified"))
		}
	}
	keys := sets.New[string]()
	for i, a := range spec.AuditAnnotations {
		ap := path.Child("auditAnnotations").Index(i)
		if a.Key == "" {
			errs = append(errs, field.Required(ap.Child("key"), ""))
		} else if keys.Has(a.Key) {
			errs = append(errs, field.Duplicate(ap.Child("key"), a.Key))
		}
		keys.Insert(a.Key)
		if a.ValueExpression == "" {
			errs = append(errs, field.Required(ap.Child("valueExpression"), "valueExpression is not specified"))
		}
	}
	if p := spec.FailurePolicy; p != nil && !sets.New(supportedFailurePolicies...).Has(string(*p)) {
		errs = append(errs, field.NotSupported(path.Child("failurePolicy"), *p, supportedFailurePolicies))
	}
	errs = append(errs, validateMatchConditions(spec.MatchConditions, path.Child("matchConditions"))...)
	for i, v := range spec.Variables {
		vp := path.Child("variables").Index(i)
		if v.Name == "" {
			errs = append(errs, field.Required(vp.Child("name"), ""))
		}
		if v.Expression == "" {
			errs = append(errs, field.Required(vp.Child("expression"), ""))
		}
	}
	return errs
}

func validateMatchResources(m *admissionregistrationv1.MatchResources, path *field.Path, requireRules bool) field.ErrorList {
	var errs field.ErrorList
	if p := m.MatchPolicy; p != nil && !sets.New(supportedMatchPolicies...).Has(string(*p)) {
		errs = append(errs, field.NotSupported(path.Child("matchPolicy"), *p, supportedMatchPolicies))
	}
	if m.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(m.NamespaceSelector, labelSelectorValidationOpt, path.Child("namespaceSelector"))...)
	}
	if m.ObjectSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(m.ObjectSelector, labelSelectorValidationOpt, path.Child("objectSelector"))...)
	}
	if requireRules && len(m.ResourceRules) == 0 {
		errs = append(errs, field.Required(path.Child("resourceRules"), ""))
	}
	for i := range m.ResourceRules {
		errs = append(errs, validateRule(&m.ResourceRules[i].RuleWithOperations, path.Child("resourceRules").Index(i))...)
	}
	for i := range m.ExcludeResourceRules {
		errs = append(errs, validateRule(&m.ExcludeResourceRules[i].RuleWithOperations, path.Child("excludeResourceRules").Index(i))...)
	}
	return errs
}

var supportedActions = []string{string(admissionregistrationv1.Deny), string(admissionregistrationv1.Warn), string(admissionregistrationv1.Audit)}

// PrepareForCreate sets generation 1 and applies defaults.
func (BindingStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	b := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	b.Generation = 1
	DefaultValidatingAdmissionPolicyBinding(b)
}

// PrepareForUpdate applies defaults and bumps generation on spec changes.
func (BindingStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	b, o := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding), old.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	DefaultValidatingAdmissionPolicyBinding(b)
	b.Generation = bumped(o.Generation, b.Spec, o.Spec)
}

// Validate checks a new binding.
func (BindingStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateValidatingAdmissionPolicyBindingSpec(&obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks an updated binding.
func (s BindingStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// ValidateValidatingAdmissionPolicyBindingSpec checks the policy name,
// validation actions, parameter reference and match resources.
func ValidateValidatingAdmissionPolicyBindingSpec(spec *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.PolicyName == "" {
		errs = append(errs, field.Required(path.Child("policyName"), ""))
	}
	ap := path.Child("validationActions")
	if len(spec.ValidationActions) == 0 {
		errs = append(errs, field.Required(ap, "at least one validation action is required"))
	}
	seen := sets.New[admissionregistrationv1.ValidationAction]()
	for i, a := range spec.ValidationActions {
		if !sets.New(supportedActions...).Has(string(a)) {
			errs = append(errs, field.NotSupported(ap.Index(i), a, supportedActions))
		}
		if seen.Has(a) {
			errs = append(errs, field.Duplicate(ap.Index(i), a))
		}
		seen.Insert(a)
	}
	if seen.Has(admissionregistrationv1.Deny) && seen.Has(admissionregistrationv1.Warn) {
		errs = append(errs, field.Invalid(ap, spec.ValidationActions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if r := spec.ParamRef; r != nil {
		rp := path.Child("paramRef")
		switch {
		case r.Name == "" && r.Selector == nil:
			errs = append(errs, field.Required(rp, "one of name or selector must be specified"))
		case r.Name != "" && r.Selector != nil:
			errs = append(errs, field.Forbidden(rp.Child("name"), "name and selector are mutually exclusive"))
		}
		if r.Selector != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(r.Selector, labelSelectorValidationOpt, rp.Child("selector"))...)
		}
		if a := r.ParameterNotFoundAction; a == nil {
			errs = append(errs, field.Required(rp.Child("parameterNotFoundAction"), ""))
		} else if *a != admissionregistrationv1.AllowAction && *a != admissionregistrationv1.DenyAction {
			errs = append(errs, field.NotSupported(rp.Child("parameterNotFoundAction"), *a,
				[]string{string(admissionregistrationv1.AllowAction), string(admissionregistrationv1.DenyAction)}))
		}
	}
	if spec.MatchResources != nil {
		errs = append(errs, validateMatchResources(spec.MatchResources, path.Child("matchResources"), false)...)
	}
	return errs
}

// TableColumns are kubectl's columns for policies.
func (PolicyStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"},
		{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one policy; the param kind reads apiVersion/Kind.
func (PolicyStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	p := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	kind := "<unset>"
	if pk := p.Spec.ParamKind; pk != nil {
		kind = pk.APIVersion + "/" + pk.Kind
	}
	return []interface{}{p.Name, int64(len(p.Spec.Validations)), kind, registry.Age(p.CreationTimestamp)}, nil
}

// TableColumns are kubectl's columns for policy bindings.
func (BindingStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "PolicyName", Type: "string", Description: "PolicyName references a ValidatingAdmissionPolicy name which the ValidatingAdmissionPolicyBinding binds to"},
		{Name: "ParamRef", Type: "string", Description: "ParamRef specifies the parameter resource used to configure the admission control policy"},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one binding; the param reads namespace/name ("*/name"
// without a namespace) or the selector.
func (BindingStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	b := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	param := "<unset>"
	if r := b.Spec.ParamRef; r != nil {
		switch {
		case r.Name != "" && r.Namespace != "":
			param = r.Namespace + "/" + r.Name
		case r.Name != "":
			param = "*/" + r.Name
		case r.Selector != nil:
			param = r.Selector.String()
		}
	}
	return []interface{}{b.Name, b.Spec.PolicyName, param, registry.Age(b.CreationTimestamp)}, nil
}
