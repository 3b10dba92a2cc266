package nft

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Runner applies nft scripts and lists the proxy's table. NFT is the
// real one; tests may run it inside a network namespace.
type Runner interface {
	Apply(ctx context.Context, script string) error
	List(ctx context.Context, family, table string) (*Existing, error)
}

// NFT runs the nft binary. Prefix, if set, comes before it on the command
// line (e.g. "ip netns exec NAME" in tests).
type NFT struct {
	Prefix []string
	// Binary defaults to "nft".
	Binary string
}

var _ Runner = NFT{}

func (n NFT) cmd(ctx context.Context, args ...string) *exec.Cmd {
	bin := n.Binary
	if bin == "" {
		bin = "nft"
	}
	argv := append(append(append([]string(nil), n.Prefix...), bin), args...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// Apply runs the script as one transaction (`nft -f -`): it all applies
// or nothing does.
func (n NFT) Apply(ctx context.Context, script string) error {
	cmd := n.cmd(ctx, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft -f: %w: %s", err, firstLines(stderr.String(), 6))
	}
	return nil
}

// List names the chains, sets and maps of a table; a missing table is
// empty, not an error.
func (n NFT) List(ctx context.Context, family, table string) (*Existing, error) {
	cmd := n.cmd(ctx, "-t", "list", "table", family, table)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "No such file or directory") {
			return &Existing{Chains: map[string]bool{}, Sets: map[string]bool{}}, nil
		}
		return nil, fmt.Errorf("nft list table %s %s: %w: %s", family, table, err, firstLines(stderr.String(), 3))
	}
	return ParseExisting(stdout.String()), nil
}

// ParseExisting reads the object names out of `nft -t list table` output.
func ParseExisting(listing string) *Existing {
	ex := &Existing{Chains: map[string]bool{}, Sets: map[string]bool{}}
	for _, line := range strings.Split(listing, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-1] != "{" {
			continue
		}
		switch f[0] {
		case "chain":
			ex.Chains[f[1]] = true
		case "set":
			ex.Sets[f[1]] = false
		case "map":
			ex.Sets[f[1]] = true
		}
	}
	return ex
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}
