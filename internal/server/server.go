// Package server wires the components of `skiff server` together: data
// directory, PKI, etcd, API server, bootstrap objects, the controller
// manager and the scheduler, started in order and stopped in reverse order
// when the context ends.
package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/agent"
	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/controller/garbagecollector"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/pki"
	schedapp "github.com/skiff-sh/skiff/internal/scheduler/app"
	schedconfig "github.com/skiff-sh/skiff/internal/scheduler/config"
	schedplugins "github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/server/bootstrap"
	"github.com/skiff-sh/skiff/internal/server/join"
	"github.com/skiff-sh/skiff/internal/server/lifecycle"
	"github.com/skiff-sh/skiff/internal/sharedinformers"
)

// Defaults.
const (
	DefaultDataDir      = "/var/lib/skiff"
	DefaultBindAddress  = "127.0.0.1"
	DefaultPort         = 6443
	DefaultReadyTimeout = 60 * time.Second
)

// Config is the validated configuration of `skiff server`.
type Config struct {
	// DataDir holds etcd, pki and the admin kubeconfig.
	DataDir string
	// BindAddress and Port are where the API server listens.
	BindAddress string
	Port        int
	// EtcdServers, when set, are an external etcd cluster's client URLs and
	// nothing is embedded.
	EtcdServers []string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are the TLS files for an
	// external cluster (--etcd-cafile, --etcd-certfile, --etcd-keyfile).
	// The embedded member always uses mutual TLS with pki/etcd.
	EtcdCAFile   string
	EtcdCertFile string
	EtcdKeyFile  string
	// EtcdClientPort and EtcdPeerPort are the embedded member's loopback
	// ports (0 picks a free one).
	EtcdClientPort int
	EtcdPeerPort   int
	// DisableAgent skips the node agent; Agent tunes it (its DataDir and
	// RESTConfig are the server's).
	DisableAgent bool
	Agent        agent.Config
	// DisableControllerManager and DisableScheduler leave the in-process
	// controllers and scheduler out (k3s's --disable-controller-manager and
	// --disable-scheduler), for running upstream's or one's own against
	// this server.
	DisableControllerManager bool
	DisableScheduler         bool
	// ReadyTimeout bounds each start step and the bootstrap (default 60 s).
	ReadyTimeout time.Duration
	// Out receives the human-readable start-up summary (default stderr).
	Out io.Writer
	// Controllers selects the in-process controllers (default "*") and
	// ControllerOptions tunes them (default upstream's durations).
	Controllers       manager.Selection
	ControllerOptions *manager.Options
	// CommandName is how the user invoked skiff (e.g. bin/skiff), for the
	// command the summary suggests (default "skiff").
	CommandName string
	// SchedulerConfig configures the in-process scheduler (profiles,
	// plugins, their args, leader election), as decoded from a
	// KubeSchedulerConfiguration file; nil means the default profile. Its
	// clientConnection is not used: the scheduler talks to this server.
	SchedulerConfig *schedconfig.Config
	// Services configures cluster DNS and the load-balancer allocator
	// (internal/server/services.go).
	Services ServicesConfig
	// Security: static tokens and OIDC (security.go).
	Security SecurityConfig
	// Overload: the API server's timeouts and flow control (overload.go).
	Overload OverloadConfig
	// WatchCache: which resources the API server serves from memory.
	WatchCache apiserver.WatchCacheConfig
	// DisableProfiling is --profiling=false: the API server serves no
	// /debug/pprof/.
	DisableProfiling bool
	// AuthorizationModes are the API server's (--authorization-mode; empty:
	// AlwaysAllow). The bootstrap RBAC policy is reconciled at every start.
	AuthorizationModes []string
	// Authorization: the ABAC policy, the webhook authorizer or a
	// structured AuthorizationConfiguration (apiserver.AuthorizationOptions).
	Authorization apiserver.AuthorizationOptions
	// Admission: plugins on and off, and their configuration.
	Admission apiserver.AdmissionOptions
	// ServiceAccounts configures service-account tokens (serviceaccounts.go).
	ServiceAccounts ServiceAccountsConfig
}

