package cni

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGenerate(t *testing.T) {
	b, err := Generate(Config{PodCIDRs: []string{"10.42.3.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "skiff",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isDefaultGateway": true, "ipMasq": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": []any{[]any{map[string]any{"subnet": "10.42.3.0/24", "gateway": "10.42.3.1"}}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}, "snat": true},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conflist (-want +got):\n%s", diff)
	}
}

func TestGenerateForAgent(t *testing.T) {
	b, err := Generate(Config{PodCIDRs: []string{"10.42.1.0/24"}, NoMasquerade: true, IPAMDataDir: "/var/lib/skiff-b/agent/cni/networks"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Plugins []struct {
			IPMasq *bool `json:"ipMasq"`
			IPAM   *struct {
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if br := got.Plugins[0]; br.IPMasq == nil || *br.IPMasq || br.IPAM == nil || br.IPAM.DataDir != "/var/lib/skiff-b/agent/cni/networks" {
		t.Errorf("bridge plugin: ipMasq=%v ipam=%+v, want ipMasq false and the agent's dataDir", br.IPMasq, br.IPAM)
	}
}

func TestGenerateRejects(t *testing.T) {
	for _, c := range []Config{{}, {PodCIDRs: []string{"10.42.0.0"}}} {
		if _, err := Generate(c); err == nil {
			t.Errorf("Generate(%+v) succeeded", c)
		}
	}
}

func TestWriteOnlyOnChange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d")
	c := Config{PodCIDRs: []string{"10.42.0.0/24"}}
	for i, want := range []bool{true, false} {
		changed, err := Write(dir, c)
		if err != nil || changed != want {
			t.Fatalf("write %d: changed=%v err=%v, want changed=%v", i, changed, err, want)
		}
	}
	c.PodCIDRs = []string{"10.42.1.0/24"}
	if changed, _ := Write(dir, c); !changed {
		t.Fatal("a new CIDR did not change the file")
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	if !json.Valid(b) {
		t.Fatal("written file is not JSON")
	}
}
