package servicerouting

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// objects is an in-memory registry.Reader.
type objects map[schema.GroupVersionResource][]runtime.Object

func (o objects) List(_ context.Context, gvr schema.GroupVersionResource, ns string, _ bool, into runtime.Object) error {
	var items []runtime.Object
	for _, obj := range o[gvr] {
		if m, _ := meta.Accessor(obj); ns == "" || m.GetNamespace() == ns {
			items = append(items, obj.DeepCopyObject())
		}
	}
	return meta.SetList(into, items)
}

func (o objects) Get(_ context.Context, gvr schema.GroupVersionResource, ns, name string, _ bool, into runtime.Object) error {
	for _, obj := range o[gvr] {
		if m, _ := meta.Accessor(obj); m.GetNamespace() == ns && m.GetName() == name {
			switch into := into.(type) {
			case *corev1.Service:
				*into = *obj.(*corev1.Service).DeepCopy()
			case *corev1.Pod:
				*into = *obj.(*corev1.Pod).DeepCopy()
			}
			return nil
		}
	}
	return apierrors.NewNotFound(gvr.GroupResource(), name)
}

func ptr[T any](v T) *T { return &v }

func service(typ corev1.ServiceType, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hook"},
		Spec: corev1.ServiceSpec{Type: typ, Ports: ports}}
}

func slice(name, svc, portName string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		Endpoints:   eps,
	}
}

