package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	criclient "k8s.io/cri-client/pkg"

	"github.com/skiff-sh/skiff/internal/testing/images"
)

// agentCluster is the one `skiff server` with its node agent that the
// package's agent tests share (a server with containerd takes seconds to
// start; the tests run their pods side by side in their own namespaces).
type agentCluster struct {
	dataDir    string
	kubeconfig string
	ports      serverPorts
	// kubeletPort is the agent's kubelet API port (a free one, so that
	// clusters of parallel test runs do not meet on 10250).
	kubeletPort int
	client      kubernetes.Interface
	image       string
	node        string

	mu   sync.Mutex
	proc *serverProc
}

var shared struct {
	once    sync.Once
	cluster *agentCluster
	err     error
}

// stopAgentCluster stops the shared cluster (called from TestMain): its
// pods are deleted and the runtime is waited on until their sandboxes are
// gone (so no container, network namespace or pod IP outlives the test),
// then the server stops and its data directory is removed.
func stopAgentCluster() {
	c := shared.cluster
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	zero := int64(0)
	if pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			_ = c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}
	if rs, err := criclient.NewRemoteRuntimeService(ctx, "unix://"+filepath.Join(c.dataDir, "agent", "containerd", "containerd.sock"), 10*time.Second, nil, false); err == nil {
		for ctx.Err() == nil {
			sbs, err := rs.ListPodSandbox(ctx, nil)
			if err != nil || len(sbs) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p != nil {
		c.stopProc(p)
	}
	killUnder(c.dataDir)
	unmountUnder(c.dataDir)
	_ = os.RemoveAll(c.dataDir)
}

// stopProc stops the server with SIGTERM (SIGKILL after 30 s).
func (c *agentCluster) stopProc(p *serverProc) {
	{
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// unmountUnder lazily unmounts everything mounted below dir, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// auditPolicy audits every request at level Metadata, from ResponseStarted on.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// auditLog is the server's --audit-log-path.
func (c *agentCluster) auditLog() string { return filepath.Join(c.dataDir, "audit.log") }

// cluster returns the shared cluster, starting it on first use.
func cluster(t *testing.T) *agentCluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the node agent needs root (containerd, runc, CNI)")
	}
	shared.once.Do(func() {
		shared.cluster, shared.err = startAgentCluster(t)
	})
	if shared.err != nil {
		t.Fatalf("agent cluster: %v", shared.err)
	}
	return shared.cluster
}

func startAgentCluster(t *testing.T) (*agentCluster, error) {
	dir, err := os.MkdirTemp("", "skiff-e2e-agent")
	if err != nil {
		return nil, err
	}
	tar, ref := images.Busybox(t)
	imagesDir := filepath.Join(dir, "agent", "images")
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(tar)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(imagesDir, "busybox.tar"), b, 0o644); err != nil {
		return nil, err
	}
	began := time.Now()
	defer func() { t.Logf("agent cluster started in %v", time.Since(began)) }()
	c := &agentCluster{dataDir: dir, kubeconfig: filepath.Join(dir, "admin.kubeconfig"), ports: newPorts(t), image: ref, kubeletPort: freePortNoT()}
	// An audit log at level Metadata, as the CIS benchmark asks (1.2.16-19;
	// TestCISProbe reads it).
	if err := os.WriteFile(filepath.Join(dir, "audit-policy.yaml"), []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	if err := c.start(); err != nil {
		return nil, err
	}
	return c, nil
}

// start runs `skiff server` (with its agent) and waits until the node is
// Ready.
func (c *agentCluster) start() error { return c.startWith(true) }

// startWith starts the server with or without its agent; without, it
// waits for the API only.
func (c *agentCluster) startWith(withAgent bool) error {
	for attempt := 0; attempt < 3; attempt++ {
		args := []string{"server", "--data-dir", c.dataDir}
		if !withAgent {
			args = append(args, "--disable-agent")
		}
		cmd := exec.Command(binary(), append(args,
			"--https-listen-port", fmt.Sprint(c.ports.api),
			"--etcd-client-port", fmt.Sprint(c.ports.etcdClient),
			"--etcd-peer-port", fmt.Sprint(c.ports.etcdPeer),
			"--kubelet-port", fmt.Sprint(c.kubeletPort),
			// Cluster DNS on a free port (kube-dns keeps port 53 and points
			// there): another DNS server on the host address's :53, such as
			// a developer's skiff server, would leave the cluster without DNS.
			"--cluster-dns-port", fmt.Sprint(freePortNoT()),
			// The build VM's disk is shared and often past 90 % used: the
			// default nodefs.available<10% would put the test node under
			// DiskPressure (taint, admission refusals, evictions).
			"--eviction-hard", "memory.available<100Mi,nodefs.available<1%",
			// Nor may image GC (at 85 % used) remove the test image before
			// the tests use it: every agent test failed that way here.
			"--image-gc-high-threshold", "100",
			// TestMultiNode waits for its second node to go NotReady: 20s
			// instead of upstream's 50s (the kubelet renews its Lease
			// every 10s).
			"--node-monitor-grace-period", "20s",
			"--audit-policy-file", filepath.Join(c.dataDir, "audit-policy.yaml"),
			"--audit-log-path", c.auditLog(), "--audit-log-maxsize", "100", "--audit-log-maxbackup", "2")...)
		p := &serverProc{cmd: cmd, output: &syncBuffer{}, done: make(chan struct{})}
		cmd.Stdout, cmd.Stderr = p.output, p.output
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() {
			p.err = cmd.Wait()
			close(p.done)
		}()
		c.mu.Lock()
		c.proc = p
		c.mu.Unlock()
		deadline := time.Now().Add(120 * time.Second)
		for {
			select {
			case <-p.done:
				if strings.Contains(p.output.String(), "address already in use") && attempt < 2 {
					c.ports = serverPorts{api: freePortNoT(), etcdClient: freePortNoT(), etcdPeer: freePortNoT()}
					c.kubeletPort = freePortNoT()
					goto retry
				}
				return fmt.Errorf("skiff server exited: %v\n%s", p.err, p.output.String())
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node agent not ready after 120s\n%s", p.output.String())
			}
			if !withAgent && strings.Contains(p.output.String(), "Skiff is ready") && readyz(c.kubeconfig) {
				return nil
			}
			if strings.Contains(p.output.String(), "Node agent ready") && readyz(c.kubeconfig) {
				return c.waitNodeReady()
			}
			time.Sleep(100 * time.Millisecond)
		}
	retry:
	}
	return fmt.Errorf("no free ports")
}

func freePortNoT() int {
	l, err := netListen()
	if err != nil {
		return 0
	}
	defer l.Close()
	return portOf(l)
}

func (c *agentCluster) waitNodeReady() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	c.client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		nodes, err := c.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err == nil && len(nodes.Items) > 0 {
			n := nodes.Items[0]
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && !hasNotReadyTaint(n) {
					c.node = n.Name
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node not Ready within 60s")
}

func hasNotReadyTaint(n corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady {
			return true
		}
	}
	return false
}

// output is the server's output so far (for failure messages).
func (c *agentCluster) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc.output.String()
}

