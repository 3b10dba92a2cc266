// Package etcd provides the store's connection: an embedded single-member
// etcd server (go.etcd.io/etcd/server/v3/embed) listening on loopback, or a
// client for an external cluster. Either way the caller gets a connected
// *clientv3.Client once Ready is closed. Compaction is left to the API server.
//
// With Options.Member the embedded member serves its client and peer URLs
// only over mutual TLS: a client needs a certificate from the member's CA.
// Options.Client gives the client side (the CA it trusts, the certificate
// it presents), for the embedded member as for an external cluster.
package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults.
const (
	DefaultClientPort        = 2379
	DefaultQuotaBackendBytes = 8 << 30 // 8 GiB
	DefaultStartTimeout      = 60 * time.Second
	memberName               = "skiff"
)

// The embedded member's raft log bounds (etcd's defaults: 10,000 and 5,000).
const (
	snapshotCount          = 5000
	snapshotCatchUpEntries = 500
)

// Options configure the store. The zero value (plus Dir) is an embedded etcd
// on free loopback ports.
type Options struct {
	// Dir is the embedded member's data directory (normally <data-dir>/etcd).
	Dir string
	// ClientPort and PeerPort are the loopback ports of the embedded member;
	// 0 picks a free port.
	ClientPort int
	PeerPort   int
	// Servers are the client URLs of an external etcd cluster. When set,
	// nothing is embedded and Dir and the ports are ignored.
	Servers []string
	// QuotaBackendBytes is the embedded backend's size limit (default 8 GiB).
	QuotaBackendBytes int64
	// UnsafeNoFsync skips fsync in the embedded member; for tests only.
	UnsafeNoFsync bool
	// LogLevel for etcd's zap loggers (default "error").
	LogLevel string
	// StartTimeout bounds how long Start waits to be ready (default 60 s).
	StartTimeout time.Duration
	// Member, when set, makes the embedded member serve https with client
	// certificates required on both its client and peer URLs. Nil serves
	// plain http on loopback (tests).
	Member *MemberTLS
	// Client is the client side of TLS: the external cluster's
	// --etcd-cafile/--etcd-certfile/--etcd-keyfile, or the API server's
	// credentials for a Member.
	Client ClientTLS
}

// MemberTLS are the embedded member's credentials (PEM files).
type MemberTLS struct {
	// CAFile verifies the certificates of clients and peers.
	CAFile string
	// ServerCertFile/ServerKeyFile serve the client URL.
	ServerCertFile, ServerKeyFile string
	// PeerCertFile/PeerKeyFile serve and dial the peer URL.
	PeerCertFile, PeerKeyFile string
}

// ClientTLS are a client's TLS files; all empty means none (plain http, or
// https trusting the system's roots without a client certificate).
type ClientTLS struct {
	CAFile, CertFile, KeyFile string
}

func (c ClientTLS) empty() bool { return c == ClientTLS{} }

// Config is the TLS configuration these files describe, nil when empty.
func (c ClientTLS) Config() (*tls.Config, error) {
	if c.empty() {
		return nil, nil
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("etcd client certificate and key must be given together")
	}
	info := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.CAFile}
	if c.CertFile == "" {
		// TLSInfo.ClientConfig wants a key pair; trust the CA only.
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("etcd CA file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("etcd CA file %s holds no certificate", c.CAFile)
			}
		}
		return cfg, nil
	}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS: %w", err)
	}
	return cfg, nil
}

// Etcd is the store process (embedded) or connection (external).
type Etcd struct {
	opts      Options
	ready     chan struct{}
	client    *clientv3.Client
	endpoints []string
}