func endpoint(addr string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func TestResolve(t *testing.T) {
	https := corev1.ServicePort{Name: "https", Port: 443}
	cases := []struct {
		name    string
		objs    []runtime.Object
		port    int32
		want    string
		wantErr string
	}{
		{name: "ready endpoint on the named port", port: 443, want: "https://192.0.2.7:8443",
			objs: []runtime.Object{service(corev1.ServiceTypeClusterIP, https),
				slice("other", "other", "https", 9, endpoint("192.0.2.9", nil)),
				slice("hook-a", "hook", "https", 8443, endpoint("192.0.2.6", ptr(false)), endpoint("192.0.2.7", ptr(true)))}},
		{name: "ready unset counts as ready", port: 443, want: "https://192.0.2.7:8443",
			objs: []runtime.Object{service(corev1.ServiceTypeNodePort, https),
				slice("hook-a", "hook", "https", 8443, endpoint("192.0.2.7", nil))}},
		{name: "port name must match the service port's", port: 443, wantErr: `no endpoints available for service "hook"`,
			objs: []runtime.Object{service(corev1.ServiceTypeClusterIP, https),
				slice("hook-a", "hook", "metrics", 8443, endpoint("192.0.2.7", nil))}},
		{name: "no ready endpoint", port: 443, wantErr: `no endpoints available for service "hook"`,
			objs: []runtime.Object{service(corev1.ServiceTypeClusterIP, https),
				slice("hook-a", "hook", "https", 8443, endpoint("192.0.2.7", ptr(false)))}},
		{name: "unknown service port", port: 444, wantErr: `no service port 444 found for service "hook"`,
			objs: []runtime.Object{service(corev1.ServiceTypeClusterIP, https)}},
		{name: "ExternalName is not routed", port: 443, wantErr: `unsupported service type "ExternalName"`,
			objs: []runtime.Object{service(corev1.ServiceTypeExternalName, https)}},
		{name: "missing service", port: 443, wantErr: `services "hook" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := objects{}
			for _, obj := range tc.objs {
				gvr := slicesGVR
				if _, ok := obj.(*corev1.Service); ok {
					gvr = servicesGVR
				}
				o[gvr] = append(o[gvr], obj)
			}
			u, err := New(o).ResolveEndpoint("ns", "hook", tc.port)
			got, gotErr := "", ""
			if err != nil {
				gotErr = err.Error()
			} else {
				got = u.String()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("url (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPickEndpointPrefersFamily(t *testing.T) {
	v6 := slice("v6", "hook", "https", 443, endpoint("2001:db8::1", nil))
	v6.AddressType = discoveryv1.AddressTypeIPv6
	v4 := slice("v4", "hook", "https", 443, endpoint("192.0.2.1", nil))
	last := func(n int) int { return n - 1 } // would put v4 first were it not for the family
	got, ok := pickEndpoint([]*discoveryv1.EndpointSlice{v4, v6}, "https", corev1.IPv6Protocol, last, nil)
	if !ok || got != "[2001:db8::1]:443" {
		t.Errorf("picked %q %v, want the IPv6 endpoint", got, ok)
	}
}

// services/proxy picks a ready endpoint of the port (by name, or by the
// number the service declares) only when it is a pod of the namespace
// that has the address.
func TestProxyEndpoint(t *testing.T) {
	pod := func(name, ns, ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: ip}}}}
	}
	of := func(ep discoveryv1.Endpoint, ns, name string) discoveryv1.Endpoint {
		ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name}
		return ep
	}
	web := service(corev1.ServiceTypeClusterIP, corev1.ServicePort{Name: "http", Port: 80})
	cases := []struct {
		name, port string
		objs       []runtime.Object
		want       string
		wantErr    string
	}{
		{name: "by port name", port: "http", want: "192.0.2.7:8080",
			objs: []runtime.Object{pod("a", "ns", "192.0.2.7"), slice("hook-a", "hook", "http", 8080, of(endpoint("192.0.2.7", nil), "ns", "a"))}},
		{name: "by port number", port: "80", want: "192.0.2.7:8080",
			objs: []runtime.Object{web, pod("a", "ns", "192.0.2.7"), slice("hook-a", "hook", "http", 8080, of(endpoint("192.0.2.7", nil), "ns", "a"))}},
		{name: "a number the service lacks", port: "81", wantErr: `no service port 81 found for service "hook"`,
			objs: []runtime.Object{web}},
		{name: "a number of a missing service", port: "80", wantErr: `services "hook" not found`},
		{name: "no slices", port: "http", wantErr: `no endpoints available for service "hook"`},
		{name: "not ready", port: "http", wantErr: `no endpoints available for service "hook"`,
			objs: []runtime.Object{pod("a", "ns", "192.0.2.7"), slice("hook-a", "hook", "http", 8080, of(endpoint("192.0.2.7", ptr(false)), "ns", "a"))}},
		{name: "no target", port: "http", wantErr: `no endpoints available for service "hook"`,
			objs: []runtime.Object{slice("hook-a", "hook", "http", 8080, endpoint("192.0.2.7", nil))}},
		{name: "a pod of another namespace", port: "http", wantErr: `no endpoints available for service "hook"`,
			objs: []runtime.Object{pod("a", "other", "192.0.2.7"), slice("hook-a", "hook", "http", 8080, of(endpoint("192.0.2.7", nil), "other", "a"))}},
		{name: "a pod without the address", port: "http", wantErr: `no endpoints available for service "hook"`,
			objs: []runtime.Object{pod("a", "ns", "192.0.2.8"), slice("hook-a", "hook", "http", 8080, of(endpoint("192.0.2.7", nil), "ns", "a"))}},
		{name: "another port name", port: "", wantErr: `no endpoints available for service "hook"`,
			objs: []runtime.Object{pod("a", "ns", "192.0.2.7"), slice("hook-a", "hook", "http", 8080, of(endpoint("192.0.2.7", nil), "ns", "a"))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := objects{}
			for _, obj := range tc.objs {
				gvr := slicesGVR
				switch obj.(type) {
				case *corev1.Service:
					gvr = servicesGVR
				case *corev1.Pod:
					gvr = podsGVR
				}
				o[gvr] = append(o[gvr], obj)
			}
			got, err := New(o).ProxyEndpoint(context.Background(), "ns", "hook", tc.port, corev1.IPv4Protocol)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff([]string{tc.want, tc.wantErr}, []string{got, gotErr}); diff != "" {
				t.Errorf("endpoint, error (-want +got):\n%s", diff)
			}
		})
	}
}

// lagging is a cache that has not yet seen the EndpointSlices written last:
// only a consistent (latest) list returns them.
type lagging struct{ objects }

func (l lagging) List(ctx context.Context, gvr schema.GroupVersionResource, ns string, latest bool, into runtime.Object) error {
	if gvr == slicesGVR && !latest {
		return meta.SetList(into, nil)
	}
	return l.objects.List(ctx, gvr, ns, latest, into)
}

// TestProxyEndpointSeesTheLatestSlice: services/proxy finds a slice
// written just before the request (upstream reads the Endpoints from etcd),
// where the cache may not have it yet; the failure was a 503 "no endpoints
// available" in TestProxyConformanceAgnhost under load.
func TestProxyEndpointSeesTheLatestSlice(t *testing.T) {
	o := lagging{objects{
		podsGVR:   {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "192.0.2.7"}}}}},
		slicesGVR: {slice("hook-a", "hook", "http", 8080, discoveryv1.Endpoint{Addresses: []string{"192.0.2.7"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "a"}})},
	}}
	got, err := New(o).ProxyEndpoint(context.Background(), "ns", "hook", "http", corev1.IPv4Protocol)
	if err != nil || got != "192.0.2.7:8080" {
		t.Errorf("ProxyEndpoint = %q, %v; want 192.0.2.7:8080", got, err)
	}
}
