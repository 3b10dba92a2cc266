// Package namespace is the namespace lifecycle controller: when a
// namespace is deleted it deletes every namespaced object in it (every
// resource discovery lists with a delete verb), records on the
// namespace's conditions what is left and why, and, once nothing is left,
// removes the "kubernetes" finalizer through the finalize subresource so
// that the API server can remove the namespace.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry.
const Name = "namespace"

// RemainingRequeue is how soon a namespace whose content is still going
// away (graceful deletion, finalizers) is looked at again.
const RemainingRequeue = 2 * time.Second

// Controller finalizes deleted namespaces.
type Controller struct {
	client    kubernetes.Interface
	discovery discovery.DiscoveryInterface
	metadata  metadata.Interface
	clock     clock.Clock
	nsLister  corelisters.NamespaceLister
	synced    cache.InformerSynced
	queue     *worker.Queue[string]
}

// New builds the controller from cc (Client, Metadata and the namespace
// informer).
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	if cc.Metadata == nil {
		return nil, errors.New("namespace: a metadata client is required")
	}
	inf := cc.Informers.Core().V1().Namespaces()
	c := &Controller{
		client:    cc.Client,
		discovery: cc.Client.Discovery(),
		metadata:  cc.Metadata,
		clock:     cc.Clock,
		nsLister:  inf.Lister(),
		synced:    inf.Informer().HasSynced,
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	workers := 10
	if n := cc.Options.ConcurrentSyncs[Name]; n > 0 {
		workers = n
	}
	c.queue = worker.NewQueue(Name, c.sync, worker.Options[string]{
		Workers:     workers,
		Clock:       cc.Clock,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Minute),
	})
	enqueue := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("namespace: handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, []cache.InformerSynced{c.synced}, c.queue)
}

// remainingError means the content is going away but is not gone yet:
// the namespace is looked at again after RemainingRequeue, which is not a
// failure.
type remainingError struct{ what string }

func (e *remainingError) Error() string { return "content remaining: " + e.what }

func (e *remainingError) Unwrap() error { return worker.RequeueAfter(RemainingRequeue) }

// sync deletes the content of namespace name if it is being deleted, and
// finalizes it once empty.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.nsLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp == nil || !hasFinalizer(ns) {
		return nil
	}
	// The cache may lag a finalize we already did: confirm with the server.
	ns, err = c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp == nil || !hasFinalizer(ns) {
		return nil
	}

	res := c.deleteContent(ctx, name)
	conds := conditionsFor(res)
	if ns, err = c.updateConditions(ctx, ns, conds); err != nil {
		return err
	}
	if res.discoveryErr != nil {
		return fmt.Errorf("discovery: %w", res.discoveryErr)
	}
	if len(res.deleteErrs) > 0 {
		return fmt.Errorf("delete content of %s: %w", name, errors.Join(res.deleteErrs...))
	}
	if len(res.remaining) > 0 {
		return &remainingError{what: remainingMessage(res.remaining)}
	}
	return c.finalize(ctx, ns)
}

// result is what one deletion pass found.
type result struct {
	discoveryErr error
	// failedGroups are the group versions discovery could not list.
	failedGroups []string
	// deleteErrs are per-resource failures; failedResources names them.
	deleteErrs      []error
	failedResources []string
	// remaining counts objects left per resource ("pods", "widgets.example.com").
	remaining map[string]int
	// finalizers counts remaining objects per finalizer.
	finalizers map[string]int
}

