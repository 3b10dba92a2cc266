package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// ParseNodePortAddresses reads --nodeport-addresses: CIDRs, or the single
// word "primary" (the node's own address), as upstream.
func ParseNodePortAddresses(vals []string) (cidrs []netip.Prefix, primary bool, err error) {
	for _, v := range vals {
		v = strings.TrimSpace(v)
		if v == "primary" {
			if len(vals) != 1 {
				return nil, false, fmt.Errorf("--nodeport-addresses: \"primary\" cannot be combined with CIDRs")
			}
			return nil, true, nil
		}
		c, perr := netip.ParsePrefix(v)
		if perr != nil {
			return nil, false, fmt.Errorf("--nodeport-addresses: %q is neither a CIDR nor \"primary\"", v)
		}
		cidrs = append(cidrs, c.Masked())
	}
	return cidrs, false, nil
}

// DefaultHealthzAddress is kube-proxy's --healthz-bind-address.
const DefaultHealthzAddress = "0.0.0.0:10256"

// ToBeDeletedTaint marks a node the cluster autoscaler is about to remove;
// /healthz reports such a node as not eligible, as upstream does.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ProxierHealth is one IP family's proxier state in /healthz (upstream's
// JSON).
type ProxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// ProxyHealth is the body of /healthz and /livez, as kube-proxy's.
type ProxyHealth struct {
	LastUpdated  time.Time                     `json:"lastUpdated"`
	CurrentTime  time.Time                     `json:"currentTime"`
	NodeEligible *bool                         `json:"nodeEligible,omitempty"`
	Healthy      bool                          `json:"healthy"`
	Status       map[v1.IPFamily]ProxierHealth `json:"status,omitempty"`
}

// health tracks what /healthz reports: the proxier is unhealthy when a
// change has waited more than twice the sync period to be programmed
// (upstream's rule).
type health struct {
	mu            sync.Mutex
	lastUpdated   time.Time
	oldestPending time.Time
}

func (h *health) queued(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldestPending.IsZero() {
		h.oldestPending = now
	}
}

func (h *health) updated(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.oldestPending = time.Time{}
	h.lastUpdated = now
}

// Health reports the proxier's health now.
func (p *Proxier) Health() ProxyHealth {
	now := p.opts.Clock.Now()
	p.health.mu.Lock()
	defer p.health.mu.Unlock()
	healthy := p.health.oldestPending.IsZero() || now.Sub(p.health.oldestPending) < 2*p.opts.SyncPeriod
	out := ProxyHealth{LastUpdated: p.health.lastUpdated, CurrentTime: now, Healthy: healthy}
	if !p.health.lastUpdated.IsZero() {
		out.Status = map[v1.IPFamily]ProxierHealth{}
		for _, f := range p.families {
			fam := v1.IPv4Protocol
			if f.v6 {
				fam = v1.IPv6Protocol
			}
			out.Status[fam] = ProxierHealth{LastUpdated: p.health.lastUpdated, Healthy: healthy}
		}
	}
	return out
}

// nodeEligible is false when this proxier's Node is gone, being deleted
// or tainted ToBeDeletedByClusterAutoscaler.
func (p *Proxier) nodeEligible() bool {
	n := p.node.Load()
	if n == nil {
		return false
	}
	if n.DeletionTimestamp != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// HealthHandler serves kube-proxy's /healthz (503 when a change waited
// too long or the node is not eligible) and /livez (the same without the
// node), with upstream's JSON body.
func (p *Proxier) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, h ProxyHealth, ok bool) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if ok {
			// A healthy proxier reports "now", as upstream keeps for
			// clients that read lastUpdated as a liveness timestamp.
			h.LastUpdated = h.CurrentTime
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		b, _ := json.Marshal(h)
		_, _ = w.Write(b)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		h := p.Health()
		eligible := p.nodeEligible()
		h.NodeEligible = &eligible
		write(w, h, h.Healthy && eligible)
	})
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		h := p.Health()
		write(w, h, h.Healthy)
	})
	return mux
}

