package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// Wire names of the streaming protocols.
const (
	remoteCommandV5   = "v5.channel.k8s.io"
	spdyTunnelPrefix  = "SPDY/3.1+"
	headerSPDY31      = "SPDY/3.1"
	headerProtocolVer = "X-Stream-Protocol-Version"
	// Channels of the remote command protocols.
	chanStdin, chanStdout, chanStderr, chanError, chanResize = 0, 1, 2, 3, 4
)

// streamOptions are the streams an exec or attach asks for, in the query
// form kubectl sends ("stdin=1", "tty=true" are both accepted).
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

func parseStreamOptions(q url.Values) (streamOptions, error) {
	on := func(k string) bool { v := q.Get(k); return v == "1" || v == "true" }
	o := streamOptions{stdin: on("input") || on("stdin"), stdout: on("output") || on("stdout"), stderr: on("error") || on("stderr"), tty: on("tty")}
	if o.tty && o.stderr {
		// A terminal has no separate stderr; upstream drops it too.
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// streamTarget resolves {ns}/{pod}[/{uid}]/{container} to a running
// container's runtime id; on failure it has written the response.
func (s *Server) streamTarget(w http.ResponseWriter, r *http.Request) (*corev1.Pod, string, bool) {
	ns, name, uid, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("uid"), r.PathValue("container")
	pod, ok := s.host.GetPodByName(ns, name)
	if !ok || (uid != "" && string(pod.UID) != uid) {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return nil, "", false
	}
	if container == "" {
		return pod, "", true
	}
	id, err := s.runningContainer(r.Context(), pod, container)
	if err != nil {
		writeRuntimeError(w, err)
		return nil, "", false
	}
	return pod, id, true
}

// runningContainer finds the running instance of a pod's container: the
// status the kubelet reported, else the runtime's containers by upstream's
// labels.
func (s *Server) runningContainer(ctx context.Context, pod *corev1.Pod, name string) (string, error) {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name && cs.State.Running != nil && cs.ContainerID != "" {
				return runtimeID(cs.ContainerID), nil
			}
		}
	}
	cs, err := s.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID), "io.kubernetes.container.name": name},
	})
	if err != nil {
		return "", fmt.Errorf("list containers: %w", err)
	}
	if len(cs) == 0 {
		return "", fmt.Errorf("container not found (%q)", name)
	}
	newest := cs[0]
	for _, c := range cs[1:] {
		if c.CreatedAt > newest.CreatedAt {
			newest = c
		}
	}
	return newest.Id, nil
}

// runtimeID strips the "<runtime>://" prefix of an API container id.
func runtimeID(containerID string) string {
	if _, id, ok := strings.Cut(containerID, "://"); ok {
		return id
	}
	return containerID
}

// writeRuntimeError answers a failed lookup or CRI call: gRPC codes map to
// HTTP as upstream's streaming errors do, anything else is a 500.
func writeRuntimeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.NotFound:
			code = http.StatusNotFound
		case codes.ResourceExhausted:
			code = http.StatusTooManyRequests
		case codes.InvalidArgument:
			code = http.StatusBadRequest
		case codes.Unavailable:
			code = http.StatusServiceUnavailable
		}
		err = errors.New(st.Message())
	}
	http.Error(w, err.Error(), code)
}

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := parseStreamOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, id, ok := s.streamTarget(w, r)
	if !ok {
		return
	}
	resp, err := s.runtime.Exec(r.Context(), &runtimeapi.ExecRequest{
		ContainerId: id, Cmd: r.URL.Query()["command"],
		Tty: opts.tty, Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr,
	})
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	s.proxyStream(w, r, resp.Url, opts)
}

func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := parseStreamOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, id, ok := s.streamTarget(w, r)
	if !ok {
		return
	}
	resp, err := s.runtime.Attach(r.Context(), &runtimeapi.AttachRequest{
		ContainerId: id, Tty: opts.tty, Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr,
	})
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	s.proxyStream(w, r, resp.Url, opts)
}

