package dns

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	mdns "github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txt golden files")

func service(ns, name, ip string, mutate ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}, {Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}}},
	}
	if ip == v1.ClusterIPNone {
		s.Spec.ClusterIPs = nil
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

type addr struct {
	ip, host string
	ready    bool
}

func endpointSlice(ns, svc string, addrs ...addr) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)},
			{Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](5353)},
		},
	}
	for _, a := range addrs {
		e := discoveryv1.Endpoint{Addresses: []string{a.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(a.ready)}}
		if a.host != "" {
			e.Hostname = ptr.To(a.host)
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

func clusterObjects() []runtime.Object {
	return []runtime.Object{
		service("default", "web", "10.43.0.20"),
		service("default", "db", v1.ClusterIPNone),
		endpointSlice("default", "db", addr{ip: "10.42.1.5", host: "db-0", ready: true}, addr{ip: "10.42.1.6", host: "db-1", ready: true},
			addr{ip: "10.42.1.7", host: "db-2", ready: false}, addr{ip: "10.42.1.8", ready: true}),
		service("default", "empty-headless", v1.ClusterIPNone),
		service("other", "ext", "", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "www.example.com"
			s.Spec.ClusterIPs = nil
		}),
		// Dual stack: a Service with a ClusterIP of each family, a
		// headless one with IPv6 endpoints.
		service("v6", "dual", "10.43.0.21", func(s *v1.Service) { s.Spec.ClusterIPs = []string{"10.43.0.21", "fd00:43::21"} }),
		service("v6", "db6", v1.ClusterIPNone),
		func() *discoveryv1.EndpointSlice {
			s := endpointSlice("v6", "db6", addr{ip: "fd00:42:1::5", host: "db6-0", ready: true}, addr{ip: "fd00:42:1::6", ready: true})
			s.AddressType = discoveryv1.AddressTypeIPv6
			return s
		}(),
	}
}

// fakeUpstream is a resolver on loopback that answers example.com names
// and counts the questions it got.
type fakeUpstream struct {
	addr    string
	queries atomic.Int32
	delay   time.Duration
}

func startUpstream(t *testing.T, delay time.Duration) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{delay: delay}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	h := mdns.HandlerFunc(func(w mdns.ResponseWriter, r *mdns.Msg) {
		u.queries.Add(1)
		time.Sleep(u.delay)
		m := new(mdns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch {
		case strings.EqualFold(q.Name, "www.example.com.") && q.Qtype == mdns.TypeA:
			m.Answer = append(m.Answer, mustRR(t, "www.example.com. 300 IN A 192.0.2.10"))
		case strings.EqualFold(q.Name, "www.example.com."):
		default:
			m.Rcode = mdns.RcodeNameError
			m.Ns = append(m.Ns, mustRR(t, "example.com. 60 IN SOA ns.example.com. h.example.com. 1 2 3 4 60"))
		}
		_ = w.WriteMsg(m)
	})
	udp := &mdns.Server{PacketConn: pc, Handler: h}
	tcp := &mdns.Server{Listener: ln, Handler: h}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	t.Cleanup(func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })
	u.addr = pc.LocalAddr().String()
	return u
}

func mustRR(t *testing.T, s string) mdns.RR {
	rr, err := mdns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

func startServer(t *testing.T, opts Options, objs ...runtime.Object) (*Server, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	opts.Address = "127.0.0.1:0"
	s, err := New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("Start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("DNS server not ready")
	}
	return s, client
}

func query(t *testing.T, s *Server, netw, name string, qtype uint16, edns bool) *mdns.Msg {
	t.Helper()
	m := new(mdns.Msg)
	m.SetQuestion(name, qtype)
	if edns {
		m.SetEdns0(4096, false)
	}
	udp, tcp := s.Addr()
	addr := udp
	if netw == "tcp" {
		addr = tcp
	}
	c := &mdns.Client{Net: netw, Timeout: 5 * time.Second}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("query %s %s: %v", name, mdns.TypeToString[qtype], err)
	}
	return resp
}

