// Package apiserver holds benchmarks of Skiff's API server (issue #2):
// create, get, list and watch throughput and latency through client-go with
// 1, 8 and 32 clients, each measured beside a raw etcd baseline on the same
// etcd member; a list of 10,000 pods in protobuf and JSON; and the latency of
// a watch event fanned out to many watchers.
//
// Everything lives in _test.go files and runs only under -bench:
//
//	go test ./bench/apiserver/ -run '^$' -bench . -count=3
//
// Each benchmark function starts its own etcd member and API server in a
// temporary directory through the shared harness (internal/testing/apiserver),
// which runs etcd without fsync; the etcd baseline uses that same member, so
// both sides skip fsync. bench/README.md records the figures and how to read
// them.
package apiserver