func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	pod, _, ok := s.streamTarget(w, r)
	if !ok {
		return
	}
	sandbox, err := s.podSandbox(r.Context(), pod)
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	resp, err := s.runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sandbox})
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	s.proxyStream(w, r, resp.Url, streamOptions{})
}

// podSandbox finds the ready sandbox of a pod by upstream's uid label.
func (s *Server) podSandbox(ctx context.Context, pod *corev1.Pod) (string, error) {
	sbs, err := s.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)},
	})
	if err != nil {
		return "", fmt.Errorf("list pod sandboxes: %w", err)
	}
	if len(sbs) == 0 {
		return "", fmt.Errorf("pod not found (%q)", pod.Namespace+"/"+pod.Name)
	}
	newest := sbs[0]
	for _, sb := range sbs[1:] {
		if sb.CreatedAt > newest.CreatedAt {
			newest = sb
		}
	}
	return newest.Id, nil
}

// proxyStream connects the client to the runtime's streaming URL: SPDY
// and the websocket protocols the runtime knows pass through untouched,
// websocket v5 is translated to SPDY and SPDY tunnelled in a websocket is
// unwrapped.
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, rawURL string, opts streamOptions) {
	u, err := url.Parse(rawURL)
	if err != nil || !u.IsAbs() {
		http.Error(w, fmt.Sprintf("runtime gave an unusable streaming URL %q", rawURL), http.StatusInternalServerError)
		return
	}
	protocols := gwebsocket.Subprotocols(r)
	switch {
	case wsstream.IsWebSocketRequest(r) && containsString(protocols, remoteCommandV5):
		s.translateRemoteCommand(w, r, u, opts)
	case wsstream.IsWebSocketRequest(r) && len(tunneledSPDY(protocols)) > 0:
		s.tunnelSPDY(w, r, u, tunneledSPDY(protocols))
	default:
		h := proxy.NewUpgradeAwareHandler(u, nil, false, true, streamResponder{})
		h.ServeHTTP(w, r)
	}
}

type streamResponder struct{}

func (streamResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	klog.FromContext(r.Context()).V(2).Info("Streaming proxy failed", "path", r.URL.Path, "err", err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func tunneledSPDY(protocols []string) []string {
	var out []string
	for _, p := range protocols {
		if strings.HasPrefix(p, spdyTunnelPrefix) && strings.HasSuffix(p, ".k8s.io") {
			out = append(out, strings.TrimPrefix(p, spdyTunnelPrefix))
		}
	}
	return out
}

// translateRemoteCommand serves a websocket v5.channel.k8s.io exec or
// attach by running it over SPDY against the runtime, copying the
// channels both ways and reporting the result on the error channel.
func (s *Server) translateRemoteCommand(w http.ResponseWriter, r *http.Request, u *url.URL, opts streamOptions) {
	channel := func(on bool, t wsstream.ChannelType) wsstream.ChannelType {
		if on {
			return t
		}
		return wsstream.IgnoreChannel
	}
	channels := []wsstream.ChannelType{
		chanStdin:  channel(opts.stdin, wsstream.ReadChannel),
		chanStdout: channel(opts.stdout, wsstream.WriteChannel),
		chanStderr: channel(opts.stderr, wsstream.WriteChannel),
		chanError:  wsstream.WriteChannel,
		chanResize: wsstream.ReadChannel,
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{remoteCommandV5: {Binary: true, Channels: channels}})
	conn.SetIdleTimeout(s.opts.StreamIdleTimeout)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		// Open has answered the client.
		return
	}
	defer conn.Close()
	// An empty first write completes the handshake on the client side.
	first := chanError
	if opts.stdout {
		first = chanStdout
	} else if opts.stderr {
		first = chanStderr
	}
	if _, err := streams[first].Write(nil); err != nil {
		return
	}
	writeStatus := func(st metav1.Status) {
		data, _ := json.Marshal(st)
		conn.SetWriteDeadline(10 * time.Second)
		_, _ = streams[chanError].Write(data)
	}

	transport, upgrader, err := clientspdy.RoundTripperFor(&rest.Config{Host: u.Scheme + "://" + u.Host, TLSClientConfig: rest.TLSClientConfig{Insecure: u.Scheme == "https"}})
	if err != nil {
		writeStatus(apierrors.NewInternalError(err).ErrStatus)
		return
	}
	executor, err := remotecommand.NewSPDYExecutorForTransports(transport, upgrader, http.MethodPost, u)
	if err != nil {
		writeStatus(apierrors.NewInternalError(err).ErrStatus)
		return
	}
	so := remotecommand.StreamOptions{Tty: opts.tty}
	if opts.stdin {
		so.Stdin = streams[chanStdin]
	}
	if opts.stdout {
		so.Stdout = streams[chanStdout]
	}
	if opts.stderr {
		so.Stderr = streams[chanStderr]
	}
	if opts.tty {
		sizes := make(chan remotecommand.TerminalSize)
		go func() {
			defer close(sizes)
			dec := json.NewDecoder(streams[chanResize])
			for {
				var ts remotecommand.TerminalSize
				if err := dec.Decode(&ts); err != nil {
					return
				}
				select {
				case sizes <- ts:
				case <-r.Context().Done():
					return
				}
			}
		}()
		so.TerminalSizeQueue = sizeQueue(sizes)
	}
	err = executor.StreamWithContext(r.Context(), so)
	var statusErr *apierrors.StatusError
	var exitErr exec.CodeExitError
	switch {
	case err == nil:
		writeStatus(metav1.Status{Status: metav1.StatusSuccess})
	case errors.As(err, &statusErr):
		writeStatus(statusErr.ErrStatus)
	case errors.As(err, &exitErr) && exitErr.Exited():
		writeStatus(metav1.Status{
			Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", exitErr),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: fmt.Sprint(exitErr.ExitStatus())}}},
		})
	default:
		writeStatus(apierrors.NewInternalError(err).ErrStatus)
	}
}

type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	ts, ok := <-q
	if !ok {
		return nil
	}
	return &ts
}

