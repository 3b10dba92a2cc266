package policy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func intOrStr(v intstr.IntOrString) *intstr.IntOrString { return &v }

func TestValidate(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tests := []struct {
		name string
		spec policyv1.PodDisruptionBudgetSpec
		want []string
	}{
		{name: "min available", spec: policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: intOrStr(intstr.FromInt32(2))}},
		{name: "both set", spec: policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: intOrStr(intstr.FromInt32(1)), MaxUnavailable: intOrStr(intstr.FromInt32(1))},
			want: []string{"spec: Invalid value"}},
		{name: "negative", spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: intOrStr(intstr.FromInt32(-1))},
			want: []string{"spec.minAvailable: Invalid value"}},
		{name: "over 100%", spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: intOrStr(intstr.FromString("120%"))},
			want: []string{"spec.maxUnavailable: Invalid value"}},
		{name: "not a percent", spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: intOrStr(intstr.FromString("half"))},
			want: []string{"spec.maxUnavailable: Invalid value"}},
		{name: "bad policy", spec: policyv1.PodDisruptionBudgetSpec{UnhealthyPodEvictionPolicy: (*policyv1.UnhealthyPodEvictionPolicyType)(ptrTo("Never"))},
			want: []string{"spec.unhealthyPodEvictionPolicy: Unsupported value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pdb := &policyv1.PodDisruptionBudget{Spec: tc.spec}
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, pdb))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func ptrTo(s string) *string { return &s }