// Paths inside the data directory.
func PKIDir(dataDir string) string  { return filepath.Join(dataDir, "pki") }
func EtcdDir(dataDir string) string { return filepath.Join(dataDir, "etcd") }
func AdminKubeconfigPath(dataDir string) string {
	return filepath.Join(dataDir, pki.AdminKubeconfigFile)
}

// ClientHost is the host clients on this machine use to reach an API server
// bound to bindAddress.
func ClientHost(bindAddress string) string {
	ip := net.ParseIP(bindAddress)
	if bindAddress == "" || (ip != nil && (ip.IsUnspecified() || ip.IsLoopback())) {
		return "127.0.0.1"
	}
	return bindAddress
}

// Run starts the control plane and blocks until ctx is done or a component
// fails; then it stops the API server, then etcd.
func Run(ctx context.Context, cfg Config) (err error) {
	// Cancelled while a component was still starting (a slow containerd, a
	// Lease not yet won): that is a clean stop, not a failure. Registered
	// first, so it sees the error after every other deferred stop.
	defer func() {
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
	}()
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.Out == nil {
		cfg.Out = os.Stderr
	}
	if cfg.CommandName == "" {
		cfg.CommandName = "skiff"
	}
	logger := klog.FromContext(ctx)
	start := time.Now()

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	bundle, err := pki.Ensure(PKIDir(cfg.DataDir), pki.Options{BindAddress: cfg.BindAddress})
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}

	etcdOpts := etcd.Options{
		Dir:        EtcdDir(cfg.DataDir),
		ClientPort: cfg.EtcdClientPort,
		PeerPort:   cfg.EtcdPeerPort,
		Servers:    cfg.EtcdServers,
		Client:     etcd.ClientTLS{CAFile: cfg.EtcdCAFile, CertFile: cfg.EtcdCertFile, KeyFile: cfg.EtcdKeyFile},
	}
	if len(cfg.EtcdServers) == 0 {
		// The embedded member talks only mutual TLS, with its own CA.
		files, err := pki.EnsureEtcd(PKIDir(cfg.DataDir), pki.Options{})
		if err != nil {
			return fmt.Errorf("pki: %w", err)
		}
		etcdOpts.Member = &etcd.MemberTLS{CAFile: files.CA, ServerCertFile: files.ServerCert, ServerKeyFile: files.ServerKey, PeerCertFile: files.PeerCert, PeerKeyFile: files.PeerKey}
		etcdOpts.Client = etcd.ClientTLS{CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey}
	}
	store := etcd.New(etcdOpts)
	etcdHandle, err := lifecycle.Launch(ctx, "etcd", store, cfg.ReadyTimeout)
	if err != nil {
		return err
	}
	defer func() {
		logger.V(1).Info("Stopping etcd")
		if stopErr := etcdHandle.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	logger.V(1).Info("etcd ready", "endpoints", store.Endpoints())

	// One registry: the API server serves it on /metrics, with the
	// controllers' work queue metrics in it, and the Go runtime's and the
	// process's (go_goroutines, process_open_fds, ...), as upstream's.
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	kubeletTLS, err := bundle.KubeletClientTLS(pki.Options{})
	if err != nil {
		return err
	}
	// API aggregation's front proxy (pki/front-proxy-*).
	frontProxy, err := bundle.EnsureFrontProxy(pki.Options{})
	if err != nil {
		return err
	}
	frontProxyClient, err := pki.FileClientCertificate(filepath.Join(PKIDir(cfg.DataDir), pki.FrontProxyClientCertFile), filepath.Join(PKIDir(cfg.DataDir), pki.FrontProxyClientKeyFile))
	if err != nil {
		return err
	}
	// Joining nodes: bootstrap tokens, and the CA sent with the serving
	// certificate so an agent can check it by its token (internal/server/join).
	joiner := join.New(bundle.CA.Raw)
	saConfig, err := apiServiceAccounts(cfg.ServiceAccounts, bundle)
	if err != nil {
		return err
	}
	// The serving certificate is read from its files and reloaded when they
	// change (renewed by this server, or replaced by hand).
	serving, err := pki.NewCertificateFiles("serving-cert", filepath.Join(PKIDir(cfg.DataDir), pki.ServingCertFile), filepath.Join(PKIDir(cfg.DataDir), pki.ServingKeyFile), bundle.CA.Raw)
	if err != nil {
		return err
	}
	servingHandle, err := lifecycle.Launch(ctx, "serving-cert", serving, cfg.ReadyTimeout)
	if err != nil {
		return err
	}
	defer func() { _ = servingHandle.Stop() }()
	api, err := newAPIServer(cfg.Security, cfg.DataDir, cfg.Overload.applyTo(apiserver.Config{
		Registry:              registry,
		Etcd:                  store.Client(),
		ClientCA:              bundle.CAPool,
		GetServingCertificate: serving.GetCertificate, // with the CA in the chain, for joining agents (join.ServingCert)
		Authenticator:         joiner.Authenticator(),
		BindAddress:           cfg.BindAddress,
		Port:                  cfg.Port,
		KubeletClientTLS:      kubeletTLS,
		Aggregation:           &apiserver.AggregationConfig{ProxyClientCert: frontProxy.Client, GetProxyClientCertificate: frontProxyClient, RequestHeaderCAPEM: frontProxy.CAPEM, ClientCAPEM: bundle.CAPEM},
		AuthorizationModes:    cfg.AuthorizationModes,
		Authorization:         cfg.Authorization,
		Admission:             cfg.Admission,
		ServiceAccounts:       saConfig,
		DisableProfiling:      cfg.DisableProfiling,
		WatchCache:            cfg.WatchCache,
	}))
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	apiHandle, err := lifecycle.Launch(ctx, "apiserver", api, cfg.ReadyTimeout)
	if err != nil {
		return err
	}
	// Deferred calls run in reverse: the API server stops before etcd.
	defer func() {
		logger.V(1).Info("Stopping API server")
		if stopErr := apiHandle.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()

	port := ListenPort(api.Addr(), cfg.Port)
	logger.V(1).Info("API server ready", "addr", api.Addr())
	serverURL := pki.ServerURL(ClientHost(cfg.BindAddress), port)
	kubeconfig := AdminKubeconfigPath(cfg.DataDir)
	if err := bundle.WriteAdminKubeconfig(kubeconfig, serverURL); err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}

	// The admin's client reads admin.crt from its file, so it takes up the
	// certificate certRenewal renews.
	client, err := kubernetes.NewForConfig(bundle.ClientRESTConfigFiles(serverURL, "admin"))
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	renewalHandle, err := lifecycle.Launch(ctx, "certificate-renewal", newCertRenewal(cfg.DataDir, serverURL), cfg.ReadyTimeout)
	if err != nil {
		return err
	}
	defer func() { _ = renewalHandle.Stop() }()
	bootCtx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	err = bootstrap.Run(bootCtx, client, bootstrap.Options{Port: port, EndpointIP: bootstrap.AdvertiseAddress(cfg.BindAddress)})
	cancel()
	if err != nil {
		return err
	}
	if err := reconcilePolicy(ctx, client, cfg.ReadyTimeout, !useServiceAccountCredentials(cfg)); err != nil {
		return err
	}
	if err := ensureRuntimeClasses(ctx, client, agentRuntimes(cfg)); err != nil {
		return err
	}
	if _, err := joiner.Ensure(ctx, client, filepath.Join(cfg.DataDir, join.TokenFile)); err != nil {
		return fmt.Errorf("join token: %w", err)
	}

	// Each component talks to the API server under its own identity
	// (identities.go), with the bootstrap policy's least privilege.
	cmConfig, err := identityConfig(bundle, serverURL, "kube-controller-manager", pki.ControllerManagerUser, nil)
	if err != nil {
		return err
	}
	// The controller manager and the scheduler read one cache of each
	// type when both run here (the controller manager's identity lists and
	// watches for both: it may read everything).
	var shared *sharedinformers.Process
	if !cfg.DisableControllerManager && !cfg.DisableScheduler {
		resync := manager.DefaultResyncPeriod
		if cfg.ControllerOptions != nil && cfg.ControllerOptions.ResyncPeriod > 0 {
			resync = cfg.ControllerOptions.ResyncPeriod
		}
		if shared, err = newSharedInformers(ctx, cmConfig, resync, api); err != nil {
			return err
		}
		// Deferred first, so it runs last: after both components have stopped.
		defer shared.Shutdown()
	}
	var cmDone <-chan struct{} // nil, never ready, when disabled
	var cmHandle *lifecycle.Handle
	if cfg.DisableControllerManager {
		logger.V(1).Info("Controller manager disabled")
	} else {
		if cmHandle, err = launchControllerManager(ctx, cfg, cmConfig, registry, shared); err != nil {
			return err
		}
		cmDone = cmHandle.Done()
		api.SetComponentHealth("controller-manager", runningCheck(cmHandle)) // componentstatuses
		// Deferred: the controllers stop before the API server.
		defer func() {
			logger.V(1).Info("Stopping controller manager")
			if stopErr := cmHandle.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}()
	}

	schedConfig, err := identityConfig(bundle, serverURL, "kube-scheduler", pki.SchedulerUser, nil)
	if err != nil {
		return err
	}
	var schedDone <-chan struct{} // nil, never ready, when disabled
	var schedHandle *lifecycle.Handle
	if cfg.DisableScheduler {
		logger.V(1).Info("Scheduler disabled")
	} else {
		if schedHandle, err = launchScheduler(ctx, cfg, schedConfig, registry, shared); err != nil {
			return err
		}
		schedDone = schedHandle.Done()
		api.SetComponentHealth("scheduler", runningCheck(schedHandle)) // componentstatuses
		// Deferred: the scheduler stops before the API server.
		defer func() {
			logger.V(1).Info("Stopping scheduler")
			if stopErr := schedHandle.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}()
	}

	svcHandles, err := launchServices(ctx, cfg.Services, serviceIdentities(bundle, serverURL), api, bootstrap.AdvertiseAddress(cfg.BindAddress), cfg.ReadyTimeout)
	if err != nil {
		return err
	}
	// Deferred: cluster DNS and the load-balancer allocator stop first.
	defer func() {
		for i := len(svcHandles) - 1; i >= 0; i-- {
			if stopErr := svcHandles[i].Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()

	fmt.Fprintf(cfg.Out, "Skiff is ready in %v: API server at %s.\n", time.Since(start).Round(time.Millisecond), serverURL)
	fmt.Fprintf(cfg.Out, "Admin kubeconfig: %s\n", kubeconfig)
	if cfg.DataDir == DefaultDataDir {
		fmt.Fprintf(cfg.Out, "Try: %s kubectl get namespaces\n", cfg.CommandName)
	} else {
		fmt.Fprintf(cfg.Out, "Try: %s kubectl --kubeconfig %s get namespaces\n", cfg.CommandName, kubeconfig)
	}
	agentDone := make(<-chan struct{})
	if cfg.DisableAgent {
		logger.V(1).Info("Node agent disabled")
	} else {
		nodeConfig, idErr := identityConfig(bundle, serverURL, "kubelet-client", pki.NodeUser(nodeName(cfg)), []string{pki.NodesGroup})
		if idErr != nil {
			return idErr
		}
		agentHandle, launchErr := launchAgent(ctx, cfg, nodeConfig)
		if launchErr != nil {
			return launchErr
		}
		// Deferred: the agent stops first (its containers keep running).
		defer func() {
			if stopErr := agentHandle.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}()
		agentDone = agentHandle.Done()
		fmt.Fprintf(cfg.Out, "Node agent ready: node %q.\n", nodeName(cfg))
	}

	select {
	case <-ctx.Done():
		logger.V(1).Info("Shutting down")
		return nil
	case <-apiHandle.Done():
		return fmt.Errorf("stopped unexpectedly: %w", orStopped(apiHandle.Err(), "apiserver"))
	case <-etcdHandle.Done():
		return fmt.Errorf("stopped unexpectedly: %w", orStopped(etcdHandle.Err(), "etcd"))
	case <-cmDone:
		return fmt.Errorf("stopped unexpectedly: %w", orStopped(cmHandle.Err(), "controller-manager"))
	case <-schedDone:
		return fmt.Errorf("stopped unexpectedly: %w", orStopped(schedHandle.Err(), "scheduler"))
	case <-agentDone:
		return fmt.Errorf("stopped unexpectedly: node agent exited")
	}
}

// launchControllerManager starts the controllers in process, once the API
// server is ready and bootstrapped. They publish their metrics in the API
// server's registry and open no port of their own (so a separate `skiff
// controller-manager` can still take 10257). Leader election on the Lease
// kube-system/kube-controller-manager is on, with an identity that is
// stable for this host and data directory: a restarted server takes its
// Lease back at once, and servers sharing an external etcd elect one.
func launchControllerManager(ctx context.Context, cfg Config, restConfig *rest.Config, registry *prometheus.Registry, shared *sharedinformers.Process) (*lifecycle.Handle, error) {
	opts := manager.Options{Controller: manager.DefaultControllerOptions()}
	if cfg.ControllerOptions != nil {
		opts = *cfg.ControllerOptions
	}
	if len(cfg.Controllers) > 0 {
		opts.Controllers = cfg.Controllers
	}
	opts.Metrics = registry
	opts.Address = ""
	opts.SharedInformers = shared
	if len(opts.Controller.RootCAPEM) == 0 {
		// Published as kube-root-ca.crt in every namespace.
		opts.Controller.RootCAPEM = restConfig.CAData
	}
	if opts.Controller.ClusterSigningCertFile == "" {
		// Signs the certificates of joining nodes (csrsigning).
		opts.Controller.ClusterSigningCertFile = filepath.Join(PKIDir(cfg.DataDir), pki.CACertFile)
		opts.Controller.ClusterSigningKeyFile = filepath.Join(PKIDir(cfg.DataDir), pki.CAKeyFile)
	}
	if opts.Controller.ServiceAccountPrivateKeyFile == "" {
		// Signs the legacy tokens of Secrets that ask for one.
		opts.Controller.ServiceAccountPrivateKeyFile = cfg.ServiceAccounts.SigningKeyFile
		if opts.Controller.ServiceAccountPrivateKeyFile == "" {
			opts.Controller.ServiceAccountPrivateKeyFile = filepath.Join(PKIDir(cfg.DataDir), pki.ServiceAccountKeyFile)
		}
	}
	opts.UseServiceAccountCredentials = useServiceAccountCredentials(cfg)
	opts.LeaderElect = true
	opts.Recampaign = true // a lost term must not stop the server
	if opts.Identity == "" {
		host, _ := os.Hostname()
		sum := sha256.Sum256([]byte(cfg.DataDir))
		opts.Identity = fmt.Sprintf("%s_skiff-server-%x", host, sum[:4])
	}
	cm, err := manager.New(restConfig, opts)
	if err != nil {
		return nil, fmt.Errorf("controller manager: %w", err)
	}
	return lifecycle.Launch(ctx, "controller-manager", cm, cfg.ReadyTimeout)
}

// newSharedInformers is the informer factory the in-process controller
// manager and scheduler share, under the controller manager's identity,
// with its resync period (the scheduler's handlers take none) and both
// components' transform (no managedFields), prepared with the indexes the
// controllers add. Its informers of the resources the API server's watch
// cache serves in process (pods and nodes) read that cache directly, and
// hold its objects instead of a decoded copy. Its informers run until ctx
// is done.
func newSharedInformers(ctx context.Context, cmConfig *rest.Config, resync time.Duration, api *apiserver.Server) (*sharedinformers.Process, error) {
	c := rest.CopyConfig(cmConfig)
	c.UserAgent = manager.UserAgent + "/shared-informers"
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("shared informers: %w", err)
	}
	shared := sharedinformers.New(ctx, client, resync, InProcessCaches(api))
	// The garbage collector's monitors are these informers too.
	shared.IndexAll(garbagecollector.OwnerIndexers())
	if err := manager.PrepareInformers(shared.Factory()); err != nil {
		return nil, fmt.Errorf("shared informers: %w", err)
	}
	return shared, nil
}

// InProcessCaches are the API server's watch caches that in-process
// informers read directly (sharedinformers.Caches).
func InProcessCaches(api *apiserver.Server) sharedinformers.Caches { return inProcessCaches{api} }

type inProcessCaches struct{ api *apiserver.Server }

func (c inProcessCaches) ForResource(gvr schema.GroupVersionResource) (sharedinformers.Cache, schema.GroupVersionKind, bool) {
	cache, ok := c.api.InProcessCache(gvr)
	if !ok {
		return nil, schema.GroupVersionKind{}, false
	}
	return cache, cache.Kind(), true
}

func (c inProcessCaches) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	return c.api.InProcessResource(gvk)
}

