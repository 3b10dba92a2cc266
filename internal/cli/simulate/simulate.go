// Package simulate is the `skiff simulate` command: simulated nodes for
// scale tests, against any cluster a kubeconfig names.
package simulate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/server"
	"github.com/skiff-sh/skiff/internal/simulate"
)

// DataDirEnv names the environment variable that overrides the data
// directory whose admin kubeconfig is the default (as for `skiff kubectl`).
const DataDirEnv = "SKIFF_DATA_DIR"

// Flags are the command-line flags of `skiff simulate`.
type Flags struct {
	Kubeconfig            string
	Nodes                 int
	NodesSet              bool // --nodes was given
	NamePrefix            string
	Zones                 []string
	Region                string
	CPU                   string
	Memory                string
	EphemeralStorage      string
	Pods                  int
	Labels                []string
	Taints                []string
	NodeFile              string
	LeaseDuration         time.Duration
	LeaseRenewInterval    time.Duration
	StatusUpdateFrequency time.Duration
	PodStartLatency       time.Duration
	Devices               int
	DeviceDriver          string
	ManageTaints          bool
	DeleteNodesOnExit     bool
	QPS                   float32
	Burst                 int
	Workers               int
	ReportInterval        time.Duration
}

// DefaultFlags are the flags' defaults.
func DefaultFlags() Flags {
	return Flags{
		Nodes:                 1,
		NamePrefix:            simulate.DefaultNamePrefix,
		CPU:                   simulate.DefaultCPU.String(),
		Memory:                simulate.DefaultMemory.String(),
		EphemeralStorage:      simulate.DefaultEphemeralStorage.String(),
		Pods:                  simulate.DefaultPods,
		LeaseDuration:         simulate.DefaultLeaseDuration,
		StatusUpdateFrequency: simulate.DefaultStatusUpdateFrequency,
		ManageTaints:          true,
		QPS:                   2000,
		Burst:                 4000,
	}
}

// Config is the validated configuration of one run.
type Config struct {
	Kubeconfig     string
	QPS            float32
	Burst          int
	ReportInterval time.Duration
	Options        simulate.Options
}

