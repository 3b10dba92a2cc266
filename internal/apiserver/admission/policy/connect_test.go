package policy_test

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestSubresourceRequestPolicies: a ValidatingAdmissionPolicy sees a
// CONNECT of pods/exec with its PodExecOptions and a CREATE of
// pods/eviction with its Eviction, as upstream's, and refuses them.
func TestSubresourceRequestPolicies(t *testing.T) {
	c := testapiserver.Start(t)
	e := newEnv(t, c)
	name := "no-rm-" + e.ns
	e.createPolicy(&admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Connect, admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/exec", "pods/eviction"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{
				{Expression: "request.subResource != 'exec' || (object.kind == 'PodExecOptions' && object.command[0] != 'rm')"},
				{Expression: "request.subResource != 'eviction' || (object.kind == 'Eviction' && object.metadata.name != 'keep')"},
			},
		},
	})
	e.createBinding(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: e.matchNamespace(),
		},
	})
	for _, p := range []string{"keep", "go"} {
		if _, err := e.cs.CoreV1().Pods(e.ns).Create(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(cmd string) error {
		return e.cs.CoreV1().RESTClient().Post().Namespace(e.ns).Resource("pods").Name("go").SubResource("exec").
			Param("command", cmd).Param("stdout", "true").Do(e.ctx).Error()
	}
	denied := func(expr string) string {
		return fmt.Sprintf("ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request: failed expression: %s", name, expr)
	}
	rmExpr := "request.subResource != 'exec' || (object.kind == 'PodExecOptions' && object.command[0] != 'rm')"
	e.eventually("the policy refuses exec of rm", func() (bool, error) {
		err := exec("rm")
		return err != nil && strings.Contains(err.Error(), denied(rmExpr)), err
	})
	// ls passes the policy; the pod has no node, so the exec itself fails.
	if err := exec("ls"); err == nil || strings.Contains(err.Error(), "denied request") {
		t.Errorf("exec ls: %v, want the policy to allow it (and the pod's missing node to fail it)", err)
	}
	evict := func(pod string) error {
		return e.cs.PolicyV1().Evictions(e.ns).Evict(e.ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: e.ns}})
	}
	keepExpr := "request.subResource != 'eviction' || (object.kind == 'Eviction' && object.metadata.name != 'keep')"
	if err := evict("keep"); err == nil || !strings.Contains(err.Error(), denied(keepExpr)) {
		t.Errorf("evict keep: %v, want %q", err, denied(keepExpr))
	}
	if err := evict("go"); err != nil {
		t.Errorf("evict go: %v", err)
	}
	if _, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "keep", metav1.GetOptions{}); err != nil {
		t.Errorf("pod keep after the refused eviction: %v", err)
	}
}
