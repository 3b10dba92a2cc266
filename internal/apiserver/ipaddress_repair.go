package apiserver

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/storage"
)

// Upstream's repair timings: an IPAddress whose Service does not exist is
// deleted once it is a minute old (the Service may still be being
// written); one whose Service holds another address, once it is 5 s old
// when it is newer than the Service.
const (
	ipLeakGracePeriod   = 60 * time.Second
	ipWrongRefGrace     = 5 * time.Second
	ipRepairInterval    = 10 * time.Second
	ipRepairCallTimeout = 10 * time.Second
)

// ipRepair is upstream's ipallocator-repair-controller, run by every API
// server: an allocator's IPAddress that no Service holds (a write that
// failed after its claim, a crash between the two) is deleted, and a
// Service address that has no IPAddress gets one back. It also recreates
// the default ServiceCIDR when it is gone, and repairs the shared NodePort
// bitmap (portClaimer.repair).
type ipRepair struct {
	srv      *Server
	clock    clock.WithTicker
	interval time.Duration
	grace    time.Duration
}

// Start repairs every interval until ctx is done.
func (r *ipRepair) Start(ctx context.Context) error {
	t := r.clock.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		r.pass(ctx)
	}
}

func (r *ipRepair) pass(ctx context.Context) {
	ipH, svcH := r.srv.storedHandler("ipaddresses"), r.srv.handlers[corev1.SchemeGroupVersion.WithResource("services")]
	if ipH == nil || svcH == nil || svcH.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ipRepairCallTimeout)
	defer cancel()
	ipObjs, _, err := ipH.store.ListCached(ctx, ipH.prefix(), storage.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return
	}
	svcObjs, _, err := svcH.store.ListCached(ctx, svcH.prefix(), storage.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return
	}
	// Both resources are served as stored: no conversion to fail.
	var ips []*networkingv1.IPAddress
	for _, o := range ipObjs {
		if obj, _ := o.Object(); obj != nil {
			if ip, ok := obj.(*networkingv1.IPAddress); ok {
				ips = append(ips, ip)
			}
		}
	}
	var svcs []*corev1.Service
	for _, o := range svcObjs {
		if obj, _ := o.Object(); obj != nil {
			if svc, ok := obj.(*corev1.Service); ok {
				svcs = append(svcs, svc)
			}
		}
	}
	plan := planIPRepair(ips, svcs, r.clock.Now(), r.grace)
	logger := klog.FromContext(ctx)
	r.ensureDefaultServiceCIDR(ctx)
	if r.srv.ports != nil {
		r.srv.ports.repair(ctx, svcs, r.clock.Now(), r.grace)
	}
	for _, ip := range plan.delete {
		uid, rv := types.UID(ip.UID), ip.ResourceVersion
		err := ipH.store.Delete(ctx, ipH.key("", ip.Name), nil, &storage.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err == nil {
			logger.Info("IPAddress appears to have leaked: cleaning up", "ipaddress", ip.Name, "parentRef", ip.Spec.ParentRef)
		}
	}
	claimer := ipClaimer{srv: r.srv}
	for _, c := range plan.claim {
		// The cache may still show a Service just deleted or changed: only
		// a stored Service that holds the address gets it back.
		stored := &corev1.Service{}
		if err := svcH.store.Get(ctx, svcH.key(c.owner.Namespace, c.owner.Name), stored); err != nil || !holds(stored, c.ip) {
			continue
		}
		if err := claimer.ClaimIP(ctx, c.ip, c.owner); err != nil {
			logger.Info("ClusterIP of a Service is held by another", "service", c.owner.Namespace+"/"+c.owner.Name, "ip", c.ip, "err", err)
			continue
		}
		logger.Info("ClusterIP was not allocated: repaired", "service", c.owner.Namespace+"/"+c.owner.Name, "ip", c.ip)
	}
}

// ensureDefaultServiceCIDR recreates ServiceCIDR "kubernetes" once it is
// gone (its deletion completed), as upstream's default-ServiceCIDR
// controller does.
func (r *ipRepair) ensureDefaultServiceCIDR(ctx context.Context) {
	h := r.srv.storedHandler("servicecidrs")
	if h == nil {
		return
	}
	err := h.store.GetRV(ctx, h.key("", DefaultServiceCIDRName), "0", &networkingv1.ServiceCIDR{})
	if !storage.IsNotFound(err) {
		return
	}
	if err := r.srv.ensureDefaultServiceCIDR(ctx); err != nil {
		klog.FromContext(ctx).Info("recreate the default ServiceCIDR", "err", err)
	}
}

// ipRepairPlan is what one repair pass does.
type ipRepairPlan struct {
	delete []*networkingv1.IPAddress
	claim  []ipClaim
}

type ipClaim struct {
	ip    string
	owner allocator.Owner
}

// planIPRepair decides, from the cached IPAddresses and Services at now,
// which of the allocator's IPAddresses go and which Service addresses get
// one. grace is how old an IPAddress of a missing Service must be.
func planIPRepair(ips []*networkingv1.IPAddress, svcs []*corev1.Service, now time.Time, grace time.Duration) ipRepairPlan {
	var plan ipRepairPlan
	byName := map[types.NamespacedName]*corev1.Service{}
	for _, svc := range svcs {
		byName[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = svc
	}
	claimed := map[string]bool{}
	for _, ip := range ips {
		claimed[ip.Name] = true
		if ip.Labels[managedByLabel] != managedByValue || ip.DeletionTimestamp != nil {
			continue
		}
		ref := ip.Spec.ParentRef
		if ref == nil || ref.Group != "" || ref.Resource != "services" {
			plan.delete = append(plan.delete, ip)
			continue
		}
		age := now.Sub(ip.CreationTimestamp.Time)
		svc := byName[types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}]
		switch {
		case svc == nil:
			if age > grace {
				plan.delete = append(plan.delete, ip)
			}
		case holds(svc, ip.Name):
		case svc.Spec.Type == corev1.ServiceTypeExternalName && age < grace:
		case ip.CreationTimestamp.After(svc.CreationTimestamp.Time) && age < ipWrongRefGrace:
		default:
			plan.delete = append(plan.delete, ip)
		}
	}
	for _, svc := range svcs {
		for _, ip := range allocator.ClaimsOf(svc).IPs {
			if !claimed[ip] {
				plan.claim = append(plan.claim, ipClaim{ip: ip, owner: allocator.Owner{Namespace: svc.Namespace, Name: svc.Name}})
			}
		}
	}
	return plan
}

func holds(svc *corev1.Service, ip string) bool {
	for _, c := range allocator.ClaimsOf(svc).IPs {
		if c == ip {
			return true
		}
	}
	return false
}
