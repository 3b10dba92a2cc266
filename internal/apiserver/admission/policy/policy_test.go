package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	"github.com/skiff-sh/skiff/internal/controller/admissionpolicystatus"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
	kubectltest "github.com/skiff-sh/skiff/internal/testing/kubectl"
)

type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) HandleWarningHeader(_ int, _ string, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, text)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.got
	r.got = nil
	return g
}

// env is one test's view of the cluster: a client whose warnings are
// recorded and a fresh namespace labelled policy-test=<name>.
type env struct {
	t        *testing.T
	c        *testapiserver.Cluster
	cs       kubernetes.Interface
	warnings *recorder
	ns       string
	ctx      context.Context
}

func newEnv(t *testing.T, c *testapiserver.Cluster) *env {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	w := &recorder{}
	cfg.WarningHandler = w
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()[strings.LastIndex(t.Name(), "/")+1:]))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"policy-test": name}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return &env{t: t, c: c, cs: cs, warnings: w, ns: name, ctx: ctx}
}

// matchNamespace limits a binding to the test's namespace.
func (e *env) matchNamespace() *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"policy-test": e.ns}},
	}
}

func deploymentRules() *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
		},
	}}}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
}

func (e *env) createPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	e.t.Helper()
	if _, err := e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create policy %s: %v", p.Name, err)
	}
	e.t.Cleanup(func() {
		_ = e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	})
}

func (e *env) createBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	e.t.Helper()
	if _, err := e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(e.ctx, b, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create binding %s: %v", b.Name, err)
	}
	e.t.Cleanup(func() {
		_ = e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
	})
}

// eventually polls cond until it holds: policies apply once the server's
// cache has them (a moment after they are written).
func (e *env) eventually(what string, cond func() (bool, error)) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("%s: never happened (last error: %v)", what, last)
	}
}

// dryRunDenied waits until a dry-run create of d is refused.
func (e *env) dryRunDenied(d *appsv1.Deployment) {
	e.t.Helper()
	e.eventually("the policy refuses "+d.Name, func() (bool, error) {
		_, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, err
	})
}

// runKubectl runs the embedded kubectl; out is its stdout and stderr.
func runKubectl(t *testing.T, c *testapiserver.Cluster, stdin string, args ...string) (out string, err error) {
	t.Helper()
	stdout, stderr, err := kubectltest.Run(t, c.Kubeconfig(), stdin, args...)
	return stdout + stderr, err
}

