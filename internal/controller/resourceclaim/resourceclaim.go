// Package resourceclaim is the resource-claim controller, as upstream's:
// it creates a ResourceClaim from its template for every pod claim that
// names one (owned by the pod, named <pod>-<claim>-<random>, recorded in
// the pod's status.resourceClaimStatuses), reserves allocated claims for
// pods bound without the scheduler, and when pods are done or gone it
// removes them from the claims' reservedFor, deallocates a claim nobody
// uses any more (dropping the delete-protection finalizer the scheduler
// added) and deletes the claims it generated for finished pods.
package resourceclaim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is upstream's controller name (--controllers).
const Name = "resourceclaim-controller"

// fieldManager owns the pod status entries the controller applies.
const fieldManager = "ResourceClaimController"

// DefaultWorkers is the number of workers (upstream runs ten).
const DefaultWorkers = 10

// Controller is the resource-claim controller.
type Controller struct {
	client    kubernetes.Interface
	pods      corelisters.PodLister
	claims    resourcelisters.ResourceClaimLister
	templates resourcelisters.ResourceClaimTemplateLister
	synced    []cache.InformerSynced
	recorder  record.EventRecorder
	queue     *worker.Queue[string]

	// created remembers the claims this controller created, by pod UID
	// and pod claim name, until the informer shows them: a sync that runs
	// before then must not create a second one (upstream keeps a mutation
	// cache for the same reason).
	mu      sync.Mutex
	created map[createdKey]*resourceapi.ResourceClaim
}

type createdKey struct {
	pod   types.UID
	claim string
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	var clk clock.WithTicker = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	recorder := cc.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	workers := cc.Options.ConcurrentSyncs[Name]
	if workers <= 0 {
		workers = DefaultWorkers
	}
	pods := cc.Informers.Core().V1().Pods()
	claims := cc.Informers.Resource().V1().ResourceClaims()
	templates := cc.Informers.Resource().V1().ResourceClaimTemplates()
	c := &Controller{
		client: cc.Client, pods: pods.Lister(), claims: claims.Lister(), templates: templates.Lister(),
		synced:   []cache.InformerSynced{pods.Informer().HasSynced, claims.Informer().HasSynced, templates.Informer().HasSynced},
		recorder: recorder,
		created:  map[createdKey]*resourceapi.ResourceClaim{},
	}
	c.queue = worker.NewQueue("resource_claim", c.Sync, worker.Options[string]{Workers: workers, Clock: clk})
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(obj, false) },
		UpdateFunc: func(_, obj any) { c.podChanged(obj, false) },
		DeleteFunc: func(obj any) { c.podChanged(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("%s: pods handler: %w", Name, err)
	}
	if _, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, obj any) { c.claimChanged(obj) },
		DeleteFunc: c.claimChanged,
	}); err != nil {
		return nil, fmt.Errorf("%s: claims handler: %w", Name, err)
	}
	if _, err := templates.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.templateAdded,
	}); err != nil {
		return nil, fmt.Errorf("%s: templates handler: %w", Name, err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

const (
	podPrefix   = "pod:"
	claimPrefix = "claim:"
)

func (c *Controller) podChanged(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	if deleted {
		c.mu.Lock()
		for k := range c.created {
			if k.pod == pod.UID {
				delete(c.created, k)
			}
		}
		c.mu.Unlock()
	}
	if !deleted && pod.DeletionTimestamp == nil && !isPodDone(pod) {
		c.queue.Add(podPrefix + pod.Namespace + "/" + pod.Name)
	}
	// The pod's claims may need releasing (done, deleted) or reserving.
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil {
			c.queue.Add(claimPrefix + pod.Namespace + "/" + *st.ResourceClaimName)
		}
	}
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil {
			c.queue.Add(claimPrefix + pod.Namespace + "/" + *pc.ResourceClaimName)
		}
	}
}

func (c *Controller) claimChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	c.queue.Add(claimPrefix + claim.Namespace + "/" + claim.Name)
	if ref := metav1.GetControllerOfNoCopy(claim); ref != nil {
		if name := claim.Annotations[resourceapi.PodResourceClaimAnnotation]; name != "" {
			c.mu.Lock()
			delete(c.created, createdKey{ref.UID, name})
			c.mu.Unlock()
		}
	}
	// A pod waiting for its generated claim, or for an allocation to be
	// reserved, looks again.
	if ref := metav1.GetControllerOfNoCopy(claim); ref != nil && ref.Kind == "Pod" && ref.APIVersion == "v1" {
		c.queue.Add(podPrefix + claim.Namespace + "/" + ref.Name)
	}
	for _, r := range claim.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			c.queue.Add(podPrefix + claim.Namespace + "/" + r.Name)
		}
	}
}

