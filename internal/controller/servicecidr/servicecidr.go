// Package servicecidr is upstream's service-cidr-controller: it puts the
// networking.k8s.io/service-cidr-finalizer on every ServiceCIDR and sets
// its Ready condition, and holds a ServiceCIDR's deletion while an
// IPAddress in it is in use and no other ServiceCIDR covers it (Ready
// False, reason Terminating), releasing it once none is left.
package servicecidr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1apply "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in --controllers (upstream's).
const Name = "service-cidr-controller"

// Finalizer holds a ServiceCIDR while addresses in it are in use.
const Finalizer = "networking.k8s.io/service-cidr-finalizer"

// deletionGracePeriod is how long after its deletion began a ServiceCIDR
// with no address left keeps its finalizer, as upstream: API servers may
// still be allocating from it until they see it terminating.
const deletionGracePeriod = 10 * time.Second

// Labels of the IPAddresses the ClusterIP allocator owns.
const (
	managedByLabel = "ipaddress.kubernetes.io/managed-by"
	managedByValue = "ipallocator.k8s.io"
)

// Messages of the Ready condition, upstream's.
const (
	readyMessage       = "Kubernetes Service CIDR is ready"
	terminatingMessage = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"
)

// Controller is the service-cidr-controller.
type Controller struct {
	client    kubernetes.Interface
	cidrs     networkinglisters.ServiceCIDRLister
	addresses networkinglisters.IPAddressLister
	synced    []cache.InformerSynced
	clock     clock.Clock
	queue     *worker.Queue[string]
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	cidrs := cc.Informers.Networking().V1().ServiceCIDRs()
	addrs := cc.Informers.Networking().V1().IPAddresses()
	c := &Controller{
		client: cc.Client, cidrs: cidrs.Lister(), addresses: addrs.Lister(),
		synced: []cache.InformerSynced{cidrs.Informer().HasSynced, addrs.Informer().HasSynced},
		clock:  cc.Clock,
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.queue = worker.NewQueue(Name, c.Sync, worker.Options[string]{Clock: cc.Clock})
	if _, err := cidrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.cidrAdded,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("%s: ServiceCIDR handler: %w", Name, err)
	}
	if _, err := addrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addressChanged,
		DeleteFunc: c.addressChanged,
	}); err != nil {
		return nil, fmt.Errorf("%s: IPAddress handler: %w", Name, err)
	}
	return c, nil
}

// Start runs the worker until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// cidrAdded queues the new ServiceCIDR and those it overlaps: one of them
// may be waiting for another to cover its addresses.
func (c *Controller) cidrAdded(obj any) {
	sc, ok := obj.(*networkingv1.ServiceCIDR)
	if !ok {
		return
	}
	c.queue.Add(sc.Name)
	all, _ := c.cidrs.List(labels.Everything())
	for _, p := range prefixes(sc) {
		for _, other := range all {
			if slices.ContainsFunc(prefixes(other), p.Overlaps) {
				c.queue.Add(other.Name)
			}
		}
	}
}

// addressChanged queues the ServiceCIDRs holding an allocator's address.
func (c *Controller) addressChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ip, ok := obj.(*networkingv1.IPAddress)
	if !ok || ip.Labels[managedByLabel] != managedByValue {
		return
	}
	addr, err := netip.ParseAddr(ip.Name)
	if err != nil {
		return
	}
	for _, sc := range c.containing(addr) {
		c.queue.Add(sc.Name)
	}
}

// Sync brings one ServiceCIDR's finalizer and Ready condition in line.
func (c *Controller) Sync(ctx context.Context, name string) error {
	sc, err := c.cidrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if sc.DeletionTimestamp != nil {
		if !c.canDelete(sc) {
			return c.setReady(ctx, sc, metav1.ConditionFalse, networkingv1.ServiceCIDRReasonTerminating, terminatingMessage)
		}
		if wait := deletionGracePeriod - c.clock.Since(sc.DeletionTimestamp.Time); wait > 0 {
			return worker.RequeueAfter(wait)
		}
		return c.patchFinalizer(ctx, sc, false)
	}
	if err := c.patchFinalizer(ctx, sc, true); err != nil {
		return err
	}
	return c.setReady(ctx, sc, metav1.ConditionTrue, "", readyMessage)
}

// canDelete: every range of sc is inside another ServiceCIDR, or no
// address of the allocator lies in sc alone.
func (c *Controller) canDelete(sc *networkingv1.ServiceCIDR) bool {
	all, _ := c.cidrs.List(labels.Everything())
	covered := true
	for _, p := range prefixes(sc) {
		parent := false
		for _, other := range all {
			if other.Name == sc.Name {
				continue
			}
			for _, q := range prefixes(other) {
				if q.Overlaps(p) && q.Bits() <= p.Bits() {
					parent = true
				}
			}
		}
		covered = covered && parent
	}
	if covered {
		return true
	}
	ips, _ := c.addresses.List(labels.SelectorFromSet(labels.Set{managedByLabel: managedByValue}))
	for _, ip := range ips {
		addr, err := netip.ParseAddr(ip.Name)
		if err != nil {
			continue
		}
		if holders := c.containing(addr); len(holders) == 1 && holders[0].Name == sc.Name {
			return false
		}
	}
	return true
}

// containing lists the ServiceCIDRs with a range holding addr (not as its
// network address, nor as an IPv4 broadcast address).
func (c *Controller) containing(addr netip.Addr) []*networkingv1.ServiceCIDR {
	all, _ := c.cidrs.List(labels.Everything())
	var out []*networkingv1.ServiceCIDR
	for _, sc := range all {
		if slices.ContainsFunc(prefixes(sc), func(p netip.Prefix) bool { return holds(p, addr) }) {
			out = append(out, sc)
		}
	}
	return out
}

func prefixes(sc *networkingv1.ServiceCIDR) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

func holds(p netip.Prefix, addr netip.Addr) bool {
	if !p.Contains(addr) || addr == p.Addr() {
		return false
	}
	if addr.Is4() {
		b := p.Addr().As4()
		for i := p.Bits(); i < 32; i++ {
			b[i/8] |= 1 << (7 - uint(i)%8)
		}
		return addr != netip.AddrFrom4(b)
	}
	return true
}

// patchFinalizer adds (or removes) the finalizer with a strategic merge
// patch, as upstream.
func (c *Controller) patchFinalizer(ctx context.Context, sc *networkingv1.ServiceCIDR, add bool) error {
	if slices.Contains(sc.Finalizers, Finalizer) == add {
		return nil
	}
	key := "finalizers"
	if !add {
		key = "$deleteFromPrimitiveList/finalizers"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{key: []string{Finalizer}}})
	if err != nil {
		return err
	}
	_, err = c.client.NetworkingV1().ServiceCIDRs().Patch(ctx, sc.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setReady applies the Ready condition unless it already says the same.
func (c *Controller) setReady(ctx context.Context, sc *networkingv1.ServiceCIDR, status metav1.ConditionStatus, reason, message string) error {
	if cur := apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady); cur != nil &&
		cur.Status == status && cur.Reason == reason && cur.Message == message {
		return nil
	}
	cond := metav1apply.Condition().WithType(networkingv1.ServiceCIDRConditionReady).WithStatus(status).
		WithReason(reason).WithMessage(message).WithLastTransitionTime(metav1.NewTime(c.clock.Now()))
	apply := networkingv1apply.ServiceCIDR(sc.Name).WithStatus(networkingv1apply.ServiceCIDRStatus().WithConditions(cond))
	_, err := c.client.NetworkingV1().ServiceCIDRs().ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: Name, Force: true})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
