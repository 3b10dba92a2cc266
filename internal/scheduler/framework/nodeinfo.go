package framework

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultBindAllHostIP is the wildcard host IP of a host port.
const DefaultBindAllHostIP = "0.0.0.0"

// ProtocolPort is a host port and its protocol.
type ProtocolPort struct {
	Protocol string
	Port     int32
}

// HostPortInfo records the host ports in use: IP → protocol/port.
type HostPortInfo map[string]map[ProtocolPort]struct{}

func sanitize(ip, protocol string) (string, string) {
	if ip == "" {
		ip = DefaultBindAllHostIP
	}
	if protocol == "" {
		protocol = string(v1.ProtocolTCP)
	}
	return ip, protocol
}

// Add records a port.
func (h HostPortInfo) Add(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitize(ip, protocol)
	if h[ip] == nil {
		h[ip] = map[ProtocolPort]struct{}{}
	}
	h[ip][ProtocolPort{Protocol: protocol, Port: port}] = struct{}{}
}

// Remove forgets a port.
func (h HostPortInfo) Remove(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitize(ip, protocol)
	if m := h[ip]; m != nil {
		delete(m, ProtocolPort{Protocol: protocol, Port: port})
		if len(m) == 0 {
			delete(h, ip)
		}
	}
}

// CheckConflict reports whether the port is taken: the wildcard IP
// conflicts with the same protocol/port on any IP, and a specific IP with
// the same IP or the wildcard.
func (h HostPortInfo) CheckConflict(ip, protocol string, port int32) bool {
	if port <= 0 {
		return false
	}
	ip, protocol = sanitize(ip, protocol)
	pp := ProtocolPort{Protocol: protocol, Port: port}
	if ip == DefaultBindAllHostIP {
		for _, m := range h {
			if _, ok := m[pp]; ok {
				return true
			}
		}
		return false
	}
	for _, key := range []string{ip, DefaultBindAllHostIP} {
		if _, ok := h[key][pp]; ok {
			return true
		}
	}
	return false
}

// Len counts the ports.
func (h HostPortInfo) Len() int {
	n := 0
	for _, m := range h {
		n += len(m)
	}
	return n
}

// ImageStateSummary describes an image present on a node.
type ImageStateSummary struct {
	// Size in bytes.
	Size int64
	// NumNodes is the number of nodes that have the image.
	NumNodes int
}

// NodeInfo is a node with the pods assigned to it and the sums the plugins
// need. It is built by the cache and read-only for plugins during a cycle.
type NodeInfo struct {
	node *v1.Node

	Pods                         []*PodInfo
	PodsWithAffinity             []*PodInfo
	PodsWithRequiredAntiAffinity []*PodInfo
	UsedPorts                    HostPortInfo
	// Requested is the sum of the pods' requests.
	Requested *Resource
	// NonZeroRequested is Requested with upstream's non-zero CPU/memory
	// defaults for containers that request none (for scoring).
	NonZeroRequested *Resource
	Allocatable      *Resource
	// ImageStates are the node's images, keyed by every name of each.
	ImageStates map[string]*ImageStateSummary
	// Generation is set by the cache each time the NodeInfo changes.
	Generation int64
}

// NewNodeInfo returns a NodeInfo with the pods (and no node yet).
func NewNodeInfo(pods ...*v1.Pod) *NodeInfo {
	ni := &NodeInfo{
		UsedPorts:        HostPortInfo{},
		Requested:        &Resource{},
		NonZeroRequested: &Resource{},
		Allocatable:      &Resource{},
		ImageStates:      map[string]*ImageStateSummary{},
	}
	for _, p := range pods {
		ni.AddPod(p)
	}
	return ni
}

// Node returns the node, or nil.
func (n *NodeInfo) Node() *v1.Node {
	if n == nil {
		return nil
	}
	return n.node
}

// SetNode sets the node and its allocatable.
func (n *NodeInfo) SetNode(node *v1.Node) {
	n.node = node
	n.Allocatable = NewResource(node.Status.Allocatable)
}

// AddPod adds a pod, parsing its affinity.
func (n *NodeInfo) AddPod(pod *v1.Pod) { n.AddPodInfo(MustPodInfo(pod)) }

// AddPodInfo adds a parsed pod.
func (n *NodeInfo) AddPodInfo(pi *PodInfo) {
	n.Pods = append(n.Pods, pi)
	if len(pi.RequiredAffinityTerms)+len(pi.RequiredAntiAffinityTerms)+len(pi.PreferredAffinityTerms)+len(pi.PreferredAntiAffinityTerms) > 0 {
		n.PodsWithAffinity = append(n.PodsWithAffinity, pi)
	}
	if len(pi.RequiredAntiAffinityTerms) > 0 {
		n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, pi)
	}
	n.update(pi.Pod, 1)
}

// RemovePod removes the pod with pod's UID.
func (n *NodeInfo) RemovePod(pod *v1.Pod) error {
	uid := pod.UID
	n.PodsWithAffinity = removeUID(n.PodsWithAffinity, uid)
	n.PodsWithRequiredAntiAffinity = removeUID(n.PodsWithRequiredAntiAffinity, uid)
	for i, pi := range n.Pods {
		if pi.Pod.UID == uid {
			n.Pods = append(n.Pods[:i:i], n.Pods[i+1:]...)
			n.update(pi.Pod, -1)
			return nil
		}
	}
	return fmt.Errorf("pod %s/%s not found on node %s", pod.Namespace, pod.Name, n.nodeName())
}

func (n *NodeInfo) nodeName() string {
	if n.node == nil {
		return "<nil>"
	}
	return n.node.Name
}

func removeUID(list []*PodInfo, uid types.UID) []*PodInfo {
	for i, pi := range list {
		if pi.Pod.UID == uid {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

func (n *NodeInfo) update(pod *v1.Pod, sign int64) {
	req := PodRequests(pod, RequestsOptions{})
	nz := PodRequests(pod, RequestsOptions{NonZero: true})
	if sign > 0 {
		n.Requested.AddResource(req)
		n.NonZeroRequested.MilliCPU += nz.MilliCPU
		n.NonZeroRequested.Memory += nz.Memory
	} else {
		n.Requested.SubResource(req)
		n.NonZeroRequested.MilliCPU -= nz.MilliCPU
		n.NonZeroRequested.Memory -= nz.Memory
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if sign > 0 {
				n.UsedPorts.Add(p.HostIP, string(p.Protocol), p.HostPort)
			} else {
				n.UsedPorts.Remove(p.HostIP, string(p.Protocol), p.HostPort)
			}
		}
	}
}

// Clone returns a copy whose lists and sums may be changed without
// touching n (the pods themselves are shared).
func (n *NodeInfo) Clone() *NodeInfo {
	out := &NodeInfo{
		node:                         n.node,
		Pods:                         append([]*PodInfo(nil), n.Pods...),
		PodsWithAffinity:             append([]*PodInfo(nil), n.PodsWithAffinity...),
		PodsWithRequiredAntiAffinity: append([]*PodInfo(nil), n.PodsWithRequiredAntiAffinity...),
		UsedPorts:                    HostPortInfo{},
		Requested:                    n.Requested.Clone(),
		NonZeroRequested:             n.NonZeroRequested.Clone(),
		Allocatable:                  n.Allocatable.Clone(),
		ImageStates:                  n.ImageStates,
		Generation:                   n.Generation,
	}
	for ip, m := range n.UsedPorts {
		for pp := range m {
			out.UsedPorts.Add(ip, pp.Protocol, pp.Port)
		}
	}
	return out
}
