package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/server/lifecycle"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func launch(t *testing.T, opts Options) (*Etcd, *lifecycle.Handle) {
	t.Helper()
	e := New(opts)
	h, err := lifecycle.Launch(context.Background(), "etcd", e, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return e, h
}

func TestEmbeddedPersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	e, h := launch(t, Options{Dir: dir, UnsafeNoFsync: true})
	if len(e.Endpoints()) != 1 || !strings.HasPrefix(e.Endpoints()[0], "http://127.0.0.1:") {
		t.Errorf("endpoints = %v, want one loopback URL", e.Endpoints())
	}
	if _, err := e.Client().Put(ctx, "/registry/test", "v1"); err != nil {
		t.Fatal(err)
	}
	if err := h.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// A closed client fails rather than hanging.
	if _, err := e.Client().Get(ctx, "/registry/test"); err == nil {
		t.Error("client still works after Stop")
	}

	// Restart on the same directory; the peer port differs (both are free
	// ports), which a single member must tolerate.
	e2, h2 := launch(t, Options{Dir: dir, UnsafeNoFsync: true})
	defer h2.Stop()
	resp, err := e2.Client().Get(ctx, "/registry/test")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("after restart got %v, want /registry/test=v1", resp.Kvs)
	}
}

func TestExternal(t *testing.T) {
	embedded, h := launch(t, Options{Dir: t.TempDir(), UnsafeNoFsync: true})
	defer h.Stop()

	ext, h2 := launch(t, Options{Servers: embedded.Endpoints()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ext.Client().Put(ctx, "k", "from-external"); err != nil {
		t.Fatal(err)
	}
	resp, err := embedded.Client().Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "from-external" {
		t.Fatalf("embedded member did not see the external client's write: %v %v", resp, err)
	}
	if err := h2.Stop(); err != nil {
		t.Fatal(err)
	}
	// Stopping the external connection leaves the cluster running.
	if _, err := embedded.Client().Get(ctx, "k", clientv3.WithCountOnly()); err != nil {
		t.Errorf("embedded member unusable after the external client stopped: %v", err)
	}
}

func TestExternalUnreachable(t *testing.T) {
	e := New(Options{Servers: []string{"http://127.0.0.1:1"}, StartTimeout: 2 * time.Second})
	_, err := lifecycle.Launch(context.Background(), "etcd", e, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "reach etcd") {
		t.Fatalf("Launch = %v, want a reach etcd error", err)
	}
}

func TestEmbeddedNeedsDir(t *testing.T) {
	if err := New(Options{}).Start(context.Background()); err == nil {
		t.Fatal("Start without Dir succeeded")
	}
}

func TestQuota(t *testing.T) {
	e := New(Options{Dir: "x"})
	if got := e.embedConfig().QuotaBackendBytes; got != DefaultQuotaBackendBytes {
		t.Errorf("quota = %d, want %d", got, int64(DefaultQuotaBackendBytes))
	}
}

// tlsMember starts an embedded member with mutual TLS from a fresh etcd PKI
// in dir, connected with the API server's client certificate.
func tlsMember(t *testing.T, pkiDir string) (*Etcd, pki.EtcdFiles, *lifecycle.Handle) {
	t.Helper()
	files, err := pki.EnsureEtcd(pkiDir, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, h := launch(t, Options{
		Dir:           t.TempDir(),
		UnsafeNoFsync: true,
		Member:        &MemberTLS{CAFile: files.CA, ServerCertFile: files.ServerCert, ServerKeyFile: files.ServerKey, PeerCertFile: files.PeerCert, PeerKeyFile: files.PeerKey},
		Client:        ClientTLS{CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey},
	})
	return e, files, h
}

// TestEmbeddedMutualTLS: the member serves only https, the API server's
// certificate works, and nobody else gets an answer: no TLS, TLS without a
// certificate, and a certificate from another etcd CA are all refused.
func TestEmbeddedMutualTLS(t *testing.T) {
	e, files, h := tlsMember(t, t.TempDir())
	defer h.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if len(e.Endpoints()) != 1 || !strings.HasPrefix(e.Endpoints()[0], "https://127.0.0.1:") {
		t.Fatalf("endpoints = %v, want one https loopback URL", e.Endpoints())
	}
	if _, err := e.Client().Put(ctx, "/registry/secret", "v"); err != nil {
		t.Fatalf("put with the API server's certificate: %v", err)
	}
	other, err := pki.EnsureEtcd(t.TempDir(), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(e.Endpoints()[0], "https://")
	for _, tc := range []struct {
		name     string
		endpoint string
		creds    ClientTLS
	}{
		{name: "plain client", endpoint: "http://" + host},
		{name: "TLS without a certificate", endpoint: "https://" + host, creds: ClientTLS{CAFile: files.CA}},
		{name: "certificate from another CA", endpoint: "https://" + host, creds: ClientTLS{CAFile: files.CA, CertFile: other.ClientCert, KeyFile: other.ClientKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newClient([]string{tc.endpoint}, "error", tc.creds)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
			defer rcancel()
			if resp, err := c.Get(rctx, "/registry/secret"); err == nil {
				t.Fatalf("read succeeded: %v", resp.Kvs)
			}
		})
	}
	// The refusal, as a raw TLS client sees it: the member asks for a
	// certificate and rejects one it did not sign.
	for _, tc := range []struct {
		name    string
		cert    string
		key     string
		wantErr string
	}{
		{name: "no certificate", wantErr: "certificate required"},
		{name: "other CA", cert: other.ClientCert, key: other.ClientKey, wantErr: "unknown certificate authority"},
	} {
		t.Run("handshake "+tc.name, func(t *testing.T) {
			cfg, err := ClientTLS{CAFile: files.CA}.Config()
			if err != nil {
				t.Fatal(err)
			}
			if tc.cert != "" {
				pair, err := tls.LoadX509KeyPair(tc.cert, tc.key)
				if err != nil {
					t.Fatal(err)
				}
				// Sent even though the member asks for its own CA's.
				cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
			}
			conn, err := tls.Dial("tcp", host, cfg)
			if err == nil {
				// TLS 1.3: the server's verdict arrives with the first read.
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("handshake error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestExternalTLS connects to an etcd that requires client certificates as
// an external cluster (--etcd-servers https://..., --etcd-cafile,
// --etcd-certfile, --etcd-keyfile); without the certificate the start fails.
func TestExternalTLS(t *testing.T) {
	member, files, h := tlsMember(t, t.TempDir())
	defer h.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ext, h2 := launch(t, Options{Servers: member.Endpoints(), Client: ClientTLS{CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey}})
	defer h2.Stop()
	if _, err := ext.Client().Put(ctx, "k", "over-tls"); err != nil {
		t.Fatal(err)
	}
	resp, err := member.Client().Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "over-tls" {
		t.Fatalf("member did not see the external client's write: %v %v", resp, err)
	}

	noCert := New(Options{Servers: member.Endpoints(), Client: ClientTLS{CAFile: files.CA}, StartTimeout: 2 * time.Second})
	if _, err := lifecycle.Launch(ctx, "etcd", noCert, time.Minute); err == nil || !strings.Contains(err.Error(), "reach etcd") {
		t.Fatalf("Launch without a client certificate = %v, want a reach etcd error", err)
	}
	if _, err := (ClientTLS{CertFile: files.ClientCert}).Config(); err == nil {
		t.Error("a certificate without its key was accepted")
	}
}

// TestRaftLogSnapshottedSooner: the embedded member snapshots its raft log
// (and so frees the entries held in memory) after snapshotCount writes,
// not etcd's default 10,000.
func TestRaftLogSnapshottedSooner(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, h := launch(t, Options{Dir: dir, UnsafeNoFsync: true})
	defer h.Stop()
	snaps := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, "member", "snap", "*.snap"))
		return m
	}
	if s := snaps(); len(s) != 0 {
		t.Fatalf("snapshots before any write: %v", s)
	}
	sem := make(chan struct{}, 16)
	errs := make(chan error, snapshotCount+100)
	for i := range snapshotCount + 100 {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			if _, err := e.Client().Put(ctx, fmt.Sprintf("/registry/k/%d", i), "v"); err != nil {
				errs <- err
			}
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(snaps()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no raft snapshot after %d writes", snapshotCount+100)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
