// Package registry describes the resources the API server serves: for each one
// a Resource (names, scope, kinds) and a Strategy (defaults, validation, status
// rules, field selectors, table columns). The generic REST handler in
// internal/apiserver drives every resource through this contract; each
// resource's own rules live in a subpackage, registry/<resource>.
package registry

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource is one served resource (e.g. apps/v1 deployments).
type Resource struct {
	GroupVersion schema.GroupVersion
	Resource     string // plural, lower case: "deployments"
	Kind         string // "Deployment"
	ListKind     string // "DeploymentList"
	SingularName string // "deployment"
	ShortNames   []string
	Categories   []string
	Namespaced   bool

	// StoragePrefix is the etcd key prefix below /registry, e.g. "deployments"
	// or "apiextensions.k8s.io/customresourcedefinitions". Upstream keeps the
	// core and most built-in groups without a group prefix.
	StoragePrefix string

	New     func() runtime.Object
	NewList func() runtime.Object

	Strategy Strategy

	// Subresources served beside the main resource, by name ("status",
	// "scale", ...). A nil map means none.
	Subresources map[string]Subresource

	// ReturnDeletedObject says DELETE answers with the deleted object, not
	// a Status, once the object is gone (upstream's stores with
	// ReturnDeletedObject: pods, services, namespaces, ...). A delete that
	// only marks the object answers with the marked object either way.
	ReturnDeletedObject bool
	// DeleteDocumentedAsStatus says the published OpenAPI names Status as
	// the answer of DELETE even though ReturnDeletedObject is set, as
	// upstream documents namespaces (whose REST wraps the store).
	DeleteDocumentedAsStatus bool

	// TTLSeconds, when positive, is how long an object lives in etcd after
	// its last write (events: upstream's --event-ttl of one hour).
	TTLSeconds int64

	// Stored, when set, says objects are kept in another version's format,
	// as upstream keeps autoscaling/v1 HorizontalPodAutoscalers as
	// autoscaling/v2 and events.k8s.io/v1 Events as core/v1 Events. Both
	// versions then read and write the same keys.
	Stored *StoredVersion

	// Custom, when set, says the resource is a custom resource (served for
	// a CustomResourceDefinition): its objects are unstructured, kept in
	// etcd as JSON in the storage version's format, and served as JSON or
	// YAML only (no protobuf, as upstream).
	Custom *CustomStorage
}

// CustomStorage says how a custom resource is kept.
type CustomStorage struct {
	// StorageVersion is the version objects are written in.
	StorageVersion schema.GroupVersion
	// FieldManager, when set, builds the resource's managedFields tracking
	// (the field manager needs the CRD's schema; the server's own OpenAPI
	// does not describe custom resources).
	FieldManager func(subresource string) (*managedfields.FieldManager, error)
	// Convert, when set, converts an object to another version of the
	// resource (the CRD's conversion: None rewrites apiVersion, Webhook
	// asks the webhook). Nil means conversion None.
	Convert func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error)
	// FromStorage, when set, is applied to an object as it is read from
	// etcd, in the version it was stored in: upstream's storage decoder
	// prunes it and applies defaults with that version's schema (nil: no
	// version has a schema).
	FromStorage func(obj runtime.Object)
}

// StoredVersion converts between a served version and the stored one.
// FromStored may take over the stored object's memory: callers pass one
// they no longer use (the storage codec's freshly decoded object, a copy).
type StoredVersion struct {
	GVK        schema.GroupVersionKind
	New        func() runtime.Object
	ToStored   func(served runtime.Object) (runtime.Object, error)
	FromStored func(stored, served runtime.Object) error
	// FieldLabels maps the names a field selector may use on the served
	// version to the stored version's names for the same values, where
	// they differ (upstream's field label conversion): the served version
	// is listed and watched from the stored version's cache.
	FieldLabels map[string]string
}

// Strategy holds the rules of one resource. Embed DefaultStrategy to inherit
// the no-op behaviour and override what the resource needs.
type Strategy interface {
	// PrepareForCreate runs before validation on create: clear status that a
	// client may not set, set generation to 1, apply defaults.
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	// PrepareForUpdate runs before validation on update of the main resource:
	// keep the old status (if the resource has a status subresource), apply
	// defaults, bump generation when the spec changed.
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	// PrepareForStatusUpdate runs on updates through the status subresource:
	// keep everything but the status (and labels/annotations untouched by
	// upstream rules) from old.
	PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object)

	// Validate checks a new object. ValidateUpdate checks an update (including
	// immutable fields). ValidateStatusUpdate checks a status update.
	// Object metadata (name, namespace, labels, annotations) is validated by
	// the generic handler before these run.
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
	ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList

	// FieldSet returns the fields a field selector may name, beyond
	// metadata.name and metadata.namespace which the handler adds itself.
	FieldSet(obj runtime.Object) fields.Set

	// NameValidation says how to validate metadata.name: "dns1123subdomain"
	// (default), "dns1123label", "path segment" (RBAC-like), etc. Returns
	// error messages, empty when valid.
	ValidateName(name string, prefix bool) []string

	// TableColumns and TableRow turn objects into metav1.Table rows with the
	// columns that kubectl shows for this resource upstream. wide columns have
	// Priority 1.
	TableColumns() []metav1.TableColumnDefinition
	TableRow(obj runtime.Object) ([]interface{}, error)
}
