package proxy

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestTalksOnlyThroughTheAPI guards that the service proxy, cluster DNS and
// the NetworkPolicy enforcer are plain clients: none of them, nor any
// Skiff package they import (tests aside), uses the API server, storage or
// etcd directly.
func TestTalksOnlyThroughTheAPI(t *testing.T) {
	const module = "github.com/skiff-sh/skiff/"
	forbidden := []string{"internal/apiserver", "internal/storage", "internal/etcd"}
	root := filepath.Join("..", "..")
	seen := map[string]bool{}
	var walk func(rel, from string)
	walk = func(rel, from string) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		for _, bad := range forbidden {
			if rel == bad || strings.HasPrefix(rel, bad+"/") {
				t.Errorf("%s imports %s%s: talk to the API through client-go", from, module, rel)
				return
			}
		}
		pkg, err := build.ImportDir(filepath.Join(root, rel), 0)
		if err != nil {
			t.Fatalf("read package %s: %v", rel, err)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, module) {
				walk(strings.TrimPrefix(imp, module), rel)
			}
		}
	}
	for _, start := range []string{"internal/proxy", "internal/proxy/node", "internal/proxy/lb", "internal/dns", "internal/netpol", "internal/cli/proxy"} {
		walk(start, "")
	}
}
