// Command skiff is the single Skiff binary; see `skiff --help`.
package main

import (
	"os"

	containerdcmd "github.com/skiff-sh/skiff/internal/cli/containerd"
	"github.com/skiff-sh/skiff/internal/cli/root"
)

func main() {
	// The node agent's containerd and its runc shims are this binary too
	// (the shim is found by its name, containerd-shim-runc-v2).
	containerdcmd.RunAsChild()
	if err := root.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
