package version

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKubernetesVersion(t *testing.T) {
	tests := []struct{ in, want string }{
		{"v0.37.2", "v1.37.2"},
		{"v0.38.0-alpha.1", "v1.38.0-alpha.1"},
		{"(devel)", "(devel)"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := KubernetesVersion(tc.in); got != tc.want {
				t.Errorf("KubernetesVersion(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestPrint(t *testing.T) {
	var buf bytes.Buffer
	Print(&buf, Info{Version: "v0.1.0", Kubernetes: "v1.37.2", Go: "go1.26.8", Platform: "linux/amd64"})
	want := "Skiff version: v0.1.0\nKubernetes API: v1.37.2\nGo version: go1.26.8\nPlatform: linux/amd64\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
