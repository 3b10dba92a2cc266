// Package admissionregistration holds the rules of the
// admissionregistration.k8s.io/v1 resources: mutating and validating
// webhook configurations (upstream's defaults and full validation of
// webhooks, rules and client configs), and validating admission policies
// and their bindings (defaults and light validation; CEL expressions are
// stored, not compiled).
package admissionregistration

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the admissionregistration.k8s.io/v1 resources.
func Resources(registry.Deps) []registry.Resource {
	gv := admissionregistrationv1.SchemeGroupVersion
	return []registry.Resource{
		{
			GroupVersion: gv, Resource: "mutatingwebhookconfigurations", Kind: "MutatingWebhookConfiguration",
			ListKind: "MutatingWebhookConfigurationList", SingularName: "mutatingwebhookconfiguration",
			Categories: []string{"api-extensions"}, StoragePrefix: "mutatingwebhookconfigurations",
			New:      func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
			NewList:  func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
			Strategy: MutatingWebhookStrategy{},
		},
		{
			GroupVersion: gv, Resource: "validatingwebhookconfigurations", Kind: "ValidatingWebhookConfiguration",
			ListKind: "ValidatingWebhookConfigurationList", SingularName: "validatingwebhookconfiguration",
			Categories: []string{"api-extensions"}, StoragePrefix: "validatingwebhookconfigurations",
			New:      func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
			NewList:  func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
			Strategy: ValidatingWebhookStrategy{},
		},
		{
			GroupVersion: gv, Resource: "validatingadmissionpolicies", Kind: "ValidatingAdmissionPolicy",
			ListKind: "ValidatingAdmissionPolicyList", SingularName: "validatingadmissionpolicy",
			Categories: []string{"api-extensions"}, StoragePrefix: "validatingadmissionpolicies",
			New:          func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
			NewList:      func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
			Strategy:     PolicyStrategy{},
			Subresources: map[string]registry.Subresource{"status": registry.StatusSubresource()},
		},
		{
			GroupVersion: gv, Resource: "validatingadmissionpolicybindings", Kind: "ValidatingAdmissionPolicyBinding",
			ListKind: "ValidatingAdmissionPolicyBindingList", SingularName: "validatingadmissionpolicybinding",
			Categories: []string{"api-extensions"}, StoragePrefix: "validatingadmissionpolicybindings",
			New:      func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
			NewList:  func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} },
			Strategy: BindingStrategy{},
		},
	}
}

// webhook points at the fields mutating and validating webhooks share, so
// that one set of defaults and checks serves both.
type webhook struct {
	name              string
	clientConfig      *admissionregistrationv1.WebhookClientConfig
	rules             []admissionregistrationv1.RuleWithOperations
	failurePolicy     **admissionregistrationv1.FailurePolicyType
	matchPolicy       **admissionregistrationv1.MatchPolicyType
	namespaceSelector **metav1.LabelSelector
	objectSelector    **metav1.LabelSelector
	sideEffects       **admissionregistrationv1.SideEffectClass
	timeoutSeconds    **int32
	reviewVersions    []string
	matchConditions   []admissionregistrationv1.MatchCondition
}

func fromValidating(w *admissionregistrationv1.ValidatingWebhook) webhook {
	return webhook{
		name: w.Name, clientConfig: &w.ClientConfig, rules: w.Rules, failurePolicy: &w.FailurePolicy, matchPolicy: &w.MatchPolicy,
		namespaceSelector: &w.NamespaceSelector, objectSelector: &w.ObjectSelector, sideEffects: &w.SideEffects,
		timeoutSeconds: &w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions, matchConditions: w.MatchConditions,
	}
}

func fromMutating(w *admissionregistrationv1.MutatingWebhook) webhook {
	return webhook{
		name: w.Name, clientConfig: &w.ClientConfig, rules: w.Rules, failurePolicy: &w.FailurePolicy, matchPolicy: &w.MatchPolicy,
		namespaceSelector: &w.NamespaceSelector, objectSelector: &w.ObjectSelector, sideEffects: &w.SideEffects,
		timeoutSeconds: &w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions, matchConditions: w.MatchConditions,
	}
}

// defaultWebhook applies upstream's v1 defaults: failurePolicy Fail,
// matchPolicy Equivalent, empty (match-all) selectors, timeoutSeconds 10,
// rule scope "*" and service port 443.
func defaultWebhook(w webhook) {
	if *w.failurePolicy == nil {
		p := admissionregistrationv1.Fail
		*w.failurePolicy = &p
	}
	if *w.matchPolicy == nil {
		p := admissionregistrationv1.Equivalent
		*w.matchPolicy = &p
	}
	if *w.namespaceSelector == nil {
		*w.namespaceSelector = &metav1.LabelSelector{}
	}
	if *w.objectSelector == nil {
		*w.objectSelector = &metav1.LabelSelector{}
	}
	if *w.timeoutSeconds == nil {
		t := int32(10)
		*w.timeoutSeconds = &t
	}
	defaultRules(w.rules)
	if s := w.clientConfig.Service; s != nil && s.Port == nil {
		p := int32(443)
		s.Port = &p
	}
}

