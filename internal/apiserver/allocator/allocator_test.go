package allocator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIPsExhaustSmallCIDR(t *testing.T) {
	a, err := NewIPs("10.0.0.0/29")
	if err != nil {
		t.Fatal(err)
	}
	if a.Size() != 6 {
		t.Fatalf("size = %d, want 6", a.Size())
	}
	var got []string
	for {
		ip, err := a.AllocateNext()
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ip)
	}
	sort.Strings(got)
	want := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("allocated (-want +got):\n%s", d)
	}
	a.Release("10.0.0.4")
	ip, err := a.AllocateNext()
	if err != nil || ip != "10.0.0.4" {
		t.Errorf("after release got %q, %v; want 10.0.0.4", ip, err)
	}
}

func TestIPsAllocateSpecific(t *testing.T) {
	a, err := NewIPs("10.43.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate("10.43.0.10"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ip   string
		want string
	}{
		{"10.43.0.10", "provided IP is already allocated"},
		{"10.43.0.0", "the provided IP (10.43.0.0) is not in the valid range. The range of valid IPs is 10.43.0.0/16"},
		{"10.43.255.255", "the provided IP (10.43.255.255) is not in the valid range. The range of valid IPs is 10.43.0.0/16"},
		{"10.44.0.1", "the provided IP (10.44.0.1) is not in the valid range. The range of valid IPs is 10.43.0.0/16"},
		{"10.43.255.254", ""},
		{"10.43.0.1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.ip, func(t *testing.T) {
			err := a.Allocate(tc.ip)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Allocate(%s) = %q, want %q", tc.ip, got, tc.want)
			}
		})
	}
}

func TestIPsDynamicAvoidsLowBand(t *testing.T) {
	a, err := NewIPs("10.43.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	ip, err := a.AllocateNext()
	if err != nil {
		t.Fatal(err)
	}
	// offset 256 is 10.43.1.1: the first 256 addresses are kept for
	// services that ask for them (10.43.0.1, 10.43.0.10).
	if ip != "10.43.1.1" {
		t.Errorf("first dynamic IP = %s, want 10.43.1.1", ip)
	}
}

func TestIPv6(t *testing.T) {
	a, err := NewIPs("fd00:43::/112")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate("fd00:43::a"); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate("fd00:43::a"); !errors.Is(err, ErrIPAllocated) {
		t.Errorf("second Allocate = %v, want ErrIPAllocated", err)
	}
	if !a.Is6() || a.Size() != 65535 {
		t.Errorf("Is6=%v Size=%d", a.Is6(), a.Size())
	}
}

func TestIPsConcurrent(t *testing.T) {
	a, err := NewIPs("10.0.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	full := 0
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				ip, err := a.AllocateNext()
				mu.Lock()
				if err != nil {
					full++
				} else if seen[ip] {
					t.Errorf("%s handed out twice", ip)
				} else {
					seen[ip] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 254 || full != 8*40-254 {
		t.Errorf("distinct=%d full=%d, want 254 and %d", len(seen), full, 8*40-254)
	}
	if a.Used() != 254 {
		t.Errorf("Used = %d", a.Used())
	}
}

func TestPorts(t *testing.T) {
	a, err := NewPorts("30000-30004")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(30002); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(30002); err == nil || err.Error() != "provided port is already allocated" {
		t.Errorf("duplicate Allocate = %v", err)
	}
	if err := a.Allocate(32000); err == nil || err.Error() != "provided port is not in the valid range. The range of valid ports is 30000-30004" {
		t.Errorf("out of range Allocate = %v", err)
	}
	var got []int
	for i := 0; i < 4; i++ {
		p, err := a.AllocateNext()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	sort.Ints(got)
	if d := cmp.Diff([]int{30000, 30001, 30003, 30004}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := a.AllocateNext(); !errors.Is(err, ErrFull) {
		t.Errorf("AllocateNext on full = %v", err)
	}
}

func TestPortRangeParse(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    string
		wantErr bool
	}{
		{"30000-32767", "30000-32767", false},
		{"8080", "8080-8080", false},
		{"2-1", "", true},
		{"a-b", "", true},
		{"0-10", "", true},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			p, err := NewPorts(tc.spec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && p.Range() != tc.want {
				t.Errorf("Range = %s, want %s", p.Range(), tc.want)
			}
		})
	}
}

func svc(name, typ, ip string, nodePorts ...int32) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	s.Spec.Type = corev1.ServiceType(typ)
	s.Spec.ClusterIP = ip
	if ip != "" {
		s.Spec.ClusterIPs = []string{ip}
	}
	for i, np := range nodePorts {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint("p", i), Port: 80 + int32(i), NodePort: np})
	}
	return s
}

