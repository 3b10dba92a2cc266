package nodelifecycle

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Taints the controller manages.
var (
	UnreachableNoExecute = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	NotReadyNoExecute    = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
)

// noScheduleByCondition maps a condition and status to the NoSchedule
// taint it brings, as upstream's node lifecycle controller does.
var noScheduleByCondition = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeReady:              {corev1.ConditionFalse: corev1.TaintNodeNotReady, corev1.ConditionUnknown: corev1.TaintNodeUnreachable},
	corev1.NodeMemoryPressure:     {corev1.ConditionTrue: corev1.TaintNodeMemoryPressure},
	corev1.NodeDiskPressure:       {corev1.ConditionTrue: corev1.TaintNodeDiskPressure},
	corev1.NodeNetworkUnavailable: {corev1.ConditionTrue: corev1.TaintNodeNetworkUnavailable},
	corev1.NodePIDPressure:        {corev1.ConditionTrue: corev1.TaintNodePIDPressure},
}

// managedNoSchedule are the NoSchedule taint keys this controller adds
// and removes.
var managedNoSchedule = map[string]bool{
	corev1.TaintNodeNotReady: true, corev1.TaintNodeUnreachable: true, corev1.TaintNodeMemoryPressure: true,
	corev1.TaintNodeDiskPressure: true, corev1.TaintNodeNetworkUnavailable: true, corev1.TaintNodePIDPressure: true,
	corev1.TaintNodeUnschedulable: true,
}

// health is what the controller remembers of a node between passes.
type health struct {
	// probe is when the controller last saw the node alive (its own
	// clock, so that node clock skew does not matter).
	probe time.Time
	// renew and heartbeat are the last observed lease renewTime and Ready
	// lastHeartbeatTime: a change of either is a heartbeat.
	renew     time.Time
	heartbeat time.Time
	// ready is the Ready status seen at the last pass.
	ready corev1.ConditionStatus
}

// readyCondition returns the node's Ready condition or nil.
func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// readyStatus is the node's Ready status, Unknown when missing.
func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	if c := readyCondition(node); c != nil {
		return c.Status
	}
	return corev1.ConditionUnknown
}

// observe updates the health record of node from its status and lease.
// A new record starts its probe at node creation when the node never
// reported, else now.
func observe(prev *health, node *corev1.Node, lease *coordinationv1.Lease, now time.Time) *health {
	var renew, heartbeat time.Time
	if lease != nil && lease.Spec.RenewTime != nil {
		renew = lease.Spec.RenewTime.Time
	}
	rc := readyCondition(node)
	if rc != nil {
		heartbeat = rc.LastHeartbeatTime.Time
	}
	if prev == nil {
		h := &health{probe: now, renew: renew, heartbeat: heartbeat, ready: readyStatus(node)}
		if rc == nil {
			h.probe = node.CreationTimestamp.Time
		}
		return h
	}
	h := *prev
	if !renew.Equal(prev.renew) || !heartbeat.Equal(prev.heartbeat) {
		h.probe = now
		h.renew, h.heartbeat = renew, heartbeat
	}
	return &h
}

// staleConditions returns the node's conditions marked Unknown when the
// node has not been heard from for its grace period (the startup grace
// period when it never posted Ready), and whether anything changed.
func staleConditions(node *corev1.Node, h *health, now time.Time, grace, startupGrace time.Duration) ([]corev1.NodeCondition, bool) {
	g := grace
	if readyCondition(node) == nil {
		g = startupGrace
	}
	if !now.After(h.probe.Add(g)) {
		return nil, false
	}
	conds := append([]corev1.NodeCondition(nil), node.Status.Conditions...)
	changed := false
	t := metav1.NewTime(now)
	for _, typ := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		i := -1
		for j := range conds {
			if conds[j].Type == typ {
				i = j
			}
		}
		if i < 0 {
			conds = append(conds, corev1.NodeCondition{
				Type: typ, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.",
				LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: t,
			})
			changed = true
			continue
		}
		if conds[i].Status != corev1.ConditionUnknown {
			conds[i].Status = corev1.ConditionUnknown
			conds[i].Reason = "NodeStatusUnknown"
			conds[i].Message = "Kubelet stopped posting node status."
			conds[i].LastTransitionTime = t
			changed = true
		}
	}
	return conds, changed
}

// wantNoExecute is the NoExecute taint the node's Ready status calls
// for: not-ready when False, unreachable when Unknown, none when True.
func wantNoExecute(node *corev1.Node) *corev1.Taint {
	switch readyStatus(node) {
	case corev1.ConditionFalse:
		t := NotReadyNoExecute
		return &t
	case corev1.ConditionUnknown:
		if readyCondition(node) == nil {
			return nil // not reported yet: the startup grace period decides
		}
		t := UnreachableNoExecute
		return &t
	}
	return nil
}

