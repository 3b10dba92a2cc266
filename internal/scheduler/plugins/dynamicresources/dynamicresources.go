// Package dynamicresources is the scheduler's DynamicResources plugin:
// pods that name ResourceClaims (directly, or through templates that the
// resource-claim controller turns into claims) are placed only on nodes
// where every claim is, or can be, allocated devices from the
// ResourceSlices, matching their DeviceClasses' CEL selectors. PreBind
// writes the allocation and reserves the claim for the pod, as upstream
// does; the resource-claim controller releases and deallocates it when the
// pod is done.
//
// The allocation itself is upstream's structured-parameters allocator
// (k8s.io/dynamic-resource-allocation/structured), used as a library like
// the CRD schema packages: it decides exactly as kube-scheduler does which
// devices fit. The plugin around it is Skiff's.
package dynamicresources

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	draapi "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name in profiles, as upstream's.
const Name = "DynamicResources"

// Finalizer keeps an allocated claim until it is deallocated (upstream's
// resource.kubernetes.io/delete-protection).
const Finalizer = resourceapi.Finalizer

// features are the allocator features upstream v1.37 enables by default
// (GA, or beta and on by default).
var features = structured.Features{
	AdminAccess:          true,
	PrioritizedList:      true,
	DeviceTaints:         true,
	PartitionableDevices: true,
	ConsumableCapacity:   true,
}

// DynamicResources is the plugin.
type DynamicResources struct {
	client  kubernetes.Interface
	claims  resourcelisters.ResourceClaimLister
	classes resourcelisters.DeviceClassLister
	slices  resourcelisters.ResourceSliceLister
	cel     *draapi.Cache

	// inFlight holds the allocations Reserve made that the claim informer
	// has not shown yet, by claim UID, so that the next pod does not take
	// the same devices.
	mu       sync.Mutex
	inFlight map[types.UID]*resourceapi.ResourceClaim
}

var (
	_ framework.PreFilterPlugin = (*DynamicResources)(nil)
	_ framework.FilterPlugin    = (*DynamicResources)(nil)
	_ framework.ReservePlugin   = (*DynamicResources)(nil)
	_ framework.PreBindPlugin   = (*DynamicResources)(nil)
)

