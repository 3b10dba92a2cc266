package apiserver

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/storage"
)

// Labels upstream's IP allocator puts on the IPAddress objects it owns.
const (
	ipFamilyLabel  = "ipaddress.kubernetes.io/ip-family"
	managedByLabel = "ipaddress.kubernetes.io/managed-by"
	managedByValue = "ipallocator.k8s.io"
)

// ipClaimer keeps one networking.k8s.io/v1 IPAddress object per
// allocated ClusterIP (allocator.IPClaimer), written straight to the
// ipaddresses store with etcd's create-if-absent: whichever API server
// creates the object first holds the address. It is also the allocator's
// view (allocator.IPView) of the ServiceCIDRs and IPAddresses, read from
// this server's watch caches as upstream's allocator reads its informers.
type ipClaimer struct{ srv *Server }

var (
	_ allocator.IPClaimer = ipClaimer{}
	_ allocator.IPView    = ipClaimer{}
)

// viewTimeout bounds a read of the caches (they are ready once the server
// serves, so it only matters while a cache relists).
const viewTimeout = 5 * time.Second

func (c ipClaimer) handler() *resourceHandler { return c.srv.storedHandler("ipaddresses") }

func (s *Server) storedHandler(resource string) *resourceHandler {
	h := s.handlers[networkingv1.SchemeGroupVersion.WithResource(resource)]
	if h == nil || h.store == nil {
		return nil
	}
	return h
}

// ServiceCIDRs lists the cached ServiceCIDRs; one is usable when its
// Ready condition is True or absent and it is not being deleted.
func (c ipClaimer) ServiceCIDRs() ([]allocator.ServiceCIDR, error) {
	h := c.srv.storedHandler("servicecidrs")
	if h == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	objs, _, err := h.store.ListCached(ctx, h.prefix(), storage.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("list cached ServiceCIDRs: %w", err)
	}
	out := make([]allocator.ServiceCIDR, 0, len(objs))
	for _, o := range objs {
		obj, _ := o.Object() // stored as served: no conversion to fail
		sc, ok := obj.(*networkingv1.ServiceCIDR)
		if !ok {
			continue
		}
		ready := true
		if cond := meta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady); cond != nil {
			ready = cond.Status == metav1.ConditionTrue
		}
		out = append(out, allocator.ServiceCIDR{Name: sc.Name, CIDRs: sc.Spec.CIDRs, Usable: ready && sc.DeletionTimestamp == nil})
	}
	return out, nil
}

// ClaimedIPs is the set of IPAddress names, from the cache once it has
// caught up with etcd's current revision (it is read when the ranges look
// full, to free what other API servers released just before).
func (c ipClaimer) ClaimedIPs() map[string]bool {
	h := c.handler()
	if h == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	objs, _, err := h.store.ListCached(ctx, h.prefix(), storage.ListOptions{ResourceVersion: ""})
	if err != nil {
		klog.Background().V(2).Info("list cached IPAddresses", "err", err)
		return nil
	}
	out := make(map[string]bool, len(objs))
	for _, o := range objs {
		out[strings.TrimPrefix(o.Key, h.prefix())] = true
	}
	return out
}

// IsClaimed reports whether an IPAddress named ip exists. The cache
// answers "no" (the claim arbitrates anyway); its "yes" is confirmed in
// etcd, so that an address just freed through another API server is not
// refused while this server's cache catches up.
func (c ipClaimer) IsClaimed(ip string) bool {
	h := c.handler()
	if h == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	err := h.store.GetRV(ctx, h.key("", ip), "0", &networkingv1.IPAddress{})
	if storage.IsNotFound(err) {
		return false
	}
	err = h.store.Get(ctx, h.key("", ip), &networkingv1.IPAddress{})
	return !storage.IsNotFound(err)
}

func ownerRef(o allocator.Owner) *networkingv1.ParentReference {
	return &networkingv1.ParentReference{Group: "", Resource: "services", Namespace: o.Namespace, Name: o.Name}
}

