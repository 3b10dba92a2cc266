// Package app runs the scheduler as a component, the way kube-scheduler's
// app does: clients from a rest.Config, optional leader election on a
// Lease (kube-system/kube-scheduler, 15 s / 10 s / 2 s), and /healthz and
// /metrics over plain HTTP when given an address. It follows the project's
// contract: New has no side effects, Start blocks until ctx is done, Ready
// is closed once it serves (or waits for leadership).
//
// Each term of leadership gets fresh informers, queue and cache, so that a
// scheduler that lost the Lease and wins it again starts from the API's
// state. The metrics live as long as the App.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/component"
	"github.com/skiff-sh/skiff/internal/scheduler"
	"github.com/skiff-sh/skiff/internal/scheduler/config"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/metrics"
	"github.com/skiff-sh/skiff/internal/sharedinformers"
)

// DefaultSecurePort is where `skiff scheduler` serves /healthz and
// /metrics over HTTPS (kube-scheduler's port).
const DefaultSecurePort = 10259

// UserAgent prefixes the clients' user agents.
const UserAgent = "skiff-scheduler"

// Options configure an App. Config and Registry are required.
type Options struct {
	// Config is the scheduler's configuration (profiles, backoff, leader
	// election, client rates).
	Config config.Config
	// Registry knows the plugins the profiles name.
	Registry framework.Registry
	// Identity is the holder identity of the Lease (default
	// hostname_uuid). The events' reportingInstance is kube-scheduler's:
	// the profile's name and the host's.
	Identity string
	// Address serves /healthz and /metrics, over HTTPS with TLS (the
	// secure port) or plain HTTP without; empty serves nothing (in `skiff
	// server`, whose API server serves Metrics on /metrics).
	Address string
	TLS     *tls.Config
	// MetricsAuth, when set, guards /metrics with delegated authentication
	// and authorization (TokenReview, SubjectAccessReview), as upstream's
	// secure port does; `skiff scheduler` sets it.
	MetricsAuth *component.Auth
	// Profiling serves Go's profiles under /debug/pprof/ on Address,
	// behind MetricsAuth, as kube-scheduler's --profiling does.
	Profiling bool
	// Metrics receives the scheduler's metrics (default a new registry).
	Metrics *prometheus.Registry
	// Clock is handed to the scheduler (default the real clock).
	Clock clock.WithTickerAndDelayedExecution
	// SharedInformers, when set, holds the informers instead of a factory
	// of the scheduler's own: `skiff server` shares one with its
	// controller manager, so each pod and node is cached once.
	SharedInformers *sharedinformers.Process
	// Recampaign: a lost leadership stops scheduling and campaigns again
	// instead of ending Start (`skiff server`; see component.Election).
	Recampaign bool
}

// App runs a scheduler with leader election.
type App struct {
	config  *rest.Config
	opts    Options
	metrics *metrics.Metrics
	ready   chan struct{}

	mu      sync.Mutex
	addr    string
	leading bool
}

// New validates the options; it has no side effects until Start.
func New(restConfig *rest.Config, opts Options) (*App, error) {
	if restConfig == nil {
		return nil, errors.New("scheduler: a client config is required")
	}
	if len(opts.Config.Profiles) == 0 {
		return nil, errors.New("scheduler: at least one profile is required")
	}
	if opts.Registry == nil {
		return nil, errors.New("scheduler: a plugin registry is required")
	}
	le := opts.Config.LeaderElection
	if le.LeaderElect && le.LeaseDuration <= le.RenewDeadline {
		return nil, fmt.Errorf("scheduler: leader election lease duration (%v) must be greater than the renew deadline (%v)", le.LeaseDuration, le.RenewDeadline)
	}
	if opts.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "skiff"
		}
		opts.Identity = host + "_" + uuid.NewString()
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m, err := metrics.New(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("scheduler: metrics: %w", err)
	}
	return &App{config: rest.CopyConfig(restConfig), opts: opts, metrics: m, ready: make(chan struct{})}, nil
}

