// Package agent wires the node agent of `skiff agent` and of `skiff
// server` (unless --disable-agent): the agent's own containerd (supervised,
// internal/agent/containerd) or an existing CRI socket, then the kubelet
// talking to it. Start order: containerd → CRI clients → kubelet; stop in
// reverse.
package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	internalapi "k8s.io/cri-api/pkg/apis"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/agent/bootstrap"
	"github.com/skiff-sh/skiff/internal/agent/containerd"
	"github.com/skiff-sh/skiff/internal/agent/routes"
	"github.com/skiff-sh/skiff/internal/kubelet"
	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
	"github.com/skiff-sh/skiff/internal/localpath"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/proxy"
	proxynode "github.com/skiff-sh/skiff/internal/proxy/node"
	"github.com/skiff-sh/skiff/internal/server/lifecycle"
)

// DefaultReadyTimeout bounds each start step.
const DefaultReadyTimeout = 2 * time.Minute

// Config is the validated configuration of a node agent.
type Config struct {
	// DataDir holds the agent's state under <data-dir>/agent.
	DataDir string
	// RESTConfig is the agent's identity towards the API server; when nil,
	// Join obtains one (a node client certificate) with a join token.
	RESTConfig *rest.Config
	Join       *bootstrap.Options
	// ContainerRuntimeEndpoint is an existing CRI socket
	// ("unix:///run/containerd/containerd.sock"); empty runs the agent's
	// own containerd.
	ContainerRuntimeEndpoint string
	// CNIConfDir is where the CNI config is written when an external
	// runtime is used (default /etc/cni/net.d); the agent's own containerd
	// reads <data-dir>/agent/etc/cni/net.d.
	CNIConfDir string
	// Containerd tunes the agent's own containerd.
	Containerd containerd.Options
	// Kubelet are the kubelet's options; NodeName is required, RootDir
	// defaults to <data-dir>/agent/kubelet.
	Kubelet kubelet.Options
	// DisableServiceProxy leaves Services and NetworkPolicy to a separate
	// `skiff proxy`; by default the agent runs both (internal/proxy/node).
	DisableServiceProxy bool
	// ReadyTimeout bounds each start step (default 2 min).
	ReadyTimeout time.Duration
	// ClusterCIDR is the whole pod network, an IPv4 CIDR (default
	// 10.42.0.0/16): the pod routes masquerade what leaves it, the proxy
	// what enters it.
	ClusterCIDR string
	// NodePortCIDRs, when not nil, are the only local addresses NodePorts
	// and health-check node ports answer on; NodePortPrimary answers on
	// the node's own address only (--nodeport-addresses, as kube-proxy's).
	NodePortCIDRs   []netip.Prefix
	NodePortPrimary bool
	// KubeletAPI serves the kubelet API (logs, exec, port-forward, metrics)
	// on Kubelet.Port and rotates container logs; nil Certificate leaves
	// both out. See internal/kubelet/server.
	KubeletAPI KubeletAPIConfig
}

// KubeletAPIConfig is what the kubelet API server needs from the wiring.
type KubeletAPIConfig struct {
	// Certificate is the serving certificate (signed by the cluster CA).
	// When nil, a joining agent uses the one the join obtained, and one
	// given a RESTConfig asks for one (bootstrap.Serving).
	Certificate *tls.Certificate
	// CertFile and KeyFile, when set, hold Certificate: the kubelet API
	// serves what they hold, reloaded when they change (renewed by the
	// agent's serving Rotator, by skiff server, or by hand). A joined or
	// --kubeconfig agent sets them to its own files.
	CertFile, KeyFile string
	// ClientCA verifies its clients (the cluster CA).
	ClientCA *x509.CertPool
	// Rotation is --container-log-max-size and --container-log-max-files.
	Rotation kubeletserver.RotatorOptions
}

// Agent is one node agent.
type Agent struct {
	cfg   Config
	ready chan struct{}

	kubelet *kubelet.Kubelet
	runtime internalapi.RuntimeService
	images  internalapi.ImageManagerService
	cd      *containerd.Containerd
	started chan struct{}
	// identity is the node's joined identity (nil with a given RESTConfig).
	identity *bootstrap.Identity
}

