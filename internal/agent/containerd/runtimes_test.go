package containerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCrunCgroups: crun is left out on a hybrid cgroup host whose unified
// hierarchy has controllers (crun refuses every container there), and
// offered where the unified hierarchy has none or there is none.
func TestCrunCgroups(t *testing.T) {
	root := t.TempDir()
	if err := crunCgroups(root); err != nil {
		t.Errorf("cgroup v1 only: %v, want usable", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "unified"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "unified", "cgroup.controllers"), []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := crunCgroups(root); err != nil {
		t.Errorf("hybrid without controllers on the unified hierarchy: %v, want usable", err)
	}
	if err := os.WriteFile(filepath.Join(root, "unified", "cgroup.controllers"), []byte("hugetlb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := crunCgroups(root); err == nil || !strings.Contains(err.Error(), "(hugetlb)") {
		t.Errorf("hybrid with hugetlb on the unified hierarchy: %v, want an error naming it", err)
	}
}
