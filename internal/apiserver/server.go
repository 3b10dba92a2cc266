// Package apiserver serves the Kubernetes API over HTTPS: the handler chain
// (authentication, authorization seam, metrics), routing of /api and /apis
// paths to the generic REST handler of each registered resource, discovery,
// watch, patch, health and metrics endpoints. It is the only component that
// talks to etcd, through internal/storage.
package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/discovery"
	"github.com/skiff-sh/skiff/internal/apiserver/flowcontrol"
	"github.com/skiff-sh/skiff/internal/apiserver/health"
	"github.com/skiff-sh/skiff/internal/apiserver/metrics"
	"github.com/skiff-sh/skiff/internal/apiserver/openapi"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin"
	"github.com/skiff-sh/skiff/internal/apiserver/resourcemetrics"
	"github.com/skiff-sh/skiff/internal/storage"
)

// Config is what the API server needs to run.
type Config struct {
	// Etcd is a connected client; the server does not close it.
	Etcd *clientv3.Client
	// ClientCA verifies client certificates (X.509 authentication).
	ClientCA *x509.CertPool
	// ServingCert is the HTTPS certificate, unless GetServingCertificate
	// is set: then that gives it at each handshake (skiff server serves
	// pki/apiserver.crt through pki.CertificateFiles, so a certificate
	// renewed or replaced on disk is served without a restart).
	ServingCert           tls.Certificate
	GetServingCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// BindAddress and Port to listen on. Port 0 picks a free port (tests).
	BindAddress string
	Port        int
	// ServiceCIDR for ClusterIP allocation (default 10.43.0.0/16) and
	// NodePortRange (default 30000-32767).
	ServiceCIDR   string
	NodePortRange string
	// CompactionInterval is how often old etcd revisions are compacted
	// (default 5 minutes; negative disables).
	CompactionInterval time.Duration
	// Authenticator, when set, is used beside X.509 client certificates.
	Authenticator authn.Authenticator
	// Authorizer decides each authenticated request (default: allow every
	// authenticated user).
	Authorizer authz.Authorizer
	// AuthorizationModes, when Authorizer is nil, are the modes asked in
	// order (authorization.go: AlwaysAllow, AlwaysDeny, Node, RBAC, ABAC,
	// Webhook; default AlwaysAllow), after the system:masters superuser
	// check.
	AuthorizationModes []string
	// Authorization holds the ABAC policy file, the webhook's options, or
	// a structured AuthorizationConfiguration (authorization.go).
	Authorization AuthorizationOptions
	// Admission enables and disables admission plugins and configures
	// them (admissionconfig.go; zero: upstream's default-on set and
	// NodeRestriction).
	Admission AdmissionOptions
	// Registerer receives the server's metrics (default: a new registry).
	Registry *prometheus.Registry
	// WatchBookmarkInterval is how often watchers that allow bookmarks get
	// one (default 30s; tests shorten it).
	WatchBookmarkInterval time.Duration
	// Clock is the time of deletion timestamps, admission and the
	// background loops (default: the real clock; tests step a fake one).
	Clock clock.WithTicker
	// ReapInterval is how often objects whose graceful deletion is over
	// are removed (default 1s).
	ReapInterval time.Duration
	// IPRepairInterval is how often the ClusterIP repair loop runs
	// (default 10s), and IPLeakGracePeriod how old an IPAddress of a
	// missing Service must be before it is deleted (default upstream's
	// 60s); tests shorten both.
	IPRepairInterval, IPLeakGracePeriod time.Duration
	// TLSMinVersion (default TLS 1.2) and TLSCipherSuites (default Go's)
	// of the HTTPS server (--tls-min-version, --tls-cipher-suites).
	TLSMinVersion   uint16
	TLSCipherSuites []uint16
	// Audit, when set, writes the audit log (--audit-policy-file).
	Audit *audit.Auditor
	// Encryption encrypts the values of the resources it lists at rest
	// (--encryption-provider-config; nil: none).
	Encryption *storage.Encryption
	// ServiceAccounts configures service-account tokens (TokenRequest,
	// their authentication, TokenReview, OIDC discovery;
	// serviceaccounts.go); nil serves none of them.
	ServiceAccounts *ServiceAccountConfig
	// AllowPodsWithoutServiceAccount admits pods whose ServiceAccount does
	// not exist (upstream's ServiceAccount admission refuses them, and so
	// does `skiff server`; the test harness, whose tests mostly run no
	// serviceaccount controller, sets it).
	AllowPodsWithoutServiceAccount bool
	// KubeletClientTLS dials kubelets for pods/log, exec, attach,
	// portforward and nodes/proxy (see nodeproxy.go); nil answers them 503.
	KubeletClientTLS *tls.Config
	// Overload protection (overload.go; zero values are upstream's
	// defaults): RequestTimeout (60s, 504 after it), MinRequestTimeout
	// (1800s; watches last between it and twice it),
	// MaxRequestsInflight/MaxMutatingRequestsInflight (400/200; with API
	// Priority and Fairness their sum is the server's seats),
	// DisablePriorityAndFairness (use the max-in-flight limits alone),
	// HTTP2MaxStreamsPerConnection (100) and EtcdCallTimeout (30s).
	RequestTimeout               time.Duration
	MinRequestTimeout            time.Duration
	MaxRequestsInflight          int
	MaxMutatingRequestsInflight  int
	DisablePriorityAndFairness   bool
	HTTP2MaxStreamsPerConnection int
	EtcdCallTimeout              time.Duration
	// Aggregation, when set, gives API aggregation its front-proxy
	// identity and the extension-apiserver-authentication ConfigMap
	// (aggregation.go); without it remote APIServices are proxied with no
	// client certificate.
	Aggregation *AggregationConfig
	// WatchCache says which resources are served from memory (watchcache.go;
	// zero: every resource but Events, as upstream).
	WatchCache WatchCacheConfig
	// DisableProfiling stops serving Go's profiles under /debug/pprof/
	// (profiling.go); they are served by default, as kube-apiserver's
	// --profiling, to users allowed the non-resource URL.
	DisableProfiling bool
}

