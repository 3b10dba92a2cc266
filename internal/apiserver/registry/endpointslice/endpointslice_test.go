package endpointslice

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func slice(t discoveryv1.AddressType, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: t,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func TestValidate(t *testing.T) {
	many := func(n int) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, fmt.Sprintf("10.42.%d.%d", i/250, i%250+1))
		}
		return out
	}
	tests := []struct {
		name   string
		slice  *discoveryv1.EndpointSlice
		mutate func(*discoveryv1.EndpointSlice)
		want   []string
	}{
		{name: "valid IPv4", slice: slice(discoveryv1.AddressTypeIPv4, "10.42.0.5", "10.42.0.6")},
		{name: "valid FQDN", slice: slice(discoveryv1.AddressTypeFQDN, "db.example.com")},
		{name: "missing type", slice: slice("", "10.42.0.5"), want: []string{"addressType: Required value"}},
		{name: "bad type", slice: slice("IP", "10.42.0.5"), want: []string{"addressType: Unsupported value"}},
		{name: "IPv6 in IPv4 slice", slice: slice(discoveryv1.AddressTypeIPv4, "fd00::1"), want: []string{"endpoints[0].addresses[0]: Invalid value"}},
		{name: "loopback", slice: slice(discoveryv1.AddressTypeIPv4, "127.0.0.1"), want: []string{"endpoints[0].addresses[0]: Invalid value"}},
		{name: "IPv4 in IPv6 slice", slice: slice(discoveryv1.AddressTypeIPv6, "10.42.0.5"), want: []string{"endpoints[0].addresses[0]: Invalid value"}},
		{name: "bad FQDN", slice: slice(discoveryv1.AddressTypeFQDN, "not a name"), want: []string{"endpoints[0].addresses[0]: Invalid value"}},
		{name: "no addresses", slice: slice(discoveryv1.AddressTypeIPv4), mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{{}}
		}, want: []string{"endpoints[0].addresses: Required value"}},
		{name: "too many endpoints", slice: slice(discoveryv1.AddressTypeIPv4, many(1001)...), want: []string{"endpoints: Too many"}},
		{name: "1000 endpoints", slice: slice(discoveryv1.AddressTypeIPv4, many(1000)...)},
		{name: "too many ports", slice: slice(discoveryv1.AddressTypeIPv4), mutate: func(s *discoveryv1.EndpointSlice) {
			s.Ports = nil
			for i := 0; i < 101; i++ {
				s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(fmt.Sprint("p", i))})
			}
		}, want: []string{"ports: Too many"}},
		{name: "port problems", slice: slice(discoveryv1.AddressTypeIPv4), mutate: func(s *discoveryv1.EndpointSlice) {
			s.Ports = []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}, {Port: ptr.To[int32](0)}, {Name: ptr.To("Bad"), Protocol: ptr.To(corev1.Protocol("ICMP"))}}
		}, want: []string{"ports[1].name: Duplicate value", "ports[1].port: Invalid value", "ports[2].name: Invalid value", "ports[2].protocol: Unsupported value"}},
		{name: "bad hostname and node", slice: slice(discoveryv1.AddressTypeIPv4, "10.42.0.5"), mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Hostname = ptr.To("A_B")
			s.Endpoints[0].NodeName = ptr.To("Node_1")
		}, want: []string{"endpoints[0].hostname: Invalid value", "endpoints[0].nodeName: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mutate != nil {
				tc.mutate(tc.slice)
			}
			Strategy{}.PrepareForCreate(ctx, tc.slice)
			if d := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, tc.slice))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	old := slice(discoveryv1.AddressTypeIPv4, "10.42.0.5")
	Strategy{}.PrepareForCreate(ctx, old)
	tests := []struct {
		name     string
		mutate   func(*discoveryv1.EndpointSlice)
		wantGen  int64
		wantErrs []string
	}{
		{name: "annotation only", mutate: func(s *discoveryv1.EndpointSlice) { s.Annotations = map[string]string{"a": "b"} }, wantGen: 1},
		{name: "label", mutate: func(s *discoveryv1.EndpointSlice) { s.Labels["x"] = "y" }, wantGen: 2},
		{name: "endpoint", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Conditions.Ready = ptr.To(false) }, wantGen: 2},
		{name: "address type", mutate: func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeFQDN }, wantGen: 2,
			wantErrs: []string{"addressType: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := old.DeepCopy()
			tc.mutate(s)
			Strategy{}.PrepareForUpdate(ctx, s, old)
			if s.Generation != tc.wantGen {
				t.Errorf("generation = %d, want %d", s.Generation, tc.wantGen)
			}
			if d := cmp.Diff(tc.wantErrs, errStrings(Strategy{}.ValidateUpdate(ctx, s, old))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	s := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{}}}
	Default(s)
	want := []discoveryv1.EndpointPort{{Name: ptr.To(""), Protocol: ptr.To(corev1.ProtocolTCP)}}
	if d := cmp.Diff(want, s.Ports); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestTableRow(t *testing.T) {
	tests := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		want  []interface{}
	}{
		{name: "two", slice: slice(discoveryv1.AddressTypeIPv4, "10.42.0.5", "10.42.0.6"),
			want: []interface{}{"web-abc", "IPv4", "80", "10.42.0.5,10.42.0.6", "2m"}},
		{name: "more", slice: slice(discoveryv1.AddressTypeIPv4, "10.42.0.1", "10.42.0.2", "10.42.0.3", "10.42.0.4", "10.42.0.5"),
			want: []interface{}{"web-abc", "IPv4", "80", "10.42.0.1,10.42.0.2,10.42.0.3 + 2 more...", "2m"}},
		{name: "unset", slice: func() *discoveryv1.EndpointSlice {
			s := slice(discoveryv1.AddressTypeIPv4)
			s.Ports = nil
			return s
		}(), want: []interface{}{"web-abc", "IPv4", "<unset>", "<unset>", "2m"}},
		{name: "many ports, nil port", slice: func() *discoveryv1.EndpointSlice {
			s := slice(discoveryv1.AddressTypeIPv4, "10.42.0.1")
			s.Ports = []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}, {}, {Name: ptr.To("dns")}, {Port: ptr.To[int32](9)}, {Port: ptr.To[int32](10)}}
			return s
		}(), want: []interface{}{"web-abc", "IPv4", "80,*,dns + 2 more...", "10.42.0.1", "2m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.slice.CreationTimestamp = metav1.NewTime(time.Now().Add(-2 * time.Minute))
			got, err := Strategy{}.TableRow(tc.slice)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
