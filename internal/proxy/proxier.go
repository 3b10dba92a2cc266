package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults, as upstream kube-proxy's.
const (
	DefaultSyncPeriod    = 30 * time.Second
	DefaultMinSyncPeriod = 1 * time.Second
)

// Options configure a Proxier; the zero value of each field is its default.
type Options struct {
	// NodeName says which endpoints are local (Local traffic policies) and
	// names the Node that sync-failure events are about.
	NodeName string
	// ClusterCIDR (default 10.42.0.0/16) and ServiceCIDR (10.43.0.0/16).
	ClusterCIDR, ServiceCIDR netip.Prefix
	// ClusterCIDR6 and ServiceCIDR6, when ClusterCIDR6 is set, make the
	// proxy dual-stack: IPv6 Services and endpoints are programmed in
	// table ip6 skiff-proxy, the same way.
	ClusterCIDR6, ServiceCIDR6 netip.Prefix
	// SyncPeriod bounds how stale the kernel may get without a change
	// (default 30 s); MinSyncPeriod is the least time between two syncs
	// (default 1 s), so a burst of changes costs one sync.
	SyncPeriod, MinSyncPeriod time.Duration
	// Runner applies the rules (default NFT{}).
	Runner Runner
	// Metrics receives the kubeproxy_* metrics (default: none exported).
	Metrics prometheus.Registerer
	// Conntrack deletes UDP flows to endpoints that went away (default:
	// the conntrack tool when it is installed, else nothing).
	Conntrack Conntrack
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// ResyncPeriod of the informers (default 0: none).
	ResyncPeriod time.Duration
	// NodeIP and NodeIP6 are the node's primary addresses (default: its
	// Node's first InternalIP of each family, once the Node is seen), for
	// loadBalancerSourceRanges and --nodeport-addresses primary.
	NodeIP, NodeIP6 netip.Addr
	// NodePortCIDRs and NodePortPrimary are --nodeport-addresses: NodePorts
	// (and health-check ports) answer only on the local addresses in the
	// CIDRs, or with NodePortPrimary only on NodeIP. Neither (the default)
	// means every local address but loopback.
	NodePortCIDRs   []netip.Prefix
	NodePortPrimary bool
	// InterfaceAddrs lists the local addresses (default: the host's), and
	// Listen opens the health-check listeners (default net.Listen); tests
	// that run the proxy for another network namespace replace both.
	InterfaceAddrs func() ([]netip.Addr, error)
	Listen         func(network, addr string) (net.Listener, error)
}

// Proxier keeps the nftables table in line with Services and
// EndpointSlices.
type Proxier struct {
	client kubernetes.Interface
	opts   Options
	m      *metrics

	ready     chan struct{}
	readyOnce sync.Once
	trigger   chan struct{}

	mu sync.Mutex
	// pending are the times of changes not yet programmed, for
	// kubeproxy_network_programming_duration_seconds.
	pending []time.Time

	// families are the tables programmed: ip, and ip6 when dual-stack.
	families   []*familyState
	lastSynced time.Time

	health health
	hc     serviceHealth
	node   atomic.Pointer[v1.Node]
	// serviceCIDRs are the cluster's ServiceCIDR objects' ranges (nil
	// until read; the configured ranges always count).
	serviceCIDRs atomic.Pointer[[]netip.Prefix]
	recorder     record.EventRecorder
}

