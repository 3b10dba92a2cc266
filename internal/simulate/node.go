package simulate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"runtime"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node identity that a simulated node reports.
const (
	KubeletVersion          = "v1.37.2-skiff-sim"
	ContainerRuntimeVersion = "simulated://1.0"
	InstanceType            = "simulated"
	// DefaultRegion is the region of a zone whose name does not follow the
	// cloud convention <region><letter>.
	DefaultRegion = "simulated"
	// LeaseNamespace holds the node Leases.
	LeaseNamespace = corev1.NamespaceNodeLease
	// kubeletPort is the port nodes advertise (no server listens on it).
	kubeletPort = 10250
)

// nodePlan is one simulated node as the options describe it.
type nodePlan struct {
	Index      int
	Name       string
	Labels     map[string]string
	Taints     []corev1.Taint
	Capacity   corev1.ResourceList
	PodCIDR    string
	InternalIP string
}

// plan expands the (defaulted) options into one plan per node.
func plan(o Options) []nodePlan {
	base := corev1.ResourceList{
		corev1.ResourceCPU:              o.CPU,
		corev1.ResourceMemory:           o.Memory,
		corev1.ResourceEphemeralStorage: o.EphemeralStorage,
		corev1.ResourcePods:             *resourceInt(int64(o.Pods)),
	}
	templates := o.Templates
	if len(templates) == 0 {
		templates = []NodeTemplate{{Count: o.Nodes}}
	}
	var plans []nodePlan
	for _, t := range templates {
		prefix := t.NamePrefix
		if prefix == "" {
			prefix = o.NamePrefix
		}
		taints := o.Taints
		if t.Taints != nil {
			taints = t.Taints
		}
		capacity := make(corev1.ResourceList, len(base)+len(t.Capacity))
		for k, v := range base {
			capacity[k] = v.DeepCopy()
		}
		for k, v := range t.Capacity {
			capacity[k] = v.DeepCopy()
		}
		for range t.Count {
			i := len(plans)
			name := prefix + strconv.Itoa(i)
			labels := map[string]string{
				corev1.LabelHostname:           name,
				corev1.LabelOSStable:           "linux",
				corev1.LabelArchStable:         runtime.GOARCH,
				"beta.kubernetes.io/os":        "linux",
				"beta.kubernetes.io/arch":      runtime.GOARCH,
				corev1.LabelInstanceTypeStable: InstanceType,
			}
			zone, region := t.Zone, t.Region
			if zone == "" && len(o.Zones) > 0 {
				zone = o.Zones[i%len(o.Zones)]
			}
			if zone != "" {
				if region == "" {
					region = o.Region
				}
				if region == "" {
					region = RegionOf(zone)
				}
				labels[corev1.LabelTopologyZone] = zone
				labels[corev1.LabelTopologyRegion] = region
			}
			maps.Copy(labels, o.Labels)
			maps.Copy(labels, t.Labels)
			plans = append(plans, nodePlan{
				Index:      i,
				Name:       name,
				Labels:     labels,
				Taints:     taints,
				Capacity:   capacity,
				PodCIDR:    PodCIDR(i),
				InternalIP: InternalIP(i).String(),
			})
		}
	}
	return plans
}

// PodCIDR is the pod CIDR of node i: 10.(42+i/256).(i%256).0/24.
func PodCIDR(i int) string {
	return fmt.Sprintf("10.%d.%d.0/24", 42+i/256, i%256)
}