// Identity returns the credentials obtained by joining (the kubelet
// serving certificate among them), or nil when the agent was given a
// RESTConfig. It is set before Ready closes.
func (a *Agent) Identity() *bootstrap.Identity { return a.identity }

// New returns an agent; it does nothing until Start.
func New(cfg Config) *Agent {
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.Kubelet.RootDir == "" {
		cfg.Kubelet.RootDir = filepath.Join(cfg.DataDir, "agent", "kubelet")
	}
	return &Agent{cfg: cfg, ready: make(chan struct{}), started: make(chan struct{})}
}

// Ready is closed once the kubelet is registered and serving pods.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Kubelet returns the running kubelet (nil before Start got that far), for
// node components wired beside it (the kubelet API server, the proxy).
func (a *Agent) Kubelet() *kubelet.Kubelet {
	select {
	case <-a.started:
		return a.kubelet
	default:
		return nil
	}
}

// Start runs the agent until ctx ends.
func (a *Agent) Start(ctx context.Context) (err error) {
	logger := klog.FromContext(ctx).WithName("agent")
	ctx = klog.NewContext(ctx, logger)
	if err := os.MkdirAll(filepath.Join(a.cfg.DataDir, "agent"), 0o700); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	clusterCIDR := routes.DefaultClusterCIDR
	if a.cfg.ClusterCIDR != "" {
		p, err := netip.ParsePrefix(a.cfg.ClusterCIDR)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("agent: cluster CIDR %q is not an IPv4 CIDR", a.cfg.ClusterCIDR)
		}
		clusterCIDR = p.Masked()
	}
	// The node's InternalIP is settled before the join, so that the
	// kubelet serving certificate names the address the API server dials.
	if a.cfg.Kubelet.NodeIP == "" {
		a.cfg.Kubelet.NodeIP = primaryAddress()
	}
	if a.cfg.RESTConfig == nil {
		if a.cfg.Join == nil {
			return errors.New("agent: no API server credentials")
		}
		jo := *a.cfg.Join
		if jo.Dir == "" {
			jo.Dir = filepath.Join(a.cfg.DataDir, "agent")
		}
		if jo.NodeName == "" {
			jo.NodeName = a.cfg.Kubelet.NodeName
		}
		if !slices.Contains(jo.ServingAddresses, a.cfg.Kubelet.NodeIP) {
			jo.ServingAddresses = append(slices.Clone(jo.ServingAddresses), a.cfg.Kubelet.NodeIP)
		}
		id, err := bootstrap.Join(ctx, jo)
		if err != nil {
			return fmt.Errorf("agent: join %s: %w", jo.Server, err)
		}
		a.identity = id
		a.cfg.RESTConfig = id.RESTConfig
		if a.cfg.KubeletAPI.Certificate == nil {
			// The kubelet API serves with the certificate the join obtained
			// and trusts the cluster CA for its clients.
			caPEM, err := os.ReadFile(id.CAFile)
			if err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(caPEM)
			a.cfg.KubeletAPI.Certificate, a.cfg.KubeletAPI.ClientCA = &id.Serving, pool
			a.cfg.KubeletAPI.CertFile, a.cfg.KubeletAPI.KeyFile = id.ServingCertFile, id.ServingKeyFile
			// The serving certificate renews itself too (upstream's
			// --rotate-server-certificates), and the kubelet API reloads it.
			a.rotate(ctx, &bootstrap.Rotator{Dir: jo.Dir, Node: jo.NodeName, Serving: true, Addresses: jo.ServingAddresses, Config: id.RESTConfig})
		}
		logger.Info("Joined the cluster", "server", jo.Server, "node", jo.NodeName, "reused", id.Reused)
		// The client certificate renews itself by CSR before it expires
		// (bootstrap.Rotator; client-go reloads the kubeconfig's files).
		a.rotate(ctx, &bootstrap.Rotator{Dir: jo.Dir, Node: jo.NodeName, Config: id.RESTConfig})
	}

	endpoint := a.cfg.ContainerRuntimeEndpoint
	kopts := a.cfg.Kubelet
	// Host-local's leases live with the agent (several agents may share a
	// host), and the pod routes do the masquerading (internal/agent/routes).
	if kopts.CNI.IPAMDataDir == "" {
		kopts.CNI.IPAMDataDir = filepath.Join(a.cfg.DataDir, "agent", "cni", "networks")
	}
	kopts.CNI.NoMasquerade = true
	var handles []*lifecycle.Handle
	defer func() {
		for i := len(handles) - 1; i >= 0; i-- {
			if stopErr := handles[i].Stop(); stopErr != nil && !errors.Is(stopErr, context.Canceled) {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	var cdDone <-chan struct{}
	if endpoint == "" {
		a.cd = containerd.New(a.cfg.DataDir, a.cfg.Containerd)
		h, err := lifecycle.Launch(ctx, "containerd", a.cd, a.cfg.ReadyTimeout)
		if err != nil {
			return err
		}
		handles = append(handles, h)
		cdDone = h.Done()
		endpoint = a.cd.Endpoint()
		if kopts.CNIConfDir == "" {
			kopts.CNIConfDir = a.cd.CNIConfDir()
		}
	} else if kopts.CNIConfDir == "" {
		kopts.CNIConfDir = a.cfg.CNIConfDir
		if kopts.CNIConfDir == "" {
			kopts.CNIConfDir = "/etc/cni/net.d"
		}
	}

	rs, err := criclient.NewRemoteRuntimeService(ctx, endpoint, 2*time.Minute, nil, false)
	if err != nil {
		return fmt.Errorf("agent: CRI runtime %s: %w", endpoint, err)
	}
	is, err := criclient.NewRemoteImageService(ctx, endpoint, 2*time.Minute, nil, false)
	if err != nil {
		return fmt.Errorf("agent: CRI images %s: %w", endpoint, err)
	}
	// The kubelet's CRI calls are counted in kubelet_runtime_operations_*
	// (served by the kubelet API's /metrics).
	kubeletMetrics := kubeletserver.NewMetrics(nil)
	kopts.Metrics = kubeletMetrics
	rs = kubeletserver.InstrumentRuntime(rs, kubeletMetrics)
	a.runtime, a.images = rs, is

	cfg := rest.CopyConfig(a.cfg.RESTConfig)
	cfg.UserAgent = "skiff-kubelet/" + kubelet.Version
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.kubelet = kubelet.New(client, rs, is, kopts)
	close(a.started)
	kh, err := lifecycle.Launch(ctx, "kubelet", a.kubelet, a.cfg.ReadyTimeout)
	if err != nil {
		return err
	}
	handles = append(handles, kh)
	// Routes to the other nodes' pods, before the proxy sends traffic there.
	rh, err := lifecycle.Launch(ctx, "routes", routes.New(client, kopts.NodeName, routes.Options{ClusterCIDR: clusterCIDR}), a.cfg.ReadyTimeout)
	if err != nil {
		return err
	}
	handles = append(handles, rh)
	// The local-path provisioner of this node (internal/localpath).
	lp, err := localpath.New(client, kopts.NodeName, filepath.Join(a.cfg.DataDir, localpath.StorageDir), localpath.Options{})
	if err != nil {
		return fmt.Errorf("agent: local-path: %w", err)
	}
	lh, err := lifecycle.Launch(ctx, "local-path", lp, a.cfg.ReadyTimeout)
	if err != nil {
		return err
	}
	handles = append(handles, lh)
	launchAPI := func(api KubeletAPIConfig) (*lifecycle.Handle, error) {
		port := kopts.Port
		if port == 0 {
			port = kubelet.DefaultPort
		}
		opts := kubeletserver.Options{
			Address: fmt.Sprintf(":%d", port), Certificate: api.Certificate, ClientCA: api.ClientCA, NodeName: kopts.NodeName,
			Metrics: kubeletMetrics, APIClient: client, // tokens and authorization asked of the API server
		}
		if api.CertFile != "" {
			files, err := pki.NewCertificateFiles("kubelet-serving-cert", api.CertFile, api.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("agent: kubelet API: %w", err)
			}
			go func() { _ = files.Start(ctx) }() // watches until the agent stops
			opts.GetCertificate = files.GetCertificate
		}
		node, err := kubeletserver.NewNode(a.kubelet, rs, is, opts, api.Rotation)
		if err != nil {
			return nil, fmt.Errorf("agent: kubelet API: %w", err)
		}
		return lifecycle.Launch(ctx, "kubelet-api", node, a.cfg.ReadyTimeout)
	}
	var apiDone chan struct{}
	defer func() {
		if apiDone != nil {
			<-apiDone
		}
	}()
	if api := a.cfg.KubeletAPI; api.Certificate != nil {
		nh, err := launchAPI(api)
		if err != nil {
			return err
		}
		handles = append(handles, nh)
	} else {
		// Given credentials but no certificate (--kubeconfig): ask for a
		// serving certificate. A node asking for itself is approved at
		// once; otherwise the request waits for an admin, and the kubelet
		// API starts whenever it is issued.
		apiDone = make(chan struct{})
		apiCtx, apiCancel := context.WithCancel(ctx)
		defer apiCancel() // before apiDone is waited on (deferred earlier, run later)
		got := make(chan *lifecycle.Handle, 1)
		go func() {
			ctx := apiCtx
			defer close(apiDone)
			dir := filepath.Join(a.cfg.DataDir, "agent")
			cert, pool, err := bootstrap.Serving(ctx, a.cfg.RESTConfig, bootstrap.ServingOptions{
				NodeName: kopts.NodeName, Dir: dir, Addresses: []string{kopts.NodeIP},
			})
			if err != nil {
				if ctx.Err() == nil {
					logger.Error(err, "No kubelet API: pods' logs, exec and port-forward will answer 503")
				}
				got <- nil
				return
			}
			api.Certificate, api.ClientCA = &cert, pool
			api.CertFile, api.KeyFile = filepath.Join(dir, bootstrap.ServingCertFile), filepath.Join(dir, bootstrap.ServingKeyFile)
			// Renewed by CSR before it expires, as a joined agent's.
			a.rotate(ctx, &bootstrap.Rotator{Dir: dir, Node: kopts.NodeName, Serving: true, Addresses: []string{kopts.NodeIP}, Config: a.cfg.RESTConfig})
			nh, err := launchAPI(api)
			if err != nil {
				logger.Error(err, "Kubelet API did not start")
				got <- nil
				return
			}
			got <- nh
			<-ctx.Done()
			_ = nh.Stop()
		}()
		select {
		case <-got:
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			logger.Info("Waiting for the kubelet serving certificate to be approved (kubectl get csr; kubectl certificate approve NAME); the kubelet API starts once it is issued", "node", kopts.NodeName)
		}
	}
	if !a.cfg.DisableServiceProxy {
		// The service proxy and NetworkPolicy for this node (internal/proxy/node).
		services, err := proxynode.New(a.cfg.RESTConfig, proxynode.Options{NodeName: kopts.NodeName, Proxy: proxy.Options{
			ClusterCIDR: clusterCIDR, NodePortCIDRs: a.cfg.NodePortCIDRs, NodePortPrimary: a.cfg.NodePortPrimary,
		}})
		if err != nil {
			return fmt.Errorf("agent: proxy: %w", err)
		}
		ph, err := lifecycle.Launch(ctx, "proxy", services, a.cfg.ReadyTimeout)
		if err != nil {
			return err
		}
		handles = append(handles, ph)
	}
	logger.Info("Node agent ready", "node", kopts.NodeName, "runtime", endpoint)
	close(a.ready)

	select {
	case <-ctx.Done():
		return nil
	case <-kh.Done():
		return fmt.Errorf("kubelet stopped: %w", orStopped(kh.Err()))
	case <-cdDone:
		return fmt.Errorf("containerd supervisor stopped: %w", orStopped(handles[0].Err()))
	}
}

// rotate runs r until ctx is done.
func (a *Agent) rotate(ctx context.Context, r *bootstrap.Rotator) {
	go func() {
		if err := r.Start(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Certificate rotation stopped", "serving", r.Serving)
		}
	}()
}

// primaryAddress is the address of the interface of the default route
// (IPv4 first), as the kubelet picks it; loopback when there is none.
func primaryAddress() string {
	for _, target := range []string{"192.0.2.1:9", "[2001:db8::1]:9"} {
		c, err := net.Dial("udp", target)
		if err != nil {
			continue
		}
		ip := c.LocalAddr().(*net.UDPAddr).IP
		c.Close()
		if !ip.IsLoopback() && !ip.IsUnspecified() {
			return ip.String()
		}
	}
	return "127.0.0.1"
}

func orStopped(err error) error {
	if err != nil {
		return err
	}
	return errors.New("exited")
}