// namespace creates a namespace for one test.
func (c *agentCluster) namespace(t *testing.T, name string) string {
	t.Helper()
	_, err := c.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Pods are refused until the namespace's default ServiceAccount exists.
	waitFor(t, 30*time.Second, "default service account in "+name, func() bool {
		_, err := c.client.CoreV1().ServiceAccounts(name).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil
	})
	t.Cleanup(func() {
		_ = c.client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// waitFor polls cond every 100 ms until it holds.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitPod waits until the pod satisfies cond and returns it.
func (c *agentCluster) waitPod(t *testing.T, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	deadline := time.Now().Add(timeout)
	for {
		p, err := c.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = p
			if cond(p) {
				return p
			}
		}
		if time.Now().After(deadline) {
			var status any
			if last != nil {
				status = last.Status
			}
			t.Fatalf("pod %s/%s not %s within %v; status: %+v\nevents:\n%s", ns, name, what, timeout, status, c.events(ns, name))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *agentCluster) events(ns, name string) string {
	evs, err := c.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "  %s %s %s: %s (x%d)\n", e.Type, e.Reason, e.InvolvedObject.FieldPath, e.Message, e.Count)
	}
	return b.String()
}

// hasEvent reports whether the pod has an event with reason whose message
// contains msg.
func (c *agentCluster) hasEvent(ns, name, reason, msg string) bool {
	evs, err := c.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return false
	}
	for _, e := range evs.Items {
		if e.Reason == reason && strings.Contains(e.Message, msg) {
			return true
		}
	}
	return false
}

func podRunningReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// logFile reads a container's CRI log on the node, message text only.
func (c *agentCluster) logFile(t *testing.T, p *corev1.Pod, container string, restart int) string {
	t.Helper()
	path := filepath.Join("/var/log/pods", p.Namespace+"_"+p.Name+"_"+string(p.UID), container, fmt.Sprintf("%d.log", restart))
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	var out strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, " ", 4)
		if len(parts) == 4 {
			out.WriteString(parts[3])
			if parts[2] == "F" {
				out.WriteByte('\n')
			}
		}
	}
	return out.String()
}

func busyboxPod(ns, name, image string, command ...string) *corev1.Pod {
	zero := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &zero,
			Containers:                    []corev1.Container{{Name: "main", Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Command: command}},
		},
	}
}

func (c *agentCluster) create(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := c.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func TestAgentPodLogs(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-logs")
	p := c.create(t, busyboxPod(ns, "hello", c.image, "sh", "-c", "echo hello from skiff; echo line two; sleep 3600"))
	p = c.waitPod(t, ns, "hello", 60*time.Second, "Running and Ready", podRunningReady)
	if p.Status.PodIP == "" || p.Status.HostIP == "" || p.Status.StartTime == nil {
		t.Errorf("podIP %q hostIP %q startTime %v", p.Status.PodIP, p.Status.HostIP, p.Status.StartTime)
	}
	waitFor(t, 10*time.Second, "the container's output in its log", func() bool {
		return c.logFile(t, p, "main", 0) == "hello from skiff\nline two\n"
	})
	// What a user runs: kubectl logs, through the API server and the
	// kubelet API.
	if got := kubectl(t, c.kubeconfig, "logs", "-n", ns, "hello"); got != "hello from skiff\nline two\n" {
		t.Errorf("kubectl logs: %q", got)
	}
}
