package queue

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

func labelsOf(pod *v1.Pod) labels.Set { return labels.Set(pod.Labels) }

// Nominator tracks the pods nominated to a node by preemption (their
// status.nominatedNodeName, or a PostFilter result not yet written). It is
// safe for concurrent use.
type Nominator struct {
	mu     sync.RWMutex
	byNode map[string][]*framework.PodInfo
	nodeOf map[string]string
	// count is len(nodeOf), read without the lock: Filter asks about every
	// node, and usually no pod is nominated.
	count atomic.Int64
}

var _ framework.PodNominator = (*Nominator)(nil)

// NewNominator returns an empty tracker.
func NewNominator() *Nominator {
	return &Nominator{byNode: map[string][]*framework.PodInfo{}, nodeOf: map[string]string{}}
}

// AddFromStatus records pod under its status.nominatedNodeName, or
// forgets it when it has none.
func (n *Nominator) AddFromStatus(pod *v1.Pod) {
	n.Add(pod, pod.Status.NominatedNodeName)
}

// Add nominates pod to node ("" removes the nomination). A bound pod is
// never nominated.
func (n *Nominator) Add(pod *v1.Pod, node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(Key(pod))
	if node == "" || pod.Spec.NodeName != "" {
		return
	}
	n.nodeOf[Key(pod)] = node
	n.byNode[node] = append(n.byNode[node], framework.MustPodInfo(pod))
	n.count.Add(1)
}

// Delete forgets pod's nomination.
func (n *Nominator) Delete(pod *v1.Pod) {
	n.mu.Lock()
	n.deleteLocked(Key(pod))
	n.mu.Unlock()
}

func (n *Nominator) deleteLocked(key string) {
	node, ok := n.nodeOf[key]
	if !ok {
		return
	}
	delete(n.nodeOf, key)
	n.count.Add(-1)
	list := n.byNode[node]
	for i, pi := range list {
		if Key(pi.Pod) == key {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(n.byNode, node)
	} else {
		n.byNode[node] = list
	}
}

// NominatedNode returns the node pod is nominated to, or "".
func (n *Nominator) NominatedNode(pod *v1.Pod) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.nodeOf[Key(pod)]
}

// NominatedPodsForNode returns a copy of the list of pods nominated to node.
func (n *Nominator) NominatedPodsForNode(node string) []*framework.PodInfo {
	if n.count.Load() == 0 {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return append([]*framework.PodInfo(nil), n.byNode[node]...)
}
