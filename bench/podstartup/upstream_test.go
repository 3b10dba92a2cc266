package podstartup

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/agent/containerd"
	"github.com/skiff-sh/skiff/internal/kubelet/cni"
)

// upstreamNode is a node of upstream's kubelet (hack/upstream/build.sh
// kubelet) on Skiff's containerd (`skiff containerd` with the config the
// agent writes, started by the agent's own supervisor), registered with a
// `skiff server --disable-agent`.
type upstreamNode struct {
	name       string
	dir        string // <env>/kubelet: root dir, config, credentials, log
	kubelet    *exec.Cmd
	kubeletLog *os.File
	exited     chan struct{}
	cd         *containerd.Containerd
	cdCancel   context.CancelFunc
	cdDone     chan struct{}
	// cgroupRoot is the kubelet's --cgroup-root, made for it and removed
	// after it (so that it never touches /kubepods of Skiff's agents).
	cgroupRoot string
	// sysctls are the kernel tunables the kubelet sets at start (see
	// kubeletSysctls), as they were before it; restored after it.
	sysctls map[string]string
	// chains are the iptables chains that existed before the kubelet.
	chains map[string]bool
}

// kubeletSysctls are the tunables upstream's kubelet sets when it starts
// (protectKernelDefaults false, as kubeadm leaves it).
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// kubeletChains are the iptables chains upstream's kubelet makes (its
// canaries, the iptables-mode hint for kube-proxy, and KUBE-FIREWALL, which
// INPUT and OUTPUT jump to, against martian packets to 127.0.0.0/8).
var kubeletChains = []string{"KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT", "KUBE-FIREWALL"}

// upstreamBinaries are upstream's kubelet ($UPSTREAM_KUBELET, or built and
// cached by hack/upstream/build.sh) and the runc shim Skiff's agent uses
// (internal/agent/shim/build.sh, the one `make build` embeds).
func upstreamBinaries(dir string) (kubeletBin, shimBin string, err error) {
	kubeletBin = os.Getenv("UPSTREAM_KUBELET")
	if kubeletBin == "" {
		cmd := exec.Command(filepath.Join(repoRoot(), "hack", "upstream", "build.sh"), "kubelet")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return "", "", fmt.Errorf("hack/upstream/build.sh kubelet: %v", err)
		}
		kubeletBin = strings.TrimSpace(string(out))
	}
	build := exec.Command("sh", filepath.Join("internal", "agent", "shim", "build.sh"))
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build the runc shim: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(repoRoot(), "internal", "agent", "shim", containerdShim))
	if err != nil {
		return "", "", err
	}
	shimBin = filepath.Join(dir, containerdShim)
	return kubeletBin, shimBin, os.WriteFile(shimBin, data, 0o755)
}

const containerdShim = "containerd-shim-runc-v2"

