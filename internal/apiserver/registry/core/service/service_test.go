package service

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
)

var ctx = context.Background()

func newService(mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func TestDefaults(t *testing.T) {
	cluster := corev1.ServiceInternalTrafficPolicyCluster
	tests := []struct {
		name string
		in   *corev1.Service
		want corev1.ServiceSpec
	}{
		{
			name: "cluster IP",
			in:   newService(),
			want: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
				Selector:              map[string]string{"app": "web"},
				Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
				IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
				IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicySingleStack),
				InternalTrafficPolicy: &cluster,
			},
		},
		{
			name: "load balancer with named target port",
			in: newService(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.Ports[0].TargetPort = intstr.FromString("http")
				s.Spec.Ports[0].Protocol = corev1.ProtocolUDP
			}),
			want: corev1.ServiceSpec{
				Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityNone,
				Selector:                      map[string]string{"app": "web"},
				Ports:                         []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("http")}},
				IPFamilies:                    []corev1.IPFamily{corev1.IPv4Protocol},
				IPFamilyPolicy:                ptr.To(corev1.IPFamilyPolicySingleStack),
				InternalTrafficPolicy:         &cluster,
				ExternalTrafficPolicy:         corev1.ServiceExternalTrafficPolicyCluster,
				AllocateLoadBalancerNodePorts: ptr.To(true),
			},
		},
		{
			name: "headless without selector, client IP affinity",
			in: newService(func(s *corev1.Service) {
				s.Spec.Selector = nil
				s.Spec.ClusterIP = "None"
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			}),
			want: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}},
				ClusterIP:             "None", ClusterIPs: []string{"None"},
				Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
				IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
				IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicyRequireDualStack),
				InternalTrafficPolicy: &cluster,
			},
		},
		{
			name: "affinity switched off keeps no config",
			in: newService(func(s *corev1.Service) {
				s.Spec.SessionAffinity = corev1.ServiceAffinityNone
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}}
			}),
			want: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
				Selector:              map[string]string{"app": "web"},
				Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
				IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
				IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicySingleStack),
				InternalTrafficPolicy: &cluster,
			},
		},
		{
			name: "external name",
			in: newService(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeExternalName
				s.Spec.ExternalName = "example.com"
				s.Spec.Ports = nil
				s.Spec.Selector = nil
			}),
			want: corev1.ServiceSpec{
				Type: corev1.ServiceTypeExternalName, ExternalName: "example.com",
				SessionAffinity: corev1.ServiceAffinityNone,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			NewStrategy(nil).PrepareForCreate(ctx, tc.in)
			if d := cmp.Diff(tc.want, tc.in.Spec); d != "" {
				t.Errorf("spec (-want +got):\n%s", d)
			}
		})
	}
}

