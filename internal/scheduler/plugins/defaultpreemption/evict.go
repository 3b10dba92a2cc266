package defaultpreemption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// evict marks each victim with the DisruptionTarget condition, deletes it
// and records "Preempted" on it. A victim held at Permit is rejected
// instead: it was never bound.
func (pl *DefaultPreemption) evict(ctx context.Context, c *Candidate, preemptor *v1.Pod) error {
	cs := pl.h.ClientSet()
	var mu sync.Mutex
	var errs []error
	pl.h.Parallelizer().Until(ctx, len(c.Victims), func(i int) {
		victim := c.Victims[i]
		if wp := pl.h.GetWaitingPod(victim.UID); wp != nil {
			wp.Reject(Name, "preempted")
		} else if cs != nil {
			if err := evictOne(ctx, cs, victim, preemptor); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
		}
		pl.h.EventRecorder().Eventf(victim, preemptor, v1.EventTypeNormal, "Preempted", "Preempting",
			"Preempted by pod %v on node %v", preemptor.UID, c.Node)
		klog.FromContext(ctx).V(2).Info("Preempted pod", "victim", klog.KObj(victim), "preemptor", klog.KObj(preemptor), "node", c.Node)
	})
	return errors.Join(errs...)
}

// DisruptionCondition is the condition a victim gets before it is
// deleted.
func DisruptionCondition(preemptor *v1.Pod) v1.PodCondition {
	return v1.PodCondition{
		Type:    v1.DisruptionTarget,
		Status:  v1.ConditionTrue,
		Reason:  v1.PodReasonPreemptionByScheduler,
		Message: fmt.Sprintf("%s: preempting to accommodate a higher priority pod", preemptor.Spec.SchedulerName),
	}
}

func hasCondition(pod *v1.Pod, want v1.PodCondition) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == want.Type {
			return c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message
		}
	}
	return false
}

func evictOne(ctx context.Context, cs kubernetes.Interface, victim, preemptor *v1.Pod) error {
	pods := cs.CoreV1().Pods(victim.Namespace)
	cond := DisruptionCondition(preemptor)
	if !hasCondition(victim, cond) {
		cond.LastTransitionTime = metav1.Now()
		// A strategic merge patch merges conditions by type.
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.PodCondition{cond}}})
		if err != nil {
			return fmt.Errorf("encode condition patch: %w", err)
		}
		if _, err := pods.Patch(ctx, victim.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("mark victim %s/%s: %w", victim.Namespace, victim.Name, err)
		}
	}
	uid := victim.UID
	err := pods.Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete victim %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	return nil
}

// LowerPriorityNominatedPods returns the pods nominated to node whose
// priority is lower than pod's.
func LowerPriorityNominatedPods(h framework.PodNominator, pod *v1.Pod, node string) []*v1.Pod {
	priority := framework.PodPriority(pod)
	var out []*v1.Pod
	for _, pi := range h.NominatedPodsForNode(node) {
		if pi.Pod.UID != pod.UID && framework.PodPriority(pi.Pod) < priority {
			out = append(out, pi.Pod)
		}
	}
	return out
}

// clearNominations clears the status.nominatedNodeName of pods; a failure
// is logged, not returned, as upstream does: the preemption itself
// succeeded.
func (pl *DefaultPreemption) clearNominations(ctx context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		if err := pl.nominate(ctx, p, ""); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot clear the nominated node of a lower-priority pod", "pod", klog.KObj(p))
		}
	}
}

// nominate sets (or, with node "", clears) the preemptor's
// status.nominatedNodeName.
func (pl *DefaultPreemption) nominate(ctx context.Context, pod *v1.Pod, node string) error {
	cs := pl.h.ClientSet()
	if cs == nil || pod.Status.NominatedNodeName == node {
		return nil
	}
	var value any = node
	if node == "" {
		value = nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nominatedNodeName": value}})
	if err != nil {
		return fmt.Errorf("encode nomination patch: %w", err)
	}
	if _, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("nominate node %q for pod %s/%s: %w", node, pod.Namespace, pod.Name, err)
	}
	return nil
}
