package proxy

import (
	"fmt"
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
		{name: "nodeport addresses primary", mutate: func(f *Flags) { f.Kubeconfig = "k"; f.NodePortAddrs = []string{"primary"} }},
		{name: "nodeport addresses cidrs", mutate: func(f *Flags) { f.Kubeconfig = "k"; f.NodePortAddrs = []string{"10.0.0.0/8", "192.168.1.0/24"} }},
		{name: "nodeport addresses bad", mutate: func(f *Flags) { f.Kubeconfig = "k"; f.NodePortAddrs = []string{"eth0"} }, wantErr: "--nodeport-addresses"},
		{name: "nodeport addresses primary and cidrs", mutate: func(f *Flags) { f.Kubeconfig = "k"; f.NodePortAddrs = []string{"primary", "10.0.0.0/8"} }, wantErr: "cannot be combined"},
		{name: "dual stack", mutate: func(f *Flags) {
			f.Kubeconfig, f.ClusterCIDR, f.ServiceCIDR = "k", "10.42.0.0/16,fd00:42::/48", "fd00:43::/112,10.43.0.0/16"
		}},
		{name: "ipv6 only is refused", mutate: func(f *Flags) { f.Kubeconfig = "k"; f.ClusterCIDR = "fd00:42::/48" }, wantErr: "--cluster-cidr"},
		{name: "dual cluster with single service", mutate: func(f *Flags) { f.Kubeconfig = "k"; f.ClusterCIDR = "10.42.0.0/16,fd00:42::/48" }, wantErr: "both be dual-stack"},
		{name: "two ipv4", mutate: func(f *Flags) { f.Kubeconfig = "k"; f.ServiceCIDR = "10.43.0.0/16,10.44.0.0/16" }, wantErr: "--service-cidr"},
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
				if cfg.Proxy.ClusterCIDR.String() != "10.42.0.0/16" || cfg.Proxy.MinSyncPeriod != time.Second || cfg.NodeName == "" || cfg.HealthzAddress != "0.0.0.0:10256" {
					t.Errorf("config: %+v", cfg)
				}
				if strings.Contains(f.ClusterCIDR, ",") && (cfg.Proxy.ClusterCIDR6.String() != "fd00:42::/48" || cfg.Proxy.ServiceCIDR6.String() != "fd00:43::/112" || cfg.Proxy.ServiceCIDR.String() != "10.43.0.0/16") {
					t.Errorf("dual stack: %+v", cfg.Proxy)
				}
				if got := fmt.Sprint(cfg.Proxy.NodePortPrimary, cfg.Proxy.NodePortCIDRs); len(f.NodePortAddrs) > 0 && got != map[bool]string{true: "true []", false: "false [10.0.0.0/8 192.168.1.0/24]"}[f.NodePortAddrs[0] == "primary"] {
					t.Errorf("nodeport addresses %v: %s", f.NodePortAddrs, got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
