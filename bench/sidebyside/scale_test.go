package sidebyside_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var (
	scaleSides = flag.String("scalesides", "skiff", "control planes of BenchmarkAtScale, comma-separated (skiff, upstream)")
	scaleNodes = flag.Int("scalenodes", 5000, "simulated nodes of BenchmarkAtScale")
	scalePods  = flag.Int("scalepods", 150000, "pods BenchmarkAtScale creates for the default scheduler")
)

// BenchmarkAtScale is issue #16's large cluster: -scalenodes simulated
// nodes (`skiff simulate`, kubelet-like: Leases every 10 s, pods moved to
// Running once bound) and -scalepods pods of scheduler_perf's shape,
// created by 32 protobuf clients, scheduled by the control plane's own
// scheduler. One side is `skiff server --disable-agent
// --disable-cluster-dns`; the other upstream v1.37.2's etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler. It reports
// the time from the first create to the last pod seen Running by a watch,
// the control plane's peak RSS over the run (VmHWM summed over its
// processes), and its RSS after the pods settle for -idle. The simulator
// and the benchmark's own watch are outside the figures.
func BenchmarkAtScale(b *testing.B) {
	sides := strings.Split(*scaleSides, ",")
	for _, s := range sides {
		if s != "skiff" && s != "upstream" {
			b.Fatalf("-scalesides: unknown side %q", s)
		}
	}
	for range b.N {
		for _, side := range sides {
			r := scaleRun(b, side)
			fmt.Printf("%-8s %d nodes, %d pods: nodes Ready in %v, all Running %v after the first create (creates took %v)\n",
				side, *scaleNodes, *scalePods, r.nodesReady.Round(time.Second), r.running.Round(time.Second), r.created.Round(time.Second))
			fmt.Printf("%-8s ready:   %s\n", side, r.ready)
			fmt.Printf("%-8s settled: %s\n", side, r.settled)
			b.ReportMetric(r.running.Seconds(), side+"_running_s")
			b.ReportMetric(float64(r.settled.hwm)/(1<<20), side+"_peak_rss_MiB")
			b.ReportMetric(float64(r.settled.rss)/(1<<20), side+"_settled_rss_MiB")
			b.ReportMetric(r.settled.cpu.Seconds(), side+"_cpu_s")
		}
	}
}

type scaleResult struct {
	nodesReady, created, running time.Duration
	ready, settled               sample // after the nodes are Ready; after the pods settle
}

func scaleRun(b *testing.B, side string) scaleResult {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "skiff-sidebyside-scale-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	skiff := skiffBinary(b)
	var cp *controlPlane
	switch side {
	case "skiff":
		cp = startSkiff(b, dir, skiff)
	case "upstream":
		cp = startUpstream(b, dir, allFour)
	}
	defer cp.stop()
	procs := slices.Clone(cp.procs)
	defer keepLogs(b, "scale-"+side, &procs)

	var r scaleResult
	t0 := time.Now()
	// Room for every pod: pods are limited by the count of a node (110).
	sim := start(b, "simulate", skiff, "simulate", "--kubeconfig", cp.admin, "--nodes", strconv.Itoa(*scaleNodes),
		"--memory", "64Gi", "--cpu", "32")
	defer sim.stop()
	procs = append(procs, sim)
	sim.waitFor(b, 15*time.Minute, "simulated nodes Ready")
	r.nodesReady = time.Since(t0)
	r.ready = cp.memory(b)

	client := cp.client()
	running := watchPods(b, ctx, client, *scalePods, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	begin := time.Now()
	createPods(b, ctx, client, *scalePods)
	r.created = time.Since(begin)
	deadline := time.Now().Add(2 * time.Hour)
	for last := -1; ; {
		select {
		case t := <-running.last:
			r.running = t.Sub(begin)
		case <-time.After(30 * time.Second):
			n := running.count()
			fmt.Printf("%-8s %v: %d of %d pods Running; %s\n", side, time.Since(begin).Round(time.Second), n, *scalePods, cp.memory(b))
			if n == last || time.Now().After(deadline) {
				b.Fatalf("%s: %d of %d pods Running, no progress in 30 s", side, n, *scalePods)
			}
			last = n
			continue
		}
		break
	}
	time.Sleep(*memIdle)
	r.settled = cp.memory(b)
	saveAPIServerHeap(b, ctx, client, "scale-"+side)
	return r
}
