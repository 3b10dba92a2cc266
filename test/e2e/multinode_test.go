package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	criclient "k8s.io/cri-client/pkg"

	"github.com/skiff-sh/skiff/internal/proxy/netnstest"
)

// secondNode is a `skiff agent` joined to the shared cluster from a
// network namespace of its own, linked to the host by a veth pair.
type secondNode struct {
	name, netns, vethHost string
	hostIP, nodeIP        string
	dataDir               string
	cmd                   *exec.Cmd
	output                *syncBuffer
	done                  chan struct{}
}

// multiNodeTaint keeps the package's other tests' pods off the second
// node; the pods of TestMultiNode tolerate it.
const multiNodeTaint = "skiff.test/multinode"

// startSecondNode creates the namespace and the veth pair (host
// 10.99.7.1/24, node 10.99.7.2/24), starts the agent in it with the
// server's join token and waits until its Node is Ready. Cleanup deletes
// its pods (waiting until its runtime has no sandbox), stops the agent and
// its containerd, deletes the Node and removes the namespace, the veth and
// the agent's directory and cgroups.
func (c *agentCluster) startSecondNode(t *testing.T) *secondNode {
	t.Helper()
	for _, bin := range []string{"ip", "nsenter", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("a second node needs %s", bin)
		}
	}
	n := &secondNode{
		name:     fmt.Sprintf("e2e-node2-%d", os.Getpid()%100000),
		netns:    fmt.Sprintf("skiff-e2e-%d", os.Getpid()%100000),
		vethHost: fmt.Sprintf("sk-e2e-%d", os.Getpid()%100000),
		hostIP:   "10.99.7.1", nodeIP: "10.99.7.2",
	}
	sh := func(line string) {
		t.Helper()
		f := strings.Fields(line)
		if out, err := exec.Command(f[0], f[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", line, err, out)
		}
	}
	dir, err := os.MkdirTemp("", "skiff-e2e-node2")
	if err != nil {
		t.Fatal(err)
	}
	n.dataDir = dir
	t.Cleanup(func() { c.stopSecondNode(t, n) })
	sh("ip netns add " + n.netns)
	sh("ip link add " + n.vethHost + " type veth peer name eth0 netns " + n.netns)
	sh("ip addr add " + n.hostIP + "/24 dev " + n.vethHost)
	sh("ip link set " + n.vethHost + " up")
	sh("ip -n " + n.netns + " addr add " + n.nodeIP + "/24 dev eth0")
	sh("ip -n " + n.netns + " link set lo up")
	sh("ip -n " + n.netns + " link set eth0 up")
	sh("ip -n " + n.netns + " route add default via " + n.hostIP)

	// The same test image, imported at the agent's start.
	imagesDir := filepath.Join(dir, "agent", "images")
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(filepath.Join(c.dataDir, "agent", "images", "busybox.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(imagesDir, "busybox.tar"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	// Agents dial the address the API server advertises (its serving
	// certificate names it).
	ep, err := c.client.CoreV1().Endpoints("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil || len(ep.Subsets) == 0 || len(ep.Subsets[0].Addresses) == 0 {
		t.Fatalf("the kubernetes Endpoints name no address: %v", err)
	}
	server := fmt.Sprintf("https://%s:%d", ep.Subsets[0].Addresses[0].IP, c.ports.api)
	token, err := os.ReadFile(filepath.Join(c.dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	n.start(t, "--server", server, "--token", strings.TrimSpace(string(token)))
	c.waitSecondNodeReady(t, n)
	return n
}

// start runs the agent in its namespace with the node's flags and extra.
func (n *secondNode) start(t *testing.T, extra ...string) {
	t.Helper()
	args := append([]string{"--net=/run/netns/" + n.netns, binary(), "agent",
		"--data-dir", n.dataDir, "--node-name", n.name, "--cgroup-root", "/skiff-" + n.name,
		"--register-with-taints", multiNodeTaint + "=true:NoSchedule",
		// The same disk as the first node's: the same thresholds (see
		// startAgentCluster), or its pods are evicted on a full disk.
		"--eviction-hard", "memory.available<100Mi,nodefs.available<1%", "--image-gc-high-threshold", "100"}, extra...)
	n.cmd = exec.Command("nsenter", args...)
	n.output, n.done = &syncBuffer{}, make(chan struct{})
	n.cmd.Stdout, n.cmd.Stderr = n.output, n.output
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := n.done
	go func() {
		_ = n.cmd.Wait()
		close(done)
	}()
}

func (c *agentCluster) waitSecondNodeReady(t *testing.T, n *secondNode) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		node, err := c.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err == nil && nodeReady(node) && !hasNotReadyTaint(*node) && strings.Contains(n.output.String(), "Node agent ready") {
			return
		}
		select {
		case <-n.done:
			t.Fatalf("skiff agent exited:\n%s", n.output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not Ready within 120s:\n%s", n.name, n.output.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *agentCluster) stopSecondNode(t *testing.T, n *secondNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if n.cmd != nil && n.cmd.Process != nil {
		select {
		case <-n.done:
		default:
			// Its pods first, while the agent runs to stop them.
			zero := int64(0)
			pods, _ := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.name})
			if pods != nil {
				for _, p := range pods.Items {
					_ = c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				}
			}
			if rs, err := criclient.NewRemoteRuntimeService(ctx, "unix://"+filepath.Join(n.dataDir, "agent", "containerd", "containerd.sock"), 10*time.Second, nil, false); err == nil {
				for ctx.Err() == nil {
					sbs, err := rs.ListPodSandbox(ctx, nil)
					if err != nil || len(sbs) == 0 {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.done:
			case <-time.After(30 * time.Second):
				_ = n.cmd.Process.Kill()
				<-n.done
			}
		}
	}
	killUnder(n.dataDir)
	unmountUnder(n.dataDir)
	_ = c.client.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{})
	_ = exec.Command("ip", "netns", "del", n.netns).Run()
	_ = exec.Command("ip", "link", "del", n.vethHost).Run()
	_ = os.RemoveAll(n.dataDir)
	// The agent's cgroups, empty now, in every hierarchy.
	matches, _ := filepath.Glob("/sys/fs/cgroup/*/skiff-" + n.name)
	matches2, _ := filepath.Glob("/sys/fs/cgroup/skiff-" + n.name)
	for _, root := range append(matches, matches2...) {
		removeCgroupTree(root)
	}
	if t.Failed() && n.output != nil {
		t.Logf("second node's output:\n%s", n.output.String())
	}
}

// removeCgroupTree removes empty cgroup directories, deepest first.
func removeCgroupTree(root string) {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}

// TestMultiNode: a second node joins the shared cluster from a network
// namespace, and pods on the two nodes reach each other by pod IP and
// through a Service, with kubectl logs and exec on the second node.
func TestMultiNode(t *testing.T) {
	c := cluster(t)
	n2 := c.startSecondNode(t)
	ns := c.namespace(t, "multinode")
	ctx := context.Background()

	t.Run("the second node's Node", func(t *testing.T) {
		node, err := c.client.CoreV1().Nodes().Get(ctx, n2.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var internal string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = a.Address
			}
		}
		first, err := c.client.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if internal != n2.nodeIP || !nodeReady(node) || node.Spec.PodCIDR == "" || node.Spec.PodCIDR == first.Spec.PodCIDR {
			t.Fatalf("node %s: InternalIP %q (want %s), Ready %v, podCIDR %q (the first node has %q)", n2.name, internal, n2.nodeIP, nodeReady(node), node.Spec.PodCIDR, first.Spec.PodCIDR)
		}
	})

	// One web server and one client on each node.
	onNode := func(p *corev1.Pod, node string) *corev1.Pod {
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		p.Spec.Tolerations = []corev1.Toleration{{Key: multiNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		return p
	}
	web := func(name, node string) *corev1.Pod {
		script := "mkdir -p /www/cgi-bin && echo served by " + name + " > /www/index.html && " +
			"echo '#!/bin/sh' > /www/cgi-bin/ip && echo 'echo Content-Type: text/plain; echo; echo remote $REMOTE_ADDR' >> /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && " +
			"echo " + name + " is up && exec httpd -f -p 8080 -h /www"
		return onNode(busyboxPod(ns, name, c.image, "sh", "-c", script), node)
	}
	for _, p := range []*corev1.Pod{
		web("web1", c.node), web("web2", n2.name),
		onNode(busyboxPod(ns, "client1", c.image, "sleep", "3600"), c.node),
		onNode(busyboxPod(ns, "client2", c.image, "sleep", "3600"), n2.name),
	} {
		c.create(t, p)
	}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"web1", "web2", "client1", "client2"} {
		pods[name] = c.waitPod(t, ns, name, 90*time.Second, "Running and Ready", podRunningReady)
	}
	if got := pods["web2"].Spec.NodeName; got != n2.name {
		t.Fatalf("web2 runs on %q, want %s", got, n2.name)
	}
	if pods["web2"].Status.HostIP != n2.nodeIP {
		t.Errorf("web2's hostIP = %q, want %s", pods["web2"].Status.HostIP, n2.nodeIP)
	}

	// An HTTP GET from a pod with nc (the image's static wget crashes, and
	// its libc cannot resolve: names go through nslookup), retried
	// briefly: routes follow the Node objects within a moment.
	fetch := func(t *testing.T, from, host, port, path, want string) {
		t.Helper()
		url := "http://" + host + ":" + port + path
		script := fmt.Sprintf(`ip=%s; case $ip in *[a-z]*) ip=$(nslookup $ip | awk '/^Address/ {a=$NF} END {print a}');; esac; printf 'GET %s HTTP/1.0\r\n\r\n' | nc -w 3 $ip %s`, host, path, port)
		var out, errOut string
		var err error
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, errOut, err = kubectlResult(c.kubeconfig, "", "-n", ns, "exec", from, "--", "sh", "-c", script)
			if err == nil && strings.Contains(out, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s from %s: %v\nstdout: %s\nstderr: %s", url, from, err, out, errOut)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Run("pod to pod across nodes", func(t *testing.T) {
		fetch(t, "client1", pods["web2"].Status.PodIP, "8080", "/", "served by web2")
		fetch(t, "client2", pods["web1"].Status.PodIP, "8080", "/", "served by web1")
	})

	t.Run("pods see each other's own addresses", func(t *testing.T) {
		// No NAT between pods: web2's CGI script answers with the client
		// address it sees (busybox httpd listens on a dual-stack socket).
		fetch(t, "client1", pods["web2"].Status.PodIP, "8080", "/cgi-bin/ip", "remote [::ffff:"+pods["client1"].Status.PodIP+"]\n")
	})

	t.Run("a Service whose only endpoint is on the other node", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web2", Namespace: ns},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "web2"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstrFromInt(8080)}},
			},
		}
		created, err := c.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fetch(t, "client1", created.Spec.ClusterIP, "80", "/", "served by web2")
		// And by name, through the cluster DNS, from the second node.
		fetch(t, "client2", "web2."+ns+".svc.cluster.local", "80", "/", "served by web2")
	})

	t.Run("a Service's rules survive the agent's restart, no connection attempt fails", func(t *testing.T) {
		// The second agent's proxy programs the node's table; while the
		// agent stops and starts again (its proxy's first sync rewrites
		// the table whole), a client on that node keeps fetching through
		// the ClusterIP without pause.
		svc, err := c.client.CoreV1().Services(ns).Get(ctx, "web2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
		get := func() error {
			return netnstest.Run(n2.netns, func() error {
				conn, err := net.DialTimeout("tcp4", addr, 2*time.Second)
				if err != nil {
					return err
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
				if _, err := conn.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
					return err
				}
				b, err := io.ReadAll(conn)
				if err == nil && !strings.Contains(string(b), "served by web2") {
					err = fmt.Errorf("answer %q", b)
				}
				return err
			})
		}
		if err := get(); err != nil {
			t.Fatalf("before the restart, from the node: %v", err)
		}
		stop := make(chan struct{})
		type result struct {
			ok, failed int
			first      error
		}
		res := make(chan result)
		go func() {
			var r result
			for {
				select {
				case <-stop:
					res <- r
					return
				default:
				}
				if err := get(); err != nil {
					r.failed++
					if r.first == nil {
						r.first = err
					}
				} else {
					r.ok++
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		_ = n2.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n2.done:
		case <-time.After(30 * time.Second):
			t.Fatal("the agent did not stop within 30s")
		}
		n2.start(t, "--kubeconfig", filepath.Join(n2.dataDir, "agent", "kubelet.kubeconfig"))
		c.waitSecondNodeReady(t, n2)
		// A moment past ready: the restarted proxy's first sync is done.
		time.Sleep(2 * time.Second)
		close(stop)
		r := <-res
		t.Logf("through the restart: %d fetches, %d failed", r.ok+r.failed, r.failed)
		if r.failed != 0 || r.ok < 10 {
			t.Errorf("through the agent's restart %d of %d fetches failed (first: %v); want none", r.failed, r.ok+r.failed, r.first)
		}
	})

	t.Run("kubectl logs and exec on the second node", func(t *testing.T) {
		if out := kubectl(t, c.kubeconfig, "-n", ns, "logs", "web2"); !strings.Contains(out, "web2 is up") {
			t.Errorf("kubectl logs web2 = %q, want it to contain %q", out, "web2 is up")
		}
		if out := kubectl(t, c.kubeconfig, "-n", ns, "exec", "web2", "--", "cat", "/www/index.html"); strings.TrimSpace(out) != "served by web2" {
			t.Errorf("kubectl exec web2 cat = %q", out)
		}
	})

	t.Run("an agent started with --kubeconfig gets a serving certificate", func(t *testing.T) {
		// Restart the second agent with the kubeconfig its join wrote and
		// without the serving certificate the join obtained: it asks for
		// one itself, and kubectl logs reach it again.
		_ = n2.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n2.done:
		case <-time.After(30 * time.Second):
			t.Fatal("the agent did not stop within 30s")
		}
		for _, f := range []string{"kubelet.crt", "kubelet.key"} {
			if err := os.Remove(filepath.Join(n2.dataDir, "agent", "pki", f)); err != nil {
				t.Fatal(err)
			}
		}
		n2.start(t, "--kubeconfig", filepath.Join(n2.dataDir, "agent", "kubelet.kubeconfig"))
		c.waitSecondNodeReady(t, n2)
		if _, err := os.Stat(filepath.Join(n2.dataDir, "agent", "pki", "kubelet.crt")); err != nil {
			t.Fatalf("no new serving certificate: %v", err)
		}
		waitFor(t, 30*time.Second, "kubectl logs web2 through the new certificate", func() bool {
			out, _, err := kubectlResult(c.kubeconfig, "", "-n", ns, "logs", "web2")
			return err == nil && strings.Contains(out, "web2 is up")
		})
	})

	t.Run("a node whose agent stops goes NotReady, its pods are evicted after their toleration, and it returns", func(t *testing.T) {
		// The shared cluster runs with --node-monitor-grace-period=20s
		// (upstream's default is 50s).
		five := int64(5)
		brief := onNode(busyboxPod(ns, "brief", c.image, "sleep", "3600"), n2.name)
		brief.Spec.Tolerations = append(brief.Spec.Tolerations,
			corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &five},
			corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &five})
		steadfast := onNode(busyboxPod(ns, "steadfast", c.image, "sleep", "3600"), n2.name)
		steadfast.Spec.Tolerations = append(steadfast.Spec.Tolerations,
			corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
		c.create(t, brief)
		c.create(t, steadfast)
		c.waitPod(t, ns, "brief", 90*time.Second, "Running and Ready", podRunningReady)
		before := c.waitPod(t, ns, "steadfast", 90*time.Second, "Running and Ready", podRunningReady)

		stopped := time.Now()
		_ = n2.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n2.done:
		case <-time.After(30 * time.Second):
			t.Fatal("the agent did not stop within 30s")
		}
		unreachable := func(node *corev1.Node) (bool, bool) {
			var noSchedule, noExecute bool
			for _, taint := range node.Spec.Taints {
				if taint.Key == corev1.TaintNodeUnreachable {
					noSchedule = noSchedule || taint.Effect == corev1.TaintEffectNoSchedule
					noExecute = noExecute || taint.Effect == corev1.TaintEffectNoExecute
				}
			}
			return noSchedule, noExecute
		}
		var ready *corev1.NodeCondition
		waitFor(t, 90*time.Second, "the node's Ready condition Unknown with the unreachable taints", func() bool {
			node, err := c.client.CoreV1().Nodes().Get(ctx, n2.name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for i := range node.Status.Conditions {
				if node.Status.Conditions[i].Type == corev1.NodeReady {
					ready = &node.Status.Conditions[i]
				}
			}
			noSchedule, noExecute := unreachable(node)
			return ready != nil && ready.Status == corev1.ConditionUnknown && noSchedule && noExecute
		})
		t.Logf("node Unknown %v after the agent stopped", time.Since(stopped).Round(time.Second))
		if ready.Reason != "NodeStatusUnknown" || ready.Message != "Kubelet stopped posting node status." {
			t.Errorf("Ready condition reason %q message %q, want NodeStatusUnknown %q", ready.Reason, ready.Message, "Kubelet stopped posting node status.")
		}
		// The pods on it are marked not Ready; the one tolerating the
		// unreachable taint for 5s is then evicted (deleted; it stays
		// Terminating until its kubelet is back), the other stays.
		c.waitPod(t, ns, "steadfast", 30*time.Second, "marked not Ready", func(p *corev1.Pod) bool { return !podRunningReady(p) })
		c.waitPod(t, ns, "brief", 60*time.Second, "evicted (deleting)", func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
		if p, err := c.client.CoreV1().Pods(ns).Get(ctx, "steadfast", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
			t.Errorf("the pod tolerating the taint for ever was deleted too (err %v)", err)
		}

		n2.start(t, "--kubeconfig", filepath.Join(n2.dataDir, "agent", "kubelet.kubeconfig"))
		waitFor(t, 90*time.Second, "the node Ready again without the unreachable taints", func() bool {
			node, err := c.client.CoreV1().Nodes().Get(ctx, n2.name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			noSchedule, noExecute := unreachable(node)
			return nodeReady(node) && !noSchedule && !noExecute
		})
		// The returning kubelet finishes the eviction and keeps the other
		// pod's container (same start, no restart).
		waitFor(t, 60*time.Second, "the evicted pod gone", func() bool {
			_, err := c.client.CoreV1().Pods(ns).Get(ctx, "brief", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		after := c.waitPod(t, ns, "steadfast", 60*time.Second, "Running and Ready again", podRunningReady)
		if len(after.Status.ContainerStatuses) != 1 || after.Status.ContainerStatuses[0].RestartCount != 0 ||
			after.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID {
			t.Errorf("steadfast's container changed: before %+v, after %+v", before.Status.ContainerStatuses, after.Status.ContainerStatuses)
		}
	})
}

// TestAgentJoinRefused: `skiff agent --server --token` with a token the
// server does not know, or one naming another cluster's CA, exits with a
// message that says so, writes no file in its data directory and adds no
// Node.
func TestAgentJoinRefused(t *testing.T) {
	c := cluster(t)
	ep, err := c.client.CoreV1().Endpoints("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil || len(ep.Subsets) == 0 || len(ep.Subsets[0].Addresses) == 0 {
		t.Fatalf("the kubernetes Endpoints name no address: %v", err)
	}
	server := fmt.Sprintf("https://%s:%d", ep.Subsets[0].Addresses[0].IP, c.ports.api)
	b, err := os.ReadFile(filepath.Join(c.dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	good := strings.TrimSpace(string(b))
	caHash, _, _ := strings.Cut(good, "::")
	for _, tc := range []struct{ name, token, want string }{
		{"wrong secret", caHash + "::" + strings.Split(strings.Split(good, "::")[1], ".")[0] + ".0000000000000000",
			"the server refused the join token (401 Unauthorized): check --token against the server's <data-dir>/token"},
		{"another cluster's CA", "K10" + strings.Repeat("ab", 32) + "::" + strings.Split(good, "::")[1],
			"the server's CA does not match the join token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			node := fmt.Sprintf("e2e-refused-%d", os.Getpid()%100000)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, binary(), "agent", "--server", server, "--token", tc.token,
				"--data-dir", dir, "--node-name", node).CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("skiff agent did not give up within 60s:\n%s", out)
			}
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("skiff agent: %v, want a failure saying %q:\n%s", err, tc.want, out)
			}
			_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					t.Errorf("a refused join wrote %s", path)
				}
				return nil
			})
			if _, err := c.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("Node %s after a refused join: %v, want NotFound", node, err)
			}
		})
	}
}
