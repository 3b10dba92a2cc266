package robustness

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/server"
	"github.com/skiff-sh/skiff/internal/server/lifecycle"
)

// The API server runs in a child process (this test binary again, with
// childEnv set), so that a fault can kill it with SIGKILL; etcd is an
// embedded member in the test process, behind a TCP proxy that can cut
// every connection between them.
const (
	childEnv     = "SKIFF_ROBUSTNESS_APISERVER"
	childDataDir = "SKIFF_ROBUSTNESS_DATA_DIR"
	childPort    = "SKIFF_ROBUSTNESS_PORT"
	childEtcd    = "SKIFF_ROBUSTNESS_ETCD"
	// childUncached set serves ConfigMaps from etcd alone (no watch
	// cache), as Events are by default.
	childUncached = "SKIFF_ROBUSTNESS_UNCACHED"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := runAPIServer(); err != nil {
			fmt.Fprintln(os.Stderr, "robustness API server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// client-go logs every broken connection; the faults make many.
	fs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// runAPIServer is the child: the API server on the given port and etcd,
// with bookmarks every 200 ms and a 3 s deadline on etcd calls. SIGUSR1
// breaks every etcd watch it holds (its watch caches' included), as a
// failed watch stream would.
func runAPIServer() error {
	dir := os.Getenv(childDataDir)
	port, err := strconv.Atoi(os.Getenv(childPort))
	if err != nil {
		return err
	}
	bundle, err := pki.Ensure(server.PKIDir(dir), pki.Options{BindAddress: "127.0.0.1"})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	store := etcd.New(etcd.Options{Servers: []string{os.Getenv(childEtcd)}})
	eh, err := lifecycle.Launch(ctx, "etcd", store, time.Minute)
	if err != nil {
		return err
	}
	defer eh.Stop()

	w := &breakableWatcher{Watcher: store.Client().Watcher}
	e := clientv3.NewCtxClient(ctx)
	sc := store.Client()
	e.Cluster, e.KV, e.Lease, e.Watcher, e.Auth, e.Maintenance = sc.Cluster, sc.KV, sc.Lease, w, sc.Auth, sc.Maintenance
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			w.breakAll()
		}
	}()

	var watchCache kubeapiserver.WatchCacheConfig
	if os.Getenv(childUncached) != "" {
		watchCache.Sizes = map[schema.GroupResource]int{{Resource: "configmaps"}: 0}
	}
	api, err := kubeapiserver.New(kubeapiserver.Config{
		Etcd:                           e,
		ClientCA:                       bundle.CAPool,
		ServingCert:                    bundle.Serving,
		BindAddress:                    "127.0.0.1",
		Port:                           port,
		ServiceAccounts:                &kubeapiserver.ServiceAccountConfig{SigningKey: bundle.ServiceAccountKey, ExtendExpiration: true},
		AllowPodsWithoutServiceAccount: true,
		WatchBookmarkInterval:          200 * time.Millisecond,
		EtcdCallTimeout:                3 * time.Second,
		WatchCache:                     watchCache,
	})
	if err != nil {
		return err
	}
	ah, err := lifecycle.Launch(ctx, "apiserver", api, time.Minute)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	return ah.Stop()
}

// breakableWatcher lets SIGUSR1 end the API server's etcd watches.
type breakableWatcher struct {
	clientv3.Watcher
	mu      sync.Mutex
	cancels []context.CancelFunc
}

func (b *breakableWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	ctx, cancel := context.WithCancel(ctx)
	b.mu.Lock()
	b.cancels = append(b.cancels, cancel)
	b.mu.Unlock()
	return b.Watcher.Watch(ctx, key, opts...)
}

func (b *breakableWatcher) breakAll() {
	b.mu.Lock()
	cancels := b.cancels
	b.cancels = nil
	b.mu.Unlock()
	for _, c := range cancels {
		c()
	}
}

// cluster is etcd (in process, behind a proxy) and the API server process.
type cluster struct {
	t        *testing.T
	uncached bool // ConfigMaps served from etcd alone
	dir      string
	bundle   *pki.Bundle
	apiPort  int
	etcdOpts etcd.Options
	etcdH    *lifecycle.Handle
	proxy    *proxy
	api      *exec.Cmd
	apiDone  chan struct{}
	config   *rest.Config
	// etcdClient reaches the member directly (not through the proxy) and
	// survives its restarts.
	etcdClient *clientv3.Client
}

func startCluster(t *testing.T, uncached bool) *cluster {
	t.Helper()
	dir := t.TempDir()
	bundle, err := pki.Ensure(server.PKIDir(dir), pki.Options{BindAddress: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, uncached: uncached, dir: dir, bundle: bundle, apiPort: freePort(t),
		etcdOpts: etcd.Options{Dir: server.EtcdDir(dir), ClientPort: freePort(t), PeerPort: freePort(t), UnsafeNoFsync: true}}
	t.Cleanup(c.stop)
	c.startEtcd()
	c.proxy = newProxy(t, "127.0.0.1:"+strconv.Itoa(c.etcdOpts.ClientPort))
	c.etcdClient, err = clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://127.0.0.1:" + strconv.Itoa(c.etcdOpts.ClientPort)},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.config = bundle.AdminRESTConfig(pki.ServerURL("127.0.0.1", c.apiPort))
	c.config.QPS, c.config.Burst = -1, 0
	c.startAPIServer()
	return c
}

func (c *cluster) clientset() kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(c.config))
	if err != nil {
		c.t.Fatal(err)
	}
	return cs
}

