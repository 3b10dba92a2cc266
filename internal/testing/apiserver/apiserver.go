// Package apiserver is the shared integration-test harness: an in-process
// API server on a temporary embedded etcd, with the same PKI and bootstrap
// objects as `skiff server`, driven through client-go.
//
//	import testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
//
//	c := testapiserver.Start(t)
//	cs := c.Clientset()
//
// Everything is stopped by t.Cleanup. Restart stops the API server and etcd
// and starts them again on the same data directory and API port, for
// persistence tests.
package apiserver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/server"
	"github.com/skiff-sh/skiff/internal/server/bootstrap"
	"github.com/skiff-sh/skiff/internal/server/lifecycle"
)

// ReadyTimeout bounds each start step of the harness.
const ReadyTimeout = 60 * time.Second

// Options tune the harness; the zero value is what most tests want.
type Options struct {
	// Configure, if set, edits the API server's config before it is built
	// (for example a short CompactionInterval). It is applied on every
	// (re)start.
	Configure func(*kubeapiserver.Config)
	// SkipBootstrap leaves out the namespaces and the kubernetes Service.
	SkipBootstrap bool
}

// Cluster is a running in-process control plane.
type Cluster struct {
	// Config is a client-go config for the admin user (system:admin in
	// system:masters) that trusts the cluster's CA. Its Host stays the same
	// across Restart.
	Config *rest.Config
	// DataDir is the temporary data directory (pki/, etcd/, admin.kubeconfig).
	DataDir string
	// PKI holds the CA and the certificates.
	PKI *pki.Bundle

	t     testing.TB
	opts  Options
	port  int
	store *etcd.Etcd
	api   *kubeapiserver.Server
	etcdH *lifecycle.Handle
	apiH  *lifecycle.Handle
}

// Start starts a cluster with default options.
func Start(t testing.TB) *Cluster { return StartWithOptions(t, Options{}) }

// StartWithOptions starts a cluster: PKI, embedded etcd on free ports, the
// API server on a free loopback port, and the bootstrap objects.
func StartWithOptions(t testing.TB, opts Options) *Cluster {
	t.Helper()
	dir := t.TempDir()
	bundle, err := pki.Ensure(server.PKIDir(dir), pki.Options{BindAddress: "127.0.0.1"})
	if err != nil {
		t.Fatalf("harness: pki: %v", err)
	}
	c := &Cluster{t: t, opts: opts, DataDir: dir, PKI: bundle}
	t.Cleanup(c.Stop)
	c.start()
	return c
}

func (c *Cluster) start() {
	t := c.t
	t.Helper()
	ctx := context.Background()

	c.store = etcd.New(etcd.Options{Dir: server.EtcdDir(c.DataDir), UnsafeNoFsync: true})
	h, err := lifecycle.Launch(ctx, "etcd", c.store, ReadyTimeout)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	c.etcdH = h

	cfg := kubeapiserver.Config{
		Etcd:        c.store.Client(),
		ClientCA:    c.PKI.CAPool,
		ServingCert: c.PKI.Serving,
		BindAddress: "127.0.0.1",
		Port:        c.port,
		// Service-account tokens as `skiff server` has them (pki/sa.key).
		ServiceAccounts: &kubeapiserver.ServiceAccountConfig{SigningKey: c.PKI.ServiceAccountKey, ExtendExpiration: true},
		// Most tests run no serviceaccount controller, so no namespace has
		// its "default" account (Configure turns the refusal back on).
		AllowPodsWithoutServiceAccount: true,
	}
	if c.opts.Configure != nil {
		c.opts.Configure(&cfg)
	}
	c.api, err = kubeapiserver.New(cfg)
	if err != nil {
		t.Fatalf("harness: apiserver.New: %v", err)
	}
	if c.apiH, err = lifecycle.Launch(ctx, "apiserver", c.api, ReadyTimeout); err != nil {
		t.Fatalf("harness: %v", err)
	}
	c.port = server.ListenPort(c.api.Addr(), c.port)
	url := pki.ServerURL("127.0.0.1", c.port)
	if c.Config == nil {
		c.Config = c.PKI.AdminRESTConfig(url)
	}
	if err := c.PKI.WriteAdminKubeconfig(server.AdminKubeconfigPath(c.DataDir), url); err != nil {
		t.Fatalf("harness: %v", err)
	}
	if c.opts.SkipBootstrap {
		return
	}
	bctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	if err := bootstrap.Run(bctx, c.Clientset(), bootstrap.Options{
		Port:          c.port,
		EndpointIP:    bootstrap.AdvertiseAddress("127.0.0.1"),
		RetryInterval: 100 * time.Millisecond,
	}); err != nil {
		t.Fatalf("harness: %v", err)
	}
}

// Clientset is a new typed client for the admin user.
func (c *Cluster) Clientset() kubernetes.Interface {
	c.t.Helper()
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(c.Config))
	if err != nil {
		c.t.Fatalf("harness: clientset: %v", err)
	}
	return cs
}

// Dynamic is a new dynamic client for the admin user.
func (c *Cluster) Dynamic() dynamic.Interface {
	c.t.Helper()
	dc, err := dynamic.NewForConfig(rest.CopyConfig(c.Config))
	if err != nil {
		c.t.Fatalf("harness: dynamic client: %v", err)
	}
	return dc
}

// Etcd is the current etcd client, for tests that look at the store
// directly (for example to check that a rejected request wrote nothing).
// It changes on Restart.
func (c *Cluster) Etcd() *clientv3.Client { return c.store.Client() }

// Server is the running API server (for Handler or Addr).
func (c *Cluster) Server() *kubeapiserver.Server { return c.api }

// Kubeconfig is the path of the admin kubeconfig, for tools such as kubectl.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.DataDir, pki.AdminKubeconfigFile) }

// Restart stops the API server and etcd and starts both again on the same
// data directory and API port; Config and earlier clients keep working.
func (c *Cluster) Restart() {
	c.t.Helper()
	c.Stop()
	c.start()
}

// Stop stops the API server, then etcd. It is idempotent and is called by
// t.Cleanup.
func (c *Cluster) Stop() {
	if c.apiH != nil {
		if err := c.apiH.Stop(); err != nil {
			c.t.Errorf("harness: stop: %v", err)
		}
		c.apiH = nil
	}
	if c.etcdH != nil {
		if err := c.etcdH.Stop(); err != nil {
			c.t.Errorf("harness: stop: %v", err)
		}
		c.etcdH = nil
	}
}
