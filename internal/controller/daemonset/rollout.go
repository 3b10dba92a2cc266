package daemonset

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/skiff-sh/skiff/internal/controller/revision"
)

// rollingUpdate decides which old pods to delete and on which nodes to
// create updated ones, within maxUnavailable and maxSurge, as upstream.
// Without surge: an old pod that is not available may always be replaced;
// available ones are replaced while fewer than maxUnavailable nodes are
// unavailable. With surge: an updated pod is created beside the old one on
// up to maxSurge nodes (always where the old one is not available), and
// the old one goes once the new one is available.
func (c *Controller) rollingUpdate(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string) (toCreate, toDelete []string, err error) {
	p := placementOf(ds)
	desired := 0
	nodeByName := map[string]*corev1.Node{}
	for _, node := range nodes {
		nodeByName[node.Name] = node
		if run, _ := p.shouldRun(node); !run {
			continue
		}
		desired++
		if _, ok := byNode[node.Name]; !ok {
			byNode[node.Name] = nil
		}
	}
	maxUnavailable, err := unavailableCount(ds, desired)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid maxUnavailable: %w", err)
	}
	maxSurge, err := surgeCount(ds, desired)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid maxSurge: %w", err)
	}
	if desired > 0 && maxUnavailable == 0 && maxSurge == 0 {
		maxUnavailable = 1
	}
	now := metav1.NewTime(c.clock.Now())
	available := func(pod *corev1.Pod) bool { return podutils.IsPodAvailable(pod, ds.Spec.MinReadySeconds, now) }
	generation := templateGeneration(ds)
	names := make([]string, 0, len(byNode))
	for n := range byNode {
		names = append(names, n)
	}
	sort.Strings(names)

	if maxSurge == 0 {
		var unavailable int
		var allowed, candidates []string
		for _, n := range names {
			newPod, oldPod, ok := updatedPodsOnNode(byNode[n], hash, generation)
			if !ok {
				unavailable++ // excess pods: plan deals with them first
				continue
			}
			switch {
			case oldPod == nil && newPod == nil, oldPod != nil && newPod != nil:
				unavailable++
			case newPod != nil:
				if !available(newPod) {
					unavailable++
				}
			case !available(oldPod):
				allowed = append(allowed, oldPod.Name)
				unavailable++
			case unavailable >= maxUnavailable:
			default:
				candidates = append(candidates, oldPod.Name)
			}
		}
		remaining := min(max(maxUnavailable-unavailable, 0), len(candidates))
		return nil, append(allowed, candidates[:remaining]...), nil
	}

	var (
		oldToDelete, shouldNotRun, candidateNodes, allowedNodes []string
		surge, numAvailable                                     int
	)
	for _, n := range names {
		newPod, oldPod, ok := updatedPodsOnNode(byNode[n], hash, generation)
		if !ok {
			surge++
			continue
		}
		if oldPod != nil {
			if available(oldPod) {
				numAvailable++
			}
		} else if newPod != nil && available(newPod) {
			numAvailable++
		}
		switch {
		case oldPod == nil:
		case newPod == nil:
			node := nodeByName[n]
			if node == nil {
				return nil, nil, fmt.Errorf("node %q is not known", n)
			}
			run, _ := p.shouldRun(node)
			if !available(oldPod) {
				if !run {
					oldToDelete = append(oldToDelete, oldPod.Name)
					continue
				}
				allowedNodes = append(allowedNodes, n)
				continue
			}
			if !run {
				shouldNotRun = append(shouldNotRun, oldPod.Name)
				continue
			}
			if surge >= maxSurge {
				continue
			}
			candidateNodes = append(candidateNodes, n)
		default:
			if !available(newPod) {
				surge++
				continue
			}
			oldToDelete = append(oldToDelete, oldPod.Name)
		}
	}
	if deletable := min(numAvailable-desired, len(shouldNotRun)); deletable > 0 {
		oldToDelete = append(oldToDelete, shouldNotRun[:deletable]...)
	}
	remaining := min(max(maxSurge-surge, 0), len(candidateNodes))
	return append(allowedNodes, candidateNodes[:remaining]...), oldToDelete, nil
}

// updatedPodsOnNode splits a node's live pods into the updated one and the
// old one; ok is false when there is more than one of either.
func updatedPodsOnNode(pods []*corev1.Pod, hash string, generation *int64) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if isUpdated(pod, hash, generation) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = pod
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = pod
		}
	}
	return newPod, oldPod, true
}

// --- history

// revisionPatch is what a DaemonSet's revision stores.
func revisionPatch(ds *appsv1.DaemonSet) ([]byte, error) { return revision.TemplatePatch(ds) }

