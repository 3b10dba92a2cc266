package nodelifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func leaseFor(node string, renew time.Time) *coordinationv1.Lease {
	t := metav1.NewMicroTime(renew)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: LeaseNamespace},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &node, RenewTime: &t},
	}
}

func readyNode(name string, status corev1.ConditionStatus) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0)}}
	if status != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.NewTime(t0)}}
	}
	return n
}

func TestObserveAndStaleConditions(t *testing.T) {
	const grace, startup = 50 * time.Second, 60 * time.Second
	n := readyNode("n", corev1.ConditionTrue)
	h := observe(nil, n, leaseFor("n", t0), t0)
	// A renewed lease moves the probe; an unchanged one does not.
	h = observe(h, n, leaseFor("n", t0.Add(10*time.Second)), t0.Add(10*time.Second))
	h = observe(h, n, leaseFor("n", t0.Add(10*time.Second)), t0.Add(59*time.Second))
	if !h.probe.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("probe = %v, want t0+10s", h.probe)
	}
	if _, changed := staleConditions(n, h, t0.Add(60*time.Second), grace, startup); changed {
		t.Error("stale at exactly the grace period; want not yet")
	}
	conds, changed := staleConditions(n, h, t0.Add(61*time.Second), grace, startup)
	if !changed {
		t.Fatal("not stale after the grace period")
	}
	type c struct{ Type, Status, Reason, Message string }
	var got []c
	for _, x := range conds {
		got = append(got, c{string(x.Type), string(x.Status), x.Reason, x.Message})
	}
	want := []c{
		{"Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."},
		{"MemoryPressure", "Unknown", "NodeStatusNeverUpdated", "Kubelet never posted node status."},
		{"DiskPressure", "Unknown", "NodeStatusNeverUpdated", "Kubelet never posted node status."},
		{"PIDPressure", "Unknown", "NodeStatusNeverUpdated", "Kubelet never posted node status."},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	// A node that never reported gets the startup grace period from creation.
	fresh := readyNode("f", "")
	hf := observe(nil, fresh, nil, t0.Add(30*time.Second))
	if _, changed := staleConditions(fresh, hf, t0.Add(55*time.Second), grace, startup); changed {
		t.Error("new node stale before its startup grace period")
	}
	if _, changed := staleConditions(fresh, hf, t0.Add(61*time.Second), grace, startup); !changed {
		t.Error("new node not stale after its startup grace period")
	}
}

func TestTaintDecisions(t *testing.T) {
	tests := []struct {
		name         string
		node         *corev1.Node
		taints       []corev1.Taint
		wantNoExec   string
		wantSchedule []string
	}{
		{name: "ready node loses the API server's not-ready taint", node: readyNode("n", corev1.ConditionTrue),
			taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, {Key: "user", Effect: corev1.TaintEffectNoSchedule}}},
		{name: "not ready node", node: readyNode("n", corev1.ConditionFalse), wantNoExec: corev1.TaintNodeNotReady,
			wantSchedule: []string{corev1.TaintNodeNotReady}},
		{name: "unknown node", node: readyNode("n", corev1.ConditionUnknown), wantNoExec: corev1.TaintNodeUnreachable,
			wantSchedule: []string{corev1.TaintNodeUnreachable}},
		{name: "never reported node keeps not-ready NoSchedule", node: readyNode("n", ""),
			wantSchedule: []string{corev1.TaintNodeNotReady}},
		{name: "pressure conditions the kubelet reports become NoSchedule taints", node: func() *corev1.Node {
			n := readyNode("n", corev1.ConditionTrue)
			for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
				n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: corev1.ConditionTrue})
			}
			return n
		}(), wantSchedule: []string{corev1.TaintNodeDiskPressure, corev1.TaintNodeMemoryPressure, corev1.TaintNodePIDPressure}},
		{name: "relieved pressure drops its taint", node: func() *corev1.Node {
			n := readyNode("n", corev1.ConditionTrue)
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse})
			return n
		}(), taints: []corev1.Taint{{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if w := wantNoExecute(tc.node); w != nil {
				got = w.Key
			}
			if got != tc.wantNoExec {
				t.Errorf("NoExecute = %q, want %q", got, tc.wantNoExec)
			}
			taints, _ := withNoSchedule(tc.taints, wantNoSchedule(tc.node))
			var keys []string
			for _, x := range taints {
				if x.Key != "user" {
					keys = append(keys, x.Key)
				}
			}
			if diff := cmp.Diff(tc.wantSchedule, keys); diff != "" {
				t.Errorf("NoSchedule taints (-want +got):\n%s", diff)
			}
		})
	}
	// Swapping keeps one NoExecute taint; removing drops it.
	taints, _ := withNoExecute(nil, &UnreachableNoExecute, t0)
	taints, changed := withNoExecute(taints, &NotReadyNoExecute, t0)
	if !changed || len(taints) != 1 || taints[0].Key != corev1.TaintNodeNotReady || taints[0].TimeAdded == nil {
		t.Errorf("swap = %v", taints)
	}
	if taints, _ = withNoExecute(taints, nil, t0); len(taints) != 0 {
		t.Errorf("remove = %v", taints)
	}
}

