package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults.
const (
	DefaultDomain     = "cluster.local"
	DefaultServiceIP  = "10.43.0.10"
	DefaultResolvConf = "/etc/resolv.conf"
)

// Options configure a Server; zero values mean the defaults.
type Options struct {
	// Zone: the cluster domain (default cluster.local, TTL 5 s,
	// nameserver 10.43.0.10, service 10.43.0.0/16, pods 10.42.0.0/16).
	Zone Zone
	// Address is where DNS is served over UDP and TCP ("ip:port",
	// required; port 0 picks one, the same for both).
	Address string
	// MetricsAddress serves /metrics, /health and /ready over HTTP
	// (CoreDNS's 9153); empty serves nothing.
	MetricsAddress string
	// Upstreams are the resolvers ("ip:port") names outside the zone are
	// forwarded to; nil reads ResolvConf (default /etc/resolv.conf).
	Upstreams  []string
	ResolvConf string
	// Metrics receives coredns_* metrics; nil means a registry of the
	// server's own (served on MetricsAddress).
	Metrics prometheus.Registerer
	// MaxConcurrentForwards bounds upstream queries in flight (default
	// 200); beyond it a forwarded question gets SERVFAIL at once.
	MaxConcurrentForwards int
	// CacheSize bounds the forward cache (default 10,000 answers);
	// CacheMaxTTL caps how long one is kept (default 30 s, the Corefile's
	// "cache 30").
	CacheSize   int
	CacheMaxTTL time.Duration
	// ForwardTimeout for one upstream (default 2 s).
	ForwardTimeout time.Duration
	// Publish, when set, keeps Service kube-system/kube-dns (ClusterIP =
	// Zone.NameserverIP) and its endpoints pointing at this address, the
	// way bootstrap keeps default/kubernetes.
	Publish *Publish
	Clock   clock.Clock
}

// Server is the cluster DNS component.
type Server struct {
	client kubernetes.Interface
	opts   Options

	resolver *Resolver
	cache    *answerCache
	fwdSem   chan struct{}
	m        *metrics
	gatherer prometheus.Gatherer

	ready     chan struct{}
	mu        sync.Mutex
	udpAddr   string
	tcpAddr   string
	metrAddr  string
	healthErr error
}

// New validates opts and builds a Server; it opens nothing.
func New(client kubernetes.Interface, opts Options) (*Server, error) {
	if opts.Address == "" {
		return nil, errors.New("dns: no listen address")
	}
	if opts.Zone.Domain == "" {
		opts.Zone.Domain = DefaultDomain
	}
	if !opts.Zone.NameserverIP.IsValid() {
		opts.Zone.NameserverIP = netip.MustParseAddr(DefaultServiceIP)
	}
	if !opts.Zone.ServiceCIDR.IsValid() {
		opts.Zone.ServiceCIDR = netip.MustParsePrefix("10.43.0.0/16")
	}
	if !opts.Zone.ClusterCIDR.IsValid() {
		opts.Zone.ClusterCIDR = netip.MustParsePrefix("10.42.0.0/16")
	}
	if opts.ResolvConf == "" {
		opts.ResolvConf = DefaultResolvConf
	}
	if opts.MaxConcurrentForwards <= 0 {
		opts.MaxConcurrentForwards = 200
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 10000
	}
	if opts.CacheMaxTTL <= 0 {
		opts.CacheMaxTTL = 30 * time.Second
	}
	if opts.ForwardTimeout <= 0 {
		opts.ForwardTimeout = 2 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	s := &Server{
		client: client,
		opts:   opts,
		cache:  newAnswerCache(opts.CacheSize, opts.CacheMaxTTL, opts.Clock),
		fwdSem: make(chan struct{}, opts.MaxConcurrentForwards),
		ready:  make(chan struct{}),
	}
	reg := opts.Metrics
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, s.gatherer = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		s.gatherer = g
	}
	s.m = newMetrics(reg)
	return s, nil
}

// Ready closes once the caches have synced and both listeners serve.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the UDP and TCP address DNS is served on.
func (s *Server) Addr() (udp, tcp string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.udpAddr, s.tcpAddr
}

// MetricsAddr is the bound metrics address.
func (s *Server) MetricsAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metrAddr
}

