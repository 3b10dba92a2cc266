package shim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// embed sets what the binary carries for one test.
func embed(t *testing.T, bin, sum string) {
	old, oldSum := binary, digest
	binary, digest = bin, sum
	t.Cleanup(func() { binary, digest = old, oldSum })
}

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	embed(t, "#!/bin/sh\necho one\n", "0123456789abcdef0123\n")
	p1, err := Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "0123456789abcdef", Name); p1 != want {
		t.Errorf("path %s, want %s", p1, want)
	}
	fi, err := os.Stat(p1)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(p1); string(b) != binary {
		t.Errorf("content %q, want %q", b, binary)
	}

	// Installing the same build again keeps the file (a running shim may
	// execute it).
	again, err := Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(again)
	if again != p1 || !os.SameFile(fi, fi2) {
		t.Errorf("second install replaced the file: %s", again)
	}

	// A new build gets its own directory; the old version is removed.
	embed(t, "#!/bin/sh\necho two\n", "fedcba9876543210fedc")
	p2, err := Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"fedcba9876543210"}, names); diff != "" {
		t.Errorf("versions kept (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(p2); string(b) != binary {
		t.Errorf("content %q, want %q", b, binary)
	}
}

func TestInstallWithoutShim(t *testing.T) {
	embed(t, "", "")
	if Embedded() {
		t.Fatal("Embedded() with no shim")
	}
	if _, err := Install(t.TempDir()); err == nil {
		t.Fatal("Install without an embedded shim succeeded")
	}
}
