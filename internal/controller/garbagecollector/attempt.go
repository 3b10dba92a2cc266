package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// ownerState is what an owner reference points at.
type ownerState int

const (
	// solid: the owner exists and is not waiting for its dependents.
	solid ownerState = iota
	// dangling: no object with the owner's UID exists.
	dangling
	// waiting: the owner is being deleted in the foreground.
	waiting
)

// actionKind is what attemptToDelete decided for a dependent.
type actionKind int

const (
	keep actionKind = iota
	removeOwnerRefs
	deleteItem
)

// action is the pure decision for one dependent.
type action struct {
	kind   actionKind
	remove []types.UID                // owner UIDs whose references go (removeOwnerRefs)
	policy metav1.DeletionPropagation // for deleteItem
	// unblock: before deleting, set blockOwnerDeletion false on the
	// item's owner references, to break a circle of foreground deletions.
	unblock bool
}

// dependentsState is what decide needs to know of an item's dependents.
type dependentsState struct {
	any bool // the item has dependents
	// deleting: one of them is itself being deleted in the foreground
	// (a possible circle back to the item's waiting owner).
	deleting bool
}

// decide chooses what to do with item given the state of each of its
// owners (by UID) and whether it has dependents itself:
//   - an item with a solid owner stays, losing its references to gone
//     owners and to owners deleted in the foreground;
//   - an item with no solid owner is deleted: in the foreground when an
//     owner waits for it and it has dependents of its own, else as its own
//     finalizers ask (orphan, foreground) or in the background;
//   - deleted in the foreground while a dependent of its own is also
//     waiting for its dependents, the item may close a circle of owners
//     (a owns b owns c owns a) in which each waits for the next: as
//     upstream, its owner references stop blocking first, so its owner can
//     finish. Like upstream's check, this may also fire without a circle;
//     the cost is only that the owner does not wait for this item.
func decide(item metav1.Object, states map[types.UID]ownerState, deps dependentsState) action {
	var nSolid int
	var gone, wait []types.UID
	for _, r := range item.GetOwnerReferences() {
		switch states[r.UID] {
		case solid:
			nSolid++
		case dangling:
			gone = append(gone, r.UID)
		case waiting:
			wait = append(wait, r.UID)
		}
	}
	if len(gone) == 0 && len(wait) == 0 {
		return action{kind: keep}
	}
	if nSolid > 0 {
		return action{kind: removeOwnerRefs, remove: append(gone, wait...)}
	}
	policy := metav1.DeletePropagationBackground
	switch {
	case len(wait) > 0 && deps.any:
		return action{kind: deleteItem, policy: metav1.DeletePropagationForeground, unblock: deps.deleting}
	case hasFinalizer(item, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case hasFinalizer(item, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	}
	return action{kind: deleteItem, policy: policy}
}

// attemptToDelete checks the owners of ref and collects it if they are
// gone; for an owner being deleted in the foreground it deletes the
// dependents and removes the finalizer once no blocking dependent is left.
func (c *Controller) attemptToDelete(ctx context.Context, ref objectRef) error {
	if c.ownersSolidInCache(ref) {
		return nil
	}
	item, err := c.metadata.Resource(ref.Resource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", ref, err)
	}
	if ref.UID != "" && item.UID != ref.UID {
		return nil
	}
	ref.UID = item.UID
	if item.DeletionTimestamp != nil {
		if !hasFinalizer(item, metav1.FinalizerDeleteDependents) {
			return nil
		}
		return c.processDeletingDependents(ctx, ref)
	}
	if len(item.OwnerReferences) == 0 {
		return nil
	}
	states := map[types.UID]ownerState{}
	for _, r := range item.OwnerReferences {
		st, err := c.ownerState(ctx, item.Namespace, r)
		if err != nil {
			return err
		}
		states[r.UID] = st
	}
	var deps dependentsState
	for _, d := range c.dependents(item.UID) {
		deps.any = true
		if d.meta.GetDeletionTimestamp() != nil && hasFinalizer(d.meta, metav1.FinalizerDeleteDependents) {
			deps.deleting = true
		}
	}
	act := decide(item, states, deps)
	switch act.kind {
	case removeOwnerRefs:
		drop := map[types.UID]bool{}
		for _, u := range act.remove {
			drop[u] = true
		}
		return c.updateMeta(ctx, ref, func(m *metav1.PartialObjectMetadata) bool {
			return removeOwners(m, drop)
		})
	case deleteItem:
		if act.unblock {
			klog.FromContext(ctx).V(2).Info("garbage collector: owner and dependent both wait for their dependents; unblocking the owner references of the object to break a possible circle", "object", ref.String())
			if err := c.updateMeta(ctx, ref, unblockOwners); err != nil {
				return err
			}
		}
		klog.FromContext(ctx).V(2).Info("garbage collector: deleting object whose owners are gone", "object", ref.String(), "propagation", act.policy)
		err := c.metadata.Resource(ref.Resource).Namespace(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &ref.UID},
			PropagationPolicy: &act.policy,
		})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", ref, err)
	case keep:
		// An owner whose deletion no monitor would see (its resource is
		// new, e.g. a custom resource's, and discovery has not caught up)
		// is looked at again until one does, as upstream requeues its
		// virtual nodes until an informer observes them.
		for _, r := range item.OwnerReferences {
			if states[r.UID] == solid && !c.watching(r) {
				return worker.RequeueAfter(UnwatchedOwnerRecheck)
			}
		}
	}
	return nil
}