// lockAgents takes /tmp/skiff-agent.lock, which every test and benchmark
// running a real node agent holds (test/e2e), and returns its release.
func lockAgents() (func(), error) {
	f, err := os.OpenFile("/tmp/skiff-agent.lock", os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// newSideEnv starts one side of BenchmarkUpstreamKubelet under the agent
// lock: "skiff" (a server with its agent, as BenchmarkPodStartup) or
// "upstream" (a server without one, Skiff's containerd and upstream's
// kubelet).
func newSideEnv(b *testing.B, side, bin, kubeletBin, shimBin string) (*env, error) {
	unlock, err := lockAgents()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "skiff-bench-podstartup")
	if err != nil {
		unlock()
		return nil, err
	}
	e := &env{dir: dir, out: &bytes.Buffer{}, unlock: unlock}
	if e.image, err = placeImage(b, dir); err != nil {
		e.stop()
		return nil, err
	}
	if side == "skiff" {
		err = e.startSkiff(bin)
	} else {
		err = e.startUpstream(bin, kubeletBin, shimBin)
	}
	if err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// startSkiff starts `skiff server` with its agent and waits until its node
// takes pods.
func (e *env) startSkiff(bin string) error {
	if err := e.startServer(bin); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(e.output(), "Node agent ready") {
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready:\n%s", e.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := e.connect(deadline); err != nil {
		return err
	}
	return e.waitNodeSchedulable(deadline, "")
}

// waitNodeSchedulable waits until the cluster has one node (named name,
// when given), Ready and without taints.
func (e *env) waitNodeSchedulable(deadline time.Time, name string) error {
	for {
		nodes, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err == nil && len(nodes.Items) == 1 && (name == "" || nodes.Items[0].Name == name) &&
			len(nodes.Items[0].Spec.Taints) == 0 && nodeReady(&nodes.Items[0]) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node not ready (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startUpstream starts the control plane (`skiff server --disable-agent`),
// Skiff's containerd with the agent's config, and upstream's kubelet on
// it; writes the CNI config for the node's pod CIDR as the agent does, and
// waits until the node takes pods.
func (e *env) startUpstream(bin, kubeletBin, shimBin string) error {
	if err := e.startServer(bin, "--disable-agent"); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	if err := e.connect(deadline); err != nil {
		return err
	}
	dataDir := filepath.Join(e.dir, "data")
	u := &upstreamNode{name: "upstream-kubelet", dir: filepath.Join(e.dir, "kubelet"), cdDone: make(chan struct{}), exited: make(chan struct{})}
	e.upstream = u
	if err := os.MkdirAll(u.dir, 0o700); err != nil {
		return err
	}

	// containerd as the agent runs it: the same supervisor, config and
	// start-up imports (the pause image, the images dir).
	u.cd = containerd.New(dataDir, containerd.Options{Binary: bin, ShimBinary: shimBin})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	u.cdCancel = cancel
	var cdErr error
	go func() {
		defer close(u.cdDone)
		cdErr = u.cd.Start(ctx)
	}()
	select {
	case <-u.cd.Ready():
	case <-u.cdDone:
		return fmt.Errorf("containerd: %v", cdErr)
	case <-time.After(time.Until(deadline)):
		return errors.New("containerd not ready")
	}

	if err := u.writeConfig(e); err != nil {
		return err
	}
	if err := u.prepareHost(); err != nil {
		return err
	}
	if err := u.startKubelet(kubeletBin); err != nil {
		return err
	}
	// The agent writes the CNI config once the node has its pod CIDR (from
	// the controller manager's node IPAM); so does this, the same config.
	for {
		n, err := e.client.CoreV1().Nodes().Get(context.Background(), u.name, metav1.GetOptions{})
		if err == nil && len(n.Spec.PodCIDRs) > 0 {
			if _, err := cni.Write(u.cd.CNIConfDir(), cni.Config{
				PodCIDRs:     n.Spec.PodCIDRs,
				IPAMDataDir:  filepath.Join(dataDir, "agent", "cni", "networks"),
				NoMasquerade: true,
			}); err != nil {
				return err
			}
			break
		}
		select {
		case <-u.exited:
			return fmt.Errorf("kubelet exited: %v\n%s", u.kubelet.ProcessState, u.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s has no pod CIDR (%v)\n%s", u.name, err, u.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := e.waitNodeSchedulable(deadline, u.name); err != nil {
		return fmt.Errorf("%v\n%s", err, u.logTail())
	}
	return nil
}

// writeConfig writes the kubelet's client certificate (CN
// system:node:<name>, O system:nodes, signed by the cluster CA), its
// kubeconfig and its KubeletConfiguration.
func (u *upstreamNode) writeConfig(e *env) error {
	pkiDir := filepath.Join(e.dir, "data", "pki")
	caPEM, err := os.ReadFile(filepath.Join(pkiDir, "ca.crt"))
	if err != nil {
		return err
	}
	caKeyPEM, err := os.ReadFile(filepath.Join(pkiDir, "ca.key"))
	if err != nil {
		return err
	}
	ca, err := tls.X509KeyPair(caPEM, caKeyPEM)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "system:node:" + u.name, Organization: []string{"system:nodes"}},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), ca.PrivateKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	certFile, keyFile, caFile := filepath.Join(u.dir, "kubelet.crt"), filepath.Join(u.dir, "kubelet.key"), filepath.Join(u.dir, "ca.crt")
	for path, data := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		caFile:   caPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	admin, err := clientcmd.LoadFromFile(filepath.Join(e.dir, "data", "admin.kubeconfig"))
	if err != nil {
		return err
	}
	var server string
	for _, c := range admin.Clusters {
		server = c.Server
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	kc.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	kc.Contexts["kubelet"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "kubelet"}
	kc.CurrentContext = "kubelet"
	if err := clientcmd.WriteToFile(*kc, filepath.Join(u.dir, "kubeconfig")); err != nil {
		return err
	}
	dns := "10.43.0.10"
	if svc, err := e.client.CoreV1().Services("kube-system").Get(context.Background(), "kube-dns", metav1.GetOptions{}); err == nil && svc.Spec.ClusterIP != "" {
		dns = svc.Spec.ClusterIP
	}
	u.cgroupRoot = "/" + strings.Replace(filepath.Base(e.dir), "podstartup", "kubelet-", 1)
	// A kubeadm node's settings (authentication by client certificate and
	// webhook, authorization by webhook, no read-only port) with this
	// machine's: cgroupfs on cgroup v1, a cgroup root of its own, eviction
	// and image GC thresholds that the shared disk (often past 85 % used)
	// does not trip (the server's agent gets nodefs.available<1% too), and
	// the agent's maxPods (110, both defaults).
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: %s
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
    cacheTTL: 2m0s
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 5m0s
    cacheUnauthorizedTTL: 30s
clusterDNS:
- %s
clusterDomain: cluster.local
maxPods: 110
podLogsDir: %s
rotateCertificates: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, u.cgroupRoot, u.cd.Endpoint(), freePort(), freePort(), caFile, dns, filepath.Join(u.dir, "pods"))
	return os.WriteFile(filepath.Join(u.dir, "config.yaml"), []byte(cfg), 0o600)
}

// cgroupHierarchies are the mounted cgroup hierarchies (v1 controllers,
// the named systemd one, the unified one on a hybrid host).
func cgroupHierarchies() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

// prepareHost makes the kubelet's cgroup root (cpuset's with its parent's
// CPUs and memory nodes, as cgroup v1 needs), and records the tunables and
// iptables chains the kubelet changes.
func (u *upstreamNode) prepareHost() error {
	for _, h := range cgroupHierarchies() {
		p := filepath.Join(h, u.cgroupRoot)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(p, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	u.sysctls = map[string]string{}
	for _, s := range kubeletSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", s)); err == nil {
			u.sysctls[s] = strings.TrimSpace(string(v))
		}
	}
	u.chains = iptablesChains()
	return nil
}

// iptablesChains are the chains of the filter, nat and mangle tables, as
// "<iptables|ip6tables> <table> <chain>".
func iptablesChains() map[string]bool {
	out := map[string]bool{}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			b, _ := exec.Command(cmd, "-w", "-t", table, "-S").Output()
			for _, line := range strings.Split(string(b), "\n") {
				if chain, ok := strings.CutPrefix(line, "-N "); ok {
					out[cmd+" "+table+" "+chain] = true
				}
			}
		}
	}
	return out
}

func (u *upstreamNode) startKubelet(bin string) error {
	var err error
	if u.kubeletLog, err = os.Create(filepath.Join(u.dir, "kubelet.log")); err != nil {
		return err
	}
	u.kubelet = exec.Command(bin,
		"--config", filepath.Join(u.dir, "config.yaml"),
		"--kubeconfig", filepath.Join(u.dir, "kubeconfig"),
		"--root-dir", filepath.Join(u.dir, "root"),
		"--cert-dir", filepath.Join(u.dir, "pki"),
		"--hostname-override", u.name)
	// UPSTREAM_KUBELET_ARGS adds flags (e.g. -v=2).
	u.kubelet.Args = append(u.kubelet.Args, strings.Fields(os.Getenv("UPSTREAM_KUBELET_ARGS"))...)
	u.kubelet.Stdout, u.kubelet.Stderr = u.kubeletLog, u.kubeletLog
	u.kubelet.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := u.kubelet.Start(); err != nil {
		return err
	}
	go func() { _ = u.kubelet.Wait(); close(u.exited) }()
	return nil
}

// logTail is the last lines of the kubelet's log.
func (u *upstreamNode) logTail() string {
	b, _ := os.ReadFile(filepath.Join(u.dir, "kubelet.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// stopKubelet stops the kubelet (SIGTERM, SIGKILL after 30 s).
func (u *upstreamNode) stopKubelet() {
	if u.kubelet == nil || u.kubelet.Process == nil {
		return
	}
	_ = u.kubelet.Process.Signal(syscall.SIGTERM)
	select {
	case <-u.exited:
	case <-time.After(30 * time.Second):
		_ = u.kubelet.Process.Kill()
		<-u.exited
	}
	u.kubeletLog.Close()
	if logPath := os.Getenv("SKIFF_BENCH_LOG"); logPath != "" {
		if b, err := os.ReadFile(filepath.Join(u.dir, "kubelet.log")); err == nil {
			_ = os.WriteFile(logPath+".kubelet", b, 0o644)
		}
	}
}

// stopContainerd stops the supervisor and its containerd.
func (u *upstreamNode) stopContainerd() {
	if u.cdCancel == nil {
		return
	}
	u.cdCancel()
	<-u.cdDone
}

// cleanup removes what the kubelet left on the host: its cgroup root (pod
// cgroups are empty by now), its iptables chains, and puts the kernel
// tunables back.
func (u *upstreamNode) cleanup() {
	if u.cgroupRoot != "" {
		for _, h := range cgroupHierarchies() {
			removeCgroupTree(filepath.Join(h, u.cgroupRoot))
		}
	}
	for s, v := range u.sysctls {
		_ = os.WriteFile(filepath.Join("/proc/sys", s), []byte(v), 0o644)
	}
	if u.chains != nil {
		now := iptablesChains()
		for _, cmd := range []string{"iptables", "ip6tables"} {
			for _, table := range []string{"filter", "nat", "mangle"} {
				for _, chain := range kubeletChains {
					key := cmd + " " + table + " " + chain
					if now[key] && !u.chains[key] {
						if table == "filter" {
							for _, from := range []string{"INPUT", "OUTPUT"} {
								_ = exec.Command(cmd, "-w", "-t", table, "-D", from, "-j", chain).Run()
							}
						}
						_ = exec.Command(cmd, "-w", "-t", table, "-F", chain).Run()
						_ = exec.Command(cmd, "-w", "-t", table, "-X", chain).Run()
					}
				}
			}
		}
	}
}

// removeCgroupTree removes a cgroup and those under it, deepest first.
func removeCgroupTree(p string) {
	entries, err := os.ReadDir(p)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupTree(filepath.Join(p, e.Name()))
		}
	}
	_ = syscall.Rmdir(p)
}

// removeIdleBridge deletes the CNI bridge (cni0) that the benchmark's node
// made, unless a pod is still attached to it (another agent's).
func removeIdleBridge() {
	ports, err := os.ReadDir(filepath.Join("/sys/class/net", cni.DefaultBridge, "brif"))
	if err != nil || len(ports) > 0 {
		return
	}
	_ = exec.Command("ip", "link", "delete", cni.DefaultBridge).Run()
}

// idleMemory is the RSS of each process of a node and its control plane,
// in bytes.
type idleMemory struct {
	server, kubelet, containerd int64
	serverPSS, kubeletPSS       int64
	containerdPSS               int64
}

func (e *env) idleMemory() idleMemory {
	var m idleMemory
	_, m.server = memory(e.cmd.Process.Pid)
	m.serverPSS = smapsRollup(e.cmd.Process.Pid, "Pss:")
	if e.upstream != nil {
		_, m.kubelet = memory(e.upstream.kubelet.Process.Pid)
		m.kubeletPSS = smapsRollup(e.upstream.kubelet.Process.Pid, "Pss:")
	}
	if pid := e.containerdPID(); pid > 0 {
		_, m.containerd = memory(pid)
		m.containerdPSS = smapsRollup(pid, "Pss:")
	}
	return m
}

// peakMemory is the VmHWM of the server, the kubelet (upstream's) and
// containerd, in bytes.
func (e *env) peakMemory() (server, kubelet, cd int64) {
	server, _ = memory(e.cmd.Process.Pid)
	if e.upstream != nil {
		kubelet, _ = memory(e.upstream.kubelet.Process.Pid)
	}
	if pid := e.containerdPID(); pid > 0 {
		cd, _ = memory(pid)
	}
	return server, kubelet, cd
}

// sideResult gathers one side's figures over the rounds.
type sideResult struct {
	lat  map[int][]time.Duration // pods at once → every pod's latency
	cpu  map[int]cpuTimes        // pods at once → CPU over its batches
	pods map[int]int             // pods at once → pods started
	// peaks: the largest VmHWM seen after the 30-pod batches.
	peakServer, peakKubelet, peakContainerd int64
	idle                                    []idleMemory
}

func newSideResult() *sideResult {
	return &sideResult{lat: map[int][]time.Duration{}, cpu: map[int]cpuTimes{}, pods: map[int]int{}}
}

// BenchmarkUpstreamKubelet runs BenchmarkPodStartup's workload on two
// nodes, one after the other, in rounds, the order alternating: Skiff's
// (`skiff server` with its agent) and upstream's kubelet v1.37 on the same
// containerd (Skiff's, with the config its agent writes) registered with
// `skiff server --disable-agent`. Each round starts each side afresh,
// reads its idle memory after IDLE (20s), then runs OPS (2) batches of 1,
// 10 and 30 pods. Figures go to the log as a table with the ratios
// skiff ÷ upstream, and to the benchmark's metrics. ROUNDS (2) sets the
// rounds; SIDES=upstream runs one side only (SIDES=upstream,skiff starts
// with upstream); after STOP_AFTER no side starts. Only one op
// (-benchtime=1x) is meaningful.
func BenchmarkUpstreamKubelet(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	rounds, ops := envInt("ROUNDS", 2), envInt("OPS", 2)
	idle, err := time.ParseDuration(envString("IDLE", "20s"))
	if err != nil {
		b.Fatal(err)
	}
	tmp := b.TempDir()
	bin, err := skiffBinary(tmp)
	if err != nil {
		b.Fatal(err)
	}
	kubeletBin, shimBin, err := upstreamBinaries(tmp)
	if err != nil {
		b.Fatal(err)
	}
	// STOP_AFTER: no side starts once this much time has passed (the
	// rounds so far are reported).
	var stopAt time.Time
	if d, err := time.ParseDuration(os.Getenv("STOP_AFTER")); err == nil {
		stopAt = time.Now().Add(d)
	}
	sizes := []int{1, 10, 30}
	results := map[string]*sideResult{"skiff": newSideResult(), "upstream": newSideResult()}
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			order := strings.Split(envString("SIDES", "skiff,upstream"), ",")
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, side := range order {
				if !stopAt.IsZero() && time.Now().After(stopAt) {
					b.Logf("STOP_AFTER passed: %s of round %d not run", side, r+1)
					continue
				}
				b.Logf("round %d: %s, load average %s", r+1, side, loadAverage())
				runSide(b, results[side], side, bin, kubeletBin, shimBin, idle, sizes, ops)
				b.Logf("round %d: %s done, load average %s", r+1, side, loadAverage())
			}
		}
	}
	report(b, results, sizes)
}

// runSide starts one side, reads its idle memory, runs its batches and
// stops it (also when a batch fails the benchmark).
func runSide(b *testing.B, res *sideResult, side, bin, kubeletBin, shimBin string, idle time.Duration, sizes []int, ops int) {
	e, err := newSideEnv(b, side, bin, kubeletBin, shimBin)
	if err != nil {
		b.Fatalf("%s: %v", side, err)
	}
	defer e.stop()
	time.Sleep(idle)
	res.idle = append(res.idle, e.idleMemory())
	for _, n := range sizes {
		for op := 0; op < ops; op++ {
			lat, c := e.batch(b, n, op)
			res.lat[n] = append(res.lat[n], lat...)
			res.cpu[n] = res.cpu[n].add(c)
			res.pods[n] += n
			b.Logf("%s, %d pods: p99 %v, CPU %v a pod", side, n, percentile(sortedCopy(lat), 0.99).Round(time.Millisecond), (c.total() / time.Duration(n)).Round(time.Millisecond))
		}
	}
	s, k, c := e.peakMemory()
	res.peakServer, res.peakKubelet, res.peakContainerd = max(res.peakServer, s), max(res.peakKubelet, k), max(res.peakContainerd, c)
}

func report(b *testing.B, results map[string]*sideResult, sizes []int) {
	sk, up := results["skiff"], results["upstream"]
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	var t strings.Builder
	fmt.Fprintf(&t, "\n%-34s %12s %12s %8s\n", "", "skiff", "upstream", "ratio")
	row := func(name string, a, b float64, unit string) {
		fmt.Fprintf(&t, "%-34s %12.1f %12.1f %8s  %s\n", name, a, b, ratio(a, b), unit)
	}
	for _, n := range sizes {
		for _, q := range []float64{0.5, 0.99} {
			a, u := sortedCopy(sk.lat[n]), sortedCopy(up.lat[n])
			pa, pu := ms(percentile(a, q)), ms(percentile(u, q))
			name := fmt.Sprintf("pods=%d p%d", n, int(q*100))
			row(name, pa, pu, "ms")
			b.ReportMetric(pa, fmt.Sprintf("skiff_%d_p%d_ms", n, int(q*100)))
			b.ReportMetric(pu, fmt.Sprintf("upstream_%d_p%d_ms", n, int(q*100)))
		}
		per := func(r *sideResult, d time.Duration) float64 {
			if r.pods[n] == 0 {
				return 0
			}
			return ms(d) / float64(r.pods[n])
		}
		cs, cu := sk.cpu[n], up.cpu[n]
		row(fmt.Sprintf("pods=%d CPU/pod, all", n), per(sk, cs.total()), per(up, cu.total()), "ms")
		row(fmt.Sprintf("pods=%d CPU/pod, server", n), per(sk, cs.server), per(up, cu.server), "ms (skiff: with its agent)")
		row(fmt.Sprintf("pods=%d CPU/pod, kubelet", n), 0, per(up, cu.kubelet), "ms")
		row(fmt.Sprintf("pods=%d CPU/pod, containerd", n), per(sk, cs.containerd), per(up, cu.containerd), "ms")
		row(fmt.Sprintf("pods=%d CPU/pod, shims", n), per(sk, cs.shims), per(up, cu.shims), "ms")
		b.ReportMetric(per(sk, cs.total()), fmt.Sprintf("skiff_%d_cpu_ms/pod", n))
		b.ReportMetric(per(up, cu.total()), fmt.Sprintf("upstream_%d_cpu_ms/pod", n))
	}
	row("peak RSS, server", mib(sk.peakServer), mib(up.peakServer), "MiB (skiff: with its agent)")
	row("peak RSS, kubelet", 0, mib(up.peakKubelet), "MiB")
	row("peak RSS, containerd", mib(sk.peakContainerd), mib(up.peakContainerd), "MiB")
	for i := range min(len(sk.idle), len(up.idle)) {
		s, u := sk.idle[i], up.idle[i]
		fmt.Fprintf(&t, "idle, round %d:\n", i+1)
		row("  RSS server", mib(s.server), mib(u.server), "MiB (skiff: with its agent)")
		row("  RSS kubelet", 0, mib(u.kubelet), "MiB")
		row("  RSS containerd", mib(s.containerd), mib(u.containerd), "MiB")
		row("  RSS node (agent or kubelet) + containerd", mib(s.server-u.server+s.containerd), mib(u.kubelet+u.containerd), "MiB (skiff's agent: server − server without agent)")
		row("  RSS all", mib(s.server+s.containerd), mib(u.server+u.kubelet+u.containerd), "MiB")
		row("  PSS all", mib(s.serverPSS+s.containerdPSS), mib(u.serverPSS+u.kubeletPSS+u.containerdPSS), "MiB")
		b.ReportMetric(mib(s.server+s.containerd), fmt.Sprintf("skiff_idle%d_rss_MiB", i+1))
		b.ReportMetric(mib(u.kubelet+u.containerd), fmt.Sprintf("upstream_idle%d_kubelet_containerd_rss_MiB", i+1))
		b.ReportMetric(mib(u.server), fmt.Sprintf("upstream_idle%d_server_rss_MiB", i+1))
	}
	b.Log(t.String())
}

func sortedCopy(d []time.Duration) []time.Duration {
	out := slices.Clone(d)
	slices.Sort(out)
	return out
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
