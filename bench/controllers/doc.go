// Package controllers holds benchmarks of Skiff's controller manager
// (issue #5): the time for a Deployment of 1,000 replicas, and for 100
// Deployments of 30 replicas, to become available on 100 simulated nodes,
// and the controller manager's peak memory and CPU while it gets them
// there.
//
// Everything lives in _test.go files and runs only under -bench:
//
//	go test ./bench/controllers/ -run '^$' -bench . -benchtime 1x -count 3
//
// The API server and etcd run in the benchmark process through the shared
// harness (internal/testing/apiserver), with the simulated nodes
// (internal/simulate) and Skiff's scheduler (internal/scheduler/app; with
// -binder, a round-robin binder instead). The controller manager is the real binary, `skiff
// controller-manager` with every controller, in its own process (built by
// the benchmark, or $SKIFF_BIN), so that its peak RSS (VmHWM) and CPU time
// are its own. bench/README.md records the figures.
package controllers