// Healthy is nil while the server answers (for readyz).
func (s *Server) Healthy() error {
	select {
	case <-s.ready:
	default:
		return errors.New("dns: not started")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthErr
}

// Probe asks the server, over UDP on its listening address as a client
// would, for dns-version.<zone> TXT and returns nil when the answer comes
// (the API server's /readyz "cluster-dns" check).
func (s *Server) Probe(ctx context.Context) error {
	if err := s.Healthy(); err != nil {
		return err
	}
	udp, _ := s.Addr()
	host, port, err := net.SplitHostPort(udp)
	if err != nil {
		return err
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		udp = net.JoinHostPort("127.0.0.1", port)
	}
	m := new(mdns.Msg)
	m.SetQuestion("dns-version."+mdns.Fqdn(s.opts.Zone.Domain), mdns.TypeTXT)
	c := &mdns.Client{Net: "udp", Timeout: 2 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, _, err := c.ExchangeContext(ctx, m, udp)
	if err != nil {
		return fmt.Errorf("dns: no answer from %s: %w", udp, err)
	}
	if resp.Rcode != mdns.RcodeSuccess || len(resp.Answer) == 0 {
		return fmt.Errorf("dns: %s answered %s with %d records", udp, mdns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	return nil
}

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("dns")
	factory := informers.NewSharedInformerFactory(s.client, 0)
	defer factory.Shutdown()
	// Shutdown waits for the informers, which stop only with ctx: cancel it
	// first (defers run last-in first-out) so an early error cannot hang here.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	svcInf := factory.Core().V1().Services().Informer()
	sliceInf := factory.Discovery().V1().EndpointSlices().Informer()
	if err := svcInf.AddIndexers(ServiceIndexers()); err != nil {
		return err
	}
	if err := sliceInf.AddIndexers(SliceIndexers()); err != nil {
		return err
	}
	s.resolver = NewResolver(s.opts.Zone, Source{Services: svcInf.GetIndexer(), Slices: sliceInf.GetIndexer()}, uint32(s.opts.Clock.Now().Unix()))
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dns: cache of %v did not sync", typ)
		}
	}

	if s.opts.Upstreams == nil {
		ups, err := UpstreamsFromResolvConf(s.opts.ResolvConf)
		if err != nil {
			logger.Error(err, "No upstream resolvers; names outside the cluster get SERVFAIL")
		}
		s.opts.Upstreams = ups
	}
	s.opts.Upstreams = withoutSelf(s.opts.Upstreams, s.opts.Address)

	pc, err := net.ListenPacket("udp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("dns: listen udp %s: %w", s.opts.Address, err)
	}
	tcpAddr := s.opts.Address
	if _, port, _ := net.SplitHostPort(s.opts.Address); port == "0" {
		host, _, _ := net.SplitHostPort(s.opts.Address)
		_, p, _ := net.SplitHostPort(pc.LocalAddr().String())
		tcpAddr = net.JoinHostPort(host, p)
	}
	ln, err := net.Listen("tcp", tcpAddr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("dns: listen tcp %s: %w", tcpAddr, err)
	}
	udpSrv := &mdns.Server{PacketConn: pc, Handler: s, UDPSize: 65535}
	tcpSrv := &mdns.Server{Listener: ln, Handler: s, ReadTimeout: 5 * time.Second, IdleTimeout: func() time.Duration { return 8 * time.Second }, MaxTCPQueries: 1000}
	errc := make(chan error, 3)
	go func() { errc <- udpSrv.ActivateAndServe() }()
	go func() { errc <- tcpSrv.ActivateAndServe() }()
	defer func() {
		_ = udpSrv.Shutdown()
		_ = tcpSrv.Shutdown()
	}()

	var httpSrv *http.Server
	var mln net.Listener
	if s.opts.MetricsAddress != "" {
		// Metrics are not worth losing DNS for: a taken port (another
		// server on the host) leaves DNS serving without them.
		if mln, err = net.Listen("tcp", s.opts.MetricsAddress); err != nil {
			logger.Error(err, "Cluster DNS metrics not served", "address", s.opts.MetricsAddress)
		}
	}
	if mln != nil {
		mux := http.NewServeMux()
		health := func(w http.ResponseWriter, _ *http.Request) {
			if err := s.Healthy(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("OK"))
		}
		mux.HandleFunc("/health", health)
		mux.HandleFunc("/ready", health)
		if s.gatherer != nil {
			mux.Handle("/metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
		}
		httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := httpSrv.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		defer httpSrv.Close()
		s.mu.Lock()
		s.metrAddr = mln.Addr().String()
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.udpAddr, s.tcpAddr = pc.LocalAddr().String(), ln.Addr().String()
	s.mu.Unlock()

	if p := s.opts.Publish; p != nil {
		go s.publishLoop(ctx, *p)
	}
	close(s.ready)
	logger.V(1).Info("Cluster DNS serving", "address", s.udpAddr, "upstreams", s.opts.Upstreams)

	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		s.mu.Lock()
		s.healthErr = err
		s.mu.Unlock()
		return fmt.Errorf("dns: %w", err)
	}
}

// UpstreamsFromResolvConf lists the nameservers of a resolv.conf as
// "ip:port".
func UpstreamsFromResolvConf(path string) ([]string, error) {
	cfg, err := mdns.ClientConfigFromFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range cfg.Servers {
		out = append(out, net.JoinHostPort(s, cfg.Port))
	}
	return out, nil
}

// withoutSelf drops an upstream that is this server (a forwarding loop).
func withoutSelf(ups []string, self string) []string {
	var out []string
	for _, u := range ups {
		if u == self {
			continue
		}
		out = append(out, u)
	}
	return out
}

// ServeDNS answers one request (mdns.Handler).
func (s *Server) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	start := s.opts.Clock.Now()
	proto := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		proto = "tcp"
	}
	resp, zone := s.handle(req)
	if resp == nil {
		return
	}
	if proto == "udp" {
		size := 512
		if opt := req.IsEdns0(); opt != nil && int(opt.UDPSize()) > size {
			size = int(opt.UDPSize())
		}
		resp.Truncate(size)
	}
	_ = w.WriteMsg(resp)
	qtype := "other"
	if len(req.Question) == 1 {
		qtype = typeLabel(req.Question[0].Qtype)
	}
	family := "1"
	if a, ok := w.RemoteAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		family = "2"
	} else if a, ok := w.RemoteAddr().(*net.TCPAddr); ok && a.IP.To4() == nil {
		family = "2"
	}
	s.m.requests.WithLabelValues("dns://"+s.opts.Address, zone, "", proto, family, qtype).Inc()
	s.m.duration.WithLabelValues("dns://"+s.opts.Address, zone, "", qtype).Observe(s.opts.Clock.Since(start).Seconds())
	s.m.responses.WithLabelValues("dns://"+s.opts.Address, zone, "", mdns.RcodeToString[resp.Rcode], "").Inc()
}

