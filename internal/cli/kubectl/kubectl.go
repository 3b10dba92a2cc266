// Package kubectl is `skiff kubectl`: the upstream kubectl (k8s.io/kubectl)
// embedded in the binary, pointed at the local admin kubeconfig unless the
// user names another one.
package kubectl

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/plugin"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/server"
)

// DataDirEnv names the environment variable that overrides the data
// directory whose admin kubeconfig is the default.
const DataDirEnv = "SKIFF_DATA_DIR"

// NewCommand builds `skiff kubectl`. Flags are not parsed by Skiff: every
// argument after "kubectl" goes to kubectl unchanged.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl [flags] [command]",
		Short: "Run the embedded kubectl against this cluster",
		Long: `Run kubectl, built into Skiff.

Without --kubeconfig and without a KUBECONFIG environment variable it uses
<data-dir>/admin.kubeconfig, where <data-dir> is $` + DataDirEnv + ` or ` + server.DefaultDataDir + `.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			streams := genericiooptions.IOStreams{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), ErrOut: cmd.ErrOrStderr()}
			if path := DefaultKubeconfig(args, os.Getenv); path != "" {
				// Through the environment rather than the --kubeconfig
				// default, because `kubectl config ...` has its own flag.
				if err := os.Setenv("KUBECONFIG", path); err != nil {
					return err
				}
			}
			kc := New(args, streams)
			if err := cli.RunNoErrOutput(kc); err != nil {
				// kubectl prints and exits the way its users expect
				// (exit status 1, "error: ..." on stderr).
				cmdutil.CheckErr(err)
			}
			return nil
		},
	}
}

// New builds the kubectl command for args (without the leading "kubectl").
func New(args []string, streams genericiooptions.IOStreams) *cobra.Command {
	configFlags := genericclioptions.NewConfigFlags(true).
		WithDeprecatedPasswordFlag().
		WithDiscoveryBurst(300).
		WithDiscoveryQPS(50.0).
		WithWarningPrinter(streams)
	cmd := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
		PluginHandler: kubectlcmd.NewDefaultPluginHandler(plugin.ValidPluginFilenamePrefixes),
		Arguments:     append([]string{"kubectl"}, args...),
		ConfigFlags:   configFlags,
		IOStreams:     streams,
	})
	cmd.SetArgs(args)
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	return cmd
}

// DefaultKubeconfig returns the kubeconfig path to use when the user gave
// neither --kubeconfig nor KUBECONFIG, and "" when they did.
func DefaultKubeconfig(args []string, getenv func(string) string) string {
	if getenv("KUBECONFIG") != "" || hasKubeconfigFlag(args) {
		return ""
	}
	dataDir := getenv(DataDirEnv)
	if dataDir == "" {
		dataDir = server.DefaultDataDir
	}
	return filepath.Join(dataDir, pki.AdminKubeconfigFile)
}

func hasKubeconfigFlag(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--kubeconfig" || strings.HasPrefix(a, "--kubeconfig=") {
			return true
		}
	}
	return false
}
