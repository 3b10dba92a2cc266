// Package manager runs Skiff's controllers, the way kube-controller-manager
// runs upstream's: one client a controller (its user agent names it), one
// shared informer factory and one metadata informer factory for all of
// them, an event recorder a controller, optional leader election on a
// Lease, and /healthz and /metrics on a plain-HTTP address.
//
// The controllers it knows are listed in one place, Controllers (in
// controllers.go); --controllers picks among them with upstream's syntax.
// The sequence is: build every enabled controller (InitFuncs only ask for
// informers), start the informer factories, wait until every cache has
// synced, then call each controller's Start; the first error stops all.
//
// Work queue metrics use upstream's names (workqueue_depth,
// workqueue_adds_total, workqueue_queue_duration_seconds,
// workqueue_work_duration_seconds, workqueue_unfinished_work_seconds,
// workqueue_longest_running_processor_seconds, workqueue_retries_total,
// label name = queue name = controller name). client-go's
// workqueue.SetProvider is process-global and takes effect only once: the
// first Manager started in a process sets it, on its Options.Metrics
// registry, and later managers in the same process (tests) publish their
// queue metrics through that first provider. When a library linked into
// the binary set it first (k8s.io/component-base's workqueue metrics
// register themselves from an init function, pulled in by
// k8s.io/apiserver packages), the queue metrics land in component-base's
// legacy registry under the same names: /metrics serves that registry too.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/component"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/cronjob"
	"github.com/skiff-sh/skiff/internal/controller/nodeipam"
	"github.com/skiff-sh/skiff/internal/controller/nodelifecycle"
	"github.com/skiff-sh/skiff/internal/controller/podowner"
	"github.com/skiff-sh/skiff/internal/sharedinformers"
)

// Defaults, upstream's where upstream has one.
const (
	DefaultSecurePort     = 10257 // kube-controller-manager's
	DefaultLeaseNamespace = "kube-system"
	DefaultLeaseName      = "kube-controller-manager"
	DefaultLeaseDuration  = 15 * time.Second
	DefaultRenewDeadline  = 10 * time.Second
	DefaultRetryPeriod    = 2 * time.Second
	DefaultResyncPeriod   = 12 * time.Hour
	// DefaultQPS and DefaultBurst are higher than upstream's 20/30 so that
	// a Deployment of a thousand replicas does not wait on the client's
	// rate limiter; --kube-api-qps/--kube-api-burst set them.
	DefaultQPS   = 100
	DefaultBurst = 200
	// DefaultContentType is upstream's --kube-api-content-type: the typed
	// clients send and read protobuf (the dynamic and metadata clients
	// choose their own).
	DefaultContentType = runtime.ContentTypeProtobuf
	// UserAgent prefixes each controller's client user agent.
	UserAgent = "skiff-controller-manager"
)

// DefaultControllerOptions are upstream's controller durations and rates.
func DefaultControllerOptions() controllercontext.Options {
	return controllercontext.Options{
		NodeMonitorGracePeriod:    50 * time.Second,
		NodeMonitorPeriod:         5 * time.Second,
		NodeStartupGracePeriod:    60 * time.Second,
		NodeEvictionRate:          0.1,
		SecondaryNodeEvictionRate: 0.01,
		UnhealthyZoneThreshold:    0.55,
		LargeClusterSizeThreshold: 50,
		TerminatedPodGCThreshold:  12500,
		ConcurrentSyncs:           map[string]int{},
		ClusterCIDR:               nodeipam.DefaultClusterCIDR.String(),
		NodeCIDRMaskSize:          nodeipam.DefaultNodeCIDRMaskSize,
	}
}

