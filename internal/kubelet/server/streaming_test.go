package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"

	"github.com/skiff-sh/skiff/internal/kubelet/server/servertest"
)

// executors are the two ways kubectl streams: websockets (v5, translated
// by the server) and SPDY (passed through).
func executors(t *testing.T, h *harness, method string, u *url.URL) map[string]remotecommand.Executor {
	t.Helper()
	ws, err := remotecommand.NewWebSocketExecutor(h.client, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := remotecommand.NewSPDYExecutor(h.client, method, u)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]remotecommand.Executor{"websocket": ws, "spdy": sp}
}

func TestExec(t *testing.T) {
	h := startHarness(t, nil)
	h.addPod(t, "", "")
	execURL := func(q string) *url.URL {
		u, _ := url.Parse(h.base + "/exec/default/web/app?" + q)
		return u
	}
	for _, tc := range []struct {
		name, query, stdin string
		wantOut, wantErr   string
		wantCode           int
	}{
		{name: "echo", query: "command=echo&command=hello&command=world&output=1&error=1", wantOut: "hello world\n"},
		{name: "stdin", query: "command=cat&input=1&output=1", stdin: "line one\nline two\n", wantOut: "line one\nline two\n"},
		{name: "exit code", query: "command=exit&command=3&output=1&error=1", wantErr: "exiting\n", wantCode: 3},
	} {
		for proto, ex := range executors(t, h, http.MethodPost, execURL(tc.query)) {
			t.Run(tc.name+"/"+proto, func(t *testing.T) {
				var out, errOut bytes.Buffer
				// As kubectl does, ask for exactly the streams the query names.
				opts := remotecommand.StreamOptions{Stdout: &out}
				if strings.Contains(tc.query, "error=1") {
					opts.Stderr = &errOut
				}
				if tc.stdin != "" {
					opts.Stdin = strings.NewReader(tc.stdin)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				err := ex.StreamWithContext(ctx, opts)
				var exitErr exec.CodeExitError
				switch {
				case tc.wantCode != 0:
					if !errors.As(err, &exitErr) || exitErr.Code != tc.wantCode {
						t.Fatalf("err = %v, want exit code %d", err, tc.wantCode)
					}
				case err != nil:
					t.Fatalf("stream: %v", err)
				}
				if out.String() != tc.wantOut || errOut.String() != tc.wantErr {
					t.Errorf("stdout %q stderr %q, want %q %q", out.String(), errOut.String(), tc.wantOut, tc.wantErr)
				}
			})
		}
	}

	t.Run("attach", func(t *testing.T) {
		u, _ := url.Parse(h.base + "/attach/default/web/app?input=1&output=1")
		for proto, ex := range executors(t, h, http.MethodPost, u) {
			var out bytes.Buffer
			if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &out}); err != nil {
				t.Fatalf("%s: %v", proto, err)
			}
			if out.String() != "typed\n" {
				t.Errorf("%s: attach output %q", proto, out.String())
			}
		}
	})

	t.Run("refusals", func(t *testing.T) {
		c := h.httpClient(t)
		for _, tc := range []struct{ path, want string }{
			{"/exec/default/web/waiting?command=ls&output=1", `container not found ("waiting")`},
			{"/exec/default/nope/app?command=ls&output=1", `pod "nope" does not exist`},
			{"/exec/default/web/app?command=ls", "you must specify at least 1 of stdin, stdout, stderr"},
		} {
			resp, err := c.Post(h.base+tc.path, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 || strings.TrimSpace(string(body)) != tc.want {
				t.Errorf("%s = %d %q, want %q", tc.path, resp.StatusCode, body, tc.want)
			}
		}
	})
}

func TestPortForward(t *testing.T) {
	h := startHarness(t, nil)
	h.addPod(t, "", "")
	port := servertest.EchoServer(t)
	u, _ := url.Parse(h.base + "/portForward/default/web")
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, h.client)
	if err != nil {
		t.Fatal(err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(h.client)
	if err != nil {
		t.Fatal(err)
	}
	direct := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	for name, dialer := range map[string]httpstream.Dialer{"websocket": tunnel, "spdy": direct} {
		t.Run(name, func(t *testing.T) {
			stop, ready := make(chan struct{}), make(chan struct{})
			var fwOut bytes.Buffer
			fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, &fwOut, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { errc <- fw.ForwardPorts() }()
			select {
			case <-ready:
			case err := <-errc:
				t.Fatalf("ForwardPorts: %v", err)
			case <-time.After(20 * time.Second):
				t.Fatal("port forward not ready")
			}
			ports, err := fw.GetPorts()
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprint(c, "ping")
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			got, _ := io.ReadAll(c)
			if string(got) != "echo: ping" {
				t.Errorf("through the forward: %q, want %q", got, "echo: ping")
			}
			close(stop)
			if err := <-errc; err != nil {
				t.Errorf("ForwardPorts: %v", err)
			}
		})
	}
}
