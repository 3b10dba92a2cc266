package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestClientHost(t *testing.T) {
	tests := map[string]string{
		"":             "127.0.0.1",
		"0.0.0.0":      "127.0.0.1",
		"::":           "127.0.0.1",
		"127.0.0.1":    "127.0.0.1",
		"192.0.2.5":    "192.0.2.5",
		"2001:db8::10": "2001:db8::10",
	}
	for bind, want := range tests {
		t.Run(bind, func(t *testing.T) {
			if got := ClientHost(bind); got != want {
				t.Errorf("ClientHost(%q) = %q, want %q", bind, got, want)
			}
		})
	}
}

func TestListenPort(t *testing.T) {
	tests := []struct {
		addr     string
		fallback int
		want     int
	}{
		{"127.0.0.1:6443", 0, 6443},
		{"[::1]:7443", 0, 7443},
		{"", 6443, 6443},
		{"garbage", 6443, 6443},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			if got := ListenPort(tc.addr, tc.fallback); got != tc.want {
				t.Errorf("ListenPort(%q, %d) = %d, want %d", tc.addr, tc.fallback, got, tc.want)
			}
		})
	}
}

// notifyWriter signals when the text written so far contains a marker.
type notifyWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	seen   chan struct{}
	once   sync.Once
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// runServer runs Run until it says it is ready; stop cancels it and returns
// Run's error.
func runServer(t *testing.T, cfg Config) (stop func() error) {
	t.Helper()
	out := &notifyWriter{marker: "Skiff is ready", seen: make(chan struct{})}
	cfg.Out = out
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg) }()
	select {
	case <-out.seen:
	case err := <-errc:
		cancel()
		t.Fatalf("Run returned before it was ready: %v", err)
	case <-time.After(90 * time.Second):
		cancel()
		t.Fatal("server not ready after 90s")
	}
	return func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return 30s after cancel")
			return nil
		}
	}
}

func TestRunAndRestart(t *testing.T) {
	dir := t.TempDir()
	// The control plane alone: the node agent and cluster DNS are host-wide
	// (the cni0 bridge, the skiff-proxy table, port 53) and are tested by
	// test/e2e, which may run beside this package.
	cfg := Config{DataDir: dir, BindAddress: "127.0.0.1", DisableAgent: true, Services: ServicesConfig{DisableDNS: true}}
	stop := runServer(t, cfg)

	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	for _, f := range []string{kubeconfig, filepath.Join(dir, "pki", "ca.key")} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", f, st.Mode().Perm())
		}
	}
	ca1, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	namespaces := func() []string {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		list, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list namespaces with the admin kubeconfig: %v", err)
		}
		var names []string
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		sort.Strings(names)
		return names
	}
	want := []string{"default", "kube-node-lease", "kube-public", "kube-system"}
	if diff := cmp.Diff(want, namespaces()); diff != "" {
		t.Errorf("namespaces (-want +got):\n%s", diff)
	}
	// The in-process scheduler and controller manager report healthy
	// through componentstatuses (they open no healthz port).
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	statuses, err := kubernetes.NewForConfigOrDie(rc).CoreV1().ComponentStatuses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range statuses.Items {
		if len(cs.Conditions) == 0 || cs.Conditions[0].Status != "True" {
			t.Errorf("componentstatus %s: %+v, want Healthy", cs.Name, cs.Conditions)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}

	stop = runServer(t, cfg)
	defer stop()
	ca2, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca1, ca2) {
		t.Error("CA changed across a restart")
	}
	if diff := cmp.Diff(want, namespaces()); diff != "" {
		t.Errorf("namespaces after restart (-want +got):\n%s", diff)
	}
}

func TestRunFailsFastWithoutEtcd(t *testing.T) {
	cfg := Config{
		DataDir:      t.TempDir(),
		BindAddress:  "127.0.0.1",
		EtcdServers:  []string{"http://127.0.0.1:1"},
		ReadyTimeout: 2 * time.Second,
		Out:          &bytes.Buffer{},
	}
	start := time.Now()
	err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("Run = %v, want an etcd error", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Run took %v to fail", d)
	}
}
