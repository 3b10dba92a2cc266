package services_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/dns"
	"github.com/skiff-sh/skiff/internal/proxy"
	"github.com/skiff-sh/skiff/internal/proxy/netnstest"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

func TestMain(m *testing.M) {
	fs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}

const (
	numServices  = 1000
	numEndpoints = 10
)

// objects are numServices ClusterIP Services, each with one EndpointSlice
// of numEndpoints ready endpoints.
func objects() ([]*v1.Service, []*discoveryv1.EndpointSlice) {
	var svcs []*v1.Service
	var slices []*discoveryv1.EndpointSlice
	for i := 0; i < numServices; i++ {
		name := fmt.Sprintf("svc-%d", i)
		svcs = append(svcs, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: fmt.Sprintf("10.43.%d.%d", 10+i/250, 1+i%250),
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		})
		svcs[i].Spec.ClusterIPs = []string{svcs[i].Spec.ClusterIP}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		}
		for j := 0; j < numEndpoints; j++ {
			n := i*numEndpoints + j
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.42.%d.%d", n/250, 2+n%250)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		slices = append(slices, s)
	}
	return svcs, slices
}

func node(b *testing.B, prefix string) (*netnstest.Topology, proxy.NFT) {
	b.Helper()
	if err := netnstest.Available(); err != nil {
		b.Skipf("needs root, ip and nft: %v", err)
	}
	topo, err := netnstest.New(fmt.Sprintf("%s%d", prefix, os.Getpid()), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(topo.Close)
	return topo, proxy.NFT{Prefix: []string{"ip", "netns", "exec", topo.Node}}
}

// BenchmarkProgram1000x10: compute the ruleset of 1,000 Services × 10
// endpoints and apply it to an empty table (a proxy's first sync), then a
// sync after one endpoint changed.
func BenchmarkProgram1000x10(b *testing.B) {
	_, runner := node(b, "skb")
	svcs, slices := objects()
	cidr, scidr := mustPrefix("10.42.0.0/16"), mustPrefix("10.43.0.0/16")
	ctx := context.Background()
	var compute, render, apply, incr, incrNFT time.Duration
	for i := 0; i < b.N; i++ {
		if err := proxy.Cleanup(ctx, runner); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		rs := proxy.Compute(proxy.BuildInput(cidr, scidr, "n1", svcs, slices))
		t1 := time.Now()
		script := rs.Transaction(nil, nil)
		t2 := time.Now()
		if err := runner.Apply(ctx, script); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		compute += t1.Sub(t0)
		render += t2.Sub(t1)
		apply += t3.Sub(t2)

		changed := slices[500].DeepCopy()
		changed.Endpoints[0].Addresses = []string{"10.42.200.200"}
		all := append(append([]*discoveryv1.EndpointSlice(nil), slices[:500]...), changed)
		all = append(all, slices[501:]...)
		t4 := time.Now()
		rs2 := proxy.Compute(proxy.BuildInput(cidr, scidr, "n1", svcs, all))
		script2 := rs2.Transaction(rs, nil)
		t5 := time.Now()
		if err := runner.Apply(ctx, script2); err != nil {
			b.Fatal(err)
		}
		incr += time.Since(t4)
		incrNFT += time.Since(t5)
		if i == 0 {
			b.ReportMetric(float64(len(script))/1024, "script-KiB")
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(compute.Milliseconds())/n, "compute-ms")
	b.ReportMetric(float64(render.Milliseconds())/n, "render-ms")
	b.ReportMetric(float64(apply.Milliseconds())/n, "nft-full-ms")
	b.ReportMetric(float64(incr.Milliseconds())/n, "one-change-sync-ms")
	b.ReportMetric(float64(incrNFT.Milliseconds())/n, "one-change-nft-ms")
}

// recorder is a Runner that notes when each script finished applying.
type recorder struct {
	proxy.NFT
	mu      sync.Mutex
	waiters map[string]chan time.Time
}

func (r *recorder) Apply(ctx context.Context, script string) error {
	err := r.NFT.Apply(ctx, script)
	now := time.Now()
	if err == nil {
		r.mu.Lock()
		for s, ch := range r.waiters {
			if strings.Contains(script, s) {
				ch <- now
				delete(r.waiters, s)
			}
		}
		r.mu.Unlock()
	}
	return err
}

func (r *recorder) wait(s string) chan time.Time {
	ch := make(chan time.Time, 1)
	r.mu.Lock()
	r.waiters[s] = ch
	r.mu.Unlock()
	return ch
}

// BenchmarkEndpointChangeToRule: a real API server, 1,000 Services × 10
// endpoints, the proxier with its defaults (min-sync-period 1 s); an
// EndpointSlice update every 1.1 s, timed from the update call to the
// end of the nft transaction that carries the new endpoint.
func BenchmarkEndpointChangeToRule(b *testing.B) {
	_, runner := node(b, "skc")
	cluster := testapiserver.Start(b)
	client := cluster.Clientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svcs, slices := objects()
	create(b, ctx, client, svcs, slices)
	rec := &recorder{NFT: runner, waiters: map[string]chan time.Time{}}
	p := proxy.New(client, proxy.Options{NodeName: "n1", Runner: rec})
	go func() { _ = p.Start(ctx) }()
	start := time.Now()
	<-p.Ready()
	b.ReportMetric(time.Since(start).Seconds(), "first-sync-s")
	samples := 30
	var lat []time.Duration
	for i := 0; i < b.N*samples; i++ {
		time.Sleep(1100 * time.Millisecond)
		s, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, slices[i%numServices].Name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ip := fmt.Sprintf("10.42.%d.%d", 210+i/250, 2+i%250)
		s.Endpoints[0].Addresses = []string{ip}
		done := rec.wait(ip + " . 8080")
		t0 := time.Now()
		if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		select {
		case t := <-done:
			lat = append(lat, t.Sub(t0))
		case <-time.After(30 * time.Second):
			b.Fatal("change not programmed in 30 s")
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
}

func create(b *testing.B, ctx context.Context, client kubernetes.Interface, svcs []*v1.Service, slices []*discoveryv1.EndpointSlice) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	work := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := client.CoreV1().Services("default").Create(ctx, svcs[i], metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slices[i], metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range svcs {
		select {
		case work <- i:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// BenchmarkDNS: cluster DNS with 1,000 Services, 16 clients on the host
// asking for service names over UDP for 5 s.
func BenchmarkDNS(b *testing.B) {
	svcs, slices := objects()
	var objs []runtime.Object
	for i := range svcs {
		objs = append(objs, svcs[i], slices[i])
	}
	srv, err := dns.New(fake.NewClientset(objs...), dns.Options{Address: "127.0.0.1:0", Upstreams: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Start(ctx) }()
	<-srv.Ready()
	addr, _ := srv.Addr()
	for i := 0; i < b.N; i++ {
		var total atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		deadline := time.Now().Add(5 * time.Second)
		var wg sync.WaitGroup
		for c := 0; c < 16; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				conn, err := net.Dial("udp", addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				co := &mdns.Conn{Conn: conn}
				var mine []time.Duration
				for n := 0; time.Now().Before(deadline); n++ {
					m := new(mdns.Msg)
					m.SetQuestion(fmt.Sprintf("svc-%d.default.svc.cluster.local.", (c*7919+n)%numServices), mdns.TypeA)
					t0 := time.Now()
					_ = co.SetDeadline(time.Now().Add(2 * time.Second))
					if err := co.WriteMsg(m); err != nil {
						b.Error(err)
						return
					}
					r, err := co.ReadMsg()
					if err != nil || len(r.Answer) != 1 {
						b.Errorf("answer: %v %v", r, err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				total.Add(int64(len(mine)))
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}(c)
		}
		wg.Wait()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		if len(lat) == 0 {
			b.Fatal("no answers")
		}
		b.ReportMetric(float64(total.Load())/5, "qps")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