// errStrings renders errors as "path: type" for comparison.
func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   []string
	}{
		{name: "valid", mutate: func(s *corev1.Service) {}},
		{name: "no ports", mutate: func(s *corev1.Service) { s.Spec.Ports = nil }, want: []string{"spec.ports: Required value"}},
		{name: "headless without ports", mutate: func(s *corev1.Service) { s.Spec.Ports = nil; s.Spec.ClusterIP = "None" }},
		{name: "two ports without names", mutate: func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Port: 80}, {Port: 443}}
		}, want: []string{"spec.ports[0].name: Required value", "spec.ports[1].name: Required value"}},
		{name: "duplicate port names", mutate: func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "a", Port: 443}}
		}, want: []string{"spec.ports[1].name: Duplicate value"}},
		{name: "duplicate port and protocol", mutate: func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "b", Port: 80}}
		}, want: []string{"spec.ports[1]: Duplicate value"}},
		{name: "same port other protocol", mutate: func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 53}, {Name: "b", Port: 53, Protocol: corev1.ProtocolUDP}}
		}},
		{name: "bad port and protocol", mutate: func(s *corev1.Service) {
			s.Spec.Ports[0].Port = 70000
			s.Spec.Ports[0].Protocol = "HTTP"
		}, want: []string{"spec.ports[0].port: Invalid value", "spec.ports[0].protocol: Unsupported value", "spec.ports[0].targetPort: Invalid value"}},
		{name: "bad port name", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Name = "Web_1" },
			want: []string{"spec.ports[0].name: Invalid value"}},
		{name: "bad selector", mutate: func(s *corev1.Service) { s.Spec.Selector = map[string]string{"a b": "x"} },
			want: []string{"spec.selector: Invalid value"}},
		{name: "bad type", mutate: func(s *corev1.Service) { s.Spec.Type = "Magic" },
			want: []string{"spec.type: Unsupported value"}},
		{name: "bad cluster IP", mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "10.43.0.300" },
			want: []string{"spec.clusterIPs[0]: Invalid value"}},
		{name: "node port on ClusterIP", mutate: func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			want: []string{"spec.ports[0].nodePort: Forbidden"}},
		{name: "headless NodePort", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ClusterIP = "None"
		}, want: []string{"spec.clusterIPs[0]: Invalid value"}},
		{name: "external name missing", mutate: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName },
			want: []string{"spec.externalName: Required value"}},
		{name: "external name invalid", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "not_a_dns"
		}, want: []string{"spec.externalName: Invalid value"}},
		{name: "external name with trailing dot and cluster IP", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com."
			s.Spec.ClusterIP = "10.43.0.5"
		}, want: []string{"spec.clusterIPs: Forbidden"}},
		{name: "IPv6 family on IPv4 cluster", mutate: func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} },
			want: []string{"spec.ipFamilies[0]: Invalid value"}},
		{name: "require dual stack", mutate: func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		}, want: []string{"spec.ipFamilyPolicy: Invalid value"}},
		{name: "external traffic policy on ClusterIP", mutate: func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}, want: []string{"spec.externalTrafficPolicy: Invalid value"}},
		{name: "session affinity timeout", mutate: func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](0)}}
		}, want: []string{"spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value"}},
		{name: "allocateLoadBalancerNodePorts on NodePort", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(true)
		}, want: []string{"spec.allocateLoadBalancerNodePorts: Forbidden"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(tc.mutate)
			st := NewStrategy(nil)
			st.PrepareForCreate(ctx, s)
			got := errStrings(st.Validate(ctx, s))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}

func TestNameValidation(t *testing.T) {
	st := NewStrategy(nil)
	if msgs := st.ValidateName("1web", false); len(msgs) == 0 {
		t.Error("1web accepted; services need DNS-1035 labels")
	}
	if msgs := st.ValidateName("web-1", false); len(msgs) != 0 {
		t.Errorf("web-1 rejected: %v", msgs)
	}
}

