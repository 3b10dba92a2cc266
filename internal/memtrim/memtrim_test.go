package memtrim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExecutableMappings(t *testing.T) {
	maps := `00400000-0225a000 r--p 00000000 fe:00 1234 /usr/bin/skiff
0225a000-05c46000 r-xp 01e5a000 fe:00 1234 /usr/bin/skiff
0b0b8000-0b24c000 rw-p 0acb8000 fe:00 1234 /usr/bin/skiff
0b24c000-0b300000 rw-p 00000000 00:00 0
7f00000000-7f00001000 r--p 00000000 fe:00 99 /usr/lib/libc.so.6
7f00002000-7f00003000 r--p 00000000 fe:00 77 /tmp/dir with space/skiff
`
	path := filepath.Join(t.TempDir(), "maps")
	if err := os.WriteFile(path, []byte(maps), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := executableMappings(path, "/usr/bin/skiff")
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x400000, 0x225a000}, {0x225a000, 0x5c46000}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(mapping{})); diff != "" {
		t.Errorf("mappings (-want +got):\n%s", diff)
	}
	got, _ = executableMappings(path, "/tmp/dir with space/skiff")
	if diff := cmp.Diff([]mapping{{0x7f00002000, 0x7f00003000}}, got, cmp.AllowUnexported(mapping{})); diff != "" {
		t.Errorf("a path with spaces (-want +got):\n%s", diff)
	}
}

// TestReleaseLowersRSS: the test binary's own file-backed RSS falls after
// Release (its pages are its alone: a fresh copy of the executable).
func TestReleaseLowersRSS(t *testing.T) {
	before := rssFile(t)
	advised, err := Release()
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	after := rssFile(t)
	if advised == 0 || after >= before {
		t.Errorf("advised %d bytes; RssFile %d kB before, %d kB after: want it lower", advised, before, after)
	}
}

func rssFile(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