// useServiceAccountCredentials: each controller runs as its own
// kube-system service account unless ControllerOptions turned that off
// (--use-service-account-credentials=false).
func useServiceAccountCredentials(cfg Config) bool {
	return cfg.ControllerOptions == nil || cfg.ControllerOptions.UseServiceAccountCredentials
}

// launchScheduler starts the scheduler in process with cfg.SchedulerConfig
// (default: the default profile), the way the controller manager is started: its metrics go to
// the API server's registry (served on the API server's /metrics), it
// opens no port (a separate `skiff scheduler` can take 10259), and it
// elects a leader on the Lease kube-system/kube-scheduler with an identity
// stable for this host and data directory.
func launchScheduler(ctx context.Context, cfg Config, restConfig *rest.Config, registry *prometheus.Registry, shared *sharedinformers.Process) (*lifecycle.Handle, error) {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(cfg.DataDir))
	schedCfg := schedconfig.Default(schedplugins.DefaultProfile())
	if cfg.SchedulerConfig != nil {
		schedCfg = *cfg.SchedulerConfig
	}
	sched, err := schedapp.New(restConfig, schedapp.Options{
		Config:          schedCfg,
		Registry:        schedplugins.NewInTreeRegistry(),
		Identity:        fmt.Sprintf("%s_skiff-server-%x", host, sum[:4]),
		Metrics:         registry,
		SharedInformers: shared,
		Recampaign:      true, // a lost term must not stop the server
	})
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return lifecycle.Launch(ctx, "scheduler", sched, cfg.ReadyTimeout)
}

// runningCheck is healthy while the in-process component runs.
func runningCheck(h *lifecycle.Handle) func(context.Context) error {
	return func(context.Context) error {
		select {
		case <-h.Done():
			return orStopped(h.Err(), "component")
		default:
			return nil
		}
	}
}

func orStopped(err error, name string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%s exited", name)
}

// ListenPort is the port in addr ("host:port"), or fallback if addr has none.
func ListenPort(addr string, fallback int) int {
	if _, p, err := net.SplitHostPort(addr); err == nil {
		if n, err := strconv.Atoi(p); err == nil && n > 0 {
			return n
		}
	}
	return fallback
}
