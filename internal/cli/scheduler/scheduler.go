// Package scheduler is the `skiff scheduler` command: the scheduler alone,
// a client of an API server given by kubeconfig, configured by an optional
// KubeSchedulerConfiguration file.
package scheduler

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
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/component"
	"github.com/skiff-sh/skiff/internal/scheduler/app"
	"github.com/skiff-sh/skiff/internal/scheduler/config"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
)

// Flags are the command-line flags, named as kube-scheduler's.
type Flags struct {
	Kubeconfig    string
	ConfigFile    string
	Serving       component.SecureServing
	LeaderElect   bool
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	LeaseNS       string
	LeaseName     string
	Profiling     bool
	// changed records the flags set on the command line; they override
	// the configuration file.
	changed map[string]bool
}

// DefaultFlags are upstream's defaults.
func DefaultFlags() Flags {
	return Flags{
		Serving:       component.DefaultSecureServing(app.DefaultSecurePort),
		LeaderElect:   true,
		LeaseDuration: config.DefaultLeaseDuration,
		RenewDeadline: config.DefaultRenewDeadline,
		RetryPeriod:   config.DefaultRetryPeriod,
		LeaseNS:       config.DefaultLeaseNamespace,
		LeaseName:     config.DefaultLeaseName,
		Profiling:     true,
	}
}

// NewCommand builds `skiff scheduler`.
func NewCommand() *cobra.Command {
	f := DefaultFlags()
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduler alone, against an API server",
		Long: `Run Skiff's scheduler as a client of an API server, the way kube-scheduler
does. --config reads a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)
with profiles, plugins, weights and plugin args; without it the default profile
"default-scheduler" is used. With --leader-elect (the default) it schedules only
while it holds the Lease kube-system/kube-scheduler. /healthz and /metrics are
served over HTTPS on --bind-address:--secure-port (default 0.0.0.0:10259;
/metrics to a bearer token or client certificate the API server authorizes
for it). SIGINT or SIGTERM stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.changed = map[string]bool{}
			cmd.Flags().Visit(func(fl *pflag.Flag) { f.changed[fl.Name] = true })
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
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "path to a kubeconfig for the API server (required unless the config file's clientConnection.kubeconfig is set)")
	fs.StringVar(&f.ConfigFile, "config", "", "path to a KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1)")
	f.Serving.AddFlags(fs)
	fs.BoolVar(&f.Profiling, "profiling", f.Profiling, "serve Go's profiles under /debug/pprof/ beside /metrics, behind the same authentication and authorization")
	fs.BoolVar(&f.LeaderElect, "leader-elect", f.LeaderElect, "take a Lease before scheduling, so that only one scheduler binds pods (overrides the config file)")
	fs.DurationVar(&f.LeaseDuration, "leader-elect-lease-duration", f.LeaseDuration, "how long other candidates wait after the leader's last renewal before taking over")
	fs.DurationVar(&f.RenewDeadline, "leader-elect-renew-deadline", f.RenewDeadline, "how long the leader retries renewing before it gives up leading")
	fs.DurationVar(&f.RetryPeriod, "leader-elect-retry-period", f.RetryPeriod, "how long candidates wait between attempts to acquire or renew")
	fs.StringVar(&f.LeaseNS, "leader-elect-resource-namespace", f.LeaseNS, "namespace of the leader-election Lease")
	fs.StringVar(&f.LeaseName, "leader-elect-resource-name", f.LeaseName, "name of the leader-election Lease")
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
	Profiling  bool
	Scheduler  config.Config
}

// Config reads the configuration file (if any), applies the flags set on
// the command line over it, and validates the result.
func (f Flags) Config() (Config, error) {
	sc := config.Default(plugins.DefaultProfile())
	if f.ConfigFile != "" {
		var err error
		if sc, err = config.Load(f.ConfigFile, plugins.NewInTreeRegistry(), plugins.DefaultProfile()); err != nil {
			return Config{}, err
		}
	}
	le := &sc.LeaderElection
	set := func(name string) bool { return f.ConfigFile == "" || f.changed[name] }
	if set("leader-elect") {
		le.LeaderElect = f.LeaderElect
	}
	if set("leader-elect-lease-duration") {
		le.LeaseDuration = f.LeaseDuration
	}
	if set("leader-elect-renew-deadline") {
		le.RenewDeadline = f.RenewDeadline
	}
	if set("leader-elect-retry-period") {
		le.RetryPeriod = f.RetryPeriod
	}
	if set("leader-elect-resource-namespace") {
		le.ResourceNamespace = f.LeaseNS
	}
	if set("leader-elect-resource-name") {
		le.ResourceName = f.LeaseName
	}
	kubeconfig := f.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = sc.Kubeconfig
	}
	var errs []error
	if strings.TrimSpace(kubeconfig) == "" {
		errs = append(errs, errors.New("--kubeconfig is required"))
	}
	if err := f.Serving.Validate(); err != nil {
		errs = append(errs, err)
	}
	if le.LeaderElect && le.LeaseDuration <= le.RenewDeadline {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%v) must be greater than --leader-elect-renew-deadline (%v)", le.LeaseDuration, le.RenewDeadline))
	}
	if le.LeaderElect && le.RetryPeriod <= 0 {
		errs = append(errs, errors.New("--leader-elect-retry-period must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return Config{Kubeconfig: kubeconfig, Serving: f.Serving, Profiling: f.Profiling, Scheduler: sc}, nil
}

// Run loads the kubeconfig and runs the scheduler until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	restConfig, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	// /metrics as upstream's secure port: HTTPS, a token or client
	// certificate, and authorization asked of the API server
	// (component.Auth, component.SecureServing).
	authClient, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	addr, tlsConfig, err := cfg.Serving.Listen(ctx, authClient)
	if err != nil {
		return err
	}
	a, err := app.New(restConfig, app.Options{
		Config:      cfg.Scheduler,
		Registry:    plugins.NewInTreeRegistry(),
		Address:     addr,
		TLS:         tlsConfig,
		MetricsAuth: &component.Auth{Client: authClient},
		Profiling:   cfg.Profiling,
	})
	if err != nil {
		return err
	}
	return a.Start(ctx)
}
