package admissionregistration

import (
	"context"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// MutatingPolicyResources are mutatingadmissionpolicies and their bindings
// (admissionregistration.k8s.io/v1, GA and served by default since
// Kubernetes 1.36). They have no status.
func MutatingPolicyResources(registry.Deps) []registry.Resource {
	gv := admissionregistrationv1.SchemeGroupVersion
	return []registry.Resource{
		{
			GroupVersion: gv, Resource: "mutatingadmissionpolicies", Kind: "MutatingAdmissionPolicy",
			ListKind: "MutatingAdmissionPolicyList", SingularName: "mutatingadmissionpolicy",
			Categories: []string{"api-extensions"}, StoragePrefix: "mutatingadmissionpolicies",
			New:      func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicy{} },
			NewList:  func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyList{} },
			Strategy: MutatingPolicyStrategy{},
		},
		{
			GroupVersion: gv, Resource: "mutatingadmissionpolicybindings", Kind: "MutatingAdmissionPolicyBinding",
			ListKind: "MutatingAdmissionPolicyBindingList", SingularName: "mutatingadmissionpolicybinding",
			Categories: []string{"api-extensions"}, StoragePrefix: "mutatingadmissionpolicybindings",
			New:      func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} },
			NewList:  func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBindingList{} },
			Strategy: MutatingPolicyBindingStrategy{},
		},
	}
}

// MutatingPolicyStrategy is the mutatingadmissionpolicies strategy.
type MutatingPolicyStrategy struct{ registry.DefaultStrategy }

// MutatingPolicyBindingStrategy is the mutatingadmissionpolicybindings strategy.
type MutatingPolicyBindingStrategy struct{ registry.DefaultStrategy }

var (
	_ registry.Strategy = MutatingPolicyStrategy{}
	_ registry.Strategy = MutatingPolicyBindingStrategy{}
)

// DefaultMutatingAdmissionPolicy applies upstream's defaults: failurePolicy
// Fail and defaulted match constraints (reinvocationPolicy has none: it is
// required).
func DefaultMutatingAdmissionPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		f := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &f
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

// DefaultMutatingAdmissionPolicyBinding defaults the match resources and
// paramRef.parameterNotFoundAction (Deny).
func DefaultMutatingAdmissionPolicyBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	defaultMatchResources(b.Spec.MatchResources)
	if r := b.Spec.ParamRef; r != nil && r.ParameterNotFoundAction == nil {
		a := admissionregistrationv1.DenyAction
		r.ParameterNotFoundAction = &a
	}
}

// PrepareForCreate sets generation 1 and applies defaults.
func (MutatingPolicyStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	p := obj.(*admissionregistrationv1.MutatingAdmissionPolicy)
	p.Generation = 1
	DefaultMutatingAdmissionPolicy(p)
}

// PrepareForUpdate applies defaults and bumps generation on spec changes.
func (MutatingPolicyStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	p, o := obj.(*admissionregistrationv1.MutatingAdmissionPolicy), old.(*admissionregistrationv1.MutatingAdmissionPolicy)
	DefaultMutatingAdmissionPolicy(p)
	p.Generation = bumped(o.Generation, p.Spec, o.Spec)
}

// Validate checks a new policy.
func (MutatingPolicyStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateMutatingAdmissionPolicySpec(&obj.(*admissionregistrationv1.MutatingAdmissionPolicy).Spec, field.NewPath("spec"), nil)
}

// ValidateUpdate checks an updated policy; expressions already stored are
// compiled in the stored-expressions environment, as upstream.
func (MutatingPolicyStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateMutatingAdmissionPolicySpec(&obj.(*admissionregistrationv1.MutatingAdmissionPolicy).Spec, field.NewPath("spec"),
		&old.(*admissionregistrationv1.MutatingAdmissionPolicy).Spec)
}

var (
	supportedReinvocationPolicies = []string{string(admissionregistrationv1.IfNeededReinvocationPolicy), string(admissionregistrationv1.NeverReinvocationPolicy)}
	supportedPatchTypes           = []string{string(admissionregistrationv1.PatchTypeApplyConfiguration), string(admissionregistrationv1.PatchTypeJSONPatch)}
	supportedMutatingOperations   = []string{string(admissionregistrationv1.OperationAll), string(admissionregistrationv1.Create), string(admissionregistrationv1.Update)}
)

