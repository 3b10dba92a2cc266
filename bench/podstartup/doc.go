// Package podstartup measures pod startup latency on a real `skiff server`
// with its node agent (containerd, runc, CNI): the time from a pod's
// create request to the moment a watch sees it Running and Ready, with its
// image already present (upstream's pod-startup SLI excludes image pulls),
// for 1, 10 and 30 pods created at once; and the memory of the server
// process (which runs the agent) and of its containerd.
// BenchmarkUpstreamKubelet runs the same workload, in the same run, on
// upstream's kubelet v1.37 (on Skiff's containerd, registered with `skiff
// server --disable-agent`), for the ratio skiff ÷ upstream. Only under
// -bench.
package podstartup
