package admissionregistration

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func mutatingPolicy(mutate ...func(*admissionregistrationv1.MutatingAdmissionPolicySpec)) *admissionregistrationv1.MutatingAdmissionPolicy {
	p := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				{RuleWithOperations: rule()},
			}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"a": "b"}}}`},
			}},
		},
	}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

func TestMutatingPolicyDefaults(t *testing.T) {
	p := mutatingPolicy()
	MutatingPolicyStrategy{}.PrepareForCreate(ctx, p)
	if p.Generation != 1 || p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("generation %d, failurePolicy %v; want 1, Fail", p.Generation, p.Spec.FailurePolicy)
	}
	m := p.Spec.MatchConstraints
	if *m.MatchPolicy != admissionregistrationv1.Equivalent || m.NamespaceSelector == nil || m.ObjectSelector == nil ||
		*m.ResourceRules[0].Scope != admissionregistrationv1.AllScopes {
		t.Errorf("match constraints not defaulted: %+v", m)
	}
	next := p.DeepCopy()
	next.Spec.ReinvocationPolicy = admissionregistrationv1.IfNeededReinvocationPolicy
	MutatingPolicyStrategy{}.PrepareForUpdate(ctx, next, p)
	if next.Generation != 2 {
		t.Errorf("generation after a spec change %d, want 2", next.Generation)
	}

	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
		PolicyName: "label", ParamRef: &admissionregistrationv1.ParamRef{Name: "p"}}}
	MutatingPolicyBindingStrategy{}.PrepareForCreate(ctx, b)
	if a := b.Spec.ParamRef.ParameterNotFoundAction; a == nil || *a != admissionregistrationv1.DenyAction {
		t.Errorf("parameterNotFoundAction %v, want Deny", a)
	}
}

func TestMutatingPolicyValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*admissionregistrationv1.MutatingAdmissionPolicySpec)
		want   []string
	}{
		{name: "valid", mutate: func(*admissionregistrationv1.MutatingAdmissionPolicySpec) {}},
		{
			name: "json patch with params and variables",
			mutate: func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
				s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
				s.Variables = []admissionregistrationv1.Variable{{Name: "v", Expression: "params.data.value"}}
				s.Mutations = []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
					JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/data/x", value: variables.v}]`}}}
			},
		},
		{
			name: "nothing",
			mutate: func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
				*s = admissionregistrationv1.MutatingAdmissionPolicySpec{}
			},
			want: []string{"spec.failurePolicy: Required value", "spec.matchConstraints: Required value",
				"spec.mutations: Required value", "spec.reinvocationPolicy: Required value"},
		},
		{
			name: "delete cannot be mutated",
			mutate: func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
				s.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}
			},
			want: []string{"spec.matchConstraints.resourceRules.operations: Unsupported value"},
		},
		{
			name: "expression does not compile",
			mutate: func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
				s.Mutations[0].ApplyConfiguration.Expression = "Object{"
			},
			want: []string{"spec.mutations[0].applyConfiguration.expression: Invalid value"},
		},
		{
			name: "params without paramKind",
			mutate: func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
				s.Variables = []admissionregistrationv1.Variable{{Name: "v", Expression: "params.data.value"}}
			},
			want: []string{"spec.variables[0].expression: Invalid value"},
		},
		{
			name: "patch type and body disagree",
			mutate: func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
				s.Mutations[0].PatchType = admissionregistrationv1.PatchTypeJSONPatch
			},
			want: []string{"spec.mutations[0].jsonPatch: Required value", "spec.mutations[0].applyConfiguration: Invalid value"},
		},
		{
			name: "unknown reinvocation policy",
			mutate: func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
				s.ReinvocationPolicy = "Sometimes"
			},
			want: []string{"spec.reinvocationPolicy: Unsupported value"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mutatingPolicy(tc.mutate)
			if p.Spec.FailurePolicy == nil && tc.name != "nothing" {
				p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
			}
			got := errStrings(MutatingPolicyStrategy{}.Validate(ctx, p))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMutatingPolicyBindingValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec admissionregistrationv1.MutatingAdmissionPolicyBindingSpec
		want []string
	}{
		{name: "valid", spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label"}},
		{name: "no policy", want: []string{"spec.policyName: Required value"}},
		{
			name: "name and selector",
			spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label", ParamRef: &admissionregistrationv1.ParamRef{
				Name: "p", Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)}},
			want: []string{"spec.paramRef.name: Forbidden"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{Spec: tc.spec}
			if diff := cmp.Diff(tc.want, errStrings(MutatingPolicyBindingStrategy{}.Validate(ctx, b))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMutatingPolicyTableRows(t *testing.T) {
	p := mutatingPolicy(func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
		s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	})
	row, err := MutatingPolicyStrategy{}.TableRow(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"label", int64(1), "v1/ConfigMap"}, row[:3]); diff != "" {
		t.Errorf("policy row (-want +got):\n%s", diff)
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label", ParamRef: &admissionregistrationv1.ParamRef{Name: "p"}}}
	row, err = MutatingPolicyBindingStrategy{}.TableRow(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"b", "label", "*/p"}, row[:3]); diff != "" {
		t.Errorf("binding row (-want +got):\n%s", diff)
	}
}

func TestValidatingPolicyExpressions(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec admissionregistrationv1.ValidatingAdmissionPolicySpec
		want []string
	}{
		{
			name: "compiles (types are the status controller's to check)",
			spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				Variables:   []admissionregistrationv1.Variable{{Name: "r", Expression: "object.spec.replicas"}},
				Validations: []admissionregistrationv1.Validation{{Expression: "variables.r > '5'", MessageExpression: "'too many: ' + string(variables.r)"}},
			},
		},
		{
			name: "syntax error",
			spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <="}}},
			want: []string{"spec.validations[0].expression: Invalid value"},
		},
		{
			name: "params without paramKind, authorizer in a message",
			spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				Validations:      []admissionregistrationv1.Validation{{Expression: "true", MessageExpression: "string(authorizer.group('').resource('pods').check('get').allowed())"}},
				AuditAnnotations: []admissionregistrationv1.AuditAnnotation{{Key: "k", ValueExpression: "params.x"}},
				MatchConditions:  []admissionregistrationv1.MatchCondition{{Name: "m", Expression: "1"}},
			},
			want: []string{"spec.matchConditions[0].expression: Invalid value", "spec.validations[0].messageExpression: Invalid value",
				"spec.auditAnnotations[0].valueExpression: Invalid value"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(ValidateValidatingAdmissionPolicyExpressions(&tc.spec, field.NewPath("spec"), nil))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
