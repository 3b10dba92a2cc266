// Package service holds the rules of core/v1 services: defaults,
// validation, the status subresource, ClusterIP and NodePort allocation
// (through internal/apiserver/allocator), field selectors and table
// columns, following upstream Kubernetes wherever a client can see it.
package service

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 services. alloc hands out ClusterIPs and
// NodePorts; the API server builds it once (allocator.NewServices) and
// passes it here, and the strategy's Restore rebuilds it from every stored
// Service at start.
func Resource(alloc *allocator.Services) registry.Resource {
	return registry.Resource{
		GroupVersion:        corev1.SchemeGroupVersion,
		Resource:            "services",
		Kind:                "Service",
		ListKind:            "ServiceList",
		SingularName:        "service",
		ShortNames:          []string{"svc"},
		Categories:          []string{"all"},
		Namespaced:          true,
		StoragePrefix:       "services/specs",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &corev1.Service{} },
		NewList:             func() runtime.Object { return &corev1.ServiceList{} },
		Strategy:            NewStrategy(alloc),
		Subresources:        map[string]registry.Subresource{"status": registry.StatusSubresource(), "proxy": registry.ProxySubresource("ServiceProxyOptions")},
	}
}

// Strategy is the services strategy. It also implements
// registry.BeforeCreater, registry.BeforeUpdater and registry.AfterDeleter
// to allocate and release ClusterIPs and NodePorts.
type Strategy struct {
	registry.DefaultStrategy
	alloc *allocator.Services
}

// Verbs: all eight; upstream v1.37 serves deletecollection for services
// too (each deleted service releases its ClusterIPs and NodePorts).
func (*Strategy) Verbs() []string {
	return registry.DefaultVerbs()
}

var (
	_ registry.Strategy      = (*Strategy)(nil)
	_ registry.BeforeCreater = (*Strategy)(nil)
	_ registry.BeforeUpdater = (*Strategy)(nil)
	_ registry.AfterDeleter  = (*Strategy)(nil)
	_ registry.Restorer      = (*Strategy)(nil)
)

// Restore loads every stored Service's ClusterIPs and NodePorts into the
// allocator.
func (s *Strategy) Restore(list runtime.Object) error {
	if s.alloc == nil {
		return nil
	}
	l, ok := list.(*corev1.ServiceList)
	if !ok {
		return fmt.Errorf("restore service allocations: unexpected list %T", list)
	}
	return s.alloc.Rebuild(l.Items)
}

// NewStrategy builds the strategy. alloc may be nil only in tests that do
// not allocate; the cluster's IP family is then IPv4.
func NewStrategy(alloc *allocator.Services) *Strategy {
	return &Strategy{alloc: alloc}
}

// family is the IP family of the cluster's service CIDR.
func (s *Strategy) family() corev1.IPFamily {
	if s.alloc != nil && s.alloc.IPs.Is6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// PrepareForCreate clears status and applies defaults.
func (s *Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	svc := obj.(*corev1.Service)
	svc.Status = corev1.ServiceStatus{}
	normalizeClusterIPs(svc)
	Default(svc, s.family())
}

// PrepareForUpdate keeps the status, carries over allocated values that a
// client left out (a PUT without clusterIP or nodePort keeps them, as
// upstream does), drops values that the new type no longer uses, and
// applies defaults.
func (s *Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	svc, oldSvc := obj.(*corev1.Service), old.(*corev1.Service)
	svc.Status = oldSvc.Status
	keepAllocated(svc, oldSvc)
	dropTypeDependent(svc, oldSvc)
	normalizeClusterIPs(svc)
	Default(svc, s.family())
}

// PrepareForStatusUpdate keeps everything but the status.
func (s *Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	svc, oldSvc := obj.(*corev1.Service), old.(*corev1.Service)
	svc.Spec = oldSvc.Spec
}

// Validate checks a new service.
func (s *Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return Validate(obj.(*corev1.Service), s.family())
}

// ValidateUpdate checks an update, including immutable ClusterIPs.
func (s *Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateUpdate(obj.(*corev1.Service), old.(*corev1.Service), s.family())
}

// ValidateStatusUpdate checks the load balancer status.
func (s *Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateStatus(obj.(*corev1.Service))
}

// ValidateName requires a DNS-1035 label, as upstream does for services.
func (s *Strategy) ValidateName(name string, prefix bool) []string {
	return registry.NameIsDNS1035Label(name, prefix)
}

// FieldSet offers spec.clusterIP and spec.type to field selectors.
func (s *Strategy) FieldSet(obj runtime.Object) fields.Set {
	svc := obj.(*corev1.Service)
	return fields.Set{
		"spec.clusterIP": svc.Spec.ClusterIP,
		"spec.type":      string(svc.Spec.Type),
	}
}

// TableColumns are kubectl's columns for services.
func (s *Strategy) TableColumns() []metav1.TableColumnDefinition { return tableColumns() }

// TableRow renders one service.
func (s *Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	return tableRow(obj.(*corev1.Service)), nil
}

// BeforeCreate allocates the ClusterIP and NodePorts of a new service.
func (s *Strategy) BeforeCreate(ctx context.Context, obj runtime.Object, dryRun bool) (func(), error) {
	return s.allocate(ctx, obj.(*corev1.Service), nil, dryRun)
}

// BeforeUpdate allocates what an update newly needs and releases what it
// no longer holds; undo restores both.
func (s *Strategy) BeforeUpdate(ctx context.Context, obj, old runtime.Object, dryRun bool) (func(), error) {
	return s.allocate(ctx, obj.(*corev1.Service), old.(*corev1.Service), dryRun)
}

// AfterDelete releases the ClusterIP and NodePorts of a deleted service.
func (s *Strategy) AfterDelete(ctx context.Context, obj runtime.Object) {
	if s.alloc == nil {
		return
	}
	s.alloc.Release(ctx, obj.(*corev1.Service))
}
