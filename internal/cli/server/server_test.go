package server

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/agent"
	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/kubelet"
	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
	"github.com/skiff-sh/skiff/internal/server"
)

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := DefaultFlags().Config()
	if err != nil {
		t.Fatal(err)
	}
	want := server.Config{
		DataDir: "/var/lib/skiff", BindAddress: "0.0.0.0", Port: 6443,
		Services:       server.ServicesConfig{DNSPort: 53},
		EtcdClientPort: 2379, EtcdPeerPort: 2380,
		Controllers: manager.Selection{"*"},
		Agent: agent.Config{
			Kubelet: func() kubelet.Options {
				o := kubelet.Options{Port: 10250}
				if err := kubelet.DefaultEvictionGCFlags().Apply(&o); err != nil {
					t.Fatal(err)
				}
				return o
			}(),
			KubeletAPI:  agent.KubeletAPIConfig{Rotation: kubeletserver.RotatorOptions{MaxSize: 10 << 20, MaxFiles: 5}},
			ClusterCIDR: "10.42.0.0/16",
		},
		ControllerOptions: &manager.Options{
			Controllers:                  manager.Selection{"*"},
			Controller:                   manager.DefaultControllerOptions(),
			UseServiceAccountCredentials: true,
		},
		// kube-apiserver's defaults for the overload flags.
		Overload: server.OverloadConfig{
			RequestTimeout: time.Minute, MinRequestTimeout: 30 * time.Minute,
			MaxRequestsInflight: 400, MaxMutatingRequestsInflight: 200,
		},
		AuthorizationModes: []string{"Node", "RBAC"},
		// kube-apiserver's defaults for the webhook authorizer's flags.
		Authorization: apiserver.AuthorizationOptions{WebhookVersion: "v1beta1", WebhookCacheAuthorizedTTL: 5 * time.Minute, WebhookCacheUnauthorizedTTL: 30 * time.Second},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestFlagParsing(t *testing.T) {
	cmd := NewCommand()
	if err := cmd.ParseFlags([]string{
		"--data-dir=/tmp/x", "--bind-address=0.0.0.0", "--https-listen-port=7443",
		"--etcd-servers=http://a:2379,https://b:2379", "--etcd-client-port=0", "--disable-agent",
		"--controllers=*,-nodelifecycle", "--node-monitor-grace-period=5s", "--node-monitor-period=500ms",
		"--node-startup-grace-period=10s", "--node-eviction-rate=2", "--scheduler-config=/etc/skiff/scheduler.yaml",
		"--kubelet-port=11250", "--container-log-max-size=1Mi", "--container-log-max-files=3",
	}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"data-dir": "/tmp/x", "bind-address": "0.0.0.0", "https-listen-port": "7443",
		"etcd-servers": "[http://a:2379,https://b:2379]", "etcd-client-port": "0", "disable-agent": "true",
		"controllers": "[*,-nodelifecycle]", "node-monitor-grace-period": "5s", "node-monitor-period": "500ms",
		"node-startup-grace-period": "10s", "node-eviction-rate": "2", "scheduler-config": "/etc/skiff/scheduler.yaml",
		"kubelet-port": "11250", "container-log-max-size": "1Mi", "container-log-max-files": "3",
	} {
		if got := cmd.Flags().Lookup(name).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}
	if strings.Contains(cmd.Flags().Lookup("disable-agent").Usage, "no effect") {
		t.Error("--disable-agent help still says it has no effect")
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Flags)
		wantErr string // empty: valid
		check   func(t *testing.T, c server.Config)
	}{
		{name: "relative data dir becomes absolute", mutate: func(f *Flags) { f.DataDir = "data" }, check: func(t *testing.T, c server.Config) {
			if !strings.HasPrefix(c.DataDir, "/") || !strings.HasSuffix(c.DataDir, "/data") {
				t.Errorf("DataDir = %q, want an absolute path ending in /data", c.DataDir)
			}
		}},
		{name: "empty data dir", mutate: func(f *Flags) { f.DataDir = " " }, wantErr: "--data-dir must not be empty"},
		{name: "hostname bind address", mutate: func(f *Flags) { f.BindAddress = "localhost" }, wantErr: `--bind-address "localhost" is not an IP address`},
		{name: "port out of range", mutate: func(f *Flags) { f.HTTPSPort = 70000 }, wantErr: "--https-listen-port 70000 is out of range"},
		{name: "negative etcd port", mutate: func(f *Flags) { f.EtcdClientPort = -1 }, wantErr: "--etcd-client-port -1 is out of range"},
		{name: "free ports", mutate: func(f *Flags) { f.HTTPSPort, f.EtcdClientPort, f.EtcdPeerPort = 0, 0, 0 }},
		{name: "api port clashes with etcd", mutate: func(f *Flags) { f.HTTPSPort = 2379 }, wantErr: "--https-listen-port 2379 is also an etcd port"},
		{name: "etcd ports clash", mutate: func(f *Flags) { f.EtcdPeerPort = 2379 }, wantErr: "--etcd-client-port and --etcd-peer-port are both 2379"},
		{name: "kubelet port", mutate: func(f *Flags) { f.KubeletPort = 0 }, wantErr: "--kubelet-port 0 is not a port"},
		{name: "log max size", mutate: func(f *Flags) { f.ContainerLogMaxSize = "big" }, wantErr: `--container-log-max-size "big"`},
		{name: "log max files", mutate: func(f *Flags) { f.ContainerLogMaxFiles = 1 }, wantErr: "--container-log-max-files must be at least 2, got 1"},
		{name: "bad etcd server", mutate: func(f *Flags) { f.EtcdServers = []string{"127.0.0.1:2379"} }, wantErr: `"127.0.0.1:2379" is not an http(s)://host:port URL`},
		{name: "external etcd", mutate: func(f *Flags) { f.EtcdServers = []string{"https://etcd-0:2379", " "} }, check: func(t *testing.T, c server.Config) {
			if diff := cmp.Diff([]string{"https://etcd-0:2379"}, c.EtcdServers); diff != "" {
				t.Errorf("EtcdServers (-want +got):\n%s", diff)
			}
		}},
		{name: "external etcd over TLS", mutate: func(f *Flags) {
			f.EtcdServers = []string{"https://etcd-0:2379"}
			f.EtcdCAFile, f.EtcdCertFile, f.EtcdKeyFile = "/etc/etcd/ca.crt", "/etc/etcd/client.crt", "/etc/etcd/client.key"
		}, check: func(t *testing.T, c server.Config) {
			if diff := cmp.Diff([]string{"/etc/etcd/ca.crt", "/etc/etcd/client.crt", "/etc/etcd/client.key"}, []string{c.EtcdCAFile, c.EtcdCertFile, c.EtcdKeyFile}); diff != "" {
				t.Errorf("etcd TLS files (-want +got):\n%s", diff)
			}
		}},
		{name: "etcd certificate without key", mutate: func(f *Flags) {
			f.EtcdServers = []string{"https://etcd-0:2379"}
			f.EtcdCertFile = "/etc/etcd/client.crt"
		}, wantErr: "--etcd-certfile and --etcd-keyfile must be given together"},
		{name: "etcd TLS files for the embedded member", mutate: func(f *Flags) { f.EtcdCAFile = "/etc/etcd/ca.crt" }, wantErr: "need --etcd-servers"},
		{name: "controllers and node durations", mutate: func(f *Flags) {
			f.Controllers = []string{"*", "-nodelifecycle", ""}
			f.NodeMonitorGrace, f.NodeMonitorPeriod, f.NodeStartupGrace, f.NodeEvictionRate = 3*time.Second, 200*time.Millisecond, 4*time.Second, 100
		}, check: func(t *testing.T, c server.Config) {
			want := manager.DefaultControllerOptions()
			want.NodeMonitorGracePeriod, want.NodeMonitorPeriod, want.NodeStartupGracePeriod, want.NodeEvictionRate = 3*time.Second, 200*time.Millisecond, 4*time.Second, 100
			if diff := cmp.Diff(&manager.Options{Controllers: manager.Selection{"*", "-nodelifecycle"}, Controller: want, UseServiceAccountCredentials: true}, c.ControllerOptions); diff != "" {
				t.Errorf("ControllerOptions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(manager.Selection{"*", "-nodelifecycle"}, c.Controllers); diff != "" {
				t.Errorf("Controllers (-want +got):\n%s", diff)
			}
		}},
		{name: "only some controllers", mutate: func(f *Flags) { f.Controllers = []string{"deployment", "replicaset"} }, check: func(t *testing.T, c server.Config) {
			if !c.Controllers.Enabled("deployment", false) || c.Controllers.Enabled("namespace", false) {
				t.Errorf("Controllers = %v, want deployment on and namespace off", c.Controllers)
			}
		}},
		{name: "node IPAM range", mutate: func(f *Flags) { f.ClusterCIDR, f.NodeCIDRMaskSize = "10.100.0.0/16", 25 }, check: func(t *testing.T, c server.Config) {
			if o := c.ControllerOptions.Controller; o.ClusterCIDR != "10.100.0.0/16" || o.NodeCIDRMaskSize != 25 {
				t.Errorf("node IPAM range = %s /%d, want 10.100.0.0/16 /25", o.ClusterCIDR, o.NodeCIDRMaskSize)
			}
		}},
		{name: "node port addresses of the agent", mutate: func(f *Flags) { f.NodePortAddresses = []string{"10.98.0.0/24", "fd00::/64"} }, check: func(t *testing.T, c server.Config) {
			want := []netip.Prefix{netip.MustParsePrefix("10.98.0.0/24"), netip.MustParsePrefix("fd00::/64")}
			if diff := cmp.Diff(want, c.Agent.NodePortCIDRs, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" || c.Agent.NodePortPrimary {
				t.Errorf("Agent.NodePortCIDRs (-want +got):\n%s (primary %v)", diff, c.Agent.NodePortPrimary)
			}
		}},
		{name: "node port addresses primary", mutate: func(f *Flags) { f.NodePortAddresses = []string{"primary"} }, check: func(t *testing.T, c server.Config) {
			if !c.Agent.NodePortPrimary || c.Agent.NodePortCIDRs != nil {
				t.Errorf("Agent.NodePortPrimary = %v, NodePortCIDRs = %v; want true, none", c.Agent.NodePortPrimary, c.Agent.NodePortCIDRs)
			}
		}},
		{name: "node port addresses not a CIDR", mutate: func(f *Flags) { f.NodePortAddresses = []string{"10.98.0.1"} }, wantErr: `--nodeport-addresses: "10.98.0.1" is neither a CIDR nor "primary"`},
		{name: "node port addresses primary and CIDR", mutate: func(f *Flags) { f.NodePortAddresses = []string{"primary", "10.0.0.0/8"} }, wantErr: `"primary" cannot be combined with CIDRs`},
		{name: "bad cluster CIDR", mutate: func(f *Flags) { f.ClusterCIDR = "10.42.0.0" }, wantErr: "--cluster-cidr/--node-cidr-mask-size: cluster CIDR"},
		{name: "node mask shorter than the cluster CIDR", mutate: func(f *Flags) { f.NodeCIDRMaskSize = 8 }, wantErr: "node CIDR mask size 8"},
		{name: "unknown controller", mutate: func(f *Flags) { f.Controllers = []string{"*", "-nodecontroller"} }, wantErr: `--controllers: "nodecontroller" is not in the list of known controllers`},
		{name: "no controllers at all", mutate: func(f *Flags) { f.Controllers = []string{"-*"} }, wantErr: `--controllers: "-*" is not allowed`},
		{name: "zero grace period", mutate: func(f *Flags) { f.NodeMonitorGrace = 0 }, wantErr: "--node-monitor-grace-period must be positive"},
		{name: "negative monitor period", mutate: func(f *Flags) { f.NodeMonitorPeriod = -time.Second }, wantErr: "--node-monitor-period must be positive"},
		{name: "negative eviction rate", mutate: func(f *Flags) { f.NodeEvictionRate = -1 }, wantErr: "--node-eviction-rate must not be negative"},
		{name: "watch cache sizes", mutate: func(f *Flags) { f.WatchCacheSizes = []string{"events#100", "pods#0", "leases.coordination.k8s.io#0"} }, check: func(t *testing.T, c server.Config) {
			want := apiserver.WatchCacheConfig{Sizes: map[schema.GroupResource]int{{Resource: "events"}: 100, {Resource: "pods"}: 0, {Group: "coordination.k8s.io", Resource: "leases"}: 0}}
			if diff := cmp.Diff(want, c.WatchCache); diff != "" {
				t.Errorf("WatchCache (-want +got):\n%s", diff)
			}
		}},
		{name: "watch cache off", mutate: func(f *Flags) { f.WatchCache = false }, check: func(t *testing.T, c server.Config) {
			if !c.WatchCache.Disabled {
				t.Error("--watch-cache=false left the watch cache on")
			}
		}},
		{name: "watch cache size without a size", mutate: func(f *Flags) { f.WatchCacheSizes = []string{"events"} }, wantErr: `--watch-cache-sizes: "events": want resource[.group]#size`},
		{name: "negative watch cache size", mutate: func(f *Flags) { f.WatchCacheSizes = []string{"pods#-1"} }, wantErr: `--watch-cache-sizes: "pods#-1": the size must be a number not below 0`},
		{name: "external etcd ignores embedded port clash", mutate: func(f *Flags) {
			f.EtcdServers = []string{"http://etcd:2379"}
			f.HTTPSPort = 2379
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultFlags()
			tc.mutate(&f)
			cfg, err := f.Config()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Config() error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Config() = %v", err)
			}
			if tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

func TestSchedulerConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	twoProfiles := write("two.yaml", header+`leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packing
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
`)
	unknownPlugin := write("bad.yaml", header+`profiles:
- schedulerName: default-scheduler
  plugins:
    filter:
      enabled:
      - name: Nope
`)
	tests := []struct {
		name         string
		file         string
		wantErr      string
		wantProfiles []string // nil: no SchedulerConfig (the default profile)
		wantElect    bool
	}{
		{name: "no file: the default profile", file: ""},
		{name: "blank path: the default profile", file: " "},
		{name: "profiles and leader election from the file", file: twoProfiles, wantProfiles: []string{"default-scheduler", "bin-packing"}, wantElect: false},
		{name: "unknown plugin", file: unknownPlugin, wantErr: `--scheduler-config: scheduler config ` + unknownPlugin},
		{name: "missing file", file: filepath.Join(dir, "none.yaml"), wantErr: "--scheduler-config: read scheduler config"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultFlags()
			f.SchedulerConfig = tc.file
			cfg, err := f.Config()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Config() error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Config() = %v", err)
			}
			if tc.wantProfiles == nil {
				if cfg.SchedulerConfig != nil {
					t.Errorf("SchedulerConfig = %+v, want nil", cfg.SchedulerConfig)
				}
				return
			}
			if cfg.SchedulerConfig == nil {
				t.Fatal("SchedulerConfig is nil")
			}
			var names []string
			for _, p := range cfg.SchedulerConfig.Profiles {
				names = append(names, p.SchedulerName)
			}
			if diff := cmp.Diff(tc.wantProfiles, names); diff != "" {
				t.Errorf("profiles (-want +got):\n%s", diff)
			}
			if got := cfg.SchedulerConfig.LeaderElection.LeaderElect; got != tc.wantElect {
				t.Errorf("leaderElect = %v, want %v", got, tc.wantElect)
			}
		})
	}
}