// ServeHealth listens on addr and serves HealthHandler until ctx ends. It
// returns the bound address.
func (p *Proxier) ServeHealth(ctx context.Context, addr string) (string, error) {
	ln, err := p.opts.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("proxy healthz: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: p.HealthHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return ln.Addr().String(), nil
}

// serviceHealth serves the health-check node ports of LoadBalancer
// Services with externalTrafficPolicy Local: on healthCheckNodePort, 200
// with the count of this node's ready endpoints when there is one and the
// proxier is healthy, 503 otherwise, so that a load balancer sends the
// Service's traffic only to nodes that have its endpoints.
type serviceHealth struct {
	p *Proxier

	mu       sync.Mutex
	services map[types.NamespacedName]*hcService
}

type hcService struct {
	port      int32
	addrs     string // the addresses listened on, to notice a change
	endpoints int
	servers   []*http.Server
}

// hcWant is one health check to serve.
type hcWant struct {
	port      int32
	endpoints int
}

// wantedHealthChecks groups the input's ports by Service: the health
// check port and the Service's local ready endpoints (over its ports).
func wantedHealthChecks(in Input) map[types.NamespacedName]hcWant {
	out := map[types.NamespacedName]hcWant{}
	for _, sp := range in.Ports {
		if sp.HealthCheckNodePort == 0 {
			continue
		}
		n := 0
		for _, ep := range sp.Endpoints {
			if ep.Local && ep.Ready {
				n++
			}
		}
		key := types.NamespacedName{Namespace: sp.Namespace, Name: sp.Name}
		w := out[key]
		w.port = sp.HealthCheckNodePort
		w.endpoints = max(w.endpoints, n)
		out[key] = w
	}
	return out
}

// sync opens, moves and closes the health-check servers to match want,
// listening on addrs (nil: every address).
func (s *serviceHealth) sync(ctx context.Context, want map[types.NamespacedName]hcWant, addrs []netip.Addr, recorder record.EventRecorder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.services == nil {
		s.services = map[types.NamespacedName]*hcService{}
	}
	hosts := []string{""}
	if addrs != nil {
		hosts = hosts[:0]
		for _, a := range addrs {
			hosts = append(hosts, a.String())
		}
		sort.Strings(hosts)
	}
	hostKey := fmt.Sprint(hosts)
	for name, hc := range s.services {
		if w, ok := want[name]; !ok || w.port != hc.port || hc.addrs != hostKey {
			for _, srv := range hc.servers {
				_ = srv.Close()
			}
			delete(s.services, name)
		}
	}
	for name, w := range want {
		if hc, ok := s.services[name]; ok {
			hc.endpoints = w.endpoints
			continue
		}
		hc := &hcService{port: w.port, addrs: hostKey, endpoints: w.endpoints}
		var err error
		for _, h := range hosts {
			var ln net.Listener
			ln, err = s.p.opts.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(int(w.port))))
			if err != nil {
				break
			}
			srv := &http.Server{Handler: s.handler(name), ReadHeaderTimeout: 10 * time.Second}
			hc.servers = append(hc.servers, srv)
			go func() { _ = srv.Serve(ln) }()
		}
		if err != nil {
			for _, srv := range hc.servers {
				_ = srv.Close()
			}
			// Tried again at the next sync.
			klog.FromContext(ctx).Error(err, "Failed to start the health check of a Service", "service", name, "port", w.port)
			if recorder != nil {
				recorder.Eventf(&v1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: name.Namespace, Name: name.Name},
					v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "node %s failed to start healthcheck %q on port %d: %v", s.p.opts.NodeName, name.String(), w.port, err)
			}
			continue
		}
		s.services[name] = hc
	}
}

func (s *serviceHealth) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, hc := range s.services {
		for _, srv := range hc.servers {
			_ = srv.Close()
		}
		delete(s.services, name)
	}
}

func (s *serviceHealth) handler(name types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		hc, ok := s.services[name]
		n := 0
		if ok {
			n = hc.endpoints
		}
		s.mu.Unlock()
		healthy := s.p.Health().Healthy
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(n))
		if n != 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
			name.Namespace, name.Name, n, healthy)
	})
}
