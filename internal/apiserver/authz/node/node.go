// Package node is the Node authorization mode: a kubelet (user
// system:node:<name> in group system:nodes) may read only what the pods
// bound to its node use — their Secrets, ConfigMaps, PersistentVolumeClaims
// and PersistentVolumes, and create tokens for their service accounts —
// plus its own Node and Lease, its pods, and what system:node allows for
// resources that are not subdivided (events, services, reviews...). Writes
// to Nodes and pod status are allowed here and narrowed to the node's own
// objects by the NodeRestriction admission plugin, as upstream.
//
// Upstream keeps a graph of pods, PVs, nodes and VolumeAttachments from
// informers. Skiff answers each question from the API server's watch cache
// instead (the pods of the object's namespace bound to the node), which
// gives the same answers without a second copy of the objects; the cost is
// a scan of one namespace's pods per secret, configmap or claim read.
package node

import (
	"context"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/rbac"
)

// Reader reads served objects (the API server's watch cache).
type Reader interface {
	List(ctx context.Context, gvr schema.GroupVersionResource, ns string, latest bool, into runtime.Object) error
	Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, live bool, into runtime.Object) error
}

// NodeLeaseNamespace holds the nodes' heartbeat Leases.
const NodeLeaseNamespace = "kube-node-lease"

// Identity returns the node name of a node user, and whether the user is
// a node at all (group system:nodes). A node user whose name lacks the
// system:node: prefix has an empty name.
func Identity(u *authn.User) (string, bool) {
	if u == nil || !u.InGroup(authn.NodesGroup) {
		return "", false
	}
	name, ok := strings.CutPrefix(u.Name, "system:node:")
	if !ok {
		return "", true
	}
	return name, true
}

// Authorizer is the Node authorization mode.
type Authorizer struct {
	r         Reader
	nodeRules []rbacv1.PolicyRule
}

var (
	_ authz.Authorizer   = (*Authorizer)(nil)
	_ authz.RuleResolver = (*Authorizer)(nil)
)

// New returns the Node authorizer reading pods and volumes through r;
// nodeRules are system:node's rules (bootstrappolicy.NodeRules).
func New(r Reader, nodeRules []rbacv1.PolicyRule) *Authorizer {
	return &Authorizer{r: r, nodeRules: nodeRules}
}

// RulesFor cannot list a node's rules (they depend on its pods): a node
// gets an incomplete answer, as upstream.
func (a *Authorizer) RulesFor(_ context.Context, u *authn.User, _ string) ([]rbacv1.PolicyRule, bool, error) {
	if _, ok := Identity(u); ok {
		return nil, true, fmt.Errorf("node authorizer does not support user rule resolution")
	}
	return nil, false, nil
}

var (
	gvrPods    = corev1.SchemeGroupVersion.WithResource("pods")
	gvrPVs     = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	gvrPVCs    = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	gvrVAs     = storagev1.SchemeGroupVersion.WithResource("volumeattachments")
	gvrPCRs    = certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests")
	noRelation = "no relationship found between node '%s' and this object"
)

// Authorize decides a node's request; anyone else gets NoOpinion.
func (a *Authorizer) Authorize(ctx context.Context, attrs authz.Attributes) (authz.Decision, string, error) {
	node, isNode := Identity(attrs.User)
	if !isNode {
		return authz.NoOpinion, "", nil
	}
	if node == "" {
		return authz.NoOpinion, fmt.Sprintf("unknown node for user %q", attrs.User.Name), nil
	}
	if attrs.ResourceRequest {
		if attrs.Name == "" && (attrs.Verb == "list" || attrs.Verb == "watch") {
			// As upstream's request info: a list or watch of one object
			// by metadata.name is a request for that object.
			attrs.Name = selectorValue(attrs.FieldSelector, "metadata.name")
		}
		gr := schema.GroupResource{Group: attrs.APIGroup, Resource: attrs.Resource}
		switch gr {
		case schema.GroupResource{Resource: "secrets"}:
			return a.readNamespaced(ctx, node, kindSecret, attrs)
		case schema.GroupResource{Resource: "configmaps"}:
			return a.readNamespaced(ctx, node, kindConfigMap, attrs)
		case schema.GroupResource{Resource: "persistentvolumeclaims"}:
			if attrs.Subresource == "status" {
				if attrs.Verb != "update" && attrs.Verb != "patch" {
					return authz.NoOpinion, "can only get/update/patch this type", nil
				}
				return a.related(ctx, node, kindPVC, attrs)
			}
			return a.get(ctx, node, kindPVC, attrs)
		case schema.GroupResource{Resource: "persistentvolumes"}:
			return a.get(ctx, node, kindPV, attrs)
		case schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}:
			return a.get(ctx, node, kindVA, attrs)
		case schema.GroupResource{Resource: "serviceaccounts"}:
			return a.serviceAccount(ctx, node, attrs)
		case schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}:
			return lease(node, attrs)
		case schema.GroupResource{Resource: "nodes"}:
			return nodeObject(node, attrs)
		case schema.GroupResource{Resource: "pods"}:
			return a.pod(ctx, node, attrs)
		case schema.GroupResource{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}:
			return a.podCertificateRequest(ctx, node, attrs)
		}
	}
	if rbac.RulesAllow(attrs, a.nodeRules...) {
		return authz.Allow, "", nil
	}
	return authz.NoOpinion, "", nil
}

func selectorValue(selector, field string) string {
	if selector == "" {
		return ""
	}
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return ""
	}
	v, _ := sel.RequiresExactMatch(field)
	return v
}

