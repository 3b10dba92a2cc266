package simulate

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func TestAddressing(t *testing.T) {
	tests := []struct {
		index        int
		cidr, hostIP string
	}{
		{0, "10.42.0.0/24", "172.16.0.1"},
		{7, "10.42.7.0/24", "172.16.0.8"},
		{255, "10.42.255.0/24", "172.16.1.0"},
		{256, "10.43.0.0/24", "172.16.1.1"},
		{4999, "10.61.135.0/24", "172.16.19.136"},
		{MaxNodes - 1, "10.255.255.0/24", "172.16.214.0"},
	}
	for _, tc := range tests {
		t.Run(tc.cidr, func(t *testing.T) {
			if got := PodCIDR(tc.index); got != tc.cidr {
				t.Errorf("PodCIDR(%d) = %s, want %s", tc.index, got, tc.cidr)
			}
			if got := InternalIP(tc.index).String(); got != tc.hostIP {
				t.Errorf("InternalIP(%d) = %s, want %s", tc.index, got, tc.hostIP)
			}
		})
	}
}

func TestRegionOf(t *testing.T) {
	for zone, want := range map[string]string{
		"us-east-1a":    "us-east-1",
		"europe-west4b": "europe-west4",
		"zone-a":        DefaultRegion,
		"a":             DefaultRegion,
		"rack1":         DefaultRegion,
	} {
		if got := RegionOf(zone); got != want {
			t.Errorf("RegionOf(%q) = %q, want %q", zone, got, want)
		}
	}
}

type planSummary struct {
	Name   string
	Zone   string
	Region string
	Extra  string // a label that is not always set
	CPU    string
	GPU    string
	Taints int
	CIDR   string
}

func summarize(plans []nodePlan) []planSummary {
	var out []planSummary
	for _, p := range plans {
		gpu := p.Capacity["example.com/gpu"]
		cpu := p.Capacity[corev1.ResourceCPU]
		out = append(out, planSummary{
			Name: p.Name, Zone: p.Labels[corev1.LabelTopologyZone], Region: p.Labels[corev1.LabelTopologyRegion],
			Extra: p.Labels["tier"], CPU: cpu.String(), GPU: gpu.String(), Taints: len(p.Taints), CIDR: p.PodCIDR,
		})
	}
	return out
}