// processDeletingDependents deletes the dependents of an owner being
// deleted in the foreground and removes its finalizer once no dependent
// with blockOwnerDeletion is left.
func (c *Controller) processDeletingDependents(ctx context.Context, ref objectRef) error {
	blocking := 0
	for _, d := range c.dependents(ref.UID) {
		if r := ownerRefTo(d.meta, ref.UID); r != nil && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			blocking++
		}
		if d.meta.GetDeletionTimestamp() == nil {
			c.deleteQueue.Add(d.ref)
		}
	}
	if blocking > 0 {
		// Each blocking dependent's deletion queues this owner again.
		return nil
	}
	// The informers may not have seen a dependent created a moment before
	// the owner's deletion: confirm with a live read before letting go.
	live, err := c.liveDependents(ctx, ref)
	if err != nil {
		return err
	}
	for _, d := range live {
		if d.meta.GetDeletionTimestamp() == nil {
			c.deleteQueue.Add(d.ref)
		}
		if r := ownerRefTo(d.meta, ref.UID); r != nil && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			blocking++
		}
	}
	if blocking > 0 {
		c.deleteQueue.AddAfter(ref, time.Second) // not yet in the informers: look again
		return nil
	}
	return c.updateMeta(ctx, ref, func(m *metav1.PartialObjectMetadata) bool {
		return removeFinalizer(m, metav1.FinalizerDeleteDependents)
	})
}

// liveDependents lists, from the API server rather than the informers, the
// objects whose ownerReferences name ref: the owner's namespace for a
// namespaced owner, everywhere for a cluster-scoped one. Lists without a
// resourceVersion are consistent, so a dependent created before the
// owner's deletion is seen even if its watch event is still on the way.
func (c *Controller) liveDependents(ctx context.Context, ref objectRef) ([]dependent, error) {
	c.mu.RLock()
	monitors := make([]*monitor, 0, len(c.monitors))
	for _, m := range c.monitors {
		monitors = append(monitors, m)
	}
	c.mu.RUnlock()
	var out []dependent
	for _, mon := range monitors {
		if ref.Namespace != "" && !mon.namespaced {
			continue // a namespaced owner has no cluster-scoped dependents
		}
		list, err := c.metadata.Resource(mon.gvr).Namespace(ref.Namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s for dependents of %s: %w", mon.gvr, ref, err)
		}
		for i := range list.Items {
			m := &list.Items[i]
			if ownerRefTo(m, ref.UID) != nil {
				out = append(out, dependent{ref: refOf(mon.gvr, m), meta: m})
			}
		}
	}
	return out, nil
}

// attemptToOrphan removes the references to an owner deleted with the
// orphan finalizer from its dependents, then the finalizer.
func (c *Controller) attemptToOrphan(ctx context.Context, ref objectRef) error {
	item, err := c.metadata.Resource(ref.Resource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", ref, err)
	}
	if item.UID != ref.UID || item.DeletionTimestamp == nil || !hasFinalizer(item, metav1.FinalizerOrphanDependents) {
		return nil
	}
	drop := map[types.UID]bool{ref.UID: true}
	deps, err := c.liveDependents(ctx, ref)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if err := c.updateMeta(ctx, d.ref, func(m *metav1.PartialObjectMetadata) bool { return removeOwners(m, drop) }); err != nil {
			return fmt.Errorf("orphan %s: %w", d.ref, err)
		}
	}
	return c.updateMeta(ctx, ref, func(m *metav1.PartialObjectMetadata) bool {
		return removeFinalizer(m, metav1.FinalizerOrphanDependents)
	})
}

