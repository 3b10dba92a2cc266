package admission

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

// mirrorPodAnnotation marks a kubelet's mirror of a static pod.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// NodeRestriction limits what a node (user system:node:<name> in
// system:nodes) may write, as upstream's plugin of that name: its own Node
// object, the status of pods bound to it, mirror pods bound to it, and its
// own Lease. The Node authorizer allows these verbs; this plugin narrows
// them to the node's own objects. Not done (yet): upstream's checks of node
// labels (node-restriction.kubernetes.io/), of PVC status, of service
// account tokens and of evictions.
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
	case gr.Group == "coordination.k8s.io" && gr.Resource == "leases":
		if a.Namespace == "kube-node-lease" && a.Name != node {
			return forbid("can only access node lease with the same name as the requesting node")
		}
	}
	return nil
}