// ClaimIP creates the IPAddress named ip for owner; an existing one of
// the same owner is fine, one of another owner is ErrIPAllocated.
func (c ipClaimer) ClaimIP(ctx context.Context, ip string, owner allocator.Owner) error {
	h := c.handler()
	if h == nil {
		return nil
	}
	family := "IPv4"
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
		family = "IPv6"
	}
	obj := &networkingv1.IPAddress{
		TypeMeta: metav1.TypeMeta{Kind: "IPAddress", APIVersion: "networking.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ip, UID: uuid.NewUUID(), CreationTimestamp: metav1.NewTime(c.srv.clock.Now().Truncate(time.Second)),
			Labels: map[string]string{ipFamilyLabel: family, managedByLabel: managedByValue},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: ownerRef(owner)},
	}
	err := h.store.Create(ctx, h.key("", ip), obj, &networkingv1.IPAddress{})
	if err == nil {
		return nil
	}
	if !storage.IsExists(err) {
		return fmt.Errorf("claim %s: %w", ip, err)
	}
	cur := &networkingv1.IPAddress{}
	if err := h.store.Get(ctx, h.key("", ip), cur); err != nil {
		return fmt.Errorf("claim %s: %w", ip, err)
	}
	if cur.Spec.ParentRef != nil && *cur.Spec.ParentRef == *ownerRef(owner) {
		return nil
	}
	return allocator.ErrIPAllocated
}

// ReleaseIP deletes the IPAddress named ip if owner holds it.
func (c ipClaimer) ReleaseIP(ctx context.Context, ip string, owner allocator.Owner) {
	h := c.handler()
	if h == nil {
		return
	}
	cur := &networkingv1.IPAddress{}
	if err := h.store.Get(ctx, h.key("", ip), cur); err != nil {
		return
	}
	if cur.Spec.ParentRef == nil || *cur.Spec.ParentRef != *ownerRef(owner) {
		return
	}
	uid, rv := types.UID(cur.UID), cur.ResourceVersion
	err := h.store.Delete(ctx, h.key("", ip), nil, &storage.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil && !storage.IsNotFound(err) {
		klog.FromContext(ctx).V(2).Info("release IPAddress", "ip", ip, "err", err)
	}
}

// DefaultServiceCIDRName is the ServiceCIDR the API server keeps for its
// own --service-cluster-ip-range, as upstream's default ServiceCIDR
// controller does.
const DefaultServiceCIDRName = "kubernetes"

// ensureDefaultServiceCIDR creates ServiceCIDR "kubernetes" with the
// server's service range and a Ready condition when it does not exist;
// an existing one is left as it is.
func (s *Server) ensureDefaultServiceCIDR(ctx context.Context) error {
	h := s.handlers[networkingv1.SchemeGroupVersion.WithResource("servicecidrs")]
	if h == nil || h.store == nil || s.alloc == nil {
		return nil
	}
	obj := &networkingv1.ServiceCIDR{
		TypeMeta: metav1.TypeMeta{Kind: "ServiceCIDR", APIVersion: "networking.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceCIDRName, UID: uuid.NewUUID(),
			CreationTimestamp: metav1.NewTime(s.clock.Now().Truncate(time.Second))},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{s.alloc.IPs.CIDR()}},
		Status: networkingv1.ServiceCIDRStatus{Conditions: []metav1.Condition{{
			Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
			Message: "Kubernetes default Service CIDR is ready", LastTransitionTime: metav1.NewTime(s.clock.Now().Truncate(time.Second)),
		}}},
	}
	err := h.store.Create(ctx, h.key("", DefaultServiceCIDRName), obj, &networkingv1.ServiceCIDR{})
	if err != nil && !storage.IsExists(err) {
		return fmt.Errorf("default ServiceCIDR: %w", err)
	}
	return nil
}
