// Package server is the `skiff server` command: its flags, their validation
// into a server.Config, and signal handling around server.Run.
package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/agent"
	"github.com/skiff-sh/skiff/internal/apiserver"
	proxycli "github.com/skiff-sh/skiff/internal/cli/proxy"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/controller/nodeipam"
	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/kubelet"
	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
	"github.com/skiff-sh/skiff/internal/proxy"
	"github.com/skiff-sh/skiff/internal/satoken"
	schedconfig "github.com/skiff-sh/skiff/internal/scheduler/config"
	schedplugins "github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/server"
)

// Flags are the command-line flags of `skiff server`.
type Flags struct {
	DataDir        string
	BindAddress    string
	HTTPSPort      int
	EtcdServers    []string
	EtcdCAFile     string
	EtcdCertFile   string
	EtcdKeyFile    string
	EtcdClientPort int
	EtcdPeerPort   int
	DisableAgent   bool
	// DisableControllerManager and DisableScheduler are k3s's flags of
	// those names: the in-process controllers or scheduler do not run.
	DisableControllerManager bool
	DisableScheduler         bool
	// The in-process agent's kubelet API and container log rotation.
	KubeletPort          int
	ContainerLogMaxSize  string
	ContainerLogMaxFiles int
	// The in-process agent's eviction and garbage collection.
	EvictionGC kubelet.EvictionGCFlags

	// The in-process controllers, named as kube-controller-manager's flags.
	Controllers       []string
	NodeMonitorGrace  time.Duration
	NodeMonitorPeriod time.Duration
	NodeStartupGrace  time.Duration
	NodeEvictionRate  float64
	// UseSACredentials is --use-service-account-credentials (default on).
	UseSACredentials bool

	// ClusterCIDR and NodeCIDRMaskSize are node IPAM's range (empty and
	// zero: 10.42.0.0/16 and 24).
	ClusterCIDR      string
	NodeCIDRMaskSize int
	// NodePortAddresses is the in-process agent's --nodeport-addresses.
	NodePortAddresses []string
	// Profiling serves Go's profiles on the API server's /debug/pprof/
	// (default on, as kube-apiserver's --profiling).
	Profiling bool

	// SchedulerConfig is a KubeSchedulerConfiguration file for the
	// in-process scheduler (empty: the default profile).
	SchedulerConfig string

	// Security: authentication beyond certificates (security.go).
	Security SecurityFlags
	// Overload: the API server's timeouts and flow control (overload.go).
	Overload OverloadFlags
	// WatchCache and WatchCacheSizes say which resources the API server
	// serves from memory, as kube-apiserver's --watch-cache and
	// --watch-cache-sizes.
	WatchCache      bool
	WatchCacheSizes []string

	// AuthorizationMode is the API server's comma-separated authorization
	// modes (Node, RBAC, AlwaysAllow), asked in order.
	AuthorizationMode string
	// Authorization: ABAC, webhook and structured authorization
	// (authorization.go).
	Authorization AuthorizationFlags
	// Admission: the plugins on and off, and their configuration
	// (admission.go).
	Admission AdmissionFlags

	// Service-account tokens, named as kube-apiserver's flags.
	ServiceAccountKeyFiles       []string
	ServiceAccountSigningKeyFile string
	ServiceAccountIssuers        []string
	APIAudiences                 []string
	ServiceAccountJWKSURI        string
	ServiceAccountMaxExpiration  time.Duration
	// ServiceAccountNoExtendExpiration is the inverse of
	// --service-account-extend-token-expiration (on by default).
	ServiceAccountNoExtendExpiration bool

	// Services: cluster DNS and load-balancer addresses
	// (internal/server/services.go).
	ServiceLBRange    string
	DisableClusterDNS bool
	ClusterDNSPort    int
}

