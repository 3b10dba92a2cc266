package containerd

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// Runtime is an OCI runtime offered beside runc (the default): containerd
// gets a CRI runtime handler Name that runs the runc v2 shim with Path as
// its binary, and the cluster a RuntimeClass Name with handler Name
// (internal/server), so pods choose it with `runtimeClassName: Name`.
type Runtime struct {
	Name string
	Path string
}

// runtimeCandidates are the runtimes looked for on PATH, as k3s looks for
// crun and others: runc-compatible command lines, so the runc shim drives
// them. usable tells whether one can run containers on this host.
var runtimeCandidates = []struct {
	name   string
	usable func() error
}{
	{"crun", crunUsable},
}

// DetectRuntimes returns the extra runtimes found on PATH that can run
// containers here (Debian's crun package installs /usr/bin/crun;
// scripts/setup.sh installs it), and why each other one found is left out.
func DetectRuntimes() (found []Runtime, skipped map[string]error) {
	for _, c := range runtimeCandidates {
		path, err := exec.LookPath(c.name)
		if err != nil {
			continue
		}
		if err := c.usable(); err != nil {
			if skipped == nil {
				skipped = map[string]error{}
			}
			skipped[c.name] = err
			continue
		}
		found = append(found, Runtime{Name: c.name, Path: path})
	}
	return found, skipped
}

// crunUsable: crun (1.8 in Debian 12) refuses every container on a hybrid
// cgroup host (v1 controllers, /sys/fs/cgroup/unified as cgroup v2) whose
// unified hierarchy still has a controller ("cgroups in hybrid mode not
// supported, drop all controllers from cgroupv2"), as this project's build
// VMs have hugetlb there; runc copes.
func crunUsable() error { return crunCgroups("/sys/fs/cgroup") }

func crunCgroups(root string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return nil // let crun say what is wrong
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return nil // cgroup v2 only
	}
	b, err := os.ReadFile(root + "/unified/cgroup.controllers")
	if err != nil {
		return nil // cgroup v1 only
	}
	if ctrls := strings.TrimSpace(string(b)); ctrls != "" {
		return fmt.Errorf("crun does not run containers on hybrid cgroups with controllers on the unified hierarchy (%s)", ctrls)
	}
	return nil
}
