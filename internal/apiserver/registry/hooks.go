package registry

import (
	"context"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Optional interfaces a Strategy may implement. The generic handler checks
// for them with a type assertion.

// BeforeCreater acts just before an object is written on create, after
// validation: e.g. allocate a ClusterIP. The returned undo (may be nil) is
// called when the write fails, so that nothing stays half-allocated. A
// dry-run create calls BeforeCreate with dryRun=true: it must check but not
// allocate for real.
type BeforeCreater interface {
	BeforeCreate(ctx context.Context, obj runtime.Object, dryRun bool) (undo func(), err error)
}

// BeforeUpdater acts just before an update is written (e.g. allocate a new
// NodePort when the type changed). Same undo contract as BeforeCreater.
type BeforeUpdater interface {
	BeforeUpdate(ctx context.Context, obj, old runtime.Object, dryRun bool) (undo func(), err error)
}

// AfterDeleter acts after an object is gone from the store (e.g. release its
// ClusterIP and NodePorts).
type AfterDeleter interface {
	AfterDelete(ctx context.Context, obj runtime.Object)
}

// GracefulDeleter decides whether a delete is graceful. When it returns
// true, the handler sets metadata.deletionTimestamp and
// metadata.deletionGracePeriodSeconds (to *grace) instead of removing the
// object; a later delete with grace 0 removes it. options.GracePeriodSeconds
// may be nil (use the object's default, e.g. pod
// terminationGracePeriodSeconds); the method fills in the grace to use.
type GracefulDeleter interface {
	CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) (graceful bool)
}

// SpecFinalizer is implemented by the strategy of a resource that keeps
// finalizers of its own in its spec and serves a finalize subresource
// (namespaces: spec.finalizers, status.phase Terminating).
type SpecFinalizer interface {
	// SpecFinalizersPending says obj still waits for its spec finalizers:
	// a delete marks it and leaves it in the store.
	SpecFinalizersPending(obj runtime.Object) bool
	// MarkTerminating changes the copy of obj that a delete marks (sets
	// deletionTimestamp on), e.g. to phase Terminating.
	MarkTerminating(obj runtime.Object)
	// Finalize computes what an update of the finalize subresource writes:
	// cur (a copy the caller owns) with the spec finalizers of want.
	Finalize(want, cur runtime.Object) (runtime.Object, field.ErrorList)
}

// Restorer is implemented by a strategy that keeps state beside the store
// (e.g. the ClusterIPs and NodePorts services hold). Before the server
// serves writes it calls Restore with every stored object of the resource
// (a list of its kind), so a restart never hands out what is in use.
type Restorer interface {
	Restore(list runtime.Object) error
}

// Scaler serves the scale subresource (autoscaling/v1 Scale).
type Scaler interface {
	// ScaleOf reads spec.replicas, status.replicas and the selector.
	ScaleOf(obj runtime.Object) (*autoscalingv1.Scale, error)
	// ApplyScale writes scale.spec.replicas into obj (a copy the caller
	// owns); invalid replicas are a field error at spec.replicas.
	ApplyScale(obj runtime.Object, scale *autoscalingv1.Scale) error
}

// VerbLister limits the verbs a resource serves (discovery lists them and
// the handler refuses the rest with 405). Without it a resource serves
// create, delete, deletecollection, get, list, patch, update and watch.
type VerbLister interface {
	Verbs() []string
}

// VirtualCreater serves a create-only resource that is never stored, such
// as SelfSubjectAccessReview: the handler decodes the body, calls Create
// and returns its result with 201.
type VirtualCreater interface {
	CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error)
}

// VirtualReader serves get and list of a resource that is computed, not stored,
// such as ComponentStatus.
type VirtualReader interface {
	GetVirtual(ctx context.Context, name string) (runtime.Object, error)
	ListVirtual(ctx context.Context) (runtime.Object, error)
}

// VirtualQuery is what a read of a computed resource asks for.
type VirtualQuery struct {
	// Namespace is the request's namespace; "" for all namespaces or a
	// cluster-scoped resource.
	Namespace string
	// Labels selects by label (labelSelector); never nil.
	Labels labels.Selector
}

// ScopedVirtualReader serves get and list of a computed resource that has
// namespaces or labels, such as metrics.k8s.io's PodMetrics. The handler
// prefers it to VirtualReader.
type ScopedVirtualReader interface {
	GetScoped(ctx context.Context, q VirtualQuery, name string) (runtime.Object, error)
	ListScoped(ctx context.Context, q VirtualQuery) (runtime.Object, error)
}

// GarbageCollectionPolicy gives a resource's default deletion propagation
// when a delete names none (batch/v1 Jobs orphan their pods, as upstream).
type GarbageCollectionPolicy interface {
	DefaultPropagation() metav1.DeletionPropagation
}

// IsVirtual says a resource is computed or create-only, never stored.
func IsVirtual(r Resource) bool {
	_, c := r.Strategy.(VirtualCreater)
	_, g := r.Strategy.(VirtualReader)
	_, sg := r.Strategy.(ScopedVirtualReader)
	return c || g || sg
}

// FieldPruner drops the fields of a decoded body that the resource's schema
// does not declare and returns their paths ("spec.foo"). The handler calls
// it on every create, update and patch body: fieldValidation Strict turns
// the paths into a 400, Warn (the default) into warnings, as upstream does
// for custom resources.
type FieldPruner interface {
	Prune(obj runtime.Object) (unknown []string)
}
