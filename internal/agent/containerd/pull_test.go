package containerd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/agent/images"
	testimages "github.com/skiff-sh/skiff/internal/testing/images"
)

// TestPullThroughMirror runs a registry on loopback holding an image named
// as if it came from docker.io, points docker.io at it in registries.yaml,
// and pulls through CRI: the pull can only succeed through the mirror.
func TestPullThroughMirror(t *testing.T) {
	needRoot(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)

	img, err := images.Build(testimages.BusyboxFiles(t), images.Config{Cmd: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	push(t, reg.URL, "library/busybox", "mirrored", img)

	dataDir := t.TempDir()
	regYAML := fmt.Sprintf("mirrors:\n  docker.io:\n    endpoint: [%q]\n", reg.URL)
	if err := os.MkdirAll(filepath.Join(dataDir, "agent"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "agent", "registries.yaml"), []byte(regYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startContainerd(t, dataDir)
	t.Cleanup(func() { s.stop(t); unmountUnder(dataDir) })
	_, is := criClients(t, s.c.Endpoint())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	pulled, err := is.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox:mirrored"}, nil, nil)
	if err != nil {
		t.Fatalf("pull docker.io/library/busybox:mirrored through the mirror: %v\n%s", err, tail(s.c.log))
	}
	st, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:mirrored"}, false)
	if err != nil || st.Image == nil || st.Image.Id != pulled {
		t.Fatalf("ImageStatus after the pull = %v, %v; want image %s", st, err, pulled)
	}
	// Without a mirror for it, another registry's image is not found (and
	// nothing leaves the machine: the name resolves nowhere).
	if _, err := is.PullImage(ctx, &runtimeapi.ImageSpec{Image: "registry.invalid/nothing:1"}, nil, nil); err == nil {
		t.Error("pull of an image from an unreachable registry succeeded")
	}
}

// push uploads img to the registry at base as repo:tag with plain
// registry API calls (monolithic blob uploads, then the manifest).
func push(t *testing.T, base, repo, tag string, img v1.Image) {
	t.Helper()
	pushTo(t, http.DefaultClient, base, repo, tag, img, "", "")
}

// pushTo is push through client, with basic credentials when user is set.
func pushTo(t *testing.T, client *http.Client, base, repo, tag string, img v1.Image, user, password string) {
	t.Helper()
	do := func(req *http.Request) (*http.Response, error) {
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		return client.Do(req)
	}
	upload := func(data []byte, digest string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v2/"+repo+"/blobs/uploads/", nil)
		resp, err := do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if !strings.HasPrefix(loc, "http") {
			loc = base + loc
		}
		sep := "?"
		if strings.Contains(loc, "?") {
			sep = "&"
		}
		req, _ = http.NewRequest(http.MethodPut, loc+sep+"digest="+digest, bytes.NewReader(data))
		resp, err = do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("upload blob %s: %s", digest, resp.Status)
		}
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		d, _ := l.Digest()
		upload(data, d.String())
	}
	cfg, _ := img.RawConfigFile()
	cd, _ := img.ConfigName()
	upload(cfg, cd.String())
	manifest, _ := img.RawManifest()
	mt, _ := img.MediaType()
	req, _ := http.NewRequest(http.MethodPut, base+"/v2/"+repo+"/manifests/"+tag, bytes.NewReader(manifest))
	req.Header.Set("Content-Type", string(mt))
	resp, err := do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("put manifest: %s", resp.Status)
	}
}

// TestPullWithAuthAndTLS: a registry on loopback over HTTPS with a
// certificate nobody trusts and basic authentication, reachable only with
// registries.yaml's configs (tls.insecure_skip_verify, auth). Without them
// the same pull fails.
func TestPullWithAuthAndTLS(t *testing.T) {
	needRoot(t)
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "puller" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "https://")

	img, err := images.Build(testimages.BusyboxFiles(t), images.Config{Cmd: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	pushTo(t, reg.Client(), reg.URL, "private/busybox", "1", img, "puller", "s3cret")

	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{name: "without TLS settings", yaml: fmt.Sprintf("configs:\n  %q:\n    auth: {username: puller, password: s3cret}\n", host), wantErr: "certificate"},
		{name: "without credentials", yaml: fmt.Sprintf("configs:\n  %q:\n    tls: {insecure_skip_verify: true}\n", host), wantErr: "no basic auth credentials"},
		{name: "with credentials", yaml: fmt.Sprintf("configs:\n  %q:\n    tls: {insecure_skip_verify: true}\n    auth: {username: puller, password: s3cret}\n", host)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dataDir, "agent"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dataDir, "agent", "registries.yaml"), []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			s := startContainerd(t, dataDir)
			t.Cleanup(func() { s.stop(t); unmountUnder(dataDir) })
			_, is := criClients(t, s.c.Endpoint())
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err := is.PullImage(ctx, &runtimeapi.ImageSpec{Image: host + "/private/busybox:1"}, nil, nil)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("pull = %v, want error %q", err, tc.wantErr)
			}
		})
	}
}