// templateAdded retries the pods of the namespace that name the template.
func (c *Controller) templateAdded(obj any) {
	t, ok := obj.(*resourceapi.ResourceClaimTemplate)
	if !ok {
		return
	}
	pods, err := c.pods.Pods(t.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, pod := range pods {
		for _, pc := range pod.Spec.ResourceClaims {
			if pc.ResourceClaimTemplateName != nil && *pc.ResourceClaimTemplateName == t.Name {
				c.queue.Add(podPrefix + pod.Namespace + "/" + pod.Name)
			}
		}
	}
}

// Sync handles one pod or claim key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	switch {
	case strings.HasPrefix(key, podPrefix):
		ns, name, err := cache.SplitMetaNamespaceKey(strings.TrimPrefix(key, podPrefix))
		if err != nil {
			return nil
		}
		return c.syncPod(ctx, ns, name)
	case strings.HasPrefix(key, claimPrefix):
		ns, name, err := cache.SplitMetaNamespaceKey(strings.TrimPrefix(key, claimPrefix))
		if err != nil {
			return nil
		}
		return c.syncClaim(ctx, ns, name)
	}
	return nil
}

// syncPod creates the pod's missing claims from their templates, records
// them in its status and, once it is bound, reserves its allocated claims.
func (c *Controller) syncPod(ctx context.Context, ns, name string) error {
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil || isPodDone(pod) {
		return nil
	}
	created := map[string]string{}
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		claim, err := c.ensureClaim(ctx, pod, pc)
		if err != nil {
			c.recorder.Event(pod, corev1.EventTypeWarning, "FailedResourceClaimCreation", fmt.Sprintf("PodResourceClaim %s: %v", pc.Name, err))
			return fmt.Errorf("pod %s/%s, PodResourceClaim %s: %w", ns, name, pc.Name, err)
		}
		if claim != nil {
			created[pc.Name] = claim.Name
		}
	}
	if len(created) > 0 {
		merged := map[string]string{}
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil {
				merged[st.Name] = *st.ResourceClaimName
			}
		}
		maps.Copy(merged, created)
		var statuses []*corev1apply.PodResourceClaimStatusApplyConfiguration
		for _, n := range slices.Sorted(maps.Keys(merged)) {
			statuses = append(statuses, corev1apply.PodResourceClaimStatus().WithName(n).WithResourceClaimName(merged[n]))
		}
		apply := corev1apply.Pod(name, ns).WithStatus(corev1apply.PodStatus().WithResourceClaimStatuses(statuses...))
		if _, err := c.client.CoreV1().Pods(ns).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("update pod %s/%s resourceClaimStatuses: %w", ns, name, err)
		}
	}
	if pod.Spec.NodeName == "" {
		return nil // the scheduler allocates and reserves
	}
	// Bound without the scheduler (spec.nodeName set by hand): reserve
	// what is allocated.
	for i := range pod.Spec.ResourceClaims {
		claimName, checkOwner, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || claimName == nil {
			continue
		}
		claim, err := c.claims.ResourceClaims(ns).Get(*claimName)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		if checkOwner && resourceclaim.IsForPod(pod, claim, false) != nil {
			continue
		}
		if claim.Status.Allocation != nil && !resourceclaim.IsReservedForPod(pod, claim, false) && resourceclaim.CanBeReserved(claim) {
			claim = claim.DeepCopy()
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
			if _, err := c.client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("reserve claim %s for pod: %w", claim.Name, err)
			}
		}
	}
	return nil
}

