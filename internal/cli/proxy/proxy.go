// Package proxy is the `skiff proxy` command: the service proxy alone (as
// kube-proxy), a client of an API server given by kubeconfig.
package proxy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/component"
	"github.com/skiff-sh/skiff/internal/netpol"
	"github.com/skiff-sh/skiff/internal/proxy"
)

// Flags are the command-line flags, named as kube-proxy's where it has them.
type Flags struct {
	Kubeconfig       string
	HostnameOverride string
	ClusterCIDR      string
	ServiceCIDR      string
	SyncPeriod       time.Duration
	MinSyncPeriod    time.Duration
	MetricsAddress   string
	HealthzAddress   string
	NodePortAddrs    []string
	Cleanup          bool
	NetworkPolicy    bool
}

// DefaultFlags are the defaults (upstream's periods and metrics address,
// Skiff's networks).
func DefaultFlags() Flags {
	return Flags{
		ClusterCIDR:    "10.42.0.0/16",
		ServiceCIDR:    "10.43.0.0/16",
		SyncPeriod:     proxy.DefaultSyncPeriod,
		MinSyncPeriod:  proxy.DefaultMinSyncPeriod,
		MetricsAddress: "127.0.0.1:10249",
		HealthzAddress: proxy.DefaultHealthzAddress,
	}
}

// Config is the validated configuration.
type Config struct {
	Kubeconfig     string
	NodeName       string
	Proxy          proxy.Options
	MetricsAddress string
	HealthzAddress string
	Cleanup        bool
	NetworkPolicy  bool
}

// Config validates the flags.
func (f Flags) Config() (Config, error) {
	var errs []error
	cfg := Config{Kubeconfig: f.Kubeconfig, MetricsAddress: f.MetricsAddress, HealthzAddress: f.HealthzAddress, Cleanup: f.Cleanup, NetworkPolicy: f.NetworkPolicy}
	if !f.Cleanup && strings.TrimSpace(f.Kubeconfig) == "" {
		errs = append(errs, errors.New("--kubeconfig is required"))
	}
	cluster, cluster6, err := dualCIDRs("--cluster-cidr", f.ClusterCIDR)
	if err != nil {
		errs = append(errs, err)
	}
	service, service6, err := dualCIDRs("--service-cidr", f.ServiceCIDR)
	if err != nil {
		errs = append(errs, err)
	}
	if err == nil && cluster6.IsValid() != service6.IsValid() {
		errs = append(errs, fmt.Errorf("--cluster-cidr %q and --service-cidr %q must both be dual-stack or both IPv4", f.ClusterCIDR, f.ServiceCIDR))
	}
	if f.MinSyncPeriod <= 0 || f.SyncPeriod < f.MinSyncPeriod {
		errs = append(errs, fmt.Errorf("--sync-period (%v) must be at least --min-sync-period (%v), which must be positive", f.SyncPeriod, f.MinSyncPeriod))
	}
	cfg.NodeName = f.HostnameOverride
	if cfg.NodeName == "" {
		cfg.NodeName, _ = os.Hostname()
	}
	cfg.NodeName = strings.ToLower(cfg.NodeName)
	cfg.Proxy = proxy.Options{NodeName: cfg.NodeName, ClusterCIDR: cluster, ServiceCIDR: service,
		ClusterCIDR6: cluster6, ServiceCIDR6: service6,
		SyncPeriod: f.SyncPeriod, MinSyncPeriod: f.MinSyncPeriod}
	cidrs, primary, err := proxy.ParseNodePortAddresses(f.NodePortAddrs)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.Proxy.NodePortCIDRs, cfg.Proxy.NodePortPrimary = cidrs, primary
	return cfg, errors.Join(errs...)
}

// dualCIDRs reads an IPv4 CIDR, or "IPv4,IPv6" (either order) for a
// dual-stack network, as kube-proxy's comma-separated flags.
func dualCIDRs(flag, val string) (v4, v6 netip.Prefix, err error) {
	parts := strings.Split(val, ",")
	bad := fmt.Errorf("%s %q: want an IPv4 CIDR, or an IPv4 and an IPv6 CIDR separated by a comma", flag, val)
	if len(parts) > 2 {
		return v4, v6, bad
	}
	for _, s := range parts {
		p, perr := netip.ParsePrefix(strings.TrimSpace(s))
		switch {
		case perr != nil:
			return v4, v6, bad
		case p.Addr().Is4() && !v4.IsValid():
			v4 = p.Masked()
		case p.Addr().Is6() && !v6.IsValid():
			v6 = p.Masked()
		default:
			return v4, v6, bad
		}
	}
	if !v4.IsValid() {
		return v4, v6, bad
	}
	return v4, v6, nil
}

