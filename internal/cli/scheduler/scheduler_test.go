package scheduler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/internal/component"
)

func TestFlagsConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sched.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /from/file
leaderElection:
  leaderElect: false
  leaseDuration: 30s
profiles:
- schedulerName: a
- schedulerName: b
`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    score:\n      enabled: [{name: Nope}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		edit    func(*Flags)
		check   func(t *testing.T, c Config)
		wantErr string
	}{
		{name: "defaults need a kubeconfig", edit: func(*Flags) {}, wantErr: "--kubeconfig is required"},
		{name: "defaults", edit: func(f *Flags) { f.Kubeconfig = "k" }, check: func(t *testing.T, c Config) {
			le := c.Scheduler.LeaderElection
			if !le.LeaderElect || le.LeaseDuration != 15*time.Second || le.RenewDeadline != 10*time.Second || le.RetryPeriod != 2*time.Second ||
				le.ResourceNamespace != "kube-system" || le.ResourceName != "kube-scheduler" {
				t.Errorf("leader election = %+v", le)
			}
			if len(c.Scheduler.Profiles) != 1 || c.Scheduler.Profiles[0].SchedulerName != "default-scheduler" {
				t.Errorf("profiles = %+v", c.Scheduler.Profiles)
			}
			if want := (component.SecureServing{BindAddress: "0.0.0.0", SecurePort: 10259}); c.Serving != want {
				t.Errorf("serving = %+v, want %+v", c.Serving, want)
			}
		}},
		{name: "config file wins over unset flags", edit: func(f *Flags) { f.ConfigFile = file }, check: func(t *testing.T, c Config) {
			if c.Kubeconfig != "/from/file" || c.Scheduler.LeaderElection.LeaderElect || c.Scheduler.LeaderElection.LeaseDuration != 30*time.Second {
				t.Errorf("config = %+v", c)
			}
			if len(c.Scheduler.Profiles) != 2 {
				t.Errorf("%d profiles, want 2", len(c.Scheduler.Profiles))
			}
		}},
		{name: "flags set on the command line win over the file", edit: func(f *Flags) {
			f.ConfigFile, f.Kubeconfig, f.LeaderElect = file, "/flag", true
			f.changed = map[string]bool{"leader-elect": true}
		}, check: func(t *testing.T, c Config) {
			if c.Kubeconfig != "/flag" || !c.Scheduler.LeaderElection.LeaderElect {
				t.Errorf("config = %+v", c)
			}
		}},
		{name: "unknown plugin in the file", edit: func(f *Flags) { f.ConfigFile, f.Kubeconfig = bad, "k" }, wantErr: `plugin "Nope" is not registered`},
		{name: "missing file", edit: func(f *Flags) { f.ConfigFile, f.Kubeconfig = filepath.Join(dir, "none"), "k" }, wantErr: "no such file"},
		{name: "lease not longer than renew deadline", edit: func(f *Flags) { f.Kubeconfig, f.LeaseDuration = "k", 5*time.Second }, wantErr: "must be greater than --leader-elect-renew-deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultFlags()
			tc.edit(&f)
			c, err := f.Config()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
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
