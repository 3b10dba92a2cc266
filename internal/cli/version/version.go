// Package version is `skiff version`: Skiff's own version and the
// Kubernetes API version it speaks.
package version

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X github.com/skiff-sh/skiff/internal/cli/version.version=v1.2.3".
// The linker is the only writer.
var version = "dev"

// Info describes this build.
type Info struct {
	Version    string
	Kubernetes string // e.g. v1.37.2, from the k8s.io/api module
	Go         string
	Platform   string
}

// Get returns this binary's Info.
func Get() Info {
	info := Info{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Kubernetes: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == "k8s.io/api" {
				info.Kubernetes = KubernetesVersion(dep.Version)
			}
		}
	}
	return info
}

// KubernetesVersion maps a k8s.io/api module version (v0.37.2) to the
// Kubernetes release it belongs to (v1.37.2).
func KubernetesVersion(moduleVersion string) string {
	if rest, ok := strings.CutPrefix(moduleVersion, "v0."); ok {
		return "v1." + rest
	}
	return moduleVersion
}

// Print writes info as the version command shows it.
func Print(w io.Writer, info Info) {
	fmt.Fprintf(w, "Skiff version: %s\nKubernetes API: %s\nGo version: %s\nPlatform: %s\n", info.Version, info.Kubernetes, info.Go, info.Platform)
}

// NewCommand builds `skiff version`.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of Skiff and of the Kubernetes API it serves",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			Print(cmd.OutOrStdout(), Get())
		},
	}
}
