package proxy

import (
	"strings"
	"testing"
	"time"
)

func TestFlagsConfig(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Flags)
		wantErr string
	}{
		{name: "defaults with a kubeconfig", mutate: func(f *Flags) { f.Kubeconfig = "k" }},
		{name: "cleanup needs no kubeconfig", mutate: func(f *Flags) { f.Cleanup = true }},
		{name: "no kubeconfig", mutate: func(*Flags) {}, wantErr: "--kubeconfig is required"},
		{name: "bad cidr", mutate: func(f *Flags) { f.Kubeconfig = "k"; f.ClusterCIDR = "10.42.0.0" }, wantErr: "--cluster-cidr"},
		{name: "periods", mutate: func(f *Flags) { f.Kubeconfig = "k"; f.SyncPeriod = time.Millisecond }, wantErr: "--sync-period"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultFlags()
			tc.mutate(&f)
			cfg, err := f.Config()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Proxy.ClusterCIDR.String() != "10.42.0.0/16" || cfg.Proxy.MinSyncPeriod != time.Second || cfg.NodeName == "" {
					t.Errorf("config: %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
