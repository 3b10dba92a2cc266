package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentimages "github.com/skiff-sh/skiff/internal/agent/images"
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

// The conformance images carry what the suite's commands rely on: agnhost
// as entrypoint with netcat-openbsd reached by `sh -c "nc ..."`, the setuid
// nnp, nginx's workers as a user the image has, nonroot's user.
func TestConformanceImages(t *testing.T) {
	ls, err := exec.LookPath("ls")
	if err != nil {
		t.Skip("no ls")
	}
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("no ldd")
	}
	if _, err := LoadBusyboxFiles(); err != nil {
		t.Skipf("no busybox-static: %v", err)
	}
	data, err := os.ReadFile(ls)
	if err != nil {
		t.Fatal(err)
	}
	// Stand-ins: every program the images take from Debian is ls.
	deb := t.TempDir()
	for _, p := range []string{"/usr/bin/dig", "/usr/bin/nslookup", "/usr/bin/host", "/bin/nc.openbsd", "/usr/bin/curl",
		"/usr/sbin/ip", "/usr/bin/socat", "/bin/bash", "/usr/sbin/nginx", "/usr/bin/getent"} {
		if err := os.MkdirAll(filepath.Join(deb, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(deb, p), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kube := t.TempDir()
	for _, f := range []string{"agnhost/porter/localhost.crt", "agnhost/porter/localhost.key", "kitten/html/data.json", "nautilus/html/data.json"} {
		if err := os.MkdirAll(filepath.Join(kube, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(kube, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	specs, err := ConformanceImages(ConformanceSources{Agnhost: ls, Nnp: ls, KubeImages: kube, DebRoot: deb})
	if err != nil {
		t.Fatal(err)
	}
	byRef := map[string]ImageSpec{}
	for _, s := range specs {
		for _, r := range s.Refs {
			byRef[r] = s
		}
	}
	file := func(ref, path string) agentimages.File {
		t.Helper()
		for _, f := range byRef[ref].Files {
			if f.Path == path {
				return f
			}
		}
		t.Fatalf("%s has no %s", ref, path)
		return agentimages.File{}
	}
	for _, ref := range []string{BusyboxRef, AgnhostRef, AgnhostPrevRef, NginxRef, NginxNewRef, NonRootRef, NonewprivsRef, KittenRef, NautilusRef, GlibcDNSRef} {
		if _, ok := byRef[ref]; !ok {
			t.Errorf("no image %s", ref)
		}
	}
	if got := file(AgnhostRef, "/bin/sh").Link; got != "bash" {
		t.Errorf("agnhost /bin/sh -> %q, want bash (busybox's sh prefers its own nc)", got)
	}
	if got := file(BusyboxRef, "/bin/sh").Link; got != "bash" {
		t.Errorf("busybox /bin/sh -> %q, want bash (Debian's ash drops env names like data-1)", got)
	}

	// With an upstream busybox build, it is every image's busybox and the
	// busybox image's sh (here a copy of the host's stands in).
	own := filepath.Join(t.TempDir(), "busybox")
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	bb = append(bb, "upstream build"...) // a different binary, still runnable
	if err := os.WriteFile(own, bb, 0o755); err != nil {
		t.Fatal(err)
	}
	specs, err = ConformanceImages(ConformanceSources{Busybox: own, Agnhost: ls, Nnp: ls, KubeImages: kube, DebRoot: deb})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		for _, r := range s.Refs {
			byRef[r] = s
		}
	}
	if got := file(BusyboxRef, "/bin/sh").Link; got != "busybox" {
		t.Errorf("busybox /bin/sh -> %q with an upstream busybox, want busybox", got)
	}
	for _, ref := range []string{BusyboxRef, NginxRef, KittenRef} {
		if got := file(ref, "/bin/busybox").Data; string(got) != string(bb) {
			t.Errorf("%s /bin/busybox is not the given build", ref)
		}
	}
	if file(AgnhostRef, "/usr/bin/getent").Data == nil {
		t.Error("agnhost has no getent (the DNS tests' hosts probe runs it)")
	}
	if got := file(AgnhostRef, "/usr/bin/nc").Link; got != "/bin/nc.openbsd" {
		t.Errorf("agnhost /usr/bin/nc -> %q, want netcat-openbsd", got)
	}
	if diff := cmp.Diff([]string{"/agnhost"}, byRef[AgnhostRef].Config.Entrypoint); diff != "" {
		t.Errorf("agnhost entrypoint (-want +got):\n%s", diff)
	}
	if m := file(NonewprivsRef, "/usr/local/bin/nnp").Mode; m&os.ModeSetuid == 0 {
		t.Errorf("nnp mode %v, want setuid", m)
	}
	if !strings.Contains(string(file(NginxRef, "/etc/nginx/nginx.conf").Data), "user nobody nobody;") {
		t.Error("nginx.conf does not run workers as nobody:nobody")
	}
	if got := byRef[NonRootRef].Config.User; got != "1234" {
		t.Errorf("nonroot user %q, want 1234", got)
	}
	if got := string(file(GlibcDNSRef, "/etc/nsswitch.conf").Data); got != "hosts: files dns\n" {
		t.Errorf("glibc-dns-testing nsswitch.conf %q", got)
	}
	if got := string(file(KittenRef, "/data.json").Data); got != "kitten/html/data.json" {
		t.Errorf("kitten /data.json = %q", got)
	}
	if got := string(file(KittenRef, "/etc/os-release").Data); !strings.Contains(got, "Alpine Linux") {
		t.Errorf("kitten /etc/os-release = %q; upstream's ImageVolume test reads Alpine Linux there", got)
	}
}