// New builds a Proxier; it starts nothing.
func New(client kubernetes.Interface, opts Options) *Proxier {
	if !opts.ClusterCIDR.IsValid() {
		opts.ClusterCIDR = netip.MustParsePrefix("10.42.0.0/16")
	}
	if !opts.ServiceCIDR.IsValid() {
		opts.ServiceCIDR = netip.MustParsePrefix("10.43.0.0/16")
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.MinSyncPeriod <= 0 {
		opts.MinSyncPeriod = DefaultMinSyncPeriod
	}
	if opts.Runner == nil {
		opts.Runner = NFT{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Listen == nil {
		opts.Listen = net.Listen
	}
	if opts.InterfaceAddrs == nil {
		opts.InterfaceAddrs = hostAddrs
	}
	if opts.Conntrack == nil {
		if _, err := exec.LookPath("conntrack"); err == nil {
			opts.Conntrack = ConntrackTool{}
		}
	}
	p := &Proxier{
		client:  client,
		opts:    opts,
		m:       newMetrics(opts.Metrics),
		ready:   make(chan struct{}),
		trigger: make(chan struct{}, 1),
	}
	p.hc.p = p
	p.families = []*familyState{{clusterCIDR: opts.ClusterCIDR, serviceCIDR: opts.ServiceCIDR}}
	if opts.ClusterCIDR6.IsValid() {
		p.families = append(p.families, &familyState{v6: true, clusterCIDR: opts.ClusterCIDR6, serviceCIDR: opts.ServiceCIDR6})
	}
	return p
}

// familyState is one table's sync state.
type familyState struct {
	v6                       bool
	clusterCIDR, serviceCIDR netip.Prefix
	// prev is the last ruleset applied; nil when unknown (start, after a
	// failed sync), which makes the next sync list the table and rewrite it.
	prev      *Ruleset
	prevInput Input
}

// hostAddrs are the addresses of the host's interfaces.
func hostAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// nodePortAddresses resolves --nodeport-addresses now for one family: nil
// for every address, else the matching local addresses (loopback
// excluded, as upstream; an empty list means no NodePort answers).
func (p *Proxier) nodePortAddresses(nodeIP netip.Addr, v6 bool) ([]netip.Addr, error) {
	if p.opts.NodePortPrimary {
		if !nodeIP.IsValid() {
			return []netip.Addr{}, fmt.Errorf("--nodeport-addresses primary: the node's address is not known yet")
		}
		return []netip.Addr{nodeIP}, nil
	}
	if len(p.opts.NodePortCIDRs) == 0 {
		return nil, nil
	}
	var cidrs []netip.Prefix
	for _, c := range p.opts.NodePortCIDRs {
		if c.Addr().Is6() != v6 {
			continue
		}
		if c.Bits() == 0 {
			return nil, nil // 0.0.0.0/0 or ::/0: every address
		}
		cidrs = append(cidrs, c)
	}
	if len(cidrs) == 0 {
		// Only CIDRs of the other family: this one keeps every address,
		// as upstream's per-family NodePortAddresses.
		return nil, nil
	}
	addrs, err := p.opts.InterfaceAddrs()
	out := []netip.Addr{}
	for _, a := range addrs {
		if a.Is6() != v6 || a.IsLoopback() || a.IsLinkLocalUnicast() {
			continue
		}
		for _, c := range cidrs {
			if c.Contains(a) {
				out = append(out, a)
				break
			}
		}
	}
	return out, err
}

// nodeIP is the configured node address or the Node's first InternalIP,
// of one family.
func (p *Proxier) nodeIP(v6 bool) netip.Addr {
	if v6 && p.opts.NodeIP6.IsValid() {
		return p.opts.NodeIP6
	}
	if !v6 && p.opts.NodeIP.IsValid() {
		return p.opts.NodeIP
	}
	if n := p.node.Load(); n != nil {
		for _, a := range n.Status.Addresses {
			if a.Type != v1.NodeInternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is6() == v6 {
				return ip
			}
		}
	}
	return netip.Addr{}
}

// Ready is closed after the first successful sync.
func (p *Proxier) Ready() <-chan struct{} { return p.ready }

func (p *Proxier) changed(at time.Time) {
	p.health.queued(p.opts.Clock.Now())
	p.mu.Lock()
	p.pending = append(p.pending, at)
	p.mu.Unlock()
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Start watches Services and EndpointSlices and syncs until ctx ends. It
// leaves the rules in place when it returns, so traffic keeps flowing
// while the proxy restarts.
func (p *Proxier) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("proxy")
	factory := informers.NewSharedInformerFactory(p.client, p.opts.ResyncPeriod)
	defer factory.Shutdown()
	defer p.hc.closeAll()
	// Shutdown waits for the informers, which stop only with ctx: cancel it
	// first (defers run last-in first-out) so an early return cannot hang.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	svcInformer := factory.Core().V1().Services()
	sliceInformer := factory.Discovery().V1().EndpointSlices()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.changed(changeTime(obj, p.opts.Clock)) },
		UpdateFunc: func(_, obj any) { p.changed(changeTime(obj, p.opts.Clock)) },
		DeleteFunc: func(obj any) { p.changed(p.opts.Clock.Now()) },
	}
	if _, err := svcInformer.Informer().AddEventHandler(handler); err != nil {
		return err
	}
	if _, err := sliceInformer.Informer().AddEventHandler(handler); err != nil {
		return err
	}
	// This node: its address (loadBalancerSourceRanges, --nodeport-addresses
	// primary) and whether it is eligible (/healthz).
	var nodeSynced cache.InformerSynced = func() bool { return true }
	if p.opts.NodeName != "" {
		nodeFactory := informers.NewSharedInformerFactoryWithOptions(p.client, p.opts.ResyncPeriod,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.opts.NodeName).String()
			}))
		defer nodeFactory.Shutdown()
		nodeInf := nodeFactory.Core().V1().Nodes().Informer()
		setNode := func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				old := p.node.Swap(n)
				if old == nil || fmt.Sprint(old.Status.Addresses) != fmt.Sprint(n.Status.Addresses) {
					p.changed(p.opts.Clock.Now())
				}
			}
		}
		if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    setNode,
			UpdateFunc: func(_, obj any) { setNode(obj) },
			DeleteFunc: func(any) { p.node.Store(nil) },
		}); err != nil {
			return err
		}
		nodeFactory.Start(ctx.Done())
		nodeSynced = nodeInf.HasSynced
	}

	// The cluster's ServiceCIDRs, whose unallocated addresses are dropped
	// too (upstream's kube-proxy watches them). Not waited for: a server
	// that does not serve them leaves the configured range alone.
	cidrFactory := informers.NewSharedInformerFactory(p.client, p.opts.ResyncPeriod)
	defer func() { cancel(); cidrFactory.Shutdown() }()
	cidrInf := cidrFactory.Networking().V1().ServiceCIDRs().Informer()
	setCIDRs := func(any) {
		var out []netip.Prefix
		for _, o := range cidrInf.GetStore().List() {
			if sc, ok := o.(*networkingv1.ServiceCIDR); ok {
				for _, c := range sc.Spec.CIDRs {
					if pfx, err := netip.ParsePrefix(c); err == nil {
						out = append(out, pfx.Masked())
					}
				}
			}
		}
		p.serviceCIDRs.Store(&out)
		p.changed(p.opts.Clock.Now())
	}
	if _, err := cidrInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: setCIDRs, UpdateFunc: func(_, obj any) { setCIDRs(obj) }, DeleteFunc: setCIDRs,
	}); err != nil {
		return err
	}
	cidrFactory.Start(ctx.Done())

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: p.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kube-proxy", Host: p.opts.NodeName})
	p.recorder = recorder

	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("proxy: cache of %v did not sync", typ)
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), nodeSynced) {
		return nil
	}
	list := func() ([]*v1.Service, []*discoveryv1.EndpointSlice, error) {
		svcs, err := svcInformer.Lister().List(labels.Everything())
		if err != nil {
			return nil, nil, err
		}
		slices, err := sliceInformer.Lister().List(labels.Everything())
		return svcs, slices, err
	}

	periodic := p.opts.Clock.NewTicker(p.opts.SyncPeriod)
	defer periodic.Stop()
	retry := false
	for {
		if err := p.syncOnce(ctx, list); err != nil {
			logger.Error(err, "Sync of proxy rules failed; the last good rules stay in place")
			if p.opts.NodeName != "" {
				recorder.Eventf(&v1.ObjectReference{Kind: "Node", Name: p.opts.NodeName, UID: "", APIVersion: "v1"},
					v1.EventTypeWarning, "SyncProxyRulesFailed", "Failed to program nftables: %v", err)
			}
			retry = true
		} else {
			retry = false
			p.readyOnce.Do(func() { close(p.ready) })
		}
		// Wait for a change, the periodic sync or a retry, then at least
		// MinSyncPeriod since the last sync.
		var retryC <-chan time.Time
		if retry {
			retryC = p.opts.Clock.After(p.opts.MinSyncPeriod)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.trigger:
		case <-periodic.C():
		case <-retryC:
		}
		if wait := p.opts.MinSyncPeriod - p.opts.Clock.Since(p.lastSynced); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-p.opts.Clock.After(wait):
			}
		}
	}
}