// New builds the plugin on the handle's informers.
func New(_ context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
	pl := &DynamicResources{client: h.ClientSet(), cel: draapi.NewCache(10, draapi.Features{}), inFlight: map[types.UID]*resourceapi.ResourceClaim{}}
	if f := h.SharedInformerFactory(); f != nil {
		pl.claims = f.Resource().V1().ResourceClaims().Lister()
		pl.classes = f.Resource().V1().DeviceClasses().Lister()
		pl.slices = f.Resource().V1().ResourceSlices().Lister()
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*DynamicResources) Name() string { return Name }

const stateKey framework.StateKey = Name

type stateData struct {
	// claims are the pod's claims in spec order; toAllocate those of
	// them without an allocation.
	claims     []*resourceapi.ResourceClaim
	toAllocate []*resourceapi.ResourceClaim
	allocator  structured.Allocator

	mu     sync.Mutex
	byNode map[string][]resourceapi.AllocationResult
	// chosen are the allocations Reserve took on the chosen node.
	chosen []resourceapi.AllocationResult
}

// Clone shares the state, as upstream's does: Filter results for a node
// are the same whichever copy computed them.
func (s *stateData) Clone() framework.StateData { return s }

// PreFilter looks up the pod's claims and prepares an allocator for those
// that need devices.
func (pl *DynamicResources) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	if pl.claims == nil {
		return nil, framework.AsStatus(errors.New("DynamicResources: no informers to read claims from"))
	}
	s := &stateData{byNode: map[string][]resourceapi.AllocationResult{}}
	for i := range pod.Spec.ResourceClaims {
		name, mustCheckOwner, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			// A claim from a template that the resource-claim controller
			// has not created yet: wait for it.
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
		}
		if name == nil {
			continue // not needed (upstream: a template that resolves to nothing)
		}
		claim, err := pl.claims.ResourceClaims(pod.Namespace).Get(*name)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("resourceclaim %q not found", *name))
			}
			return nil, framework.AsStatus(err)
		}
		if claim.DeletionTimestamp != nil {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("resourceclaim %q is being deleted", claim.Name))
		}
		if mustCheckOwner {
			if err := resourceclaim.IsForPod(pod, claim, false); err != nil {
				return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
			}
		}
		if claim = pl.withInFlight(claim); claim.Status.Allocation != nil {
			if !resourceclaim.CanBeReserved(claim) && !resourceclaim.IsReservedForPod(pod, claim, false) {
				return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "resourceclaim in use")
			}
		} else {
			s.toAllocate = append(s.toAllocate, claim)
		}
		s.claims = append(s.claims, claim)
	}
	if len(s.claims) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	if len(s.toAllocate) > 0 {
		allocated, err := pl.allocatedState()
		if err != nil {
			return nil, framework.AsStatus(fmt.Errorf("gather allocation state: %w", err))
		}
		slices, err := pl.slices.List(labels.Everything())
		if err != nil {
			return nil, framework.AsStatus(fmt.Errorf("list resource slices: %w", err))
		}
		s.allocator, err = structured.NewAllocator(ctx, features, *allocated, classLister{pl.classes}, slices, pl.cel)
		if err != nil {
			return nil, framework.AsStatus(err)
		}
	}
	state.Write(stateKey, s)
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (*DynamicResources) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter keeps nodes where the allocated claims are available and the
// others can be allocated.
func (pl *DynamicResources) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := read(state)
	if err != nil {
		return framework.AsStatus(err)
	}
	node := ni.Node()
	for _, claim := range s.claims {
		if a := claim.Status.Allocation; a != nil && a.NodeSelector != nil {
			matches, err := nodeaffinity.NewLazyErrorNodeSelector(a.NodeSelector).Match(node)
			if err != nil {
				return framework.AsStatus(err)
			}
			if !matches {
				return framework.NewStatus(framework.UnschedulableAndUnresolvable, "resourceclaim not available on the node")
			}
		}
	}
	if len(s.toAllocate) == 0 {
		return nil
	}
	results, err := s.allocator.Allocate(ctx, node, s.toAllocate)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(results) != len(s.toAllocate) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "cannot allocate all claims")
	}
	s.mu.Lock()
	s.byNode[node.Name] = results
	s.mu.Unlock()
	return nil
}

