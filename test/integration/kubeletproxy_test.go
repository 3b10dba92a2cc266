package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
	"github.com/skiff-sh/skiff/internal/kubelet/server/servertest"
	"github.com/skiff-sh/skiff/internal/pki"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

const proxyLog = `2026-12-01T10:00:00.000000001Z stdout F first line
2026-12-01T10:00:01.000000000Z stderr F an error
2026-12-01T10:00:03.000000000Z stdout F last line
`

// TestKubeletProxy drives pods/log, exec, attach, portforward and
// nodes/proxy through the API server to a kubelet API server (the real
// one, on a runtime fake with a real CRI streaming server), as kubectl
// does: websockets first, SPDY as the fallback.
func TestKubeletProxy(t *testing.T) {
	// The kubelet link has a CA of its own here; in a cluster it is the
	// cluster CA.
	link, err := pki.Ensure(t.TempDir(), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	linkTLS, err := link.KubeletClientTLS(pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) { cfg.KubeletClientTLS = linkTLS }})
	cs := c.Clientset()
	ctx := testCtx(t, 2*time.Minute)

	serving, err := link.EnsureKubeletServing("kubelet.crt", "kubelet.key", "node-a", []string{"127.0.0.1"}, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host, rt := servertest.NewHost(), servertest.NewRuntime(t)
	servertest.AddWebPod(t, host, rt, filepath.Join(t.TempDir(), "pods"), "node-a", proxyLog, "2026-12-01T09:00:00Z stdout F crashed run\n")
	ks, err := kubeletserver.New(host, rt, nil, kubeletserver.Options{Address: "127.0.0.1:0", Certificate: &serving, ClientCA: link.CAPool, NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	kctx, stop := context.WithCancel(context.Background())
	kdone := make(chan error, 1)
	go func() { kdone <- ks.Start(kctx) }()
	t.Cleanup(func() { stop(); <-kdone })
	<-ks.Ready()
	_, portStr, _ := net.SplitHostPort(ks.Addr())
	kubeletPort, _ := strconv.Atoi(portStr)

	// A node whose kubelet listens nowhere.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := dead.Addr().(*net.TCPAddr).Port
	dead.Close()
	for name, port := range map[string]int{"node-a": kubeletPort, "node-dead": deadPort} {
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, node string }{{"web", "node-a"}, {"stranded", "node-dead"}, {"pending", ""}} {
		pod := servertest.WebPod(p.node)
		pod.ObjectMeta = metav1.ObjectMeta{Name: p.name, Namespace: "default"}
		pod.Status = corev1.PodStatus{}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	logs := func(pod string, opts *corev1.PodLogOptions) (string, error) {
		// Stream, as kubectl logs does (errors arrive as a Status).
		rc, err := cs.CoreV1().Pods("default").GetLogs(pod, opts).Stream(ctx)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	t.Run("logs", func(t *testing.T) {
		for _, tc := range []struct {
			name, pod string
			opts      corev1.PodLogOptions
			want      string
			code      int32
			msg       string
		}{
			{name: "all", pod: "web", opts: corev1.PodLogOptions{Container: "app"}, want: "first line\nan error\nlast line\n"},
			{name: "tail", pod: "web", opts: corev1.PodLogOptions{Container: "app", TailLines: int64p(1)}, want: "last line\n"},
			{name: "previous", pod: "web", opts: corev1.PodLogOptions{Container: "app", Previous: true}, want: "crashed run\n"},
			{name: "pod without a node", pod: "pending", opts: corev1.PodLogOptions{Container: "app"}, want: ""},
			{name: "container must be named", pod: "web", code: 400, msg: "a container name must be specified for pod web, choose one of: [app waiting]"},
			{name: "unknown container", pod: "web", opts: corev1.PodLogOptions{Container: "nope"}, code: 400, msg: "container nope is not valid for pod web"},
			{name: "waiting container", pod: "web", opts: corev1.PodLogOptions{Container: "waiting"}, code: 400, msg: `container "waiting" in pod "web" is waiting to start: ContainerCreating`},
			{name: "negative tail", pod: "web", opts: corev1.PodLogOptions{Container: "app", TailLines: int64p(-1)}, code: 422},
			{name: "kubelet unreachable", pod: "stranded", opts: corev1.PodLogOptions{Container: "app"}, code: 503},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := logs(tc.pod, &tc.opts)
				if tc.code != 0 {
					var se apierrors.APIStatus
					if !errors.As(err, &se) || se.Status().Code != tc.code || (tc.msg != "" && se.Status().Message != tc.msg) {
						t.Fatalf("err = %v, want %d %q", err, tc.code, tc.msg)
					}
					return
				}
				if err != nil || got != tc.want {
					t.Fatalf("logs = %q, %v; want %q", got, err, tc.want)
				}
			})
		}
		t.Run("follow", func(t *testing.T) {
			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			rc, err := cs.CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{Container: "app", Follow: true}).Stream(fctx)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			buf := make([]byte, len("first line\n"))
			if _, err := io.ReadFull(rc, buf); err != nil || string(buf) != "first line\n" {
				t.Fatalf("followed log starts %q, %v", buf, err)
			}
		})
	})

	streamURL := func(pod, sub string, opts *corev1.PodExecOptions) string {
		return cs.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name(pod).SubResource(sub).VersionedParams(opts, scheme.ParameterCodec).URL().String()
	}
	executors := func(t *testing.T, u string) map[string]remotecommand.Executor {
		ws, err := remotecommand.NewWebSocketExecutor(c.Config, "GET", u)
		if err != nil {
			t.Fatal(err)
		}
		pu, _ := http.NewRequest("POST", u, nil)
		sp, err := remotecommand.NewSPDYExecutor(c.Config, "POST", pu.URL)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]remotecommand.Executor{"websocket": ws, "spdy": sp}
	}
	t.Run("exec", func(t *testing.T) {
		for proto, ex := range executors(t, streamURL("web", "exec", &corev1.PodExecOptions{Container: "app", Command: []string{"echo", "hello"}, Stdout: true})) {
			var out bytes.Buffer
			if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "hello\n" {
				t.Errorf("%s: exec echo = %q, %v", proto, out.String(), err)
			}
		}
		for proto, ex := range executors(t, streamURL("web", "exec", &corev1.PodExecOptions{Container: "app", Command: []string{"exit", "7"}, Stdout: true, Stderr: true})) {
			var out, errOut bytes.Buffer
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
			var exitErr exec.CodeExitError
			if !errors.As(err, &exitErr) || exitErr.Code != 7 || errOut.String() != "exiting\n" {
				t.Errorf("%s: exit 7 = %v, stderr %q", proto, err, errOut.String())
			}
		}
		for proto, ex := range executors(t, streamURL("web", "attach", &corev1.PodExecOptions{Container: "app", Stdin: true, Stdout: true})) {
			var out bytes.Buffer
			if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &out}); err != nil || out.String() != "typed\n" {
				t.Errorf("%s: attach = %q, %v", proto, out.String(), err)
			}
		}
		for _, tc := range []struct {
			pod  string
			opts corev1.PodExecOptions
			code int32
			msg  string
		}{
			{"pending", corev1.PodExecOptions{Container: "app", Command: []string{"ls"}, Stdout: true}, 400, "pod pending does not have a host assigned"},
			{"web", corev1.PodExecOptions{Command: []string{"ls"}, Stdout: true}, 400, "a container name must be specified for pod web, choose one of: [app waiting]"},
		} {
			err := cs.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name(tc.pod).SubResource("exec").VersionedParams(&tc.opts, scheme.ParameterCodec).Do(ctx).Error()
			var se apierrors.APIStatus
			if !errors.As(err, &se) || se.Status().Code != tc.code || (tc.msg != "" && se.Status().Message != tc.msg) {
				t.Errorf("exec in %s = %v, want %d %q", tc.pod, err, tc.code, tc.msg)
			}
		}
	})

	t.Run("exec on an unreachable kubelet", func(t *testing.T) {
		for proto, ex := range executors(t, streamURL("stranded", "exec", &corev1.PodExecOptions{Container: "app", Command: []string{"ls"}, Stdout: true})) {
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
			if err == nil || !strings.Contains(err.Error(), "error trying to reach the kubelet") {
				t.Errorf("%s: %v, want the kubelet connection error", proto, err)
			}
		}
	})

	t.Run("portforward", func(t *testing.T) {
		port := servertest.EchoServer(t)
		req := cs.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("web").SubResource("portforward")
		tunnel, err := portforward.NewSPDYOverWebsocketDialer(req.URL(), c.Config)
		if err != nil {
			t.Fatal(err)
		}
		transport, upgrader, err := spdy.RoundTripperFor(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		direct := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
		for name, dialer := range map[string]httpstream.Dialer{"websocket": tunnel, "spdy": direct} {
			stopCh, ready := make(chan struct{}), make(chan struct{})
			fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stopCh, ready, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { errc <- fw.ForwardPorts() }()
			select {
			case <-ready:
			case err := <-errc:
				t.Fatalf("%s: ForwardPorts: %v", name, err)
			case <-ctx.Done():
				t.Fatalf("%s: not ready", name)
			}
			ports, _ := fw.GetPorts()
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprint(conn, "ping")
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			got, _ := io.ReadAll(conn)
			conn.Close()
			if string(got) != "echo: ping" {
				t.Errorf("%s: through the forward %q", name, got)
			}
			close(stopCh)
			<-errc
		}
	})

	t.Run("nodes/proxy", func(t *testing.T) {
		body, err := cs.CoreV1().RESTClient().Get().Resource("nodes").Name("node-a").SubResource("proxy", "healthz").DoRaw(ctx)
		if err != nil || string(body) != "ok" {
			t.Errorf("nodes/node-a/proxy/healthz = %q, %v", body, err)
		}
		var pods corev1.PodList
		if err := cs.CoreV1().RESTClient().Get().Resource("nodes").Name("node-a").SubResource("proxy", "pods").Do(ctx).Into(&pods); err != nil || len(pods.Items) != 1 {
			t.Errorf("nodes/node-a/proxy/pods = %d pods, %v", len(pods.Items), err)
		}
		err = cs.CoreV1().RESTClient().Get().Resource("nodes").Name("node-dead").SubResource("proxy", "healthz").Do(ctx).Error()
		if !apierrors.IsServiceUnavailable(err) {
			t.Errorf("proxy to a dead kubelet = %v, want 503", err)
		}
	})
}

func int64p(v int64) *int64 { return &v }
