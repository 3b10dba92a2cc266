// Package sidebyside measures Skiff's components beside their upstream
// counterparts, each in its own process, on the same API server and
// workload (issue #16). Run only on request:
//
//	go test ./bench/sidebyside/ -run '^$' -bench Scheduler -benchtime=1x -timeout 60m [-args -apiserver upstream]
//	go test ./bench/sidebyside/ -run '^$' -bench ServerMemory -benchtime=1x -timeout 60m
//
// BenchmarkScheduler starts, for each scheduler of each round, a fresh
// `skiff server --disable-scheduler --disable-controller-manager
// --disable-agent` (the same API server for both sides), 500 simulated
// nodes (`skiff simulate`, quiet: pods never start, no heartbeats), creates
// 5,000 pending pods in the shape of scheduler_perf's pod-default, and only
// then starts the scheduler as its own process: `skiff scheduler` or
// upstream kube-scheduler v1.37.2 (built by hack/upstream/build.sh
// kube-scheduler; the benchmark skips unless it is in $SKIFF_UPSTREAM_BIN
// or the build script's cache). Both read the same
// KubeSchedulerConfiguration (client QPS 5000, burst 10000, no leader
// election) and the same kubeconfig (the kube-scheduler identity).
//
// It reports, per run, scheduler_perf's throughput (pods ÷ time from the
// first binding to the last, as a watch in the benchmark sees them), the
// scheduler process's CPU per pod (utime+stime from /proc over that window,
// and from its start), its peak RSS (VmHWM), and after each round pair the
// ratios skiff ÷ upstream of the medians. Rounds alternate the order (the
// first round runs skiff first). The heap profile of each scheduler after
// its run (/debug/pprof/heap, after a GC) is written to -profiles when set.
//
// With -apiserver upstream, the API server of both schedulers is upstream
// v1.37.2's etcd and kube-apiserver instead, started by the benchmark.
//
// BenchmarkServerMemory compares `skiff server` (API server, etcd,
// controller manager and scheduler in one process) with upstream's etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler: the sum of
// their RSS idle and after 5,000 ConfigMaps and 10,000 pending pods.
//
// $SKIFF_BIN names the skiff binary; otherwise one is built from this tree.
package sidebyside
