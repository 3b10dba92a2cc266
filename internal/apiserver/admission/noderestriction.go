package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

// mirrorPodAnnotation marks a kubelet's mirror of a static pod.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// NodeRestriction limits what a node (user system:node:<name> in
// system:nodes) may write, as upstream's plugin of that name: its own Node
// object, the status of pods bound to it, mirror pods bound to it, and its
// own Lease. The Node authorizer allows these verbs; this plugin narrows
// them to the node's own objects. On its Node a node may not set or change
// labels under node-restriction.kubernetes.io/ nor kubernetes.io/ and
// k8s.io/ labels other than the kubelet's own (NodeLabelAllowed), and may
// not change its taints, owner references or configSource, so a node
// cannot steer workloads to itself. The node rule for service-account
// tokens is checked by TokenRequest (registry/tokenrequest). Not done (yet):
// upstream's checks of PVC status and of evictions.
type NodeRestriction struct{}

var _ Validator = NodeRestriction{}

// NewNodeRestriction returns the plugin.
func NewNodeRestriction() NodeRestriction { return NodeRestriction{} }

// Name is the upstream name.
func (NodeRestriction) Name() string { return "NodeRestriction" }

// Handles creates, updates and deletes.
func (NodeRestriction) Handles(op Operation) bool { return op != Connect }

func nodeName(u *authn.User) (string, bool) {
	if u == nil || !u.InGroup(authn.NodesGroup) {
		return "", false
	}
	return strings.TrimPrefix(u.Name, "system:node:"), true
}

// Validate refuses a node's write to another node's objects.
func (NodeRestriction) Validate(ctx context.Context, a *Attributes) error {
	node, ok := nodeName(a.User)
	if !ok {
		return nil
	}
	gr := a.Resource.GroupResource()
	forbid := func(format string, args ...any) error {
		return apierrors.NewForbidden(gr, a.Name, fmt.Errorf(format, args...))
	}
	if node == "" || node == a.User.Name {
		return forbid("could not determine node from user %q", a.User.Name)
	}
	switch {
	case gr.Group == "" && gr.Resource == "pods":
		switch a.Subresource {
		case "":
			switch a.Operation {
			case Create:
				pod, _ := a.Object.(*corev1.Pod)
				if pod == nil {
					return nil
				}
				if _, mirror := pod.Annotations[mirrorPodAnnotation]; !mirror {
					return forbid("pod does not have %q annotation, node %q can only create mirror pods", mirrorPodAnnotation, node)
				}
				if pod.Spec.NodeName != node {
					return forbid("node %q can only create pods with spec.nodeName set to itself", node)
				}
			case Delete:
				if pod, _ := a.OldObject.(*corev1.Pod); pod != nil && pod.Spec.NodeName != node {
					return forbid("node %q can only delete pods with spec.nodeName set to itself", node)
				}
			}
		case "status":
			if pod, _ := a.OldObject.(*corev1.Pod); pod != nil && pod.Spec.NodeName != node {
				return forbid("node %q can only update pod status for pods with spec.nodeName set to itself", node)
			}
		}
	case gr.Group == "" && gr.Resource == "nodes":
		if a.Name != node {
			return forbid("node %q is not allowed to modify node %q", node, a.Name)
		}
		return validateOwnNode(node, a, forbid)
	case gr.Group == "coordination.k8s.io" && gr.Resource == "leases":
		if a.Namespace == "kube-node-lease" && a.Name != node {
			return forbid("can only access node lease with the same name as the requesting node")
		}
	}
	return nil
}

// validateOwnNode is upstream's check of a node's write to its own Node.
func validateOwnNode(node string, a *Attributes, forbid func(string, ...any) error) error {
	obj, _ := a.Object.(*corev1.Node)
	if obj == nil {
		return nil
	}
	switch a.Operation {
	case Create:
		if obj.Spec.ConfigSource != nil {
			return forbid("node %q is not allowed to create pods with a non-nil configSource", node)
		}
		if bad := forbiddenNodeLabels(obj.Labels, nil); len(bad) > 0 {
			return forbid("node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
	case Update:
		old, _ := a.OldObject.(*corev1.Node)
		if old == nil {
			return nil
		}
		if obj.Spec.ConfigSource != nil && !equality.Semantic.DeepEqual(obj.Spec.ConfigSource, old.Spec.ConfigSource) {
			return forbid("node %q is not allowed to update configSource to a new non-nil configSource", node)
		}
		if !equality.Semantic.DeepEqual(obj.Spec.Taints, old.Spec.Taints) {
			return forbid("node %q is not allowed to modify taints", node)
		}
		if !equality.Semantic.DeepEqual(obj.OwnerReferences, old.OwnerReferences) {
			return forbid("node %q is not allowed to modify ownerReferences", node)
		}
		if bad := forbiddenNodeLabels(obj.Labels, old.Labels); len(bad) > 0 {
			return forbid("is not allowed to modify labels: %s", strings.Join(bad, ", "))
		}
	}
	return nil
}

// kubeletLabels are the kubernetes.io labels a kubelet sets on its own
// Node (upstream's k8s.io/kubelet well-known labels).
var kubeletLabels = []string{
	corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
	corev1.LabelOSStable, corev1.LabelArchStable,
	"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
}

// NodeLabelAllowed reports whether a node may set label key on its own
// Node: not under node-restriction.kubernetes.io, and under kubernetes.io
// or k8s.io (or their subdomains) only the kubelet's labels and those
// under kubelet.kubernetes.io and node.kubernetes.io. `skiff agent
// --node-labels` is checked with it before the agent starts, as
// upstream's kubelet checks its flag.
func NodeLabelAllowed(key string) bool {
	ns, _, found := strings.Cut(key, "/")
	if !found {
		return true
	}
	under := func(domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }
	if under(corev1.LabelNamespaceNodeRestriction) {
		return false
	}
	if !under("kubernetes.io") && !under("k8s.io") {
		return true
	}
	return slices.Contains(kubeletLabels, key) || under(corev1.LabelNamespaceSuffixKubelet) || under(corev1.LabelNamespaceSuffixNode)
}

// forbiddenNodeLabels are the keys added, removed or changed between old
// and labels that a node may not touch, sorted.
func forbiddenNodeLabels(labels, old map[string]string) []string {
	var bad []string
	check := func(k string) {
		if !NodeLabelAllowed(k) && !slices.Contains(bad, k) {
			bad = append(bad, k)
		}
	}
	for k, v := range labels {
		if ov, ok := old[k]; !ok || ov != v {
			check(k)
		}
	}
	for k := range old {
		if _, ok := labels[k]; !ok {
			check(k)
		}
	}
	slices.Sort(bad)
	return bad
}