func newAlloc(t *testing.T, cidr, ports string) *allocator.Services {
	t.Helper()
	a, err := allocator.NewServices(allocator.Options{ServiceCIDR: cidr, NodePortRange: ports})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// create runs the create path the generic handler runs.
func create(t *testing.T, st *Strategy, s *corev1.Service, dryRun bool) (func(), error) {
	t.Helper()
	st.PrepareForCreate(ctx, s)
	if errs := st.Validate(ctx, s); len(errs) > 0 {
		t.Fatalf("validate: %v", errs)
	}
	return st.BeforeCreate(ctx, s, dryRun)
}

func TestAllocateCreate(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(*corev1.Service)
		dryRun     bool
		wantErr    string
		wantIP     string
		wantPorts  []int32
		wantUsedIP int
		wantUsedNP int
	}{
		{name: "next IP", wantIP: "10.43.1.1", wantPorts: []int32{0}, wantUsedIP: 2, wantUsedNP: 1},
		{name: "requested IP", mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "10.43.0.10" },
			wantIP: "10.43.0.10", wantPorts: []int32{0}, wantUsedIP: 2, wantUsedNP: 1},
		{name: "requested IP taken", mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "10.43.0.1" },
			wantErr: `spec.clusterIPs: Invalid value: ["10.43.0.1"]: failed to allocate IP 10.43.0.1: provided IP is already allocated`, wantUsedIP: 1, wantUsedNP: 1},
		{name: "requested IP out of range", mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "10.44.0.1" },
			wantErr: `spec.clusterIPs: Invalid value: ["10.44.0.1"]: failed to allocate IP 10.44.0.1: the provided network does not match the current range`, wantUsedIP: 1, wantUsedNP: 1},
		{name: "headless", mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "None" },
			wantIP: "None", wantPorts: []int32{0}, wantUsedIP: 1, wantUsedNP: 1},
		{name: "node ports shared by protocol", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53}, {Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "web", Port: 80, NodePort: 30080}}
		}, wantIP: "10.43.1.1", wantPorts: []int32{30086, 30086, 30080}, wantUsedIP: 2, wantUsedNP: 3},
		{name: "requested node port taken", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30000
		}, wantErr: "spec.ports[0].nodePort: Invalid value: 30000: provided port is already allocated", wantUsedIP: 1, wantUsedNP: 1},
		{name: "node port out of range", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 8080
		}, wantErr: "provided port is not in the valid range. The range of valid ports is 30000-32767", wantUsedIP: 1, wantUsedNP: 1},
		{name: "load balancer local gets health check port", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}, wantIP: "10.43.1.1", wantPorts: []int32{30086}, wantUsedIP: 2, wantUsedNP: 3},
		{name: "load balancer without node ports", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		}, wantIP: "10.43.1.1", wantPorts: []int32{0}, wantUsedIP: 2, wantUsedNP: 1},
		{name: "dry run", dryRun: true, mutate: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort },
			wantIP: "10.43.1.1", wantPorts: []int32{30086}, wantUsedIP: 1, wantUsedNP: 1},
		{name: "dry run conflict", dryRun: true, mutate: func(s *corev1.Service) { s.Spec.ClusterIP = "10.43.0.1" },
			wantErr: "provided IP is already allocated", wantUsedIP: 1, wantUsedNP: 1},
		{name: "external name", mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
		}, wantPorts: []int32{0}, wantUsedIP: 1, wantUsedNP: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAlloc(t, "", "")
			// The kubernetes service holds 10.43.0.1 and a NodePort holds 30000.
			existing := *newService(func(s *corev1.Service) {
				s.Name = "kubernetes"
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.ClusterIP = "10.43.0.1"
				s.Spec.Ports[0].NodePort = 30000
			})
			if err := a.Rebuild([]corev1.Service{existing}); err != nil {
				t.Fatal(err)
			}
			st := NewStrategy(a)
			s := newService()
			if tc.mutate != nil {
				tc.mutate(s)
			}
			_, err := create(t, st, s, tc.dryRun)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if !apierrors.IsInvalid(err) {
					t.Errorf("err is not 422 Invalid: %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			} else {
				if s.Spec.ClusterIP != tc.wantIP {
					t.Errorf("clusterIP = %q, want %q", s.Spec.ClusterIP, tc.wantIP)
				}
				var got []int32
				for _, p := range s.Spec.Ports {
					got = append(got, p.NodePort)
				}
				if d := cmp.Diff(tc.wantPorts, got); d != "" {
					t.Errorf("node ports (-want +got):\n%s", d)
				}
			}
			if a.IPs.Used() != tc.wantUsedIP || a.Ports.Used() != tc.wantUsedNP {
				t.Errorf("used IPs=%d ports=%d, want %d and %d", a.IPs.Used(), a.Ports.Used(), tc.wantUsedIP, tc.wantUsedNP)
			}
		})
	}
}

func TestAllocateUndoAndDelete(t *testing.T) {
	a := newAlloc(t, "", "")
	st := NewStrategy(a)
	s := newService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	undo, err := create(t, st, s, false)
	if err != nil {
		t.Fatal(err)
	}
	if a.IPs.Used() != 1 || a.Ports.Used() != 1 {
		t.Fatalf("used %d/%d after create", a.IPs.Used(), a.Ports.Used())
	}
	undo()
	if a.IPs.Used() != 0 || a.Ports.Used() != 0 {
		t.Fatalf("used %d/%d after undo", a.IPs.Used(), a.Ports.Used())
	}
	s = newService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	if _, err := create(t, st, s, false); err != nil {
		t.Fatal(err)
	}
	st.AfterDelete(ctx, s)
	if a.IPs.Used() != 0 || a.Ports.Used() != 0 {
		t.Fatalf("used %d/%d after delete", a.IPs.Used(), a.Ports.Used())
	}
}

