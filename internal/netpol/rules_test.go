package netpol

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txt golden files")

func mkPod(ns, name, ip, node string, lbls map[string]string, ports ...v1.ContainerPort) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, UID: types.UID(ns + "-" + name)},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Ports: ports}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning, PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}}},
	}
}

func mkNS(name string, lbls map[string]string) *v1.Namespace {
	l := map[string]string{"kubernetes.io/metadata.name": name}
	for k, v := range lbls {
		l[k] = v
	}
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func policy(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func tcpPort(p intstr.IntOrString) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(v1.ProtocolTCP), Port: &p}
}

func TestComputeGolden(t *testing.T) {
	pods := []*v1.Pod{
		mkPod("prod", "web", "10.42.1.2", "n1", map[string]string{"app": "web"}, v1.ContainerPort{Name: "http", ContainerPort: 8080}),
		mkPod("prod", "client", "10.42.2.2", "n1", map[string]string{"role": "client"}),
		mkPod("dev", "tool", "10.42.3.2", "n2", map[string]string{"role": "client"}),
		mkPod("prod", "db", "10.42.1.9", "n2", map[string]string{"app": "db"}, v1.ContainerPort{Name: "sql", ContainerPort: 5432}),
	}
	nss := []*v1.Namespace{mkNS("prod", nil), mkNS("dev", map[string]string{"team": "dev"})}
	dns := []Dest{{IP: netip.MustParseAddr("192.168.1.5"), Protocol: v1.ProtocolUDP, Port: 53}, {IP: netip.MustParseAddr("192.168.1.5"), Protocol: v1.ProtocolTCP, Port: 53}}
	tests := []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
	}{
		{name: "no-policies"},
		{name: "default-deny-ingress", policies: []*networkingv1.NetworkPolicy{
			policy("prod", "deny", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}),
		}},
		{name: "allow-by-pod-and-namespace-label-named-port", policies: []*networkingv1.NetworkPolicy{
			policy("prod", "web", networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{
						{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}},
						{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "dev"}}},
						{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.7.0/24"}}},
					},
					Ports: []networkingv1.NetworkPolicyPort{tcpPort(intstr.FromString("http")), tcpPort(intstr.FromString("nope"))},
				}},
			}),
		}},
		{name: "egress-port-range-and-named-port", policies: []*networkingv1.NetworkPolicy{
			policy("prod", "client-out", networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{
					{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.42.3.0/24"}}},
						Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8000)), EndPort: ptr.To[int32](8100)}}},
					{Ports: []networkingv1.NetworkPolicyPort{tcpPort(intstr.FromString("sql"))}},
				},
			}),
		}},
		{name: "selector-matching-nothing-allows-nothing", policies: []*networkingv1.NetworkPolicy{
			policy("prod", "web", networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "ghost"}}}}}},
			}),
		}},
		{name: "allow-all-ingress", policies: []*networkingv1.NetworkPolicy{
			policy("prod", "all", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(Input{NodeName: "n1", Pods: pods, Namespaces: nss, Policies: tc.policies, AlwaysAllowed: dns}).Transaction(nil, nil)
			path := filepath.Join("testdata", tc.name+".txt")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", path, diff)
			}
		})
	}
}
