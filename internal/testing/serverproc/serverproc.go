// Package serverproc runs `skiff server` as a process of its own, for
// benchmarks that measure it from outside (bench/memory, bench/soak): it
// builds the binary unless SKIFF_BIN names one, starts it on free ports in
// a temporary data directory, waits until it is ready, stops it at the end
// of the benchmark, and reads its memory from /proc and its /metrics.
package serverproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Server is a running `skiff server`.
type Server struct {
	Cmd        *exec.Cmd
	Kubeconfig string // the admin's
}

// Start builds (unless SKIFF_BIN is set) and starts `skiff server
// --disable-agent --disable-cluster-dns` with args added, and waits for
// "Skiff is ready" (3 minutes at most). The benchmark's cleanup stops it.
func Start(b testing.TB, args ...string) *Server {
	b.Helper()
	bin := os.Getenv("SKIFF_BIN")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "skiff")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/skiff")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go build ./cmd/skiff: %v\n%s", err, out)
		}
	}
	dir := b.TempDir()
	s := &Server{Kubeconfig: filepath.Join(dir, "admin.kubeconfig")}
	s.Cmd = exec.Command(bin, append([]string{"server", "--disable-agent", "--disable-cluster-dns", "--data-dir", dir,
		"--https-listen-port", strconv.Itoa(FreePort(b)), "--etcd-client-port", strconv.Itoa(FreePort(b)),
		"--etcd-peer-port", strconv.Itoa(FreePort(b))}, args...)...)
	pr, pw := io.Pipe()
	s.Cmd.Stdout, s.Cmd.Stderr = pw, pw
	if err := s.Cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		closed := false
		for sc.Scan() {
			if !closed && strings.Contains(sc.Text(), "Skiff is ready") {
				close(ready)
				closed = true
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	b.Cleanup(func() {
		_ = s.Cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = s.Cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = s.Cmd.Process.Kill()
			<-done
		}
		pw.Close()
	})
	select {
	case <-ready:
	case <-time.After(3 * time.Minute):
		b.Fatal("skiff server not ready after 3m")
	}
	return s
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.Cmd.Process.Pid }

// FreePort is a TCP port free on the loopback address now.
func FreePort(b testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ProcKiB reads a "Name: N kB" line of /proc/<pid>/<file> (status,
// smaps_rollup) in bytes; 0 when it cannot.
func ProcKiB(pid int, file, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// Sample is one line of /metrics: the name with its labels, and the value.
type Sample struct {
	Name  string // e.g. `apiserver_storage_objects{resource="pods"}`
	Value float64
}

// Metrics reads the server's /metrics through cs.
func Metrics(ctx context.Context, cs kubernetes.Interface) ([]Sample, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("/metrics: %w", err)
	}
	var out []Sample
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out = append(out, Sample{Name: line[:i], Value: v})
		}
	}
	return out, nil
}

// Sum adds the samples of one metric, whatever their labels.
func Sum(samples []Sample, metric string) float64 {
	var sum float64
	for _, s := range samples {
		if s.Name == metric || strings.HasPrefix(s.Name, metric+"{") {
			sum += s.Value
		}
	}
	return sum
}
