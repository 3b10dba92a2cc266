package containerd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRegistriesToHostsDir(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		wantHosts map[string]string
		wantAuths map[string]Auth
		wantErr   string
	}{
		{name: "no file", wantHosts: map[string]string{}, wantAuths: map[string]Auth{}},
		{
			name: "mirror with auth and tls, insecure registry, default mirror",
			yaml: `
mirrors:
  docker.io:
    endpoint: ["https://mirror.local:5000", "http://10.0.0.1:5000/v2"]
  "*":
    endpoint: ["http://cache.local"]
configs:
  mirror.local:5000:
    auth: {username: u, password: p}
    tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem}
  "https://insecure.local":
    tls: {insecure_skip_verify: true}
`,
			wantHosts: map[string]string{
				"docker.io": `server = "https://registry-1.docker.io"

[host."https://mirror.local:5000"]
  capabilities = ["pull", "resolve"]
  ca = "/ca.pem"
  client = [["/c.pem", "/k.pem"]]

[host."http://10.0.0.1:5000/v2"]
  capabilities = ["pull", "resolve"]
`,
				"_default": `
[host."http://cache.local"]
  capabilities = ["pull", "resolve"]
`,
				"insecure.local": `server = "https://insecure.local"
skip_verify = true
`,
				"mirror.local:5000": `server = "https://mirror.local:5000"
ca = "/ca.pem"
client = [["/c.pem", "/k.pem"]]
`,
			},
			wantAuths: map[string]Auth{"mirror.local:5000": {Username: "u", Password: "p"}},
		},
		{name: "unknown field", yaml: "mirrors: {}\nconfig: {}\n", wantErr: `unknown field "config"`},
		{name: "bad endpoint", yaml: "mirrors: {docker.io: {endpoint: [\"ftp://x\"]}}\n", wantErr: "want http(s)://host[:port]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "registries.yaml")
			if tc.yaml != "" {
				if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			regs, err := readRegistries(file)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			hostsDir := filepath.Join(dir, "certs.d")
			if err := writeHostsDir(hostsDir, regs.hostsFiles()); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			entries, _ := os.ReadDir(hostsDir)
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(hostsDir, e.Name(), "hosts.toml"))
				if err != nil {
					t.Fatal(err)
				}
				got[e.Name()] = string(b)
			}
			if diff := cmp.Diff(tc.wantHosts, got); diff != "" {
				t.Errorf("hosts.d (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAuths, regs.auths()); diff != "" {
				t.Errorf("auths (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderConfig(t *testing.T) {
	in := configInput{
		paths:        newPaths("/var/lib/skiff"),
		Snapshotter:  "native",
		SandboxImage: "registry.k8s.io/pause:3.10.2",
		RuncPath:     "/usr/sbin/runc",
		Runtimes:     []Runtime{{Name: "crun", Path: "/usr/bin/crun"}},
		CNIBinDirs:   []string{"/usr/lib/cni"},
		CNIConfDir:   "/var/lib/skiff/agent/etc/cni/net.d",
		StreamAddr:   "127.0.0.1",
		Auths:        map[string]Auth{"r.local": {Username: "a\"b"}},
		LogLevel:     "info",

		RestrictOOMScoreAdj: true,
	}
	cfg := string(renderConfig(in))
	for _, want := range []string{
		`root = "/var/lib/skiff/agent/containerd/root"`,
		`state = "/var/lib/skiff/agent/containerd/state"`,
		`address = "/var/lib/skiff/agent/containerd/containerd.sock"`,
		`snapshotter = "native"`,
		`sandbox = "registry.k8s.io/pause:3.10.2"`,
		`config_path = "/var/lib/skiff/agent/containerd/certs.d"`,
		`[plugins.'io.containerd.cri.v1.images'.registry.configs."r.local".auth]`,
		`username = "a\"b"`,
		`BinaryName = "/usr/sbin/runc"`,
		`SystemdCgroup = false`,
		`default_runtime_name = 'runc'`,
		`[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes."crun".options]`,
		`BinaryName = "/usr/bin/crun"`,
		`Root = "/var/lib/skiff/agent/containerd/state/crun"`,
		`restrict_oom_score_adj = true`,
		`bin_dirs = ["/usr/lib/cni"]`,
		`conf_dir = "/var/lib/skiff/agent/etc/cni/net.d"`,
		`use_internal_loopback = true`,
		`stream_server_address = "127.0.0.1"`,
		`"io.containerd.nri.v1.nri"`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %s:\n%s", want, cfg)
		}
	}
}

func TestLongDataDirIsRefused(t *testing.T) {
	dir := "/" + strings.Repeat("d", 100)
	_, err := New(dir, Options{}).prepare(context.Background())
	if err == nil || !strings.Contains(err.Error(), "more than a unix socket allows") {
		t.Fatalf("prepare with a %d-byte data dir = %v, want the socket length error", len(dir), err)
	}
}

func TestNextBackoff(t *testing.T) {
	const lo, hi = time.Second, 30 * time.Second
	tests := []struct {
		name         string
		prev, ranFor time.Duration
		want         time.Duration
	}{
		{"first restart", 0, time.Second, lo},
		{"dies again at once: doubles", lo, time.Second, 2 * lo},
		{"keeps dying: doubles", 8 * time.Second, time.Second, 16 * time.Second},
		{"capped", 16 * time.Second, time.Second, hi},
		{"stays capped", hi, time.Second, hi},
		{"ran for over a minute: starts over", hi, 2 * time.Minute, lo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextBackoff(tc.prev, tc.ranFor, lo, hi); got != tc.want {
				t.Errorf("nextBackoff(%v, %v) = %v, want %v", tc.prev, tc.ranFor, got, tc.want)
			}
		})
	}
}
