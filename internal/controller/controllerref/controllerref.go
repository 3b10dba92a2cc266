// Package controllerref decides which objects a controller owns, the way
// upstream's ControllerRefManager does: it keeps the objects it controls
// that still match, adopts matching orphans (only after a live check that
// the controller still exists and is not being deleted), and releases
// controlled objects that no longer match. ReplicaSets claim pods,
// Deployments claim ReplicaSets, DaemonSets and StatefulSets claim pods and
// ControllerRevisions, all through one Claimer.
package controllerref

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Claimer claims objects of one type for one controller.
type Claimer[T metav1.Object] struct {
	// Owner is the controller; GVK its kind, written into adopted objects.
	Owner metav1.Object
	GVK   schema.GroupVersionKind
	// Match says whether an object belongs to the owner: its selector, and
	// any further rule (a StatefulSet claims only pods named as members).
	Match func(T) bool
	// CanAdopt re-reads the owner live and fails if it is gone, replaced
	// or being deleted. It is asked once, and only when an orphan matches.
	CanAdopt func(ctx context.Context) error
	// Patch applies a strategic merge patch to obj and returns the result.
	Patch func(ctx context.Context, obj T, patch []byte) (T, error)
	// Kind names the claimed objects in errors ("pod", "replica set").
	Kind string
}

// Claim returns the candidates the owner controls and that match, plus the
// matching orphans it adopted, in the candidates' order. Controlled
// objects that no longer match are released, unless the owner is being
// deleted (the garbage collector then takes them). Objects another
// controller owns are left alone. Errors are joined; the objects claimed so
// far are returned with them.
func (c Claimer[T]) Claim(ctx context.Context, candidates []T) ([]T, error) {
	var (
		out      []T
		errs     []error
		asked    bool
		adoptErr error
	)
	ownerDeleting := c.Owner.GetDeletionTimestamp() != nil
	for _, obj := range candidates {
		ref := metav1.GetControllerOfNoCopy(obj)
		switch {
		case ref != nil && ref.UID == c.Owner.GetUID():
			if c.Match(obj) {
				out = append(out, obj)
				continue
			}
			if ownerDeleting {
				continue
			}
			if err := c.release(ctx, obj); err != nil {
				errs = append(errs, err)
			}
		case ref != nil, ownerDeleting, obj.GetDeletionTimestamp() != nil, !c.Match(obj):
		default:
			if !asked {
				asked = true
				if c.CanAdopt != nil {
					adoptErr = c.CanAdopt(ctx)
				}
			}
			if adoptErr != nil {
				continue
			}
			adopted, err := c.Patch(ctx, obj, AdoptPatch(c.GVK, c.Owner, obj.GetUID()))
			if err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("adopt %s %s: %w", c.Kind, obj.GetName(), err))
				}
				continue
			}
			out = append(out, adopted)
		}
	}
	return out, errors.Join(errs...)
}

// release removes the owner's reference from obj. An object that is gone,
// or no longer carries the reference (the patch's uid precondition fails
// as Invalid), needs nothing more.
func (c Claimer[T]) release(ctx context.Context, obj T) error {
	_, err := c.Patch(ctx, obj, ReleasePatch(c.Owner.GetUID(), obj.GetUID()))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
		return fmt.Errorf("release %s %s: %w", c.Kind, obj.GetName(), err)
	}
	return nil
}

// AdoptPatch is the strategic merge patch that makes owner the controller
// of the object with the given uid; the uid guards against a recreated
// object of the same name.
func AdoptPatch(gvk schema.GroupVersionKind, owner metav1.Object, uid types.UID) []byte {
	return fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}],"uid":%q}}`,
		gvk.GroupVersion().String(), gvk.Kind, owner.GetName(), owner.GetUID(), uid)
}

// ReleasePatch is the strategic merge patch that removes the reference to
// ownerUID from the object with the given uid.
func ReleasePatch(ownerUID, uid types.UID) []byte {
	return fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`, ownerUID, uid)
}

// LiveCheck is the usual CanAdopt: get reads the owner fresh from the API,
// and adoption is refused if it is gone, replaced by a namesake or being
// deleted.
func LiveCheck(owner metav1.Object, kind string, get func(ctx context.Context) (metav1.Object, error)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		fresh, err := get(ctx)
		if err != nil {
			return err
		}
		if fresh.GetUID() != owner.GetUID() {
			return fmt.Errorf("%s %s/%s is gone: got uid %s, wanted %s", kind, owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
		}
		if fresh.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%s %s/%s is being deleted", kind, owner.GetNamespace(), owner.GetName())
		}
		return nil
	}
}
