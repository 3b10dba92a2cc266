package integration

import (
	"github.com/google/go-cmp/cmp"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newService(name string, typ corev1.ServiceType, clusterIP string, nodePort int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
		Type: typ, ClusterIP: clusterIP, Selector: map[string]string{"app": name},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: nodePort}},
	}}
}

// testServiceAllocation: ClusterIPs come from 10.43.0.0/16 and NodePorts
// from 30000-32767; an address in use is refused with 422 until its
// Service is deleted.
func testServiceAllocation(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	svcs := cs.CoreV1().Services(ns)
	cidr := netip.MustParsePrefix("10.43.0.0/16")

	a, err := svcs.Create(ctx, newService("a", corev1.ServiceTypeClusterIP, "", 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a: %v", err)
	}
	ip, err := netip.ParseAddr(a.Spec.ClusterIP)
	if err != nil || !cidr.Contains(ip) {
		t.Errorf("clusterIP %q, want an address in %s", a.Spec.ClusterIP, cidr)
	}
	if len(a.Spec.ClusterIPs) != 1 || a.Spec.ClusterIPs[0] != a.Spec.ClusterIP {
		t.Errorf("clusterIPs %v, want [%s]", a.Spec.ClusterIPs, a.Spec.ClusterIP)
	}
	if a.Spec.Ports[0].TargetPort.IntValue() != 80 || a.Spec.Ports[0].Protocol != corev1.ProtocolTCP || a.Spec.SessionAffinity != corev1.ServiceAffinityNone {
		t.Errorf("defaults: targetPort %v protocol %q sessionAffinity %q", a.Spec.Ports[0].TargetPort, a.Spec.Ports[0].Protocol, a.Spec.SessionAffinity)
	}

	np, err := svcs.Create(ctx, newService("np", corev1.ServiceTypeNodePort, "", 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create np: %v", err)
	}
	if p := np.Spec.Ports[0].NodePort; p < 30000 || p > 32767 {
		t.Errorf("nodePort %d, want 30000-32767", p)
	}
	if np.Spec.ClusterIP == a.Spec.ClusterIP {
		t.Errorf("two services share clusterIP %s", a.Spec.ClusterIP)
	}
	usedPort := np.Spec.Ports[0].NodePort

	// in-use address and port: 422, nothing stored
	tests := []struct {
		name  string
		svc   *corev1.Service
		field string
	}{
		{"ip in use", newService("b", corev1.ServiceTypeClusterIP, a.Spec.ClusterIP, 0), "spec.clusterIPs"},
		{"ip outside range", newService("c", corev1.ServiceTypeClusterIP, "192.168.0.10", 0), "spec.clusterIPs"},
		{"nodePort in use", newService("d", corev1.ServiceTypeNodePort, "", usedPort), "spec.ports[0].nodePort"},
		{"nodePort outside range", newService("e", corev1.ServiceTypeNodePort, "", 80), "spec.ports[0].nodePort"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := nsSnapshot(t, c, ns)
			_, err := svcs.Create(ctx, tc.svc, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("err %v, want 422 Invalid", err)
			}
			if !hasCause(err, tc.field) {
				t.Errorf("causes %v, want one for %s", causes(err), tc.field)
			}
			if diff := cmp.Diff(before, nsSnapshot(t, c, ns)); diff != "" {
				t.Errorf("etcd changed under the namespace (-before +after):\n%s", diff)
			}
		})
	}

	// delete releases: the same IP and port can be asked for again
	if err := svcs.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete a: %v", err)
	}
	if err := svcs.Delete(ctx, "np", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete np: %v", err)
	}
	eventually(t, 5*time.Second, "released clusterIP and nodePort reusable", func() (bool, error) {
		s, err := svcs.Create(ctx, newService("reuse", corev1.ServiceTypeNodePort, a.Spec.ClusterIP, usedPort), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return s.Spec.ClusterIP == a.Spec.ClusterIP && s.Spec.Ports[0].NodePort == usedPort, nil
	})

	// headless services get no IP
	h, err := svcs.Create(ctx, newService("headless", corev1.ServiceTypeClusterIP, corev1.ClusterIPNone, 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create headless: %v", err)
	}
	if h.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("headless clusterIP %q, want None", h.Spec.ClusterIP)
	}
	// clusterIP is immutable
	h.Spec.ClusterIP = "10.43.9.9"
	h.Spec.ClusterIPs = []string{"10.43.9.9"}
	if _, err := svcs.Update(ctx, h, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("change clusterIP: err %v, want Invalid", err)
	}
}

// causes lists the field paths of a 422's causes.
func causes(err error) []string {
	var out []string
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		return nil
	}
	for _, c := range st.Status().Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

func hasCause(err error, field string) bool {
	for _, f := range causes(err) {
		if f == field {
			return true
		}
	}
	return false
}
