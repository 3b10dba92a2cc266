// Package etcd provides the store's connection: an embedded single-member
// etcd server (go.etcd.io/etcd/server/v3/embed) listening on loopback, or a
// client for an external cluster. Either way the caller gets a connected
// *clientv3.Client once Ready is closed. Compaction is left to the API server.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"time"

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
	client, err := newClient(e.opts.Servers, e.opts.LogLevel)
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

	endpoints := make([]string, 0, len(srv.Clients))
	for _, l := range srv.Clients {
		endpoints = append(endpoints, "http://"+l.Addr().String())
	}
	client, err := newClient(endpoints, e.opts.LogLevel)
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
	cu := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort))}
	pu := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(peerPort))}

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

func newClient(endpoints []string, level string) (*clientv3.Client, error) {
	logger, err := newLogger(level)
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      logger,
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
