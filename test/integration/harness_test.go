package integration

import (
	"testing"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// cluster is the shared in-process control plane (internal/testing/apiserver)
// the tests drive.
type cluster = testapiserver.Cluster

// startCluster starts a cluster for one test (stopped by t.Cleanup).
func startCluster(t testing.TB) *cluster { return testapiserver.Start(t) }
