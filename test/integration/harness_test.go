package integration

import (
	"testing"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// cluster is the shared in-process control plane every test drives.
type cluster = localCluster

// startCluster starts a cluster for one test (stopped by t.Cleanup).
func startCluster(t testing.TB) *cluster { return startClusterWith(t, testapiserver.Options{}) }

// startClusterWith starts a cluster with options (for example a short
// compaction interval).
func startClusterWith(t testing.TB, opts testapiserver.Options) *cluster {
	return startLocal(t, opts)
}