// DefaultFlags are the flags' defaults: a fresh machine needs none.
func DefaultFlags() Flags {
	c := manager.DefaultControllerOptions()
	return Flags{
		DataDir:              server.DefaultDataDir,
		Profiling:            true,
		ClusterDNSPort:       53,
		HTTPSPort:            server.DefaultPort,
		EtcdClientPort:       etcd.DefaultClientPort,
		EtcdPeerPort:         etcd.DefaultClientPort + 1,
		Controllers:          []string{"*"},
		KubeletPort:          kubelet.DefaultPort,
		ContainerLogMaxSize:  "10Mi",
		ContainerLogMaxFiles: kubeletserver.DefaultContainerLogMaxFiles,
		EvictionGC:           kubelet.DefaultEvictionGCFlags(),
		NodeMonitorGrace:     c.NodeMonitorGracePeriod,
		NodeMonitorPeriod:    c.NodeMonitorPeriod,
		NodeStartupGrace:     c.NodeStartupGracePeriod,
		NodeEvictionRate:     c.NodeEvictionRate,
		UseSACredentials:     true,
		AuthorizationMode:    strings.Join(apiserver.DefaultAuthorizationModes, ","),
		Authorization:        defaultAuthorizationFlags(),
		Overload:             defaultOverloadFlags(),
		WatchCache:           true,
	}
}

