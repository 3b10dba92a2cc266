// Package e2e drives the real skiff binary as a user would: it starts
// `skiff server` on free ports in a temporary data directory and runs
// `skiff kubectl` against it.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// binaryEnv names a prebuilt skiff binary to use instead of building one.
const binaryEnv = "SKIFF_BINARY"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin := os.Getenv(binaryEnv)
	if bin == "" {
		dir, err := os.MkdirTemp("", "skiff-e2e-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "skiff")
		// Through make, so the binary carries the same version stamps as
		// `make build` (kubectl reports its version from them).
		build := exec.Command("make", "--no-print-directory", "build", "BIN="+bin)
		if _, err := exec.LookPath("make"); err != nil {
			build = exec.Command("go", "build", "-o", bin, "./cmd/skiff")
		}
		build.Dir = repoRoot()
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build skiff: %v\n", err)
			return 1
		}
	}
	if err := os.Setenv(binaryEnv, bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	stopAgentCluster()
	return code
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

func binary() string { return os.Getenv(binaryEnv) }

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a bytes.Buffer safe for a writing process and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serverProc is a running `skiff server`.
type serverProc struct {
	cmd    *exec.Cmd
	output *syncBuffer
	done   chan struct{}
	err    error
}

type serverPorts struct{ api, etcdClient, etcdPeer int }

func newPorts(t *testing.T) serverPorts {
	return serverPorts{api: freePort(t), etcdClient: freePort(t), etcdPeer: freePort(t)}
}

// startServer starts `skiff server` and waits until it says it is ready and
// /readyz answers 200. The ports were free a moment ago; if another process
// (tests run in parallel) took one since, the server exits with "address
// already in use", and it is started again on new ports.
func startServer(t *testing.T, dataDir string, ports serverPorts) *serverProc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, inUse := tryStartServer(t, dataDir, ports, attempt < 3)
		if !inUse {
			return p
		}
		t.Logf("a port was taken before skiff server bound it; retrying on new ports")
		ports = newPorts(t)
	}
}

func tryStartServer(t *testing.T, dataDir string, ports serverPorts, mayRetry bool) (*serverProc, bool) {
	t.Helper()
	cmd := exec.Command(binary(), "server", "--disable-agent",
		"--data-dir", dataDir,
		"--https-listen-port", fmt.Sprint(ports.api),
		"--etcd-client-port", fmt.Sprint(ports.etcdClient),
		"--etcd-peer-port", fmt.Sprint(ports.etcdPeer),
	)
	p := &serverProc{cmd: cmd, output: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.output, p.output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("skiff server output:\n%s", p.output.String())
		}
	})

	kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			if mayRetry && strings.Contains(p.output.String(), "address already in use") {
				return nil, true
			}
			t.Fatalf("skiff server exited before it was ready: %v\n%s", p.err, p.output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("skiff server not ready after 60s\n%s", p.output.String())
		}
		if strings.Contains(p.output.String(), "Skiff is ready") && readyz(kubeconfig) {
			return p, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readyz(kubeconfig string) bool {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return false
	}
	cfg.Timeout = 2 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false
	}
	resp, err := client.Get(cfg.Host + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// stop sends SIGTERM and checks that the server exits 0 within a few seconds.
func (p *serverProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("skiff server exited with %v after SIGTERM\n%s", p.err, p.output.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("skiff server still running 10s after SIGTERM\n%s", p.output.String())
	}
}

// kubectl runs `skiff kubectl --kubeconfig K args...` and returns stdout;
// it fails the test if kubectl fails.
func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectlResult(kubeconfig, "", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// kubectlStdin is kubectl with stdin.
func kubectlStdin(t *testing.T, kubeconfig, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectlResult(kubeconfig, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func kubectlResult(kubeconfig, stdin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(), append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Stdin = strings.NewReader(stdin)
	err = cmd.Run()
	return o.String(), e.String(), err
}

// table parses kubectl's table output into a header and rows keyed by the
// first column.
func table(t *testing.T, out string) (header []string, rows map[string][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("no table in output %q", out)
	}
	header = strings.Fields(lines[0])
	rows = map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) > 0 {
			rows[f[0]] = f
		}
	}
	return header, rows
}
