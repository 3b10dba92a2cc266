// Package root is the `skiff` command: it only assembles the subcommands.
package root

import (
	"github.com/spf13/cobra"

	agentcmd "github.com/skiff-sh/skiff/internal/cli/agent"
	containerdcmd "github.com/skiff-sh/skiff/internal/cli/containerd"
	"github.com/skiff-sh/skiff/internal/cli/controllermanager"
	imagecmd "github.com/skiff-sh/skiff/internal/cli/image"
	"github.com/skiff-sh/skiff/internal/cli/kubectl"
	proxycmd "github.com/skiff-sh/skiff/internal/cli/proxy"
	schedulercmd "github.com/skiff-sh/skiff/internal/cli/scheduler"
	"github.com/skiff-sh/skiff/internal/cli/server"
	simulatecmd "github.com/skiff-sh/skiff/internal/cli/simulate"
	"github.com/skiff-sh/skiff/internal/cli/version"
)

// NewCommand builds the root command with every subcommand.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skiff",
		Short: "Skiff: a Kubernetes-compatible orchestrator in one binary",
		Long: `Skiff runs a Kubernetes-compatible cluster from one binary.

  skiff server              run the control plane on this machine: etcd, API
                            server, controller manager and scheduler
  skiff agent               run a node agent (kubelet, containerd) joined to a cluster
  skiff kubectl             run kubectl against it
  skiff controller-manager  run only the controllers, against a kubeconfig
  skiff scheduler           run only the scheduler, against a kubeconfig
  skiff simulate            run simulated nodes (no containers) for scale tests
  skiff proxy               run only the service proxy (nftables), against a kubeconfig
  skiff image               import, list and remove the node agent's images
  skiff containerd          the containerd built into skiff (run by the agent)`,
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.AddCommand(server.NewCommand(), kubectl.NewCommand(), version.NewCommand())
	cmd.AddCommand(controllermanager.NewCommand())
	cmd.AddCommand(simulatecmd.NewCommand())
	cmd.AddCommand(schedulercmd.NewCommand())
	cmd.AddCommand(containerdcmd.NewCommand(), imagecmd.NewCommand())
	cmd.AddCommand(agentcmd.NewCommand())
	cmd.AddCommand(proxycmd.NewCommand())
	return cmd
}