// NewCommand builds `skiff server`.
func NewCommand() *cobra.Command {
	f := DefaultFlags()
	extendTokens := new(bool)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane: embedded etcd, the Kubernetes API server and the controllers",
		Long: `Run the whole control plane in one process.

On first start it creates the data directory, a CA and every certificate, and
writes an admin kubeconfig to <data-dir>/admin.kubeconfig. Later starts reuse
them. The controllers (--controllers) run in the same process, with leader
election on the Lease kube-system/kube-controller-manager, and so does the
scheduler, on the Lease kube-system/kube-scheduler, with the default profile
or the KubeSchedulerConfiguration given by --scheduler-config. SIGINT or SIGTERM
stops the controllers, the API server, then etcd, and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.ServiceAccountNoExtendExpiration = !*extendTokens
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			cmd.SilenceUsage = true
			cfg.Out = cmd.ErrOrStderr()
			cfg.CommandName = cmd.Root().Name()
			if len(os.Args) > 0 && strings.Contains(os.Args[0], "/") {
				cfg.CommandName = os.Args[0] // as typed, e.g. bin/skiff
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return server.Run(ctx, cfg)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.DataDir, "data-dir", f.DataDir, "directory for etcd data, certificates and the admin kubeconfig")
	fs.StringVar(&f.BindAddress, "bind-address", f.BindAddress, "IP address the API server listens on (default 0.0.0.0 with the node agent, so that pods reach kubernetes.default.svc, and 127.0.0.1 with --disable-agent)")
	fs.StringVar(&f.ServiceLBRange, "service-lb-range", f.ServiceLBRange, "addresses for Services of type LoadBalancer: a CIDR, first-last, or one address (default: the node's address, shared by Services whose ports do not clash)")
	fs.BoolVar(&f.DisableClusterDNS, "disable-cluster-dns", false, "do not run cluster DNS (Service kube-system/kube-dns at 10.43.0.10)")
	fs.IntVar(&f.ClusterDNSPort, "cluster-dns-port", f.ClusterDNSPort, "port cluster DNS listens on at the node's address; kube-dns keeps port 53 and points there")
	fs.IntVar(&f.HTTPSPort, "https-listen-port", f.HTTPSPort, "port the API server listens on (0 picks a free port)")
	fs.StringSliceVar(&f.EtcdServers, "etcd-servers", nil, "client URLs of an external etcd cluster (comma-separated); when empty, etcd is embedded")
	fs.StringVar(&f.EtcdCAFile, "etcd-cafile", "", "CA file that verifies the external etcd's serving certificates (--etcd-servers with https; default: the system's roots)")
	fs.StringVar(&f.EtcdCertFile, "etcd-certfile", "", "client certificate presented to the external etcd (with --etcd-keyfile)")
	fs.StringVar(&f.EtcdKeyFile, "etcd-keyfile", "", "key of --etcd-certfile")
	fs.IntVar(&f.EtcdClientPort, "etcd-client-port", f.EtcdClientPort, "loopback client port of the embedded etcd (0 picks a free port)")
	fs.IntVar(&f.EtcdPeerPort, "etcd-peer-port", f.EtcdPeerPort, "loopback peer port of the embedded etcd (0 picks a free port)")
	fs.IntVar(&f.KubeletPort, "kubelet-port", f.KubeletPort, "port of the in-process agent's kubelet API (logs, exec, port-forward, metrics)")
	fs.StringVar(&f.ContainerLogMaxSize, "container-log-max-size", f.ContainerLogMaxSize, "size at which a container's log file is rotated")
	fs.IntVar(&f.ContainerLogMaxFiles, "container-log-max-files", f.ContainerLogMaxFiles, "most log files kept per container, the live one included")
	f.EvictionGC.AddFlags(fs)
	fs.BoolVar(&f.DisableAgent, "disable-agent", false, "do not run a node agent (kubelet and containerd) in this process; by default the server also runs this host as a node named after its hostname")
	fs.BoolVar(&f.DisableControllerManager, "disable-controller-manager", false, "do not run the controllers in this process (--controllers is then ignored): for running kube-controller-manager, or skiff controller-manager, against this server")
	fs.BoolVar(&f.DisableScheduler, "disable-scheduler", false, "do not run the scheduler in this process: for running kube-scheduler, or skiff scheduler, against this server")
	fs.StringSliceVar(&f.Controllers, "controllers", f.Controllers, fmt.Sprintf("in-process controllers to run: '*' for all, 'foo' to enable foo, '-foo' to disable foo. Known: %s", strings.Join(manager.Names(manager.Controllers()), ", ")))
	fs.DurationVar(&f.NodeMonitorGrace, "node-monitor-grace-period", f.NodeMonitorGrace, "how long a node may go without a heartbeat before it is marked unhealthy and tainted")
	fs.DurationVar(&f.NodeMonitorPeriod, "node-monitor-period", f.NodeMonitorPeriod, "how often the node lifecycle controller checks node health")
	fs.DurationVar(&f.NodeStartupGrace, "node-startup-grace-period", f.NodeStartupGrace, "how long a new node may take to report before it is marked unhealthy")
	fs.BoolVar(&f.UseSACredentials, "use-service-account-credentials", f.UseSACredentials, "run each in-process controller with the token of its own kube-system service account, bound to its system:controller:<name> role (upstream's least privilege); false runs them all as system:kube-controller-manager, which is then bound to every controller role")
	fs.Float64Var(&f.NodeEvictionRate, "node-eviction-rate", f.NodeEvictionRate, "nodes per second whose pods are evicted when a zone is healthy")
	fs.StringVar(&f.ClusterCIDR, "cluster-cidr", nodeipam.DefaultClusterCIDR.String(), "pod network the node IPAM controller gives each node a block of (spec.podCIDR)")
	proxycli.AddNodePortAddressesFlag(fs, &f.NodePortAddresses)
	fs.BoolVar(&f.Profiling, "profiling", f.Profiling, "serve Go's profiles on the API server at /debug/pprof/ (to users allowed that URL, such as cluster-admin)")
	fs.IntVar(&f.NodeCIDRMaskSize, "node-cidr-mask-size", nodeipam.DefaultNodeCIDRMaskSize, "prefix length of each node's block of --cluster-cidr")
	fs.StringVar(&f.SchedulerConfig, "scheduler-config", f.SchedulerConfig, "path to a KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1) for the in-process scheduler: profiles, plugins, weights, plugin args, leader election; clientConnection is ignored (empty: the default profile)")
	fs.StringVar(&f.AuthorizationMode, "authorization-mode", f.AuthorizationMode, "comma-separated authorization modes of the API server, asked in order after the system:masters check: Node (a kubelet reads only what its pods use), RBAC (roles and bindings), ABAC (--authorization-policy-file), Webhook (--authorization-webhook-config-file), AlwaysAllow (every authenticated user may do everything), AlwaysDeny")
	f.Authorization.addFlags(fs)
	f.Admission.addFlags(fs)
	fs.StringArrayVar(&f.ServiceAccountKeyFiles, "service-account-key-file", nil, "PEM file of public keys (or private keys, or certificates) that verify service-account tokens; repeatable. The signing key always verifies too")
	fs.StringVar(&f.ServiceAccountSigningKeyFile, "service-account-signing-key-file", "", "PEM private key (RSA or ECDSA) that signs service-account tokens (default <data-dir>/pki/sa.key, created at the first start)")
	fs.StringArrayVar(&f.ServiceAccountIssuers, "service-account-issuer", nil, "issuer (iss) of service-account tokens; repeatable: the first signs new tokens, all are accepted (default "+satoken.DefaultIssuer+")")
	fs.StringSliceVar(&f.APIAudiences, "api-audiences", nil, "audiences the API server accepts in tokens (default: the first --service-account-issuer)")
	fs.StringVar(&f.ServiceAccountJWKSURI, "service-account-jwks-uri", "", "jwks_uri of the issuer's discovery document (default <issuer>/openid/v1/jwks)")
	fs.DurationVar(&f.ServiceAccountMaxExpiration, "service-account-max-token-expiration", 0, "longest lifetime a TokenRequest gets; longer requests are shortened (0: no limit)")
	fs.BoolVar(extendTokens, "service-account-extend-token-expiration", true, "issue pod-bound tokens that the kubelet asks for with the default lifetime for a year, with a warnafter claim at the hour, as upstream")
	f.Security.addFlags(fs)
	f.Overload.addFlags(fs)
	fs.BoolVar(&f.WatchCache, "watch-cache", f.WatchCache, "serve lists and watches from memory, fed by one etcd watch per resource; false: every list and watch reads etcd")
	fs.StringSliceVar(&f.WatchCacheSizes, "watch-cache-sizes", f.WatchCacheSizes, "resource[.group]#size settings, comma separated (resource lowercase and plural, no group for the core API): size 0 serves the resource from etcd alone, any other size caches it (caches size themselves). Default: events#0,events.events.k8s.io#0, as upstream")
	// Log verbosity, for klog (used by every component).
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	for _, name := range []string{"v", "vmodule"} {
		fs.AddGoFlag(logFlags.Lookup(name))
	}
	return cmd
}

// Config validates the flags into a server.Config.
func (f Flags) Config() (server.Config, error) {
	var errs []error
	if strings.TrimSpace(f.DataDir) == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	dataDir, err := filepath.Abs(f.DataDir)
	if err != nil {
		errs = append(errs, fmt.Errorf("--data-dir: %w", err))
	}
	if f.BindAddress == "" {
		// Pods reach the API server through kubernetes.default.svc, whose
		// endpoint is the node's address: listen there when pods run here.
		f.BindAddress = server.DefaultBindAddress
		if !f.DisableAgent {
			f.BindAddress = "0.0.0.0"
		}
	}
	if net.ParseIP(f.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address %q is not an IP address", f.BindAddress))
	}
	for name, p := range map[string]int{"--https-listen-port": f.HTTPSPort, "--etcd-client-port": f.EtcdClientPort, "--etcd-peer-port": f.EtcdPeerPort} {
		if p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s %d is out of range 0-65535", name, p))
		}
	}
	var servers []string
	for _, s := range f.EtcdServers {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--etcd-servers: %q is not an http(s)://host:port URL", s))
			continue
		}
		servers = append(servers, s)
	}
	if (f.EtcdCertFile == "") != (f.EtcdKeyFile == "") {
		errs = append(errs, errors.New("--etcd-certfile and --etcd-keyfile must be given together"))
	}
	if len(servers) == 0 && (f.EtcdCAFile != "" || f.EtcdCertFile != "" || f.EtcdKeyFile != "") {
		errs = append(errs, errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-servers (the embedded etcd uses <data-dir>/pki/etcd)"))
	}
	if len(servers) == 0 {
		if f.EtcdClientPort != 0 && f.EtcdClientPort == f.EtcdPeerPort {
			errs = append(errs, fmt.Errorf("--etcd-client-port and --etcd-peer-port are both %d", f.EtcdClientPort))
		}
		loopbackAPI := f.BindAddress == "" || isLoopbackOrAny(f.BindAddress)
		if loopbackAPI && f.HTTPSPort != 0 && (f.HTTPSPort == f.EtcdClientPort || f.HTTPSPort == f.EtcdPeerPort) {
			errs = append(errs, fmt.Errorf("--https-listen-port %d is also an etcd port", f.HTTPSPort))
		}
	}
	selection, err := manager.ParseSelection(f.Controllers, manager.Names(manager.Controllers()))
	if err != nil {
		errs = append(errs, fmt.Errorf("--controllers: %w", err))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"--node-monitor-grace-period", f.NodeMonitorGrace}, {"--node-monitor-period", f.NodeMonitorPeriod}, {"--node-startup-grace-period", f.NodeStartupGrace}} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", d.name))
		}
	}
	if f.NodeEvictionRate < 0 {
		errs = append(errs, errors.New("--node-eviction-rate must not be negative"))
	}
	rotation, err := kubeletserver.ParseRotation(f.ContainerLogMaxSize, f.ContainerLogMaxFiles)
	if err != nil {
		errs = append(errs, err)
	}
	nodePortCIDRs, nodePortPrimary, err := proxy.ParseNodePortAddresses(f.NodePortAddresses)
	if err != nil {
		errs = append(errs, err)
	}
	kubeletOpts := kubelet.Options{Port: f.KubeletPort}
	if err := f.EvictionGC.Apply(&kubeletOpts); err != nil {
		errs = append(errs, err)
	}
	if f.ClusterDNSPort <= 0 || f.ClusterDNSPort > 65535 {
		errs = append(errs, fmt.Errorf("--cluster-dns-port %d is not a port", f.ClusterDNSPort))
	}
	if f.KubeletPort <= 0 || f.KubeletPort > 65535 {
		errs = append(errs, fmt.Errorf("--kubelet-port %d is not a port", f.KubeletPort))
	}
	ipamCIDR, ipamMask := f.ClusterCIDR, f.NodeCIDRMaskSize
	if ipamCIDR == "" {
		ipamCIDR = nodeipam.DefaultClusterCIDR.String()
	}
	if ipamMask == 0 {
		ipamMask = nodeipam.DefaultNodeCIDRMaskSize
	}
	clusterCIDR, err := nodeipam.ParseRange(ipamCIDR, ipamMask)
	if err != nil {
		errs = append(errs, fmt.Errorf("--cluster-cidr/--node-cidr-mask-size: %w", err))
	}
	var schedCfg *schedconfig.Config
	if strings.TrimSpace(f.SchedulerConfig) != "" {
		c, err := schedconfig.Load(f.SchedulerConfig, schedplugins.NewInTreeRegistry(), schedplugins.DefaultProfile())
		if err != nil {
			errs = append(errs, fmt.Errorf("--scheduler-config: %w", err))
		}
		schedCfg = &c
	}
	security, err := f.Security.config()
	if err != nil {
		errs = append(errs, err)
	}
	overload, err := f.Overload.config()
	if err != nil {
		errs = append(errs, err)
	}
	cacheSizes, err := apiserver.ParseWatchCacheSizes(f.WatchCacheSizes)
	if err != nil {
		errs = append(errs, fmt.Errorf("--watch-cache-sizes: %w", err))
	}
	authzModes, authzOpts, err := f.Authorization.options(f.AuthorizationMode)
	if err != nil {
		errs = append(errs, fmt.Errorf("--authorization-mode: %w", err))
	}
	admissionOpts, err := f.Admission.options()
	if err != nil {
		errs = append(errs, err)
	}
	for _, iss := range f.ServiceAccountIssuers {
		if strings.TrimSpace(iss) == "" {
			errs = append(errs, errors.New("--service-account-issuer must not be empty"))
		}
	}
	if f.ServiceAccountMaxExpiration != 0 && f.ServiceAccountMaxExpiration < time.Hour {
		errs = append(errs, errors.New("--service-account-max-token-expiration must be at least 1h"))
	}
	if err := errors.Join(errs...); err != nil {
		return server.Config{}, err
	}
	controllers := manager.DefaultControllerOptions()
	controllers.NodeMonitorGracePeriod = f.NodeMonitorGrace
	controllers.NodeMonitorPeriod = f.NodeMonitorPeriod
	controllers.NodeStartupGracePeriod = f.NodeStartupGrace
	controllers.NodeEvictionRate = f.NodeEvictionRate
	controllers.ClusterCIDR, controllers.NodeCIDRMaskSize = clusterCIDR.String(), ipamMask
	return server.Config{
		DataDir:                  dataDir,
		BindAddress:              f.BindAddress,
		Port:                     f.HTTPSPort,
		EtcdServers:              servers,
		EtcdCAFile:               f.EtcdCAFile,
		EtcdCertFile:             f.EtcdCertFile,
		EtcdKeyFile:              f.EtcdKeyFile,
		EtcdClientPort:           f.EtcdClientPort,
		EtcdPeerPort:             f.EtcdPeerPort,
		DisableAgent:             f.DisableAgent,
		DisableControllerManager: f.DisableControllerManager,
		DisableScheduler:         f.DisableScheduler,
		Services:                 server.ServicesConfig{DisableDNS: f.DisableClusterDNS, DNSPort: f.ClusterDNSPort, LBRange: f.ServiceLBRange},
		Agent: agent.Config{
			ClusterCIDR:     clusterCIDR.String(), // the pod routes masquerade what leaves it
			NodePortCIDRs:   nodePortCIDRs,
			NodePortPrimary: nodePortPrimary,
			Kubelet:         kubeletOpts,
			KubeletAPI:      agent.KubeletAPIConfig{Rotation: rotation},
		},
		Controllers: selection,
		ControllerOptions: &manager.Options{
			Controllers:                  selection,
			Controller:                   controllers,
			UseServiceAccountCredentials: f.UseSACredentials,
		},
		SchedulerConfig:    schedCfg,
		AuthorizationModes: authzModes,
		Authorization:      authzOpts,
		Admission:          admissionOpts,
		Security:           security,
		Overload:           overload,
		WatchCache:         apiserver.WatchCacheConfig{Disabled: !f.WatchCache, Sizes: cacheSizes},
		DisableProfiling:   !f.Profiling,
		ServiceAccounts: server.ServiceAccountsConfig{
			KeyFiles: f.ServiceAccountKeyFiles, SigningKeyFile: f.ServiceAccountSigningKeyFile,
			Issuers: f.ServiceAccountIssuers, APIAudiences: f.APIAudiences, JWKSURI: f.ServiceAccountJWKSURI,
			MaxExpiration: f.ServiceAccountMaxExpiration, NoExtendExpiration: f.ServiceAccountNoExtendExpiration,
		},
	}, nil
}

func isLoopbackOrAny(addr string) bool {
	ip := net.ParseIP(addr)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// Run is a convenience for tests and other callers: validate and run.
func Run(ctx context.Context, f Flags) error {
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	return server.Run(ctx, cfg)
}
