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
	"net"
	"os"
	"path/filepath"
	"strconv"
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
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

type localCluster struct {
	t       testing.TB
	opts    testapiserver.Options
	DataDir string
	Config  *rest.Config

	port   int
	mu     sync.Mutex
	etcd   *etcd.Etcd
	cancel context.CancelFunc
	done   chan struct{}
}

func startLocal(t testing.TB, opts testapiserver.Options) *localCluster {
	t.Helper()
	c := &localCluster{t: t, DataDir: t.TempDir(), opts: opts}
	c.start()
	t.Cleanup(c.stop)
	return c
}

func (c *localCluster) start() {
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
	cfg := apiserver.Config{Etcd: e.Client(), ClientCA: b.CAPool, ServingCert: b.Serving, Port: c.port}
	if c.opts.Configure != nil {
		c.opts.Configure(&cfg)
	}
	s, err := apiserver.New(cfg)
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
	if c.Config == nil {
		c.Config = b.AdminRESTConfig("https://" + s.Addr())
		if os.Getenv("IT_JSON") != "" {
			c.Config.ContentType = "application/json"
		}
	}
	_, p, _ := net.SplitHostPort(s.Addr())
	c.port, _ = strconv.Atoi(p)
	c.mu.Unlock()
}

func (c *localCluster) stop() {
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.t.Error("cluster did not stop")
	}
}

func (c *localCluster) Restart() {
	c.t.Helper()
	c.stop()
	c.start()
}

func (c *localCluster) Clientset() kubernetes.Interface { return kubernetes.NewForConfigOrDie(c.Config) }
func (c *localCluster) Dynamic() dynamic.Interface      { return dynamic.NewForConfigOrDie(c.Config) }
func (c *localCluster) Etcd() *clientv3.Client          { return c.etcd.Client() }
