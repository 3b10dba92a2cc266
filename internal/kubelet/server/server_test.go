package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/skiff-sh/skiff/internal/pki"
)

// fakeHost is the kubelet's view of its pods.
type fakeHost struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod
}

func (h *fakeHost) GetPods() []*corev1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range h.pods {
		out = append(out, p.DeepCopy())
	}
	return out
}

func (h *fakeHost) GetPodByName(ns, name string) (*corev1.Pod, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pods[ns+"/"+name]
	if !ok {
		return nil, false
	}
	return p.DeepCopy(), true
}

func (h *fakeHost) set(p *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pods[p.Namespace+"/"+p.Name] = p
}

// streamingRuntime is the fake CRI runtime with a real CRI streaming server
// behind Exec, Attach and PortForward, and a log reopen that does what
// containerd does (a new live file).
type streamingRuntime struct {
	*fakeRuntime
	stream streaming.Server
	mu     sync.Mutex
	reopen []string
}

func (r *streamingRuntime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return r.stream.GetExec(req)
}

func (r *streamingRuntime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return r.stream.GetAttach(req)
}

func (r *streamingRuntime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return r.stream.GetPortForward(req)
}

func (r *streamingRuntime) ReopenContainerLog(ctx context.Context, id string) error {
	st, err := r.ContainerStatus(ctx, id, false)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.reopen = append(r.reopen, id)
	r.mu.Unlock()
	return os.WriteFile(st.Status.LogPath, nil, 0o640)
}

// commands is what the fake containers can run: echo, cat (stdin to
// stdout) and exit N. Attach is cat.
type commands struct{}

func (commands) Exec(_ context.Context, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan remotecommandserver.TerminalSize) error {
	switch cmd[0] {
	case "echo":
		_, err := fmt.Fprintln(out, strings.Join(cmd[1:], " "))
		return err
	case "cat":
		_, err := io.Copy(out, in)
		return err
	case "exit":
		var code int
		fmt.Sscan(cmd[1], &code)
		_, _ = fmt.Fprintln(errw, "exiting")
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return fmt.Errorf("executable file not found: %s", cmd[0])
}

func (c commands) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	return c.Exec(ctx, id, []string{"cat"}, in, out, errw, tty, resize)
}

// PortForward connects to 127.0.0.1:port, where the test's "pod" listens.
func (commands) PortForward(ctx context.Context, _ string, port int32, stream io.ReadWriteCloser) error {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	<-done
	return nil
}

type harness struct {
	host    *fakeHost
	runtime *streamingRuntime
	srv     *Server
	bundle  *pki.Bundle
	client  *rest.Config // the API server's kubelet client identity
	base    string
	logDir  string
	metrics *Metrics
}

const (
	podUID      = "0b8d7a44-1111-4e3c-9d3f-0123456789ab"
	containerID = "c0ffee"
	sandboxID   = "sb1"
)

