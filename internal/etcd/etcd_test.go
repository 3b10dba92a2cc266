package etcd

import (
	"context"
	"strings"
	"testing"
	"time"

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