// tunnelSPDY serves SPDY carried in websocket binary messages (kubectl's
// port-forward): it opens a SPDY upgrade to the runtime and, once the
// runtime switched protocols, accepts the websocket with the negotiated
// protocol and copies bytes both ways. The runtime's own 101 response stays
// here; a refusal is passed to the client as it came.
func (s *Server) tunnelSPDY(w http.ResponseWriter, r *http.Request, u *url.URL, protocols []string) {
	logger := klog.FromContext(r.Context())
	backend, err := dialURL(r.Context(), u)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer backend.Close()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u.String(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", headerSPDY31)
	for _, p := range protocols {
		req.Header.Add(headerProtocolVer, p)
	}
	if err := req.Write(backend); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	br := bufio.NewReader(backend)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return
	}
	var offer []string
	if p := strings.TrimSpace(resp.Header.Get(headerProtocolVer)); p != "" {
		offer = []string{spdyTunnelPrefix + p}
	}
	up := gwebsocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }, Subprotocols: offer}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		logger.V(2).Info("Websocket upgrade for a SPDY tunnel failed", "err", err)
		return
	}
	tunnel := portforward.NewTunnelingConnectionWithLogger(logger, ws)
	defer tunnel.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(backend, tunnel); done <- struct{}{} }()
	go func() { _, _ = io.Copy(tunnel, br); done <- struct{}{} }()
	select {
	case <-done:
	case <-r.Context().Done():
	}
}

// dialURL opens a TCP (or, for https, TLS) connection to a streaming URL.
// The runtime's streaming server listens on loopback with a certificate of
// its own, so TLS is not verified.
func dialURL(ctx context.Context, u *url.URL) (net.Conn, error) {
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host = net.JoinHostPort(u.Hostname(), "443")
		} else {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	if u.Scheme == "https" {
		return (&tls.Dialer{NetDialer: d, Config: &tls.Config{InsecureSkipVerify: true}}).DialContext(ctx, "tcp", host) //nolint:gosec // loopback runtime server
	}
	return d.DialContext(ctx, "tcp", host)
}
