// Package storage keeps API objects in etcd. Keys follow upstream
// (/registry/<resource>/<namespace>/<name>), values are encoded as upstream
// encodes them (protobuf envelope for built-in types), and resourceVersion is
// the etcd revision. The Cacher in this package serves lists and watches from
// memory, fed by one etcd watch per resource.
package storage

import (
	"context"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Interface is what the registry needs from the store. Errors are
// *StorageError values (NotFound, AlreadyExists, Conflict, Gone, ...) that
// the handler maps to API errors.
type Interface interface {
	// Create writes obj at key if nothing is there, and decodes the stored
	// object (with its resourceVersion) into out.
	Create(ctx context.Context, key string, obj, out runtime.Object) error
	// Get reads key into out.
	Get(ctx context.Context, key string, out runtime.Object) error
	// List reads every object under prefix into listObj (a *XList), filtered
	// by pred, honouring opts (resourceVersion, limit, continue).
	List(ctx context.Context, prefix string, opts ListOptions, listObj runtime.Object) error
	// GuaranteedUpdate reads key, calls tryUpdate with the current object and
	// writes its result with a compare-and-swap on the mod revision,
	// retrying on a lost race. preconditions are checked against the current
	// object each try. tryUpdate may return (nil, err) to abort.
	GuaranteedUpdate(ctx context.Context, key string, out runtime.Object, preconditions *Preconditions, tryUpdate UpdateFunc) error
	// Delete removes key if preconditions hold, deleting exactly the revision
	// it checked, and decodes the last state into out.
	Delete(ctx context.Context, key string, out runtime.Object, preconditions *Preconditions) error
	// Watch streams changes under key (a prefix when opts.Recursive) after
	// opts.ResourceVersion.
	Watch(ctx context.Context, key string, opts ListOptions) (watch.Interface, error)
	// CurrentRevision is the store's newest revision.
	CurrentRevision(ctx context.Context) (int64, error)
}

// UpdateFunc computes the new object from the current one.
type UpdateFunc func(current runtime.Object) (runtime.Object, error)

// Preconditions must hold for an update or delete to go ahead.
type Preconditions struct {
	UID             *types.UID
	ResourceVersion *string
}

// Predicate filters objects by label and field selectors.
type Predicate struct {
	Label    labels.Selector
	Field    fields.Selector
	GetAttrs func(obj runtime.Object) (labels.Set, fields.Set, error)
}

// Empty says the predicate matches everything.
func (p Predicate) Empty() bool {
	return (p.Label == nil || p.Label.Empty()) && (p.Field == nil || p.Field.Empty())
}

// Matches says whether obj passes the selectors.
func (p Predicate) Matches(obj runtime.Object) (bool, error) {
	if p.Empty() {
		return true, nil
	}
	l, f, err := p.GetAttrs(obj)
	if err != nil {
		return false, err
	}
	if p.Label != nil && !p.Label.Matches(l) {
		return false, nil
	}
	if p.Field != nil && !p.Field.Matches(f) {
		return false, nil
	}
	return true, nil
}

// ListOptions select what a List or Watch returns.
type ListOptions struct {
	ResourceVersion      string
	ResourceVersionMatch string // "", "NotOlderThan", "Exact"
	Limit                int64
	Continue             string
	Predicate            Predicate
	Recursive            bool
	AllowWatchBookmarks  bool
	SendInitialEvents    *bool
}
