// Package controllermanager is the `skiff controller-manager` command: the
// controller manager alone, a client of an API server given by kubeconfig.
package controllermanager

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/component"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/controller/nodeipam"
)

// Flags are the command-line flags of `skiff controller-manager`, named as
// kube-controller-manager's.
type Flags struct {
	Kubeconfig  string
	Controllers []string
	Serving     component.SecureServing

	LeaderElect bool
	// UseSACredentials is --use-service-account-credentials.
	UseSACredentials   bool
	LeaseDuration      time.Duration
	RenewDeadline      time.Duration
	RetryPeriod        time.Duration
	ResourceNamespace  string
	ResourceName       string
	KubeAPIQPS         float32
	KubeAPIBurst       int
	KubeAPIContentType string
	RootCAFile         string
	ConcurrentSyncs    map[string]int
	NodeMonitorGrace   time.Duration
	NodeMonitorPeriod  time.Duration
	NodeStartupGrace   time.Duration
	NodeEvictionRate   float64
	SecondaryEviction  float64
	UnhealthyZone      float64
	LargeClusterSize   int
	TerminatedPodGCMax int
	ClusterCIDR        string
	NodeCIDRMaskSize   int
}

// DefaultFlags are upstream's defaults.
func DefaultFlags() Flags {
	o := manager.DefaultControllerOptions()
	return Flags{
		Controllers:        []string{"*"},
		Serving:            component.DefaultSecureServing(manager.DefaultSecurePort),
		LeaderElect:        true,
		UseSACredentials:   true,
		LeaseDuration:      manager.DefaultLeaseDuration,
		RenewDeadline:      manager.DefaultRenewDeadline,
		RetryPeriod:        manager.DefaultRetryPeriod,
		ResourceNamespace:  manager.DefaultLeaseNamespace,
		ResourceName:       manager.DefaultLeaseName,
		KubeAPIQPS:         manager.DefaultQPS,
		KubeAPIBurst:       manager.DefaultBurst,
		KubeAPIContentType: manager.DefaultContentType,
		ConcurrentSyncs:    map[string]int{},
		NodeMonitorGrace:   o.NodeMonitorGracePeriod,
		NodeMonitorPeriod:  o.NodeMonitorPeriod,
		NodeStartupGrace:   o.NodeStartupGracePeriod,
		NodeEvictionRate:   o.NodeEvictionRate,
		SecondaryEviction:  o.SecondaryNodeEvictionRate,
		UnhealthyZone:      o.UnhealthyZoneThreshold,
		LargeClusterSize:   o.LargeClusterSizeThreshold,
		TerminatedPodGCMax: o.TerminatedPodGCThreshold,
		ClusterCIDR:        nodeipam.DefaultClusterCIDR.String(),
		NodeCIDRMaskSize:   nodeipam.DefaultNodeCIDRMaskSize,
	}
}