// handle builds the response (nil: send nothing) and the zone label.
func (s *Server) handle(req *mdns.Msg) (*mdns.Msg, string) {
	if req.Response {
		return nil, "." // never answer a response: no reflection
	}
	m := new(mdns.Msg)
	m.Id = req.Id
	m.Response = true
	m.Opcode = req.Opcode
	m.RecursionDesired = req.RecursionDesired
	m.RecursionAvailable = true
	m.Question = req.Question
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(1232, opt.Do())
	}
	if req.Opcode != mdns.OpcodeQuery {
		m.Rcode = mdns.RcodeNotImplemented
		return m, "."
	}
	if len(req.Question) != 1 {
		m.Rcode = mdns.RcodeFormatError
		return m, "."
	}
	q := req.Question[0]
	if q.Qclass != mdns.ClassINET && q.Qclass != mdns.ClassANY {
		m.Rcode = mdns.RcodeRefused
		return m, "."
	}
	if q.Qtype == mdns.TypeAXFR || q.Qtype == mdns.TypeIXFR {
		m.Rcode = mdns.RcodeRefused
		return m, "."
	}
	if s.resolver == nil {
		m.Rcode = mdns.RcodeServerFailure
		return m, "."
	}
	a := s.resolver.Resolve(q)
	if a.Forward {
		return s.forward(req, m), "."
	}
	m.Authoritative = true
	m.Rcode = a.Rcode
	m.Answer, m.Ns = a.Answer, a.Ns
	m.Extra = append(a.Extra, m.Extra...)
	return m, s.resolver.fqdn
}

