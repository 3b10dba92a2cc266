// Package server is the kubelet's HTTPS API on port 10250, the endpoints
// the API server proxies to and that tools scrape:
//
//	/healthz                                   "ok"
//	/pods                                      the pods bound to this node (a v1 PodList)
//	/containerLogs/{ns}/{pod}/{container}      CRI log files, with upstream's query options
//	/exec/{ns}/{pod}/{container}               streaming, through the runtime's streaming server
//	/attach/{ns}/{pod}/{container}             streaming, through the runtime's streaming server
//	/portForward/{ns}/{pod}                    streaming, through the runtime's streaming server
//	/metrics                                   kubelet_* metrics (upstream names)
//	/metrics/cadvisor                          container_* CPU and memory from CRI stats
//	/metrics/resource                          node/pod/container CPU and working set (metrics-server)
//	/stats/summary                             the Summary API (stats/v1alpha1 JSON shape)
//
// Every request must present a client certificate signed by the cluster CA;
// anonymous requests get 401 and users other than the API server's kubelet
// client (and system:masters) get 403.
//
// Streaming requests are proxied, not redirected: the server asks CRI for a
// streaming URL (Exec, Attach, PortForward) and proxies the upgraded
// connection to it. SPDY and the websocket protocols the runtime speaks are
// passed through unchanged; websocket v5.channel.k8s.io (kubectl's first
// choice for exec and attach) is translated to SPDY, and SPDY tunnelled over
// a websocket (kubectl's port-forward) is unwrapped, because containerd's
// streaming server speaks neither.
//
// The package also holds the container log rotation loop (LogRotator) and
// the instrumented CRI runtime that counts kubelet_runtime_operations_*.
package server
