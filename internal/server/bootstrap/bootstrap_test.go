package bootstrap

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// state is what a client sees of the bootstrap objects.
type state struct {
	Namespaces []string
	Service    corev1.ServiceSpec
	SvcLabels  map[string]string
	Endpoints  []corev1.EndpointSubset
	EpLabels   map[string]string
	Slice      discoveryv1.EndpointSlice
}

func read(t *testing.T, c *fake.Clientset) state {
	t.Helper()
	ctx := context.Background()
	var s state
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		s.Namespaces = append(s.Namespaces, ns.Name)
	}
	sort.Strings(s.Namespaces)
	svc, err := c.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Service, s.SvcLabels = svc.Spec, svc.Labels
	ep, err := c.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return s
	}
	if err != nil {
		t.Fatal(err)
	}
	s.Endpoints, s.EpLabels = ep.Subsets, ep.Labels
	sl, err := c.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.ObjectMeta = metav1.ObjectMeta{Name: sl.Name, Namespace: sl.Namespace, Labels: sl.Labels}
	sl.TypeMeta = metav1.TypeMeta{}
	s.Slice = *sl
	return s
}

// want is the expected state; ip "" means no Endpoints or EndpointSlice.
func want(ip string, port int32) state {
	addrType := discoveryv1.AddressTypeIPv4
	if strings.Contains(ip, ":") {
		addrType = discoveryv1.AddressTypeIPv6
	}
	st := state{
		Namespaces: []string{"default", "kube-node-lease", "kube-public", "kube-system"},
		Service: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeClusterIP,
			ClusterIP:       "10.43.0.1",
			SessionAffinity: corev1.ServiceAffinityNone,
			Ports:           []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(port)}},
		},
		SvcLabels: map[string]string{"component": "apiserver", "provider": "kubernetes"},
		Endpoints: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: ip}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}},
		}},
		EpLabels: map[string]string{"endpointslice.kubernetes.io/skip-mirror": "true"},
		Slice: discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", Labels: map[string]string{"kubernetes.io/service-name": "kubernetes"}},
			AddressType: addrType,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		},
	}
	if ip == "" {
		st.Endpoints, st.EpLabels, st.Slice = nil, nil, discoveryv1.EndpointSlice{}
	}
	return st
}

func TestOnce(t *testing.T) {
	tests := []struct {
		name     string
		existing []runtime.Object
		first    *Options // applied before opts, if set
		opts     Options
		want     state
	}{
		{name: "empty cluster", opts: Options{Port: 6443, EndpointIP: "192.0.2.7"}, want: want("192.0.2.7", 6443)},
		{name: "no address: no endpoints", opts: Options{Port: 6443}, want: want("", 6443)},
		{name: "unspecified address: no endpoints", opts: Options{Port: 6443, EndpointIP: "0.0.0.0"}, want: want("", 6443)},
		{name: "ipv6 address", opts: Options{Port: 6443, EndpointIP: "2001:db8::7"}, want: want("2001:db8::7", 6443)},
		{
			name:     "namespaces already exist",
			existing: []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}},
			opts:     Options{Port: 6443, EndpointIP: "192.0.2.7"},
			want:     want("192.0.2.7", 6443),
		},
		{name: "port changed since last run", first: &Options{Port: 6443, EndpointIP: "192.0.2.7"}, opts: Options{Port: 7443, EndpointIP: "192.0.2.7"}, want: want("192.0.2.7", 7443)},
		{name: "address changed", first: &Options{Port: 6443, EndpointIP: "192.0.2.7"}, opts: Options{Port: 6443, EndpointIP: "192.0.2.8"}, want: want("192.0.2.8", 6443)},
		{name: "address family changed", first: &Options{Port: 6443, EndpointIP: "192.0.2.7"}, opts: Options{Port: 6443, EndpointIP: "2001:db8::7"}, want: want("2001:db8::7", 6443)},
		{name: "idempotent", first: &Options{Port: 6443, EndpointIP: "192.0.2.7"}, opts: Options{Port: 6443, EndpointIP: "192.0.2.7"}, want: want("192.0.2.7", 6443)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(tc.existing...)
			ctx := context.Background()
			if tc.first != nil {
				if err := Once(ctx, c, *tc.first); err != nil {
					t.Fatal(err)
				}
			}
			if err := Once(ctx, c, tc.opts); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, read(t, c)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOnceInvalidPort(t *testing.T) {
	if err := Once(context.Background(), fake.NewClientset(), Options{}); err == nil {
		t.Fatal("Once with port 0 succeeded")
	}
}

func TestRunRetries(t *testing.T) {
	c := fake.NewClientset()
	failures := 3
	c.PrependReactor("create", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Run(ctx, c, Options{Port: 6443, EndpointIP: "192.0.2.7", RetryInterval: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if failures != 0 {
		t.Errorf("%d failures left; Run did not retry through them", failures)
	}
	if diff := cmp.Diff(want("192.0.2.7", 6443), read(t, c)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestRunGivesUpWithContext(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := Run(ctx, c, Options{Port: 6443, RetryInterval: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want the last error and the context's", err)
	}
}