// forward asks the upstreams (through the cache).
func (s *Server) forward(req, m *mdns.Msg) *mdns.Msg {
	q := req.Question[0]
	do := false
	if opt := req.IsEdns0(); opt != nil {
		do = opt.Do()
	}
	key := fmt.Sprintf("%s/%d/%d/%t", strings.ToLower(q.Name), q.Qtype, q.Qclass, do)
	if cached := s.cache.get(key); cached != nil {
		cached.Id = req.Id
		cached.RecursionDesired = req.RecursionDesired
		return cached
	}
	if len(s.opts.Upstreams) == 0 {
		m.Rcode = mdns.RcodeServerFailure
		return m
	}
	select {
	case s.fwdSem <- struct{}{}:
		defer func() { <-s.fwdSem }()
	default:
		m.Rcode = mdns.RcodeServerFailure // flood: fail fast rather than pile up
		return m
	}
	out := req.Copy()
	out.Id = mdns.Id()
	out.RecursionDesired = true
	for _, up := range s.opts.Upstreams {
		c := &mdns.Client{Net: "udp", Timeout: s.opts.ForwardTimeout, UDPSize: 4096}
		resp, _, err := c.Exchange(out, up)
		if err == nil && resp.Truncated {
			c.Net = "tcp"
			resp, _, err = c.Exchange(out, up)
		}
		if err != nil || resp == nil || resp.Rcode == mdns.RcodeServerFailure || resp.Rcode == mdns.RcodeRefused {
			continue
		}
		s.cache.put(key, resp)
		resp.Id = req.Id
		resp.RecursionDesired = req.RecursionDesired
		return resp
	}
	m.Rcode = mdns.RcodeServerFailure
	return m
}

// answerCache keeps forwarded answers until their TTL (capped) ends.
type answerCache struct {
	mu      sync.Mutex
	size    int
	maxTTL  time.Duration
	clock   clock.Clock
	entries map[string]cacheEntry
}

type cacheEntry struct {
	msg     *mdns.Msg
	stored  time.Time
	expires time.Time
}

func newAnswerCache(size int, maxTTL time.Duration, c clock.Clock) *answerCache {
	return &answerCache{size: size, maxTTL: maxTTL, clock: c, entries: map[string]cacheEntry{}}
}

func (c *answerCache) get(key string) *mdns.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil
	}
	now := c.clock.Now()
	if !now.Before(e.expires) {
		delete(c.entries, key)
		return nil
	}
	m := e.msg.Copy()
	aged := uint32(now.Sub(e.stored) / time.Second)
	for _, sec := range [][]mdns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if rr.Header().Rrtype == mdns.TypeOPT {
				continue
			}
			if rr.Header().Ttl > aged {
				rr.Header().Ttl -= aged
			} else {
				rr.Header().Ttl = 0
			}
		}
	}
	return m
}

func (c *answerCache) put(key string, m *mdns.Msg) {
	if m.Rcode != mdns.RcodeSuccess && m.Rcode != mdns.RcodeNameError {
		return
	}
	ttl := c.maxTTL
	for _, sec := range [][]mdns.RR{m.Answer, m.Ns} {
		for _, rr := range sec {
			if d := time.Duration(rr.Header().Ttl) * time.Second; d < ttl {
				ttl = d
			}
		}
	}
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.size {
		// Evict expired entries, then an arbitrary one.
		now := c.clock.Now()
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.size {
				break
			}
			delete(c.entries, k)
		}
	}
	now := c.clock.Now()
	c.entries[key] = cacheEntry{msg: m.Copy(), stored: now, expires: now.Add(ttl)}
}

type metrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	responses *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		// CoreDNS's names and labels.
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "coredns", Subsystem: "dns", Name: "requests_total",
			Help: "Counter of DNS requests made per zone, protocol and family.",
		}, []string{"server", "zone", "view", "proto", "family", "type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "coredns", Subsystem: "dns", Name: "request_duration_seconds",
			Help:    "Histogram of the time (in seconds) each request took per zone.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}, []string{"server", "zone", "view", "type"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "coredns", Subsystem: "dns", Name: "responses_total",
			Help: "Counter of response status codes.",
		}, []string{"server", "zone", "view", "rcode", "plugin"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.responses)
	}
	return m
}

// typeLabel keeps the type label's values bounded, as CoreDNS does.
func typeLabel(t uint16) string {
	switch t {
	case mdns.TypeA, mdns.TypeAAAA, mdns.TypeCNAME, mdns.TypeMX, mdns.TypeNS, mdns.TypePTR,
		mdns.TypeSOA, mdns.TypeSRV, mdns.TypeTXT, mdns.TypeANY, mdns.TypeHTTPS, mdns.TypeAXFR, mdns.TypeIXFR:
		return mdns.TypeToString[t]
	}
	return "other"
}
