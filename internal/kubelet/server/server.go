package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultPort is the kubelet's API port.
const DefaultPort = 10250

// KubeletClientUser is the user name in the API server's kubelet client
// certificate (upstream kubeadm's name); it may use every endpoint.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// Host is what the server needs from the kubelet: the pods bound to this
// node, with the freshest status the kubelet has for them.
type Host interface {
	// GetPods returns every pod bound to this node that the kubelet knows.
	GetPods() []*corev1.Pod
	// GetPodByName returns one of them.
	GetPodByName(namespace, name string) (*corev1.Pod, bool)
}

// Options tune the server. The zero value gives the defaults.
type Options struct {
	// Address to listen on, "host:port" (default ":10250"; port 0 picks a
	// free one).
	Address string
	// GetCertificate returns the serving certificate (so that a renewed one
	// is picked up); Certificate is used when it is nil.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	Certificate    *tls.Certificate
	// ClientCA verifies client certificates (required).
	ClientCA *x509.CertPool
	// APIClient, when set, is how the API is guarded as upstream's kubelet
	// with webhook authentication and authorization: bearer tokens are
	// checked with a TokenReview, and every request is authorized with a
	// SubjectAccessReview on this node's nodes/<subresource> (see
	// attributesOf), both asked of the API server and cached
	// (AuthenticationCacheTTL, AuthorizedCacheTTL, UnauthorizedCacheTTL;
	// default upstream's 2 min, 5 min, 30 s). Client certificates signed by
	// ClientCA always authenticate.
	APIClient              kubernetes.Interface
	AuthenticationCacheTTL time.Duration
	AuthorizedCacheTTL     time.Duration
	UnauthorizedCacheTTL   time.Duration
	// AllowedUsers and AllowedGroups may use the API when APIClient is nil
	// (default: the API server's kubelet client and system:masters); then
	// only client certificates authenticate.
	AllowedUsers  []string
	AllowedGroups []string
	// NodeName is reported in /stats/summary.
	NodeName string
	// Metrics, when set, is served on /metrics with the running pod and
	// container gauges (see NewMetrics).
	Metrics *Metrics
	// Clock (default: the real clock).
	Clock clock.WithTicker
	// StreamIdleTimeout closes idle translated streams (default 4 h, as
	// upstream's --streaming-connection-idle-timeout).
	StreamIdleTimeout time.Duration
}

// Server is the kubelet API server.
type Server struct {
	host    Host
	runtime internalapi.RuntimeService
	images  internalapi.ImageManagerService
	opts    Options
	handler http.Handler
	ready   chan struct{}
	addr    string
}

// New builds the server; it has no side effects until Start. images may be
// nil (then /stats/summary has no image filesystem).
func New(host Host, runtime internalapi.RuntimeService, images internalapi.ImageManagerService, opts Options) (*Server, error) {
	if host == nil || runtime == nil {
		return nil, errors.New("kubelet server: a host and a runtime are required")
	}
	if opts.ClientCA == nil {
		return nil, errors.New("kubelet server: a client CA is required")
	}
	if opts.GetCertificate == nil && opts.Certificate == nil {
		return nil, errors.New("kubelet server: a serving certificate is required")
	}
	if opts.Address == "" {
		opts.Address = fmt.Sprintf(":%d", DefaultPort)
	}
	if opts.AllowedUsers == nil {
		opts.AllowedUsers = []string{KubeletClientUser}
	}
	if opts.AllowedGroups == nil {
		opts.AllowedGroups = []string{"system:masters"}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.StreamIdleTimeout == 0 {
		opts.StreamIdleTimeout = 4 * time.Hour
	}
	s := &Server{host: host, runtime: runtime, images: images, opts: opts, ready: make(chan struct{})}
	if opts.AuthenticationCacheTTL == 0 {
		opts.AuthenticationCacheTTL = DefaultAuthenticationCacheTTL
	}
	if opts.AuthorizedCacheTTL == 0 {
		opts.AuthorizedCacheTTL = DefaultAuthorizedCacheTTL
	}
	if opts.UnauthorizedCacheTTL == 0 {
		opts.UnauthorizedCacheTTL = DefaultUnauthorizedCacheTTL
	}
	s.opts = opts
	authn := &authenticator{reviews: opts.APIClient, clock: opts.Clock, ttl: opts.AuthenticationCacheTTL, cache: map[[32]byte]tokenAnswer{}}
	authz := &authorizer{reviews: opts.APIClient, nodeName: opts.NodeName, users: opts.AllowedUsers, groups: opts.AllowedGroups,
		clock: opts.Clock, allowTTL: opts.AuthorizedCacheTTL, denyTTL: opts.UnauthorizedCacheTTL, cache: map[string]sarAnswer{}}
	s.handler = authFilter(authn, authz, s.routes())
	return s, nil
}

// Handler is the full handler chain (authentication needs the TLS state
// that Start's listener gives it).
func (s *Server) Handler() http.Handler { return s.handler }

// Ready is closed once the server listens.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the address it listens on, valid after Ready.
func (s *Server) Addr() string { return s.addr }

// Start serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("kubelet server: listen: %w", err)
	}
	s.addr = ln.Addr().String()
	tlsConfig := &tls.Config{
		GetCertificate: s.opts.GetCertificate,
		ClientAuth:     tls.VerifyClientCertIfGiven,
		ClientCAs:      s.opts.ClientCA,
		MinVersion:     tls.VersionTLS12,
		// Streaming needs HTTP/1.1 upgrades; clients that offer h2 for
		// plain requests get it.
		NextProtos: []string{"h2", "http/1.1"},
	}
	if tlsConfig.GetCertificate == nil {
		tlsConfig.Certificates = []tls.Certificate{*s.opts.Certificate}
	}
	hs := &http.Server{
		Handler:           s.handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    1 << 20,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.ServeTLS(ln, "", "") }()
	close(s.ready)
	klog.FromContext(ctx).Info("Kubelet API listening", "address", s.addr)
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /pods", s.servePods)
	mux.HandleFunc("GET /pods/{$}", s.servePods)
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", s.serveContainerLogs)
	for _, p := range []string{"/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"} {
		mux.HandleFunc(p, s.serveExec)
	}
	for _, p := range []string{"/attach/{ns}/{pod}/{container}", "/attach/{ns}/{pod}/{uid}/{container}"} {
		mux.HandleFunc(p, s.serveAttach)
	}
	for _, p := range []string{"/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"} {
		mux.HandleFunc(p, s.servePortForward)
	}
	mux.HandleFunc("GET /stats/summary", s.serveSummary)
	if s.opts.Metrics != nil {
		mux.Handle("GET /metrics", s.opts.Metrics.handler(s))
	}
	mux.Handle("GET /metrics/cadvisor", s.cadvisorHandler())
	mux.Handle("GET /metrics/resource", s.resourceHandler())
	// Upstream's profiling handlers (enableDebuggingHandlers and
	// enableProfilingHandler, both on by default), authorized as
	// nodes/proxy. The agent shares its process with the control plane in
	// `skiff server`, so the profiles cover both.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

func (s *Server) servePods(w http.ResponseWriter, _ *http.Request) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	for _, p := range s.host.GetPods() {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}
