// Package root is the `skiff` command: it only assembles the subcommands.
package root

import (
	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/internal/cli/controllermanager"
	"github.com/skiff-sh/skiff/internal/cli/kubectl"
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

  skiff server     run the control plane (etcd + API server) on this machine
  skiff kubectl    run kubectl against it`,
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.AddCommand(server.NewCommand(), kubectl.NewCommand(), version.NewCommand())
	cmd.AddCommand(controllermanager.NewCommand())
	cmd.AddCommand(simulatecmd.NewCommand())
	cmd.AddCommand(schedulercmd.NewCommand())
	return cmd
}
