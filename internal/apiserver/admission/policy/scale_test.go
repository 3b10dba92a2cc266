package policy_test

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestScaleSubresourceAdmission: admission sees a write of the scale
// subresource as upstream's does (resource deployments, subresource scale,
// the object an autoscaling/v1 Scale), so a policy on deployments/scale
// decides `kubectl scale`; a policy on deployments alone does not.
func TestScaleSubresourceAdmission(t *testing.T) {
	c := testapiserver.Start(t)
	e := newEnv(t, c)
	name := "max-scale-" + e.ns
	e.createPolicy(&admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments/scale"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.kind == 'Scale' && object.spec.replicas <= 5"}},
		},
	})
	e.createBinding(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: e.matchNamespace(),
		},
	})
	// The policy is not about the Deployment itself: 8 replicas are fine.
	if _, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, deployment("web", 8), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create 8 replicas: %v", err)
	}
	scale := func(replicas int32) error {
		_, err := e.cs.AppsV1().Deployments(e.ns).UpdateScale(e.ctx, "web", &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas},
		}, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	e.eventually("the policy refuses scaling to 6", func() (bool, error) { return scale(6) != nil, nil })
	if err := scale(3); err != nil {
		t.Errorf("scale to 3: %v", err)
	}
	out, err := runKubectl(t, c, "", "-n", e.ns, "scale", "deployment/web", "--replicas=7")
	want := fmt.Sprintf("ValidatingAdmissionPolicy '%[1]s' with binding '%[1]s' denied request: failed expression: object.kind == 'Scale' && object.spec.replicas <= 5", name)
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("kubectl scale to 7: err %v, output %q; want it to say %q", err, out, want)
	}
	if got := kubectlOrFail(t, c, "-n", e.ns, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"); got != "8" {
		t.Errorf("replicas %s after the refused scale, want 8", got)
	}
}

func kubectlOrFail(t *testing.T, c *testapiserver.Cluster, args ...string) string {
	t.Helper()
	out, err := runKubectl(t, c, "", args...)
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return out
}
