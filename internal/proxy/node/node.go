// Package node runs what every node agent runs for Services: the service
// proxy and the NetworkPolicy enforcer, as one component for the agent's
// wiring.
package node

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/netpol"
	"github.com/skiff-sh/skiff/internal/proxy"
)

// Options: NodeName is required; the rest default as the packages do.
type Options struct {
	NodeName string
	Proxy    proxy.Options
	// DisableNetworkPolicy leaves NetworkPolicy unenforced.
	DisableNetworkPolicy bool
	Metrics              prometheus.Registerer
	// HealthzAddress serves the proxy's /healthz and /livez (default
	// kube-proxy's 0.0.0.0:10256; "-" serves nothing). A port that cannot
	// be bound is logged, not fatal.
	HealthzAddress string
}

// Services is the proxy and the enforcer of one node.
type Services struct {
	proxier  *proxy.Proxier
	enforcer *netpol.Enforcer
	ready    chan struct{}
	healthz  string
}

// New builds them from a client config (user agent skiff-proxy); it
// starts nothing.
func New(restConfig *rest.Config, opts Options) (*Services, error) {
	rc := rest.CopyConfig(restConfig)
	rc.UserAgent = "skiff-proxy"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	po := opts.Proxy
	po.NodeName, po.Metrics = opts.NodeName, opts.Metrics
	s := &Services{proxier: proxy.New(client, po), ready: make(chan struct{}), healthz: opts.HealthzAddress}
	if s.healthz == "" {
		s.healthz = proxy.DefaultHealthzAddress
	}
	if !opts.DisableNetworkPolicy {
		s.enforcer = netpol.New(client, netpol.Options{NodeName: opts.NodeName, Metrics: opts.Metrics})
	}
	return s, nil
}

// Ready closes once both have programmed their first rules.
func (s *Services) Ready() <-chan struct{} { return s.ready }

// Start runs both until ctx ends or one fails; the rules stay in place.
func (s *Services) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	if s.healthz != "-" {
		if addr, err := s.proxier.ServeHealth(ctx, s.healthz); err != nil {
			klog.FromContext(ctx).Error(err, "Proxy healthz not served")
		} else {
			klog.FromContext(ctx).V(1).Info("Serving proxy healthz", "address", addr)
		}
	}
	n := 1
	go func() { errc <- s.proxier.Start(ctx) }()
	readies := []<-chan struct{}{s.proxier.Ready()}
	if s.enforcer != nil {
		n++
		go func() { errc <- s.enforcer.Start(ctx) }()
		readies = append(readies, s.enforcer.Ready())
	}
	go func() {
		for _, r := range readies {
			select {
			case <-r:
			case <-ctx.Done():
				return
			}
		}
		close(s.ready)
	}()
	var errs []error
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil {
			errs = append(errs, err)
			cancel()
		}
	}
	return errors.Join(errs...)
}
