package endpointslicemirroring

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func endpoints(subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "ns", UID: "ep-uid",
			Labels:      map[string]string{"team": "a"},
			Annotations: map[string]string{"note": "x", corev1.EndpointsLastChangeTriggerTime: "t", corev1.LastAppliedConfigAnnotation: "{}"}},
		Subsets: subsets,
	}
}

func addrs(ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, corev1.EndpointAddress{IP: ip})
	}
	return out
}

func tcp(name string, port int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

// describe is each slice as "addressType ports: ip/ready ...", sorted.
func describe(slices []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		var ports, eps []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", deref(p.Name), deref32(p.Port)))
		}
		for _, e := range s.Endpoints {
			r := "ready"
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				r = "notready"
			}
			eps = append(eps, e.Addresses[0]+"/"+r)
		}
		out = append(out, fmt.Sprintf("%s %s: %s", s.AddressType, strings.Join(ports, ","), strings.Join(eps, " ")))
	}
	sort.Strings(out)
	return out
}

func TestDesired(t *testing.T) {
	tests := []struct {
		name    string
		ep      *corev1.Endpoints
		max     int
		want    []string
		skipped skipped
	}{
		{
			name: "one subset",
			ep:   endpoints(corev1.EndpointSubset{Addresses: addrs("10.1.2.3"), NotReadyAddresses: addrs("10.1.2.4"), Ports: []corev1.EndpointPort{tcp("", 80)}}),
			max:  1000,
			want: []string{"IPv4 :80: 10.1.2.3/ready 10.1.2.4/notready"},
		},
		{
			name: "IPv4 and IPv6 go to slices of their own",
			ep:   endpoints(corev1.EndpointSubset{Addresses: addrs("10.1.2.3", "fd00::1"), Ports: []corev1.EndpointPort{tcp("http", 80)}}),
			max:  1000,
			want: []string{"IPv4 http:80: 10.1.2.3/ready", "IPv6 http:80: fd00::1/ready"},
		},
		{
			name: "subsets with the same ports are merged; not ready on one port is not ready",
			ep: endpoints(
				corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: []corev1.EndpointPort{tcp("a", 1)}},
				corev1.EndpointSubset{Addresses: addrs("10.0.0.3"), NotReadyAddresses: addrs("10.0.0.2"), Ports: []corev1.EndpointPort{tcp("a", 1)}},
				corev1.EndpointSubset{Addresses: addrs("10.0.0.9"), Ports: []corev1.EndpointPort{tcp("b", 2)}},
			),
			max: 1000,
			want: []string{
				"IPv4 a:1: 10.0.0.1/ready 10.0.0.2/notready 10.0.0.3/ready",
				"IPv4 b:2: 10.0.0.9/ready",
			},
		},
		{
			name:    "at most max addresses a subset, ready ones first",
			ep:      endpoints(corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "10.0.0.2"), NotReadyAddresses: addrs("10.0.0.3"), Ports: []corev1.EndpointPort{tcp("", 80)}}),
			max:     2,
			want:    []string{"IPv4 :80: 10.0.0.1/ready 10.0.0.2/ready"},
			skipped: skipped{overflow: 1},
		},
		{
			name:    "addresses that are not IPs are skipped",
			ep:      endpoints(corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "not-an-ip"), Ports: []corev1.EndpointPort{tcp("", 80)}}),
			max:     1000,
			want:    []string{"IPv4 :80: 10.0.0.1/ready"},
			skipped: skipped{invalid: 1},
		},
		{
			name: "no addresses, no slices",
			ep:   endpoints(corev1.EndpointSubset{Ports: []corev1.EndpointPort{tcp("", 80)}}),
			max:  1000,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			groups, skip := desiredGroups(tc.ep, tc.max)
			ch := plan(tc.ep, nil, groups)
			if diff := cmp.Diff(tc.want, describe(ch.create)); diff != "" {
				t.Errorf("slices (-want +got):\n%s", diff)
			}
			if skip != tc.skipped {
				t.Errorf("skipped %+v, want %+v", skip, tc.skipped)
			}
			if len(ch.update)+len(ch.delete) != 0 {
				t.Errorf("updates %d, deletes %d from nothing", len(ch.update), len(ch.delete))
			}
		})
	}
}

