package apiserver

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
)

func TestPlanIPRepair(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	svc := func(name, ip string, created time.Duration) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-created))},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}}}
	}
	addr := func(ip, service string, age time.Duration) *networkingv1.IPAddress {
		return &networkingv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Name: ip, CreationTimestamp: metav1.NewTime(now.Add(-age)),
				Labels: map[string]string{managedByLabel: managedByValue}},
			Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "ns", Name: service}},
		}
	}
	foreign := addr("10.43.0.9", "ghost", time.Hour)
	foreign.Labels = nil
	gateway := addr("10.43.0.8", "gw", time.Hour)
	gateway.Spec.ParentRef.Group, gateway.Spec.ParentRef.Resource = "gateway.networking.k8s.io", "gateways"
	tests := []struct {
		name       string
		ips        []*networkingv1.IPAddress
		svcs       []*corev1.Service
		wantDelete []string
		wantClaim  []ipClaim
	}{
		{name: "held by its Service", ips: []*networkingv1.IPAddress{addr("10.43.0.5", "web", time.Hour)},
			svcs: []*corev1.Service{svc("web", "10.43.0.5", time.Hour)}},
		{name: "Service missing for over a minute: leaked", ips: []*networkingv1.IPAddress{addr("10.43.0.5", "web", 61*time.Second)},
			wantDelete: []string{"10.43.0.5"}},
		{name: "Service missing, address young: maybe being written", ips: []*networkingv1.IPAddress{addr("10.43.0.5", "web", 30*time.Second)}},
		{name: "Service holds another address", ips: []*networkingv1.IPAddress{addr("10.43.0.5", "web", time.Hour)},
			svcs: []*corev1.Service{svc("web", "10.43.0.6", 2*time.Hour)}, wantDelete: []string{"10.43.0.5"},
			wantClaim: []ipClaim{{ip: "10.43.0.6", owner: ownerOf("web")}}},
		{name: "address newer than a recreated Service, a few seconds old", ips: []*networkingv1.IPAddress{addr("10.43.0.5", "web", 2*time.Second)},
			svcs: []*corev1.Service{svc("web", "10.43.0.6", 3*time.Second)}, wantClaim: []ipClaim{{ip: "10.43.0.6", owner: ownerOf("web")}}},
		{name: "not the allocator's, or not a Service's", ips: []*networkingv1.IPAddress{foreign, gateway}, wantDelete: []string{"10.43.0.8"}},
		{name: "Service without its IPAddress", svcs: []*corev1.Service{svc("web", "10.43.0.5", time.Hour), svc("headless", "None", time.Hour)},
			wantClaim: []ipClaim{{ip: "10.43.0.5", owner: ownerOf("web")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := planIPRepair(tc.ips, tc.svcs, now, ipLeakGracePeriod)
			var deleted []string
			for _, ip := range plan.delete {
				deleted = append(deleted, ip.Name)
			}
			if diff := cmp.Diff(tc.wantDelete, deleted, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantClaim, plan.claim, cmp.AllowUnexported(ipClaim{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("claimed (-want +got):\n%s", diff)
			}
		})
	}
}

func ownerOf(name string) allocator.Owner { return allocator.Owner{Namespace: "ns", Name: name} }