// update runs the update path the generic handler runs.
func update(t *testing.T, st *Strategy, s, old *corev1.Service, dryRun bool) (func(), field.ErrorList, error) {
	t.Helper()
	st.PrepareForUpdate(ctx, s, old)
	if errs := st.ValidateUpdate(ctx, s, old); len(errs) > 0 {
		return nil, errs, nil
	}
	undo, err := st.BeforeUpdate(ctx, s, old, dryRun)
	return undo, nil, err
}

func TestAllocateUpdate(t *testing.T) {
	tests := []struct {
		name     string
		oldType  corev1.ServiceType
		mutate   func(*corev1.Service)
		dryRun   bool
		undo     bool
		wantErrs []string
		wantIP   string // "" means: same as old
		wantPort int32
		wantUsed [2]int
	}{
		{name: "PUT without allocated values keeps them", oldType: corev1.ServiceTypeNodePort, mutate: func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
			s.Spec.Ports[0].NodePort = 0
		}, wantPort: 30086, wantUsed: [2]int{1, 1}},
		{name: "change cluster IP", oldType: corev1.ServiceTypeClusterIP, mutate: func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.43.0.50", []string{"10.43.0.50"}
		}, wantErrs: []string{"spec.clusterIPs[0]: Invalid value"}, wantUsed: [2]int{1, 0}},
		{name: "NodePort to ClusterIP releases node port", oldType: corev1.ServiceTypeNodePort, mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
		}, wantPort: 0, wantUsed: [2]int{1, 0}},
		{name: "ClusterIP to NodePort allocates", oldType: corev1.ServiceTypeClusterIP, mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
		}, wantPort: 30086, wantUsed: [2]int{1, 1}},
		{name: "ClusterIP to NodePort, undone", oldType: corev1.ServiceTypeClusterIP, undo: true, mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
		}, wantPort: 30086, wantUsed: [2]int{1, 0}},
		{name: "ClusterIP to NodePort, dry run", oldType: corev1.ServiceTypeClusterIP, dryRun: true, mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
		}, wantPort: 30086, wantUsed: [2]int{1, 0}},
		{name: "to ExternalName releases IP", oldType: corev1.ServiceTypeNodePort, mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
		}, wantIP: "none", wantUsed: [2]int{0, 0}},
		{name: "to ExternalName, undone", oldType: corev1.ServiceTypeNodePort, undo: true, mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
		}, wantIP: "none", wantUsed: [2]int{1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAlloc(t, "", "")
			st := NewStrategy(a)
			old := newService(func(s *corev1.Service) { s.Spec.Type = tc.oldType })
			if _, err := create(t, st, old, false); err != nil {
				t.Fatal(err)
			}
			s := old.DeepCopy()
			tc.mutate(s)
			undo, errs, err := update(t, st, s, old, tc.dryRun)
			if d := cmp.Diff(tc.wantErrs, errStrings(errs)); d != "" {
				t.Fatalf("validation (-want +got):\n%s", d)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.undo && undo != nil {
				undo()
			}
			if len(errs) == 0 {
				wantIP := tc.wantIP
				switch wantIP {
				case "":
					wantIP = old.Spec.ClusterIP
				case "none":
					wantIP = ""
				}
				if s.Spec.ClusterIP != wantIP {
					t.Errorf("clusterIP = %q, want %q", s.Spec.ClusterIP, wantIP)
				}
				if len(s.Spec.Ports) > 0 && s.Spec.Ports[0].NodePort != tc.wantPort && s.Spec.Type != corev1.ServiceTypeExternalName {
					t.Errorf("nodePort = %d, want %d", s.Spec.Ports[0].NodePort, tc.wantPort)
				}
			}
			if got := [2]int{a.IPs.Used(), a.Ports.Used()}; got != tc.wantUsed {
				t.Errorf("used = %v, want %v", got, tc.wantUsed)
			}
		})
	}
}

