// Package images builds the container images tests use, at test time and
// without a registry: one place, one way (internal/agent/images.Write), so
// every test runs the same bytes.
//
// Busybox is Debian's busybox-static (/bin/busybox) in a one-layer image
// with a link for each applet under /bin, tagged with the name upstream's
// e2e tests use, so manifests written for upstream find it.
package images

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	agentimages "github.com/skiff-sh/skiff/internal/agent/images"
)

// BusyboxRef is the busybox image of upstream's e2e tests
// (k8s.io/kubernetes test/utils/image, v1.37).
const BusyboxRef = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"

// BusyboxAliases are further names of the same image.
var BusyboxAliases = []string{"docker.io/library/busybox:1.36", "docker.io/library/busybox:latest"}

// BusyboxPath is where the static busybox comes from (Debian's
// busybox-static package).
const BusyboxPath = "/bin/busybox"

var busybox struct {
	once  sync.Once
	files []agentimages.File
	err   error
}

// BusyboxFiles are the files of the busybox image (LoadBusyboxFiles); a
// test is skipped when Debian's busybox-static is missing.
func BusyboxFiles(t testing.TB) []agentimages.File {
	t.Helper()
	files, err := LoadBusyboxFiles()
	if err != nil {
		t.Skipf("busybox image needs Debian's busybox-static at %s: %v", BusyboxPath, err)
	}
	return files
}

// LoadBusyboxFiles returns the files of the busybox image: the binary, a
// link per applet, /etc/passwd and /etc/group with root and nobody, and
// /tmp. They are read once per process.
func LoadBusyboxFiles() ([]agentimages.File, error) {
	busybox.once.Do(func() { busybox.files, busybox.err = busyboxFiles(BusyboxPath) })
	return busybox.files, busybox.err
}

// busyboxFiles is a busybox root file system from the busybox binary at
// path: the binary, a link per applet it lists, /etc/passwd and group.
func busyboxFiles(path string) ([]agentimages.File, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, err
	}
	files := []agentimages.File{
		{Path: "/bin/busybox", Mode: 0o755, Data: bin},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\n")},
		{Path: "/tmp", Dir: true, Mode: 0o777},
		{Path: "/root", Dir: true, Mode: 0o700},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" {
			continue
		}
		files = append(files, agentimages.File{Path: "/bin/" + applet, Link: "busybox"})
	}
	return files, nil
}

// Busybox writes the busybox image as a docker-archive tarball into a
// temporary directory and returns its path and its main reference
// (BusyboxRef; the tarball also carries BusyboxAliases). The default
// command is sh.
func Busybox(t testing.TB) (tarPath, ref string) {
	t.Helper()
	return Write(t, "busybox.tar", append([]string{BusyboxRef}, BusyboxAliases...), BusyboxFiles(t), agentimages.Config{
		Cmd: []string{"sh"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	})
}

// Write writes a one-layer image of files, tagged refs, as a docker-archive
// tarball named file in a temporary directory, and returns its path and
// refs[0].
func Write(t testing.TB, file string, refs []string, files []agentimages.File, cfg agentimages.Config) (tarPath, ref string) {
	t.Helper()
	var buf bytes.Buffer
	if err := agentimages.Write(&buf, refs, files, cfg); err != nil {
		t.Fatalf("build image %v: %v", refs, err)
	}
	tarPath = filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(tarPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return tarPath, refs[0]
}

// Preload puts the busybox tarball into <dataDir>/agent/images, where the
// node agent imports it at start (so a test cluster has busybox without a
// registry), and returns BusyboxRef.
func Preload(t testing.TB, dataDir string) string {
	t.Helper()
	tarPath, ref := Busybox(t)
	dir := filepath.Join(dataDir, "agent", "images")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox.tar"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return ref
}