// Options configure a Manager; the zero value means the defaults.
type Options struct {
	// Controllers selects the controllers to run (default "*").
	Controllers Selection
	// InitFuncs are the known controllers (default Controllers()).
	InitFuncs map[string]controllercontext.InitFunc
	// LeaderElect turns on leader election on the Lease
	// LeaseNamespace/LeaseName with the given durations.
	LeaderElect bool
	// Recampaign: a lost leadership stops the controllers and campaigns
	// again instead of ending Start (`skiff server`; see
	// component.Election).
	Recampaign     bool
	LeaseNamespace string
	LeaseName      string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	// Identity is this manager's holder identity (default hostname_uuid).
	Identity string
	// Address serves /healthz and /metrics, over HTTPS with TLS (the
	// secure port) or plain HTTP without; empty serves nothing
	// (in-process in `skiff server`, whose API server serves the shared
	// registry on /metrics).
	Address string
	TLS     *tls.Config
	// MetricsAuth, when set, guards /metrics with delegated authentication
	// and authorization (TokenReview, SubjectAccessReview), as upstream's
	// secure port does; `skiff controller-manager` sets it.
	MetricsAuth *component.Auth
	// Metrics receives the work queue metrics and is served on /metrics
	// (default a new registry).
	Metrics *prometheus.Registry
	// QPS and Burst of each controller's client.
	QPS   float32
	Burst int
	// ContentType of the controllers' requests, and of the answers they
	// ask for (default DefaultContentType).
	ContentType string
	// ResyncPeriod of the shared informers (default 12h).
	ResyncPeriod time.Duration
	// SharedInformers, when set, holds the typed informers instead of a
	// factory of the manager's own: `skiff server` shares one with its
	// scheduler, so each pod and node is cached once. Prepare it with
	// PrepareInformers before anything starts it.
	SharedInformers *sharedinformers.Process
	// UseServiceAccountCredentials runs each controller's clients as its
	// own kube-system service account (upstream's
	// --use-service-account-credentials; ServiceAccountName), with tokens
	// requested by the manager's identity; the shared informers, events and
	// leader election keep the manager's identity. Off: every controller
	// uses the manager's identity.
	UseServiceAccountCredentials bool
	// Controller is handed to every controller.
	Controller controllercontext.Options
	// Clock is handed to every controller (default the real clock).
	Clock clock.WithTicker
}

// Manager runs the enabled controllers.
type Manager struct {
	config *rest.Config
	opts   Options
	ready  chan struct{}

	mu   sync.Mutex
	addr string
}

