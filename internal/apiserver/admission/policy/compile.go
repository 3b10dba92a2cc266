package policy

import (
	"fmt"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The CEL environment of admission policies, built once: upstream's base
// environment at the default compatibility version, with strict cost.
var baseEnv = sync.OnceValue(func() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
})

// compileValidating compiles a ValidatingAdmissionPolicy the way
// kube-apiserver's plugin does: variables, match conditions, validations
// (with `authorizer`), audit annotations and message expressions (without
// it). Errors are kept in the validator and decided by failurePolicy.
func compileValidating(p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	hasParams := p.Spec.ParamKind != nil
	withAuthz := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	withoutAuthz := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: false}
	compiler, err := plugincel.NewCompositedCompiler(baseEnv())
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, p.Spec.FailurePolicy, err)
	}
	variables := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		variables[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(variables, withAuthz, environment.StoredExpressions)
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	audits := make([]plugincel.ExpressionAccessor, len(p.Spec.AuditAnnotations))
	for i, a := range p.Spec.AuditAnnotations {
		audits[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return validating.NewValidator(
		compiler.CompileCondition(validations, withAuthz, environment.StoredExpressions),
		matchConditions(compiler, p.Spec.MatchConditions, withAuthz, p.Spec.FailurePolicy, p.Name),
		compiler.CompileCondition(audits, withAuthz, environment.StoredExpressions),
		compiler.CompileCondition(messages, withoutAuthz, environment.StoredExpressions),
		p.Spec.FailurePolicy, nil)
}

// compileMutating compiles a MutatingAdmissionPolicy as kube-apiserver's
// plugin does: each mutation becomes a JSONPatch or ApplyConfiguration
// patcher, in order.
func compileMutating(p *admissionregistrationv1.MutatingAdmissionPolicy) mutating.PolicyEvaluator {
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(baseEnv())
	if err != nil {
		return mutating.PolicyEvaluator{Error: &apiservercel.Error{
			Type: apiservercel.ErrorTypeInternal, Detail: fmt.Sprintf("failed to initialize CEL compiler: %v", err)}}
	}
	variables := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		variables[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(variables, opts, environment.StoredExpressions)
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	var patchers []patch.Patcher
	for _, m := range p.Spec.Mutations {
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			r := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, patchOpts, environment.StoredExpressions)
			patchers = append(patchers, patch.NewJSONPatcher(r))
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			r := compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, patchOpts, environment.StoredExpressions)
			patchers = append(patchers, patch.NewApplyConfigurationPatcher(r))
		}
	}
	return mutating.PolicyEvaluator{
		Matcher:            matchConditions(compiler, p.Spec.MatchConditions, opts, p.Spec.FailurePolicy, p.Name),
		Mutators:           patchers,
		CompositedCompiler: compiler,
	}
}

func matchConditions(c *plugincel.CompositedCompiler, conds []admissionregistrationv1.MatchCondition, opts plugincel.OptionalVariableDeclarations, fp *admissionregistrationv1.FailurePolicyType, name string) matchconditions.Matcher {
	if len(conds) == 0 {
		return nil
	}
	exprs := make([]plugincel.ExpressionAccessor, len(conds))
	for i := range conds {
		exprs[i] = (*matchconditions.MatchCondition)(&conds[i])
	}
	return matchconditions.NewMatcher(c.CompileCondition(exprs, opts, environment.StoredExpressions), fp, "policy", "validate", name)
}