// deleteContent deletes every namespaced object in ns and counts what
// is left. Pods go first, and nothing else is deleted while any pod is
// left (upstream's ordered namespace deletion, KEP-5080): a pod's
// containers may still use the namespace's Secrets, ConfigMaps and
// ServiceAccounts, and a NetworkPolicy still guards it while it stops.
func (c *Controller) deleteContent(ctx context.Context, ns string) result {
	res := result{remaining: map[string]int{}, finalizers: map[string]int{}}
	lists, err := preferredNamespacedResources(c.discovery)
	if err != nil {
		res.discoveryErr = err
		var gdf *discovery.ErrGroupDiscoveryFailed
		if errors.As(err, &gdf) {
			for gv := range gdf.Groups {
				res.failedGroups = append(res.failedGroups, gv.String())
			}
			sort.Strings(res.failedGroups)
		} else if len(lists) == 0 {
			res.failedGroups = []string{err.Error()}
			return res
		}
	}
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	type resource struct {
		gvr   schema.GroupVersionResource
		verbs []string
	}
	var others []resource
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !sets.New(r.Verbs...).Has("delete") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			if gvr == pods {
				c.deleteAndCount(ctx, ns, gvr, r.Verbs, &res)
				continue
			}
			others = append(others, resource{gvr, r.Verbs})
		}
	}
	if res.remaining[resourceName(pods)] > 0 {
		return res
	}
	for _, r := range others {
		c.deleteAndCount(ctx, ns, r.gvr, r.verbs, &res)
	}
	return res
}

// deleteAndCount deletes the objects of gvr in ns and adds what is left
// (and their finalizers) to res.
func (c *Controller) deleteAndCount(ctx context.Context, ns string, gvr schema.GroupVersionResource, verbs []string, res *result) {
	if err := c.deleteResource(ctx, ns, gvr, verbs); err != nil {
		res.deleteErrs = append(res.deleteErrs, err)
		res.failedResources = append(res.failedResources, resourceName(gvr))
		return
	}
	if !sets.New(verbs...).Has("list") {
		return
	}
	items, err := c.metadata.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
			res.deleteErrs = append(res.deleteErrs, fmt.Errorf("list %s: %w", gvr, err))
			res.failedResources = append(res.failedResources, resourceName(gvr))
		}
		return
	}
	if n := len(items.Items); n > 0 {
		res.remaining[resourceName(gvr)] += n
	}
	for _, it := range items.Items {
		for _, f := range it.Finalizers {
			res.finalizers[f]++
		}
	}
}

// deleteResource deletes every object of gvr in ns: one deletecollection
// where the resource has it, else a list and one delete per object.
func (c *Controller) deleteResource(ctx context.Context, ns string, gvr schema.GroupVersionResource, verbs []string) error {
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	client := c.metadata.Resource(gvr).Namespace(ns)
	v := sets.New(verbs...)
	if v.Has("deletecollection") {
		err := client.DeleteCollection(ctx, opts, metav1.ListOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsMethodNotSupported(err) {
			return fmt.Errorf("deletecollection %s: %w", gvr, err)
		}
	}
	if !v.Has("list") {
		return nil
	}
	items, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", gvr, err)
	}
	var errs []error
	for _, it := range items.Items {
		if it.DeletionTimestamp != nil {
			continue
		}
		if err := client.Delete(ctx, it.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s: %w", gvr, it.Name, err))
		}
	}
	return errors.Join(errs...)
}

// resourceName names a resource as upstream's conditions do: "pods" for
// the core group, "widgets.example.com" otherwise.
func resourceName(gvr schema.GroupVersionResource) string {
	return gvr.GroupResource().String()
}

// Condition types and reasons, as upstream's namespace controller sets them.
const (
	DiscoveryFailure  corev1.NamespaceConditionType = "NamespaceDeletionDiscoveryFailure"
	GroupVersionParse corev1.NamespaceConditionType = "NamespaceDeletionGroupVersionParsingFailure"
	ContentFailure    corev1.NamespaceConditionType = "NamespaceDeletionContentFailure"
	ContentRemaining  corev1.NamespaceConditionType = "NamespaceContentRemaining"
	FinalizersRemain  corev1.NamespaceConditionType = "NamespaceFinalizersRemaining"
)

