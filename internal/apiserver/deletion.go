package apiserver

import (
	"context"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// deleteAction is what a delete does to the stored object.
type deleteAction int

const (
	// deleteNow removes the object from the store.
	deleteNow deleteAction = iota
	// markForDeletion writes decision.object: deletionTimestamp set (now,
	// or now+grace for a graceful delete), deletionGracePeriodSeconds and
	// the finalizers the propagation policy asks for. The object stays
	// until its finalizers are gone and its grace is over.
	markForDeletion
	// alreadyMarked writes nothing: the object is already marked as the
	// delete asks (a second delete with the same or a longer grace).
	alreadyMarked
	// refuseDelete refuses the delete: a precondition failed (decision.err,
	// a conflict).
	refuseDelete
)

func (a deleteAction) String() string {
	switch a {
	case deleteNow:
		return "delete now"
	case markForDeletion:
		return "mark for deletion"
	case alreadyMarked:
		return "already marked"
	case refuseDelete:
		return "refuse"
	}
	return fmt.Sprintf("deleteAction(%d)", int(a))
}

// deletion is what decideDeletion decided.
type deletion struct {
	action deleteAction
	// object is the marked copy to write (markForDeletion).
	object runtime.Object
	// err says why the delete is refused (refuseDelete): a failed
	// precondition, to be answered with 409 Conflict.
	err error
}

// decideDeletion decides what a delete with opts does to cur, the stored
// object, at time now, from the strategy's hooks: GracefulDeleter (a grace
// period), GarbageCollectionPolicy (the default propagation) and
// SpecFinalizer (finalizers kept in the spec). It reads no clock and
// writes nothing; cur is not changed.
func decideDeletion(ctx context.Context, strategy registry.Strategy, cur runtime.Object, opts *metav1.DeleteOptions, now time.Time) deletion {
	m, err := meta.Accessor(cur)
	if err != nil {
		return deletion{action: refuseDelete, err: err}
	}
	if pre := opts.Preconditions; pre != nil {
		if pre.UID != nil && *pre.UID != m.GetUID() {
			return deletion{action: refuseDelete, err: fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, m.GetUID())}
		}
		if pre.ResourceVersion != nil && *pre.ResourceVersion != m.GetResourceVersion() {
			return deletion{action: refuseDelete, err: fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pre.ResourceVersion, m.GetResourceVersion())}
		}
	}
	next := cur.DeepCopyObject()
	nm, _ := meta.Accessor(next)

	graceful := false
	var grace int64
	if gd, ok := strategy.(registry.GracefulDeleter); ok {
		o := *opts
		if gd.CheckGracefulDelete(ctx, next, &o) && o.GracePeriodSeconds != nil && *o.GracePeriodSeconds > 0 {
			graceful = true
			grace = *o.GracePeriodSeconds
		}
	}

	// The finalizers the propagation policy asks for, processed by the
	// garbage collector.
	fins := nm.GetFinalizers()
	policy := opts.PropagationPolicy
	if gc, ok := strategy.(registry.GarbageCollectionPolicy); ok && policy == nil && opts.OrphanDependents == nil {
		p := gc.DefaultPropagation()
		policy = &p
	}
	if opts.OrphanDependents != nil && *opts.OrphanDependents {
		p := metav1.DeletePropagationOrphan
		policy = &p
	}
	if policy != nil && nm.GetDeletionTimestamp() == nil {
		switch *policy {
		case metav1.DeletePropagationForeground:
			fins = addString(removeString(fins, metav1.FinalizerOrphanDependents), metav1.FinalizerDeleteDependents)
		case metav1.DeletePropagationOrphan:
			fins = addString(removeString(fins, metav1.FinalizerDeleteDependents), metav1.FinalizerOrphanDependents)
		}
		nm.SetFinalizers(fins)
	}
	sf, hasSpecFinalizers := strategy.(registry.SpecFinalizer)
	pending := len(fins) > 0 || (hasSpecFinalizers && sf.SpecFinalizersPending(next))
	markTerminating := func() {
		if hasSpecFinalizers {
			sf.MarkTerminating(next)
		}
	}

	// The first mark changes what the object's controllers should do:
	// its generation (where it has one) moves on, as upstream's.
	bumpGeneration := func() {
		if g := nm.GetGeneration(); g > 0 {
			nm.SetGeneration(g + 1)
		}
	}
	switch {
	case graceful:
		if nm.GetDeletionTimestamp() != nil {
			// Already terminating: only a shorter grace moves the deadline in.
			if g := nm.GetDeletionGracePeriodSeconds(); g != nil && *g <= grace {
				return deletion{action: alreadyMarked}
			}
		} else {
			bumpGeneration()
		}
		t := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
		nm.SetDeletionTimestamp(&t)
		nm.SetDeletionGracePeriodSeconds(&grace)
		markTerminating()
		return deletion{action: markForDeletion, object: next}
	case pending:
		if nm.GetDeletionTimestamp() == nil {
			t := metav1.NewTime(now)
			nm.SetDeletionTimestamp(&t)
			bumpGeneration()
		}
		zero := int64(0)
		nm.SetDeletionGracePeriodSeconds(&zero)
		markTerminating()
		if apiequality.Semantic.DeepEqual(next, cur) {
			return deletion{action: alreadyMarked}
		}
		return deletion{action: markForDeletion, object: next}
	}
	return deletion{action: deleteNow}
}

// deletionComplete says an object marked for deletion may now be removed:
// no finalizers in its metadata or spec and no grace period left (an update
// that removed the last finalizer finishes the deletion).
func deletionComplete(strategy registry.Strategy, obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
		return false
	}
	if sf, ok := strategy.(registry.SpecFinalizer); ok && sf.SpecFinalizersPending(obj) {
		return false
	}
	g := m.GetDeletionGracePeriodSeconds()
	return g == nil || *g <= 0
}

func addString(ss []string, s string) []string {
	for _, x := range ss {
		if x == s {
			return ss
		}
	}
	return append(ss, s)
}

func removeString(ss []string, s string) []string {
	var out []string
	for _, x := range ss {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
