package server

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"
)

// reconcilePolicy writes the bootstrap RBAC policy (upstream's default
// roles and bindings and Skiff's agent bindings) once the API server is
// up, keeping what users changed; see bootstrappolicy.Reconcile.
func reconcilePolicy(ctx context.Context, client kubernetes.Interface, timeout time.Duration) error {
	p, err := bootstrappolicy.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := bootstrappolicy.Reconcile(ctx, client, p); err != nil {
		return fmt.Errorf("bootstrap RBAC policy: %w", err)
	}
	return nil
}