func TestAllocateConcurrentCreates(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/27", "30000-30009") // 30 IPs, 10 ports
	st := NewStrategy(a)
	var mu sync.Mutex
	ips, ports := map[string]int{}, map[int32]int{}
	var wg sync.WaitGroup
	var fails int
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := newService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
			st.PrepareForCreate(ctx, s)
			_, err := st.BeforeCreate(ctx, s, false)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if !apierrors.IsInternalError(err) {
					t.Errorf("unexpected error: %v", err)
				}
				fails++
				return
			}
			ips[s.Spec.ClusterIP]++
			ports[s.Spec.Ports[0].NodePort]++
		}()
	}
	wg.Wait()
	if len(ports) != 10 || fails != 30 {
		t.Errorf("services=%d fails=%d, want 10 and 30", len(ports), fails)
	}
	for ip, n := range ips {
		if n > 1 {
			t.Errorf("%s given to %d services", ip, n)
		}
	}
	// Failed creates gave their IPs back.
	if a.IPs.Used() != 10 || a.Ports.Used() != 10 {
		t.Errorf("used %d/%d, want 10/10", a.IPs.Used(), a.Ports.Used())
	}
}

func TestStatusUpdateKeepsSpec(t *testing.T) {
	st := NewStrategy(nil)
	old := newService()
	st.PrepareForCreate(ctx, old)
	s := old.DeepCopy()
	s.Spec.Type = corev1.ServiceTypeNodePort
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	st.PrepareForStatusUpdate(ctx, s, old)
	if s.Spec.Type != corev1.ServiceTypeClusterIP || len(s.Status.LoadBalancer.Ingress) != 1 {
		t.Errorf("status update: spec type %s, ingress %v", s.Spec.Type, s.Status.LoadBalancer.Ingress)
	}
	s.Status.LoadBalancer.Ingress[0].IP = "bad"
	if d := cmp.Diff([]string{"status.loadBalancer.ingress[0].ip: Invalid value"}, errStrings(st.ValidateStatusUpdate(ctx, s, old))); d != "" {
		t.Error(d)
	}
}

func TestTable(t *testing.T) {
	created := metav1.NewTime(time.Now().Add(-5 * time.Minute))
	tests := []struct {
		name string
		svc  *corev1.Service
		want []interface{}
	}{
		{name: "cluster IP", svc: newService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Spec.ClusterIPs = []string{"10.43.0.12"}
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}
		}), want: []interface{}{"web", "ClusterIP", "10.43.0.12", "<none>", "80/TCP,53/UDP", "5m", "app=web"}},
		{name: "node port", svc: newService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ClusterIPs = []string{"10.43.0.12"}
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}}
		}), want: []interface{}{"web", "NodePort", "10.43.0.12", "<none>", "80:30080/TCP", "5m", "app=web"}},
		{name: "pending load balancer", svc: newService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ClusterIPs = []string{"10.43.0.12"}
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}}
		}), want: []interface{}{"web", "LoadBalancer", "10.43.0.12", "<pending>", "80:30080/TCP", "5m", "app=web"}},
		{name: "external name, no ports", svc: newService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
			s.Spec.Ports = nil
			s.Spec.Selector = nil
		}), want: []interface{}{"web", "ExternalName", "<none>", "example.com", "<none>", "5m", "<none>"}},
	}
	st := NewStrategy(nil)
	if n := len(st.TableColumns()); n != 7 {
		t.Fatalf("%d columns", n)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.svc.CreationTimestamp = created
			got, err := st.TableRow(tc.svc)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("row (-want +got):\n%s", d)
			}
		})
	}
}

func TestFieldSet(t *testing.T) {
	s := newService(func(s *corev1.Service) { s.Spec.ClusterIP = "10.43.0.9"; s.Spec.Type = "NodePort" })
	got := NewStrategy(nil).FieldSet(s)
	if got["spec.clusterIP"] != "10.43.0.9" || got["spec.type"] != "NodePort" {
		t.Errorf("FieldSet = %v", got)
	}
}

func TestResource(t *testing.T) {
	r := Resource(nil)
	if r.StoragePrefix != "services/specs" || !r.HasSubresource("status") || r.ShortNames[0] != "svc" {
		t.Errorf("resource = %+v", r)
	}
}
