package aggregator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// resolveError is why a service has no endpoint to proxy to, in the
// words of upstream's availability controller.
type resolveError struct {
	reason, message string
}

func (e *resolveError) Error() string { return e.message }

// resolve checks service ns/name as upstream's availability controller
// does, with its reasons, and picks a ready endpoint serving port (the
// proxy's pick when the aggregator has no Resolver): the Service's port
// gives the port name, the EndpointSlices (label
// kubernetes.io/service-name) a ready address with that port name. An
// ExternalName service resolves to its name. A nil error comes with
// "host:port".
func resolve(ctx context.Context, objs Objects, ns, name string, port int32) (string, error) {
	svc, err := objs.Service(ctx, ns, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", &resolveError{"ServiceNotFound", fmt.Sprintf("service/%s in %q is not present", name, ns)}
		}
		return "", &resolveError{"ServiceAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", name, ns, err)}
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port))), nil
	}
	var portName string
	found := false
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			portName, found = p.Name, true
			break
		}
	}
	if !found {
		return "", &resolveError{"ServicePortError", fmt.Sprintf("service/%s in %q is not listening on port %d", name, ns, port)}
	}
	slices, err := objs.EndpointSlices(ctx, ns, name)
	if err != nil {
		return "", &resolveError{"EndpointsAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", name, ns, err)}
	}
	if len(slices) == 0 {
		return "", &resolveError{"EndpointsNotFound", fmt.Sprintf("cannot find endpointslices for service/%s in %q", name, ns)}
	}
	var candidates []string
	for _, s := range slices {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		var p *int32
		for _, sp := range s.Ports {
			if sp.Name != nil && *sp.Name == portName && sp.Port != nil {
				p = sp.Port
				break
			}
		}
		if p == nil {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				candidates = append(candidates, net.JoinHostPort(addr, strconv.Itoa(int(*p))))
			}
		}
	}
	if len(candidates) == 0 {
		return "", &resolveError{"MissingEndpoints", fmt.Sprintf("endpointslices for service/%s in %q have no addresses with port name %q", name, ns, portName)}
	}
	return candidates[rand.IntN(len(candidates))], nil
}
