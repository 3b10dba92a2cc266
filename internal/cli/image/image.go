// Package image is `skiff image`: import, list and remove the images of a
// node agent's containerd (the namespace CRI serves), with no registry.
package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	containerdclient "github.com/containerd/containerd/v2/client"
	"github.com/spf13/cobra"

	agentcontainerd "github.com/skiff-sh/skiff/internal/agent/containerd"
	"github.com/skiff-sh/skiff/internal/agent/images"
)

// DataDirEnv overrides the default data directory, as for `skiff kubectl`.
const DataDirEnv = "SKIFF_DATA_DIR"

// Flags are the flags every `skiff image` command shares.
type Flags struct {
	DataDir string
	Address string
}

// Config is the validated configuration.
type Config struct {
	Address     string
	Snapshotter string
}

// Validate turns flags into a config.
func (f Flags) Validate() (Config, error) {
	if f.DataDir == "" {
		return Config{}, errors.New("--data-dir must not be empty")
	}
	dataDir, err := filepath.Abs(f.DataDir)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Address: f.Address, Snapshotter: agentcontainerd.ConfiguredSnapshotter(dataDir)}
	if cfg.Address == "" {
		cfg.Address = agentcontainerd.SocketPath(dataDir)
	}
	return cfg, nil
}

func defaultDataDir() string {
	if d := os.Getenv(DataDirEnv); d != "" {
		return d
	}
	return "/var/lib/skiff"
}

// NewCommand builds `skiff image` and its subcommands.
func NewCommand() *cobra.Command {
	flags := Flags{DataDir: defaultDataDir()}
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Import, list and remove the images of this node's agent (no registry needed)",
		Long: `Manage the images of the node agent's containerd, the ones the kubelet sees
through CRI. Tarballs (docker save or OCI archives) in <data-dir>/agent/images/
are imported at every agent start; 'skiff image import' does it at any time.`,
	}
	cmd.PersistentFlags().StringVar(&flags.DataDir, "data-dir", flags.DataDir, "the agent's data directory (env "+DataDirEnv+")")
	cmd.PersistentFlags().StringVar(&flags.Address, "address", "", "containerd socket (default <data-dir>/agent/containerd/containerd.sock)")

	withClient := func(run func(ctx context.Context, c *containerdclient.Client, cfg Config, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			cfg, err := flags.Validate()
			if err != nil {
				return err
			}
			if _, err := os.Stat(cfg.Address); err != nil {
				return fmt.Errorf("no containerd at %s (is the agent running? --data-dir, --address): %w", cfg.Address, err)
			}
			c, err := containerdclient.New(cfg.Address, containerdclient.WithTimeout(5*time.Second))
			if err != nil {
				return fmt.Errorf("connect to containerd at %s: %w", cfg.Address, err)
			}
			defer c.Close()
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return run(ctx, c, cfg, args)
		}
	}

	cmd.AddCommand(&cobra.Command{
		Use:   "import FILE...",
		Short: "Import image tarballs (docker-archive or OCI)",
		Args:  cobra.MinimumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *containerdclient.Client, cfg Config, args []string) error {
			for _, file := range args {
				names, err := images.ImportFile(ctx, c, file, images.ImportOptions{Snapshotter: cfg.Snapshotter})
				for _, n := range names {
					fmt.Fprintf(cmd.OutOrStdout(), "imported %s\n", n)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}),
	})
	cmd.AddCommand(&cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the images",
		Args:    cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *containerdclient.Client, _ Config, _ []string) error {
			imgs, err := images.List(ctx, c)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "IMAGE\tDIGEST\tSIZE\tPINNED")
			for _, img := range imgs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%v\n", img.Name, img.Digest, humanSize(img.Size), img.Pinned)
			}
			return w.Flush()
		}),
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "rm REF...",
		Short: "Remove images by name",
		Args:  cobra.MinimumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *containerdclient.Client, _ Config, args []string) error {
			for _, ref := range args {
				if err := images.Remove(ctx, c, ref); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", ref)
			}
			return nil
		}),
	})
	return cmd
}

func humanSize(n int64) string {
	switch {
	case n < 0:
		return "?"
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
}
