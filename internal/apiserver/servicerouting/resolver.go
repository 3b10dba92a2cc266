// Package servicerouting finds where the API server sends traffic meant
// for an in-cluster Service: admission webhooks and CRD conversion webhooks
// given as a `service` reference, aggregated APIs, and services/proxy
// (ProxyEndpoint). Like upstream's
// kube-apiserver with --enable-aggregator-routing, the API server does not
// go through the service's ClusterIP (it may run on no node with a service
// proxy): it picks a ready endpoint from the service's EndpointSlices and
// dials its address and port directly. The caller dials
// `<name>.<namespace>.svc` and verifies TLS against that name; only the
// address changes.
package servicerouting

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var (
	servicesGVR = corev1.SchemeGroupVersion.WithResource("services")
	slicesGVR   = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")
	podsGVR     = corev1.SchemeGroupVersion.WithResource("pods")
)

// lookupTimeout bounds one resolution (two cache reads).
const lookupTimeout = 5 * time.Second

// Resolver resolves a service reference to an endpoint, reading Services
// and EndpointSlices from the API server's caches (never etcd; services/proxy
// waits for the cache to be current). It
// implements k8s.io/apiserver's webhook ServiceResolver.
type Resolver struct {
	r registry.Reader
}

// New reads objects through r.
func New(r registry.Reader) *Resolver { return &Resolver{r: r} }

// ResolveEndpoint returns https://<address>:<port> of a ready endpoint of
// the service's port numbered port, as upstream's proxy.ResolveEndpoint
// does: the service must be ClusterIP, NodePort or LoadBalancer, have that
// port, and an EndpointSlice (labelled kubernetes.io/service-name) with a
// ready endpoint on the port of the same name. Slices of the service's
// primary IP family are tried first; among endpoints the pick is random.
// A missing service is a NotFound; no ready endpoint is a 503 "no
// endpoints available for service".
func (r *Resolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	return r.Resolve(ctx, namespace, name, port)
}

// Resolve is ResolveEndpoint with a context.
func (r *Resolver) Resolve(ctx context.Context, namespace, name string, port int32) (*url.URL, error) {
	svc := &corev1.Service{}
	if err := r.r.Get(ctx, servicesGVR, namespace, name, false, svc); err != nil {
		return nil, err
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	default:
		return nil, fmt.Errorf("unsupported service type %q", svc.Spec.Type)
	}
	var svcPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			svcPort = &svc.Spec.Ports[i]
			break
		}
	}
	if svcPort == nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", port, name))
	}
	slices, err := r.slices(ctx, namespace, name, false)
	if err != nil {
		return nil, err
	}
	family := corev1.IPFamilyUnknown
	if len(svc.Spec.IPFamilies) > 0 {
		family = svc.Spec.IPFamilies[0]
	}
	hostPort, ok := pickEndpoint(slices, svcPort.Name, family, rand.IntN, nil)
	if !ok {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	return &url.URL{Scheme: "https", Host: hostPort}, nil
}

// slices are the EndpointSlices of service namespace/name (label
// kubernetes.io/service-name), from the cache; latest waits until the
// cache holds every write made before the call.
func (r *Resolver) slices(ctx context.Context, namespace, name string, latest bool) ([]*discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := r.r.List(ctx, slicesGVR, namespace, latest, list); err != nil {
		return nil, err
	}
	var slices []*discoveryv1.EndpointSlice
	for i := range list.Items {
		if list.Items[i].Labels[discoveryv1.LabelServiceName] == name {
			slices = append(slices, &list.Items[i])
		}
	}
	return slices, nil
}

