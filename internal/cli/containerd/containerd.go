// Package containerd is `skiff containerd` and the runc v2 shim entry point:
// containerd 2.x and its containerd-shim-runc-v2 compiled into the skiff
// binary, the way k3s ships them. The node agent (internal/agent/containerd)
// runs `skiff containerd --config FILE` as a supervised child, and puts a
// symlink named containerd-shim-runc-v2 to the skiff executable first on that
// child's PATH; cmd/skiff sends such invocations to RunShim.
package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task"
	"github.com/containerd/containerd/v2/cmd/containerd/command"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
	"github.com/spf13/cobra"

	// containerd's plugins: content, snapshotters, metadata, CRI, runtime v2, ...
	_ "github.com/containerd/containerd/v2/cmd/containerd/builtins"
)

// ShimName is the name containerd looks up on PATH for the
// io.containerd.runc.v2 runtime.
const ShimName = "containerd-shim-runc-v2"

// shimEnv marks a process (and what it re-executes) as the shim. The shim's
// "start" action re-executes os.Executable() — the skiff binary itself, not
// the symlink — to become the long-lived shim daemon, so argv[0] alone does
// not identify the daemon; the environment, which the re-exec inherits, does.
const shimEnv = "SKIFF_CONTAINERD_SHIM"

// IsShim reports whether this process was started as the runc v2 shim: by
// the symlink's name, or re-executed by a shim.
func IsShim() bool {
	return filepath.Base(os.Args[0]) == ShimName || os.Getenv(shimEnv) == ShimName
}

// RunShim runs containerd-shim-runc-v2 with os.Args; it does not return.
func RunShim() {
	_ = os.Setenv(shimEnv, ShimName)
	// The binary also holds containerd's own plugins (registered by the
	// builtins import); the shim loads every registered plugin, so it starts
	// from an empty registry and registers only its task service, as the
	// upstream shim binary's plugin package does.
	registry.Reset()
	registry.Register(&plugin.Registration{
		Type:     plugins.TTRPCPlugin,
		ID:       "task",
		Requires: []plugin.Type{plugins.EventPlugin, plugins.InternalPlugin},
		InitFn: func(ic *plugin.InitContext) (any, error) {
			pp, err := ic.GetByID(plugins.EventPlugin, "publisher")
			if err != nil {
				return nil, err
			}
			ss, err := ic.GetByID(plugins.InternalPlugin, "shutdown")
			if err != nil {
				return nil, err
			}
			return task.NewTaskService(ic.Context, pp.(shim.Publisher), ss.(shutdown.Service))
		},
	})
	shim.RunShim(context.Background(), manager.NewShimManager("io.containerd.runc.v2"))
	os.Exit(0)
}

// RunAsChild runs the shim, or containerd for `<exe> containerd ARGS`, and
// exits, when this process was started as one of them; otherwise it
// returns. cmd/skiff calls it first, and so does the TestMain of a test
// binary that stands in for skiff as the agent's containerd.
func RunAsChild() {
	if IsShim() {
		RunShim()
	}
	if len(os.Args) > 1 && os.Args[1] == "containerd" {
		if err := Run(context.Background(), os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// Run runs containerd with its command-line arguments args.
func Run(ctx context.Context, args []string) error {
	if err := command.App().Run(ctx, append([]string{"containerd"}, args...)); err != nil {
		return fmt.Errorf("containerd: %s", strings.TrimSpace(err.Error()))
	}
	return nil
}

// NewCommand builds `skiff containerd`: containerd's own command line,
// passed through untouched.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "containerd [containerd flags]",
		Short: "Run the containerd built into skiff (the node agent starts it; rarely run by hand)",
		Long: `Run containerd 2.x, compiled into skiff. Every argument is containerd's
(for example --config FILE, --address SOCKET, config default). The node agent
runs it for you with a config it writes under <data-dir>/agent/containerd.`,
		DisableFlagParsing: true,
		SilenceUsage:       true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return Run(ctx, args)
		},
	}
}