func TestNewSliceMetadata(t *testing.T) {
	ep := endpoints(corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3", Hostname: "h",
		NodeName: ptr("n1"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "p", UID: "p-uid"}}},
		Ports: []corev1.EndpointPort{tcp("http", 80)}})
	groups, _ := desiredGroups(ep, MaxEndpointsPerSubset)
	ch := plan(ep, nil, groups)
	if len(ch.create) != 1 {
		t.Fatalf("creates %d slices, want 1", len(ch.create))
	}
	s := ch.create[0]
	if diff := cmp.Diff(map[string]string{"team": "a", discoveryv1.LabelServiceName: "ext", discoveryv1.LabelManagedBy: ManagedBy}, s.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"note": "x"}, s.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Endpoints" || s.OwnerReferences[0].UID != "ep-uid" ||
		s.OwnerReferences[0].Controller == nil || !*s.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v, want the Endpoints as controller", s.OwnerReferences)
	}
	e := s.Endpoints[0]
	if deref(e.Hostname) != "h" || deref(e.NodeName) != "n1" || e.TargetRef == nil || e.TargetRef.UID != "p-uid" {
		t.Errorf("endpoint %+v: hostname, node name and target not mirrored", e)
	}
	if !strings.HasPrefix(s.Name, "ext-") || s.Name == sliceName("ext", "other") {
		t.Errorf("name %q", s.Name)
	}
}

func TestPlanAgainstExisting(t *testing.T) {
	ep := endpoints(corev1.EndpointSubset{Addresses: addrs("10.2.3.4"), Ports: []corev1.EndpointPort{tcp("", 80)}})
	groups, _ := desiredGroups(ep, MaxEndpointsPerSubset)
	current := plan(ep, nil, groups).create[0]
	current.UID, current.ResourceVersion = types.UID("s1"), "5"

	// In line: nothing to do.
	if ch := plan(ep, []*discoveryv1.EndpointSlice{current}, groups); len(ch.create)+len(ch.update)+len(ch.delete) != 0 {
		t.Errorf("in line, got %d creates %d updates %d deletes", len(ch.create), len(ch.update), len(ch.delete))
	}

	// An address changed: the slice is updated in place.
	old := current.DeepCopy()
	old.Endpoints[0].Addresses = []string{"10.1.2.3"}
	ch := plan(ep, []*discoveryv1.EndpointSlice{old}, groups)
	if len(ch.update) != 1 || len(ch.create)+len(ch.delete) != 0 || ch.update[0].Name != old.Name || ch.update[0].ResourceVersion != "5" {
		t.Fatalf("changed address: %d creates %d updates %d deletes", len(ch.create), len(ch.update), len(ch.delete))
	}
	if diff := cmp.Diff([]string{"IPv4 :80: 10.2.3.4/ready"}, describe(ch.update)); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}

	// A duplicate of the group is deleted; a slice of ports no longer
	// there is deleted.
	dup := current.DeepCopy()
	dup.Name = "ext-generated"
	gone := current.DeepCopy()
	gone.Name = "ext-gone"
	gone.Ports = []discoveryv1.EndpointPort{{Name: ptr("x"), Port: ptr32(9), Protocol: ptrProto(corev1.ProtocolTCP)}}
	ch = plan(ep, []*discoveryv1.EndpointSlice{dup, gone, current}, groups)
	var deleted []string
	for _, s := range ch.delete {
		deleted = append(deleted, s.Name)
	}
	sort.Strings(deleted)
	if diff := cmp.Diff([]string{"ext-generated", "ext-gone"}, deleted); diff != "" || len(ch.create)+len(ch.update) != 0 {
		t.Errorf("deleted (-want +got):\n%s; creates %d updates %d", diff, len(ch.create), len(ch.update))
	}

	// While the Endpoints is being deleted nothing new is created.
	now := metav1.Now()
	dying := ep.DeepCopy()
	dying.DeletionTimestamp = &now
	if ch := plan(dying, nil, groups); len(ch.create) != 0 {
		t.Errorf("creates %d slices for an Endpoints being deleted", len(ch.create))
	}
}

func TestShouldMirror(t *testing.T) {
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        bool
	}{
		{name: "plain", want: true},
		{name: "skip-mirror true", labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}, want: false},
		{name: "skip-mirror false", labels: map[string]string{discoveryv1.LabelSkipMirror: "false"}, want: true},
		{name: "leader election record", annotations: map[string]string{"control-plane.alpha.kubernetes.io/leader": "{}"}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}}
			if got := shouldMirror(ep); got != tc.want {
				t.Errorf("shouldMirror = %v, want %v", got, tc.want)
			}
		})
	}
}

func ptr(s string) *string                        { return &s }
func ptr32(i int32) *int32                        { return &i }
func ptrProto(p corev1.Protocol) *corev1.Protocol { return &p }
