// Package scheduler holds benchmarks of Skiff's scheduler in the shapes of
// upstream's scheduler_perf workloads (SchedulingBasic, pod anti-affinity,
// topology spreading, preferred node affinity, preemption), measured through
// the real API server with simulated nodes:
//
//	go test ./bench/scheduler/ -run '^$' -bench . -benchtime=1x -timeout 60m
//
// Each workload starts its own API server and embedded etcd through the
// shared harness (internal/testing/apiserver), registers its nodes with
// internal/simulate, runs the scheduler (internal/scheduler, default
// profile) in the same process, creates the initial pods and waits until
// they are bound, then creates the measured pods and times them until the
// last one is bound. It reports pods/s, the latency of scheduling attempts
// (average, p50, p90, p99), the latency from creation to binding, and the
// scheduler's heap. bench/README.md records the figures and how to read
// them.
package scheduler
