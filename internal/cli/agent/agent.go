// Package agent is the `skiff agent` command: a worker node (kubelet and,
// with them, the node's containerd) joining a Skiff cluster.
package agent

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/agent"
	"github.com/skiff-sh/skiff/internal/agent/bootstrap"
	"github.com/skiff-sh/skiff/internal/agent/routes"
	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	proxycli "github.com/skiff-sh/skiff/internal/cli/proxy"
	"github.com/skiff-sh/skiff/internal/kubelet"
	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
	"github.com/skiff-sh/skiff/internal/proxy"
)

// Flags are the command-line flags of `skiff agent`.
type Flags struct {
	DataDir                  string
	Server                   string
	Token                    string
	Kubeconfig               string
	NodeName                 string
	NodeIP                   string
	NodeLabels               []string
	RegisterWithTaints       []string
	KubeReserved             string
	SystemReserved           string
	MaxPods                  int
	PodCIDR                  string
	ContainerRuntimeEndpoint string
	CNIConfDir               string
	ClusterDNS               []string
	ClusterDomain            string
	KubeletPort              int
	ContainerLogMaxSize      string
	ContainerLogMaxFiles     int
	EvictionGC               kubelet.EvictionGCFlags
	CgroupRoot               string
	ClusterCIDR              string
	NodePortAddresses        []string
}

// DefaultFlags work on a fresh machine given a kubeconfig.
func DefaultFlags() Flags {
	return Flags{
		DataDir:              "/var/lib/skiff",
		MaxPods:              kubelet.DefaultMaxPods,
		ClusterDNS:           []string{kubelet.DefaultClusterDNS},
		ClusterDomain:        kubelet.DefaultClusterDomain,
		KubeletPort:          kubelet.DefaultPort,
		ContainerLogMaxSize:  "10Mi",
		ContainerLogMaxFiles: kubeletserver.DefaultContainerLogMaxFiles,
		EvictionGC:           kubelet.DefaultEvictionGCFlags(),
		CgroupRoot:           "/",
		ClusterCIDR:          routes.DefaultClusterCIDR.String(),
	}
}