// Server is a running (or ready to run) API server.
type Server struct {
	cfg      Config
	codecs   *codecs
	handler  http.Handler
	ready    chan struct{}
	stopping chan struct{}
	addr     string
	metrics  *metrics.Metrics
	health   *health.Health
	disco    *discovery.Discovery
	openapi  *openapi.OpenAPI
	authn    authn.Authenticator
	authz    authz.Authorizer
	alloc    *allocator.Services
	// serviceAccounts is nil without Config.ServiceAccounts.
	serviceAccounts *serviceAccounts
	custom          *customResources // served for CustomResourceDefinitions
	aggregation     *aggregation     // APIServices and remote group versions (aggregation.go)

	resources []registry.Resource
	handlers  map[schema.GroupVersionResource]*resourceHandler
	cachers   []*storage.Cacher

	inProcessOnce  sync.Once // InProcessResource's index, made on first use
	inProcessKinds map[schema.GroupVersionKind]schema.GroupVersionResource

	kubelet kubeletClient
	proxy   proxyClient // pods/proxy, services/proxy (proxy.go)
	// flow limits requests (API Priority and Fairness, or max-in-flight);
	// apf is set when it is API Priority and Fairness.
	flow flowcontrol.Limiter
	apf  *flowcontrol.APF
	// components tells componentstatuses how the scheduler and the
	// controller manager are (SetComponentHealth).
	components *health.Components
	clock      clock.WithTicker
	admission  *admission.Chain
	// The loops Start runs beside serving.
	reaper    *reaper
	compactor *compactor
	ipRepair  *ipRepair
	ports     *portClaimer
	// resourceMetrics serves metrics.k8s.io while anyone reads it.
	resourceMetrics *resourcemetrics.Pipeline
}

