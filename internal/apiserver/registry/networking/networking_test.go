package networking

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func TestNetworkPolicyDefaults(t *testing.T) {
	tests := []struct {
		name string
		spec networkingv1.NetworkPolicySpec
		want []networkingv1.PolicyType
	}{
		{name: "ingress only", want: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		{name: "with egress", spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}},
			want: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
		{name: "explicit kept", spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
			want: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := &networkingv1.NetworkPolicy{Spec: tc.spec}
			NetworkPolicyStrategy{}.PrepareForCreate(ctx, np)
			if diff := cmp.Diff(tc.want, np.Spec.PolicyTypes); diff != "" {
				t.Errorf("policyTypes (-want +got):\n%s", diff)
			}
			if np.Generation != 1 {
				t.Errorf("generation = %d, want 1", np.Generation)
			}
		})
	}
	np := &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(80))}},
	}}}}
	DefaultNetworkPolicy(np)
	if p := np.Spec.Ingress[0].Ports[0].Protocol; p == nil || *p != corev1.ProtocolTCP {
		t.Errorf("port protocol = %v, want TCP", p)
	}
}

func TestNetworkPolicyValidate(t *testing.T) {
	port := func(p intstr.IntOrString, end *int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Port: &p, EndPort: end}
	}
	tests := []struct {
		name string
		spec networkingv1.NetworkPolicySpec
		want []string
	}{
		{name: "empty is valid"},
		{name: "bad ports", spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			port(intstr.FromInt32(0), nil),
			port(intstr.FromInt32(100), ptr.To[int32](50)),
			port(intstr.FromString("http"), ptr.To[int32](90)),
			{EndPort: ptr.To[int32](90)},
			{Protocol: ptr.To(corev1.Protocol("ICMP"))},
		}}}}, want: []string{
			"spec.ingress[0].ports[0].port: Invalid value",
			"spec.ingress[0].ports[1].endPort: Invalid value",
			"spec.ingress[0].ports[2].endPort: Forbidden",
			"spec.ingress[0].ports[3].endPort: Forbidden",
			"spec.ingress[0].ports[4].protocol: Unsupported value",
		}},
		{name: "peers", spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
			{},
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"192.168.0.0/24", "10.1.0.0/16"}}},
			{IPBlock: &networkingv1.IPBlock{}},
		}}}}, want: []string{
			"spec.egress[0].to[0]: Required value",
			"spec.egress[0].to[1]: Forbidden",
			"spec.egress[0].to[2].ipBlock.except[0]: Invalid value",
			"spec.egress[0].to[3].ipBlock.cidr: Required value",
		}},
		{name: "policy types", spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Ingress", "Egress", "Sideways"}},
			want: []string{"spec.policyTypes[2]: Unsupported value", "spec.policyTypes: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NetworkPolicyStrategy{}.Validate(ctx, &networkingv1.NetworkPolicy{Spec: tc.spec})
			if diff := cmp.Diff(tc.want, errStrings(got)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func svcBackend(name string, port networkingv1.ServiceBackendPort) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: port}}
}

func TestIngressValidate(t *testing.T) {
	prefix := ptr.To(networkingv1.PathTypePrefix)
	rule := func(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
	}
	good := svcBackend("web", networkingv1.ServiceBackendPort{Number: 80})
	tests := []struct {
		name string
		spec networkingv1.IngressSpec
		want []string
	}{
		{name: "valid", spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
			rule("*.example.com", networkingv1.HTTPIngressPath{Path: "/", PathType: prefix, Backend: good}),
		}}},
		{name: "empty", want: []string{"spec: Invalid value"}},
		{name: "ip host and bad paths", spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
			rule("10.0.0.1",
				networkingv1.HTTPIngressPath{Path: "api", PathType: prefix, Backend: good},
				networkingv1.HTTPIngressPath{Path: "/a", Backend: good},
				networkingv1.HTTPIngressPath{Path: "/a//b", PathType: prefix, Backend: good},
			),
			rule("x.io"),
		}}, want: []string{
			"spec.rules[0].host: Invalid value",
			"spec.rules[0].http.paths[0].path: Invalid value",
			"spec.rules[0].http.paths[1].pathType: Required value",
			"spec.rules[0].http.paths[2].path: Invalid value",
			"spec.rules[1].http.paths: Required value",
		}},
		{name: "backends", spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{},
			Rules: []networkingv1.IngressRule{rule("",
				networkingv1.HTTPIngressPath{Path: "/", PathType: prefix, Backend: svcBackend("web", networkingv1.ServiceBackendPort{})},
				networkingv1.HTTPIngressPath{Path: "/", PathType: prefix, Backend: svcBackend("Web", networkingv1.ServiceBackendPort{Name: "http", Number: 80})},
			)},
		}, want: []string{
			"spec.defaultBackend: Invalid value",
			"spec.rules[0].http.paths[0].backend.service.port: Required value",
			"spec.rules[0].http.paths[1].backend.service.name: Invalid value",
			"spec.rules[0].http.paths[1].backend.service.port: Invalid value",
		}},
		{name: "class name", spec: networkingv1.IngressSpec{DefaultBackend: &good, IngressClassName: ptr.To("Bad_Class")},
			want: []string{"spec.ingressClassName: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := IngressStrategy{}.Validate(ctx, &networkingv1.Ingress{Spec: tc.spec})
			if diff := cmp.Diff(tc.want, errStrings(got)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIngressStatusRules(t *testing.T) {
	s := IngressStrategy{}
	lb := networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.1"}}}}
	ing := &networkingv1.Ingress{Status: lb}
	s.PrepareForCreate(ctx, ing)
	if len(ing.Status.LoadBalancer.Ingress) != 0 || ing.Generation != 1 {
		t.Errorf("create: status %v generation %d", ing.Status, ing.Generation)
	}
	old := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Status: lb}
	next := old.DeepCopy()
	next.Status = networkingv1.IngressStatus{}
	next.Spec.IngressClassName = ptr.To("nginx")
	s.PrepareForUpdate(ctx, next, old)
	if next.Generation != 4 || len(next.Status.LoadBalancer.Ingress) != 1 {
		t.Errorf("update: generation %d status %v", next.Generation, next.Status)
	}
	bad := &networkingv1.Ingress{Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
		Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "nope"}, {Hostname: "1.2.3.4"}}}}}
	want := []string{"status.loadBalancer.ingress[0].ip: Invalid value", "status.loadBalancer.ingress[1].hostname: Invalid value"}
	if diff := cmp.Diff(want, errStrings(s.ValidateStatusUpdate(ctx, bad, old))); diff != "" {
		t.Errorf("status errors (-want +got):\n%s", diff)
	}
}