// InternalIP is the InternalIP of node i: 172.16.0.0 + i + 1.
func InternalIP(i int) netip.Addr {
	n := (uint32(172)<<24 | uint32(16)<<16) + uint32(i) + 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// RegionOf derives a region from a zone named the clouds' way: us-east-1a
// is in us-east-1. Other zone names are in DefaultRegion.
func RegionOf(zone string) string {
	n := len(zone)
	if n >= 3 && zone[n-1] >= 'a' && zone[n-1] <= 'z' && zone[n-2] >= '0' && zone[n-2] <= '9' {
		return zone[:n-1]
	}
	return DefaultRegion
}

// newNode is the Node a simulated kubelet registers.
func newNode(p nodePlan, now metav1.Time) *corev1.Node {
	id := fakeID(p.Name)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   p.Name,
			Labels: maps.Clone(p.Labels),
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:    p.PodCIDR,
			PodCIDRs:   []string{p.PodCIDR},
			ProviderID: "simulated://" + p.Name,
			Taints:     append([]corev1.Taint(nil), p.Taints...),
		},
		Status: corev1.NodeStatus{
			Capacity:    p.Capacity.DeepCopy(),
			Allocatable: p.Capacity.DeepCopy(),
			Conditions:  nodeConditions(now),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: p.InternalIP},
				{Type: corev1.NodeHostName, Address: p.Name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: kubeletPort}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               id,
				SystemUUID:              id,
				BootID:                  id,
				KernelVersion:           "simulated",
				OSImage:                 "Skiff simulated node",
				ContainerRuntimeVersion: ContainerRuntimeVersion,
				KubeletVersion:          KubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
			},
		},
	}
}

// nodeConditions are the conditions of a healthy kubelet, with upstream's
// reasons and messages, all last heard of and changed at now.
func nodeConditions(now metav1.Time) []corev1.NodeCondition {
	c := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return []corev1.NodeCondition{
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}

// heartbeatPatch is the strategic merge patch of nodes/status that a
// kubelet sends when nothing changed: every condition heard of at now, and
// Ready (again) True. Conditions merge by type.
func heartbeatPatch(now metav1.Time) ([]byte, error) {
	conds := nodeConditions(now)
	type cond struct {
		Type              corev1.NodeConditionType `json:"type"`
		Status            corev1.ConditionStatus   `json:"status"`
		Reason            string                   `json:"reason"`
		Message           string                   `json:"message"`
		LastHeartbeatTime metav1.Time              `json:"lastHeartbeatTime"`
	}
	patch := struct {
		Status struct {
			Conditions []cond `json:"conditions"`
		} `json:"status"`
	}{}
	for _, c := range conds {
		patch.Status.Conditions = append(patch.Status.Conditions, cond{c.Type, c.Status, c.Reason, c.Message, now})
	}
	return json.Marshal(patch)
}

// mergeConditions replaces the conditions of the same types in cur with
// want, keeping the old lastTransitionTime where the status is unchanged,
// and keeps conditions of other types (set by others) as they are.
func mergeConditions(cur, want []corev1.NodeCondition) []corev1.NodeCondition {
	out := make([]corev1.NodeCondition, 0, len(cur)+len(want))
	used := map[corev1.NodeConditionType]bool{}
	for _, c := range cur {
		replaced := false
		for _, w := range want {
			if w.Type != c.Type {
				continue
			}
			if w.Status == c.Status {
				w.LastTransitionTime = c.LastTransitionTime
			}
			out = append(out, w)
			used[w.Type], replaced = true, true
			break
		}
		if !replaced {
			out = append(out, c)
		}
	}
	for _, w := range want {
		if !used[w.Type] {
			out = append(out, w)
		}
	}
	return out
}

// isReady reports whether the node's Ready condition is True.
func isReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// withoutNotReadyTaint returns the taints without the not-ready:NoSchedule
// taint, and whether it was there.
func withoutNotReadyTaint(taints []corev1.Taint) ([]corev1.Taint, bool) {
	var out []corev1.Taint
	found := false
	for _, t := range taints {
		if t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule {
			found = true
			continue
		}
		out = append(out, t)
	}
	return out, found
}

// newLease is the Lease of node, renewed at now, owned by the node as a
// kubelet makes it (so that deleting the node deletes the Lease).
func newLease(node *corev1.Node, durationSeconds int32, now metav1.MicroTime) *coordinationv1.Lease {
	holder := node.Name
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: LeaseNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &durationSeconds,
			RenewTime:            &now,
		},
	}
	if node.UID != "" {
		lease.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1",
			Kind:       "Node",
			Name:       node.Name,
			UID:        node.UID,
		}}
	}
	return lease
}

func fakeID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}