// New builds the server; it has no side effects until Start.
func New(cfg Config) (*Server, error) {
	if cfg.Etcd == nil {
		return nil, errors.New("apiserver: an etcd client is required")
	}
	if cfg.ServiceCIDR == "" {
		cfg.ServiceCIDR = "10.43.0.0/16"
	}
	if cfg.NodePortRange == "" {
		cfg.NodePortRange = "30000-32767"
	}
	if cfg.CompactionInterval == 0 {
		cfg.CompactionInterval = 5 * time.Minute
	}
	if cfg.BindAddress == "" {
		cfg.BindAddress = "127.0.0.1"
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = time.Second
	}
	if cfg.IPRepairInterval == 0 {
		cfg.IPRepairInterval = ipRepairInterval
	}
	if cfg.IPLeakGracePeriod == 0 {
		cfg.IPLeakGracePeriod = ipLeakGracePeriod
	}
	cfg = withOverloadDefaults(cfg)
	c, err := newCodecs()
	if err != nil {
		return nil, err
	}
	alloc, err := allocator.NewServices(allocator.Options{ServiceCIDR: cfg.ServiceCIDR, NodePortRange: cfg.NodePortRange})
	if err != nil {
		return nil, fmt.Errorf("service allocator: %w", err)
	}
	s := &Server{
		cfg: cfg, codecs: c, ready: make(chan struct{}), stopping: make(chan struct{}),
		metrics:  metrics.New(cfg.Registry),
		alloc:    alloc,
		handlers: map[schema.GroupVersionResource]*resourceHandler{},
		clock:    cfg.Clock,
	}
	auths := []authn.Authenticator{authn.NewX509(cfg.ClientCA)}
	if cfg.ServiceAccounts != nil {
		if s.serviceAccounts, err = newServiceAccounts(cfg.ServiceAccounts, saObjects{r: reader{srv: s}}, s); err != nil {
			return nil, fmt.Errorf("service accounts: %w", err)
		}
		auths = append(auths, s.serviceAccounts.authn)
	}
	if cfg.Authenticator != nil {
		auths = append(auths, cfg.Authenticator)
	}
	s.authn = authn.Union(auths...)
	if s.authz, err = newAuthorizer(cfg, reader{srv: s}); err != nil {
		return nil, err
	}
	if s.admission, err = newAdmission(reader{srv: s}, cfg.Clock); err != nil {
		return nil, err
	}
	s.reaper = &reaper{clock: cfg.Clock, interval: cfg.ReapInterval}
	s.ipRepair = &ipRepair{srv: s, clock: cfg.Clock, interval: cfg.IPRepairInterval, grace: cfg.IPLeakGracePeriod}
	s.flow, s.apf = newFlowControl(cfg)
	s.compactor = &compactor{etcd: cfg.Etcd, clock: cfg.Clock, interval: cfg.CompactionInterval}
	s.resourceMetrics = resourcemetrics.New(kubeletMetrics{s: s}, cfg.Clock)
	s.components = health.NewComponents()
	s.resources = builtin.Resources(registry.Deps{
		CheckComponent: s.components.Check,
		Services:       alloc, Reader: reader{srv: s}, Authorizer: s.authz, CheckEtcd: s.checkEtcd,
		BindPod: s.bindPod, ResourceMetrics: s.resourceMetrics, ReviewToken: s.reviewToken(cfg.Authenticator),
	})
	// Resources stored in another version's format (Stored) are served
	// from that version's cache, converted on the way out: the stored
	// versions' caches come first.
	caches := map[string]*storage.Cacher{} // by storage prefix
	for _, pass := range []bool{false, true} {
		for _, res := range s.resources {
			if registry.IsVirtual(res) {
				if !pass {
					s.handlers[res.GroupVersion.WithResource(res.Resource)] = newResourceHandler(res, nil, c, s)
				}
				continue
			}
			if (res.Stored != nil) != pass {
				continue
			}
			s.addStored(res, caches)
		}
	}
	if err := s.cfg.WatchCache.check(s.resources); err != nil {
		return nil, err
	}
	// ClusterIPs as IPAddress objects, from every ServiceCIDR (ipaddress.go).
	alloc.Claimer, alloc.View = ipClaimer{srv: s}, ipClaimer{srv: s}
	// NodePorts in upstream's shared RangeAllocation (nodeports.go).
	s.ports = newPortClaimer(s, alloc.Ports)
	alloc.PortClaimer = s.ports
	s.custom = newCustomResources(s) // CRDs (customresources.go)
	s.disco = discovery.New(s.resources, discovery.VersionInfo(Version, "", ""))
	s.aggregation = newAggregation(s) // APIServices (aggregation.go)
	// Groups and versions in the order of their APIServices' priorities.
	s.disco.SetPriority(s.aggregation.agg.Priority)
	s.openapi = openapi.New(s.resources, Version)
	if err := s.openapi.Err(); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if err := s.buildFieldManagers(); err != nil {
		return nil, err
	}
	s.health = health.New(health.Options{
		Livez: []health.Check{{Name: "etcd", Fn: s.checkEtcd}},
		Readyz: []health.Check{{Name: "etcd-readiness", Fn: s.checkEtcd}, {Name: "informer-sync", Fn: s.checkCaches},
			{Name: "poststarthook/crd-informer-synced", Fn: s.custom.checkSynced}},
	})
	s.handler = s.buildChain()
	return s, nil
}

