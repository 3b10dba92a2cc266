package controllermanager

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-sh/skiff/internal/component"
	"github.com/skiff-sh/skiff/internal/controller/manager"
)

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Flags)
		check   func(*testing.T, Config)
		wantErr string
	}{
		{
			name: "defaults are upstream's",
			edit: func(f *Flags) { f.Kubeconfig = "k" },
			check: func(t *testing.T, c Config) {
				m := c.Manager
				got := []any{m.LeaderElect, m.LeaseNamespace + "/" + m.LeaseName, m.LeaseDuration, m.RenewDeadline, m.RetryPeriod, c.Serving, m.Controller.NodeMonitorGracePeriod, []string(m.Controllers)}
				got = append(got, m.Controller.ClusterCIDR, m.Controller.NodeCIDRMaskSize, m.UseServiceAccountCredentials, m.ContentType)
				want := []any{true, "kube-system/kube-controller-manager", 15 * time.Second, 10 * time.Second, 2 * time.Second, component.SecureServing{BindAddress: "0.0.0.0", SecurePort: 10257}, 50 * time.Second, []string{"*"}, "10.42.0.0/16", 24, true, "application/vnd.kubernetes.protobuf"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("config (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "controllers and grace period",
			edit: func(f *Flags) {
				f.Kubeconfig = "k"
				f.Controllers = []string{"*", "-nodelifecycle"}
				f.NodeMonitorGrace = 3 * time.Second
			},
			check: func(t *testing.T, c Config) {
				if c.Manager.Controllers.Enabled("nodelifecycle", false) || !c.Manager.Controllers.Enabled("deployment", false) {
					t.Errorf("selection %v", c.Manager.Controllers)
				}
				if c.Manager.Controller.NodeMonitorGracePeriod != 3*time.Second {
					t.Errorf("grace = %v", c.Manager.Controller.NodeMonitorGracePeriod)
				}
			},
		},
		{
			name: "node IPAM range",
			edit: func(f *Flags) {
				f.Kubeconfig = "k"
				f.ClusterCIDR = "10.100.0.0/16"
				f.NodeCIDRMaskSize = 26
			},
			check: func(t *testing.T, c Config) {
				o := c.Manager.Controller
				if got := fmt.Sprintf("%s /%d", o.ClusterCIDR, o.NodeCIDRMaskSize); got != "10.100.0.0/16 /26" {
					t.Errorf("node IPAM range = %s, want 10.100.0.0/16 /26", got)
				}
			},
		},
		{name: "cluster CIDR must parse", edit: func(f *Flags) { f.Kubeconfig = "k"; f.ClusterCIDR = "10.42.0.0" }, wantErr: "--cluster-cidr/--node-cidr-mask-size: cluster CIDR"},
		{name: "node mask inside the cluster CIDR", edit: func(f *Flags) { f.Kubeconfig = "k"; f.NodeCIDRMaskSize = 8 }, wantErr: "node CIDR mask size 8"},
		{name: "content type", edit: func(f *Flags) { f.Kubeconfig = "k"; f.KubeAPIContentType = "application/xml" }, wantErr: `--kube-api-content-type "application/xml": must be application/vnd.kubernetes.protobuf or application/json`},
		{name: "kubeconfig is required", edit: func(*Flags) {}, wantErr: "--kubeconfig is required"},
		{name: "unknown controller", edit: func(f *Flags) { f.Kubeconfig = "k"; f.Controllers = []string{"nope"} }, wantErr: `"nope" is not in the list of known controllers`},
		{name: "lease shorter than renew", edit: func(f *Flags) { f.Kubeconfig = "k"; f.LeaseDuration = time.Second }, wantErr: "must be greater than --leader-elect-renew-deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultFlags()
			tc.edit(&f)
			cfg, err := f.Config()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Config: %v", err)
			}
			tc.check(t, cfg)
		})
	}
	if got, want := DefaultFlags().Serving, (component.SecureServing{BindAddress: "0.0.0.0", SecurePort: manager.DefaultSecurePort}); got != want {
		t.Errorf("default serving = %+v, want %+v", got, want)
	}
}