func TestIngressClass(t *testing.T) {
	s := IngressClassStrategy{}
	ic := &networkingv1.IngressClass{Spec: networkingv1.IngressClassSpec{
		Controller: "example.com/ingress", Parameters: &networkingv1.IngressClassParametersReference{Kind: "Params", Name: "p"},
	}}
	s.PrepareForCreate(ctx, ic)
	if ic.Spec.Parameters.Scope == nil || *ic.Spec.Parameters.Scope != "Cluster" {
		t.Fatalf("scope not defaulted to Cluster: %v", ic.Spec.Parameters.Scope)
	}
	tests := []struct {
		name string
		spec networkingv1.IngressClassSpec
		want []string
	}{
		{name: "no controller", want: []string{"spec.controller: Required value"}},
		{name: "undomained controller", spec: networkingv1.IngressClassSpec{Controller: "nginx"}, want: []string{"spec.controller: Invalid value"}},
		{name: "namespace scope without namespace", spec: networkingv1.IngressClassSpec{Controller: "k8s.io/x",
			Parameters: &networkingv1.IngressClassParametersReference{Kind: "K", Name: "n", Scope: ptr.To("Namespace")}},
			want: []string{"spec.parameters.namespace: Required value"}},
		{name: "cluster scope with namespace", spec: networkingv1.IngressClassSpec{Controller: "k8s.io/x",
			Parameters: &networkingv1.IngressClassParametersReference{Scope: ptr.To("Cluster"), Namespace: ptr.To("default")}},
			want: []string{"spec.parameters.kind: Required value", "spec.parameters.name: Required value", "spec.parameters.namespace: Forbidden"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(s.Validate(ctx, &networkingv1.IngressClass{Spec: tc.spec}))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	next := ic.DeepCopy()
	next.Spec.Controller = "example.com/other"
	if diff := cmp.Diff([]string{"spec.controller: Invalid value"}, errStrings(s.ValidateUpdate(ctx, next, ic))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
}

func TestTables(t *testing.T) {
	tests := []struct {
		name     string
		strategy registry.Strategy
		obj      runtime.Object
		columns  []string
		want     []interface{}
	}{
		{
			name: "ingress", strategy: IngressStrategy{},
			obj: &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To("nginx"),
				Rules:            []networkingv1.IngressRule{{Host: "a.io"}, {}, {Host: "c.io"}, {Host: "d.io"}, {Host: "e.io"}},
				TLS:              []networkingv1.IngressTLS{{Hosts: []string{"a.io"}}},
			}, Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{
				{IP: "10.0.0.2"}, {Hostname: "lb.example.com"}, {IP: "10.0.0.1"},
			}}}},
			columns: []string{"Name", "Class", "Hosts", "Address", "Ports", "Age"},
			want:    []interface{}{"web", "nginx", "a.io,c.io,d.io + 2 more...", "10.0.0.1,10.0.0.2,lb.example.com", "80, 443", "<unknown>"},
		},
		{
			name: "ingress without class or hosts", strategy: IngressStrategy{},
			obj:     &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
			columns: []string{"Name", "Class", "Hosts", "Address", "Ports", "Age"},
			want:    []interface{}{"web", "<none>", "*", "", "80", "<unknown>"},
		},
		{
			name: "networkpolicy", strategy: NetworkPolicyStrategy{},
			obj: &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny"}, Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			columns: []string{"Name", "Pod-Selector", "Age"},
			want:    []interface{}{"deny", "app=web", "<unknown>"},
		},
		{
			name: "ingressclass", strategy: IngressClassStrategy{},
			obj: &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{
				Controller: "k8s.io/ingress-nginx", Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("k8s.example.com"), Kind: "IngressParameters", Name: "p"}}},
			columns: []string{"Name", "Controller", "Parameters", "Age"},
			want:    []interface{}{"nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/p", "<unknown>"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cols []string
			for _, c := range tc.strategy.TableColumns() {
				cols = append(cols, c.Name)
			}
			if diff := cmp.Diff(tc.columns, cols); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			row, err := tc.strategy.TableRow(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, row); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}