// NewCommand builds `skiff controller-manager`.
func NewCommand() *cobra.Command {
	f := DefaultFlags()
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controller manager alone, against an API server",
		Long: `Run Skiff's controllers (deployment, replicaset, ...) as a client of an
API server, the way kube-controller-manager does. It serves /healthz and
/metrics over HTTPS on --bind-address:--secure-port (default 0.0.0.0:10257;
/metrics to a bearer token or client certificate the API server authorizes
for it) and, with
--leader-elect (the default), runs controllers only while it holds the Lease
kube-system/kube-controller-manager. SIGINT or SIGTERM stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			cmd.SilenceUsage = true
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, cfg)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "path to a kubeconfig for the API server (required)")
	fs.StringSliceVar(&f.Controllers, "controllers", f.Controllers, fmt.Sprintf("controllers to run: '*' for all, 'foo' to enable foo, '-foo' to disable foo. Known: %s", strings.Join(manager.Names(manager.Controllers()), ", ")))
	f.Serving.AddFlags(fs)
	fs.BoolVar(&f.UseSACredentials, "use-service-account-credentials", f.UseSACredentials, "run each controller with the token of its own kube-system service account (bound to its system:controller:<name> role by the bootstrap policy); false runs them all with the --kubeconfig identity, which then needs every controller's rights")
	fs.BoolVar(&f.LeaderElect, "leader-elect", f.LeaderElect, "take a Lease before running controllers, so that only one manager runs them")
	fs.DurationVar(&f.LeaseDuration, "leader-elect-lease-duration", f.LeaseDuration, "how long other candidates wait after the leader's last renewal before taking over")
	fs.DurationVar(&f.RenewDeadline, "leader-elect-renew-deadline", f.RenewDeadline, "how long the leader retries renewing before it gives up leading")
	fs.DurationVar(&f.RetryPeriod, "leader-elect-retry-period", f.RetryPeriod, "how long candidates wait between attempts to acquire or renew")
	fs.StringVar(&f.ResourceNamespace, "leader-elect-resource-namespace", f.ResourceNamespace, "namespace of the leader-election Lease")
	fs.StringVar(&f.ResourceName, "leader-elect-resource-name", f.ResourceName, "name of the leader-election Lease")
	fs.Float32Var(&f.KubeAPIQPS, "kube-api-qps", f.KubeAPIQPS, "queries per second of each controller's client")
	fs.IntVar(&f.KubeAPIBurst, "kube-api-burst", f.KubeAPIBurst, "burst of each controller's client")
	fs.StringVar(&f.KubeAPIContentType, "kube-api-content-type", f.KubeAPIContentType, "content type of the controllers' requests to the API server (application/vnd.kubernetes.protobuf or application/json)")
	fs.StringVar(&f.RootCAFile, "root-ca-file", "", "cluster CA bundle published as kube-root-ca.crt in every namespace (default: the kubeconfig's CA)")
	fs.StringToIntVar(&f.ConcurrentSyncs, "concurrent-syncs", f.ConcurrentSyncs, "workers per controller, e.g. deployment=5,replicaset=5 (default: each controller's own)")
	fs.DurationVar(&f.NodeMonitorGrace, "node-monitor-grace-period", f.NodeMonitorGrace, "how long a node may go without a heartbeat before it is marked unhealthy")
	fs.DurationVar(&f.NodeMonitorPeriod, "node-monitor-period", f.NodeMonitorPeriod, "how often node health is checked")
	fs.DurationVar(&f.NodeStartupGrace, "node-startup-grace-period", f.NodeStartupGrace, "how long a new node may take to report before it is marked unhealthy")
	fs.Float64Var(&f.NodeEvictionRate, "node-eviction-rate", f.NodeEvictionRate, "nodes per second whose pods are evicted when a zone is healthy")
	fs.Float64Var(&f.SecondaryEviction, "secondary-node-eviction-rate", f.SecondaryEviction, "nodes per second whose pods are evicted when a zone is unhealthy")
	fs.Float64Var(&f.UnhealthyZone, "unhealthy-zone-threshold", f.UnhealthyZone, "fraction of not-ready nodes that makes a zone unhealthy")
	fs.IntVar(&f.LargeClusterSize, "large-cluster-size-threshold", f.LargeClusterSize, "nodes above which a cluster is large for eviction rates")
	fs.IntVar(&f.TerminatedPodGCMax, "terminated-pod-gc-threshold", f.TerminatedPodGCMax, "terminated pods kept before pod GC deletes the oldest (0 or less disables it, as upstream)")
	fs.StringVar(&f.ClusterCIDR, "cluster-cidr", f.ClusterCIDR, "pod network the node IPAM controller gives each node a block of (spec.podCIDR)")
	fs.IntVar(&f.NodeCIDRMaskSize, "node-cidr-mask-size", f.NodeCIDRMaskSize, "prefix length of each node's block of --cluster-cidr")
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	for _, name := range []string{"v", "vmodule"} {
		fs.AddGoFlag(logFlags.Lookup(name))
	}
	return cmd
}

// Config is the validated configuration of the command.
type Config struct {
	Kubeconfig string
	Serving    component.SecureServing
	Manager    manager.Options
}

// Config validates the flags.
func (f Flags) Config() (Config, error) {
	var errs []error
	if strings.TrimSpace(f.Kubeconfig) == "" {
		errs = append(errs, errors.New("--kubeconfig is required"))
	}
	sel, err := manager.ParseSelection(f.Controllers, manager.Names(manager.Controllers()))
	if err != nil {
		errs = append(errs, fmt.Errorf("--controllers: %w", err))
	}
	if f.LeaderElect && f.LeaseDuration <= f.RenewDeadline {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%v) must be greater than --leader-elect-renew-deadline (%v)", f.LeaseDuration, f.RenewDeadline))
	}
	if f.RetryPeriod <= 0 {
		errs = append(errs, errors.New("--leader-elect-retry-period must be positive"))
	}
	if err := f.Serving.Validate(); err != nil {
		errs = append(errs, err)
	}
	if f.KubeAPIQPS <= 0 || f.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if ct := f.KubeAPIContentType; ct != runtime.ContentTypeProtobuf && ct != runtime.ContentTypeJSON {
		errs = append(errs, fmt.Errorf("--kube-api-content-type %q: must be %s or %s", ct, runtime.ContentTypeProtobuf, runtime.ContentTypeJSON))
	}
	opts, err := f.controllerOptions()
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return Config{
		Kubeconfig: f.Kubeconfig,
		Serving:    f.Serving,
		Manager: manager.Options{
			Controllers:                  sel,
			LeaderElect:                  f.LeaderElect,
			UseServiceAccountCredentials: f.UseSACredentials,
			LeaseNamespace:               f.ResourceNamespace,
			LeaseName:                    f.ResourceName,
			LeaseDuration:                f.LeaseDuration,
			RenewDeadline:                f.RenewDeadline,
			RetryPeriod:                  f.RetryPeriod,
			QPS:                          f.KubeAPIQPS,
			Burst:                        f.KubeAPIBurst,
			ContentType:                  f.KubeAPIContentType,
			Controller:                   opts,
		},
	}, nil
}

func (f Flags) controllerOptions() (controllercontext.Options, error) {
	var errs []error
	for name, d := range map[string]time.Duration{"--node-monitor-grace-period": f.NodeMonitorGrace, "--node-monitor-period": f.NodeMonitorPeriod, "--node-startup-grace-period": f.NodeStartupGrace} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", name))
		}
	}
	if f.NodeEvictionRate < 0 || f.SecondaryEviction < 0 {
		errs = append(errs, errors.New("eviction rates must not be negative"))
	}
	if f.UnhealthyZone < 0 || f.UnhealthyZone > 1 {
		errs = append(errs, errors.New("--unhealthy-zone-threshold must be between 0 and 1"))
	}
	var ca []byte
	if f.RootCAFile != "" {
		b, err := os.ReadFile(f.RootCAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--root-ca-file: %w", err))
		}
		ca = b
	}
	clusterCIDR, err := nodeipam.ParseRange(f.ClusterCIDR, f.NodeCIDRMaskSize)
	if err != nil {
		errs = append(errs, fmt.Errorf("--cluster-cidr/--node-cidr-mask-size: %w", err))
	}
	syncs := map[string]int{}
	for k, v := range f.ConcurrentSyncs {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("--concurrent-syncs %s=%d must be positive", k, v))
		}
		syncs[k] = v
	}
	return controllercontext.Options{
		NodeMonitorGracePeriod:    f.NodeMonitorGrace,
		NodeMonitorPeriod:         f.NodeMonitorPeriod,
		NodeStartupGracePeriod:    f.NodeStartupGrace,
		NodeEvictionRate:          f.NodeEvictionRate,
		SecondaryNodeEvictionRate: f.SecondaryEviction,
		UnhealthyZoneThreshold:    f.UnhealthyZone,
		LargeClusterSizeThreshold: f.LargeClusterSize,
		TerminatedPodGCThreshold:  podGCThreshold(f.TerminatedPodGCMax),
		ConcurrentSyncs:           syncs,
		RootCAPEM:                 ca,
		ClusterCIDR:               clusterCIDR.String(),
		NodeCIDRMaskSize:          f.NodeCIDRMaskSize,
	}, errors.Join(errs...)
}

// Run loads the kubeconfig and runs the manager until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	restConfig, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	if len(cfg.Manager.Controller.RootCAPEM) == 0 {
		ca := restConfig.CAData
		if len(ca) == 0 && restConfig.CAFile != "" {
			if ca, err = os.ReadFile(restConfig.CAFile); err != nil {
				return fmt.Errorf("kubeconfig CA: %w", err)
			}
		}
		cfg.Manager.Controller.RootCAPEM = ca
	}
	// /metrics as upstream's secure port: HTTPS, a token or client
	// certificate, and authorization asked of the API server
	// (component.Auth, component.SecureServing).
	authClient, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	cfg.Manager.MetricsAuth = &component.Auth{Client: authClient}
	if cfg.Manager.Address, cfg.Manager.TLS, err = cfg.Serving.Listen(ctx, authClient); err != nil {
		return err
	}
	m, err := manager.New(restConfig, cfg.Manager)
	if err != nil {
		return err
	}
	return m.Start(ctx)
}

// podGCThreshold maps the flag to the controller's option: upstream
// disables terminated-pod collection at 0 or less; the option says that
// with a negative number (0 there means the default).
func podGCThreshold(flag int) int {
	if flag <= 0 {
		return -1
	}
	return flag
}
