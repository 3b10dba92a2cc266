package scheduler_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// workload is one scheduler_perf-shaped case: nodes, pods placed before the
// measurement, and the measured pods.
type workload struct {
	name string
	// nodes simulated, spread over zones when set.
	nodes int
	zones []string
	// nodeCPU is each node's cpu (default 4; memory is 32Gi, pods 110, as
	// upstream's node-default.yaml).
	nodeCPU string
	// initPods are created and bound before the measurement.
	initPods int
	initPod  func(i int) *v1.Pod
	// measuredPods are timed from the first create until all are bound.
	measuredPods int
	measuredPod  func(i int) *v1.Pod
	// priorityClasses to create first (name → value).
	priorityClasses map[string]int32
}

// Zones of the workloads that spread, as upstream's zone labels.
var benchZones = []string{"zone1", "zone2", "zone3"}

// workloads returns the workloads; scale divides the pod and node counts
// (1 for the recorded sizes).
func workloads(scale int) []workload {
	s := func(n int) int { return max(n/scale, 1) }
	return []workload{
		{
			// SchedulingBasic/5000Nodes_10000Pods.
			name: "SchedulingBasic", nodes: s(5000),
			initPods: s(1000), initPod: basicPod("init"),
			measuredPods: s(10000), measuredPod: basicPod("measured"),
		},
		{
			// SchedulingPodAntiAffinity/5000Nodes: pods that must not share
			// a node with another pod of their color.
			name: "PodAntiAffinity", nodes: s(5000),
			initPods: s(1000), initPod: antiAffinityPod("init", "green"),
			measuredPods: s(1000), measuredPod: antiAffinityPod("measured", "green"),
		},
		{
			// TopologySpreading/5000Nodes: spread by zone with maxSkew 5.
			name: "TopologySpreading", nodes: s(5000), zones: benchZones,
			initPods: s(5000), initPod: basicPod("init"),
			measuredPods: s(2000), measuredPod: spreadPod("measured"),
		},
		{
			// SchedulingPreferredNodeAffinity: every pod prefers zone1.
			name: "PreferredNodeAffinity", nodes: s(5000), zones: benchZones,
			initPods: s(1000), initPod: basicPod("init"),
			measuredPods: s(5000), measuredPod: preferredAffinityPod("measured"),
		},
		{
			// PreemptionBasic/500Nodes: 4 low-priority pods of 1 cpu fill
			// each node; each high-priority pod of 3 cpus evicts 3.
			name: "Preemption", nodes: s(500), nodeCPU: "4",
			initPods: s(2000), initPod: priorityPod("low", "1"),
			measuredPods: s(500), measuredPod: priorityPod("high", "3"),
			priorityClasses: map[string]int32{"bench-low": 1, "bench-high": 10},
		},
	}
}

// basicPod is upstream's pod-default.yaml: one pause container requesting
// 100m cpu and 500Mi memory.
func basicPod(prefix string) func(int) *v1.Pod {
	return func(i int) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: v1.PodSpec{Containers: []v1.Container{{
				Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")},
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")},
				},
			}}},
		}
	}
}

func antiAffinityPod(prefix, color string) func(int) *v1.Pod {
	base := basicPod(prefix)
	return func(i int) *v1.Pod {
		p := base(i)
		p.Labels = map[string]string{"color": color}
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": color}},
				TopologyKey:   v1.LabelHostname,
			}},
		}}
		return p
	}
}

func spreadPod(prefix string) func(int) *v1.Pod {
	base := basicPod(prefix)
	return func(i int) *v1.Pod {
		p := base(i)
		p.Labels = map[string]string{"color": "blue"}
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
			MaxSkew: 5, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}},
		}}
		return p
	}
}

func preferredAffinityPod(prefix string) func(int) *v1.Pod {
	base := basicPod(prefix)
	return func(i int) *v1.Pod {
		p := base(i)
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
				Weight: 1,
				Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{"zone1"},
				}}},
			}},
		}}
		return p
	}
}

// priorityPod requests cpu and names the PriorityClass "bench-<prefix>"
// (made by the runner); admission fills spec.priority.
func priorityPod(prefix, cpu string) func(int) *v1.Pod {
	base := basicPod(prefix)
	return func(i int) *v1.Pod {
		p := base(i)
		r := &p.Spec.Containers[0].Resources
		r.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
		r.Limits[v1.ResourceCPU] = resource.MustParse(cpu)
		p.Spec.PriorityClassName = "bench-" + prefix
		return p
	}
}
