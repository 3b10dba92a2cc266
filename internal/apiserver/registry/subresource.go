package registry

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Subresource describes one subresource served beside a resource: which
// handler serves it, the kind its requests and responses carry, and its
// verbs. Discovery, OpenAPI and the handler all read this declaration.
type Subresource struct {
	// Handler is the handler that serves it.
	Handler SubresourceHandler
	// Kind is the kind of its body; zero means the parent's kind. A Kind
	// with an empty Version is a kind of the parent's group-version.
	Kind schema.GroupVersionKind
	// Verbs are the verbs it serves; others are refused with 405.
	Verbs []string
}

// SubresourceHandler names how a subresource is served.
type SubresourceHandler string

// The subresource handlers of the API server.
const (
	// HandleStatus: get, update and patch of the status, with the
	// strategy's status rules (PrepareForStatusUpdate, ValidateStatusUpdate).
	HandleStatus SubresourceHandler = "status"
	// HandleScale: the autoscaling/v1 Scale of a resource whose strategy is
	// a Scaler.
	HandleScale SubresourceHandler = "scale"
	// HandleFinalize: an update of the spec finalizers only, through the
	// strategy's Finalizer.
	HandleFinalize SubresourceHandler = "finalize"
	// HandleBinding: a core/v1 Binding that assigns a pod to a node.
	HandleBinding SubresourceHandler = "binding"
	// HandleEviction: a policy/v1 Eviction, a delete that respects
	// PodDisruptionBudgets.
	HandleEviction SubresourceHandler = "eviction"
	// HandleApproval: the approval conditions of a CertificateSigningRequest.
	HandleApproval SubresourceHandler = "approval"
	// HandleConnect: a stream to the node agent that runs the object (pods
	// log, exec, attach, portforward).
	HandleConnect SubresourceHandler = "connect"
	// HandleProxy: any HTTP request relayed to what the object names
	// (nodes/proxy to the kubelet, pods/proxy to the pod's address,
	// services/proxy to one of its endpoints), the rest of the URL path
	// included.
	HandleProxy SubresourceHandler = "proxy"
	// HandleTokenRequest: an authentication.k8s.io/v1 TokenRequest for a
	// service account, answered with a signed token (serviceaccounts/token).
	HandleTokenRequest SubresourceHandler = "tokenrequest"
)

var getPatchUpdate = []string{"get", "patch", "update"}

// StatusSubresource is the status subresource.
func StatusSubresource() Subresource {
	return Subresource{Handler: HandleStatus, Verbs: getPatchUpdate}
}

// ScaleSubresource is the scale subresource (the strategy must be a Scaler).
func ScaleSubresource() Subresource {
	return Subresource{Handler: HandleScale, Kind: schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Verbs: getPatchUpdate}
}

// FinalizeSubresource is the finalize subresource (the strategy must be a
// Finalizer).
func FinalizeSubresource() Subresource {
	return Subresource{Handler: HandleFinalize, Verbs: []string{"update"}}
}

// BindingSubresource is pods/binding.
func BindingSubresource() Subresource {
	return Subresource{Handler: HandleBinding, Kind: schema.GroupVersionKind{Kind: "Binding"}, Verbs: []string{"create"}}
}

// EvictionSubresource is pods/eviction.
func EvictionSubresource() Subresource {
	return Subresource{Handler: HandleEviction, Kind: schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, Verbs: []string{"create"}}
}

// TokenRequestSubresource is serviceaccounts/token.
func TokenRequestSubresource() Subresource {
	return Subresource{Handler: HandleTokenRequest, Kind: schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"}, Verbs: []string{"create"}}
}

// ApprovalSubresource is certificatesigningrequests/approval.
func ApprovalSubresource() Subresource {
	return Subresource{Handler: HandleApproval, Verbs: getPatchUpdate}
}

// ConnectSubresource is a stream to the node agent; kind (e.g.
// "PodExecOptions", in the parent's group-version) may be empty for the
// parent's kind.
func ConnectSubresource(kind string, verbs ...string) Subresource {
	s := Subresource{Handler: HandleConnect, Verbs: verbs}
	if kind != "" {
		s.Kind = schema.GroupVersionKind{Kind: kind}
	}
	return s
}

// ProxySubresource is the proxy subresource; kind is its options kind
// (e.g. "PodProxyOptions") in the parent's group-version. It takes GET,
// HEAD, POST, PUT, PATCH, DELETE and OPTIONS; its verbs are those the
// methods other than OPTIONS map to (OPTIONS has no verb, as upstream's).
func ProxySubresource(kind string) Subresource {
	return Subresource{Handler: HandleProxy, Kind: schema.GroupVersionKind{Kind: kind}, Verbs: []string{"create", "delete", "get", "patch", "update"}}
}

// HasSubresource says whether r serves subresource name.
func (r Resource) HasSubresource(name string) bool {
	_, ok := r.Subresources[name]
	return ok
}

// SubresourceKind is the kind the subresource name of r carries.
func (r Resource) SubresourceKind(name string) schema.GroupVersionKind {
	k := r.Subresources[name].Kind
	switch {
	case k.Kind == "":
		return r.GroupVersion.WithKind(r.Kind)
	case k.Version == "":
		return r.GroupVersion.WithKind(k.Kind)
	}
	return k
}

// DefaultVerbs are the verbs of an ordinary stored resource, sorted.
func DefaultVerbs() []string {
	return []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
}

// Verbs are the verbs r serves: its strategy's (VerbLister) or
// DefaultVerbs.
func (r Resource) Verbs() []string {
	if vl, ok := r.Strategy.(VerbLister); ok {
		return vl.Verbs()
	}
	return DefaultVerbs()
}