// addStored installs the handler of a resource kept in etcd, with its
// watch cache: its own, or for a resource stored in another version's
// format, a view of that version's cache (caches, by storage prefix).
func (s *Server) addStored(res registry.Resource, caches map[string]*storage.Cacher) {
	cfg := s.cfg
	gvk := res.GroupVersion.WithKind(res.Kind)
	name := res.Resource + groupSuffix(res.GroupVersion.Group)
	store := storage.NewStore(cfg.Etcd, storageCodec(res, gvk), res.New, name, storage.StoreOptions{Observer: s.metrics, TTL: res.TTLSeconds, CallTimeout: cfg.EtcdCallTimeout, Transformer: transformerFor(cfg.Encryption, res)})
	onCount := func(n int) { s.metrics.SetStorageObjects(name, int64(n)) }
	h := &resourceHandler{}
	var cacher *storage.Cacher
	if st := res.Stored; st != nil && caches[res.StoragePrefix] != nil {
		cacher = caches[res.StoragePrefix].ServeAs(store, servedVersion(res, st, onCount))
	} else {
		cacher = storage.NewCacher(store, "/registry/"+res.StoragePrefix+"/",
			func(o runtime.Object) (labels.Set, fields.Set, error) { return h.attrs(o) },
			storage.CacherOptions{BookmarkInterval: cfg.WatchBookmarkInterval, OnCount: onCount,
				Uncached: !cfg.WatchCache.cached(res.GroupVersion.WithResource(res.Resource).GroupResource())})
		s.cachers = append(s.cachers, cacher)
		if res.Stored == nil {
			caches[res.StoragePrefix] = cacher
		}
	}
	*h = *newResourceHandler(res, cacher, s.codecs, s)
	s.handlers[res.GroupVersion.WithResource(res.Resource)] = h
	if _, ok := res.Strategy.(registry.GracefulDeleter); ok {
		s.reaper.targets = append(s.reaper.targets, reapTarget{name: h.gr.String(), store: cacher, prefix: h.prefix()})
	}
}

// servedVersion serves a resource kept in another version's format from
// that version's cache.
func servedVersion(res registry.Resource, st *registry.StoredVersion, onCount func(int)) *storage.ServedVersion {
	gvk := res.GroupVersion.WithKind(res.Kind)
	v := &storage.ServedVersion{
		Name: gvk.GroupVersion().String(),
		Convert: func(stored runtime.Object) (runtime.Object, error) {
			obj := res.New()
			// FromStored may take over the object it is given: a copy.
			if err := st.FromStored(stored.DeepCopyObject(), obj); err != nil {
				return nil, err
			}
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			return obj, nil
		},
		OnCount: onCount,
	}
	if len(st.FieldLabels) > 0 {
		v.FieldLabel = func(name string) string {
			if stored, ok := st.FieldLabels[name]; ok {
				return stored
			}
			return name
		}
	}
	return v
}

// Version is the Kubernetes version Skiff serves.
const Version = "v1.37.2+skiff"

func groupSuffix(g string) string {
	if g == "" {
		return ""
	}
	return "." + g
}

// Handler is the full handler chain (for in-process use).
func (s *Server) Handler() http.Handler { return s.handler }

