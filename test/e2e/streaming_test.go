package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

const streamingPods = `
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: registry.k8s.io/e2e-test-images/busybox:1.37.0-2
    command: ["sh", "-c", "echo started; mkdir -p /www; echo hello-from-pod > /www/index.html; httpd -p 8080 -h /www; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.5; done"]
  - name: side
    image: registry.k8s.io/e2e-test-images/busybox:1.37.0-2
    command: ["sh", "-c", "echo side; sleep 3600"]
---
apiVersion: v1
kind: Pod
metadata:
  name: crasher
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: registry.k8s.io/e2e-test-images/busybox:1.37.0-2
    command: ["sh", "-c", "echo run at $(date +%s%N); exit 1"]
---
apiVersion: v1
kind: Pod
metadata:
  name: attachable
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: app
    image: registry.k8s.io/e2e-test-images/busybox:1.37.0-2
    command: ["sh", "-c", "while read line; do echo got: $line; done"]
    stdin: true
    stdinOnce: true
`

// TestStreaming runs kubectl logs, exec, attach, port-forward and cp
// against pods on the shared cluster's node, through the API server and
// the kubelet API to containerd.
func TestStreaming(t *testing.T) {
	c := cluster(t)
	ns := c.namespace(t, "streaming")
	kc := c.kubeconfig
	// Every kubectl call of this test works in ns.
	kubectl := func(t *testing.T, _ string, args ...string) string {
		t.Helper()
		return kubectl(t, kc, append([]string{"-n", ns}, args...)...)
	}
	kubectlStdin := func(t *testing.T, _ string, stdin string, args ...string) string {
		t.Helper()
		return kubectlStdin(t, kc, stdin, append([]string{"-n", ns}, args...)...)
	}
	kubectlResult := func(_ string, stdin string, args ...string) (string, string, error) {
		return kubectlResult(kc, stdin, append([]string{"-n", ns}, args...)...)
	}
	kubectlStdin(t, kc, strings.ReplaceAll(streamingPods, "registry.k8s.io/e2e-test-images/busybox:1.37.0-2", c.image), "apply", "-f", "-")
	kubectl(t, kc, "wait", "--for=condition=Ready", "pod/web", "pod/attachable", "--timeout=90s")

	t.Run("logs", func(t *testing.T) {
		out := kubectl(t, kc, "logs", "web", "-c", "app")
		if !strings.HasPrefix(out, "started\ntick 0\n") {
			t.Errorf("kubectl logs web -c app = %q, want it to start with started, tick 0", out)
		}
		if out := kubectl(t, kc, "logs", "web", "-c", "side"); out != "side\n" {
			t.Errorf("kubectl logs web -c side = %q", out)
		}
		// kubectl picks the first container itself ("Defaulted container");
		// the API asks for one.
		if out, errOut, err := kubectlResult(kc, "", "logs", "web"); err != nil || !strings.HasPrefix(out, "started\n") || !strings.Contains(errOut, `Defaulted container "app" out of: app, side`) {
			t.Errorf("kubectl logs web = %q %q %v", out, errOut, err)
		}
		_, errOut, err := kubectlResult(kc, "", "get", "--raw", "/api/v1/namespaces/"+ns+"/pods/web/log")
		if err == nil || !strings.Contains(errOut, "a container name must be specified for pod web, choose one of: [app side]") {
			t.Errorf("pods/web/log without a container = %v %q", err, errOut)
		}
		if out := kubectl(t, kc, "logs", "web", "-c", "app", "--tail=1"); !regexp.MustCompile(`^tick \d+\n$`).MatchString(out) {
			t.Errorf("--tail=1 = %q", out)
		}
		if out := kubectl(t, kc, "logs", "web", "-c", "app", "--timestamps", "--limit-bytes=40"); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z started\n`).MatchString(out) {
			t.Errorf("--timestamps = %q", out)
		}
	})

	t.Run("logs -f", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary(), "kubectl", "--kubeconfig", kc, "-n", ns, "logs", "-f", "web", "-c", "app", "--tail=1")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(stdout)
		var seen []string
		for len(seen) < 4 && sc.Scan() {
			seen = append(seen, sc.Text())
		}
		if len(seen) < 4 {
			t.Fatalf("followed lines %q, want 4 (the last one, then new ones)", seen)
		}
		var first, last int
		fmt.Sscanf(seen[0], "tick %d", &first)
		fmt.Sscanf(seen[3], "tick %d", &last)
		if last != first+3 {
			t.Errorf("followed %q: want consecutive ticks", seen)
		}
	})

	t.Run("logs --previous", func(t *testing.T) {
		deadline := time.Now().Add(90 * time.Second)
		for {
			out, _, _ := kubectlResult(kc, "", "get", "pod", "crasher", "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
			if out != "" && out != "0" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("crasher never restarted (restartCount %q)", out)
			}
			time.Sleep(500 * time.Millisecond)
		}
		out := kubectl(t, kc, "logs", "crasher", "--previous")
		if !strings.HasPrefix(out, "run at ") {
			t.Errorf("kubectl logs --previous = %q", out)
		}
		_, errOut, err := kubectlResult(kc, "", "logs", "web", "-c", "app", "--previous")
		if err == nil || !strings.Contains(errOut, `previous terminated container "app" in pod "web" not found`) {
			t.Errorf("--previous without a previous run = %v %q", err, errOut)
		}
	})

	t.Run("exec", func(t *testing.T) {
		if out := kubectl(t, kc, "exec", "web", "-c", "app", "--", "echo", "hi", "there"); out != "hi there\n" {
			t.Errorf("kubectl exec echo = %q", out)
		}
		if out := kubectlStdin(t, kc, "typed into stdin\n", "exec", "-i", "web", "-c", "app", "--", "cat"); out != "typed into stdin\n" {
			t.Errorf("kubectl exec -i cat = %q", out)
		}
		_, errOut, err := kubectlResult(kc, "", "exec", "web", "-c", "app", "--", "sh", "-c", "echo oops >&2; exit 3")
		var ee *exec.ExitError
		if !asExit(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(errOut, "oops") {
			t.Errorf("kubectl exec exit 3 = %v %q", err, errOut)
		}
		_, errOut, err = kubectlResult(kc, "", "exec", "web", "-c", "nope", "--", "true")
		if err == nil || !strings.Contains(errOut, "container nope is not valid for pod web") {
			t.Errorf("kubectl exec in an unknown container = %v %q", err, errOut)
		}
	})

	t.Run("exec -it", func(t *testing.T) {
		// kubectl on a real terminal: a TTY in the container, raw mode and
		// terminal size from kubectl, a shell that echoes.
		master, slave, err := openPTY()
		if err != nil {
			t.Skipf("no pseudo-terminal: %v", err)
		}
		defer master.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary(), "kubectl", "--kubeconfig", kc, "-n", ns, "exec", "-it", "web", "-c", "app", "--", "sh")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		out := make(chan string, 1)
		go func() {
			var all []byte
			buf := make([]byte, 4096)
			for {
				n, err := master.Read(buf)
				all = append(all, buf[:n]...)
				if err != nil || strings.Contains(string(all), "answer=42") {
					out <- string(all)
					return
				}
			}
		}()
		fmt.Fprint(master, "tty -s && echo answer=$((6*7))\r")
		select {
		case got := <-out:
			if !strings.Contains(got, "answer=42") {
				t.Errorf("terminal output %q", got)
			}
		case <-ctx.Done():
			t.Fatal("no answer on the terminal")
		}
		fmt.Fprint(master, "exit\r")
		if err := cmd.Wait(); err != nil {
			t.Errorf("kubectl exec -it: %v", err)
		}
	})

	t.Run("exec latency", func(t *testing.T) {
		// Not a pass/fail check: how long one exec takes through the API
		// server, the kubelet API (websocket v5 translated to SPDY) and
		// containerd, as client-go sees it. Logged for bench notes.
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			t.Fatal(err)
		}
		u := fmt.Sprintf("%s/api/v1/namespaces/%s/pods/web/exec?container=app&command=true&stdout=true", cfg.Host, ns)
		var ds []time.Duration
		for i := 0; i < 20; i++ {
			ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard}); err != nil {
				t.Fatalf("exec true: %v", err)
			}
			ds = append(ds, time.Since(start))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		t.Logf("exec of `true` through the API server and kubelet: p50 %v, p90 %v, max %v (20 runs)", ds[9], ds[17], ds[19])
	})

	t.Run("attach", func(t *testing.T) {
		out, errOut, err := kubectlResult(kc, "hello attach\n", "attach", "-i", "attachable")
		if err != nil || !strings.Contains(out, "got: hello attach") {
			t.Errorf("kubectl attach -i = %q %q %v", out, errOut, err)
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary(), "kubectl", "--kubeconfig", kc, "-n", ns, "port-forward", "pod/web", ":8080")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
		var port string
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				port = m[1]
				break
			}
		}
		if port == "" {
			t.Fatal("kubectl port-forward printed no local port")
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		for i := 0; i < 3; i++ { // several connections over one forward
			resp, err := http.Get("http://127.0.0.1:" + port + "/index.html")
			if err != nil {
				t.Fatalf("GET through the forward: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "hello-from-pod\n" {
				t.Errorf("GET through the forward = %d %q", resp.StatusCode, body)
			}
		}
	})

	t.Run("nodes/proxy", func(t *testing.T) {
		base := "/api/v1/nodes/" + c.node + "/proxy"
		if out := kubectl(t, kc, "get", "--raw", base+"/healthz"); out != "ok" {
			t.Errorf("kubelet /healthz = %q", out)
		}
		metrics := kubectl(t, kc, "get", "--raw", base+"/metrics")
		for _, want := range []string{"kubelet_running_pods ", `kubelet_runtime_operations_total{operation_type="run_podsandbox"}`, `kubelet_running_containers{container_state="running"}`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("kubelet /metrics lacks %q", want)
			}
		}
		if out := kubectl(t, kc, "get", "--raw", base+"/metrics/cadvisor"); !regexp.MustCompile(`container_cpu_usage_seconds_total\{container="app",.*pod="web"\}`).MatchString(out) {
			t.Errorf("kubelet /metrics/cadvisor has no CPU of web/app:\n%s", out)
		}
		if out := kubectl(t, kc, "get", "--raw", base+"/stats/summary"); !strings.Contains(out, `"podRef":{"name":"web","namespace":"`+ns+`"`) || !strings.Contains(out, `"workingSetBytes"`) {
			t.Errorf("kubelet /stats/summary = %s", tail(out, 2000))
		}
	})

	t.Run("nodes/proxy with the kubelet's port", func(t *testing.T) {
		if out := kubectl(t, kc, "get", "--raw", fmt.Sprintf("/api/v1/nodes/%s:%d/proxy/healthz", c.node, c.kubeletPort)); out != "ok" {
			t.Errorf("kubelet /healthz by name:port = %q", out)
		}
	})

	t.Run("pods/proxy and services/proxy", func(t *testing.T) {
		// The API server reaches the pod's address on the node's bridge.
		if out := kubectl(t, kc, "get", "--raw", "/api/v1/namespaces/"+ns+"/pods/web:8080/proxy/"); out != "hello-from-pod\n" {
			t.Errorf("pods/web:8080/proxy/ = %q", out)
		}
		kubectlStdin(t, kc, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80,"targetPort":8080}]}}`, "apply", "-f", "-")
		for _, name := range []string{"web:http", "web:80", "http:web:80"} {
			waitFor(t, 30*time.Second, "services/"+name+"/proxy/index.html answers hello-from-pod", func() bool {
				out, _, _ := kubectlResult(kc, "", "get", "--raw", "/api/v1/namespaces/"+ns+"/services/"+name+"/proxy/index.html")
				return out == "hello-from-pod\n"
			})
		}
	})

	t.Run("log rotation", func(t *testing.T) {
		// More than --container-log-max-size (10Mi) at once: within a
		// rotation period (10 s) the log is rotated and containerd reopens
		// it (CRI ReopenContainerLog), so kubectl logs shows only what
		// came after, and the container keeps writing to the new file.
		kubectlStdin(t, kc, strings.ReplaceAll(`
apiVersion: v1
kind: Pod
metadata:
  name: chatty
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: IMAGE
    command: ["sh", "-c", "yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 | head -n 110000; while true; do echo tick; sleep 0.5; done"]
`, "IMAGE", c.image), "apply", "-f", "-")
		kubectl(t, kc, "wait", "--for=condition=Ready", "pod/chatty", "--timeout=60s")
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, _, err := kubectlResult(kc, "", "logs", "chatty")
			if err == nil && len(out) < 1<<20 && strings.HasSuffix(out, "tick\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("log not rotated within 60s: %d bytes", len(out))
			}
			time.Sleep(time.Second)
		}
	})

	t.Run("cp", func(t *testing.T) {
		dir := t.TempDir()
		src := filepath.Join(dir, "in.txt")
		if err := os.WriteFile(src, []byte("copied in\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		kubectl(t, kc, "cp", src, "web:/tmp/in.txt", "-c", "app")
		if out := kubectl(t, kc, "exec", "web", "-c", "app", "--", "cat", "/tmp/in.txt"); out != "copied in\n" {
			t.Errorf("file copied in = %q", out)
		}
		dst := filepath.Join(dir, "out.html")
		kubectl(t, kc, "cp", "web:/www/index.html", dst, "-c", "app")
		if got, err := os.ReadFile(dst); err != nil || string(got) != "hello-from-pod\n" {
			t.Errorf("file copied out = %q, %v", got, err)
		}
	})
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}

// openPTY opens a pseudo-terminal pair.
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		master.Close()
		return nil, nil, e
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		master.Close()
		return nil, nil, e
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}
