package apiserver

import (
	"fmt"
	"strings"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/node"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/rbac"
)

// Authorization modes (--authorization-mode), as upstream names them.
const (
	ModeAlwaysAllow = "AlwaysAllow"
	ModeNode        = "Node"
	ModeRBAC        = "RBAC"
)

// DefaultAuthorizationModes is upstream's recommended (and Skiff's
// server) setting.
var DefaultAuthorizationModes = []string{ModeNode, ModeRBAC}

// ValidateAuthorizationModes checks a mode list: known modes, each once,
// at least one.
func ValidateAuthorizationModes(modes []string) error {
	if len(modes) == 0 {
		return fmt.Errorf("at least one authorization mode must be given")
	}
	seen := map[string]bool{}
	for _, m := range modes {
		switch m {
		case ModeAlwaysAllow, ModeNode, ModeRBAC:
		default:
			return fmt.Errorf("unknown authorization mode %q (want %s, %s or %s)", m, ModeAlwaysAllow, ModeNode, ModeRBAC)
		}
		if seen[m] {
			return fmt.Errorf("authorization mode %q given twice", m)
		}
		seen[m] = true
	}
	return nil
}

// newAuthorizer builds the authorizer of cfg: cfg.Authorizer when set,
// else the union of cfg.AuthorizationModes (default AlwaysAllow) behind
// the system:masters superuser check, reading policy from r.
func newAuthorizer(cfg Config, r reader) (authz.Authorizer, error) {
	if cfg.Authorizer != nil {
		return cfg.Authorizer, nil
	}
	modes := cfg.AuthorizationModes
	if len(modes) == 0 {
		modes = []string{ModeAlwaysAllow}
	}
	if err := ValidateAuthorizationModes(modes); err != nil {
		return nil, err
	}
	auths := []authz.Authorizer{authz.Superuser(authn.SystemMasters)}
	for _, m := range modes {
		switch m {
		case ModeAlwaysAllow:
			auths = append(auths, authz.AlwaysAllowAuthenticated)
		case ModeNode:
			auths = append(auths, node.New(r, bootstrappolicy.NodeRules()))
		case ModeRBAC:
			auths = append(auths, rbac.New(rbac.ReaderSource(r)))
		}
	}
	return authz.Union(auths...), nil
}

// ParseAuthorizationModes splits a comma-separated --authorization-mode.
func ParseAuthorizationModes(s string) ([]string, error) {
	var modes []string
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			modes = append(modes, m)
		}
	}
	return modes, ValidateAuthorizationModes(modes)
}
