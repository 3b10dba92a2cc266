package job

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// policyMatch is what the pod failure policy says about one failed pod.
type policyMatch struct {
	// action is the matching rule's action; nil when no rule matched.
	action *batchv1.PodFailurePolicyAction
	// countFailed is false when the failure is ignored (action Ignore).
	countFailed bool
	// failJobMessage is set for action FailJob.
	failJobMessage string
}

// matchPodFailurePolicy applies the first matching rule of policy to a
// failed pod, as upstream: onExitCodes looks at terminated containers
// (then init containers) with a non-zero exit code, onPodConditions at the
// pod's conditions.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, pod *corev1.Pod) policyMatch {
	if policy == nil {
		return policyMatch{countFailed: true}
	}
	for i, rule := range policy.Rules {
		var failJobMsg string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchOnExitCodes(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			failJobMsg = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			cond := matchOnPodConditions(&pod.Status, rule.OnPodConditions)
			if cond == nil {
				continue
			}
			failJobMsg = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d",
				pod.Namespace, pod.Name, cond.Type, rule.Action, i)
		default:
			continue
		}
		action := rule.Action
		switch action {
		case batchv1.PodFailurePolicyActionIgnore:
			return policyMatch{action: &action}
		case batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionCount:
			return policyMatch{action: &action, countFailed: true}
		case batchv1.PodFailurePolicyActionFailJob:
			return policyMatch{action: &action, countFailed: true, failJobMessage: failJobMsg}
		}
	}
	return policyMatch{countFailed: true}
}

func matchOnExitCodes(st *corev1.PodStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	if cs := matchingContainer(st.ContainerStatuses, req); cs != nil {
		return cs
	}
	return matchingContainer(st.InitContainerStatuses, req)
}

func matchingContainer(statuses []corev1.ContainerStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for i := range statuses {
		cs := &statuses[i]
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		if req.ContainerName != nil && *req.ContainerName != cs.Name {
			continue
		}
		in := slices.Contains(req.Values, t.ExitCode)
		switch req.Operator {
		case batchv1.PodFailurePolicyOnExitCodesOpIn:
			if in {
				return cs
			}
		case batchv1.PodFailurePolicyOnExitCodesOpNotIn:
			if !in {
				return cs
			}
		}
	}
	return nil
}

func matchOnPodConditions(st *corev1.PodStatus, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range st.Conditions {
		for _, p := range patterns {
			if st.Conditions[i].Type == p.Type && st.Conditions[i].Status == p.Status {
				return &st.Conditions[i]
			}
		}
	}
	return nil
}

// matchSuccessPolicy reports whether the succeeded indexes meet a rule of
// the success policy, and the message upstream puts on the condition.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int, succeeded indexSet) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		msg := fmt.Sprintf("Matched rules at index %d", i)
		if rule.SucceededIndexes != nil {
			required := parseIndexSet(*rule.SucceededIndexes, completions)
			if len(required) == 0 {
				continue
			}
			got := required.overlap(succeeded)
			if got == required.total() || (rule.SucceededCount != nil && got >= int(*rule.SucceededCount)) {
				return msg, true
			}
		} else if rule.SucceededCount != nil && succeeded.total() >= int(*rule.SucceededCount) {
			return msg, true
		}
	}
	return "", false
}
