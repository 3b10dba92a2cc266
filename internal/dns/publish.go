package dns

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Publish says where cluster DNS is reachable from pods, for Service
// kube-system/kube-dns: the node address and ports the server listens on.
type Publish struct {
	IP          string
	Port        int32
	MetricsPort int32
	// Interval re-checks the objects (default 1 minute), restoring them if
	// someone deleted or changed them.
	Interval time.Duration
}

const (
	kubeDNS   = "kube-dns"
	managedBy = "skiff-dns"
)

func (s *Server) publishLoop(ctx context.Context, p Publish) {
	if p.Interval <= 0 {
		p.Interval = time.Minute
	}
	logger := klog.FromContext(ctx)
	wait := 500 * time.Millisecond
	for {
		err := EnsureService(ctx, s.client, s.opts.Zone.NameserverIP.String(), p)
		next := p.Interval
		if err != nil {
			logger.Error(err, "Publishing Service kube-system/kube-dns")
			next = wait
			if wait < 30*time.Second {
				wait *= 2
			}
		} else {
			wait = 500 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(next):
		}
	}
}

// EnsureService creates or repairs Service kube-system/kube-dns (ClusterIP
// clusterIP; ports dns 53/UDP, dns-tcp 53/TCP, metrics 9153/TCP, no
// selector) and its Endpoints and EndpointSlice pointing at p, the way
// bootstrap keeps default/kubernetes.
func EnsureService(ctx context.Context, client kubernetes.Interface, clusterIP string, p Publish) error {
	labels := map[string]string{"k8s-app": kubeDNS, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}
	ports := []v1.ServicePort{
		{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(p.Port)},
		{Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(p.Port)},
	}
	if p.MetricsPort > 0 {
		ports = append(ports, v1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9153, TargetPort: intstr.FromInt32(p.MetricsPort)})
	}
	svcs := client.CoreV1().Services(metav1.NamespaceSystem)
	svc, err := svcs.Get(ctx, kubeDNS, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		svc = &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: kubeDNS, Namespace: metav1.NamespaceSystem, Labels: labels},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, Ports: ports},
		}
		if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service: %w", err)
		}
	case err != nil:
		return fmt.Errorf("get service: %w", err)
	default:
		if svc.Spec.ClusterIP != clusterIP {
			return fmt.Errorf("service kube-system/kube-dns has ClusterIP %s, not %s", svc.Spec.ClusterIP, clusterIP)
		}
		if !samePorts(svc.Spec.Ports, ports) || len(svc.Spec.Selector) > 0 {
			svc = svc.DeepCopy()
			svc.Spec.Ports, svc.Spec.Selector = ports, nil
			if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update service: %w", err)
			}
		}
	}

	// Endpoints (legacy readers), not mirrored into a slice.
	epPorts := []v1.EndpointPort{{Name: "dns", Protocol: v1.ProtocolUDP, Port: p.Port}, {Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: p.Port}}
	slicePorts := []discoveryv1.EndpointPort{
		{Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To(p.Port)},
		{Name: ptr.To("dns-tcp"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(p.Port)},
	}
	if p.MetricsPort > 0 {
		epPorts = append(epPorts, v1.EndpointPort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: p.MetricsPort})
		slicePorts = append(slicePorts, discoveryv1.EndpointPort{Name: ptr.To("metrics"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(p.MetricsPort)})
	}
	eps := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: kubeDNS, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": kubeDNS, discoveryv1.LabelSkipMirror: "true"}},
		Subsets: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: p.IP}}, Ports: epPorts}},
	}
	if err := upsertEndpoints(ctx, client, eps); err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: kubeDNS, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{discoveryv1.LabelServiceName: kubeDNS, discoveryv1.LabelManagedBy: managedBy, "k8s-app": kubeDNS}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{p.IP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}},
		Ports: slicePorts,
	}
	return upsertSlice(ctx, client, slice)
}

func samePorts(a, b []v1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Protocol != b[i].Protocol || a[i].Port != b[i].Port || a[i].TargetPort != b[i].TargetPort {
			return false
		}
	}
	return true
}

func upsertEndpoints(ctx context.Context, client kubernetes.Interface, want *v1.Endpoints) error {
	api := client.CoreV1().Endpoints(want.Namespace)
	got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return wrap("create endpoints", err)
	}
	if err != nil {
		return wrap("get endpoints", err)
	}
	if fmt.Sprint(got.Subsets) == fmt.Sprint(want.Subsets) {
		return nil
	}
	got = got.DeepCopy()
	got.Subsets = want.Subsets
	_, err = api.Update(ctx, got, metav1.UpdateOptions{})
	return wrap("update endpoints", err)
}

func upsertSlice(ctx context.Context, client kubernetes.Interface, want *discoveryv1.EndpointSlice) error {
	api := client.DiscoveryV1().EndpointSlices(want.Namespace)
	got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return wrap("create endpointslice", err)
	}
	if err != nil {
		return wrap("get endpointslice", err)
	}
	if fmt.Sprint(got.Endpoints, got.Ports) == fmt.Sprint(want.Endpoints, want.Ports) {
		return nil
	}
	got = got.DeepCopy()
	got.Endpoints, got.Ports = want.Endpoints, want.Ports
	_, err = api.Update(ctx, got, metav1.UpdateOptions{})
	return wrap("update endpointslice", err)
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s kube-system/kube-dns: %w", what, err)
}