// conditionsFor is the pure mapping from a deletion pass to the
// namespace conditions that explain it.
func conditionsFor(res result) []corev1.NamespaceCondition {
	cond := func(t corev1.NamespaceConditionType, bad bool, badReason, badMsg, okReason, okMsg string) corev1.NamespaceCondition {
		if bad {
			return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: badReason, Message: badMsg}
		}
		return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: okReason, Message: okMsg}
	}
	var finalizers []string
	for f, n := range res.finalizers {
		finalizers = append(finalizers, fmt.Sprintf("%s in %d resource instances", f, n))
	}
	sort.Strings(finalizers)
	return []corev1.NamespaceCondition{
		cond(DiscoveryFailure, res.discoveryErr != nil, "DiscoveryFailed",
			fmt.Sprintf("Discovery failed for some groups, %d failing: %s", len(res.failedGroups), strings.Join(res.failedGroups, ", ")),
			"ResourcesDiscovered", "All resources successfully discovered"),
		cond(GroupVersionParse, false, "", "", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
		cond(ContentFailure, len(res.deleteErrs) > 0, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %s", len(res.deleteErrs), errors.Join(res.deleteErrs...)),
			"ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
		cond(ContentRemaining, len(res.remaining) > 0, "SomeResourcesRemain",
			"Some resources are remaining: "+remainingMessage(res.remaining),
			"ContentRemoved", "All content successfully removed"),
		cond(FinalizersRemain, len(finalizers) > 0, "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+strings.Join(finalizers, ", "),
			"ContentHasNoFinalizers", "All content-preserving finalizers finished"),
	}
}

func remainingMessage(remaining map[string]int) string {
	var parts []string
	for r, n := range remaining {
		parts = append(parts, fmt.Sprintf("%s has %d resource instances", r, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// updateConditions writes conds to the namespace status if they differ,
// keeping the transition time of conditions whose status is unchanged.
func (c *Controller) updateConditions(ctx context.Context, ns *corev1.Namespace, conds []corev1.NamespaceCondition) (*corev1.Namespace, error) {
	next := ns.DeepCopy()
	changed := false
	now := metav1.NewTime(c.clock.Now())
	for _, want := range conds {
		i := -1
		for j := range next.Status.Conditions {
			if next.Status.Conditions[j].Type == want.Type {
				i = j
			}
		}
		if i < 0 {
			want.LastTransitionTime = now
			next.Status.Conditions = append(next.Status.Conditions, want)
			changed = true
			continue
		}
		cur := &next.Status.Conditions[i]
		if cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
			continue
		}
		if cur.Status != want.Status {
			cur.LastTransitionTime = now
		}
		cur.Status, cur.Reason, cur.Message = want.Status, want.Reason, want.Message
		changed = true
	}
	if next.Status.Phase != corev1.NamespaceTerminating {
		next.Status.Phase = corev1.NamespaceTerminating
		changed = true
	}
	if !changed {
		return ns, nil
	}
	out, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status of namespace %s: %w", ns.Name, err)
	}
	return out, nil
}

// finalize removes the "kubernetes" finalizer from spec.finalizers.
func (c *Controller) finalize(ctx context.Context, ns *corev1.Namespace) error {
	next := ns.DeepCopy()
	next.Spec.Finalizers = nil
	for _, f := range ns.Spec.Finalizers {
		if f != corev1.FinalizerKubernetes {
			next.Spec.Finalizers = append(next.Spec.Finalizers, f)
		}
	}
	_, err := c.client.CoreV1().Namespaces().Finalize(ctx, next, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalize namespace %s: %w", ns.Name, err)
	}
	return nil
}

func hasFinalizer(ns *corev1.Namespace) bool {
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return true
		}
	}
	return false
}

// preferredNamespacedResources is discovery's namespaced resources in
// each group's preferred version. A partial failure returns what was
// found together with a *discovery.ErrGroupDiscoveryFailed.
func preferredNamespacedResources(d discovery.DiscoveryInterface) ([]*metav1.APIResourceList, error) {
	groups, lists, err := d.ServerGroupsAndResources()
	preferred := map[string]string{}
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.GroupVersion
	}
	var out []*metav1.APIResourceList
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		if p, ok := preferred[gv.Group]; ok && p != l.GroupVersion {
			continue
		}
		nl := &metav1.APIResourceList{GroupVersion: l.GroupVersion}
		for _, r := range l.APIResources {
			if r.Namespaced {
				nl.APIResources = append(nl.APIResources, r)
			}
		}
		out = append(out, nl)
	}
	return out, err
}