// changeTime is when the change behind obj happened: the EndpointSlice's
// last-change-trigger-time annotation when the controller set one, else now.
func changeTime(obj any, c clock.Clock) time.Time {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		if v, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]; ok {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return t
			}
		}
	}
	return c.Now()
}

func (p *Proxier) syncOnce(ctx context.Context, list func() ([]*v1.Service, []*discoveryv1.EndpointSlice, error)) error {
	start := p.opts.Clock.Now()
	p.lastSynced = start
	p.mu.Lock()
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	err := p.sync(ctx, list)
	p.m.syncDuration.Observe(p.opts.Clock.Since(start).Seconds())
	if err != nil {
		p.m.syncFailures.Inc()
		p.mu.Lock()
		p.pending = append(pending, p.pending...)
		p.mu.Unlock()
		return err
	}
	now := p.opts.Clock.Now()
	p.health.updated(now)
	p.m.lastSync.Set(float64(now.Unix()))
	for _, t := range pending {
		p.m.programming.Observe(now.Sub(t).Seconds())
	}
	return nil
}

// familyServiceCIDRs adds to configured the cluster's ServiceCIDRs of the
// family that it does not already cover, in address order.
func (p *Proxier) familyServiceCIDRs(configured []netip.Prefix, v6 bool) []netip.Prefix {
	api := p.serviceCIDRs.Load()
	if api == nil {
		return configured
	}
	out := append([]netip.Prefix(nil), configured...)
	extra := append([]netip.Prefix(nil), (*api)...)
	slices.SortFunc(extra, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
next:
	for _, c := range extra {
		if c.Addr().Is6() != v6 {
			continue
		}
		for _, have := range out {
			if have.Bits() <= c.Bits() && have.Contains(c.Addr()) {
				continue next
			}
		}
		out = append(out, c)
	}
	return out
}

func (p *Proxier) sync(ctx context.Context, list func() ([]*v1.Service, []*discoveryv1.EndpointSlice, error)) error {
	svcs, slices, err := list()
	if err != nil {
		return err
	}
	// A transaction started is finished even when ctx ends (it is atomic
	// in the kernel anyway), so that shutdown never reports a failure.
	applyCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	hcWant := map[types.NamespacedName]hcWant{}
	var hcAddrs []netip.Addr
	hcAll := false
	var errs []error
	for _, fs := range p.families {
		in := BuildInput(fs.clusterCIDR, fs.serviceCIDR, p.opts.NodeName, svcs, slices)
		in.ServiceCIDRs = p.familyServiceCIDRs(in.ServiceCIDRs, fs.v6)
		in.NodeIP = p.nodeIP(fs.v6)
		npa, err := p.nodePortAddresses(in.NodeIP, fs.v6)
		if err != nil {
			// Programmed with what was found; the next sync looks again.
			klog.FromContext(ctx).Error(err, "Listing the addresses for NodePorts")
		}
		in.NodePortAddresses = npa
		want := Compute(in)
		var existing *Existing
		if fs.prev == nil {
			if existing, err = p.opts.Runner.List(ctx, in.Family(), Table); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := p.opts.Runner.Apply(applyCtx, want.Transaction(fs.prev, existing)); err != nil {
			fs.prev = nil
			errs = append(errs, err)
			continue
		}
		fs.prev = want
		for k, w := range wantedHealthChecks(in) {
			// A dual-stack pod is one endpoint in each family.
			if o, ok := hcWant[k]; ok {
				w.endpoints = max(w.endpoints, o.endpoints)
			}
			hcWant[k] = w
		}
		hcAll = hcAll || npa == nil
		hcAddrs = append(hcAddrs, npa...)
		prevIn := fs.prevInput
		fs.prevInput = in
		if flows := staleUDPFlows(prevIn, in); len(flows) > 0 && p.opts.Conntrack != nil {
			// The rules are in place; a failure here only delays the switch
			// to the new endpoints, so it is logged, not retried.
			if err := p.opts.Conntrack.DeleteUDP(applyCtx, flows); err != nil {
				klog.FromContext(ctx).Error(err, "Deleting stale UDP conntrack flows")
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if hcAll {
		hcAddrs = nil
	}
	p.hc.sync(ctx, hcWant, hcAddrs, p.recorder)
	return nil
}

// Cleanup removes the proxy's table (`skiff proxy --cleanup`).
func Cleanup(ctx context.Context, r Runner) error {
	if r == nil {
		r = NFT{}
	}
	return r.Apply(ctx, CleanupScript())
}

type metrics struct {
	syncDuration prometheus.Histogram
	programming  prometheus.Histogram
	syncFailures prometheus.Counter
	lastSync     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		// Upstream's names and buckets.
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_duration_seconds",
			Help:    "SyncProxyRules latency in seconds",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		programming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubeproxy", Name: "network_programming_duration_seconds",
			Help: "In Cluster Network Programming Latency in seconds",
			Buckets: append(append(append(prometheus.LinearBuckets(0.25, 0.25, 2),
				prometheus.LinearBuckets(1, 1, 59)...),
				prometheus.LinearBuckets(60, 5, 12)...),
				prometheus.LinearBuckets(120, 30, 7)...),
		}),
		syncFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_nftables_sync_failures_total",
			Help: "Cumulative proxy nftables sync failures",
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_last_timestamp_seconds",
			Help: "The last time proxy rules were successfully synced",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.syncDuration, m.programming, m.syncFailures, m.lastSync)
	}
	return m
}
