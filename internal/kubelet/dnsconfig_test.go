package kubelet

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// TestDNSConfig: the resolv.conf a pod gets for each dnsPolicy, with its
// dnsConfig merged and the resolver's limits applied, as upstream's kubelet
// writes it.
func TestDNSConfig(t *testing.T) {
	resolvConf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolvConf, []byte("# host\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch old.example\nsearch corp.example. svc.cluster.local .\noptions ndots:2 timeout:1\noptions ndots:3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 254)
	var manySearches []string
	for i := 0; i < 40; i++ {
		manySearches = append(manySearches, strings.Repeat("s", 60)+"-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	// 10 paths of 250 characters: 8 of them and their spaces are 2007.
	var wide []string
	for i := 0; i < 10; i++ {
		wide = append(wide, strings.Repeat("w", 249)+string(rune('a'+i)))
	}
	tests := []struct {
		name                       string
		policy                     corev1.DNSPolicy
		hostNetwork                bool
		config                     *corev1.PodDNSConfig
		servers, searches, options []string
		event                      string
	}{
		{name: "cluster first", policy: corev1.DNSClusterFirst,
			servers:  []string{"10.43.0.10"},
			searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"},
			options:  []string{"ndots:5"}},
		{name: "empty policy is cluster first", policy: "",
			servers:  []string{"10.43.0.10"},
			searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"},
			options:  []string{"ndots:5"}},
		{name: "cluster first on the host network is the host's", policy: corev1.DNSClusterFirst, hostNetwork: true,
			servers: []string{"192.0.2.53", "192.0.2.54"}, searches: []string{"corp.example", "svc.cluster.local"}, options: []string{"ndots:3", "timeout:1"}},
		{name: "cluster first with host net", policy: corev1.DNSClusterFirstWithHostNet, hostNetwork: true,
			servers:  []string{"10.43.0.10"},
			searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"},
			options:  []string{"ndots:5"}},
		{name: "default", policy: corev1.DNSDefault,
			servers: []string{"192.0.2.53", "192.0.2.54"}, searches: []string{"corp.example", "svc.cluster.local"}, options: []string{"ndots:3", "timeout:1"}},
		{name: "none takes only dnsConfig", policy: corev1.DNSNone,
			config:  &corev1.PodDNSConfig{Nameservers: []string{"203.0.113.1"}, Searches: []string{"my.example"}, Options: []corev1.PodDNSConfigOption{{Name: "edns0"}}},
			servers: []string{"203.0.113.1"}, searches: []string{"my.example"}, options: []string{"edns0"}},
		{name: "dnsConfig appended without duplicates, its options replace", policy: corev1.DNSClusterFirst,
			config: &corev1.PodDNSConfig{Nameservers: []string{"10.43.0.10", "203.0.113.1"}, Searches: []string{"cluster.local", "my.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}, {Name: "edns0"}}},
			servers:  []string{"10.43.0.10", "203.0.113.1"},
			searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "my.example"},
			options:  []string{"ndots:1", "edns0"}},
		{name: "at most three nameservers", policy: corev1.DNSDefault,
			config:   &corev1.PodDNSConfig{Nameservers: []string{"203.0.113.1", "203.0.113.2"}},
			servers:  []string{"192.0.2.53", "192.0.2.54", "203.0.113.1"},
			searches: []string{"corp.example", "svc.cluster.local"}, options: []string{"ndots:3", "timeout:1"},
			event: "Warning DNSConfigForming Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 192.0.2.53 192.0.2.54 203.0.113.1"},
		{name: "a search path longer than a name is dropped", policy: corev1.DNSNone,
			config:  &corev1.PodDNSConfig{Nameservers: []string{"203.0.113.1"}, Searches: []string{long, "my.example"}},
			servers: []string{"203.0.113.1"}, searches: []string{"my.example"},
			event: "Warning DNSConfigForming Search Line limits were exceeded, some search paths have been omitted, the applied search line is: my.example"},
		{name: "the search line is cut to 32 paths and 2048 characters", policy: corev1.DNSNone,
			config:  &corev1.PodDNSConfig{Nameservers: []string{"203.0.113.1"}, Searches: manySearches},
			servers: []string{"203.0.113.1"}, searches: manySearches[:32],
			event: "Warning DNSConfigForming Search Line limits were exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			k := &Kubelet{opts: Options{ClusterDNS: []string{"10.43.0.10"}, ClusterDomain: "cluster.local", ResolvConf: resolvConf}, recorder: rec}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "p"},
				Spec: corev1.PodSpec{DNSPolicy: tc.policy, HostNetwork: tc.hostNetwork, DNSConfig: tc.config}}
			got := k.dnsConfig(pod)
			want := tc.searches
			if !reflect.DeepEqual(got.Servers, tc.servers) || !reflect.DeepEqual(got.Searches, want) || !reflect.DeepEqual(got.Options, tc.options) {
				t.Errorf("got servers %q searches %q options %q\nwant servers %q searches %q options %q",
					got.Servers, got.Searches, got.Options, tc.servers, want, tc.options)
			}
			var ev string
			select {
			case ev = <-rec.Events:
			default:
			}
			if tc.event == "" && ev != "" || !strings.HasPrefix(ev, tc.event) {
				t.Errorf("event %q, want %q", ev, tc.event)
			}
		})
	}
}