func startHarness(t *testing.T, configure func(*Options)) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	b, err := pki.Ensure(filepath.Join(dir, "pki"), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	serving, err := b.EnsureKubeletServing("kubelet.crt", "kubelet.key", "node-a", nil, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := b.EnsureKubeletClient(pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = clientCert

	cfg := streaming.DefaultConfig
	cfg.Addr = "127.0.0.1:0"
	stream, err := streaming.NewServer(cfg, commands{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The streaming server builds URLs from its config; serve it ourselves.
	cfg.BaseURL = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	stream, err = streaming.NewServer(cfg, commands{})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: stream}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	h := &harness{host: &fakeHost{pods: map[string]*corev1.Pod{}}, bundle: b, logDir: filepath.Join(dir, "pods")}
	h.runtime = &streamingRuntime{fakeRuntime: newFakeRuntime(), stream: stream}
	h.metrics = NewMetrics(prometheus.NewRegistry())
	opts := Options{Address: "127.0.0.1:0", Certificate: &serving, ClientCA: b.CAPool, NodeName: "node-a", Metrics: h.metrics}
	if configure != nil {
		configure(&opts)
	}
	h.srv, err = New(h.host, InstrumentRuntime(h.runtime, h.metrics), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- h.srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	select {
	case <-h.srv.Ready():
	case err := <-errc:
		t.Fatalf("Start: %v", err)
	}
	h.base = "https://" + h.srv.Addr()
	certPEM, _ := os.ReadFile(filepath.Join(b.Dir, pki.KubeletClientCertFile))
	keyPEM, _ := os.ReadFile(filepath.Join(b.Dir, pki.KubeletClientKeyFile))
	h.client = &rest.Config{Host: h.base, TLSClientConfig: rest.TLSClientConfig{CAData: b.CAPEM, CertData: certPEM, KeyData: keyPEM}}
	return h
}

// addPod adds a running pod with one container "app" whose CRI log is
// logLines, and a previous (exited) instance with prevLines.
func (h *harness) addPod(t *testing.T, logLines, prevLines string) string {
	t.Helper()
	dir := filepath.Join(h.logDir, "default_web_"+podUID, "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	live, prev := filepath.Join(dir, "1.log"), filepath.Join(dir, "0.log")
	if err := os.WriteFile(live, []byte(logLines), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prev, []byte(prevLines), 0o640); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"io.kubernetes.pod.uid": podUID, "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default", "io.kubernetes.container.name": "app"}
	h.runtime.addSandbox(&runtimeapi.PodSandbox{
		Id: sandboxID, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 1,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: podUID}, Labels: labels,
	})
	h.runtime.addContainer(sandboxID, &runtimeapi.ContainerStatus{Id: containerID, State: runtimeapi.ContainerState_CONTAINER_RUNNING, LogPath: live, Labels: labels, CreatedAt: 2, Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 1}, Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	h.runtime.addContainer(sandboxID, &runtimeapi.ContainerStatus{Id: "old", State: runtimeapi.ContainerState_CONTAINER_EXITED, LogPath: prev, Labels: labels, CreatedAt: 1, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}})
	h.host.set(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID(podUID)},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app"}, {Name: "waiting"}}},
		Status: corev1.PodStatus{
			StartTime: &metav1.Time{Time: time.Unix(1700000000, 0)},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", ContainerID: "containerd://" + containerID, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://old", ExitCode: 1}}},
				{Name: "waiting", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
			},
		},
	})
	return live
}

func (h *harness) httpClient(t *testing.T) *http.Client {
	t.Helper()
	tc, err := rest.TLSConfigFor(h.client)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestAuthentication(t *testing.T) {
	h := startHarness(t, nil)
	strict := startHarness(t, func(o *Options) { o.AllowedUsers, o.AllowedGroups = []string{"someone-else"}, []string{} })

	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.bundle.CAPool}}}
	if code, body := get(t, anon, h.base+"/pods"); code != http.StatusUnauthorized {
		t.Errorf("anonymous /pods = %d %q, want 401", code, body)
	}
	if code, _ := get(t, anon, h.base+"/healthz"); code != http.StatusUnauthorized {
		t.Errorf("anonymous /healthz = %d, want 401", code)
	}
	if code, body := get(t, h.httpClient(t), h.base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("kubelet client /healthz = %d %q", code, body)
	}
	code, body := get(t, strict.httpClient(t), strict.base+"/stats/summary")
	if want := "Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, subresource(s)=[stats])"; code != http.StatusForbidden || strings.TrimSpace(body) != want {
		t.Errorf("unlisted user = %d %q, want 403 %q", code, body, want)
	}

	// A certificate from another CA does not get through the handshake.
	other, err := pki.Ensure(t.TempDir(), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	otherTLS, err := other.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	otherTLS.RootCAs = h.bundle.CAPool
	foreign := &http.Client{Transport: &http.Transport{TLSClientConfig: otherTLS}}
	if resp, err := foreign.Get(h.base + "/pods"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("foreign CA client = %d, want a refused handshake or 401", resp.StatusCode)
		}
	}
}

func TestPods(t *testing.T) {
	h := startHarness(t, nil)
	h.addPod(t, "", "")
	code, body := get(t, h.httpClient(t), h.base+"/pods")
	if code != http.StatusOK || !strings.Contains(body, `"kind":"PodList"`) || !strings.Contains(body, `"uid":"`+podUID+`"`) {
		t.Errorf("/pods = %d %s", code, body)
	}
}
