package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
)

func TestDecode(t *testing.T) {
	reg := plugins.NewInTreeRegistry()
	def := plugins.DefaultProfile()
	multi := func(p runtime.Profile) []string {
		var out []string
		for _, r := range p.Plugins.MultiPoint.Enabled {
			out = append(out, r.Name)
		}
		return out
	}
	defaultNames := multi(def)
	tests := []struct {
		name    string
		yaml    string
		check   func(t *testing.T, c Config)
		wantErr string
	}{
		{
			name: "empty file gives the default profile",
			yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
			check: func(t *testing.T, c Config) {
				if len(c.Profiles) != 1 || c.Profiles[0].SchedulerName != "default-scheduler" {
					t.Fatalf("profiles = %+v", c.Profiles)
				}
				if diff := cmp.Diff(defaultNames, multi(c.Profiles[0])); diff != "" {
					t.Errorf("multiPoint (-want +got):\n%s", diff)
				}
				want := LeaderElection{LeaderElect: true, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, ResourceNamespace: "kube-system", ResourceName: "kube-scheduler"}
				if diff := cmp.Diff(want, c.LeaderElection); diff != "" {
					t.Errorf("leader election (-want +got):\n%s", diff)
				}
				if c.PodInitialBackoff != time.Second || c.PodMaxBackoff != 10*time.Second || c.Parallelism != 16 {
					t.Errorf("backoff %v/%v parallelism %d", c.PodInitialBackoff, c.PodMaxBackoff, c.Parallelism)
				}
				if c.ContentType != "application/vnd.kubernetes.protobuf" || c.AcceptContentTypes != "" {
					t.Errorf("content type %q, accept %q; want upstream's default, protobuf", c.ContentType, c.AcceptContentTypes)
				}
			},
		},
		{
			name: "clientConnection's content types",
			yaml: `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  contentType: application/json
  acceptContentTypes: application/json
  qps: 20
  burst: 40
`,
			check: func(t *testing.T, c Config) {
				if c.ContentType != "application/json" || c.AcceptContentTypes != "application/json" || c.QPS != 20 || c.Burst != 40 {
					t.Errorf("content type %q, accept %q, qps %v, burst %d", c.ContentType, c.AcceptContentTypes, c.QPS, c.Burst)
				}
			},
		},
		{
			name: "two profiles, disabled and reweighted plugins, args, percentage",
			yaml: `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packing
  percentageOfNodesToScore: 100
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourcesFit
        weight: 5
      disabled:
      - name: ImageLocality
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: NodeResourcesFit
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitArgs
      scoringStrategy:
        type: MostAllocated
  - name: ImageLocality
    args: {}
`,
			check: func(t *testing.T, c Config) {
				if len(c.Profiles) != 2 {
					t.Fatalf("%d profiles", len(c.Profiles))
				}
				if c.Profiles[0].PercentageOfNodesToScore != 30 || c.Profiles[1].PercentageOfNodesToScore != 100 {
					t.Errorf("percentages %d, %d", c.Profiles[0].PercentageOfNodesToScore, c.Profiles[1].PercentageOfNodesToScore)
				}
				if c.LeaderElection.LeaderElect || c.PodInitialBackoff != 2*time.Second || c.PodMaxBackoff != 20*time.Second {
					t.Errorf("leader %v backoff %v/%v", c.LeaderElection.LeaderElect, c.PodInitialBackoff, c.PodMaxBackoff)
				}
				bp := c.Profiles[1]
				var want []string
				for _, n := range defaultNames {
					if n != "ImageLocality" {
						want = append(want, n)
					}
				}
				if diff := cmp.Diff(want, multi(bp)); diff != "" {
					t.Errorf("bin-packing multiPoint (-want +got):\n%s", diff)
				}
				for _, r := range bp.Plugins.MultiPoint.Enabled {
					if r.Name == "NodeResourcesFit" && r.Weight != 5 {
						t.Errorf("NodeResourcesFit weight %d, want 5", r.Weight)
					}
				}
				if diff := cmp.Diff([]runtime.PluginRef{{Name: "NodeResourcesBalancedAllocation"}}, bp.Plugins.Score.Disabled); diff != "" {
					t.Errorf("score disabled (-want +got):\n%s", diff)
				}
				// ImageLocality's args are dropped: it is not enabled.
				if len(bp.PluginConfig) != 1 || bp.PluginConfig[0].Name != "NodeResourcesFit" {
					t.Fatalf("pluginConfig = %+v", bp.PluginConfig)
				}
				var args struct {
					ScoringStrategy struct{ Type string } `json:"scoringStrategy"`
				}
				if err := json.Unmarshal(bp.PluginConfig[0].Args.(json.RawMessage), &args); err != nil || args.ScoringStrategy.Type != "MostAllocated" {
					t.Errorf("args = %s (%v)", bp.PluginConfig[0].Args, err)
				}
				// The profile builds.
				if _, err := runtime.New(t.Context(), reg, bp, runtime.Options{}); err != nil && !strings.Contains(err.Error(), "DefaultBinder needs a client") {
					t.Errorf("runtime.New: %v", err)
				}
			},
		},
		{
			name: "disable all multipoint and enable a custom set",
			yaml: `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: minimal
  plugins:
    multiPoint:
      enabled: [{name: PrioritySort}, {name: NodeName}, {name: DefaultBinder}]
      disabled: [{name: "*"}]
`,
			check: func(t *testing.T, c Config) {
				if diff := cmp.Diff([]string{"PrioritySort", "NodeName", "DefaultBinder"}, multi(c.Profiles[0])); diff != "" {
					t.Errorf("multiPoint (-want +got):\n%s", diff)
				}
			},
		},
		{name: "unknown plugin", wantErr: `profiles[0].plugins.filter.enabled[0]: plugin "NoSuchPlugin" is not registered (known plugins: DefaultBinder,`,
			yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    filter:\n      enabled: [{name: NoSuchPlugin}]\n"},
		{name: "unknown plugin in pluginConfig", wantErr: `profiles[0].pluginConfig[0]: plugin "Nope" is not registered`,
			yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- pluginConfig:\n  - name: Nope\n"},
		{name: "unknown field", wantErr: `unknown field "profile"`,
			yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofile: []\n"},
		{name: "wrong version", wantErr: `want kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration`,
			yaml: "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"},
		{name: "duplicate scheduler name", wantErr: `profiles[1].schedulerName: Duplicate value: "a"`,
			yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n- schedulerName: a\n"},
		{name: "percentage out of range", wantErr: `percentageOfNodesToScore: Invalid value: 101`,
			yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 101\n"},
		{name: "max backoff below initial", wantErr: `podMaxBackoffSeconds`,
			yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npodInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n"},
		{name: "lease shorter than renew deadline", wantErr: `leaderElection.leaseDuration`,
			yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaseDuration: 5s\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode([]byte(tc.yaml), reg, def)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestMergePluginSet(t *testing.T) {
	def := runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: "A", Weight: 1}, {Name: "B", Weight: 2}, {Name: "C"}}}
	tests := []struct {
		name   string
		custom runtime.PluginSet
		want   []runtime.PluginRef
	}{
		{"nothing", runtime.PluginSet{}, def.Enabled},
		{"reweight in place and append", runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: "D"}, {Name: "B", Weight: 7}}},
			[]runtime.PluginRef{{Name: "A", Weight: 1}, {Name: "B", Weight: 7}, {Name: "C"}, {Name: "D"}}},
		{"disable one", runtime.PluginSet{Disabled: []runtime.PluginRef{{Name: "A"}}}, []runtime.PluginRef{{Name: "B", Weight: 2}, {Name: "C"}}},
		{"disable all", runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: "C"}}, Disabled: []runtime.PluginRef{{Name: "*"}}}, []runtime.PluginRef{{Name: "C"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, MergePluginSet(def, tc.custom).Enabled); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
