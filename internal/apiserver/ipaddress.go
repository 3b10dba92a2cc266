package apiserver

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
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
// creates the object first holds the address.
type ipClaimer struct{ srv *Server }

var _ allocator.IPClaimer = ipClaimer{}

func (c ipClaimer) handler() *resourceHandler {
	h := c.srv.handlers[networkingv1.SchemeGroupVersion.WithResource("ipaddresses")]
	if h == nil || h.store == nil {
		return nil
	}
	return h
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
			Name: ip, UID: uuid.NewUUID(), CreationTimestamp: metav1.NewTime(time.Now().Truncate(time.Second)),
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
			CreationTimestamp: metav1.NewTime(time.Now().Truncate(time.Second))},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{s.alloc.IPs.CIDR()}},
		Status: networkingv1.ServiceCIDRStatus{Conditions: []metav1.Condition{{
			Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
			Message: "Kubernetes default Service CIDR is ready", LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
		}}},
	}
	err := h.store.Create(ctx, h.key("", DefaultServiceCIDRName), obj, &networkingv1.ServiceCIDR{})
	if err != nil && !storage.IsExists(err) {
		return fmt.Errorf("default ServiceCIDR: %w", err)
	}
	return nil
}