// ownersSolidInCache is the cheap path: the cached item and all its
// owners exist with the right UIDs and no owner waits for dependents.
func (c *Controller) ownersSolidInCache(ref objectRef) bool {
	item, ok := c.cached(ref.Resource.GroupResource(), ref.Namespace, ref.Name)
	if !ok || item.GetUID() != ref.UID || item.GetDeletionTimestamp() != nil {
		return false
	}
	for _, r := range item.GetOwnerReferences() {
		gvr, namespaced, err := c.resourceFor(r.APIVersion, r.Kind)
		if err != nil {
			return false
		}
		ns := ""
		if namespaced {
			ns = item.GetNamespace()
		}
		owner, ok := c.cached(gvr.GroupResource(), ns, r.Name)
		if !ok || owner.GetUID() != r.UID {
			return false
		}
		if owner.GetDeletionTimestamp() != nil && hasFinalizer(owner, metav1.FinalizerDeleteDependents) {
			return false
		}
	}
	return true
}

// ownerState reads the owner r of an object in namespace itemNS live.
func (c *Controller) ownerState(ctx context.Context, itemNS string, r metav1.OwnerReference) (ownerState, error) {
	gvr, namespaced, err := c.resourceFor(r.APIVersion, r.Kind)
	if err != nil {
		if rerr := c.resync(ctx); rerr == nil {
			gvr, namespaced, err = c.resourceFor(r.APIVersion, r.Kind)
		}
		if err != nil {
			return solid, err
		}
	}
	ns := ""
	if namespaced {
		if itemNS == "" {
			// A cluster-scoped object cannot be owned by a namespaced one.
			return dangling, nil
		}
		ns = itemNS
	}
	o, err := c.metadata.Resource(gvr).Namespace(ns).Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return dangling, nil
	}
	if err != nil {
		return solid, fmt.Errorf("get owner %s %s: %w", r.Kind, r.Name, err)
	}
	if o.UID != r.UID {
		return dangling, nil
	}
	if o.DeletionTimestamp != nil && hasFinalizer(o, metav1.FinalizerDeleteDependents) {
		return waiting, nil
	}
	return solid, nil
}

// updateMeta reads ref, lets mutate change its ownerReferences or
// finalizers, and writes them back with a merge patch guarded by the
// object's UID and resourceVersion, retrying on conflicts.
func (c *Controller) updateMeta(ctx context.Context, ref objectRef, mutate func(*metav1.PartialObjectMetadata) bool) error {
	client := c.metadata.Resource(ref.Resource).Namespace(ref.Namespace)
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var cur *metav1.PartialObjectMetadata
		cur, err = client.Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", ref, err)
		}
		if cur.UID != ref.UID {
			return nil
		}
		next := cur.DeepCopy()
		if !mutate(next) {
			return nil
		}
		patch, merr := json.Marshal(map[string]any{"metadata": map[string]any{
			"uid":             cur.UID,
			"resourceVersion": cur.ResourceVersion,
			"ownerReferences": next.OwnerReferences,
			"finalizers":      next.Finalizers,
		}})
		if merr != nil {
			return fmt.Errorf("patch %s: %w", ref, merr)
		}
		_, err = client.Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			continue
		default:
			return fmt.Errorf("patch %s: %w", ref, err)
		}
	}
	return fmt.Errorf("patch %s: %w", ref, err)
}

// removeOwners drops the ownerReferences to the UIDs in drop.
func removeOwners(m *metav1.PartialObjectMetadata, drop map[types.UID]bool) bool {
	var kept []metav1.OwnerReference
	for _, r := range m.OwnerReferences {
		if !drop[r.UID] {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(m.OwnerReferences) {
		return false
	}
	m.OwnerReferences = kept
	return true
}

// unblockOwners sets blockOwnerDeletion false on every owner reference
// that has it true.
func unblockOwners(m *metav1.PartialObjectMetadata) bool {
	changed := false
	for i := range m.OwnerReferences {
		if b := m.OwnerReferences[i].BlockOwnerDeletion; b != nil && *b {
			m.OwnerReferences[i].BlockOwnerDeletion = ptr.To(false)
			changed = true
		}
	}
	return changed
}

// removeFinalizer drops finalizer f.
func removeFinalizer(m *metav1.PartialObjectMetadata, f string) bool {
	var kept []string
	for _, x := range m.Finalizers {
		if x != f {
			kept = append(kept, x)
		}
	}
	if len(kept) == len(m.Finalizers) {
		return false
	}
	m.Finalizers = kept
	return true
}
