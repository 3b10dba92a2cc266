package simulate

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestTalksOnlyThroughTheAPI guards that simulated nodes are plain clients:
// neither the package nor any Skiff package it imports (tests aside) uses
// the API server, the storage or etcd directly.
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
				t.Errorf("%s imports %s%s: simulated nodes must use the API through client-go", from, module, rel)
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
	walk("internal/simulate", "")
	if !seen["internal/simulate"] {
		t.Fatal("the walk did not start")
	}
}