// Identity is this scheduler's identity.
func (a *App) Identity() string { return a.opts.Identity }

// Ready is closed once the App serves (if it has an address) and runs or
// waits for leadership.
func (a *App) Ready() <-chan struct{} { return a.ready }

// Addr is the address of /healthz and /metrics, once Ready.
func (a *App) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Leading reports whether the App is running its scheduler now.
func (a *App) Leading() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.leading
}

// Start runs until ctx is done; it returns an error if the scheduler fails
// or leadership is lost.
func (a *App) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("scheduler")
	ctx = klog.NewContext(ctx, logger)
	le := a.opts.Config.LeaderElection
	var watchdog *leaderelection.HealthzAdaptor
	if le.LeaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	if a.opts.Address != "" {
		stop, err := a.serve(ctx, watchdog)
		if err != nil {
			return err
		}
		defer stop()
	}
	close(a.ready)
	if !le.LeaderElect {
		return a.run(ctx)
	}

	client, err := kubernetes.NewForConfig(a.clientConfig("leader-election"))
	if err != nil {
		return fmt.Errorf("scheduler: leader election client: %w", err)
	}
	return component.RunLeading(ctx, component.Election{
		Name: "scheduler", Work: "scheduling", Client: client,
		Namespace: le.ResourceNamespace, Lease: le.ResourceName, Identity: a.opts.Identity,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		WatchDog: watchdog, Recampaign: a.opts.Recampaign,
	}, a.run)
}

func (a *App) clientConfig(name string) *rest.Config {
	c := rest.CopyConfig(a.config)
	c.UserAgent = UserAgent + "/" + name
	c.QPS = a.opts.Config.QPS
	c.Burst = a.opts.Config.Burst
	if c.QPS == 0 {
		c.QPS, c.Burst = config.DefaultQPS, config.DefaultBurst
	}
	c.ContentType, c.AcceptContentTypes = a.opts.Config.ContentType, a.opts.Config.AcceptContentTypes
	if c.ContentType == "" {
		c.ContentType = config.DefaultContentType
	}
	return c
}

// run schedules until ctx is done, with fresh informers and state.
func (a *App) run(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(a.clientConfig("scheduler"))
	if err != nil {
		return fmt.Errorf("scheduler: client: %w", err)
	}
	events, err := kubernetes.NewForConfig(a.clientConfig("events"))
	if err != nil {
		return fmt.Errorf("scheduler: events client: %w", err)
	}
	var factory informers.SharedInformerFactory
	if a.opts.SharedInformers != nil {
		// Shutdown removes the scheduler's handlers; the informers run on.
		factory = a.opts.SharedInformers.Scope(true)
	} else {
		factory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(sharedinformers.StripManagedFields))
	}
	defer factory.Shutdown()
	// Shutdown waits for the informers, which stop only with ctx: cancel it
	// first (defers run last-in first-out) so an early error cannot hang here.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := a.opts.Config
	s, err := scheduler.New(ctx, client, factory, scheduler.Options{
		Profiles:          cfg.Profiles,
		Registry:          a.opts.Registry,
		Parallelism:       cfg.Parallelism,
		PodInitialBackoff: cfg.PodInitialBackoff,
		PodMaxBackoff:     cfg.PodMaxBackoff,
		Metrics:           a.metrics,
		EventClient:       events,
		Clock:             a.opts.Clock,
	})
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.leading = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.leading = false
		a.mu.Unlock()
	}()
	return s.Run(ctx)
}

func (a *App) serve(ctx context.Context, watchdog *leaderelection.HealthzAdaptor) (func(), error) {
	addr, stop, err := component.ServeEndpoints(ctx, "scheduler", a.opts.Address, component.Endpoints{
		Metrics: a.opts.Metrics, WatchDog: watchdog, Auth: a.opts.MetricsAuth, Profiling: a.opts.Profiling, TLS: a.opts.TLS,
	})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.addr = addr
	a.mu.Unlock()
	return stop, nil
}
