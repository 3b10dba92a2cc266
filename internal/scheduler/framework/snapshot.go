package framework

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// NodeInfoLister lists the nodes of a snapshot.
type NodeInfoLister interface {
	// List returns every node, in a stable order.
	List() []*NodeInfo
	// HavePodsWithAffinityList returns the nodes with pods that have any
	// (anti-)affinity term.
	HavePodsWithAffinityList() []*NodeInfo
	// HavePodsWithRequiredAntiAffinityList returns the nodes with pods that
	// have required anti-affinity terms.
	HavePodsWithRequiredAntiAffinityList() []*NodeInfo
	// Get returns one node.
	Get(name string) (*NodeInfo, error)
}

// SharedLister is what the framework shares with plugins for a cycle.
type SharedLister interface {
	NodeInfos() NodeInfoLister
}

// Snapshot is an immutable view of the cluster for one scheduling cycle.
type Snapshot struct {
	byName       map[string]*NodeInfo
	list         []*NodeInfo
	withAffinity []*NodeInfo
	withAnti     []*NodeInfo
}

var _ SharedLister = (*Snapshot)(nil)

// NewSnapshot builds a snapshot from nodes and the pods bound to them
// (pods on unknown nodes are ignored); image states are summed over nodes.
func NewSnapshot(pods []*v1.Pod, nodes []*v1.Node) *Snapshot {
	infos := make(map[string]*NodeInfo, len(nodes))
	list := make([]*NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		ni := NewNodeInfo()
		ni.SetNode(n)
		infos[n.Name] = ni
		list = append(list, ni)
	}
	for _, p := range pods {
		if ni, ok := infos[p.Spec.NodeName]; ok {
			ni.AddPod(p)
		}
	}
	SetImageStates(list)
	return NewSnapshotFromNodeInfos(list)
}

// SetImageStates fills each NodeInfo's ImageStates from its node's status,
// counting on how many of the nodes each image is.
func SetImageStates(list []*NodeInfo) {
	count := map[string]int{}
	for _, ni := range list {
		for _, img := range ni.Node().Status.Images {
			for _, name := range img.Names {
				count[name]++
			}
		}
	}
	for _, ni := range list {
		states := map[string]*ImageStateSummary{}
		for _, img := range ni.Node().Status.Images {
			for _, name := range img.Names {
				states[name] = &ImageStateSummary{Size: img.SizeBytes, NumNodes: count[name]}
			}
		}
		ni.ImageStates = states
	}
}

// NewSnapshotFromNodeInfos wraps NodeInfos (which must all have a node).
func NewSnapshotFromNodeInfos(list []*NodeInfo) *Snapshot {
	s := &Snapshot{byName: make(map[string]*NodeInfo, len(list)), list: list}
	for _, ni := range list {
		s.byName[ni.Node().Name] = ni
		if len(ni.PodsWithAffinity) > 0 {
			s.withAffinity = append(s.withAffinity, ni)
		}
		if len(ni.PodsWithRequiredAntiAffinity) > 0 {
			s.withAnti = append(s.withAnti, ni)
		}
	}
	return s
}

// NodeInfos returns the snapshot as a NodeInfoLister.
func (s *Snapshot) NodeInfos() NodeInfoLister { return s }

// NumNodes counts the nodes.
func (s *Snapshot) NumNodes() int { return len(s.list) }

// List implements NodeInfoLister.
func (s *Snapshot) List() []*NodeInfo { return s.list }

// HavePodsWithAffinityList implements NodeInfoLister.
func (s *Snapshot) HavePodsWithAffinityList() []*NodeInfo { return s.withAffinity }

// HavePodsWithRequiredAntiAffinityList implements NodeInfoLister.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() []*NodeInfo { return s.withAnti }

// Get implements NodeInfoLister.
func (s *Snapshot) Get(name string) (*NodeInfo, error) {
	if ni, ok := s.byName[name]; ok {
		return ni, nil
	}
	return nil, fmt.Errorf("nodeinfo %q not found", name)
}