// NewCommand builds `skiff agent`.
func NewCommand() *cobra.Command {
	f := DefaultFlags()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node agent: the kubelet with its own containerd, joined to a cluster",
		Long: `Run a node agent on this machine.

It starts the containerd built into skiff (or uses --container-runtime-endpoint),
registers this machine as a Node, and runs the pods the scheduler binds to it.
The API server is named by --server with --token (the server's
<data-dir>/token): the agent checks the server's CA by the token, obtains a node
client certificate and a kubelet serving certificate, and keeps them in
<data-dir>/agent; or by --kubeconfig with credentials. SIGINT or SIGTERM stops the kubelet and containerd; the pods'
containers keep running and are adopted at the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			cmd.SilenceUsage = true
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			a := agent.New(cfg)
			return a.Start(ctx)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.DataDir, "data-dir", f.DataDir, "directory for the agent's state (<data-dir>/agent: containerd, images to import, pod volumes)")
	fs.StringVar(&f.Server, "server", f.Server, "URL of the API server to join, e.g. https://10.0.0.1:6443 (with --token)")
	fs.StringVar(&f.Token, "token", f.Token, "join token printed by skiff server (<data-dir>/token on the server)")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", f.Kubeconfig, "kubeconfig with the node's credentials (instead of --server/--token)")
	fs.StringVar(&f.NodeName, "node-name", f.NodeName, "name of the Node (default: the hostname)")
	fs.StringVar(&f.NodeIP, "node-ip", f.NodeIP, "InternalIP the node reports (default: the address of the default route's interface)")
	fs.StringSliceVar(&f.NodeLabels, "node-labels", f.NodeLabels, "labels to add to the Node at registration, key=value[,key=value]")
	fs.StringSliceVar(&f.RegisterWithTaints, "register-with-taints", f.RegisterWithTaints, "taints the Node is registered with, key[=value]:Effect[,...]")
	fs.StringVar(&f.KubeReserved, "kube-reserved", f.KubeReserved, "resources reserved for Kubernetes components, e.g. cpu=100m,memory=256Mi")
	fs.StringVar(&f.SystemReserved, "system-reserved", f.SystemReserved, "resources reserved for the system, e.g. cpu=100m,memory=256Mi")
	fs.IntVar(&f.MaxPods, "max-pods", f.MaxPods, "most pods this node runs")
	fs.StringVar(&f.PodCIDR, "pod-cidr", f.PodCIDR, "pod CIDR to set on the Node when it has none (for clusters without node IPAM)")
	fs.StringVar(&f.ContainerRuntimeEndpoint, "container-runtime-endpoint", f.ContainerRuntimeEndpoint, "existing CRI socket to use instead of the built-in containerd, e.g. unix:///run/containerd/containerd.sock")
	fs.StringVar(&f.CNIConfDir, "cni-conf-dir", f.CNIConfDir, "where to write the CNI config for an external runtime (default /etc/cni/net.d)")
	fs.StringSliceVar(&f.ClusterDNS, "cluster-dns", f.ClusterDNS, "DNS server IPs for ClusterFirst pods")
	fs.StringVar(&f.ClusterDomain, "cluster-domain", f.ClusterDomain, "cluster DNS domain")
	fs.IntVar(&f.KubeletPort, "kubelet-port", f.KubeletPort, "port of the kubelet API (logs, exec, port-forward, metrics), advertised in the Node's status")
	fs.StringVar(&f.ContainerLogMaxSize, "container-log-max-size", f.ContainerLogMaxSize, "size at which a container's log file is rotated")
	fs.IntVar(&f.ContainerLogMaxFiles, "container-log-max-files", f.ContainerLogMaxFiles, "most log files kept per container, the live one included")
	f.EvictionGC.AddFlags(fs)
	fs.StringVar(&f.CgroupRoot, "cgroup-root", f.CgroupRoot, "cgroup under which the pods' kubepods hierarchy is made; give each agent sharing a host its own, e.g. /skiff-node2")
	fs.StringVar(&f.ClusterCIDR, "cluster-cidr", f.ClusterCIDR, "the cluster's whole pod network: traffic from pods leaving it is masqueraded, traffic between pods on different nodes is routed as it is")
	proxycli.AddNodePortAddressesFlag(fs, &f.NodePortAddresses)
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	for _, name := range []string{"v", "vmodule"} {
		fs.AddGoFlag(logFlags.Lookup(name))
	}
	return cmd
}

// Config validates the flags into an agent.Config.
func (f Flags) Config() (agent.Config, error) {
	var errs []error
	dataDir, err := filepath.Abs(f.DataDir)
	if err != nil || strings.TrimSpace(f.DataDir) == "" {
		errs = append(errs, errors.New("--data-dir must name a directory"))
	}
	var restConfig *rest.Config
	switch {
	case f.Kubeconfig != "":
		restConfig, err = clientcmd.BuildConfigFromFlags(f.Server, f.Kubeconfig)
		if err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig: %w", err))
		}
	case f.Server != "" && f.Token != "":
		if _, err := bootstrap.ParseToken(f.Token); err != nil {
			errs = append(errs, fmt.Errorf("--token: %w", err))
		}
	case f.Server != "" || f.Token != "":
		errs = append(errs, errors.New("--server and --token go together"))
	default:
		errs = append(errs, errors.New("--kubeconfig (or --server with --token) is required"))
	}
	name := f.NodeName
	if name == "" {
		name, _ = os.Hostname()
	}
	name = strings.ToLower(name)
	if f.NodeIP != "" && net.ParseIP(f.NodeIP) == nil {
		errs = append(errs, fmt.Errorf("--node-ip %q is not an IP address", f.NodeIP))
	}
	labels, err := ParseLabels(f.NodeLabels)
	if err != nil {
		errs = append(errs, fmt.Errorf("--node-labels: %w", err))
	}
	// As upstream's kubelet: labels NodeRestriction would refuse are an
	// error now, not a registration that never succeeds.
	var restricted []string
	for k := range labels {
		if !admission.NodeLabelAllowed(k) {
			restricted = append(restricted, k)
		}
	}
	if len(restricted) > 0 {
		slices.Sort(restricted)
		errs = append(errs, fmt.Errorf("--node-labels: a node may not set %s on itself (NodeRestriction): kubernetes.io and k8s.io labels must be under kubelet.kubernetes.io or node.kubernetes.io, or one of the kubelet's own (kubernetes.io/hostname, topology.kubernetes.io/zone, ...), and node-restriction.kubernetes.io labels are for admins; set them with kubectl label", strings.Join(restricted, ", ")))
	}
	taints, err := ParseTaints(f.RegisterWithTaints)
	if err != nil {
		errs = append(errs, fmt.Errorf("--register-with-taints: %w", err))
	}
	kubeReserved, err := ParseResources(f.KubeReserved)
	if err != nil {
		errs = append(errs, fmt.Errorf("--kube-reserved: %w", err))
	}
	systemReserved, err := ParseResources(f.SystemReserved)
	if err != nil {
		errs = append(errs, fmt.Errorf("--system-reserved: %w", err))
	}
	if f.MaxPods <= 0 {
		errs = append(errs, errors.New("--max-pods must be positive"))
	}
	if f.PodCIDR != "" {
		if _, _, err := net.ParseCIDR(f.PodCIDR); err != nil {
			errs = append(errs, fmt.Errorf("--pod-cidr: %w", err))
		}
	}
	for _, ip := range f.ClusterDNS {
		if net.ParseIP(ip) == nil {
			errs = append(errs, fmt.Errorf("--cluster-dns %q is not an IP address", ip))
		}
	}
	rotation, err := kubeletserver.ParseRotation(f.ContainerLogMaxSize, f.ContainerLogMaxFiles)
	if err != nil {
		errs = append(errs, err)
	}
	if f.KubeletPort <= 0 || f.KubeletPort > 65535 {
		errs = append(errs, fmt.Errorf("--kubelet-port %d is not a port", f.KubeletPort))
	}
	clusterCIDR, err := netip.ParsePrefix(f.ClusterCIDR)
	if err != nil || !clusterCIDR.Addr().Is4() {
		errs = append(errs, fmt.Errorf("--cluster-cidr %q is not an IPv4 CIDR", f.ClusterCIDR))
	}
	nodePortCIDRs, nodePortPrimary, err := proxy.ParseNodePortAddresses(f.NodePortAddresses)
	if err != nil {
		errs = append(errs, err)
	}
	if !strings.HasPrefix(f.CgroupRoot, "/") {
		errs = append(errs, fmt.Errorf("--cgroup-root %q must be an absolute cgroup path", f.CgroupRoot))
	}
	var evictionGC kubelet.Options
	if err := f.EvictionGC.Apply(&evictionGC); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return agent.Config{}, err
	}
	var join *bootstrap.Options
	if restConfig == nil {
		var addrs []string
		if f.NodeIP != "" {
			addrs = append(addrs, f.NodeIP)
		}
		join = &bootstrap.Options{Server: f.Server, Token: f.Token, NodeName: name, ServingAddresses: addrs}
	}
	return agent.Config{
		DataDir:                  dataDir,
		RESTConfig:               restConfig,
		Join:                     join,
		ContainerRuntimeEndpoint: f.ContainerRuntimeEndpoint,
		CNIConfDir:               f.CNIConfDir,
		ClusterCIDR:              clusterCIDR.Masked().String(),
		NodePortCIDRs:            nodePortCIDRs,
		NodePortPrimary:          nodePortPrimary,
		Kubelet: kubelet.Options{
			Eviction:           evictionGC.Eviction,
			GC:                 evictionGC.GC,
			CgroupRoot:         path.Clean(f.CgroupRoot),
			NodeName:           name,
			NodeIP:             f.NodeIP,
			NodeLabels:         labels,
			RegisterWithTaints: taints,
			KubeReserved:       kubeReserved,
			SystemReserved:     systemReserved,
			MaxPods:            f.MaxPods,
			PodCIDR:            f.PodCIDR,
			ClusterDNS:         f.ClusterDNS,
			ClusterDomain:      f.ClusterDomain,
			Port:               f.KubeletPort,
		},
		KubeletAPI: agent.KubeletAPIConfig{Rotation: rotation},
	}, nil
}

// ParseLabels parses key=value pairs.
func ParseLabels(in []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range in {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// ParseTaints parses key[=value]:Effect.
func ParseTaints(in []string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for _, s := range in {
		kv, effect, ok := strings.Cut(strings.TrimSpace(s), ":")
		if !ok {
			return nil, fmt.Errorf("%q has no effect (key=value:Effect)", s)
		}
		switch corev1.TaintEffect(effect) {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("%q: effect must be NoSchedule, PreferNoSchedule or NoExecute", s)
		}
		k, v, _ := strings.Cut(kv, "=")
		if k == "" {
			return nil, fmt.Errorf("%q has no key", s)
		}
		out = append(out, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	return out, nil
}

// ParseResources parses name=quantity pairs.
func ParseResources(in string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	if strings.TrimSpace(in) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(in, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not name=quantity", kv)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}
