package netpol

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/proxy/nft"
)

// Options configure an Enforcer; zero values are the defaults.
type Options struct {
	// NodeName: policies are enforced for the pods on this node ("" all).
	NodeName string
	// MinSyncPeriod between two syncs (default 100 ms: a policy applies
	// well within a second); SyncPeriod re-syncs without changes (30 s).
	MinSyncPeriod, SyncPeriod time.Duration
	// DNSService is the Service whose endpoints egress may always reach
	// (default kube-system/kube-dns).
	DNSNamespace, DNSService string
	Runner                   nft.Runner
	Metrics                  prometheus.Registerer
	Clock                    clock.WithTicker
}

// Enforcer keeps table ip skiff-netpol in line with the policies.
type Enforcer struct {
	client kubernetes.Interface
	opts   Options

	ready     chan struct{}
	readyOnce sync.Once
	trigger   chan struct{}
	prev      *nft.Ruleset

	syncDuration prometheus.Histogram
	syncFailures prometheus.Counter
}

// New builds an Enforcer; it starts nothing.
func New(client kubernetes.Interface, opts Options) *Enforcer {
	if opts.MinSyncPeriod <= 0 {
		opts.MinSyncPeriod = 100 * time.Millisecond
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = 30 * time.Second
	}
	if opts.DNSService == "" {
		opts.DNSNamespace, opts.DNSService = "kube-system", "kube-dns"
	}
	if opts.Runner == nil {
		opts.Runner = nft.NFT{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	e := &Enforcer{
		client:  client,
		opts:    opts,
		ready:   make(chan struct{}),
		trigger: make(chan struct{}, 1),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "skiff_netpol_sync_duration_seconds", Help: "Time to program NetworkPolicy rules.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		syncFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skiff_netpol_sync_failures_total", Help: "NetworkPolicy syncs that failed (the last good rules stay).",
		}),
	}
	if opts.Metrics != nil {
		opts.Metrics.MustRegister(e.syncDuration, e.syncFailures)
	}
	return e
}

// Ready closes after the first successful sync.
func (e *Enforcer) Ready() <-chan struct{} { return e.ready }

// Start syncs until ctx ends; rules stay in place after it returns.
func (e *Enforcer) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("netpol")
	factory := informers.NewSharedInformerFactory(e.client, 0)
	defer factory.Shutdown()
	// Shutdown waits for the informers, which stop only with ctx: cancel it
	// first (defers run last-in first-out) so an early error cannot hang here.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pods := factory.Core().V1().Pods()
	nss := factory.Core().V1().Namespaces()
	nps := factory.Networking().V1().NetworkPolicies()
	slices := factory.Discovery().V1().EndpointSlices()
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { e.poke() },
		UpdateFunc: func(any, any) { e.poke() },
		DeleteFunc: func(any) { e.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), nss.Informer(), nps.Informer(), slices.Informer()} {
		if _, err := inf.AddEventHandler(poke); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("netpol: cache of %v did not sync", typ)
		}
	}
	snapshot := func() (Input, error) {
		in := Input{NodeName: e.opts.NodeName}
		var err error
		if in.Pods, err = pods.Lister().List(labels.Everything()); err != nil {
			return in, err
		}
		if in.Namespaces, err = nss.Lister().List(labels.Everything()); err != nil {
			return in, err
		}
		if in.Policies, err = nps.Lister().List(labels.Everything()); err != nil {
			return in, err
		}
		sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: e.opts.DNSService})
		dnsSlices, err := slices.Lister().EndpointSlices(e.opts.DNSNamespace).List(sel)
		if err != nil {
			return in, err
		}
		in.AlwaysAllowed = dnsDestinations(dnsSlices)
		return in, nil
	}

	periodic := e.opts.Clock.NewTicker(e.opts.SyncPeriod)
	defer periodic.Stop()
	var last time.Time
	for {
		last = e.opts.Clock.Now()
		in, err := snapshot()
		if err == nil {
			err = e.sync(ctx, in)
		}
		e.syncDuration.Observe(e.opts.Clock.Since(last).Seconds())
		var retry <-chan time.Time
		if err != nil {
			e.syncFailures.Inc()
			logger.Error(err, "NetworkPolicy sync failed; the last good rules stay in place")
			retry = e.opts.Clock.After(time.Second)
		} else {
			e.readyOnce.Do(func() { close(e.ready) })
		}
		select {
		case <-ctx.Done():
			return nil
		case <-e.trigger:
		case <-periodic.C():
		case <-retry:
		}
		if wait := e.opts.MinSyncPeriod - e.opts.Clock.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-e.opts.Clock.After(wait):
			}
		}
	}
}

func (e *Enforcer) poke() {
	select {
	case e.trigger <- struct{}{}:
	default:
	}
}

func (e *Enforcer) sync(ctx context.Context, in Input) error {
	want := Compute(in)
	var existing *nft.Existing
	if e.prev == nil {
		var err error
		if existing, err = e.opts.Runner.List(ctx, Family, Table); err != nil {
			return err
		}
	}
	// A transaction started is finished even when ctx ends (it is atomic
	// in the kernel anyway), so that shutdown never reports a failure.
	applyCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := e.opts.Runner.Apply(applyCtx, want.Transaction(e.prev, existing)); err != nil {
		e.prev = nil
		return err
	}
	e.prev = want
	return nil
}

// dnsDestinations are the ready DNS endpoints' addresses and ports.
func dnsDestinations(slices []*discoveryv1.EndpointSlice) []Dest {
	var out []Dest
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || !ip.Is4() {
					continue
				}
				for _, p := range s.Ports {
					if p.Port == nil {
						continue
					}
					proto := v1.ProtocolTCP
					if p.Protocol != nil {
						proto = *p.Protocol
					}
					out = append(out, Dest{IP: ip, Protocol: proto, Port: *p.Port})
				}
			}
		}
	}
	return out
}

// Cleanup removes the enforcer's table.
func Cleanup(ctx context.Context, r nft.Runner) error {
	if r == nil {
		r = nft.NFT{}
	}
	return r.Apply(ctx, nft.CleanupScript(Family, Table))
}