// render prints a response the way the golden file keeps it: rcode and
// flags, then each section's records.
func render(m *mdns.Msg) string {
	var b strings.Builder
	flags := []string{}
	if m.Authoritative {
		flags = append(flags, "aa")
	}
	if m.Truncated {
		flags = append(flags, "tc")
	}
	fmt.Fprintf(&b, "%s %s\n", mdns.RcodeToString[m.Rcode], strings.Join(flags, ","))
	for _, sec := range []struct {
		name string
		rrs  []mdns.RR
	}{{"answer", m.Answer}, {"authority", m.Ns}, {"extra", m.Extra}} {
		var lines []string
		for _, rr := range sec.rrs {
			if rr.Header().Rrtype == mdns.TypeOPT {
				continue
			}
			if soa, ok := rr.(*mdns.SOA); ok && soa.Hdr.Name == "cluster.local." {
				c := *soa
				c.Serial = 0 // the start time
				rr = &c
			}
			lines = append(lines, strings.ReplaceAll(rr.String(), "\t", " "))
		}
		sort.Strings(lines)
		for _, l := range lines {
			fmt.Fprintf(&b, "  %s: %s\n", sec.name, l)
		}
	}
	return b.String()
}

func TestAnswersGolden(t *testing.T) {
	up := startUpstream(t, 0)
	s, _ := startServer(t, Options{Upstreams: []string{up.addr}, Zone: Zone{
		ServiceCIDR6: netip.MustParsePrefix("fd00:43::/112"), ClusterCIDR6: netip.MustParsePrefix("fd00:42::/48")}}, clusterObjects()...)
	queries := []struct {
		name  string
		qtype uint16
		netw  string
	}{
		{"web.default.svc.cluster.local.", mdns.TypeA, "udp"},
		{"WEB.Default.SVC.cluster.local.", mdns.TypeA, "udp"},
		{"web.default.svc.cluster.local.", mdns.TypeA, "tcp"},
		{"web.default.svc.cluster.local.", mdns.TypeAAAA, "udp"},
		{"web.default.svc.cluster.local.", mdns.TypeSRV, "udp"},
		{"_http._tcp.web.default.svc.cluster.local.", mdns.TypeSRV, "udp"},
		{"_dns._udp.web.default.svc.cluster.local.", mdns.TypeSRV, "udp"},
		{"_http._udp.web.default.svc.cluster.local.", mdns.TypeSRV, "udp"},
		{"db.default.svc.cluster.local.", mdns.TypeA, "udp"},
		{"db-0.db.default.svc.cluster.local.", mdns.TypeA, "udp"},
		{"db-2.db.default.svc.cluster.local.", mdns.TypeA, "udp"},
		{"10-42-1-8.db.default.svc.cluster.local.", mdns.TypeA, "udp"},
		{"_http._tcp.db.default.svc.cluster.local.", mdns.TypeSRV, "udp"},
		{"empty-headless.default.svc.cluster.local.", mdns.TypeA, "udp"},
		{"ext.other.svc.cluster.local.", mdns.TypeA, "udp"},
		{"missing.default.svc.cluster.local.", mdns.TypeA, "udp"},
		{"web.default.svc.cluster.local.default.svc.cluster.local.", mdns.TypeA, "udp"},
		{"default.svc.cluster.local.", mdns.TypeA, "udp"},
		{"nowhere.svc.cluster.local.", mdns.TypeA, "udp"},
		{"10-42-3-4.default.pod.cluster.local.", mdns.TypeA, "udp"},
		{"dns-version.cluster.local.", mdns.TypeTXT, "udp"},
		{"cluster.local.", mdns.TypeSOA, "udp"},
		{"cluster.local.", mdns.TypeNS, "udp"},
		{"20.0.43.10.in-addr.arpa.", mdns.TypePTR, "udp"},
		{"5.1.42.10.in-addr.arpa.", mdns.TypePTR, "udp"},
		{"99.0.43.10.in-addr.arpa.", mdns.TypePTR, "udp"},
		{"www.example.com.", mdns.TypeA, "udp"},
		{"nope.example.com.", mdns.TypeA, "udp"},
		{"dual.v6.svc.cluster.local.", mdns.TypeA, "udp"},
		{"dual.v6.svc.cluster.local.", mdns.TypeAAAA, "udp"},
		{"db6.v6.svc.cluster.local.", mdns.TypeAAAA, "udp"},
		{"db6.v6.svc.cluster.local.", mdns.TypeA, "udp"},
		{"db6-0.db6.v6.svc.cluster.local.", mdns.TypeAAAA, "udp"},
		{"fd00-42-1--6.db6.v6.svc.cluster.local.", mdns.TypeAAAA, "udp"},
		{"_http._tcp.db6.v6.svc.cluster.local.", mdns.TypeSRV, "udp"},
		{"fd00-42-3--4.v6.pod.cluster.local.", mdns.TypeAAAA, "udp"},
		{"1.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.3.4.0.0.0.0.d.f.ip6.arpa.", mdns.TypePTR, "udp"},
		{"5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.2.4.0.0.0.0.d.f.ip6.arpa.", mdns.TypePTR, "udp"},
		{"9.9.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.3.4.0.0.0.0.d.f.ip6.arpa.", mdns.TypePTR, "udp"},
	}
	var b strings.Builder
	for _, q := range queries {
		fmt.Fprintf(&b, "> %s %s %s\n", q.netw, q.name, mdns.TypeToString[q.qtype])
		b.WriteString(render(query(t, s, q.netw, q.name, q.qtype, false)))
	}
	golden(t, filepath.Join("testdata", "answers.txt"), b.String())
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// TestBadInput: malformed packets, odd opcodes and classes, several
// questions, responses sent to the server: each gets the rcode a server
// should give (or silence), and the server keeps answering.
func TestBadInput(t *testing.T) {
	s, _ := startServer(t, Options{Upstreams: []string{}}, clusterObjects()...)
	udp, _ := s.Addr()
	conn, err := net.Dial("udp", udp)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(b []byte) *mdns.Msg {
		t.Helper()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil {
			return nil
		}
		m := new(mdns.Msg)
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatalf("unpack reply: %v", err)
		}
		return m
	}
	pack := func(m *mdns.Msg) []byte {
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	two := new(mdns.Msg)
	two.SetQuestion("web.default.svc.cluster.local.", mdns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	notify := new(mdns.Msg)
	notify.SetNotify("cluster.local.")
	chaos := new(mdns.Msg)
	chaos.SetQuestion("version.bind.", mdns.TypeTXT)
	chaos.Question[0].Qclass = mdns.ClassCHAOS
	axfr := new(mdns.Msg)
	axfr.SetAxfr("cluster.local.")
	noUpstream := new(mdns.Msg)
	noUpstream.SetQuestion("www.example.com.", mdns.TypeA)

	for _, tc := range []struct {
		name  string
		pkt   []byte
		rcode int // -1: no reply expected
	}{
		{"garbage header", []byte{1, 2, 3}, -1},
		{"truncated question", append(pack(two)[:12], 0x03, 'w'), mdns.RcodeFormatError},
		{"two questions", pack(two), mdns.RcodeFormatError},
		{"notify opcode", pack(notify), mdns.RcodeNotImplemented},
		{"chaos class", pack(chaos), mdns.RcodeRefused},
		{"zone transfer", pack(axfr), mdns.RcodeRefused},
		{"outside the zone with no upstream", pack(noUpstream), mdns.RcodeServerFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := send(tc.pkt)
			if tc.rcode < 0 {
				if got != nil {
					t.Errorf("got a reply %v, want none", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("no reply, want %s", mdns.RcodeToString[tc.rcode])
			}
			if got.Rcode != tc.rcode {
				t.Errorf("rcode %s, want %s", mdns.RcodeToString[got.Rcode], mdns.RcodeToString[tc.rcode])
			}
		})
	}
	if got := query(t, s, "udp", "web.default.svc.cluster.local.", mdns.TypeA, false); len(got.Answer) != 1 {
		t.Errorf("after bad input: %v", got)
	}
}

// TestTruncation: a headless Service with 100 endpoints does not fit in
// 512 bytes: over UDP the answer is truncated with TC set, over TCP (or
// with a large EDNS size) it is whole.
func TestTruncation(t *testing.T) {
	var addrs []addr
	for i := 0; i < 100; i++ {
		addrs = append(addrs, addr{ip: fmt.Sprintf("10.42.2.%d", i+1), ready: true})
	}
	s, _ := startServer(t, Options{Upstreams: []string{}}, service("default", "big", v1.ClusterIPNone), endpointSlice("default", "big", addrs...))
	name := "big.default.svc.cluster.local."
	if m := query(t, s, "udp", name, mdns.TypeA, false); !m.Truncated || len(m.Answer) >= 100 {
		t.Errorf("UDP: truncated=%v with %d answers, want truncated", m.Truncated, len(m.Answer))
	}
	if m := query(t, s, "tcp", name, mdns.TypeA, false); m.Truncated || len(m.Answer) != 100 {
		t.Errorf("TCP: truncated=%v with %d answers, want all 100", m.Truncated, len(m.Answer))
	}
	if m := query(t, s, "udp", name, mdns.TypeA, true); m.Truncated || len(m.Answer) != 100 {
		t.Errorf("UDP with EDNS 4096: truncated=%v with %d answers, want all 100", m.Truncated, len(m.Answer))
	}
}

// TestForwardCache: a forwarded answer is cached, a dead upstream gives
// SERVFAIL, and a flood beyond the forward limit fails fast while names
// in the zone still resolve.
func TestForwardCache(t *testing.T) {
	up := startUpstream(t, 0)
	s, _ := startServer(t, Options{Upstreams: []string{up.addr}})
	for i := 0; i < 3; i++ {
		if m := query(t, s, "udp", "www.example.com.", mdns.TypeA, false); len(m.Answer) != 1 {
			t.Fatalf("forwarded answer: %v", m)
		}
	}
	if n := up.queries.Load(); n != 1 {
		t.Errorf("upstream asked %d times for 3 queries, want 1 (cached)", n)
	}

	dead, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.LocalAddr().String()
	dead.Close()
	s2, _ := startServer(t, Options{Upstreams: []string{deadAddr}, ForwardTimeout: 200 * time.Millisecond})
	if m := query(t, s2, "udp", "www.example.com.", mdns.TypeA, false); m.Rcode != mdns.RcodeServerFailure {
		t.Errorf("dead upstream: %s, want SERVFAIL", mdns.RcodeToString[m.Rcode])
	}

	slow := startUpstream(t, 500*time.Millisecond)
	s3, _ := startServer(t, Options{Upstreams: []string{slow.addr}, MaxConcurrentForwards: 2}, clusterObjects()...)
	var wg sync.WaitGroup
	var servfail atomic.Int32
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m := new(mdns.Msg)
			m.SetQuestion(fmt.Sprintf("n%d.example.com.", i), mdns.TypeA)
			udp, _ := s3.Addr()
			resp, _, err := (&mdns.Client{Timeout: 5 * time.Second}).Exchange(m, udp)
			if err == nil && resp.Rcode == mdns.RcodeServerFailure {
				servfail.Add(1)
			}
		}(i)
	}
	start := time.Now()
	if m := query(t, s3, "udp", "web.default.svc.cluster.local.", mdns.TypeA, false); len(m.Answer) != 1 {
		t.Errorf("in-zone during a flood: %v", m)
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Errorf("in-zone answer took %v during a flood", d)
	}
	wg.Wait()
	if servfail.Load() == 0 {
		t.Errorf("no SERVFAIL among 20 concurrent forwards with a limit of 2")
	}
}

// TestPublish: EnsureService makes kube-system/kube-dns at 10.43.0.10
// with Endpoints and an EndpointSlice pointing at the node.
func TestPublish(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	p := Publish{IP: "192.168.1.5", Port: 53, MetricsPort: 9153}
	for i := 0; i < 2; i++ { // idempotent
		if err := EnsureService(ctx, client, "10.43.0.10", p); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.43.0.10" || len(svc.Spec.Ports) != 3 || svc.Spec.Selector != nil {
		t.Errorf("service: %+v", svc.Spec)
	}
	sl, err := client.DiscoveryV1().EndpointSlices("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"192.168.1.5"}, sl.Endpoints[0].Addresses); diff != "" || sl.Labels[discoveryv1.LabelServiceName] != "kube-dns" {
		t.Errorf("slice: %v %s", sl.Labels, diff)
	}
	if _, err := client.CoreV1().Endpoints("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
}

// TestProbe: the readyz check asks the server over UDP and passes only
// when an answer comes.
func TestProbe(t *testing.T) {
	idle, err := New(fake.NewClientset(), Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Probe(context.Background()); err == nil {
		t.Error("Probe of a server never started = nil, want an error")
	}
	// The metrics port is taken (another server on the host): DNS serves
	// anyway, without metrics.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	s, _ := startServer(t, Options{Upstreams: []string{}, MetricsAddress: taken.Addr().String()})
	if err := s.Probe(context.Background()); err != nil {
		t.Errorf("Probe of a serving server: %v", err)
	}
	if got := s.MetricsAddr(); got != "" {
		t.Errorf("metrics served at %q on a taken port", got)
	}
}

// TestMetrics: each answer is counted under CoreDNS's metric names and
// labels (a dashboard or alert written for CoreDNS reads them), served
// with /health on the metrics address.
func TestMetrics(t *testing.T) {
	s, _ := startServer(t, Options{Upstreams: []string{}, MetricsAddress: "127.0.0.1:0"}, clusterObjects()...)
	query(t, s, "udp", "web.default.svc.cluster.local.", mdns.TypeA, false)
	query(t, s, "udp", "web.default.svc.cluster.local.", mdns.TypeA, false)
	query(t, s, "tcp", "web.default.svc.cluster.local.", mdns.TypeSRV, false)
	query(t, s, "udp", "missing.default.svc.cluster.local.", mdns.TypeA, false)
	query(t, s, "udp", "example.com.", mdns.TypeA, false) // no upstream: SERVFAIL

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + s.MetricsAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health"); code != http.StatusOK || body != "OK" {
		t.Errorf("/health = %d %q, want 200 OK", code, body)
	}
	_, body := get("/metrics")
	server := `server="dns://127.0.0.1:0"`
	for _, want := range []string{
		`coredns_dns_requests_total{family="1",proto="udp",` + server + `,type="A",view="",zone="cluster.local."} 3`,
		`coredns_dns_requests_total{family="1",proto="tcp",` + server + `,type="SRV",view="",zone="cluster.local."} 1`,
		`coredns_dns_requests_total{family="1",proto="udp",` + server + `,type="A",view="",zone="."} 1`,
		`coredns_dns_request_duration_seconds_count{` + server + `,type="A",view="",zone="cluster.local."} 3`,
		`coredns_dns_responses_total{plugin="",rcode="NOERROR",` + server + `,view="",zone="cluster.local."} 3`,
		`coredns_dns_responses_total{plugin="",rcode="NXDOMAIN",` + server + `,view="",zone="cluster.local."} 1`,
		`coredns_dns_responses_total{plugin="",rcode="SERVFAIL",` + server + `,view="",zone="."} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
