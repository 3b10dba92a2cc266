// Package services holds benchmarks of Services (issue #10): the time for
// the service proxy to program 1,000 Services with 10 endpoints each into
// nftables, the time from an EndpointSlice change to the rule being in the
// kernel, and cluster DNS queries per second and latency.
//
// Everything lives in _test.go files and runs only under -bench, as root
// (the proxy benchmarks program nftables inside a network namespace they
// create):
//
//	go test ./bench/services/ -run '^$' -bench . -benchtime 1x
//
// bench/README.md records the figures.
package services
