package service

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
)

var serviceKind = schema.GroupKind{Kind: "Service"}

// allocate gives svc the ClusterIP and NodePorts it needs, treating values
// that old (nil on create) already holds as its own, then releases what
// old held and svc no longer does. It fills the allocated values into svc.
// The returned undo restores the allocator on a failed write.
func (s *Strategy) allocate(ctx context.Context, svc, old *corev1.Service, dryRun bool) (func(), error) {
	if s.alloc == nil {
		return nil, nil
	}
	held := allocator.Claims{}
	if old != nil {
		held = allocator.ClaimsOf(old)
	}
	heldIP := map[string]bool{}
	for _, ip := range held.IPs {
		heldIP[ip] = true
	}
	heldPort := map[int]bool{}
	for _, p := range held.Ports {
		heldPort[p] = true
	}

	txn := s.alloc.Begin(dryRun).For(ctx, allocator.Owner{Namespace: svc.Namespace, Name: svc.Name})
	fail := func(err error) (func(), error) {
		txn.Undo()
		return nil, err
	}

	// ClusterIP.
	if needsClusterIP(svc) {
		ip := svc.Spec.ClusterIP
		if ip == "" {
			next, err := txn.AllocateNextIP()
			switch {
			case errors.Is(err, allocator.ErrFull):
				return fail(apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP for Service %q: %w", svc.Name, err)))
			case err != nil:
				return fail(apierrors.NewInvalid(serviceKind, svc.Name, field.ErrorList{
					field.Invalid(field.NewPath("spec", "clusterIPs"), svc.Spec.ClusterIPs, fmt.Sprintf("failed to allocate IP: %v", err)),
				}))
			}
			svc.Spec.ClusterIP = next
			svc.Spec.ClusterIPs = []string{next}
		} else if !heldIP[ip] {
			if err := txn.AllocateIP(ip); err != nil {
				return fail(apierrors.NewInvalid(serviceKind, svc.Name, field.ErrorList{
					field.Invalid(field.NewPath("spec", "clusterIPs"), svc.Spec.ClusterIPs, fmt.Sprintf("failed to allocate IP %s: %v", ip, err)),
				}))
			}
		}
		if len(svc.Spec.ClusterIPs) == 0 {
			svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		}
	} else if isHeadless(svc) {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
	}

	// NodePorts. Explicit ones first, so that a dynamic pick cannot take a
	// port that a later entry of the same service asks for.
	mine := map[int]bool{} // ports this service now holds
	portsPath := field.NewPath("spec", "ports")
	for i := range svc.Spec.Ports {
		np := int(svc.Spec.Ports[i].NodePort)
		if np == 0 || mine[np] {
			continue
		}
		if !heldPort[np] {
			if err := txn.AllocatePort(np); err != nil {
				return fail(portError(svc, portsPath.Index(i).Child("nodePort"), np, err))
			}
		}
		mine[np] = true
	}
	if needsNodePorts(svc) {
		// Entries with the same port number (e.g. 53/TCP and 53/UDP) share
		// one NodePort, as upstream does.
		byPort := map[int32]int32{}
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				if _, ok := byPort[p.Port]; !ok {
					byPort[p.Port] = p.NodePort
				}
			}
		}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			if np, ok := byPort[p.Port]; ok {
				p.NodePort = np
				continue
			}
			np, err := txn.AllocateNextPort()
			if err != nil {
				return fail(apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %w", err)))
			}
			p.NodePort = int32(np)
			byPort[p.Port] = p.NodePort
			mine[np] = true
		}
	}

	// Health check NodePort for LoadBalancer services with Local traffic.
	if needsHealthCheckNodePort(svc) {
		hc := int(svc.Spec.HealthCheckNodePort)
		switch {
		case hc == 0:
			np, err := txn.AllocateNextPort()
			if err != nil {
				return fail(apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %w", err)))
			}
			svc.Spec.HealthCheckNodePort = int32(np)
		case !heldPort[hc] && !mine[hc]:
			if err := txn.AllocatePort(hc); err != nil {
				return fail(portError(svc, field.NewPath("spec", "healthCheckNodePort"), hc, err))
			}
		}
	}

	// Release what old held and svc does not.
	if old != nil {
		now := allocator.ClaimsOf(svc)
		keepIP := map[string]bool{}
		for _, ip := range now.IPs {
			keepIP[ip] = true
		}
		keepPort := map[int]bool{}
		for _, p := range now.Ports {
			keepPort[p] = true
		}
		var gone allocator.Claims
		for _, ip := range held.IPs {
			if !keepIP[ip] {
				gone.IPs = append(gone.IPs, ip)
			}
		}
		for _, p := range held.Ports {
			if !keepPort[p] {
				gone.Ports = append(gone.Ports, p)
			}
		}
		txn.Release(gone)
	}
	if dryRun {
		return nil, nil
	}
	return txn.Undo, nil
}

func portError(svc *corev1.Service, path *field.Path, port int, err error) error {
	var notInRange *allocator.PortNotInRangeError
	if errors.Is(err, allocator.ErrPortAllocated) || errors.As(err, &notInRange) {
		return apierrors.NewInvalid(serviceKind, svc.Name, field.ErrorList{field.Invalid(path, port, err.Error())})
	}
	return apierrors.NewInternalError(fmt.Errorf("failed to allocate port %d: %w", port, err))
}