// ValidateMutatingAdmissionPolicySpec checks a policy with upstream's
// rules and field paths; every CEL expression is compiled (a compile
// error is 422 naming the expression). old is the stored spec on update.
func ValidateMutatingAdmissionPolicySpec(spec *admissionregistrationv1.MutatingAdmissionPolicySpec, path *field.Path, old *admissionregistrationv1.MutatingAdmissionPolicySpec) field.ErrorList {
	var errs field.ErrorList
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return field.ErrorList{field.InternalError(path, err)}
	}
	stored := storedExpressions(old)
	envFor := func(expr string) environment.Type {
		if stored.Has(expr) {
			return environment.StoredExpressions
		}
		return environment.NewExpressions
	}
	if p := spec.FailurePolicy; p == nil {
		errs = append(errs, field.Required(path.Child("failurePolicy"), ""))
	} else if !sets.New(supportedFailurePolicies...).Has(string(*p)) {
		errs = append(errs, field.NotSupported(path.Child("failurePolicy"), *p, supportedFailurePolicies))
	}
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
		errs = append(errs, validateMutatingOperations(spec.MatchConstraints, path.Child("matchConstraints", "resourceRules", "operations"))...)
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil, HasAuthorizer: true}
	errs = append(errs, validateMatchConditions(spec.MatchConditions, path.Child("matchConditions"))...)
	for i := range spec.MatchConditions {
		c := (*matchconditions.MatchCondition)(&spec.MatchConditions[i])
		if strings.TrimSpace(c.Expression) != "" {
			r := compiler.CompileCELExpression(c, opts, envFor(c.Expression))
			errs = appendCELError(errs, path.Child("matchConditions").Index(i).Child("expression"), c.Expression, r.Error)
		}
	}
	for i, v := range spec.Variables {
		vp := path.Child("variables").Index(i)
		if strings.TrimSpace(v.Name) == "" {
			errs = append(errs, field.Required(vp.Child("name"), "name is not specified"))
		}
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(vp.Child("expression"), "expression is not specified"))
			continue
		}
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, envFor(v.Expression))
		errs = appendCELError(errs, vp.Child("expression"), v.Expression, r.Error)
	}
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	if len(spec.Mutations) == 0 {
		errs = append(errs, field.Required(path.Child("mutations"), "mutations must contain at least one item"))
	}
	for i, m := range spec.Mutations {
		mp := path.Child("mutations").Index(i)
		var accessor plugincel.ExpressionAccessor
		var ep *field.Path
		switch m.PatchType {
		case "":
			errs = append(errs, field.Required(mp.Child("patchType"), ""))
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.JSONPatch == nil {
				errs = append(errs, field.Required(mp.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
			} else {
				accessor, ep = &patch.JSONPatchCondition{Expression: strings.TrimSpace(m.JSONPatch.Expression)}, mp.Child("jsonPatch", "expression")
			}
			if m.ApplyConfiguration != nil {
				errs = append(errs, field.Invalid(mp.Child("applyConfiguration"), "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
			}
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration == nil {
				errs = append(errs, field.Required(mp.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
			} else {
				accessor, ep = &patch.ApplyConfigurationCondition{Expression: strings.TrimSpace(m.ApplyConfiguration.Expression)}, mp.Child("applyConfiguration", "expression")
			}
			if m.JSONPatch != nil {
				errs = append(errs, field.Invalid(mp.Child("jsonPatch"), "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
			}
		default:
			errs = append(errs, field.NotSupported(mp.Child("patchType"), m.PatchType, supportedPatchTypes))
		}
		if accessor == nil {
			continue
		}
		if accessor.GetExpression() == "" {
			errs = append(errs, field.Required(ep, ""))
			continue
		}
		r := compiler.CompileCELExpression(accessor, patchOpts, envFor(accessor.GetExpression()))
		errs = appendCELError(errs, ep, accessor.GetExpression(), r.Error)
	}
	switch {
	case spec.ReinvocationPolicy == "":
		errs = append(errs, field.Required(path.Child("reinvocationPolicy"), ""))
	case !sets.New(supportedReinvocationPolicies...).Has(string(spec.ReinvocationPolicy)):
		errs = append(errs, field.NotSupported(path.Child("reinvocationPolicy"), spec.ReinvocationPolicy, supportedReinvocationPolicies))
	}
	return errs
}

// ValidateValidatingAdmissionPolicyExpressions compiles the expressions
// of a ValidatingAdmissionPolicy as upstream's validation does (each in
// the environment the admission plugin compiles it in: messageExpression
// without `authorizer`); old is the stored spec on update, whose
// expressions compile in the stored-expressions environment.
func ValidateValidatingAdmissionPolicyExpressions(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, path *field.Path, old *admissionregistrationv1.ValidatingAdmissionPolicySpec) field.ErrorList {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return field.ErrorList{field.InternalError(path, err)}
	}
	stored := sets.New[string]()
	if old != nil {
		for _, v := range old.Validations {
			stored.Insert(v.Expression, v.MessageExpression)
		}
		for _, a := range old.AuditAnnotations {
			stored.Insert(a.ValueExpression)
		}
		for _, c := range old.MatchConditions {
			stored.Insert(c.Expression)
		}
		for _, v := range old.Variables {
			stored.Insert(v.Expression)
		}
	}
	envFor := func(expr string) environment.Type {
		if stored.Has(expr) {
			return environment.StoredExpressions
		}
		return environment.NewExpressions
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil, HasAuthorizer: true}
	noAuthz := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil}
	var errs field.ErrorList
	check := func(p *field.Path, a plugincel.ExpressionAccessor, o plugincel.OptionalVariableDeclarations) {
		if strings.TrimSpace(a.GetExpression()) == "" {
			return // required fields are checked by the structural validation
		}
		errs = appendCELError(errs, p, a.GetExpression(), compiler.CompileCELExpression(a, o, envFor(a.GetExpression())).Error)
	}
	for i, v := range spec.Variables {
		if strings.TrimSpace(v.Expression) == "" {
			continue
		}
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, envFor(v.Expression))
		errs = appendCELError(errs, path.Child("variables").Index(i).Child("expression"), v.Expression, r.Error)
	}
	for i := range spec.MatchConditions {
		check(path.Child("matchConditions").Index(i).Child("expression"), (*matchconditions.MatchCondition)(&spec.MatchConditions[i]), opts)
	}
	for i, v := range spec.Validations {
		vp := path.Child("validations").Index(i)
		check(vp.Child("expression"), &validating.ValidationCondition{Expression: v.Expression}, opts)
		check(vp.Child("messageExpression"), &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}, noAuthz)
	}
	for i, a := range spec.AuditAnnotations {
		check(path.Child("auditAnnotations").Index(i).Child("valueExpression"), &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}, opts)
	}
	return errs
}

// storedExpressions are the expressions of the stored spec, which keep
// compiling with the stored-expressions environment (upstream's rule, so
// that a library removed later does not make a policy un-updatable).
func storedExpressions(old *admissionregistrationv1.MutatingAdmissionPolicySpec) sets.Set[string] {
	s := sets.New[string]()
	if old == nil {
		return s
	}
	for _, c := range old.MatchConditions {
		s.Insert(c.Expression)
	}
	for _, v := range old.Variables {
		s.Insert(v.Expression)
	}
	for _, m := range old.Mutations {
		if m.JSONPatch != nil {
			s.Insert(m.JSONPatch.Expression)
		}
		if m.ApplyConfiguration != nil {
			s.Insert(m.ApplyConfiguration.Expression)
		}
	}
	return s
}

// appendCELError turns a compile error into upstream's field error.
func appendCELError(errs field.ErrorList, path *field.Path, expr string, err *apiservercel.Error) field.ErrorList {
	if err == nil {
		return errs
	}
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return append(errs, field.Required(path, err.Detail))
	case apiservercel.ErrorTypeInvalid:
		return append(errs, field.Invalid(path, expr, err.Detail))
	}
	return append(errs, field.InternalError(path, err))
}

// validateMutatingOperations: only creates and updates can be mutated.
func validateMutatingOperations(m *admissionregistrationv1.MatchResources, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, r := range m.ResourceRules {
		for _, op := range r.Operations {
			if !sets.New(supportedMutatingOperations...).Has(string(op)) {
				errs = append(errs, field.NotSupported(path, op, supportedMutatingOperations))
			}
		}
	}
	return errs
}

// PrepareForCreate sets generation 1 and applies defaults.
func (MutatingPolicyBindingStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	b := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
	b.Generation = 1
	DefaultMutatingAdmissionPolicyBinding(b)
}

// PrepareForUpdate applies defaults and bumps generation on spec changes.
func (MutatingPolicyBindingStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	b, o := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding), old.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
	DefaultMutatingAdmissionPolicyBinding(b)
	b.Generation = bumped(o.Generation, b.Spec, o.Spec)
}