func TestPlan(t *testing.T) {
	taint := corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name string
		opts Options
		want []planSummary
	}{
		{
			name: "defaults, no zones",
			opts: Options{Nodes: 2},
			want: []planSummary{
				{Name: "sim-node-0", CPU: "4", GPU: "0", CIDR: "10.42.0.0/24"},
				{Name: "sim-node-1", CPU: "4", GPU: "0", CIDR: "10.42.1.0/24"},
			},
		},
		{
			name: "zones round-robin, labels and taints from flags",
			opts: Options{Nodes: 3, NamePrefix: "n", Zones: []string{"z1a", "z1b"}, Labels: map[string]string{"tier": "web"}, Taints: []corev1.Taint{taint}, CPU: resource.MustParse("8")},
			want: []planSummary{
				{Name: "n0", Zone: "z1a", Region: "z1", Extra: "web", CPU: "8", GPU: "0", Taints: 1, CIDR: "10.42.0.0/24"},
				{Name: "n1", Zone: "z1b", Region: "z1", Extra: "web", CPU: "8", GPU: "0", Taints: 1, CIDR: "10.42.1.0/24"},
				{Name: "n2", Zone: "z1a", Region: "z1", Extra: "web", CPU: "8", GPU: "0", Taints: 1, CIDR: "10.42.2.0/24"},
			},
		},
		{
			name: "templates override, indexes continue across templates",
			opts: Options{
				Zones: []string{"a", "b"}, Region: "r", Labels: map[string]string{"tier": "any"}, Taints: []corev1.Taint{taint},
				Templates: []NodeTemplate{
					{Count: 1},
					{Count: 2, NamePrefix: "gpu-", Zone: "c", Labels: map[string]string{"tier": "gpu"}, Taints: []corev1.Taint{},
						Capacity: corev1.ResourceList{"example.com/gpu": resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("32")}},
				},
			},
			want: []planSummary{
				{Name: "sim-node-0", Zone: "a", Region: "r", Extra: "any", CPU: "4", GPU: "0", Taints: 1, CIDR: "10.42.0.0/24"},
				{Name: "gpu-1", Zone: "c", Region: "r", Extra: "gpu", CPU: "32", GPU: "2", Taints: 0, CIDR: "10.42.1.0/24"},
				{Name: "gpu-2", Zone: "c", Region: "r", Extra: "gpu", CPU: "32", GPU: "2", Taints: 0, CIDR: "10.42.2.0/24"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.opts.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := summarize(plan(tc.opts.withDefaults()))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string // substrings of the error; none means valid
	}{
		{name: "valid", opts: Options{Nodes: 5000}},
		{name: "no nodes", opts: Options{}, want: []string{"at least one node is needed"}},
		{name: "too many nodes", opts: Options{Nodes: MaxNodes + 1}, want: []string{"more than the 54784"}},
		{name: "bad prefix", opts: Options{Nodes: 1, NamePrefix: "Sim_"}, want: []string{`name prefix "Sim_" does not make valid node names`}},
		{name: "bad label and taint", opts: Options{Nodes: 1, Labels: map[string]string{"a b": "c"}, Taints: []corev1.Taint{{Key: "k", Effect: "Sometimes"}}},
			want: []string{"labels: Invalid value", `taint 0 effect "Sometimes"`}},
		{name: "renew interval not shorter than the lease", opts: Options{Nodes: 1, LeaseDuration: 10 * time.Second, LeaseRenewInterval: 10 * time.Second},
			want: []string{"lease renew interval 10s must be positive and shorter than the lease duration 10s"}},
		{name: "template count", opts: Options{Templates: []NodeTemplate{{Count: 0}}}, want: []string{"node template 0: count must be at least 1", "at least one node"}},
		{name: "negative capacity", opts: Options{Nodes: 1, CPU: resource.MustParse("-1")}, want: []string{"cpu must not be negative"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestHeartbeatPatch(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	node := newNode(nodePlan{Name: "n", PodCIDR: "10.42.0.0/24", InternalIP: "172.16.0.1"}, start)
	later := metav1.NewTime(start.Add(time.Minute))
	patch, err := heartbeatPatch(later)
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := json.Marshal(node)
	out, err := strategicpatch.StrategicMergePatch(cur, patch, &corev1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Node
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := node.DeepCopy()
	for i := range want.Status.Conditions {
		want.Status.Conditions[i].LastHeartbeatTime = later // transition time unchanged
	}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Errorf("patched node (-want +got):\n%s", diff)
	}
}

func TestWithoutNotReadyTaint(t *testing.T) {
	keep := corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}
	notReadyExec := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
	got, found := withoutNotReadyTaint([]corev1.Taint{keep, {Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, notReadyExec})
	if !found {
		t.Error("found = false")
	}
	// Only the NoSchedule taint admission adds is ours to remove.
	if diff := cmp.Diff([]corev1.Taint{keep, notReadyExec}, got); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if _, found := withoutNotReadyTaint([]corev1.Taint{keep}); found {
		t.Error("found = true for a node without the taint")
	}
}

func TestMergeConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	cur := nodeConditions(t0)
	cur[3].Status, cur[3].Reason = corev1.ConditionUnknown, "NodeStatusUnknown" // Ready
	other := corev1.NodeCondition{Type: "NetworkUnavailable", Status: corev1.ConditionFalse, LastTransitionTime: t0}
	cur = append(cur, other)

	got := mergeConditions(cur, nodeConditions(t1))
	want := nodeConditions(t1)
	for i := range 3 { // unchanged pressure conditions keep their transition
		want[i].LastTransitionTime = t0
	}
	want = append(want, other)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mergeConditions (-want +got):\n%s", diff)
	}
}

func TestDefaultWorkers(t *testing.T) {
	tests := []struct {
		opts Options
		want int
	}{
		{Options{Nodes: 20}, MinWorkers},
		{Options{Nodes: 5000}, 50},
		{Options{Templates: []NodeTemplate{{Count: 3000}, {Count: 3000}}}, 60},
		{Options{Nodes: 50000}, MaxWorkers},
		{Options{Nodes: 50000, Workers: 4}, 4},
	}
	for _, tc := range tests {
		if got := tc.opts.withDefaults().Workers; got != tc.want {
			t.Errorf("workers for %d nodes = %d, want %d", tc.opts.totalNodes(), got, tc.want)
		}
	}
}
