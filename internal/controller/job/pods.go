package job

import (
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// isPodActive is true for a pod neither terminal nor being deleted.
func isPodActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// isPodTerminating is true for a pod being deleted that has not finished.
func isPodTerminating(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func isPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// onlyReplaceFailedPods is podReplacementPolicy Failed: a replacement waits
// until the old pod is fully terminated.
func onlyReplaceFailedPods(j *batchv1.Job) bool {
	return j.Spec.PodReplacementPolicy != nil && *j.Spec.PodReplacementPolicy == batchv1.Failed
}

// isPodFailed is true for a Failed pod and, unless the policy is Failed,
// for a pod being deleted that did not succeed (an orphan that never gets
// to Failed is still a failure).
func isPodFailed(p *corev1.Pod, j *batchv1.Job) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if onlyReplaceFailedPods(j) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

func filterPods(pods []*corev1.Pod, keep func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func countReady(pods []*corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if isPodReady(p) {
			n++
		}
	}
	return n
}

// sortForRemoval orders active pods in upstream's ActivePods order: the
// first goes first (unscheduled, pending, not ready, ready for less time,
// more restarts, newer).
func sortForRemoval(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if pa, pb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); pa != pb {
			return pa < pb
		}
		if isPodReady(a) != isPodReady(b) {
			return !isPodReady(a)
		}
		if isPodReady(a) {
			ta, tb := readySince(a), readySince(b)
			if !ta.Equal(&tb) {
				return tb.Before(&ta)
			}
		}
		if ra, rb := restarts(a), restarts(b); ra != rb {
			return ra > rb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return false
	})
}

func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 3
}

func readySince(p *corev1.Pod) (t metav1.Time) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime
		}
	}
	return t
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n = max(n, cs.RestartCount)
	}
	return n
}

// podsToRemove picks the active pods to delete: for an Indexed Job first
// those with a duplicate, missing or out-of-range index (keeping the best
// pod of each index), then, to reach atLeast, in removal order.
func podsToRemove(j *batchv1.Job, active []*corev1.Pod, atLeast int) []*corev1.Pod {
	var rm, left []*corev1.Pod
	if isIndexed(j) {
		byIndex := map[int][]*corev1.Pod{}
		for _, p := range active {
			ix := completionIndex(p)
			if !validIndex(j, ix) {
				rm = append(rm, p)
				continue
			}
			byIndex[ix] = append(byIndex[ix], p)
		}
		ixs := make([]int, 0, len(byIndex))
		for ix := range byIndex {
			ixs = append(ixs, ix)
		}
		sort.Ints(ixs)
		for _, ix := range ixs {
			ps := byIndex[ix]
			sortForRemoval(ps)
			rm = append(rm, ps[:len(ps)-1]...)
			left = append(left, ps[len(ps)-1])
		}
	} else {
		left = append(left, active...)
	}
	if len(rm) < atLeast {
		sortForRemoval(left)
		rm = append(rm, left[:atLeast-len(rm)]...)
	}
	return rm
}