func (c *cluster) startEtcd() {
	h, err := lifecycle.Launch(context.Background(), "etcd", etcd.New(c.etcdOpts), time.Minute)
	if err != nil {
		c.t.Fatalf("etcd: %v", err)
	}
	c.etcdH = h
}

// stopEtcd stops the member; startEtcd starts it again on the same data
// and ports.
func (c *cluster) stopEtcd() {
	if c.etcdH != nil {
		if err := c.etcdH.Stop(); err != nil {
			c.t.Errorf("stop etcd: %v", err)
		}
		c.etcdH = nil
	}
}

func (c *cluster) startAPIServer() {
	t := c.t
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childDataDir+"="+c.dir,
		childPort+"="+strconv.Itoa(c.apiPort), childEtcd+"=http://"+c.proxy.addr())
	if c.uncached {
		cmd.Env = append(cmd.Env, childUncached+"=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.api, c.apiDone = cmd, make(chan struct{})
	ready := make(chan struct{})
	go func(done chan struct{}) {
		buf := make([]byte, 64)
		if n, _ := io.ReadAtLeast(out, buf, len("ready")); n > 0 {
			close(ready)
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(done)
	}(c.apiDone)
	select {
	case <-ready:
	case <-c.apiDone:
		t.Fatalf("API server exited before it was ready")
	case <-time.After(time.Minute):
		t.Fatalf("API server not ready after a minute")
	}
}

// killAPIServer is kill -9.
func (c *cluster) killAPIServer() {
	if c.api == nil {
		return
	}
	_ = c.api.Process.Kill()
	<-c.apiDone
	c.api = nil
}

// breakCacheWatches makes the API server's etcd watches fail.
func (c *cluster) breakCacheWatches() {
	if c.api != nil {
		_ = c.api.Process.Signal(syscall.SIGUSR1)
	}
}

func (c *cluster) stop() {
	c.killAPIServer()
	if c.proxy != nil {
		c.proxy.close()
	}
	if c.etcdClient != nil {
		c.etcdClient.Close()
	}
	c.stopEtcd()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proxy forwards TCP connections to etcd; cut closes every open one, as a
// network blip between the API server and etcd would.
type proxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(in, out)
		go pipe(out, in)
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) close() {
	p.l.Close()
	p.cut()
}