func defaultRules(rules []admissionregistrationv1.RuleWithOperations) {
	for i := range rules {
		if rules[i].Scope == nil {
			s := admissionregistrationv1.AllScopes
			rules[i].Scope = &s
		}
	}
}

// DefaultValidatingWebhookConfiguration applies upstream's defaults.
func DefaultValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
	for i := range c.Webhooks {
		defaultWebhook(fromValidating(&c.Webhooks[i]))
	}
}

// DefaultMutatingWebhookConfiguration applies upstream's defaults, with
// reinvocationPolicy Never.
func DefaultMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) {
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		defaultWebhook(fromMutating(w))
		if w.ReinvocationPolicy == nil {
			p := admissionregistrationv1.NeverReinvocationPolicy
			w.ReinvocationPolicy = &p
		}
	}
}

var (
	supportedFailurePolicies   = []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}
	supportedMatchPolicies     = []string{string(admissionregistrationv1.Equivalent), string(admissionregistrationv1.Exact)}
	supportedSideEffects       = []string{string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun)}
	supportedReviewVersions    = []string{"v1", "v1beta1"}
	supportedOperations        = []string{"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}
	supportedScopes            = []string{"*", "Cluster", "Namespaced"}
	supportedReinvocations     = []string{string(admissionregistrationv1.IfNeededReinvocationPolicy), string(admissionregistrationv1.NeverReinvocationPolicy)}
	maxMatchConditions         = 64
	minTimeout, maxTimeout     = int32(1), int32(30)
	labelSelectorValidationOpt = metav1validation.LabelSelectorValidationOptions{}
)

// validateWebhook checks one webhook; stored are the match-condition
// expressions the configuration already had (compiled in the
// stored-expressions environment, as upstream), nil on create.
func validateWebhook(w webhook, path *field.Path, stored sets.Set[string]) field.ErrorList {
	errs := validation.IsFullyQualifiedName(path.Child("name"), w.name)
	for i := range w.rules {
		errs = append(errs, validateRule(&w.rules[i], path.Child("rules").Index(i))...)
	}
	if p := *w.failurePolicy; p != nil && !sets.New(supportedFailurePolicies...).Has(string(*p)) {
		errs = append(errs, field.NotSupported(path.Child("failurePolicy"), *p, supportedFailurePolicies))
	}
	if p := *w.matchPolicy; p != nil && !sets.New(supportedMatchPolicies...).Has(string(*p)) {
		errs = append(errs, field.NotSupported(path.Child("matchPolicy"), *p, supportedMatchPolicies))
	}
	switch se := *w.sideEffects; {
	case se == nil:
		errs = append(errs, field.Required(path.Child("sideEffects"), fmt.Sprintf("must specify one of %v", strings.Join(supportedSideEffects, ", "))))
	case !sets.New(supportedSideEffects...).Has(string(*se)):
		errs = append(errs, field.NotSupported(path.Child("sideEffects"), *se, supportedSideEffects))
	}
	if t := *w.timeoutSeconds; t != nil && (*t < minTimeout || *t > maxTimeout) {
		errs = append(errs, field.Invalid(path.Child("timeoutSeconds"), *t, "the timeout value must be between 1 and 30 seconds"))
	}
	errs = append(errs, validateReviewVersions(w.reviewVersions, path.Child("admissionReviewVersions"))...)
	if s := *w.namespaceSelector; s != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s, labelSelectorValidationOpt, path.Child("namespaceSelector"))...)
	}
	if s := *w.objectSelector; s != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s, labelSelectorValidationOpt, path.Child("objectSelector"))...)
	}
	errs = append(errs, validateClientConfig(w.clientConfig, path.Child("clientConfig"))...)
	errs = append(errs, validateMatchConditions(w.matchConditions, path.Child("matchConditions"))...)
	return append(errs, compileMatchConditions(w.matchConditions, path.Child("matchConditions"), stored)...)
}

// compileMatchConditions compiles each expression as the webhook admission
// plugin will (with `authorizer`, without params): one that does not
// compile is refused here rather than failing every request it matches.
func compileMatchConditions(conds []admissionregistrationv1.MatchCondition, path *field.Path, stored sets.Set[string]) field.ErrorList {
	if len(conds) == 0 {
		return nil
	}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return field.ErrorList{field.InternalError(path, err)}
	}
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	var errs field.ErrorList
	for i := range conds {
		c := (*matchconditions.MatchCondition)(&conds[i])
		if strings.TrimSpace(c.Expression) == "" {
			continue
		}
		env := environment.NewExpressions
		if stored.Has(c.Expression) {
			env = environment.StoredExpressions
		}
		r := compiler.CompileCELExpression(c, opts, env)
		errs = appendCELError(errs, path.Index(i).Child("expression"), c.Expression, r.Error)
	}
	return errs
}

