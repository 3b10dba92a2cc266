// Package testing holds builders of pods and nodes for scheduler tests,
// in the manner of upstream's st.MakePod().
package testing

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodWrapper builds a pod.
type PodWrapper struct{ v1.Pod }

// MakePod starts a pod in namespace "default" with one container.
func MakePod() *PodWrapper {
	return &PodWrapper{v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}},
	}}
}

// Obj returns the pod.
func (p *PodWrapper) Obj() *v1.Pod { return &p.Pod }

// Name sets the name (and a UID derived from it).
func (p *PodWrapper) Name(n string) *PodWrapper {
	p.Pod.Name = n
	p.UID = types.UID(p.Pod.Namespace + "/" + n)
	return p
}

// Namespace sets the namespace.
func (p *PodWrapper) Namespace(ns string) *PodWrapper {
	p.Pod.Namespace = ns
	p.UID = types.UID(ns + "/" + p.Pod.Name)
	return p
}

// Node binds the pod.
func (p *PodWrapper) Node(n string) *PodWrapper { p.Spec.NodeName = n; return p }

// Label adds a label.
func (p *PodWrapper) Label(k, v string) *PodWrapper {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[k] = v
	return p
}

// Priority sets spec.priority.
func (p *PodWrapper) Priority(v int32) *PodWrapper { p.Spec.Priority = &v; return p }

// Req sets the requests of the first container ("cpu": "1", ...).
func (p *PodWrapper) Req(r map[string]string) *PodWrapper {
	p.Spec.Containers[0].Resources.Requests = List(r)
	return p
}

// Container adds a container with requests.
func (p *PodWrapper) Container(r map[string]string) *PodWrapper {
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + string(rune('0'+len(p.Spec.Containers))), Resources: v1.ResourceRequirements{Requests: List(r)}})
	return p
}

// InitReq adds an init container with requests.
func (p *PodWrapper) InitReq(r map[string]string) *PodWrapper {
	p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "init", Resources: v1.ResourceRequirements{Requests: List(r)}})
	return p
}

// SidecarReq adds a restartable init container with requests.
func (p *PodWrapper) SidecarReq(r map[string]string) *PodWrapper {
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "sidecar", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: List(r)}})
	return p
}

// Overhead sets spec.overhead.
func (p *PodWrapper) Overhead(r map[string]string) *PodWrapper { p.Spec.Overhead = List(r); return p }

// HostPort adds a host port to the first container.
func (p *PodWrapper) HostPort(ip string, proto v1.Protocol, port int32) *PodWrapper {
	p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, v1.ContainerPort{HostIP: ip, Protocol: proto, HostPort: port, ContainerPort: port})
	return p
}

// NodeSelector sets spec.nodeSelector.
func (p *PodWrapper) NodeSelector(m map[string]string) *PodWrapper { p.Spec.NodeSelector = m; return p }

// Toleration adds a toleration.
func (p *PodWrapper) Toleration(t v1.Toleration) *PodWrapper {
	p.Spec.Tolerations = append(p.Spec.Tolerations, t)
	return p
}

func (p *PodWrapper) affinity() *v1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &v1.Affinity{}
	}
	return p.Spec.Affinity
}

// NodeAffinityIn adds a required node selector term "key in (values)".
func (p *PodWrapper) NodeAffinityIn(key string, values ...string) *PodWrapper {
	a := p.affinity()
	if a.NodeAffinity == nil {
		a.NodeAffinity = &v1.NodeAffinity{}
	}
	if a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{}
	}
	ns := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}}})
	return p
}

// PreferredNodeAffinityIn adds a preferred term "key in (values)".
func (p *PodWrapper) PreferredNodeAffinityIn(weight int32, key string, values ...string) *PodWrapper {
	a := p.affinity()
	if a.NodeAffinity == nil {
		a.NodeAffinity = &v1.NodeAffinity{}
	}
	a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		v1.PreferredSchedulingTerm{Weight: weight, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}}}})
	return p
}

