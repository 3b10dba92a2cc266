// Package apiserver serves the Kubernetes API over HTTPS: the handler chain
// (authentication, authorization seam, metrics), routing of
// /api and /apis paths to the generic REST handler of each registered
// resource, discovery, watch, patch, health and metrics endpoints. It is the
// only component that talks to etcd, through internal/storage.
package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config is what the API server needs to run.
type Config struct {
	// Etcd is a connected client; the server does not close it.
	Etcd *clientv3.Client
	// ClientCA verifies client certificates (X.509 authentication).
	ClientCA *x509.CertPool
	// ServingCert is the HTTPS certificate.
	ServingCert tls.Certificate
	// BindAddress and Port to listen on. Port 0 picks a free port (tests).
	BindAddress string
	Port        int
	// ServiceCIDR for ClusterIP allocation (default 10.43.0.0/16) and
	// NodePortRange (default 30000-32767).
	ServiceCIDR   string
	NodePortRange string
	// CompactionInterval is how often old etcd revisions are compacted
	// (default 5 minutes; negative disables).
	CompactionInterval time.Duration
}

// Server is a running (or ready to run) API server.
type Server struct {
	cfg     Config
	handler http.Handler
	ready   chan struct{}
	addr    string
}

// New builds the server; it has no side effects until Start.
func New(cfg Config) (*Server, error) {
	return &Server{cfg: cfg, ready: make(chan struct{})}, nil
}

// Handler is the full handler chain (for in-process use).
func (s *Server) Handler() http.Handler { return s.handler }

// Ready is closed once the server listens and its caches are synced.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the address it listens on, valid after Ready.
func (s *Server) Addr() string { return s.addr }

// Start serves until ctx is done, then shuts down and returns.
func (s *Server) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
