package admissionregistration

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func rule() admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}
}

func mutatingConfig(mutate ...func(*admissionregistrationv1.MutatingWebhook)) *admissionregistrationv1.MutatingWebhookConfiguration {
	w := admissionregistrationv1.MutatingWebhook{
		Name:                    "inject.example.com",
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}},
		Rules:                   []admissionregistrationv1.RuleWithOperations{rule()},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
	for _, m := range mutate {
		m(&w)
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "inject"}, Webhooks: []admissionregistrationv1.MutatingWebhook{w}}
}

func TestWebhookDefaults(t *testing.T) {
	c := mutatingConfig()
	MutatingWebhookStrategy{}.PrepareForCreate(ctx, c)
	w := c.Webhooks[0]
	want := admissionregistrationv1.MutatingWebhook{
		Name: "inject.example.com",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: "ns", Name: "svc", Port: ptr.To[int32](443)}},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
				Scope: ptr.To(admissionregistrationv1.AllScopes)},
		}},
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
		NamespaceSelector:       &metav1.LabelSelector{},
		ObjectSelector:          &metav1.LabelSelector{},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](10),
		AdmissionReviewVersions: []string{"v1"},
		ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
	}
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if c.Generation != 1 {
		t.Errorf("generation = %d", c.Generation)
	}
	if errs := (MutatingWebhookStrategy{}).Validate(ctx, c); len(errs) != 0 {
		t.Errorf("defaulted config invalid: %v", errs)
	}

	v := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "a.b.c"}}}
	ValidatingWebhookStrategy{}.PrepareForCreate(ctx, v)
	if v.Webhooks[0].TimeoutSeconds == nil || *v.Webhooks[0].TimeoutSeconds != 10 || v.Webhooks[0].SideEffects != nil {
		t.Errorf("validating defaults: %+v", v.Webhooks[0])
	}
}

func TestWebhookValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*admissionregistrationv1.MutatingWebhook)
		want   []string
	}{
		{name: "valid"},
		{name: "short name", mutate: func(w *admissionregistrationv1.MutatingWebhook) { w.Name = "inject" },
			want: []string{"webhooks[0].name: Invalid value"}},
		{name: "side effects required", mutate: func(w *admissionregistrationv1.MutatingWebhook) { w.SideEffects = nil },
			want: []string{"webhooks[0].sideEffects: Required value"}},
		{name: "side effects unknown", mutate: func(w *admissionregistrationv1.MutatingWebhook) {
			w.SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
		}, want: []string{"webhooks[0].sideEffects: Unsupported value"}},
		{name: "review versions required", mutate: func(w *admissionregistrationv1.MutatingWebhook) { w.AdmissionReviewVersions = nil },
			want: []string{"webhooks[0].admissionReviewVersions: Required value"}},
		{name: "review versions unknown", mutate: func(w *admissionregistrationv1.MutatingWebhook) { w.AdmissionReviewVersions = []string{"v2"} },
			want: []string{"webhooks[0].admissionReviewVersions: Invalid value"}},
		{name: "timeout", mutate: func(w *admissionregistrationv1.MutatingWebhook) { w.TimeoutSeconds = ptr.To[int32](31) },
			want: []string{"webhooks[0].timeoutSeconds: Invalid value"}},
		{name: "both url and service", mutate: func(w *admissionregistrationv1.MutatingWebhook) { w.ClientConfig.URL = ptr.To("https://x") },
			want: []string{"webhooks[0].clientConfig: Required value"}},
		{name: "http url", mutate: func(w *admissionregistrationv1.MutatingWebhook) {
			w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("http://hook.example.com/x?y=1")}
		}, want: []string{"webhooks[0].clientConfig.url: Invalid value", "webhooks[0].clientConfig.url: Invalid value"}},
		{name: "rule", mutate: func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules = []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"PATCH"}}}
		}, want: []string{
			"webhooks[0].rules[0].operations[0]: Unsupported value",
			"webhooks[0].rules[0].apiGroups: Required value",
			"webhooks[0].rules[0].apiVersions: Required value",
			"webhooks[0].rules[0].resources: Required value",
		}},
		{name: "service path empty is the root", mutate: func(w *admissionregistrationv1.MutatingWebhook) {
			w.ClientConfig.Service.Path = ptr.To("")
		}},
		{name: "service path", mutate: func(w *admissionregistrationv1.MutatingWebhook) {
			w.ClientConfig.Service.Path = ptr.To("/a//B_c")
		}, want: []string{"webhooks[0].clientConfig.service.path: Invalid value", "webhooks[0].clientConfig.service.path: Invalid value"}},
		{name: "match condition that does not compile", mutate: func(w *admissionregistrationv1.MutatingWebhook) {
			w.MatchConditions = []admissionregistrationv1.MatchCondition{
				{Name: "ok", Expression: "object.metadata.name != 'skip-me'"},
				{Name: "bad", Expression: "... [] bad expression"},
			}
		}, want: []string{"webhooks[0].matchConditions[1].expression: Invalid value"}},
		{name: "reinvocation", mutate: func(w *admissionregistrationv1.MutatingWebhook) {
			w.ReinvocationPolicy = ptr.To(admissionregistrationv1.ReinvocationPolicyType("Always"))
		}, want: []string{"webhooks[0].reinvocationPolicy: Unsupported value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := mutatingConfig()
			if tc.mutate != nil {
				tc.mutate(&c.Webhooks[0])
			}
			MutatingWebhookStrategy{}.PrepareForCreate(ctx, c)
			if diff := cmp.Diff(tc.want, errStrings(MutatingWebhookStrategy{}.Validate(ctx, c))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	dup := mutatingConfig()
	dup.Webhooks = append(dup.Webhooks, dup.Webhooks[0])
	if diff := cmp.Diff([]string{"webhooks[1].name: Duplicate value"}, errStrings(ValidateMutatingWebhookConfiguration(dup))); diff != "" {
		t.Errorf("duplicate (-want +got):\n%s", diff)
	}
}

func TestWebhookGeneration(t *testing.T) {
	old := mutatingConfig()
	MutatingWebhookStrategy{}.PrepareForCreate(ctx, old)
	same := old.DeepCopy()
	same.Labels = map[string]string{"a": "b"}
	MutatingWebhookStrategy{}.PrepareForUpdate(ctx, same, old)
	changed := old.DeepCopy()
	changed.Webhooks[0].TimeoutSeconds = ptr.To[int32](5)
	MutatingWebhookStrategy{}.PrepareForUpdate(ctx, changed, old)
	if same.Generation != 1 || changed.Generation != 2 {
		t.Errorf("generations: unchanged %d, changed %d", same.Generation, changed.Generation)
	}
}

func TestPolicy(t *testing.T) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rule()}}},
		Validations:      []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5"}},
	}}
	s := PolicyStrategy{}
	s.PrepareForCreate(ctx, p)
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail || *p.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent ||
		p.Spec.MatchConstraints.NamespaceSelector == nil || *p.Spec.MatchConstraints.ResourceRules[0].Scope != "*" {
		t.Errorf("policy defaults: %+v", p.Spec)
	}
	if errs := s.Validate(ctx, p); len(errs) != 0 {
		t.Errorf("valid policy refused: %v", errs)
	}
	empty := &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
		ParamKind: &admissionregistrationv1.ParamKind{}, Validations: []admissionregistrationv1.Validation{{}}}}
	want := []string{
		"spec.paramKind.apiVersion: Required value", "spec.paramKind.kind: Required value",
		"spec.matchConstraints: Required value", "spec.validations[0].expression: Required value",
	}
	if diff := cmp.Diff(want, errStrings(s.Validate(ctx, empty))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	withStatus := p.DeepCopy()
	withStatus.Status.ObservedGeneration = 1
	s.PrepareForCreate(ctx, withStatus)
	if withStatus.Status.ObservedGeneration != 0 {
		t.Errorf("create kept status")
	}
}

