package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLddPaths(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []string
		wantErr bool
	}{
		{
			name: "libraries and loader",
			out: "\tlinux-vdso.so.1 (0x00007ffd)\n" +
				"\tlibuv.so.1 => /deb/usr/lib/x86_64-linux-gnu/libuv.so.1 (0x00007f10)\n" +
				"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f20)\n" +
				"\t/lib64/ld-linux-x86-64.so.2 (0x00007f30)\n",
			want: []string{"/deb/usr/lib/x86_64-linux-gnu/libuv.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"},
		},
		{
			name:    "a library ldd cannot find",
			out:     "\tlibjemalloc.so.2 => not found\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f20)\n",
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lddPaths([]byte(tt.out))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
		})
	}
}

// A program comes with the libraries ldd finds for it (the unpacked
// packages first, then the host), at the paths ldd reports; a
// static program comes alone.
func TestProgramsBringTheirLibraries(t *testing.T) {
	host, err := exec.LookPath("ls")
	if err != nil {
		t.Skip("no ls")
	}
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("no ldd")
	}
	// The "package" holds ls under another path; its libraries stay the host's.
	root := t.TempDir()
	data, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "opt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "opt", "ls"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := programs(root, []string{"/opt/ls", BusyboxPath})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range files {
		got[f.Path] = true
	}
	if !got["/opt/ls"] || !got[BusyboxPath] {
		t.Fatalf("programs missing from %v", got)
	}
	libc := false
	for p := range got {
		if filepath.Base(p) == "libc.so.6" {
			libc = true
		}
	}
	if !libc || len(got) < 4 {
		t.Errorf("want ls's libraries (libc.so.6 and the loader) besides the two programs, got %v", got)
	}
}