func TestRebuild(t *testing.T) {
	s, err := NewServices(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.IPs.AllocateNext(); err != nil { // stale state, must be forgotten
		t.Fatal(err)
	}
	services := []corev1.Service{
		svc("a", "ClusterIP", "10.43.0.1"),
		svc("b", "NodePort", "10.43.0.20", 30080, 30081),
		svc("headless", "ClusterIP", "None"),
		svc("ext", "ExternalName", ""),
		svc("dup", "NodePort", "10.43.0.20", 30080),
		svc("outside", "ClusterIP", "10.99.0.1"),
	}
	err = s.Rebuild(services)
	if err == nil {
		t.Fatal("Rebuild: want an error for the duplicate values")
	}
	// An address outside the server's range is no error: it may be another
	// ServiceCIDR's (marked from its IPAddress when that range is used).
	if strings.Contains(err.Error(), "outside") {
		t.Errorf("Rebuild error %q names the Service outside the server's range", err)
	}
	for _, want := range []string{
		"service ns/dup: cluster IP 10.43.0.20: provided IP is already allocated",
		"service ns/dup: node port 30080: provided port is already allocated",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Rebuild error %q lacks %q", err, want)
		}
	}
	if s.IPs.Used() != 2 || s.Ports.Used() != 2 {
		t.Errorf("used IPs=%d ports=%d, want 2 and 2", s.IPs.Used(), s.Ports.Used())
	}
	for _, ip := range []string{"10.43.0.1", "10.43.0.20"} {
		if !s.IPs.Has(ip) {
			t.Errorf("%s not taken after Rebuild", ip)
		}
	}
	b := services[1]
	s.Release(context.Background(), &b)
	if s.IPs.Has("10.43.0.20") || s.Ports.Has(30080) || s.Ports.Has(30081) {
		t.Error("Release left values taken")
	}
}

func TestTxn(t *testing.T) {
	tests := []struct {
		name       string
		dryRun     bool
		undo       bool
		wantIPs    int
		wantPorts  int
		wantHasOld bool
	}{
		{name: "commit", wantIPs: 2, wantPorts: 1, wantHasOld: false},
		{name: "undo", undo: true, wantIPs: 1, wantPorts: 1, wantHasOld: true},
		{name: "dry run", dryRun: true, wantIPs: 1, wantPorts: 1, wantHasOld: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServices(Options{ServiceCIDR: "10.0.0.0/24", NodePortRange: "30000-30010"})
			if err != nil {
				t.Fatal(err)
			}
			old := svc("old", "NodePort", "10.0.0.5", 30005)
			if err := s.Rebuild([]corev1.Service{old}); err != nil {
				t.Fatal(err)
			}
			txn := s.Begin(tc.dryRun)
			if err := txn.AllocateIP("10.0.0.6"); err != nil {
				t.Fatal(err)
			}
			if err := txn.AllocateIP("10.0.0.6"); !errors.Is(err, ErrIPAllocated) {
				t.Errorf("second AllocateIP in txn = %v", err)
			}
			ip, err := txn.AllocateNextIP()
			if err != nil || ip == "10.0.0.6" || ip == "10.0.0.5" {
				t.Errorf("AllocateNextIP = %q, %v", ip, err)
			}
			p1, err := txn.AllocateNextPort()
			if err != nil {
				t.Fatal(err)
			}
			p2, err := txn.AllocateNextPort()
			if err != nil || p1 == p2 || p1 == 30005 || p2 == 30005 {
				t.Errorf("AllocateNextPort = %d, %d, %v", p1, p2, err)
			}
			txn.Release(ClaimsOf(&old))
			if tc.undo {
				txn.Undo()
			}
			// commit: old released, 10.0.0.6 + next taken; ports p1 p2 taken, 30005 released.
			wantPorts := tc.wantPorts
			if !tc.undo && !tc.dryRun {
				wantPorts = 2
			}
			if s.IPs.Used() != tc.wantIPs || s.Ports.Used() != wantPorts {
				t.Errorf("used IPs=%d ports=%d, want %d and %d", s.IPs.Used(), s.Ports.Used(), tc.wantIPs, wantPorts)
			}
			if s.IPs.Has("10.0.0.5") != tc.wantHasOld || s.Ports.Has(30005) != tc.wantHasOld {
				t.Errorf("old values held = %v/%v, want %v", s.IPs.Has("10.0.0.5"), s.Ports.Has(30005), tc.wantHasOld)
			}
		})
	}
}