// NewCommand builds `skiff simulate`.
func NewCommand() *cobra.Command {
	f := DefaultFlags()
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Run simulated nodes (heartbeats and pod lifecycle, no containers) for scale tests",
		Long: `Run N simulated nodes against a cluster.

Each node registers like a kubelet (labels, capacity, addresses, Ready
condition), renews its Lease in kube-node-lease, writes status heartbeats, and
moves the pods bound to it to Running with a pod IP from its pod CIDR (node i
gets 10.(42+i/256).(i%256).0/24). Pods being deleted are removed at once, as
a kubelet confirms a termination. Pods with restartPolicy Never or OnFailure
and the annotation ` + simulate.RunSecondsAnnotation + `: "<seconds>" succeed
after that long. No containers run and no traffic flows.

--node-file names a YAML list of node templates instead of --nodes, e.g.

  - count: 10
    zone: us-east-1a
    labels: {tier: web}
  - count: 2
    namePrefix: gpu-
    capacity: {cpu: "32", memory: 128Gi, example.com/gpu: "4"}
    taints: [{key: gpu, value: "true", effect: NoSchedule}]

Without --kubeconfig it uses $KUBECONFIG, else <data-dir>/admin.kubeconfig
where <data-dir> is $` + DataDirEnv + ` or ` + server.DefaultDataDir + `.
SIGINT or SIGTERM stops the nodes (and deletes them with --delete-nodes-on-exit).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.NodesSet = cmd.Flags().Changed("nodes")
			cfg, err := f.Config(os.Getenv, os.ReadFile)
			if err != nil {
				return err
			}
			cmd.SilenceUsage = true
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, cfg, cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, else <data-dir>/admin.kubeconfig)")
	fs.IntVar(&f.Nodes, "nodes", f.Nodes, "number of nodes to simulate (not with --node-file)")
	fs.StringVar(&f.NamePrefix, "name-prefix", f.NamePrefix, "prefix of node names; node i is <prefix><i>")
	fs.StringSliceVar(&f.Zones, "zones", nil, "zones to spread the nodes over round-robin (topology.kubernetes.io/zone), comma-separated")
	fs.StringVar(&f.Region, "region", "", "region label of the nodes with a zone (default: the zone without its last letter when it ends in digit+letter, as us-east-1a; else \"simulated\")")
	fs.StringVar(&f.CPU, "cpu", f.CPU, "CPU capacity of each node")
	fs.StringVar(&f.Memory, "memory", f.Memory, "memory capacity of each node")
	fs.StringVar(&f.EphemeralStorage, "ephemeral-storage", f.EphemeralStorage, "ephemeral-storage capacity of each node")
	fs.IntVar(&f.Pods, "pods", f.Pods, "pod capacity of each node (at most 253 can be Running at once: one /24 of pod IPs)")
	fs.StringSliceVar(&f.Labels, "labels", nil, "extra node labels, key=value, comma-separated")
	fs.StringSliceVar(&f.Taints, "taints", nil, "node taints, key=value:Effect or key:Effect, comma-separated")
	fs.StringVar(&f.NodeFile, "node-file", "", "YAML list of node templates (count, namePrefix, zone, region, labels, taints, capacity)")
	fs.DurationVar(&f.LeaseDuration, "lease-duration", f.LeaseDuration, "leaseDurationSeconds of the node Leases")
	fs.DurationVar(&f.LeaseRenewInterval, "lease-renew-interval", 0, "how often each node renews its Lease (default a quarter of --lease-duration, 10s)")
	fs.DurationVar(&f.StatusUpdateFrequency, "status-update-frequency", f.StatusUpdateFrequency, "how often each node writes a status heartbeat (a kubelet writes an unchanged status every 5m)")
	fs.DurationVar(&f.PodStartLatency, "pod-start-latency", 0, "delay between a pod being seen bound and it Running")
	fs.IntVar(&f.Devices, "devices-per-node", 0, "publish a ResourceSlice with this many simulated GPUs for each node (Dynamic Resource Allocation)")
	fs.StringVar(&f.DeviceDriver, "device-driver", simulate.DefaultDeviceDriver, "DRA driver name of the simulated devices")
	fs.BoolVar(&f.ManageTaints, "manage-taints", f.ManageTaints, "remove the not-ready taint once a node is Ready (the node lifecycle controller's job; turn off when one runs)")
	fs.BoolVar(&f.DeleteNodesOnExit, "delete-nodes-on-exit", false, "delete the nodes and their Leases on exit")
	fs.Float32Var(&f.QPS, "qps", f.QPS, "client queries per second to the API server")
	fs.IntVar(&f.Burst, "burst", f.Burst, "client burst to the API server")
	fs.IntVar(&f.Workers, "workers", 0, "workers for node work and for pod work, each (default one per 100 nodes, between 16 and 128)")
	fs.DurationVar(&f.ReportInterval, "report-interval", 0, "log API writes per second at this interval (0: off)")
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	for _, name := range []string{"v", "vmodule"} {
		fs.AddGoFlag(logFlags.Lookup(name))
	}
	return cmd
}

// Config validates the flags into a Config. getenv and readFile are
// os.Getenv and os.ReadFile, passed in for tests.
func (f Flags) Config(getenv func(string) string, readFile func(string) ([]byte, error)) (Config, error) {
	var errs []error
	opts := simulate.Options{
		Nodes:                 f.Nodes,
		NamePrefix:            f.NamePrefix,
		Region:                f.Region,
		Pods:                  f.Pods,
		LeaseDuration:         f.LeaseDuration,
		LeaseRenewInterval:    f.LeaseRenewInterval,
		StatusUpdateFrequency: f.StatusUpdateFrequency,
		PodStartLatency:       f.PodStartLatency,
		Devices:               f.Devices,
		DeviceDriver:          f.DeviceDriver,
		KeepNotReadyTaint:     !f.ManageTaints,
		DeleteNodesOnExit:     f.DeleteNodesOnExit,
		Workers:               f.Workers,
	}
	for _, z := range f.Zones {
		if z = strings.TrimSpace(z); z != "" {
			opts.Zones = append(opts.Zones, z)
		}
	}
	for _, q := range []struct {
		flag, value string
		into        *resource.Quantity
	}{{"--cpu", f.CPU, &opts.CPU}, {"--memory", f.Memory, &opts.Memory}, {"--ephemeral-storage", f.EphemeralStorage, &opts.EphemeralStorage}} {
		v, err := resource.ParseQuantity(q.value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", q.flag, q.value, err))
			continue
		}
		if v.IsZero() {
			errs = append(errs, fmt.Errorf("%s must be more than 0", q.flag))
		}
		*q.into = v
	}
	if f.Pods < 1 {
		errs = append(errs, fmt.Errorf("--pods %d must be at least 1", f.Pods))
	}
	if f.LeaseDuration <= 0 {
		errs = append(errs, fmt.Errorf("--lease-duration %v must be positive", f.LeaseDuration))
	}
	if f.LeaseRenewInterval < 0 {
		errs = append(errs, fmt.Errorf("--lease-renew-interval %v must not be negative", f.LeaseRenewInterval))
	}
	if f.Workers < 0 {
		errs = append(errs, fmt.Errorf("--workers %d must not be negative", f.Workers))
	}
	if f.QPS <= 0 || f.Burst < 1 {
		errs = append(errs, fmt.Errorf("--qps and --burst must be positive (got %v, %d)", f.QPS, f.Burst))
	}
	labels, err := ParseLabels(f.Labels)
	if err != nil {
		errs = append(errs, fmt.Errorf("--labels: %w", err))
	}
	opts.Labels = labels
	taints, err := ParseTaints(f.Taints)
	if err != nil {
		errs = append(errs, fmt.Errorf("--taints: %w", err))
	}
	opts.Taints = taints
	if f.NodeFile != "" {
		if f.NodesSet {
			errs = append(errs, errors.New("--nodes and --node-file are mutually exclusive"))
		}
		data, err := readFile(f.NodeFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--node-file: %w", err))
		} else if opts.Templates, err = ParseNodeFile(data); err != nil {
			errs = append(errs, fmt.Errorf("--node-file %s: %w", f.NodeFile, err))
		}
	}
	if len(errs) == 0 {
		if err := opts.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	kubeconfig := f.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		dataDir := getenv(DataDirEnv)
		if dataDir == "" {
			dataDir = server.DefaultDataDir
		}
		kubeconfig = filepath.Join(dataDir, pki.AdminKubeconfigFile)
	}
	return Config{Kubeconfig: kubeconfig, QPS: f.QPS, Burst: f.Burst, ReportInterval: f.ReportInterval, Options: opts}, nil
}

// ParseLabels parses key=value pairs.
func ParseLabels(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	labels := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", p)
		}
		labels[k] = v
	}
	return labels, nil
}

// ParseTaints parses taints written as kubectl taint does: key=value:Effect
// or key:Effect.
func ParseTaints(specs []string) ([]corev1.Taint, error) {
	var taints []corev1.Taint
	for _, s := range specs {
		s = strings.TrimSpace(s)
		kv, effect, ok := strings.Cut(s, ":")
		if !ok || kv == "" || effect == "" {
			return nil, fmt.Errorf("%q is not key=value:Effect", s)
		}
		k, v, _ := strings.Cut(kv, "=")
		taints = append(taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	return taints, nil
}

// ParseNodeFile parses a YAML list of node templates, refusing unknown
// fields.
func ParseNodeFile(data []byte) ([]simulate.NodeTemplate, error) {
	var templates []simulate.NodeTemplate
	if err := yaml.UnmarshalStrict(data, &templates); err != nil {
		return nil, err
	}
	if len(templates) == 0 {
		return nil, errors.New("no node templates")
	}
	return templates, nil
}

// Run starts the simulator and blocks until ctx is done.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	restConfig, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	restConfig.QPS, restConfig.Burst = cfg.QPS, cfg.Burst
	// Protobuf, as kubelets speak it: cheaper for both ends.
	restConfig.ContentType = runtime.ContentTypeProtobuf
	restConfig.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	restConfig.UserAgent = "skiff-simulate"
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	sim := simulate.New(client, cfg.Options)
	nodes := len(sim.NodeNames())
	start := time.Now()
	go func() {
		select {
		case <-sim.Ready():
			fmt.Fprintf(out, "%d simulated nodes Ready in %v\n", nodes, time.Since(start).Round(time.Millisecond))
		case <-ctx.Done():
		}
	}()
	if cfg.ReportInterval > 0 {
		go report(ctx, sim, cfg.ReportInterval, out)
	}
	return sim.Start(ctx)
}

// report prints the simulator's API writes per second every interval.
func report(ctx context.Context, sim *simulate.Simulator, interval time.Duration, out io.Writer) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last, lastAt := sim.Stats(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s := sim.Stats()
			secs := now.Sub(lastAt).Seconds()
			rate := func(a, b int64) float64 { return float64(a-b) / secs }
			fmt.Fprintf(out, "writes/s %.1f (lease %.1f, node status %.1f, pod status %.1f, pod deletes %.1f), errors %d\n",
				rate(s.Writes(), last.Writes()), rate(s.LeaseUpdates+s.LeaseCreates, last.LeaseUpdates+last.LeaseCreates),
				rate(s.NodeStatusPatches, last.NodeStatusPatches), rate(s.PodStatusUpdates, last.PodStatusUpdates),
				rate(s.PodDeletes, last.PodDeletes), s.Errors)
			last, lastAt = s, now
		}
	}
}