// Term is a pod affinity term selecting label key=value by topologyKey.
func Term(key, value, topologyKey string) v1.PodAffinityTerm {
	return v1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
		TopologyKey:   topologyKey,
	}
}

// PodAffinity adds a required pod affinity term.
func (p *PodWrapper) PodAffinity(t v1.PodAffinityTerm) *PodWrapper {
	a := p.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &v1.PodAffinity{}
	}
	a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	return p
}

// PodAntiAffinity adds a required pod anti-affinity term.
func (p *PodWrapper) PodAntiAffinity(t v1.PodAffinityTerm) *PodWrapper {
	a := p.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &v1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	return p
}

// PreferredPodAffinity adds a preferred pod affinity term.
func (p *PodWrapper) PreferredPodAffinity(weight int32, t v1.PodAffinityTerm) *PodWrapper {
	a := p.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &v1.PodAffinity{}
	}
	a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, v1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t})
	return p
}

// PreferredPodAntiAffinity adds a preferred pod anti-affinity term.
func (p *PodWrapper) PreferredPodAntiAffinity(weight int32, t v1.PodAffinityTerm) *PodWrapper {
	a := p.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &v1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, v1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t})
	return p
}

// SpreadConstraint adds a topology spread constraint over pods labelled
// key=value.
func (p *PodWrapper) SpreadConstraint(maxSkew int32, topologyKey string, when v1.UnsatisfiableConstraintAction, minDomains *int32, key, value string) *PodWrapper {
	p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, v1.TopologySpreadConstraint{
		MaxSkew: maxSkew, TopologyKey: topologyKey, WhenUnsatisfiable: when, MinDomains: minDomains,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
	})
	return p
}

// SchedulingGates sets spec.schedulingGates.
func (p *PodWrapper) SchedulingGates(names ...string) *PodWrapper {
	for _, n := range names {
		p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, v1.PodSchedulingGate{Name: n})
	}
	return p
}

// Image sets the first container's image.
func (p *PodWrapper) Image(img string) *PodWrapper { p.Spec.Containers[0].Image = img; return p }

// Terminating marks the pod as being deleted.
func (p *PodWrapper) Terminating() *PodWrapper {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

// NodeWrapper builds a node.
type NodeWrapper struct{ v1.Node }

// MakeNode starts a node with 110 pods allocatable and its hostname label.
func MakeNode(name string) *NodeWrapper {
	n := &NodeWrapper{v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}}}}
	n.Status.Allocatable = v1.ResourceList{v1.ResourcePods: resource.MustParse("110")}
	n.Status.Capacity = n.Status.Allocatable
	return n
}

// Obj returns the node.
func (n *NodeWrapper) Obj() *v1.Node { return &n.Node }

// Label adds a label.
func (n *NodeWrapper) Label(k, v string) *NodeWrapper { n.Labels[k] = v; return n }

// Capacity sets allocatable (and capacity); "pods" defaults to 110.
func (n *NodeWrapper) Capacity(r map[string]string) *NodeWrapper {
	l := List(r)
	if _, ok := l[v1.ResourcePods]; !ok {
		l[v1.ResourcePods] = resource.MustParse("110")
	}
	n.Status.Allocatable = l
	n.Status.Capacity = l
	return n
}

// Taint adds a taint.
func (n *NodeWrapper) Taint(key, value string, effect v1.TaintEffect) *NodeWrapper {
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	return n
}

// Unschedulable sets spec.unschedulable.
func (n *NodeWrapper) Unschedulable() *NodeWrapper { n.Spec.Unschedulable = true; return n }

// Images sets the node's images (name → size in bytes).
func (n *NodeWrapper) Images(images map[string]int64) *NodeWrapper {
	for name, size := range images {
		n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: []string{name}, SizeBytes: size})
	}
	return n
}

// List parses a resource list.
func List(r map[string]string) v1.ResourceList {
	out := v1.ResourceList{}
	for k, v := range r {
		out[v1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}