func (a *Authorizer) readNamespaced(ctx context.Context, node string, k kind, attrs authz.Attributes) (authz.Decision, string, error) {
	switch attrs.Verb {
	case "get", "list", "watch":
	default:
		return authz.NoOpinion, "can only read resources of this type", nil
	}
	if attrs.Subresource != "" {
		return authz.NoOpinion, "cannot read subresource", nil
	}
	if attrs.Namespace == "" {
		return authz.NoOpinion, "can only read namespaced object of this type", nil
	}
	return a.related(ctx, node, k, attrs)
}

func (a *Authorizer) get(ctx context.Context, node string, k kind, attrs authz.Attributes) (authz.Decision, string, error) {
	if attrs.Verb != "get" {
		return authz.NoOpinion, "can only get individual resources of this type", nil
	}
	if attrs.Subresource != "" {
		return authz.NoOpinion, "cannot get subresource", nil
	}
	return a.related(ctx, node, k, attrs)
}

func (a *Authorizer) related(ctx context.Context, node string, k kind, attrs authz.Attributes) (authz.Decision, string, error) {
	if attrs.Name == "" {
		return authz.NoOpinion, "No Object name found", nil
	}
	ok, err := a.hasPath(ctx, node, k, attrs.Namespace, attrs.Name)
	if err != nil || !ok {
		return authz.NoOpinion, fmt.Sprintf(noRelation, node), nil
	}
	return authz.Allow, "", nil
}

// serviceAccount: a node may read (podCertificate requests name the
// account's UID) and create tokens for the accounts of its pods.
func (a *Authorizer) serviceAccount(ctx context.Context, node string, attrs authz.Attributes) (authz.Decision, string, error) {
	if attrs.Verb == "get" && attrs.Subresource == "" {
		return a.readNamespaced(ctx, node, kindServiceAccount, attrs)
	}
	if attrs.Verb != "create" || attrs.Name == "" {
		return authz.NoOpinion, "can only create tokens for individual service accounts", nil
	}
	if attrs.Subresource != "token" {
		return authz.NoOpinion, "can only create token subresource of serviceaccount", nil
	}
	ok, err := a.hasPath(ctx, node, kindServiceAccount, attrs.Namespace, attrs.Name)
	if err != nil || !ok {
		return authz.NoOpinion, fmt.Sprintf(noRelation, node), nil
	}
	return authz.Allow, "", nil
}

func lease(node string, attrs authz.Attributes) (authz.Decision, string, error) {
	switch attrs.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return authz.NoOpinion, "can only get, create, update, patch, or delete a node lease", nil
	}
	if attrs.Namespace != NodeLeaseNamespace {
		return authz.NoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", NodeLeaseNamespace), nil
	}
	if attrs.Verb != "create" && attrs.Name != node {
		return authz.NoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return authz.Allow, "", nil
}

func nodeObject(node string, attrs authz.Attributes) (authz.Decision, string, error) {
	switch attrs.Subresource {
	case "":
		switch attrs.Verb {
		case "create", "update", "patch":
			return authz.Allow, "", nil // narrowed by NodeRestriction
		case "get", "list", "watch":
			switch attrs.Name {
			case node:
				return authz.Allow, "", nil
			case "":
				return authz.NoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			default:
				return authz.NoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, attrs.Name), nil
			}
		}
	case "status":
		if attrs.Verb == "update" || attrs.Verb == "patch" {
			return authz.Allow, "", nil // narrowed by NodeRestriction
		}
	}
	return authz.NoOpinion, "", nil
}

func (a *Authorizer) pod(ctx context.Context, node string, attrs authz.Attributes) (authz.Decision, string, error) {
	switch attrs.Subresource {
	case "":
		switch attrs.Verb {
		case "get":
			return a.get(ctx, node, kindPod, attrs)
		case "list", "watch":
			if selectorValue(attrs.FieldSelector, "spec.nodeName") == node {
				return authz.Allow, "", nil
			}
			if attrs.Name != "" {
				return a.related(ctx, node, kindPod, attrs)
			}
			return authz.NoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
		case "create", "delete":
			return authz.Allow, "", nil // mirror pods; narrowed by NodeRestriction
		}
	case "status":
		if attrs.Verb == "update" || attrs.Verb == "patch" {
			return authz.Allow, "", nil // narrowed by NodeRestriction
		}
	case "eviction":
		if attrs.Verb == "create" {
			return authz.Allow, "", nil // narrowed by NodeRestriction
		}
	}
	return authz.NoOpinion, "", nil
}

// podCertificateRequest is upstream's rule: a node may create requests
// (NodeRestriction narrows them to its own pods), get those naming it,
// and list or watch with a spec.nodeName=<itself> field selector; never
// the status.
func (a *Authorizer) podCertificateRequest(ctx context.Context, node string, attrs authz.Attributes) (authz.Decision, string, error) {
	if attrs.Subresource != "" {
		return authz.NoOpinion, "nodes may not access the status subresource of PodCertificateRequests", nil
	}
	switch attrs.Verb {
	case "create":
		return authz.Allow, "", nil
	case "get":
		return a.related(ctx, node, kindPCR, attrs)
	case "list", "watch":
		if selectorValue(attrs.FieldSelector, "spec.nodeName") == node {
			return authz.Allow, "", nil
		}
		return authz.NoOpinion, "can only list/watch podcertificaterequests with nodeName field selector", nil
	}
	return authz.NoOpinion, fmt.Sprintf("nodes may not %s podcertificaterequests", attrs.Verb), nil
}