// ProxyEndpoint picks the "host:port" that services/proxy sends a request
// for port of service namespace/name to, as upstream's service storage
// (ResourceLocation) does. port is a port name, empty (the unnamed port),
// or a number: then the service's port of that number gives the name (a
// missing service is NotFound, a service without that port 503 "no
// service port N found for service"). Only ready endpoints whose target
// is a pod of the namespace with the endpoint's address among its pod IPs
// qualify, so a hand-written EndpointSlice cannot point the API server at
// another address; none is 503 "no endpoints available for service".
// Slices of family (the cluster's primary one) are tried first.
func (r *Resolver) ProxyEndpoint(ctx context.Context, namespace, name, port string, family corev1.IPFamily) (string, error) {
	portName := port
	if n, err := strconv.ParseInt(port, 10, 64); err == nil {
		svc := &corev1.Service{}
		if err := r.r.Get(ctx, servicesGVR, namespace, name, false, svc); err != nil {
			return "", err
		}
		found := false
		for _, p := range svc.Spec.Ports {
			if int64(p.Port) == n {
				portName, found = p.Name, true
				break
			}
		}
		if !found {
			return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, name))
		}
	}
	noEndpoints := apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	// A consistent read, as upstream's (it reads the Endpoints from
	// etcd): a slice written just before the request is seen.
	slices, err := r.slices(ctx, namespace, name, true)
	if err != nil {
		return "", apierrors.NewInternalError(err)
	}
	if len(slices) == 0 {
		return "", noEndpoints
	}
	hostPort, ok := pickEndpoint(slices, portName, family, rand.IntN, func(ep *discoveryv1.Endpoint) bool {
		return r.isPodAddress(ctx, namespace, ep)
	})
	if !ok {
		return "", noEndpoints
	}
	return hostPort, nil
}

// isPodAddress says whether ep targets a pod of namespace that has the
// endpoint's first address among its pod IPs.
func (r *Resolver) isPodAddress(ctx context.Context, namespace string, ep *discoveryv1.Endpoint) bool {
	if ep.TargetRef == nil || ep.TargetRef.Namespace != namespace {
		return false
	}
	pod := &corev1.Pod{}
	if err := r.r.Get(ctx, podsGVR, namespace, ep.TargetRef.Name, false, pod); err != nil {
		return false
	}
	for _, ip := range pod.Status.PodIPs {
		if ip.IP == ep.Addresses[0] {
			return true
		}
	}
	return false
}

// pickEndpoint chooses a ready endpoint serving the port named portName
// for which valid (when not nil) holds: slices of the preferred family
// first, the slices otherwise and the endpoints within a slice in an
// order drawn from intn. It is pure but for intn (tests pass a fixed one)
// and valid.
func pickEndpoint(slices []*discoveryv1.EndpointSlice, portName string, family corev1.IPFamily, intn func(int) int, valid func(*discoveryv1.Endpoint) bool) (string, bool) {
	order := make([]int, len(slices))
	for i := range order {
		order[i] = intn(len(slices) + 1)
	}
	idx := make([]int, len(slices))
	for i := range idx {
		idx[i] = i
	}
	preferred := discoveryv1.AddressType(family)
	sort.SliceStable(idx, func(a, b int) bool {
		sa, sb := slices[idx[a]], slices[idx[b]]
		if pa, pb := sa.AddressType == preferred, sb.AddressType == preferred; pa != pb {
			return pa
		}
		return order[idx[a]] < order[idx[b]]
	})
	for _, i := range idx {
		s := slices[i]
		for _, p := range s.Ports {
			if p.Name == nil || *p.Name != portName || p.Port == nil || len(s.Endpoints) == 0 {
				continue
			}
			start := intn(len(s.Endpoints))
			for k := range s.Endpoints {
				ep := &s.Endpoints[(start+k)%len(s.Endpoints)]
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
					continue
				}
				if valid != nil && !valid(ep) {
					continue
				}
				return net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(*p.Port))), true
			}
		}
	}
	return "", false
}

// ServerName is the name a service's serving certificate must carry, the
// TLS server name upstream verifies: <name>.<namespace>.svc.
func ServerName(namespace, name string) string { return name + "." + namespace + ".svc" }

// DialContext returns a dial function for an http.Transport whose requests
// go to https://<ServerName>:<port>: a connection to that host and port is
// made to an endpoint resolved at dial time (so a restarted backend is
// found again); any other address is dialed as given.
func (r *Resolver) DialContext(namespace, name string, port int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
	host := net.JoinHostPort(ServerName(namespace, name), strconv.Itoa(int(port)))
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == host {
			u, err := r.Resolve(ctx, namespace, name, port)
			if err != nil {
				return nil, err
			}
			addr = u.Host
		}
		return d.DialContext(ctx, network, addr)
	}
}