func TestStatusRulesAndTable(t *testing.T) {
	old := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: intOrStr(intstr.FromString("50%"))}}
	old.Status.DisruptionsAllowed = 5
	Strategy{}.PrepareForCreate(ctx, old)
	if old.Generation != 1 || old.Status.DisruptionsAllowed != 0 {
		t.Errorf("create: generation %d status %+v", old.Generation, old.Status)
	}
	old.Status.DisruptionsAllowed = 1

	upd := old.DeepCopy()
	upd.Spec.MinAvailable = intOrStr(intstr.FromInt32(3))
	upd.Status = policyv1.PodDisruptionBudgetStatus{}
	Strategy{}.PrepareForUpdate(ctx, upd, old)
	if upd.Generation != 2 || upd.Status.DisruptionsAllowed != 1 {
		t.Errorf("update: generation %d status %+v", upd.Generation, upd.Status)
	}

	st := old.DeepCopy()
	st.Spec.MinAvailable = nil
	st.Status.CurrentHealthy = -2
	Strategy{}.PrepareForStatusUpdate(ctx, st, old)
	if st.Spec.MinAvailable == nil {
		t.Errorf("status update changed the spec")
	}
	if diff := cmp.Diff([]string{"status.currentHealthy: Invalid value"}, errStrings(Strategy{}.ValidateStatusUpdate(ctx, st, old))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	row, err := Strategy{}.TableRow(old)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"web", "50%", "N/A", int64(1), "<unknown>"}, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestCheckEviction(t *testing.T) {
	now := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	readyPod := func(mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{"app": "web"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			}},
		}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	budget := func(name string, allowed int32, mutate ...func(*policyv1.PodDisruptionBudget)) policyv1.PodDisruptionBudget {
		b := policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Generation: 1},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: policyv1.PodDisruptionBudgetStatus{
				ObservedGeneration: 1, DisruptionsAllowed: allowed, CurrentHealthy: 3, DesiredHealthy: 3 - allowed, ExpectedPods: 3,
			},
		}
		for _, m := range mutate {
			m(&b)
		}
		return b
	}
	notReady := func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
	tests := []struct {
		name        string
		pod         *corev1.Pod
		pdbs        []policyv1.PodDisruptionBudget
		wantAllowed bool
		wantCode    int32
		wantMessage string
		wantUpdate  *policyv1.PodDisruptionBudgetStatus
	}{
		{name: "no budget", pod: readyPod(), wantAllowed: true},
		{name: "budget of other pods", pod: readyPod(), pdbs: []policyv1.PodDisruptionBudget{budget("db", 0, func(b *policyv1.PodDisruptionBudget) {
			b.Spec.Selector.MatchLabels = map[string]string{"app": "db"}
		})}, wantAllowed: true},
		{name: "empty selector covers nothing", pod: readyPod(), pdbs: []policyv1.PodDisruptionBudget{budget("all", 0, func(b *policyv1.PodDisruptionBudget) {
			b.Spec.Selector = &metav1.LabelSelector{}
		})}, wantAllowed: true},
		{name: "budget allows one", pod: readyPod(), pdbs: []policyv1.PodDisruptionBudget{budget("web", 1)}, wantAllowed: true,
			wantUpdate: &policyv1.PodDisruptionBudgetStatus{
				ObservedGeneration: 1, DisruptionsAllowed: 0, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3,
				DisruptedPods: map[string]metav1.Time{"web-1": metav1.NewTime(now)},
				Conditions: []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
					Reason: policyv1.InsufficientPodsReason, ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(now)}},
			}},
		{name: "budget exhausted", pod: readyPod(), pdbs: []policyv1.PodDisruptionBudget{budget("web", 0)},
			wantCode: http.StatusTooManyRequests, wantMessage: "Cannot evict pod as it would violate the pod's disruption budget."},
		{name: "two budgets", pod: readyPod(), pdbs: []policyv1.PodDisruptionBudget{budget("a", 1), budget("b", 1)},
			wantCode: http.StatusInternalServerError, wantMessage: "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."},
		{name: "stale budget", pod: readyPod(), pdbs: []policyv1.PodDisruptionBudget{budget("web", 1, func(b *policyv1.PodDisruptionBudget) { b.Generation = 2 })},
			wantCode: http.StatusTooManyRequests, wantMessage: "Cannot evict pod as it would violate the pod's disruption budget."},
		{name: "succeeded pod ignores budget", pod: readyPod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			pdbs: []policyv1.PodDisruptionBudget{budget("web", 0)}, wantAllowed: true},
		{name: "pending pod ignores budget", pod: readyPod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
			pdbs: []policyv1.PodDisruptionBudget{budget("web", 0)}, wantAllowed: true},
		{name: "unready pod, budget met", pod: readyPod(notReady), pdbs: []policyv1.PodDisruptionBudget{budget("web", 0)}, wantAllowed: true},
		{name: "unready pod, budget not met", pod: readyPod(notReady), pdbs: []policyv1.PodDisruptionBudget{budget("web", 0, func(b *policyv1.PodDisruptionBudget) {
			b.Status.CurrentHealthy = 2
		})}, wantCode: http.StatusTooManyRequests, wantMessage: "Cannot evict pod as it would violate the pod's disruption budget."},
		{name: "unready pod, AlwaysAllow", pod: readyPod(notReady), pdbs: []policyv1.PodDisruptionBudget{budget("web", 0, func(b *policyv1.PodDisruptionBudget) {
			b.Status.CurrentHealthy = 2
			p := policyv1.AlwaysAllow
			b.Spec.UnhealthyPodEvictionPolicy = &p
		})}, wantAllowed: true},
		{name: "negative allowance", pod: readyPod(), pdbs: []policyv1.PodDisruptionBudget{budget("web", -1)},
			wantCode: http.StatusForbidden, wantMessage: `poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before []policyv1.PodDisruptionBudget
			for i := range tc.pdbs {
				before = append(before, *tc.pdbs[i].DeepCopy())
			}
			allowed, upd, err := CheckEviction(tc.pod, tc.pdbs, now)
			if allowed != tc.wantAllowed {
				t.Errorf("allowed = %v, want %v (err %v)", allowed, tc.wantAllowed, err)
			}
			var code int32
			var msg string
			if status, ok := err.(apierrors.APIStatus); ok {
				code, msg = status.Status().Code, status.Status().Message
			} else if err != nil {
				t.Fatalf("not an API error: %v", err)
			}
			if code != tc.wantCode || msg != tc.wantMessage {
				t.Errorf("error %d %q, want %d %q", code, msg, tc.wantCode, tc.wantMessage)
			}
			var gotStatus *policyv1.PodDisruptionBudgetStatus
			if upd != nil {
				gotStatus = &upd.Status
			}
			if diff := cmp.Diff(tc.wantUpdate, gotStatus); diff != "" {
				t.Errorf("budget to write (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.pdbs); diff != "" {
				t.Errorf("CheckEviction mutated its input (-before +after):\n%s", diff)
			}
		})
	}
}
