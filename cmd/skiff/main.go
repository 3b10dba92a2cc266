// Command skiff is the single Skiff binary; see `skiff --help`.
package main

import (
	"os"

	"github.com/skiff-sh/skiff/internal/cli/root"
)

func main() {
	if err := root.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
