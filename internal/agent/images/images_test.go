package images

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func TestBuildLayerAndDeterminism(t *testing.T) {
	files := []File{
		{Path: "/bin/busybox", Mode: 0o755, Data: []byte("#!binary")},
		{Path: "/bin/sh", Link: "busybox"},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/bin/sh\n")},
	}
	var a, b bytes.Buffer
	if err := Write(&a, []string{"example.com/x:1"}, files, Config{Cmd: []string{"sh"}}); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, []string{"example.com/x:1"}, files, Config{Cmd: []string{"sh"}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same files gave two different tarballs")
	}

	img, err := Build(files, Config{Cmd: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entry := h.Name
		if h.Typeflag == tar.TypeSymlink {
			entry += " -> " + h.Linkname
		}
		got = append(got, entry)
	}
	// (mutate.Extract, which flattens the layers, drops the directories' trailing slash.)
	want := []string{"bin", "bin/busybox", "bin/sh -> busybox", "etc", "etc/passwd"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer entries (-want +got):\n%s", diff)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || len(cfg.RootFS.DiffIDs) != 1 || !cmp.Equal(cfg.Config.Cmd, []string{"sh"}) {
		t.Errorf("config = %+v", cfg)
	}
}

// A setuid program (upstream's nonewprivs test image) keeps its setuid bit.
func TestLayerKeepsSpecialModeBits(t *testing.T) {
	img, err := Build([]File{
		{Path: "/usr/local/bin/nnp", Mode: 0o755 | os.ModeSetuid | os.ModeSetgid, Data: []byte("x")},
		{Path: "/tmp", Dir: true, Mode: 0o777 | os.ModeSticky},
		{Path: "/bin/sh", Mode: 0o755, Data: []byte("x")},
	}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h.Mode
	}
	want := map[string]int64{"usr": 0o755, "usr/local": 0o755, "usr/local/bin": 0o755, "usr/local/bin/nnp": 0o6755, "tmp": 0o1777, "bin": 0o755, "bin/sh": 0o755}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
}