// constructHistory returns the revision of the current template (created,
// or renumbered to the newest when the template went back to an old one)
// and the other revisions, as upstream.
func (c *Controller) constructHistory(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) (cur *appsv1.ControllerRevision, old []*appsv1.ControllerRevision, err error) {
	histories, err := c.history.Claim(ctx, revision.Owner{Object: ds, GVK: controllerKind, Selector: selector, CanAdopt: func(ctx context.Context) error { return c.canAdopt(ctx, ds) }})
	if err != nil {
		return nil, nil, err
	}
	patch, err := revisionPatch(ds)
	if err != nil {
		return nil, nil, err
	}
	var current []*appsv1.ControllerRevision
	for _, h := range histories {
		if bytes.Equal(h.Data.Raw, patch) {
			current = append(current, h)
		} else {
			old = append(old, h)
		}
	}
	next := revision.Max(old) + 1
	if len(current) == 0 {
		cur, err = c.snapshot(ctx, ds, patch, next)
		return cur, old, err
	}
	cur, err = c.dedupCurrent(ctx, ds, current)
	if err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		cur, err = c.history.Renumber(ctx, cur, next)
		if err != nil {
			return nil, nil, err
		}
	}
	return cur, old, nil
}

// dedupCurrent keeps the newest of several revisions of the current
// template, relabels pods of the others and deletes them.
func (c *Controller) dedupCurrent(ctx context.Context, ds *appsv1.DaemonSet, current []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	if len(current) == 1 {
		return current[0], nil
	}
	keep := current[0]
	for _, r := range current {
		if r.Revision >= keep.Revision {
			keep = r
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	pods, err := c.claimPods(ctx, ds, sel)
	if err != nil {
		return nil, err
	}
	keepHash := keep.Labels[HashLabel]
	for _, pod := range pods {
		if pod.Labels[HashLabel] == keepHash {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, HashLabel, keepHash)
		if _, err := c.client.CoreV1().Pods(ds.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return nil, fmt.Errorf("relabel pod %s: %w", pod.Name, err)
		}
	}
	for _, r := range current {
		if r.Name != keep.Name {
			if err := c.history.Delete(ctx, r); err != nil {
				return nil, err
			}
		}
	}
	return keep, nil
}

// snapshot creates the revision of the current template, named
// <daemonset>-<template hash>. A name taken by another template (a hash
// collision) bumps status.collisionCount and fails the sync, which then
// retries with the new hash, as upstream.
func (c *Controller) snapshot(ctx context.Context, ds *appsv1.DaemonSet, patch []byte, number int64) (*appsv1.ControllerRevision, error) {
	hash := revision.TemplateHash(&ds.Spec.Template, ds.Status.CollisionCount)
	name := ds.Name + "-" + hash
	lbls := map[string]string{}
	for k, v := range ds.Spec.Template.Labels {
		lbls[k] = v
	}
	lbls[HashLabel] = hash
	r := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       ds.Namespace,
			Labels:          lbls,
			Annotations:     ds.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: number,
	}
	created, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Create(ctx, r, metav1.CreateOptions{})
	if err == nil {
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create controllerrevision %s: %w", name, err)
	}
	existing, getErr := c.client.AppsV1().ControllerRevisions(ds.Namespace).Get(ctx, name, metav1.GetOptions{})
	if getErr != nil {
		return nil, getErr
	}
	if bytes.Equal(existing.Data.Raw, patch) {
		return existing, nil
	}
	fresh, getErr := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	if getErr != nil {
		return nil, getErr
	}
	if !reflect.DeepEqual(fresh.Status.CollisionCount, ds.Status.CollisionCount) {
		return nil, fmt.Errorf("stale collision count of daemon set %s; retrying once it is updated", key(ds))
	}
	var n int32
	if fresh.Status.CollisionCount != nil {
		n = *fresh.Status.CollisionCount
	}
	n++
	fresh.Status.CollisionCount = &n
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("hash collision on controllerrevision %s: collisionCount is now %d", name, n)
}

// cleanupHistory deletes the oldest revisions beyond revisionHistoryLimit
// that no live pod still runs.
func (c *Controller) cleanupHistory(ctx context.Context, ds *appsv1.DaemonSet, old []*appsv1.ControllerRevision, byNode map[string][]*corev1.Pod) error {
	limit := 10
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	toKill := len(old) - limit
	if toKill <= 0 {
		return nil
	}
	live := map[string]bool{}
	for _, pods := range byNode {
		for _, pod := range pods {
			if h := pod.Labels[HashLabel]; h != "" {
				live[h] = true
			}
		}
	}
	sorted := append([]*appsv1.ControllerRevision(nil), old...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Revision < sorted[j].Revision })
	for _, r := range sorted {
		if toKill <= 0 {
			break
		}
		if live[r.Labels[HashLabel]] {
			continue
		}
		if err := c.history.Delete(ctx, r); err != nil {
			return err
		}
		toKill--
	}
	return nil
}