// New validates the options; it has no side effects until Start.
func New(config *rest.Config, opts Options) (*Manager, error) {
	if config == nil {
		return nil, errors.New("controller manager: a client config is required")
	}
	if opts.InitFuncs == nil {
		opts.InitFuncs = Controllers()
	}
	if len(opts.Controllers) == 0 {
		opts.Controllers = Selection{"*"}
	}
	if _, err := ParseSelection(opts.Controllers, Names(opts.InitFuncs)); err != nil {
		return nil, fmt.Errorf("controller manager: --controllers: %w", err)
	}
	if opts.LeaseNamespace == "" {
		opts.LeaseNamespace = DefaultLeaseNamespace
	}
	if opts.LeaseName == "" {
		opts.LeaseName = DefaultLeaseName
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.RenewDeadline <= 0 {
		opts.RenewDeadline = DefaultRenewDeadline
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if opts.LeaderElect && opts.LeaseDuration <= opts.RenewDeadline {
		return nil, fmt.Errorf("controller manager: --leader-elect-lease-duration (%v) must be greater than --leader-elect-renew-deadline (%v)", opts.LeaseDuration, opts.RenewDeadline)
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
	if opts.QPS == 0 {
		opts.QPS = DefaultQPS
	}
	if opts.ContentType == "" {
		opts.ContentType = DefaultContentType
	}
	if opts.Burst == 0 {
		opts.Burst = DefaultBurst
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{config: rest.CopyConfig(config), opts: opts, ready: make(chan struct{})}, nil
}

// Names are the sorted names of a registry.
func Names(funcs map[string]controllercontext.InitFunc) []string {
	names := make([]string, 0, len(funcs))
	for n := range funcs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Enabled are the names of the controllers this manager runs, sorted.
func (m *Manager) Enabled() []string {
	var out []string
	for _, n := range Names(m.opts.InitFuncs) {
		if m.opts.Controllers.Enabled(n, false) {
			out = append(out, n)
		}
	}
	return out
}

// Ready is closed once the manager serves /healthz (if it has an address)
// and has begun to run or to wait for leadership.
func (m *Manager) Ready() <-chan struct{} { return m.ready }

// Addr is the address /healthz and /metrics listen on, once Ready.
func (m *Manager) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// Start runs the manager until ctx is done and returns the first fatal
// error: a controller that fails to build or returns an error, or lost
// leadership.
func (m *Manager) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("controller-manager")
	ctx = klog.NewContext(ctx, logger)
	provider, err := newWorkqueueMetrics(registerer{m.opts.Metrics})
	if err != nil {
		return fmt.Errorf("controller manager: metrics: %w", err)
	}
	workqueue.SetProvider(provider) // process-global; only the first call counts

	var watchdog *leaderelection.HealthzAdaptor
	if m.opts.LeaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	if m.opts.Address != "" {
		stop, err := m.serve(ctx, watchdog)
		if err != nil {
			return err
		}
		defer stop()
	}
	close(m.ready)

	if !m.opts.LeaderElect {
		return m.run(ctx)
	}
	return m.runLeading(ctx, watchdog)
}

// legacyWorkqueue gathers the workqueue_* families of component-base's
// legacy registry (only those: its process and Go collectors would clash
// with the served registry's own).
type legacyWorkqueue struct{}

func (legacyWorkqueue) Gather() ([]*dto.MetricFamily, error) {
	fams, err := legacyregistry.DefaultGatherer.Gather()
	out := fams[:0]
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "workqueue_") {
			out = append(out, f)
		}
	}
	return out, err
}

func (m *Manager) serve(ctx context.Context, watchdog *leaderelection.HealthzAdaptor) (func(), error) {
	addr, stop, err := component.ServeEndpoints(ctx, "controller manager", m.opts.Address, component.Endpoints{
		Metrics: prometheus.Gatherers{m.opts.Metrics, legacyWorkqueue{}}, WatchDog: watchdog, Auth: m.opts.MetricsAuth, TLS: m.opts.TLS,
	})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.addr = addr
	m.mu.Unlock()
	return stop, nil
}

func (m *Manager) runLeading(ctx context.Context, watchdog *leaderelection.HealthzAdaptor) error {
	client, err := kubernetes.NewForConfig(m.clientConfig("leader-election"))
	if err != nil {
		return fmt.Errorf("controller manager: leader election client: %w", err)
	}
	return component.RunLeading(ctx, component.Election{
		Name: "controller manager", Work: "controllers", Client: client,
		Namespace: m.opts.LeaseNamespace, Lease: m.opts.LeaseName, Identity: m.opts.Identity,
		LeaseDuration: m.opts.LeaseDuration, RenewDeadline: m.opts.RenewDeadline, RetryPeriod: m.opts.RetryPeriod,
		WatchDog: watchdog, Recampaign: m.opts.Recampaign,
	}, m.run)
}

func (m *Manager) clientConfig(name string) *rest.Config {
	return m.tune(rest.CopyConfig(m.config), name)
}

// tune gives c the user agent of the client name and the manager's rates
// and content type.
func (m *Manager) tune(c *rest.Config, name string) *rest.Config {
	c.UserAgent = UserAgent + "/" + name
	c.QPS = m.opts.QPS
	c.Burst = m.opts.Burst
	c.ContentType, c.AcceptContentTypes = m.opts.ContentType, ""
	return c
}

// controllerConfig is the client config of one controller: its service
// account's when creds is set and the controller has one, else the
// manager's own.
func (m *Manager) controllerConfig(name string, creds *accountCredentials) *rest.Config {
	account, ok := ServiceAccountName(name)
	if creds == nil || !ok {
		return m.clientConfig(name)
	}
	return m.tune(creds.config(account), name)
}

// PrepareInformers adds to a factory that others share (before it
// starts) the indexes the controllers add to their informers, which only
// an informer that has not started can take.
func PrepareInformers(f informers.SharedInformerFactory) error {
	pods := f.Core().V1().Pods().Informer()
	return errors.Join(
		podowner.AddIndex(pods),
		nodelifecycle.AddPodIndex(pods),
		cronjob.AddJobIndex(f.Batch().V1().Jobs().Informer()),
	)
}

// run builds, syncs and starts the enabled controllers, and blocks until
// ctx is done or one fails.
func (m *Manager) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Both factories drop managedFields from what they cache, as
	// kube-controller-manager's do.
	var factory informers.SharedInformerFactory
	if m.opts.SharedInformers != nil {
		// Shutdown removes the controllers' handlers; the informers run on.
		factory = m.opts.SharedInformers.Scope(false)
	} else {
		shared, err := kubernetes.NewForConfig(m.clientConfig("shared-informers"))
		if err != nil {
			return fmt.Errorf("controller manager: informer client: %w", err)
		}
		factory = informers.NewSharedInformerFactoryWithOptions(shared, m.opts.ResyncPeriod, informers.WithTransform(sharedinformers.StripManagedFields))
	}
	metaShared, err := metadata.NewForConfig(m.clientConfig("shared-informers"))
	if err != nil {
		return fmt.Errorf("controller manager: metadata informer client: %w", err)
	}
	metaFactory := metadatainformer.NewSharedInformerFactoryWithOptions(metaShared, m.opts.ResyncPeriod, metadatainformer.WithTransform(sharedinformers.StripManagedFields))
	defer factory.Shutdown()
	defer metaFactory.Shutdown()

	events, err := kubernetes.NewForConfig(m.clientConfig("events"))
	if err != nil {
		return fmt.Errorf("controller manager: events client: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	defer broadcaster.Shutdown()

	var creds *accountCredentials
	if m.opts.UseServiceAccountCredentials {
		tokens, err := kubernetes.NewForConfig(m.clientConfig("tokens-client"))
		if err != nil {
			return fmt.Errorf("controller manager: tokens client: %w", err)
		}
		creds = newAccountCredentials(tokens, m.config, m.opts.Clock)
	}

	type running struct {
		name string
		c    controllercontext.Controller
	}
	var controllers []running
	for _, name := range m.Enabled() {
		cfg := m.controllerConfig(name, creds)
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("controller %s: client: %w", name, err)
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("controller %s: dynamic client: %w", name, err)
		}
		meta, err := metadata.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("controller %s: metadata client: %w", name, err)
		}
		cc := controllercontext.Context{
			Client:            client,
			Dynamic:           dyn,
			Metadata:          meta,
			Informers:         factory,
			MetadataInformers: metaFactory,
			Recorder:          broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName(name)}),
			Clock:             m.opts.Clock,
			Options:           m.opts.Controller,
		}
		c, err := m.opts.InitFuncs[name](klog.NewContext(ctx, logger.WithValues("controller", name)), cc)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		if c == nil {
			logger.Info("Controller disabled by its own choice", "controller", name)
			continue
		}
		controllers = append(controllers, running{name, c})
	}

	start := time.Now()
	factory.Start(ctx.Done())
	metaFactory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return cacheError(ctx, typ.String())
		}
	}
	for gvr, ok := range metaFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return cacheError(ctx, gvr.String())
		}
	}
	logger.V(1).Info("Informer caches synced", "duration", time.Since(start))

	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for _, r := range controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logger.V(1).Info("Starting controller", "controller", r.name)
			err := r.c.Start(klog.NewContext(ctx, logger.WithValues("controller", r.name)))
			if err != nil && ctx.Err() == nil {
				errOnce.Do(func() { firstErr = fmt.Errorf("controller %s: %w", r.name, err) })
				cancel()
			}
		}()
	}
	logger.Info("Started controllers", "controllers", len(controllers))
	<-ctx.Done()
	wg.Wait()
	return firstErr
}

func cacheError(ctx context.Context, what string) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("controller manager: cache of %s did not sync", what)
}

// registerer registers a collector, or reuses the one already registered
// under the same name (a manager restarted in the same process).
type registerer struct{ reg prometheus.Registerer }

func (r registerer) Register(c prometheus.Collector) error {
	err := r.reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return nil
	}
	return err
}

func (r registerer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r registerer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }
