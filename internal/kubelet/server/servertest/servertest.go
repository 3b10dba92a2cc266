// Package servertest gives tests of the kubelet API (and of the API
// server's proxy to it) a CRI runtime that keeps state in memory, with a
// real CRI streaming server (k8s.io/cri-streaming) behind Exec, Attach and
// PortForward whose "containers" run a few built-in commands, and a Host
// with settable pods.
package servertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// Host is the kubelet's view of its pods.
type Host struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod
}

// NewHost returns a Host with no pods.
func NewHost() *Host { return &Host{pods: map[string]*corev1.Pod{}} }

// GetPods returns copies of every pod.
func (h *Host) GetPods() []*corev1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range h.pods {
		out = append(out, p.DeepCopy())
	}
	return out
}

// GetPodByName returns a copy of one pod.
func (h *Host) GetPodByName(ns, name string) (*corev1.Pod, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pods[ns+"/"+name]
	if !ok {
		return nil, false
	}
	return p.DeepCopy(), true
}

// Set adds or replaces a pod.
func (h *Host) Set(p *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pods[p.Namespace+"/"+p.Name] = p.DeepCopy()
}

// Runtime is a CRI runtime that keeps containers, sandboxes and stats in
// memory. Methods nobody uses panic (nil embedded interface), so a test
// notices a new dependency at once.
type Runtime struct {
	internalapi.RuntimeService

	stream streaming.Server

	mu         sync.Mutex
	containers map[string]*runtimeapi.ContainerStatus
	sandboxOf  map[string]string
	sandboxes  map[string]*runtimeapi.PodSandbox
	stats      map[string]*runtimeapi.ContainerStats
	reopened   []string
}

// NewRuntime starts the streaming server on loopback (stopped at the end
// of the test) and returns an empty runtime.
func NewRuntime(t testing.TB) *Runtime {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = ln.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	stream, err := streaming.NewServer(cfg, Commands{})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: stream}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return &Runtime{
		stream:     stream,
		containers: map[string]*runtimeapi.ContainerStatus{}, sandboxOf: map[string]string{},
		sandboxes: map[string]*runtimeapi.PodSandbox{}, stats: map[string]*runtimeapi.ContainerStats{},
	}
}

// AddSandbox adds (or replaces) a pod sandbox.
func (f *Runtime) AddSandbox(sb *runtimeapi.PodSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxes[sb.Id] = sb
}

// AddContainer adds (or replaces) a container of a sandbox.
func (f *Runtime) AddContainer(sandbox string, c *runtimeapi.ContainerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[c.Id] = c
	f.sandboxOf[c.Id] = sandbox
}

// SetState changes a container's state.
func (f *Runtime) SetState(id string, st runtimeapi.ContainerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[id].State = st
}

// SetStats sets a container's stats.
func (f *Runtime) SetStats(st *runtimeapi.ContainerStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats[st.Attributes.Id] = st
}

// Reopened lists the containers whose log was reopened, in order.
func (f *Runtime) Reopened() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reopened...)
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// ListContainers filters by state and labels.
func (f *Runtime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.Container
	for id, c := range f.containers {
		if filter != nil && ((filter.State != nil && filter.State.State != c.State) || !matches(filter.LabelSelector, c.Labels)) {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: id, PodSandboxId: f.sandboxOf[id], Metadata: c.Metadata, Image: c.Image, State: c.State, CreatedAt: c.CreatedAt, Labels: c.Labels})
	}
	return out, nil
}

// ContainerStatus returns a copy of the container's status.
func (f *Runtime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %q not found", id)
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(c).(*runtimeapi.ContainerStatus)}, nil
}

// ListPodSandbox filters by state and labels.
func (f *Runtime) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, sb := range f.sandboxes {
		if filter != nil && ((filter.State != nil && filter.State.State != sb.State) || !matches(filter.LabelSelector, sb.Labels)) {
			continue
		}
		out = append(out, sb)
	}
	return out, nil
}

// ListContainerStats returns every container's stats.
func (f *Runtime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.ContainerStats
	for _, st := range f.stats {
		out = append(out, st)
	}
	return out, nil
}

// ReopenContainerLog does what containerd does: a new, empty live file.
func (f *Runtime) ReopenContainerLog(ctx context.Context, id string) error {
	st, err := f.ContainerStatus(ctx, id, false)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.reopened = append(f.reopened, id)
	f.mu.Unlock()
	return os.WriteFile(st.Status.LogPath, nil, 0o640)
}

// Exec returns a streaming URL.
func (f *Runtime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return f.stream.GetExec(req)
}

// Attach returns a streaming URL.
func (f *Runtime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return f.stream.GetAttach(req)
}

// PortForward returns a streaming URL.
func (f *Runtime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return f.stream.GetPortForward(req)
}

// Commands is what the fake containers can run: "echo ARGS", "cat"
// (stdin to stdout) and "exit N" (writes "exiting" to stderr). Attach is
// cat. Port forwards reach 127.0.0.1:<port> on the test's host.
type Commands struct{}

// Exec runs one of the commands.
func (Commands) Exec(_ context.Context, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan remotecommandserver.TerminalSize) error {
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

// Attach is cat.
func (c Commands) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	return c.Exec(ctx, id, []string{"cat"}, in, out, errw, tty, resize)
}

// PortForward connects to 127.0.0.1:port.
func (Commands) PortForward(ctx context.Context, _ string, port int32, stream io.ReadWriteCloser) error {
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

// EchoServer listens on loopback and answers the first read of every
// connection with "echo: " and what it read; it returns the port.
func EchoServer(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				n, _ := c.Read(buf)
				fmt.Fprintf(c, "echo: %s", buf[:n])
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// The pod AddWebPod creates.
const (
	PodNamespace = "default"
	PodName      = "web"
	PodUID       = "0b8d7a44-1111-4e3c-9d3f-0123456789ab"
	ContainerID  = "c0ffee"
	PrevID       = "old"
	SandboxID    = "sb1"
)

// AddWebPod adds pod default/web on node to host and runtime: container
// "app" running (id ContainerID, CRI log liveLog under logDir) after a
// previous run (id PrevID, log prevLog), and container "waiting" not
// started. It returns the live log's path.
func AddWebPod(t testing.TB, host *Host, rt *Runtime, logDir, node, liveLog, prevLog string) string {
	t.Helper()
	dir := logDir + "/" + PodNamespace + "_" + PodName + "_" + PodUID + "/app"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	live, prev := dir+"/1.log", dir+"/0.log"
	if err := os.WriteFile(live, []byte(liveLog), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prev, []byte(prevLog), 0o640); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"io.kubernetes.pod.uid": PodUID, "io.kubernetes.pod.name": PodName, "io.kubernetes.pod.namespace": PodNamespace, "io.kubernetes.container.name": "app"}
	rt.AddSandbox(&runtimeapi.PodSandbox{
		Id: SandboxID, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 1,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: PodName, Namespace: PodNamespace, Uid: PodUID}, Labels: labels,
	})
	rt.AddContainer(SandboxID, &runtimeapi.ContainerStatus{Id: ContainerID, State: runtimeapi.ContainerState_CONTAINER_RUNNING, LogPath: live, Labels: labels, CreatedAt: 2, Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 1}, Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	rt.AddContainer(SandboxID, &runtimeapi.ContainerStatus{Id: PrevID, State: runtimeapi.ContainerState_CONTAINER_EXITED, LogPath: prev, Labels: labels, CreatedAt: 1, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}})
	host.Set(WebPod(node))
	return live
}

// WebPod is the API object of the pod AddWebPod creates, with the status
// its kubelet reports.
func WebPod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: PodNamespace, Name: PodName, UID: types.UID(PodUID)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "busybox"}, {Name: "waiting", Image: "busybox"}}},
		Status: corev1.PodStatus{
			StartTime: &metav1.Time{Time: time.Unix(1700000000, 0)},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", ContainerID: "containerd://" + ContainerID, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://" + PrevID, ExitCode: 1}}},
				{Name: "waiting", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
			},
		},
	}
}