// Reserve takes the chosen node's allocations and remembers them as in
// flight until the claims show them.
func (pl *DynamicResources) Reserve(_ context.Context, state *framework.CycleState, _ *v1.Pod, nodeName string) *framework.Status {
	s, err := read(state)
	if err != nil || len(s.toAllocate) == 0 {
		return nil
	}
	s.mu.Lock()
	results := s.byNode[nodeName]
	s.chosen = results
	s.mu.Unlock()
	if len(results) != len(s.toAllocate) {
		return framework.AsStatus(fmt.Errorf("internal error: %d allocations for %d claims on node %s", len(results), len(s.toAllocate), nodeName))
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for i, claim := range s.toAllocate {
		c := claim.DeepCopy()
		c.Status.Allocation = results[i].DeepCopy()
		pl.inFlight[claim.UID] = c
	}
	return nil
}

// Unreserve forgets the in-flight allocations of a pod that did not bind.
func (pl *DynamicResources) Unreserve(_ context.Context, state *framework.CycleState, _ *v1.Pod, _ string) {
	s, err := read(state)
	if err != nil {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, claim := range s.toAllocate {
		delete(pl.inFlight, claim.UID)
	}
}

// PreBind writes each claim's allocation (with the delete-protection
// finalizer) and reserves it for the pod.
func (pl *DynamicResources) PreBind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, _ string) *framework.Status {
	s, err := read(state)
	if err != nil {
		return nil // no claims
	}
	allocations := map[types.UID]*resourceapi.AllocationResult{}
	for i, claim := range s.toAllocate {
		if i < len(s.chosen) {
			allocations[claim.UID] = &s.chosen[i]
		}
	}
	for _, claim := range s.claims {
		if err := pl.bindClaim(ctx, pod, claim, allocations[claim.UID]); err != nil {
			return framework.AsStatus(fmt.Errorf("claim %s: %w", claim.Name, err))
		}
	}
	return nil
}

func (pl *DynamicResources) bindClaim(ctx context.Context, pod *v1.Pod, claim *resourceapi.ResourceClaim, allocation *resourceapi.AllocationResult) error {
	ref := resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}
	for attempt := 0; ; attempt++ {
		fresh, err := pl.client.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if fresh.UID != claim.UID {
			return errors.New("got deleted in the meantime")
		}
		if allocation != nil {
			switch {
			case fresh.Status.Allocation == nil:
			case equality.Semantic.DeepEqual(fresh.Status.Allocation, allocation):
				allocation = nil // our own write, seen after a conflict
			default:
				return errors.New("got allocated elsewhere in the meantime")
			}
		}
		if allocation != nil && !hasFinalizer(fresh) {
			fresh.Finalizers = append(fresh.Finalizers, Finalizer)
			if fresh, err = pl.client.ResourceV1().ResourceClaims(claim.Namespace).Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
				if apierrors.IsConflict(err) && attempt < 5 {
					continue
				}
				return fmt.Errorf("add finalizer: %w", err)
			}
		}
		if allocation == nil && resourceclaim.IsReservedForPod(pod, fresh, false) {
			return nil
		}
		if allocation != nil {
			fresh.Status.Allocation = allocation
		} else if fresh.Status.Allocation == nil {
			return errors.New("got deallocated in the meantime")
		}
		if !resourceclaim.IsReservedForPod(pod, fresh, false) {
			if !resourceclaim.CanBeReserved(fresh) {
				return errors.New("is reserved for too many consumers")
			}
			fresh.Status.ReservedFor = append(fresh.Status.ReservedFor, ref)
		}
		_, err = pl.client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{})
		if err == nil {
			pl.mu.Lock()
			delete(pl.inFlight, claim.UID)
			pl.mu.Unlock()
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return fmt.Errorf("add allocation and reservation: %w", err)
		}
	}
}

// classLister adapts the informer's lister to the allocator's.
type classLister struct {
	l resourcelisters.DeviceClassLister
}

func (c classLister) List() ([]*resourceapi.DeviceClass, error) { return c.l.List(labels.Everything()) }
func (c classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	return c.l.Get(name)
}

func hasFinalizer(c *resourceapi.ResourceClaim) bool {
	for _, f := range c.Finalizers {
		if f == Finalizer {
			return true
		}
	}
	return false
}

func read(state *framework.CycleState) (*stateData, error) {
	v, err := state.Read(stateKey)
	if err != nil {
		return nil, err
	}
	s, ok := v.(*stateData)
	if !ok {
		return nil, fmt.Errorf("%s: unexpected state %T", Name, v)
	}
	return s, nil
}

// withInFlight is claim as Reserve left it, until the informer catches up.
func (pl *DynamicResources) withInFlight(claim *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	c, ok := pl.inFlight[claim.UID]
	if !ok {
		return claim
	}
	if claim.Status.Allocation != nil {
		delete(pl.inFlight, claim.UID) // the informer shows it now
		return claim
	}
	return c
}

// allocatedState is every device allocated to a claim, stored or in flight.
func (pl *DynamicResources) allocatedState() (*structured.AllocatedState, error) {
	claims, err := pl.claims.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	st := &structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	add := func(c *resourceapi.ResourceClaim) {
		if c.Status.Allocation == nil {
			return
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID != nil {
				st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			st.AllocatedDevices.Insert(id)
		}
	}
	seen := sets.New[types.UID]()
	for _, c := range claims {
		seen.Insert(c.UID)
		add(pl.withInFlight(c))
	}
	pl.mu.Lock()
	for uid, c := range pl.inFlight {
		if !seen.Has(uid) {
			add(c)
		}
	}
	pl.mu.Unlock()
	return st, nil
}
