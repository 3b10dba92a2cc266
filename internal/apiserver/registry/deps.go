package registry

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/resourcemetrics"
)

// Deps are what the built-in resources need from the server that serves
// them. Every API group's Resources takes them; a zero field means the
// resource goes without (tests build resources with zero Deps).
type Deps struct {
	// Services hands out ClusterIPs and NodePorts (core/v1 services).
	Services *allocator.Services
	// Reader reads stored objects of other resources, e.g. the
	// PriorityClasses for the single global default rule.
	Reader Reader
	// Authorizer answers the self reviews (kubectl auth can-i).
	Authorizer authz.Authorizer
	// CheckEtcd reports the health of etcd (componentstatuses).
	CheckEtcd func(ctx context.Context) error
	// CheckComponent reports the health of the scheduler or the
	// controller manager (componentstatuses).
	CheckComponent func(ctx context.Context, name string) error
	// BindPod assigns the pod b names (in b's namespace) to b.Target, as
	// pods/binding does (the core/v1 bindings resource).
	BindPod func(ctx context.Context, b *corev1.Binding) error
	// ResourceMetrics reads the resource metrics pipeline
	// (metrics.k8s.io: kubectl top, the horizontal pod autoscaler).
	ResourceMetrics ResourceMetrics
	// ReviewToken answers TokenReviews (authentication.k8s.io).
	ReviewToken TokenReviewer
}

// TokenReviewer authenticates a bearer token for one of audiences (nil:
// the API server's): the user, the audiences the token is good for, and
// whether it authenticated; err says why a token was refused.
type TokenReviewer func(ctx context.Context, token string, audiences []string) (user *authn.User, auds []string, ok bool, err error)

// ResourceMetrics is the read side of the resource metrics pipeline.
type ResourceMetrics interface {
	Nodes(ctx context.Context) []resourcemetrics.NodeUsage
	Pods(ctx context.Context, namespace string) []resourcemetrics.PodUsage
}

// Reader reads objects of any served resource.
type Reader interface {
	// List fills into (a list of gvr's kind) with the objects in namespace
	// ns ("" for all). latest asks for a consistent read (every write
	// acknowledged before the call is seen); otherwise whatever the cache
	// holds now is good enough.
	List(ctx context.Context, gvr schema.GroupVersionResource, ns string, latest bool, into runtime.Object) error
	// Get fills into with one object. live reads etcd, not the cache (for
	// an object that changed a moment ago); a miss in the cache falls back
	// to etcd too. A missing object is an apierrors NotFound.
	Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, live bool, into runtime.Object) error
}
