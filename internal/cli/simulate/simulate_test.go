package simulate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skiff-sh/skiff/internal/simulate"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func files(m map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := m[name]; ok {
			return []byte(s), nil
		}
		return nil, errors.New("open " + name + ": no such file or directory")
	}
}

func TestConfig(t *testing.T) {
	nodeFile := `
- count: 2
  zone: us-east-1a
  labels: {tier: web}
- count: 1
  namePrefix: gpu-
  capacity: {cpu: 32, example.com/gpu: "4"}
  taints: [{key: gpu, value: "true", effect: NoSchedule}]
`
	tests := []struct {
		name    string
		edit    func(*Flags)
		env     map[string]string
		want    func(*Config)
		wantErr []string
	}{
		{
			name: "defaults",
			want: func(c *Config) {},
		},
		{
			name: "kubeconfig from KUBECONFIG",
			env:  map[string]string{"KUBECONFIG": "/k"},
			want: func(c *Config) { c.Kubeconfig = "/k" },
		},
		{
			name: "kubeconfig from the data dir",
			env:  map[string]string{DataDirEnv: "/d"},
			want: func(c *Config) { c.Kubeconfig = "/d/admin.kubeconfig" },
		},
		{
			name: "flags",
			edit: func(f *Flags) {
				f.Kubeconfig, f.Nodes, f.Zones, f.CPU, f.Memory = "/x", 5000, []string{"a", " b "}, "8", "32Gi"
				f.Labels = []string{"pool=sim", "empty="}
				f.Taints = []string{"dedicated=sim:NoSchedule", "spot:PreferNoSchedule"}
				f.LeaseRenewInterval, f.ManageTaints, f.QPS, f.Burst = 30*time.Second, false, 100, 200
			},
			want: func(c *Config) {
				c.Kubeconfig, c.QPS, c.Burst = "/x", 100, 200
				o := &c.Options
				o.Nodes, o.Zones, o.CPU, o.Memory = 5000, []string{"a", "b"}, resource.MustParse("8"), resource.MustParse("32Gi")
				o.Labels = map[string]string{"pool": "sim", "empty": ""}
				o.Taints = []corev1.Taint{{Key: "dedicated", Value: "sim", Effect: corev1.TaintEffectNoSchedule}, {Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
				o.LeaseRenewInterval, o.KeepNotReadyTaint = 30*time.Second, true
			},
		},
		{
			name: "node file",
			edit: func(f *Flags) { f.NodeFile = "nodes.yaml" },
			want: func(c *Config) {
				c.Options.Templates = []simulate.NodeTemplate{
					{Count: 2, Zone: "us-east-1a", Labels: map[string]string{"tier": "web"}},
					{Count: 1, NamePrefix: "gpu-", Capacity: corev1.ResourceList{"cpu": resource.MustParse("32"), "example.com/gpu": resource.MustParse("4")},
						Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
				}
			},
		},
		{
			name:    "node file with --nodes",
			edit:    func(f *Flags) { f.NodeFile, f.NodesSet = "nodes.yaml", true },
			wantErr: []string{"--nodes and --node-file are mutually exclusive"},
		},
		{
			name:    "missing and bad node files",
			edit:    func(f *Flags) { f.NodeFile = "missing.yaml" },
			wantErr: []string{"--node-file: open missing.yaml: no such file"},
		},
		{
			name:    "unknown field in node file",
			edit:    func(f *Flags) { f.NodeFile = "typo.yaml" },
			wantErr: []string{`--node-file typo.yaml: error unmarshaling JSON: while decoding JSON: json: unknown field "lables"`},
		},
		{
			name: "bad values",
			edit: func(f *Flags) {
				f.CPU, f.Memory, f.Pods = "lots", "0", 0
				f.Labels, f.Taints = []string{"novalue"}, []string{"k=v"}
				f.QPS = 0
			},
			wantErr: []string{`--cpu "lots": quantities must match`, "--memory must be more than 0", "--pods 0 must be at least 1",
				`--labels: "novalue" is not key=value`, `--taints: "k=v" is not key=value:Effect`, "--qps and --burst must be positive"},
		},
		{
			name:    "invalid taint effect and too many nodes reach the library's validation",
			edit:    func(f *Flags) { f.Taints, f.Nodes = []string{"k:Never"}, 100000 },
			wantErr: []string{`taint 0 effect "Never" must be NoSchedule`, "100000 nodes is more than"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultFlags()
			if tc.edit != nil {
				tc.edit(&f)
			}
			got, err := f.Config(env(tc.env), files(map[string]string{"nodes.yaml": nodeFile, "typo.yaml": "- count: 1\n  lables: {a: b}\n"}))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Config() = nil error, want %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Config() error = %v", err)
			}
			want := Config{
				Kubeconfig: "/var/lib/skiff/admin.kubeconfig", QPS: 2000, Burst: 4000,
				Options: simulate.Options{
					Nodes: 1, NamePrefix: "sim-node-", Pods: 110,
					CPU: resource.MustParse("4"), Memory: resource.MustParse("16Gi"), EphemeralStorage: resource.MustParse("100Gi"),
					LeaseDuration: 40 * time.Second, StatusUpdateFrequency: 5 * time.Minute,
				},
			}
			tc.want(&want)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("Config() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCommandRejectsBadFlagsBeforeConnecting(t *testing.T) {
	cmd := NewCommand()
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--nodes", "0", "--kubeconfig", "/nonexistent"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "at least one node is needed") {
		t.Errorf("Execute() = %v, want the validation error", err)
	}
}