func validateRule(r *admissionregistrationv1.RuleWithOperations, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(path.Child("operations"), ""))
	}
	for i, op := range r.Operations {
		if !sets.New(supportedOperations...).Has(string(op)) {
			errs = append(errs, field.NotSupported(path.Child("operations").Index(i), op, supportedOperations))
		}
	}
	errs = append(errs, validateBaseRule(&r.Rule, path)...)
	return errs
}

func validateBaseRule(r *admissionregistrationv1.Rule, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(path.Child("apiGroups"), ""))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(path.Child("apiVersions"), ""))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(path.Child("resources"), ""))
	}
	for i, res := range r.Resources {
		if res == "" {
			errs = append(errs, field.Required(path.Child("resources").Index(i), ""))
		}
	}
	if r.Scope != nil && !sets.New(supportedScopes...).Has(string(*r.Scope)) {
		errs = append(errs, field.NotSupported(path.Child("scope"), *r.Scope, supportedScopes))
	}
	return errs
}

func validateReviewVersions(versions []string, path *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(path, fmt.Sprintf("must specify one of %s", strings.Join(supportedReviewVersions, ", ")))}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	known := false
	for i, v := range versions {
		for _, msg := range validation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(path.Index(i), v, msg))
		}
		if seen.Has(v) {
			errs = append(errs, field.Duplicate(path.Index(i), v))
		}
		seen.Insert(v)
		if sets.New(supportedReviewVersions...).Has(v) {
			known = true
		}
	}
	if !known {
		errs = append(errs, field.Invalid(path, versions, fmt.Sprintf("must include at least one of %s", strings.Join(supportedReviewVersions, ", "))))
	}
	return errs
}

func validateClientConfig(cc *admissionregistrationv1.WebhookClientConfig, path *field.Path) field.ErrorList {
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		return field.ErrorList{field.Required(path, "exactly one of url or service is required")}
	case cc.URL != nil:
		return validateWebhookURL(*cc.URL, path.Child("url"))
	}
	var errs field.ErrorList
	s, sp := cc.Service, path.Child("service")
	if s.Name == "" {
		errs = append(errs, field.Required(sp.Child("name"), "service name is required"))
	}
	if s.Namespace == "" {
		errs = append(errs, field.Required(sp.Child("namespace"), "service namespace is required"))
	}
	if s.Path != nil {
		errs = append(errs, validateServicePath(*s.Path, sp.Child("path"))...)
	}
	if s.Port != nil {
		for _, msg := range validation.IsValidPortNum(int(*s.Port)) {
			errs = append(errs, field.Invalid(sp.Child("port"), *s.Port, msg))
		}
	}
	return errs
}

