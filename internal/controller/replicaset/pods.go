package replicaset

import (
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PodDeletionCostAnnotation lets users rank pods for scale-down (lower
// first), as upstream.
const PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// IsPodActive is true for a pod that is neither terminal nor being deleted.
func IsPodActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// readyCondition returns the pod's Ready condition, or nil.
func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// IsPodReady is true when the pod's Ready condition is True.
func IsPodReady(p *corev1.Pod) bool {
	c := readyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// IsPodAvailable is true when the pod has been ready for at least
// minReadySeconds at now.
func IsPodAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(p)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	min := time.Duration(minReadySeconds) * time.Second
	return !c.LastTransitionTime.IsZero() && !c.LastTransitionTime.Add(min).After(now)
}

// podRank orders pods for deletion the way upstream does: the pod that
// sorts first is deleted first.
type podRank struct {
	pods []*corev1.Pod
	// onNode counts the active pods of the same owner on each pod's node:
	// pods doubled up on a node go first.
	onNode map[string]int
	now    time.Time
}

func (r podRank) Len() int      { return len(r.pods) }
func (r podRank) Swap(i, j int) { r.pods[i], r.pods[j] = r.pods[j], r.pods[i] }

func (r podRank) Less(i, j int) bool {
	a, b := r.pods[i], r.pods[j]
	// 1. Unassigned before assigned.
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	// 2. Pending before Unknown before Running.
	if pa, pb := phaseOrder(a.Status.Phase), phaseOrder(b.Status.Phase); pa != pb {
		return pa < pb
	}
	// 3. Not ready before ready.
	if IsPodReady(a) != IsPodReady(b) {
		return !IsPodReady(a)
	}
	// 4. Lower pod-deletion-cost first.
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	// 5. More pods of the owner on the same node first.
	if na, nb := r.onNode[a.Spec.NodeName], r.onNode[b.Spec.NodeName]; a.Spec.NodeName != "" && na != nb {
		return na > nb
	}
	// 6. Ready for less time first (on a logarithmic scale).
	if IsPodReady(a) && IsPodReady(b) {
		ta, tb := readyCondition(a).LastTransitionTime.Time, readyCondition(b).LastTransitionTime.Time
		if ba, bb := r.ageBucket(ta), r.ageBucket(tb); ba != bb {
			return ba < bb
		}
	}
	// 7. More restarts first.
	if ra, rb := restarts(a), restarts(b); ra != rb {
		return ra > rb
	}
	// 8. Newer first (on a logarithmic scale), then by name for stability.
	if ba, bb := r.ageBucket(a.CreationTimestamp.Time), r.ageBucket(b.CreationTimestamp.Time); ba != bb {
		return ba < bb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	}
	return a.Name < b.Name
}

// ageBucket is floor(log2(age in seconds)), so pods of similar age rank the
// same and other criteria decide (upstream's logarithmic scale-down). A
// zero time is the youngest of all.
func (r podRank) ageBucket(t time.Time) int {
	if t.IsZero() {
		return -2
	}
	age := r.now.Sub(t).Seconds()
	if age < 1 {
		return -1
	}
	return int(math.Floor(math.Log2(age)))
}

func phaseOrder(p corev1.PodPhase) int {
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

func deletionCost(p *corev1.Pod) int64 {
	v, ok := p.Annotations[PodDeletionCostAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return n
}

func restarts(p *corev1.Pod) int32 {
	var max int32
	for _, s := range p.Status.ContainerStatuses {
		if s.RestartCount > max {
			max = s.RestartCount
		}
	}
	return max
}
