package sidebyside_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/internal/pki"
)

// controlPlane is an API server the benchmark drives: `skiff server`, or
// upstream's etcd and kube-apiserver (with, as asked, kube-controller-manager
// and kube-scheduler), each process started by the benchmark.
type controlPlane struct {
	host   string       // https://127.0.0.1:port
	admin  string       // the admin kubeconfig
	pki    string       // the PKI directory: ca.crt, ca.key, sa.key, <client>.crt
	config *rest.Config // admin, protobuf, not rate limited
	procs  []*proc      // in start order
}

func (c *controlPlane) client() kubernetes.Interface { return kubernetes.NewForConfigOrDie(c.config) }

// stop stops the processes, last started first.
func (c *controlPlane) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
}

// startSkiff starts `skiff server` in dir with args after the defaults
// (no agent, no cluster DNS, free ports).
func startSkiff(b *testing.B, dir, bin string, args ...string) *controlPlane {
	b.Helper()
	dataDir := filepath.Join(dir, "data")
	server := start(b, "skiff-server", bin, append([]string{"server", "--data-dir", dataDir,
		"--disable-agent", "--disable-cluster-dns",
		"--https-listen-port", "0", "--etcd-client-port", "0", "--etcd-peer-port", "0"}, args...)...)
	c := &controlPlane{admin: filepath.Join(dataDir, "admin.kubeconfig"), pki: filepath.Join(dataDir, "pki"), procs: []*proc{server}}
	server.waitFor(b, 2*time.Minute, "Skiff is ready")
	c.setConfig(b)
	return c
}

// upstream component sets for startUpstream.
const (
	apiServerOnly = iota // etcd and kube-apiserver
	allFour              // and kube-controller-manager and kube-scheduler
)

// startUpstream starts upstream v1.37.2's etcd and kube-apiserver in dir,
// and with allFour kube-controller-manager and kube-scheduler, on a PKI
// made by Skiff's own package (a CA, the serving and admin certificates,
// the service-account key, the components' client certificates), with
// the flags a kubeadm cluster passes them (Node,RBAC, service-account
// issuer, signing by the cluster CA) and leader election off.
func startUpstream(b *testing.B, dir string, components int) *controlPlane {
	b.Helper()
	bins := upstreamBinaries(b, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
	pkiDir := filepath.Join(dir, "pki")
	bundle, err := pki.Ensure(pkiDir, pki.Options{BindAddress: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	for name, user := range map[string]string{"kube-scheduler": "system:kube-scheduler", "kube-controller-manager": "system:kube-controller-manager"} {
		if _, _, err := bundle.EnsureClient(name, user, nil, pki.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	c := &controlPlane{pki: pkiDir}
	ok := false
	defer func() {
		if !ok {
			c.stop()
		}
	}()

	clientPort, peerPort := freePort(b), freePort(b)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	etcd := start(b, "etcd", bins["etcd"], "--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--snapshot-count", "10000")
	c.procs = append(c.procs, etcd)
	waitHTTP(b, etcd, etcdURL+"/health", nil)

	port := freePort(b)
	c.host = fmt.Sprintf("https://127.0.0.1:%d", port)
	apiserver := start(b, "kube-apiserver", bins["kube-apiserver"],
		"--etcd-servers", etcdURL, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--tls-cert-file", filepath.Join(pkiDir, pki.ServingCertFile), "--tls-private-key-file", filepath.Join(pkiDir, pki.ServingKeyFile),
		"--client-ca-file", filepath.Join(pkiDir, pki.CACertFile),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(pkiDir, pki.ServiceAccountPubKeyFile),
		"--service-account-signing-key-file", filepath.Join(pkiDir, pki.ServiceAccountKeyFile),
		"--authorization-mode", "Node,RBAC", "--service-cluster-ip-range", "10.43.0.0/16",
		"--allow-privileged", "--enable-admission-plugins", "NodeRestriction",
		// The kubernetes Endpoints may not name a loopback address.
		"--endpoint-reconciler-type", "none")
	c.procs = append(c.procs, apiserver)
	c.admin = filepath.Join(dir, "admin.kubeconfig")
	if err := bundle.WriteAdminKubeconfig(c.admin, c.host); err != nil {
		b.Fatal(err)
	}
	c.setConfig(b)
	admin, err := rest.HTTPClientFor(c.config)
	if err != nil {
		b.Fatal(err)
	}
	waitHTTP(b, apiserver, c.host+"/readyz", admin)

	if components == allFour {
		for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
			kc := filepath.Join(dir, name+".kubeconfig")
			if err := pki.WriteFileKubeconfig(kc, c.host, pkiDir, name); err != nil {
				b.Fatal(err)
			}
			args := []string{"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
				"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(freePort(b)), "--leader-elect=false"}
			if name == "kube-controller-manager" {
				args = append(args, "--controllers=*", "--use-service-account-credentials",
					"--service-account-private-key-file", filepath.Join(pkiDir, pki.ServiceAccountKeyFile),
					"--root-ca-file", filepath.Join(pkiDir, pki.CACertFile),
					"--cluster-signing-cert-file", filepath.Join(pkiDir, pki.CACertFile),
					"--cluster-signing-key-file", filepath.Join(pkiDir, pki.CAKeyFile))
			} else {
				// Skiff's scheduler's client rates (kube-scheduler's own, 50
				// and 100, would pace its bindings, not its work).
				args = append(args, "--kube-api-qps", "5000", "--kube-api-burst", "10000")
			}
			p := start(b, name, bins[name], args...)
			c.procs = append(c.procs, p)
		}
		for _, p := range c.procs[2:] {
			// Both log their leaderless start; what matters is that they run.
			select {
			case <-p.done:
				b.Fatalf("%s exited: %v\n%s", p.name, p.err, tail(p.output()))
			case <-time.After(2 * time.Second):
			}
		}
	}
	ok = true
	return c
}

// setConfig loads the admin kubeconfig as a protobuf client without
// client-side rate limits.
func (c *controlPlane) setConfig(b *testing.B) {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.admin)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c.config, c.host = cfg, cfg.Host
}

// waitHTTP waits until url answers 200, failing when p exits first.
func waitHTTP(b *testing.B, p *proc, url string, client *http.Client) {
	b.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			b.Fatalf("%s exited (%v) before %s answered:\n%s", p.name, p.err, url, tail(p.output()))
		case <-ctx.Done():
			b.Fatalf("%s: %s did not answer 200 in 2m:\n%s", p.name, url, tail(p.output()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// upstreamBinaries finds upstream's binaries in $SKIFF_UPSTREAM_BIN or the
// build script's cache, skipping the benchmark when one is missing.
func upstreamBinaries(b *testing.B, names ...string) map[string]string {
	b.Helper()
	dir := os.Getenv(upstreamBinEnv)
	if dir == "" {
		dir = upstreamCache
	}
	out := map[string]string{}
	for _, n := range names {
		bin := filepath.Join(dir, n)
		if _, err := os.Stat(bin); err != nil {
			b.Skipf("upstream %s v1.37.2 not built in %s (run `hack/upstream/build.sh %s`, or set %s)", n, dir, n, upstreamBinEnv)
		}
		out[n] = bin
	}
	return out
}