// validateServicePath: empty and "/" are the root; otherwise an absolute
// path whose segments are DNS subdomains, as upstream's.
func validateServicePath(p string, path *field.Path) field.ErrorList {
	if p == "" || p == "/" {
		return nil
	}
	if p == "//" {
		return field.ErrorList{field.Invalid(path, p, "segment[0] may not be empty")}
	}
	var errs field.ErrorList
	if !strings.HasPrefix(p, "/") {
		errs = append(errs, field.Invalid(path, p, "must start with a '/'"))
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
	for i, seg := range strings.Split(rest, "/") {
		if seg == "" {
			errs = append(errs, field.Invalid(path, p, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(seg) {
			errs = append(errs, field.Invalid(path, p, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return errs
}

func validateWebhookURL(raw string, path *field.Path) field.ErrorList {
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(path, raw, "url must be a valid URL: "+err.Error())}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(path, u.Scheme, "'https' is the only allowed URL scheme"))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(path, u.Host, "host must be specified"))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(path, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" || u.RawFragment != "" {
		errs = append(errs, field.Invalid(path, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(path, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

func validateMatchConditions(conds []admissionregistrationv1.MatchCondition, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > maxMatchConditions {
		errs = append(errs, field.TooMany(path, len(conds), maxMatchConditions))
	}
	names := sets.New[string]()
	for i, c := range conds {
		cp := path.Index(i)
		if c.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		} else {
			for _, msg := range validation.IsQualifiedName(c.Name) {
				errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
			}
			if names.Has(c.Name) {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
			names.Insert(c.Name)
		}
		if c.Expression == "" {
			errs = append(errs, field.Required(cp.Child("expression"), ""))
		}
	}
	return errs
}

// ValidateValidatingWebhookConfiguration checks every webhook; names must
// be unique within the configuration.
func ValidateValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	return validateValidating(c, nil)
}

func validateValidating(c *admissionregistrationv1.ValidatingWebhookConfiguration, stored sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range c.Webhooks {
		wp := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(fromValidating(&c.Webhooks[i]), wp, stored)...)
		if n := c.Webhooks[i].Name; names.Has(n) {
			errs = append(errs, field.Duplicate(wp.Child("name"), n))
		} else {
			names.Insert(n)
		}
	}
	return errs
}

// ValidateMutatingWebhookConfiguration checks every webhook, including its
// reinvocationPolicy.
func ValidateMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	return validateMutating(c, nil)
}

func validateMutating(c *admissionregistrationv1.MutatingWebhookConfiguration, stored sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		wp := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(fromMutating(w), wp, stored)...)
		if p := w.ReinvocationPolicy; p != nil && !sets.New(supportedReinvocations...).Has(string(*p)) {
			errs = append(errs, field.NotSupported(wp.Child("reinvocationPolicy"), *p, supportedReinvocations))
		}
		if names.Has(w.Name) {
			errs = append(errs, field.Duplicate(wp.Child("name"), w.Name))
		} else {
			names.Insert(w.Name)
		}
	}
	return errs
}

// ValidatingWebhookStrategy is the validatingwebhookconfigurations strategy.
type ValidatingWebhookStrategy struct{ registry.DefaultStrategy }

// MutatingWebhookStrategy is the mutatingwebhookconfigurations strategy.
type MutatingWebhookStrategy struct{ registry.DefaultStrategy }

var (
	_ registry.Strategy = ValidatingWebhookStrategy{}
	_ registry.Strategy = MutatingWebhookStrategy{}
)

// PrepareForCreate applies defaults and sets generation 1.
func (ValidatingWebhookStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	c := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	c.Generation = 1
	DefaultValidatingWebhookConfiguration(c)
}

// PrepareForUpdate applies defaults and bumps generation when the webhooks
// changed.
func (ValidatingWebhookStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	c, o := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration), old.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	DefaultValidatingWebhookConfiguration(c)
	c.Generation = bumped(o.Generation, c.Webhooks, o.Webhooks)
}

// Validate checks a new configuration.
func (ValidatingWebhookStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateValidatingWebhookConfiguration(obj.(*admissionregistrationv1.ValidatingWebhookConfiguration))
}

// ValidateUpdate checks an updated configuration.
func (s ValidatingWebhookStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	stored := sets.New[string]()
	for _, w := range old.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks {
		for _, c := range w.MatchConditions {
			stored.Insert(c.Expression)
		}
	}
	return validateValidating(obj.(*admissionregistrationv1.ValidatingWebhookConfiguration), stored)
}

// TableColumns are kubectl's columns: NAME WEBHOOKS AGE.
func (ValidatingWebhookStrategy) TableColumns() []metav1.TableColumnDefinition {
	return webhookColumns()
}

// TableRow renders one configuration.
func (ValidatingWebhookStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	c := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	return []interface{}{c.Name, int64(len(c.Webhooks)), registry.Age(c.CreationTimestamp)}, nil
}

// PrepareForCreate applies defaults and sets generation 1.
func (MutatingWebhookStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	c := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
	c.Generation = 1
	DefaultMutatingWebhookConfiguration(c)
}

// PrepareForUpdate applies defaults and bumps generation when the webhooks
// changed.
func (MutatingWebhookStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	c, o := obj.(*admissionregistrationv1.MutatingWebhookConfiguration), old.(*admissionregistrationv1.MutatingWebhookConfiguration)
	DefaultMutatingWebhookConfiguration(c)
	c.Generation = bumped(o.Generation, c.Webhooks, o.Webhooks)
}

// Validate checks a new configuration.
func (MutatingWebhookStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateMutatingWebhookConfiguration(obj.(*admissionregistrationv1.MutatingWebhookConfiguration))
}

// ValidateUpdate checks an updated configuration.
func (s MutatingWebhookStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	stored := sets.New[string]()
	for _, w := range old.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks {
		for _, c := range w.MatchConditions {
			stored.Insert(c.Expression)
		}
	}
	return validateMutating(obj.(*admissionregistrationv1.MutatingWebhookConfiguration), stored)
}

// TableColumns are kubectl's columns: NAME WEBHOOKS AGE.
func (MutatingWebhookStrategy) TableColumns() []metav1.TableColumnDefinition { return webhookColumns() }

// TableRow renders one configuration.
func (MutatingWebhookStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	c := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
	return []interface{}{c.Name, int64(len(c.Webhooks)), registry.Age(c.CreationTimestamp)}, nil
}

func webhookColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// bumped returns the generation after an update: one more than before when
// the watched part changed.
func bumped(gen int64, next, prev interface{}) int64 {
	if apiequality.Semantic.DeepEqual(next, prev) {
		return gen
	}
	return gen + 1
}