func TestBinding(t *testing.T) {
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: "p", ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		ParamRef: &admissionregistrationv1.ParamRef{Name: "cfg"},
	}}
	BindingStrategy{}.PrepareForCreate(ctx, b)
	if a := b.Spec.ParamRef.ParameterNotFoundAction; a == nil || *a != admissionregistrationv1.DenyAction {
		t.Errorf("parameterNotFoundAction = %v", a)
	}
	if errs := (BindingStrategy{}).Validate(ctx, b); len(errs) != 0 {
		t.Errorf("valid binding refused: %v", errs)
	}
	tests := []struct {
		name string
		spec admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec
		want []string
	}{
		{name: "empty", want: []string{"spec.policyName: Required value", "spec.validationActions: Required value"}},
		{name: "deny and warn", spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{"Deny", "Warn", "Warn", "Shout"}},
			want: []string{"spec.validationActions[2]: Duplicate value", "spec.validationActions[3]: Unsupported value", "spec.validationActions: Invalid value"}},
		{name: "param ref without target", spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{"Audit"}, ParamRef: &admissionregistrationv1.ParamRef{}},
			want: []string{"spec.paramRef: Required value", "spec.paramRef.parameterNotFoundAction: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := BindingStrategy{}.Validate(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{Spec: tc.spec})
			if diff := cmp.Diff(tc.want, errStrings(got)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTables(t *testing.T) {
	tests := []struct {
		name     string
		strategy registry.Strategy
		obj      runtime.Object
		columns  []string
		want     []interface{}
	}{
		{name: "mutating", strategy: MutatingWebhookStrategy{}, obj: mutatingConfig(),
			columns: []string{"Name", "Webhooks", "Age"}, want: []interface{}{"inject", int64(1), "<unknown>"}},
		{name: "validating", strategy: ValidatingWebhookStrategy{}, obj: &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"}},
			columns: []string{"Name", "Webhooks", "Age"}, want: []interface{}{"v", int64(0), "<unknown>"}},
		{name: "policy", strategy: PolicyStrategy{}, obj: &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
				Validations: []admissionregistrationv1.Validation{{}, {}}}},
			columns: []string{"Name", "Validations", "ParamKind", "Age"}, want: []interface{}{"p", int64(2), "v1/ConfigMap", "<unknown>"}},
		{name: "binding", strategy: BindingStrategy{}, obj: &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p", ParamRef: &admissionregistrationv1.ParamRef{Name: "cfg"}}},
			columns: []string{"Name", "PolicyName", "ParamRef", "Age"}, want: []interface{}{"b", "p", "*/cfg", "<unknown>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cols []string
			for _, c := range tc.strategy.TableColumns() {
				cols = append(cols, c.Name)
			}
			if diff := cmp.Diff(tc.columns, cols); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			row, err := tc.strategy.TableRow(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, row); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}
