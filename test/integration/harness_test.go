package integration

// TEMPORARY: a local copy of the smoke-test setup with the API the shared
// harness internal/testing/apiserver will offer. Replace this file with
//
//	type cluster = apiserver.Cluster
//	func startCluster(t testing.TB) *cluster { return apiserver.Start(t) }
//
// once the harness lands.

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/pki"
)

type cluster struct {
	t       testing.TB
	DataDir string
	Config  *rest.Config

	mu     sync.Mutex
	etcd   *etcd.Etcd
	cancel context.CancelFunc
	done   chan struct{}
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	c := &cluster{t: t, DataDir: t.TempDir()}
	c.start()
	t.Cleanup(c.stop)
	return c
}

func (c *cluster) start() {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	e := etcd.New(etcd.Options{Dir: filepath.Join(c.DataDir, "etcd"), UnsafeNoFsync: true})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = e.Start(ctx) }()
	select {
	case <-e.Ready():
	case <-time.After(30 * time.Second):
		c.t.Fatal("etcd not ready")
	}
	b, err := pki.Ensure(filepath.Join(c.DataDir, "pki"), pki.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	s, err := apiserver.New(apiserver.Config{Etcd: e.Client(), ClientCA: b.CAPool, ServingCert: b.Serving, CompactionInterval: -1})
	if err != nil {
		c.t.Fatal(err)
	}
	srvDone := make(chan struct{})
	go func() { defer close(srvDone); _ = s.Start(ctx) }()
	select {
	case <-s.Ready():
	case <-time.After(30 * time.Second):
		c.t.Fatal("apiserver not ready")
	}
	go func() { <-srvDone; wg.Wait(); close(c.done) }()
	c.mu.Lock()
	c.etcd = e
	c.Config = b.AdminRESTConfig("https://" + s.Addr())
	c.mu.Unlock()
}

func (c *cluster) stop() {
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.t.Error("cluster did not stop")
	}
}

func (c *cluster) Restart() {
	c.t.Helper()
	c.stop()
	c.start()
}

func (c *cluster) Clientset() kubernetes.Interface { return kubernetes.NewForConfigOrDie(c.Config) }
func (c *cluster) Dynamic() dynamic.Interface      { return dynamic.NewForConfigOrDie(c.Config) }
func (c *cluster) Etcd() *clientv3.Client          { return c.etcd.Client() }