// wantNoSchedule is the set of managed NoSchedule taint keys the node's
// conditions and spec.unschedulable call for. A node that never reported
// Ready keeps not-ready (added by the API server on create).
func wantNoSchedule(node *corev1.Node) map[string]bool {
	want := map[string]bool{}
	if readyCondition(node) == nil {
		want[corev1.TaintNodeNotReady] = true
	}
	for _, c := range node.Status.Conditions {
		if key, ok := noScheduleByCondition[c.Type][c.Status]; ok {
			want[key] = true
		}
	}
	if node.Spec.Unschedulable {
		want[corev1.TaintNodeUnschedulable] = true
	}
	return want
}

// withNoSchedule returns the node's taints with the managed NoSchedule
// taints set to want, and whether they changed.
func withNoSchedule(taints []corev1.Taint, want map[string]bool) ([]corev1.Taint, bool) {
	var out []corev1.Taint
	have := map[string]bool{}
	changed := false
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoSchedule && managedNoSchedule[t.Key] {
			if !want[t.Key] {
				changed = true
				continue
			}
			have[t.Key] = true
		}
		out = append(out, t)
	}
	for _, key := range sortedKeys(want) {
		if !have[key] {
			out = append(out, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
			changed = true
		}
	}
	return out, changed
}

// withNoExecute returns the taints with the controller's NoExecute taint
// set to want (nil removes both), keeping the time of one already there.
func withNoExecute(taints []corev1.Taint, want *corev1.Taint, now time.Time) ([]corev1.Taint, bool) {
	var out []corev1.Taint
	changed, kept := false, false
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady) {
			if want == nil || t.Key != want.Key || kept {
				changed = true
				continue
			}
			kept = true
		}
		out = append(out, t)
	}
	if want != nil && !kept {
		t := *want
		at := metav1.NewTime(now)
		t.TimeAdded = &at
		out = append(out, t)
		changed = true
	}
	return out, changed
}

// hasNoExecute says whether the node carries the taint want.
func hasNoExecute(node *corev1.Node, want *corev1.Taint) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == want.Key && t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// zoneState is a zone's health.
type zoneState string

const (
	stateNormal            zoneState = "Normal"
	statePartialDisruption zoneState = "PartialDisruption"
	stateFullDisruption    zoneState = "FullDisruption"
)

// computeZoneState classifies a zone from its nodes' Ready statuses: full
// disruption when none is ready, partial when more than two and at least
// threshold of them are not ready.
func computeZoneState(statuses []corev1.ConditionStatus, threshold float64) zoneState {
	ready, notReady := 0, 0
	for _, s := range statuses {
		if s == corev1.ConditionTrue {
			ready++
		} else {
			notReady++
		}
	}
	switch {
	case ready == 0 && notReady > 0:
		return stateFullDisruption
	case notReady > 2 && float64(notReady)/float64(ready+notReady) >= threshold:
		return statePartialDisruption
	}
	return stateNormal
}

// zoneRate is how many nodes a second a zone in state s of size nodes may
// have tainted NoExecute.
func zoneRate(s zoneState, size int, o Options) float64 {
	switch s {
	case statePartialDisruption:
		if size > o.LargeClusterSizeThreshold {
			return o.SecondaryNodeEvictionRate
		}
		return 0
	default:
		return o.NodeEvictionRate
	}
}

// evictionTime decides when a pod on a node with the given NoExecute
// taints must go: evict is false when it tolerates them all forever;
// otherwise at is the earliest deadline (each taint's time added plus the
// shortest tolerationSeconds of the tolerations matching it; at once for
// a taint it does not tolerate).
//
// timeAdded travels with whole-second precision (RFC 3339), so a taint
// stamped T was added somewhere in [T, T+1s): its clock starts at T+1s,
// the earliest time that is surely not before the taint, so that a pod is
// never evicted before its tolerationSeconds have passed (upstream counts
// from when its taint manager sees the taint, later still).
func evictionTime(tolerations []corev1.Toleration, taints []corev1.Taint, now time.Time) (at time.Time, evict bool) {
	logger := klog.Background()
	for i := range taints {
		taint := &taints[i]
		if taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		start := now
		if taint.TimeAdded != nil {
			start = taint.TimeAdded.Time.Truncate(time.Second).Add(time.Second)
		}
		matched, forever := false, false
		var min time.Duration
		for j := range tolerations {
			tol := &tolerations[j]
			if !tol.ToleratesTaint(logger, taint, false) {
				continue
			}
			if tol.TolerationSeconds == nil {
				forever = true
				continue
			}
			d := time.Duration(*tol.TolerationSeconds) * time.Second
			if d < 0 {
				d = 0
			}
			if !matched || d < min {
				min = d
			}
			matched = true
		}
		var deadline time.Time
		switch {
		case matched:
			deadline = start.Add(min)
		case forever:
			continue
		default:
			deadline = now
		}
		if !evict || deadline.Before(at) {
			at, evict = deadline, true
		}
	}
	return at, evict
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