// ensureClaim returns the claim generated for pc from its template,
// creating it if there is none (nil when pc names a claim directly).
func (c *Controller) ensureClaim(ctx context.Context, pod *corev1.Pod, pc *corev1.PodResourceClaim) (*resourceapi.ResourceClaim, error) {
	if pc.ResourceClaimTemplateName == nil {
		return nil, nil
	}
	if name, mustCheckOwner, err := resourceclaim.Name(pod, pc); err == nil && name != nil {
		claim, err := c.claims.ResourceClaims(pod.Namespace).Get(*name)
		if err == nil && (!mustCheckOwner || resourceclaim.IsForPod(pod, claim, false) == nil) {
			return nil, nil // recorded and present
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	} else if err != nil && !errors.Is(err, resourceclaim.ErrClaimNotFound) {
		return nil, err
	}
	// One created before the status was written: by this controller a
	// moment ago (not in the informer yet), or before a restart.
	ck := createdKey{pod.UID, pc.Name}
	c.mu.Lock()
	mine := c.created[ck]
	c.mu.Unlock()
	if mine != nil {
		return mine, nil
	}
	existing, err := c.claims.ResourceClaims(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, claim := range existing {
		if ref := metav1.GetControllerOfNoCopy(claim); ref != nil && ref.UID == pod.UID && claim.Annotations[resourceapi.PodResourceClaimAnnotation] == pc.Name {
			return claim, nil
		}
	}
	template, err := c.templates.ResourceClaimTemplates(pod.Namespace).Get(*pc.ResourceClaimTemplateName)
	if err != nil {
		return nil, fmt.Errorf("resource claim template %q: %w", *pc.ResourceClaimTemplateName, err)
	}
	annotations := maps.Clone(template.Spec.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[resourceapi.PodResourceClaimAnnotation] = pc.Name
	generateName := pod.Name + "-" + pc.Name + "-"
	if max := 57; len(generateName) > max {
		// Room for the random suffix within 63 characters, shortening both
		// parts in proportion, as upstream does.
		generateName = pod.Name[:len(pod.Name)*max/len(generateName)] + "-" + pc.Name[:len(pc.Name)*max/len(generateName)]
	}
	yes := true
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    generateName,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
			Annotations:     annotations,
			Labels:          template.Spec.ObjectMeta.Labels,
		},
		Spec: template.Spec.Spec,
	}
	out, err := c.client.ResourceV1().ResourceClaims(pod.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create ResourceClaim %s: %w", generateName, err)
	}
	c.mu.Lock()
	c.created[ck] = out
	c.mu.Unlock()
	return out, nil
}

// syncClaim releases the claim from pods that are done or gone,
// deallocates it once nobody holds it, and deletes a generated claim whose
// pod is done.
func (c *Controller) syncClaim(ctx context.Context, ns, name string) error {
	claim, err := c.claims.ResourceClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var remaining []resourceapi.ResourceClaimConsumerReference
	for _, r := range claim.Status.ReservedFor {
		if r.APIGroup != "" || r.Resource != "pods" {
			remaining = append(remaining, r)
			continue
		}
		pod, err := c.pods.Pods(ns).Get(r.Name)
		switch {
		case apierrors.IsNotFound(err):
			// The cache may lag a pod created a moment ago: ask the API.
			live, err := c.client.CoreV1().Pods(ns).Get(ctx, r.Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err == nil && live.UID == r.UID && !isPodDone(live) {
				remaining = append(remaining, r)
			}
		case err != nil:
			return err
		case pod.UID != r.UID, isPodDone(pod):
		default:
			remaining = append(remaining, r)
		}
	}
	protected := slices.Contains(claim.Finalizers, resourceapi.Finalizer)
	switch {
	case len(remaining) < len(claim.Status.ReservedFor):
		claim = claim.DeepCopy()
		claim.Status.ReservedFor = remaining
		if len(remaining) == 0 && protected {
			claim.Status.Allocation = nil
		}
		if claim, err = c.client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if protected && claim.Status.Allocation == nil {
			if err := c.dropFinalizer(ctx, claim); err != nil {
				return err
			}
		}
	case protected && claim.DeletionTimestamp != nil && len(remaining) == 0:
		if claim.Status.Allocation != nil {
			claim = claim.DeepCopy()
			claim.Status.Allocation = nil
			if claim, err = c.client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		if err := c.dropFinalizer(ctx, claim); err != nil {
			return err
		}
	}
	if len(remaining) > 0 {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(claim)
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || claim.DeletionTimestamp != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return nil // the garbage collector deletes it with its pod
	}
	if err != nil {
		return err
	}
	if pod.UID != ref.UID || isPodDone(pod) {
		err := c.client.ResourceV1().ResourceClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &claim.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete unused generated claim %s/%s: %w", ns, claim.Name, err)
		}
	}
	return nil
}

func (c *Controller) dropFinalizer(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	claim = claim.DeepCopy()
	claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == resourceapi.Finalizer })
	_, err := c.client.ResourceV1().ResourceClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
	return err
}

// isPodDone is upstream's: the pod will never run (again).
func isPodDone(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		(pod.DeletionTimestamp != nil && pod.Spec.NodeName == "")
}
