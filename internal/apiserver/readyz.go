package apiserver

import (
	"context"

	"github.com/skiff-sh/skiff/internal/apiserver/health"
)

// AddReadyzCheck adds a /readyz check for a component that runs in this
// process but starts after the server (cluster DNS in `skiff server`,
// "cluster-dns"); /readyz/<name> serves it alone.
func (s *Server) AddReadyzCheck(name string, check func(context.Context) error) {
	s.health.AddReadyz(health.Check{Name: name, Fn: check})
}
