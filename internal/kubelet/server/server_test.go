package server

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/kubelet/server/servertest"
	"github.com/skiff-sh/skiff/internal/pki"
)

type harness struct {
	host    *servertest.Host
	runtime *servertest.Runtime
	srv     *Server
	bundle  *pki.Bundle
	client  *rest.Config // the API server's kubelet client identity
	base    string
	logDir  string
	metrics *Metrics
}

const (
	podUID      = servertest.PodUID
	containerID = servertest.ContainerID
)

func startHarness(t *testing.T, configure func(*Options)) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	b, err := pki.Ensure(filepath.Join(dir, "pki"), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	serving, err := b.EnsureKubeletServing("kubelet.crt", "kubelet.key", "node-a", nil, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.EnsureKubeletClient(pki.Options{}); err != nil {
		t.Fatal(err)
	}

	h := &harness{host: servertest.NewHost(), runtime: servertest.NewRuntime(t), bundle: b, logDir: filepath.Join(dir, "pods")}
	h.metrics = NewMetrics(prometheus.NewRegistry())
	opts := Options{Address: "127.0.0.1:0", Certificate: &serving, ClientCA: b.CAPool, NodeName: "node-a", Metrics: h.metrics}
	if configure != nil {
		configure(&opts)
	}
	h.srv, err = New(h.host, InstrumentRuntime(h.runtime, h.metrics), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- h.srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	select {
	case <-h.srv.Ready():
	case err := <-errc:
		t.Fatalf("Start: %v", err)
	}
	h.base = "https://" + h.srv.Addr()
	certPEM, _ := os.ReadFile(filepath.Join(b.Dir, pki.KubeletClientCertFile))
	keyPEM, _ := os.ReadFile(filepath.Join(b.Dir, pki.KubeletClientKeyFile))
	h.client = &rest.Config{Host: h.base, TLSClientConfig: rest.TLSClientConfig{CAData: b.CAPEM, CertData: certPEM, KeyData: keyPEM}}
	return h
}

// addPod adds the running pod default/web (servertest.AddWebPod).
func (h *harness) addPod(t *testing.T, logLines, prevLines string) string {
	t.Helper()
	return servertest.AddWebPod(t, h.host, h.runtime, h.logDir, "node-a", logLines, prevLines)
}

func (h *harness) httpClient(t *testing.T) *http.Client {
	t.Helper()
	tc, err := rest.TLSConfigFor(h.client)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestAuthentication(t *testing.T) {
	h := startHarness(t, nil)
	strict := startHarness(t, func(o *Options) { o.AllowedUsers, o.AllowedGroups = []string{"someone-else"}, []string{} })

	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.bundle.CAPool}}}
	if code, body := get(t, anon, h.base+"/pods"); code != http.StatusUnauthorized {
		t.Errorf("anonymous /pods = %d %q, want 401", code, body)
	}
	if code, _ := get(t, anon, h.base+"/healthz"); code != http.StatusUnauthorized {
		t.Errorf("anonymous /healthz = %d, want 401", code)
	}
	if code, body := get(t, h.httpClient(t), h.base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("kubelet client /healthz = %d %q", code, body)
	}
	code, body := get(t, strict.httpClient(t), strict.base+"/stats/summary")
	if want := "Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, subresource(s)=[stats])"; code != http.StatusForbidden || strings.TrimSpace(body) != want {
		t.Errorf("unlisted user = %d %q, want 403 %q", code, body, want)
	}

	// A certificate from another CA does not get through the handshake.
	other, err := pki.Ensure(t.TempDir(), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	otherTLS, err := other.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	otherTLS.RootCAs = h.bundle.CAPool
	foreign := &http.Client{Transport: &http.Transport{TLSClientConfig: otherTLS}}
	if resp, err := foreign.Get(h.base + "/pods"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("foreign CA client = %d, want a refused handshake or 401", resp.StatusCode)
		}
	}
}

func TestPods(t *testing.T) {
	h := startHarness(t, nil)
	h.addPod(t, "", "")
	code, body := get(t, h.httpClient(t), h.base+"/pods")
	if code != http.StatusOK || !strings.Contains(body, `"kind":"PodList"`) || !strings.Contains(body, `"uid":"`+podUID+`"`) {
		t.Errorf("/pods = %d %s", code, body)
	}
}