// NewCommand builds `skiff proxy`.
func NewCommand() *cobra.Command {
	f := DefaultFlags()
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the service proxy alone, against an API server",
		Long: `Run Skiff's service proxy as kube-proxy runs: it programs nftables (table
ip skiff-proxy, nothing else) so that Services reach their endpoints. Rules stay
in place when it exits; --cleanup removes them (and NetworkPolicy's table) and exits.
--network-policy also enforces NetworkPolicy for the pods of this node (table
ip skiff-netpol), as the node agent does. SIGINT or SIGTERM stops it.`,
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
	fs.StringVar(&f.HostnameOverride, "hostname-override", "", "this node's name, for externalTrafficPolicy/internalTrafficPolicy Local (default: the hostname)")
	fs.StringVar(&f.ClusterCIDR, "cluster-cidr", f.ClusterCIDR, "the pod network (IPv4, or IPv4,IPv6 for dual stack: table ip6 skiff-proxy too); traffic to a ClusterIP from outside it is masqueraded")
	fs.StringVar(&f.ServiceCIDR, "service-cidr", f.ServiceCIDR, "the Service network (IPv4, or IPv4,IPv6 with a dual-stack --cluster-cidr); traffic to an unallocated address in it is dropped")
	fs.DurationVar(&f.SyncPeriod, "sync-period", f.SyncPeriod, "the longest time between two syncs of the rules")
	fs.DurationVar(&f.MinSyncPeriod, "min-sync-period", f.MinSyncPeriod, "the shortest time between two syncs (changes in between are batched)")
	fs.StringVar(&f.MetricsAddress, "metrics-bind-address", f.MetricsAddress, "host:port for /healthz and /metrics over plain HTTP (empty disables)")
	fs.StringVar(&f.HealthzAddress, "healthz-bind-address", f.HealthzAddress, "host:port for kube-proxy's /healthz and /livez (JSON, 503 when a change waits too long to be programmed; empty disables)")
	AddNodePortAddressesFlag(fs, &f.NodePortAddrs)
	fs.BoolVar(&f.Cleanup, "cleanup", false, "remove Skiff's proxy and NetworkPolicy tables and exit")
	fs.BoolVar(&f.NetworkPolicy, "network-policy", false, "also enforce NetworkPolicy for this node's pods")
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	for _, name := range []string{"v", "vmodule"} {
		fs.AddGoFlag(logFlags.Lookup(name))
	}
	return cmd
}

// Run runs the proxy (and the enforcer when asked) until ctx ends, or
// cleans up and returns.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Cleanup {
		return errors.Join(proxy.Cleanup(ctx, nil), netpol.Cleanup(ctx, nil))
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "skiff-proxy"
	// kube-proxy's clientConnection.contentType default: Services,
	// EndpointSlices and Nodes come in protobuf.
	rc.ContentType = runtime.ContentTypeProtobuf
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	cfg.Proxy.Metrics = reg
	if cfg.MetricsAddress != "" {
		addr, shutdown, err := component.Serve(ctx, "proxy", cfg.MetricsAddress, reg, nil)
		if err != nil {
			return err
		}
		defer shutdown()
		klog.FromContext(ctx).V(1).Info("Serving metrics", "address", addr)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	p := proxy.New(client, cfg.Proxy)
	if cfg.HealthzAddress != "" {
		addr, err := p.ServeHealth(ctx, cfg.HealthzAddress)
		if err != nil {
			return err
		}
		klog.FromContext(ctx).V(1).Info("Serving healthz", "address", addr)
	}
	go func() { errc <- p.Start(ctx) }()
	n := 1
	if cfg.NetworkPolicy {
		e := netpol.New(client, netpol.Options{NodeName: cfg.NodeName, Metrics: reg})
		go func() { errc <- e.Start(ctx) }()
		n++
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel() // one failed: stop the other
		}
	}
	return first
}

// AddNodePortAddressesFlag adds --nodeport-addresses, as kube-proxy's: to
// `skiff proxy`, and to `skiff agent` and `skiff server` for the proxy of
// their node. proxy.ParseNodePortAddresses reads the values.
func AddNodePortAddressesFlag(fs *pflag.FlagSet, to *[]string) {
	fs.StringSliceVar(to, "nodeport-addresses", nil, "CIDRs of the local addresses NodePorts (and health-check node ports) answer on, or \"primary\" for the node's address (default: every local address but loopback)")
}