// New returns an Etcd for opts; it has no side effects until Start.
func New(opts Options) *Etcd {
	if opts.QuotaBackendBytes == 0 {
		opts.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "error"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	return &Etcd{opts: opts, ready: make(chan struct{})}
}

// Ready is closed once Client is connected.
func (e *Etcd) Ready() <-chan struct{} { return e.ready }

// Client is the connected client, valid after Ready. It is closed when Start
// returns.
func (e *Etcd) Client() *clientv3.Client { return e.client }

// Endpoints are the client URLs, valid after Ready.
func (e *Etcd) Endpoints() []string { return e.endpoints }

// Start runs the embedded member (or connects to the external cluster),
// closes Ready, and blocks until ctx is done or the member fails. It then
// closes the client and the member and returns.
func (e *Etcd) Start(ctx context.Context) error {
	if len(e.opts.Servers) > 0 {
		return e.startExternal(ctx)
	}
	return e.startEmbedded(ctx)
}

func (e *Etcd) startExternal(ctx context.Context) error {
	client, err := newClient(e.opts.Servers, e.opts.LogLevel, e.opts.Client)
	if err != nil {
		return err
	}
	defer client.Close()
	checkCtx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	// A linearizable read proves there is a leader and we can reach it.
	if _, err := client.Get(checkCtx, "health-check-key-skiff", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("reach etcd at %v: %w", e.opts.Servers, err)
	}
	e.client, e.endpoints = client, e.opts.Servers
	close(e.ready)
	<-ctx.Done()
	return nil
}

func (e *Etcd) startEmbedded(ctx context.Context) error {
	if e.opts.Dir == "" {
		return errors.New("embedded etcd needs a data directory")
	}
	if err := os.MkdirAll(e.opts.Dir, 0o700); err != nil {
		return fmt.Errorf("create etcd dir: %w", err)
	}
	// Free ports are found by listening and closing, so another process can
	// take one in between; retry with new ports when that happens.
	var (
		srv *embed.Etcd
		err error
	)
	for attempt := 0; ; attempt++ {
		srv, err = embed.StartEtcd(e.embedConfig())
		if err == nil {
			break
		}
		auto := e.opts.ClientPort == 0 || e.opts.PeerPort == 0
		if !auto || !errors.Is(err, syscall.EADDRINUSE) || attempt >= 4 {
			return fmt.Errorf("start embedded etcd in %s: %w", e.opts.Dir, err)
		}
	}
	defer srv.Close()

	timer := time.NewTimer(e.opts.StartTimeout)
	defer timer.Stop()
	select {
	case <-srv.Server.ReadyNotify():
	case err := <-srv.Err():
		return fmt.Errorf("embedded etcd: %w", err)
	case <-timer.C:
		return fmt.Errorf("embedded etcd not ready after %v", e.opts.StartTimeout)
	case <-ctx.Done():
		return nil
	}

	scheme := "http://"
	if e.opts.Member != nil {
		scheme = "https://"
	}
	endpoints := make([]string, 0, len(srv.Clients))
	for _, l := range srv.Clients {
		endpoints = append(endpoints, scheme+l.Addr().String())
	}
	client, err := newClient(endpoints, e.opts.LogLevel, e.opts.Client)
	if err != nil {
		return err
	}
	defer client.Close()
	e.client, e.endpoints = client, endpoints
	close(e.ready)

	select {
	case <-ctx.Done():
		return nil
	case err := <-srv.Err():
		return fmt.Errorf("embedded etcd: %w", err)
	}
}

func (e *Etcd) embedConfig() *embed.Config {
	clientPort, peerPort := e.opts.ClientPort, e.opts.PeerPort
	if clientPort == 0 {
		clientPort = freePort()
	}
	if peerPort == 0 {
		peerPort = freePort()
	}
	scheme := "http"
	if e.opts.Member != nil {
		scheme = "https"
	}
	cu := url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort))}
	pu := url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(peerPort))}

	cfg := embed.NewConfig()
	cfg.Name = memberName
	cfg.Dir = e.opts.Dir
	cfg.ListenClientUrls = []url.URL{cu}
	cfg.AdvertiseClientUrls = []url.URL{cu}
	cfg.ListenPeerUrls = []url.URL{pu}
	cfg.AdvertisePeerUrls = []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.QuotaBackendBytes = e.opts.QuotaBackendBytes
	cfg.UnsafeNoFsync = e.opts.UnsafeNoFsync
	// The raft log lives in memory from one snapshot to the next, plus the
	// entries kept after it for followers to catch up: up to 15,000 with
	// etcd's defaults, each a whole write (a pod update is some KiB), the
	// largest thing that grows in a busy server's heap for its first half
	// hour. The member is alone (its cluster is itself), so no follower
	// needs those entries.
	cfg.SnapshotCount = snapshotCount
	cfg.SnapshotCatchUpEntries = snapshotCatchUpEntries
	if m := e.opts.Member; m != nil {
		// Mutual TLS on both URLs: a client or peer must present a
		// certificate from the member's CA.
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: m.ServerCertFile, KeyFile: m.ServerKeyFile, TrustedCAFile: m.CAFile, ClientCertAuth: true}
		cfg.PeerTLSInfo = transport.TLSInfo{CertFile: m.PeerCertFile, KeyFile: m.PeerKeyFile, TrustedCAFile: m.CAFile, ClientCertAuth: true}
	}
	cfg.Logger = "zap"
	cfg.LogLevel = e.opts.LogLevel
	cfg.LogOutputs = []string{"stderr"}
	if logger, err := newLogger(e.opts.LogLevel); err == nil {
		// Closing the member makes each listener's serve loop log an
		// error; those are not failures (a real serve failure also
		// reaches Err, which Start returns), so drop them.
		logger = logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return dropCore{Core: c, msg: "setting up serving from embedded etcd failed."}
		}))
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	}
	return cfg
}

// dropCore is a zap core that discards entries with one message.
type dropCore struct {
	zapcore.Core
	msg string
}

func (d dropCore) With(fields []zapcore.Field) zapcore.Core {
	return dropCore{Core: d.Core.With(fields), msg: d.msg}
}

func (d dropCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Message == d.msg {
		return ce
	}
	return d.Core.Check(ent, ce)
}

func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return nil, fmt.Errorf("etcd log level: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = lvl
	zc.Sampling = nil
	logger, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("etcd logger: %w", err)
	}
	return logger, nil
}

func newClient(endpoints []string, level string, creds ClientTLS) (*clientv3.Client, error) {
	logger, err := newLogger(level)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := creds.Config()
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      logger,
		TLS:         tlsConfig,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	return client, nil
}

// freePort returns a loopback TCP port that was free a moment ago, or 0 if
// none could be found (then the start fails and is retried).
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