// Ready is closed once the server listens and its caches are synced.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the address it listens on, valid after Ready.
func (s *Server) Addr() string { return s.addr }

func (s *Server) checkEtcd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := s.cfg.Etcd.Get(ctx, "health", clientv3.WithCountOnly())
	return err
}

func (s *Server) checkCaches(ctx context.Context) error {
	for _, c := range s.cachers {
		select {
		case <-c.Ready():
		default:
			return errors.New("caches not synced")
		}
	}
	return nil
}

// Start serves until ctx is done, then shuts down and returns.
func (s *Server) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cctx, cancelCaches := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCaches()
	var wg sync.WaitGroup
	for _, c := range s.cachers {
		wg.Add(1)
		go func(c *storage.Cacher) {
			defer wg.Done()
			_ = c.Start(cctx)
		}(c)
	}
	defer wg.Wait()
	for _, c := range s.cachers {
		select {
		case <-c.Ready():
		case <-ctx.Done():
			cancelCaches()
			return nil
		}
	}
	if err := s.restore(ctx); err != nil {
		cancelCaches()
		return err
	}
	s.startFlowControl(ctx, cctx, &wg) // overload.go

	ln, err := net.Listen("tcp", net.JoinHostPort(s.cfg.BindAddress, strconv.Itoa(s.cfg.Port)))
	if err != nil {
		cancelCaches()
		return fmt.Errorf("listen: %w", err)
	}
	s.addr = ln.Addr().String()
	tlsConfig := &tls.Config{
		GetCertificate: s.cfg.GetServingCertificate,
		ClientAuth:     tls.VerifyClientCertIfGiven,
		ClientCAs:      s.cfg.ClientCA,
		MinVersion:     s.tlsMinVersion(),
		CipherSuites:   s.cfg.TLSCipherSuites,
		NextProtos:     []string{"h2", "http/1.1"},
	}
	if tlsConfig.GetCertificate == nil {
		tlsConfig.Certificates = []tls.Certificate{s.cfg.ServingCert}
	}
	hs := &http.Server{
		Handler:           s.handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 32 * time.Second, // upstream's: just under its request timeout bound
		IdleTimeout:       90 * time.Second,
		HTTP2:             http2Config(s.cfg.HTTP2MaxStreamsPerConnection),
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          nil,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.ServeTLS(ln, "", "") }()
	for _, c := range []interface{ Start(context.Context) error }{s.compactor, s.reaper, s.custom, s.resourceMetrics, s.aggregation, s.ipRepair} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Start(cctx)
		}()
	}
	close(s.ready)
	logger.Info("API server listening", "address", s.addr)

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	s.health.SetShuttingDown()
	close(s.stopping)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	cancelCaches()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// restore gives every strategy that keeps state beside the store
// (registry.Restorer: the service allocator) the stored objects, so a
// restart never hands out what is in use.
func (s *Server) restore(ctx context.Context) error {
	for _, h := range s.handlers {
		r, ok := h.res.Strategy.(registry.Restorer)
		if !ok || h.store == nil {
			continue
		}
		list := h.res.NewList()
		if err := h.store.List(ctx, h.prefix(), storage.ListOptions{ResourceVersion: "0"}, list); err != nil {
			return fmt.Errorf("list %s to restore: %w", h.gr, err)
		}
		if err := r.Restore(list); err != nil {
			return fmt.Errorf("restore %s: %w", h.gr, err)
		}
	}
	return s.ensureDefaultServiceCIDR(ctx)
}

// buildFieldManagers gives every stored resource its managedFields
// tracking, from the OpenAPI schemas (which say how lists merge).
func (s *Server) buildFieldManagers() error {
	defs, err := s.openapi.Definitions()
	if err != nil {
		return err
	}
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		return fmt.Errorf("server-side apply type converter: %w", err)
	}
	for _, h := range s.handlers {
		if h.store == nil {
			continue
		}
		fm, err := newFieldManagers(tc, s.codecs.scheme, h.gvk, h.writingSubresources())
		if err != nil {
			return fmt.Errorf("field manager for %s: %w", h.gr, err)
		}
		h.fields = fm
	}
	return nil
}