// TestAdmissionPolicies runs every case on one API server (with an audit
// log); each case works in its own namespace and binds its policies to it.
func TestAdmissionPolicies(t *testing.T) {
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *apiserver.Config) {
		p, err := audit.ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Audit, err = audit.New(p, audit.LogOptions{Path: auditLog}, nil); err != nil {
			t.Fatal(err)
		}
	}})
	// issue #13's must-show: a policy that refuses a Deployment of more
	// than 5 replicas, through client-go and kubectl, with upstream's
	// message and code.
	t.Run("max replicas", func(t *testing.T) {
		e := newEnv(t, c)
		e.createPolicy(&admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "max-replicas-" + e.ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: deploymentRules(),
				Validations:      []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5"}},
			},
		})
		e.createBinding(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "max-replicas-" + e.ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: "max-replicas-" + e.ns, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources: e.matchNamespace(),
			},
		})
		e.dryRunDenied(deployment("big", 6))

		_, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, deployment("big", 6), metav1.CreateOptions{})
		want := fmt.Sprintf(`deployments.apps "big" is forbidden: ValidatingAdmissionPolicy 'max-replicas-%[1]s' with binding 'max-replicas-%[1]s' denied request: failed expression: object.spec.replicas <= 5`, e.ns)
		if err == nil || err.Error() != want {
			t.Fatalf("create 6 replicas: got %v, want %q", err, want)
		}
		if code := apiStatusCode(err); code != http.StatusUnprocessableEntity {
			t.Errorf("code %d, want 422 (upstream's default reason Invalid)", code)
		}
		if _, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, deployment("small", 5), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create 5 replicas: %v", err)
		}
		// Scaling up through an update is refused as well.
		d, err := e.cs.AppsV1().Deployments(e.ns).Get(e.ctx, "small", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = ptr.To[int32](7)
		if _, err := e.cs.AppsV1().Deployments(e.ns).Update(e.ctx, d, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("update to 7 replicas: got %v, want 422", err)
		}

		manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: from-kubectl
  namespace: %s
spec:
  replicas: 10
  selector: {matchLabels: {app: k}}
  template:
    metadata: {labels: {app: k}}
    spec: {containers: [{name: c, image: busybox}]}
`, e.ns)
		out, err := runKubectl(t, c, manifest, "apply", "-f", "-")
		wantOut := fmt.Sprintf(`ValidatingAdmissionPolicy 'max-replicas-%[1]s' with binding 'max-replicas-%[1]s' denied request: failed expression: object.spec.replicas <= 5`, e.ns)
		if err == nil || !strings.Contains(out, wantOut) {
			t.Errorf("kubectl apply of 10 replicas: err %v, output %q; want it to say %q", err, out, wantOut)
		}
	})
	t.Run("warn and audit", func(t *testing.T) { testWarnAndAudit(t, c, auditLog) })
	t.Run("params", func(t *testing.T) { testParams(t, c) })
	t.Run("missing params", func(t *testing.T) { testMissingParams(t, c) })
	t.Run("reason and variables", func(t *testing.T) { testReasonAndVariables(t, c) })
	t.Run("type checking", func(t *testing.T) { testTypeChecking(t, c) })
	t.Run("mutating", func(t *testing.T) { testMutating(t, c) })
	t.Run("custom resources", func(t *testing.T) { testCustomResources(t, c) })
	t.Run("delete", func(t *testing.T) { testDelete(t, c) })
	t.Run("reinvocation", func(t *testing.T) { testReinvocation(t, c) })
}

// testReinvocation: a policy with reinvocationPolicy IfNeeded runs again
// when a later policy changed the object (it counts the labels, the
// later one adds a label).
func testReinvocation(t *testing.T, c *testapiserver.Cluster) {
	e := newEnv(t, c)
	rules := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		},
	}}}
	policies := []*admissionregistrationv1.MutatingAdmissionPolicy{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "a-count-" + e.ns},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				MatchConstraints: rules, ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
				Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{annotations: {"labels": string(size(object.metadata.labels))}}}`}}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "b-label-" + e.ns},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				MatchConstraints: rules, ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"added": "yes"}}}`}}},
			},
		},
	}
	for _, p := range policies {
		if _, err := e.cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer e.cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
		b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: p.Name, MatchResources: e.matchNamespace()},
		}
		if _, err := e.cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(e.ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer e.cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
	}
	var got *corev1.ConfigMap
	e.eventually("both policies mutate", func() (bool, error) {
		var err error
		got, err = e.cs.CoreV1().ConfigMaps(e.ns).Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Labels: map[string]string{"own": "1"}}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Labels["added"] == "yes" && got.Annotations["labels"] != "", err
	})
	if diff := cmp.Diff(map[string]string{"labels": "2"}, got.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}

// testDelete: a policy on DELETE sees the stored object as oldObject.
func testDelete(t *testing.T, c *testapiserver.Cluster) {
	e := newEnv(t, c)
	name := "keep-" + e.ns
	e.createPolicy(&admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object == null && (!has(oldObject.data) || !('keep' in oldObject.data))", Message: "this ConfigMap is kept"}},
		},
	})
	e.createBinding(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: e.matchNamespace(),
		},
	})
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"keep": "yes"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gone"}},
	} {
		if _, err := e.cs.CoreV1().ConfigMaps(e.ns).Create(e.ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually("the policy keeps the ConfigMap", func() (bool, error) {
		err := e.cs.CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "kept", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, err
	})
	err := e.cs.CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "kept", metav1.DeleteOptions{})
	want := fmt.Sprintf(`configmaps "kept" is forbidden: ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request: this ConfigMap is kept`, name)
	if err == nil || err.Error() != want {
		t.Errorf("delete: got %v, want %q", err, want)
	}
	if err := e.cs.CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete of another ConfigMap: %v", err)
	}
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.policy.example.com
spec:
  group: policy.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

// testCustomResources: a policy on a custom resource whose params are a
// custom resource too, and mutations of one (JSONPatch, ApplyConfiguration
// typed by the CRD's schema).
func testCustomResources(t *testing.T, c *testapiserver.Cluster) {
	e := newEnv(t, c)
	if out, err := runKubectl(t, c, widgetCRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply CRD: %v\n%s", err, out)
	}
	gvr := schema.GroupVersionResource{Group: "policy.example.com", Version: "v1", Resource: "widgets"}
	widgets := dynamic.NewForConfigOrDie(c.Config).Resource(gvr).Namespace(e.ns)
	widget := func(name string, size int64, labels map[string]interface{}) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "policy.example.com/v1", "kind": "Widget",
			"metadata": map[string]interface{}{"name": name, "labels": labels},
			"spec":     map[string]interface{}{"size": size},
		}}
	}
	e.eventually("widgets are served", func() (bool, error) {
		_, err := widgets.Create(e.ctx, widget("limit", 10, map[string]interface{}{"role": "limit"}), metav1.CreateOptions{})
		return err == nil, err
	})
	name := "widgets-" + e.ns
	rules := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"policy.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
		},
	}}}
	e.createPolicy(&admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "policy.example.com/v1", Kind: "Widget"},
			MatchConstraints: rules,
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.spec.size <= params.spec.size",
				MessageExpression: "'size ' + string(object.spec.size) + ' is over ' + string(params.spec.size)",
			}},
		},
	})
	m := e.matchNamespace()
	m.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "role", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	e.createBinding(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limit", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    m,
		},
	})
	e.eventually("the policy refuses a big widget", func() (bool, error) {
		_, err := widgets.Create(e.ctx, widget("big", 11, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, err
	})
	_, err := widgets.Create(e.ctx, widget("big", 11, nil), metav1.CreateOptions{})
	want := fmt.Sprintf(`widgets.policy.example.com "big" is forbidden: ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request: size 11 is over 10`, name)
	if err == nil || err.Error() != want {
		t.Fatalf("big widget: got %v, want %q", err, want)
	}
	if _, err := widgets.Create(e.ctx, widget("small", 9, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("small widget: %v", err)
	}

	mname := "grow-" + e.ns
	pol := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: mname},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints:   rules,
			MatchConditions:    []admissionregistrationv1.MatchCondition{{Name: "tiny", Expression: "object.spec.size < 2"}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{
				{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
					JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "replace", path: "/spec/size", value: 2}]`}},
				{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"grown": "true"}}}`}},
			},
		},
	}
	if _, err := e.cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(e.ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Delete(context.Background(), mname, metav1.DeleteOptions{})
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: mname},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: mname, MatchResources: e.matchNamespace()},
	}
	if _, err := e.cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(e.ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(context.Background(), mname, metav1.DeleteOptions{})
	e.eventually("a tiny widget grows", func() (bool, error) {
		w, err := widgets.Create(e.ctx, widget("tiny", 1, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
		return size == 2 && w.GetLabels()["grown"] == "true", fmt.Errorf("size %d, labels %v", size, w.GetLabels())
	})
}

// maxReplicas is a policy limiting deployments to 5 replicas.
func maxReplicas(name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: deploymentRules(),
			Validations:      []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5"}},
		},
	}
}

// testWarnAndAudit: Warn admits with a Warning header, Audit admits with
// the validation failure in the audit event's annotations.
func testWarnAndAudit(t *testing.T, c *testapiserver.Cluster, auditLog string) {
	e := newEnv(t, c)
	name := "warn-" + e.ns
	p := maxReplicas(name)
	p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "replicas", ValueExpression: "string(object.spec.replicas)"}}
	e.createPolicy(p)
	e.createBinding(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit},
			MatchResources:    e.matchNamespace(),
		},
	})
	want := fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s': failed expression: object.spec.replicas <= 5", name)
	e.eventually("the policy warns", func() (bool, error) {
		e.warnings.take()
		_, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, deployment("big", 8), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && len(e.warnings.take()) > 0, err
	})
	if _, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, deployment("big", 8), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Warn and Audit refused: %v", err)
	}
	if diff := cmp.Diff([]string{want}, e.warnings.take()); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	wantAudit := fmt.Sprintf(`[{"message":"failed expression: object.spec.replicas \u003c= 5","policy":"%[1]s","binding":"%[1]s","expressionIndex":0,"validationActions":["Warn","Audit"]}]`, name)
	e.eventually("the audit event has the failure", func() (bool, error) {
		data, err := os.ReadFile(auditLog)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			var ev auditv1.Event
			// The dry-run creates made while the policy was not yet in
			// force have events without its annotations: skip them.
			if json.Unmarshal([]byte(line), &ev) != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != e.ns ||
				ev.ObjectRef.Resource != "deployments" || ev.Stage != auditv1.StageResponseComplete ||
				ev.Annotations["validation.policy.admission.k8s.io/validation_failure"] == "" {
				continue
			}
			want := map[string]string{
				"validation.policy.admission.k8s.io/validation_failure": wantAudit,
				name + "/replicas": "8", // the policy's auditAnnotations
			}
			got := map[string]string{}
			for k := range want {
				got[k] = ev.Annotations[k]
			}
			if diff := cmp.Diff(want, got); diff != "" {
				return false, fmt.Errorf("audit annotations (-want +got):\n%s", diff)
			}
			return true, nil
		}
		return false, errors.New("no audit event with annotations yet")
	})
}

// testParams: the limit comes from a ConfigMap (paramKind, paramRef), the
// message from messageExpression.
func testParams(t *testing.T, c *testapiserver.Cluster) {
	e := newEnv(t, c)
	name := "params-" + e.ns
	if _, err := e.cs.CoreV1().ConfigMaps(e.ns).Create(e.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Data: map[string]string{"maxReplicas": "3"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createPolicy(&admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: deploymentRules(),
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.spec.replicas <= int(params.data.maxReplicas)",
				MessageExpression: "'replicas must be at most ' + params.data.maxReplicas + ', not ' + string(object.spec.replicas)",
			}},
		},
	})
	e.createBinding(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			ParamRef: &admissionregistrationv1.ParamRef{Name: "limits", Namespace: e.ns,
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    e.matchNamespace(),
		},
	})
	e.dryRunDenied(deployment("four", 4))
	_, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, deployment("four", 4), metav1.CreateOptions{})
	want := fmt.Sprintf(`deployments.apps "four" is forbidden: ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request: replicas must be at most 3, not 4`, name)
	if err == nil || err.Error() != want {
		t.Fatalf("create 4 replicas: got %v, want %q", err, want)
	}
	if _, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, deployment("three", 3), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create 3 replicas: %v", err)
	}
	// A new limit in the ConfigMap applies to the next request.
	if _, err := e.cs.CoreV1().ConfigMaps(e.ns).Update(e.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Data: map[string]string{"maxReplicas": "4"},
	}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the new limit admits 4 replicas", func() (bool, error) {
		_, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, deployment("four", 4), metav1.CreateOptions{})
		return err == nil, err
	})
}

// testMissingParams: a binding whose param is missing refuses with
// parameterNotFoundAction Deny (failurePolicy Fail), admits with
// failurePolicy Ignore, and admits with parameterNotFoundAction Allow.
func testMissingParams(t *testing.T, c *testapiserver.Cluster) {
	e := newEnv(t, c)
	policy := func(name string, fp admissionregistrationv1.FailurePolicyType) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
				MatchConstraints: deploymentRules(),
				FailurePolicy:    ptr.To(fp),
				Validations:      []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= int(params.data.maxReplicas)"}},
			},
		}
	}
	binding := func(name string, notFound admissionregistrationv1.ParameterNotFoundActionType, label string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		m := e.matchNamespace()
		m.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"case": label}}
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        name,
				ParamRef:          &admissionregistrationv1.ParamRef{Name: "absent", ParameterNotFoundAction: ptr.To(notFound)},
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources:    m,
			},
		}
	}
	labelled := func(name, label string) *appsv1.Deployment {
		d := deployment(name, 1)
		d.Labels = map[string]string{"case": label}
		return d
	}
	fail, ignore, allow := "fail-"+e.ns, "ignore-"+e.ns, "allow-"+e.ns
	e.createPolicy(policy(fail, admissionregistrationv1.Fail))
	e.createBinding(binding(fail, admissionregistrationv1.DenyAction, "fail"))
	e.createPolicy(policy(ignore, admissionregistrationv1.Ignore))
	e.createBinding(binding(ignore, admissionregistrationv1.DenyAction, "ignore"))
	e.createPolicy(policy(allow, admissionregistrationv1.Fail))
	e.createBinding(binding(allow, admissionregistrationv1.AllowAction, "allow"))

	e.dryRunDenied(labelled("a", "fail"))
	_, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, labelled("a", "fail"), metav1.CreateOptions{})
	want := fmt.Sprintf("deployments.apps \"a\" is forbidden: ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction", fail)
	if err == nil || err.Error() != want {
		t.Errorf("missing param, failurePolicy Fail: got %v, want %q", err, want)
	}
	for _, label := range []string{"ignore", "allow"} {
		if _, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, labelled(label, label), metav1.CreateOptions{}); err != nil {
			t.Errorf("missing param (%s): %v", label, err)
		}
	}
}

// testReasonAndVariables: variables, matchConditions, request and
// namespaceObject in expressions; a validation's reason sets the code.
func testReasonAndVariables(t *testing.T, c *testapiserver.Cluster) {
	e := newEnv(t, c)
	name := "reason-" + e.ns
	e.createPolicy(&admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: deploymentRules(),
			MatchConditions:  []admissionregistrationv1.MatchCondition{{Name: "not-exempt", Expression: "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}},
			Variables:        []admissionregistrationv1.Variable{{Name: "image", Expression: "object.spec.template.spec.containers[0].image"}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "variables.image.startsWith('registry.example/')",
				MessageExpression: "request.userInfo.username + ' may not run ' + variables.image + ' in ' + namespaceObject.metadata.name",
				Reason:            ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	})
	e.createBinding(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: e.matchNamespace(),
		},
	})
	e.dryRunDenied(deployment("busy", 1))
	_, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, deployment("busy", 1), metav1.CreateOptions{})
	want := fmt.Sprintf(`deployments.apps "busy" is forbidden: ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request: system:admin may not run busybox in %[2]s`, name, e.ns)
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if code := apiStatusCode(err); code != http.StatusForbidden {
		t.Errorf("code %d, want 403 (reason Forbidden)", code)
	}
	exempt := deployment("exempt", 1)
	exempt.Labels = map[string]string{"exempt": "yes"}
	if _, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, exempt, metav1.CreateOptions{}); err != nil {
		t.Errorf("a request failing the match condition was refused: %v", err)
	}
}

// testTypeChecking: the status controller type-checks a policy against
// the Deployment schema and reports the expression that cannot work.
func testTypeChecking(t *testing.T, c *testapiserver.Cluster) {
	e := newEnv(t, c)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactory(e.cs, 0)
	ctrl, err := admissionpolicystatus.New(ctx, controllercontext.Context{Client: e.cs, Informers: factory, Clock: clock.RealClock{}})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- ctrl.Start(ctx) }()
	defer func() { cancel(); <-done }()

	name := "typed-" + e.ns
	p := maxReplicas(name)
	p.Spec.Validations = append(p.Spec.Validations, admissionregistrationv1.Validation{Expression: "object.spec.replicas > '5'"})
	e.createPolicy(p)
	var got *admissionregistrationv1.ValidatingAdmissionPolicy
	e.eventually("the status has the type check", func() (bool, error) {
		var err error
		got, err = e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(e.ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation, err
	})
	if got.Status.TypeChecking == nil || len(got.Status.TypeChecking.ExpressionWarnings) != 1 {
		t.Fatalf("type checking %+v, want one warning", got.Status.TypeChecking)
	}
	w := got.Status.TypeChecking.ExpressionWarnings[0]
	if w.FieldRef != "spec.validations[1].expression" || !strings.Contains(w.Warning, "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'") {
		t.Errorf("warning %+v, want the second validation's overload error", w)
	}
}

// testMutating: a MutatingAdmissionPolicy labels new ConfigMaps (an
// ApplyConfiguration) and annotates them (a JSONPatch), kubectl sees it.
func testMutating(t *testing.T, c *testapiserver.Cluster) {
	e := newEnv(t, c)
	name := "label-" + e.ns
	pol := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{
				{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"mutated-by": "policy"}}}`}},
				{PatchType: admissionregistrationv1.PatchTypeJSONPatch, JSONPatch: &admissionregistrationv1.JSONPatch{
					Expression: `[JSONPatch{op: "add", path: "/data/added", value: "by " + request.userInfo.username}]`}},
			},
		},
	}
	if _, err := e.cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(e.ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name, MatchResources: e.matchNamespace()},
	}
	if _, err := e.cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(e.ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	e.eventually("the policy labels a ConfigMap", func() (bool, error) {
		cm, err := e.cs.CoreV1().ConfigMaps(e.ns).Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Data: map[string]string{"a": "b"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && cm.Labels["mutated-by"] == "policy", err
	})
	out, err := runKubectl(t, c, "", "create", "configmap", "cm", "-n", e.ns, "--from-literal=k=v")
	if err != nil {
		t.Fatalf("kubectl create configmap: %v\n%s", err, out)
	}
	out, err = runKubectl(t, c, "", "get", "configmap", "cm", "-n", e.ns, "-o", `jsonpath={.metadata.labels.mutated-by} {.data.added} {.data.k}`)
	if err != nil || out != "policy by system:admin v" {
		t.Errorf("kubectl get: %q (%v), want %q", out, err, "policy by system:admin v")
	}
	out, err = runKubectl(t, c, "", "get", "mutatingadmissionpolicies", name)
	if err != nil || !strings.Contains(out, "MUTATIONS") || !strings.Contains(out, name+"   2           <unset>") {
		t.Errorf("kubectl get mutatingadmissionpolicies:\n%s (%v)", out, err)
	}
}

// apiStatusCode is the HTTP code of an API error.
func apiStatusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}
