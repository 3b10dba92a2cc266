// Package shim carries a small build of containerd's runc v2 shim
// (github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2) inside
// the skiff binary and installs it for the agent's containerd.
//
// Every pod runs one shim process for its life, and containerd starts each
// through two executions of the shim binary. The skiff binary can be the
// shim (internal/cli/containerd), but it links the whole control plane:
// each execution runs every package's init (about 50 ms of CPU and 14 MB of
// allocations) and each shim keeps about 14 MB of anonymous memory. The
// upstream shim on its own starts in a few milliseconds and keeps about
// 4 MB. As k3s ships its shim as a separate executable, `make build` builds
// the upstream shim (build.sh) and embeds it with the skiffshim build tag;
// a binary built without the tag (plain `go build ./...`, `go test`) carries
// none, and the agent falls back to linking the skiff binary as the shim.
package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Name is the executable name containerd looks for on PATH for the
// io.containerd.runc.v2 runtime.
const Name = "containerd-shim-runc-v2"

// Embedded reports whether this binary carries the shim.
func Embedded() bool { return len(binary) > 0 && len(strings.TrimSpace(digest)) >= 16 }

// Install writes the embedded shim to dir/<digest>/containerd-shim-runc-v2
// unless it is there already, removes other versions from dir (shims that
// run from them keep their open executable), and returns the path. It
// fails when the binary carries no shim.
func Install(dir string) (string, error) {
	if !Embedded() {
		return "", fmt.Errorf("this skiff binary carries no runc shim (built without -tags skiffshim)")
	}
	version := strings.TrimSpace(digest)[:16]
	path := filepath.Join(dir, version, Name)
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(len(binary)) {
		// The embedded bytes are read only here, on the first start of a
		// new build, so they are not kept in the process's memory.
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		tmp, err := os.CreateTemp(filepath.Dir(path), "."+Name+"-*")
		if err != nil {
			return "", err
		}
		_, werr := tmp.WriteString(binary)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), 0o755)
		}
		if werr == nil {
			// A rename: a shim executing an older file keeps it.
			werr = os.Rename(tmp.Name(), path)
		}
		if werr != nil {
			_ = os.Remove(tmp.Name())
			return "", fmt.Errorf("install the runc shim: %w", werr)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != version {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return path, nil
}
