package endpoints

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func addrs(ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, corev1.EndpointAddress{IP: ip})
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    []string
	}{
		{name: "valid", subsets: []corev1.EndpointSubset{{Addresses: addrs("10.42.0.5"), Ports: []corev1.EndpointPort{{Port: 80}}}}},
		{name: "no addresses", subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}}},
			want: []string{"subsets[0]: Required value"}},
		{name: "bad and special IPs", subsets: []corev1.EndpointSubset{{
			Addresses:         addrs("10.42.0.300", "127.0.0.1"),
			NotReadyAddresses: addrs("169.254.1.1"),
		}}, want: []string{
			"subsets[0].addresses[0].ip: Invalid value",
			"subsets[0].addresses[1].ip: Invalid value",
			"subsets[0].notReadyAddresses[0].ip: Invalid value",
		}},
		{name: "ports need names when several", subsets: []corev1.EndpointSubset{{
			Addresses: addrs("10.42.0.5"),
			Ports:     []corev1.EndpointPort{{Port: 80}, {Name: "Bad_Name", Port: 0, Protocol: "ICMP"}},
		}}, want: []string{
			"subsets[0].ports[0].name: Required value",
			"subsets[0].ports[1].name: Invalid value",
			"subsets[0].ports[1].port: Invalid value",
			"subsets[0].ports[1].protocol: Unsupported value",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Subsets: tc.subsets}
			Strategy{}.PrepareForCreate(context.Background(), ep)
			if d := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(context.Background(), ep))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestDefaultProtocol(t *testing.T) {
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}}}}
	Default(ep)
	if ep.Subsets[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("protocol = %q", ep.Subsets[0].Ports[0].Protocol)
	}
}

func TestTableRow(t *testing.T) {
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{
		{name: "none", want: "<none>"},
		{name: "two", subsets: []corev1.EndpointSubset{{Addresses: addrs("10.42.0.5", "10.42.0.6"), Ports: []corev1.EndpointPort{{Port: 80}}}},
			want: "10.42.0.5:80,10.42.0.6:80"},
		{name: "more", subsets: []corev1.EndpointSubset{{
			Addresses: addrs("10.42.0.5", "10.42.0.6", "10.42.0.7", "10.42.0.8", "10.42.0.9", "10.42.0.10"),
			Ports:     []corev1.EndpointPort{{Port: 80}},
		}}, want: "10.42.0.5:80,10.42.0.6:80,10.42.0.7:80 + 3 more..."},
		{name: "headless without ports", subsets: []corev1.EndpointSubset{{Addresses: addrs("10.42.0.5")}},
			want: "10.42.0.5"},
		{name: "ipv6", subsets: []corev1.EndpointSubset{{Addresses: addrs("fd00::5"), Ports: []corev1.EndpointPort{{Port: 443}}}},
			want: "[fd00::5]:443"},
		{name: "only not ready", subsets: []corev1.EndpointSubset{{NotReadyAddresses: addrs("10.42.0.5"), Ports: []corev1.EndpointPort{{Port: 80}}}},
			want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := &corev1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
				Subsets:    tc.subsets,
			}
			got, err := Strategy{}.TableRow(ep)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]interface{}{"web", tc.want, "60m"}, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.StoragePrefix != "services/endpoints" || r.ShortNames[0] != "ep" || !r.Namespaced {
		t.Errorf("%+v", r)
	}
}