// Validate checks a new binding.
func (MutatingPolicyBindingStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateMutatingAdmissionPolicyBindingSpec(&obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks an updated binding.
func (s MutatingPolicyBindingStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// ValidateMutatingAdmissionPolicyBindingSpec checks the policy name, the
// parameter reference and the match resources.
func ValidateMutatingAdmissionPolicyBindingSpec(spec *admissionregistrationv1.MutatingAdmissionPolicyBindingSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.PolicyName == "" {
		errs = append(errs, field.Required(path.Child("policyName"), ""))
	} else {
		for _, msg := range validation.NameIsDNSSubdomain(spec.PolicyName, false) {
			errs = append(errs, field.Invalid(path.Child("policyName"), spec.PolicyName, msg))
		}
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
	if m := spec.MatchResources; m != nil {
		errs = append(errs, validateMatchResources(m, path.Child("matchResources"), false)...)
		errs = append(errs, validateMutatingOperations(m, path.Child("matchResources", "resourceRules", "operations"))...)
	}
	return errs
}

// TableColumns are kubectl's columns for mutating policies.
func (MutatingPolicyStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Mutations", Type: "integer", Description: "Mutation indicates the number of mutations rules defined in this configuration"},
		{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one mutating policy.
func (MutatingPolicyStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	p := obj.(*admissionregistrationv1.MutatingAdmissionPolicy)
	kind := "<unset>"
	if pk := p.Spec.ParamKind; pk != nil {
		kind = pk.APIVersion + "/" + pk.Kind
	}
	return []interface{}{p.Name, int64(len(p.Spec.Mutations)), kind, registry.Age(p.CreationTimestamp)}, nil
}

// TableColumns are kubectl's columns for mutating policy bindings.
func (MutatingPolicyBindingStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "PolicyName", Type: "string", Description: "PolicyName indicates the policy definition which the policy binding binded to"},
		{Name: "ParamRef", Type: "string", Description: "ParamRef indicates the param resource which sets the configuration param"},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one mutating policy binding, its param as the
// validating bindings show theirs.
func (MutatingPolicyBindingStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	b := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
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
