package policy

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// MaxDisruptedPods is how many evictions a budget may record before the
// disruption controller has confirmed them; past it evictions are refused.
const MaxDisruptedPods = 2000

// Messages a client sees, as upstream words them.
const (
	MultiplePDBsMessage = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
	ViolatesBudget      = "Cannot evict pod as it would violate the pod's disruption budget."
)

// CheckEviction decides whether pod may be evicted, given the budgets of
// its namespace, as upstream's eviction subresource does:
//
//   - a pod that is terminal (Succeeded, Failed), still Pending or already
//     being deleted is evicted without consulting any budget;
//   - budgets whose selector is nil, empty or does not match the pod's
//     labels do not cover it; no covering budget means allowed;
//   - more than one covering budget is a 500 error;
//   - a budget whose status is older than its spec, or that records too
//     many unconfirmed disruptions, or has a negative allowance, refuses;
//   - a pod that is not Ready may go without spending the budget when the
//     budget's unhealthyPodEvictionPolicy is AlwaysAllow, or (IfHealthyBudget
//     or unset) when the budget is currently met;
//   - otherwise disruptionsAllowed 0 refuses with 429, and anything more
//     is spent: pdbToUpdate is a copy with disruptionsAllowed decremented
//     and the pod recorded in status.disruptedPods at now, to be written
//     (with its resourceVersion as precondition) before the pod is deleted.
//
// A non-nil err is the API error the client sees; allowed is then false.
func CheckEviction(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget, now time.Time) (allowed bool, pdbToUpdate *policyv1.PodDisruptionBudget, err error) {
	if canIgnorePDB(pod) {
		return true, nil, nil
	}
	var covering []*policyv1.PodDisruptionBudget
	for i := range pdbs {
		pdb := &pdbs[i]
		if pdb.Namespace != "" && pod.Namespace != "" && pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		covering = append(covering, pdb)
	}
	switch len(covering) {
	case 0:
		return true, nil, nil
	case 1:
	default:
		return false, nil, apierrors.NewInternalError(fmt.Errorf("%s", MultiplePDBsMessage))
	}
	pdb := covering[0]
	gr := policyv1.Resource("poddisruptionbudget")
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return false, nil, tooManyRequests(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name))
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return false, nil, apierrors.NewForbidden(gr, pdb.Name, fmt.Errorf("pdb disruptions allowed is negative"))
	}
	if len(pdb.Status.DisruptedPods) > MaxDisruptedPods {
		return false, nil, apierrors.NewForbidden(gr, pdb.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	}
	if !podReady(pod) {
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return true, nil, nil
		}
		if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
			return true, nil, nil
		}
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		return false, nil, tooManyRequests(fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently",
			pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy))
	}
	out := pdb.DeepCopy()
	out.Status.DisruptionsAllowed--
	if out.Status.DisruptionsAllowed == 0 {
		meta.SetStatusCondition(&out.Status.Conditions, metav1.Condition{
			Type:               policyv1.DisruptionAllowedCondition,
			Status:             metav1.ConditionFalse,
			Reason:             policyv1.InsufficientPodsReason,
			ObservedGeneration: out.Status.ObservedGeneration,
			LastTransitionTime: metav1.NewTime(now),
		})
	}
	if out.Status.DisruptedPods == nil {
		out.Status.DisruptedPods = map[string]metav1.Time{}
	}
	out.Status.DisruptedPods[pod.Name] = metav1.NewTime(now)
	return true, out, nil
}

// tooManyRequests is upstream's 429 refusal, with the budget's reason as a
// DisruptionBudget cause.
func tooManyRequests(cause string) error {
	err := apierrors.NewTooManyRequests(ViolatesBudget, 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: cause,
	})
	return err
}

func canIgnorePDB(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DisruptionTargetCondition is the condition upstream adds to a pod's
// status before an eviction deletes it.
func DisruptionTargetCondition(now time.Time) corev1.PodCondition {
	return corev1.PodCondition{
		Type:               corev1.DisruptionTarget,
		Status:             corev1.ConditionTrue,
		Reason:             "EvictionByEvictionAPI",
		Message:            "Eviction API: evicting",
		LastTransitionTime: metav1.NewTime(now),
	}
}