func TestComputeZoneStateAndRate(t *testing.T) {
	T, F, U := corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown
	o := optionsFrom(controllercontextOptions())
	tests := []struct {
		name     string
		statuses []corev1.ConditionStatus
		want     zoneState
		wantRate float64
	}{
		{"all ready", []corev1.ConditionStatus{T, T, T}, stateNormal, 0.1},
		{"one down of two", []corev1.ConditionStatus{T, U}, stateNormal, 0.1},
		{"all down", []corev1.ConditionStatus{F, U}, stateFullDisruption, 0.1},
		{"three of five down", []corev1.ConditionStatus{T, T, F, U, U}, statePartialDisruption, 0},
		{"two of three down is not partial", []corev1.ConditionStatus{T, F, U}, stateNormal, 0.1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := computeZoneState(tc.statuses, 0.55)
			if got != tc.want {
				t.Errorf("state = %s, want %s", got, tc.want)
			}
			if r := zoneRate(got, len(tc.statuses), o); r != tc.wantRate {
				t.Errorf("rate = %v, want %v", r, tc.wantRate)
			}
		})
	}
	if r := zoneRate(statePartialDisruption, 51, o); r != 0.01 {
		t.Errorf("large partially disrupted zone rate = %v, want 0.01", r)
	}
}

func TestEvictionTime(t *testing.T) {
	secs := func(s int64) *int64 { return &s }
	added := metav1.NewTime(t0)
	addedLate := metav1.NewTime(t0.Add(900 * time.Millisecond))
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}
	now := t0.Add(10 * time.Second)
	tests := []struct {
		name      string
		tols      []corev1.Toleration
		taints    []corev1.Taint
		wantAt    time.Time
		wantEvict bool
	}{
		{name: "no toleration: at once", taints: []corev1.Taint{unreachable}, wantAt: now, wantEvict: true},
		// timeAdded has whole seconds on the wire: the clock starts at
		// the end of its second, never before the taint.
		{name: "default 300s toleration", taints: []corev1.Taint{unreachable}, wantEvict: true, wantAt: t0.Add(301 * time.Second),
			tols: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(300)}}},
		{name: "tolerates forever", taints: []corev1.Taint{unreachable},
			tols: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{name: "sub-second time added counts from the end of its second", wantEvict: true, wantAt: t0.Add(4 * time.Second),
			taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &addedLate}},
			tols:   []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(3)}}},
		{name: "shortest matching toleration wins", taints: []corev1.Taint{unreachable}, wantEvict: true, wantAt: t0.Add(6 * time.Second),
			tols: []corev1.Toleration{
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: secs(60)},
				{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(5)},
			}},
		{name: "NoSchedule taints are ignored", taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoSchedule}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			at, evict := evictionTime(tc.tols, tc.taints, now)
			if evict != tc.wantEvict || !at.Equal(tc.wantAt) {
				t.Errorf("evictionTime = %v, %v; want %v, %v", at, evict, tc.wantAt, tc.wantEvict)
			}
		})
	}
}
