package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/agent"
	"github.com/skiff-sh/skiff/internal/agent/containerd"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/server/lifecycle"
)

// LocalPodCIDR is the pod CIDR of the server's own node: the first /24 of
// the pod network, set at registration so the node can run pods before (or
// without) a node-IPAM controller.
const LocalPodCIDR = "10.42.0.0/24"

// launchAgent starts the node agent of this host in process (unless
// --disable-agent): the node is named after the hostname and talks to the
// API server with restConfig, the node's own identity
// (system:node:<hostname> in system:nodes, identities.go).
func launchAgent(ctx context.Context, cfg Config, restConfig *rest.Config) (*lifecycle.Handle, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the node agent needs root (containerd, runc, CNI): run skiff server as root, or pass --disable-agent for a control plane without a node")
	}
	ac := cfg.Agent
	ac.DataDir = cfg.DataDir
	ac.RESTConfig = restConfig
	if ac.Kubelet.NodeName == "" {
		host, _ := os.Hostname()
		ac.Kubelet.NodeName = strings.ToLower(host)
	}
	if ac.Kubelet.PodCIDR == "" {
		ac.Kubelet.PodCIDR = LocalPodCIDR
	}
	if ac.KubeletAPI.Certificate == nil {
		// The in-process agent's kubelet API certificate comes from the
		// cluster CA directly, for the node's name and addresses.
		bundle, err := pki.Ensure(PKIDir(cfg.DataDir), pki.Options{BindAddress: cfg.BindAddress})
		if err != nil {
			return nil, err
		}
		cert, err := bundle.EnsureKubeletServing(pki.KubeletServingCertFile, pki.KubeletServingKeyFile, ac.Kubelet.NodeName, kubeletAddresses(), pki.Options{})
		if err != nil {
			return nil, err
		}
		ac.KubeletAPI.Certificate, ac.KubeletAPI.ClientCA = &cert, bundle.CAPool
		// Served from the files, reloaded when the server renews them.
		ac.KubeletAPI.CertFile = filepath.Join(PKIDir(cfg.DataDir), pki.KubeletServingCertFile)
		ac.KubeletAPI.KeyFile = filepath.Join(PKIDir(cfg.DataDir), pki.KubeletServingKeyFile)
	}
	a := agent.New(ac)
	return lifecycle.Launch(ctx, "agent", a, 0)
}

func nodeName(cfg Config) string {
	if cfg.Agent.Kubelet.NodeName != "" {
		return cfg.Agent.Kubelet.NodeName
	}
	host, _ := os.Hostname()
	return strings.ToLower(host)
}

// kubeletAddresses are the host's unicast addresses, for the kubelet
// serving certificate (the API server reaches the kubelet at the node's
// InternalIP).
func kubeletAddresses() []string {
	var out []string
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

// agentRuntimes are the OCI runtimes the in-process agent's containerd
// offers beside runc (crun when it is on PATH); none with an external CRI
// socket, whose handlers are its own business.
func agentRuntimes(cfg Config) []containerd.Runtime {
	if cfg.DisableAgent || cfg.Agent.ContainerRuntimeEndpoint != "" {
		return nil
	}
	if rts := cfg.Agent.Containerd.Runtimes; rts != nil {
		return rts
	}
	found, _ := containerd.DetectRuntimes()
	return found
}

// ensureRuntimeClasses creates a RuntimeClass of each such runtime, named
// after it with the handler of its name (as k3s ships RuntimeClasses for the
// runtimes it configures), so a pod picks crun with `runtimeClassName:
// crun`. An existing RuntimeClass of that name is left as it is.
func ensureRuntimeClasses(ctx context.Context, client kubernetes.Interface, runtimes []containerd.Runtime) error {
	for _, rt := range runtimes {
		rc := &nodev1.RuntimeClass{
			ObjectMeta: metav1.ObjectMeta{Name: rt.Name, Labels: map[string]string{"app.kubernetes.io/managed-by": "skiff"}},
			Handler:    rt.Name,
		}
		_, err := client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("RuntimeClass %s: %w", rt.Name, err)
		}
	}
	return nil
}
