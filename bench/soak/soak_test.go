// Package soak is the soak benchmark of issue #15: `skiff server` (API
// server, etcd, controllers and scheduler in one process) under an hour of
// mixed churn, sampled for growth.
//
//	go test ./bench/soak/ -run '^$' -bench Soak -benchtime=1x -timeout 2h -v
//	# DURATION (1h), SAMPLE (30s), NODES (40), SOAK_CSV (a file for the samples),
//	# SOAK_HEAP (a directory for heap profiles half-way and at the end)
//	# SKIFF_BIN reuses a built binary
//
// The churn: simulated nodes (internal/simulate, in this process) of which
// one at a time stops renewing its Lease for 30-90 s (NotReady, then Ready
// again); six Deployments rescaled between 0 and 20 replicas every 15 s and
// one of them rolled out to a new template every minute; three random pods
// deleted every 5 s; a Job of three 5 s pods (ttlSecondsAfterFinished 30)
// every 30 s; 30 watchers that each watch pods, ConfigMaps or events for
// 5-60 s, stop and start again. Every SAMPLE the server process's resident
// memory, open file descriptors (/proc), goroutines and Go heap
// (/metrics) and the number of open watches (apiserver_longrunning_requests)
// are recorded.
package soak

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/simulate"
	"github.com/skiff-sh/skiff/internal/testing/serverproc"
)

func TestMain(m *testing.M) {
	fs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

const ns = "soak"

// sample is one observation of the server process.
type sample struct {
	at                  time.Duration
	rss, heap           int64
	goroutines, fds     int
	watches, pods, objs int
}

func BenchmarkSoak(b *testing.B) {
	duration := envDuration("DURATION", time.Hour)
	every := envDuration("SAMPLE", 30*time.Second)
	nodes := envInt("NODES", 40)
	srv := startServer(b)
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	sim := simulate.New(cs, simulate.Options{Nodes: nodes, KeepNotReadyTaint: true})
	wg.Go(func() { _ = sim.Start(ctx) })
	select {
	case <-sim.Ready():
	case <-time.After(5 * time.Minute):
		b.Fatal("simulated nodes not Ready after 5m")
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("no default ServiceAccount after 1m")
		}
		time.Sleep(200 * time.Millisecond)
	}

	var churnErrs errCount
	b.ResetTimer()
	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, duration)
	defer stop()
	every5 := func(d time.Duration, f func(r *rand.Rand)) {
		wg.Go(func() {
			r := rand.New(rand.NewSource(time.Now().UnixNano()))
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-t.C:
					f(r)
				}
			}
		})
	}

	// Nodes flapping: one at a time stops renewing for 30-90 s.
	names := sim.NodeNames()
	wg.Go(func() {
		r := rand.New(rand.NewSource(1))
		for runCtx.Err() == nil {
			n := names[r.Intn(len(names))]
			sim.PauseNode(n)
			sleep(runCtx, time.Duration(30+r.Intn(60))*time.Second)
			sim.ResumeNode(n)
			sleep(runCtx, 10*time.Second)
		}
	})
	// Deployments scaling, one rolling out.
	const deployments = 6
	for i := range deployments {
		if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(fmt.Sprintf("app-%d", i), 5), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	every5(15*time.Second, func(r *rand.Rand) {
		for i := range deployments {
			patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, r.Intn(21))
			_, err := cs.AppsV1().Deployments(ns).Patch(runCtx, fmt.Sprintf("app-%d", i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			churnErrs.add(runCtx, err)
		}
	})
	every5(time.Minute, func(r *rand.Rand) {
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"soak/rev":"%d"}}}}}`, r.Int63())
		_, err := cs.AppsV1().Deployments(ns).Patch(runCtx, "app-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		churnErrs.add(runCtx, err)
	})
	// Pods churning.
	every5(5*time.Second, func(r *rand.Rand) {
		l, err := cs.CoreV1().Pods(ns).List(runCtx, metav1.ListOptions{ResourceVersion: "0"})
		if churnErrs.add(runCtx, err) || len(l.Items) == 0 {
			return
		}
		for range 3 {
			p := l.Items[r.Intn(len(l.Items))]
			if p.OwnerReferences == nil || p.OwnerReferences[0].Kind != "ReplicaSet" {
				continue
			}
			err := cs.CoreV1().Pods(ns).Delete(runCtx, p.Name, metav1.DeleteOptions{})
			if err != nil && !strings.Contains(err.Error(), "not found") {
				churnErrs.add(runCtx, err)
			}
		}
	})
	jobs := 0
	every5(30*time.Second, func(*rand.Rand) {
		jobs++
		_, err := cs.BatchV1().Jobs(ns).Create(runCtx, job(fmt.Sprintf("job-%d", jobs)), metav1.CreateOptions{})
		churnErrs.add(runCtx, err)
	})
	// Watchers coming and going.
	for i := range 30 {
		wg.Go(func() {
			r := rand.New(rand.NewSource(int64(100 + i)))
			for runCtx.Err() == nil {
				wctx, cancel := context.WithTimeout(runCtx, time.Duration(5+r.Intn(55))*time.Second)
				watchFor(wctx, cs, i%3)
				cancel()
				sleep(runCtx, time.Duration(r.Intn(3000))*time.Millisecond)
			}
		})
	}

	// Samples.
	var samples []sample
	var out io.Writer = io.Discard
	if path := os.Getenv("SOAK_CSV"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		out = f
	}
	fmt.Fprintln(out, "seconds,rss_bytes,heap_inuse_bytes,goroutines,open_fds,watches,pods,etcd_keys")
	// SOAK_HEAP=dir keeps the server's heap profile (after a collection)
	// half-way and at the end, as mid.pb.gz and end.pb.gz: pprof -base
	// mid.pb.gz end.pb.gz shows what the second half added.
	heapDir := os.Getenv("SOAK_HEAP")
	saveHeap := func(name string) {
		if heapDir == "" {
			return
		}
		hctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		prof, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(hctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(heapDir, name+".pb.gz"), prof, 0o644)
		}
		if err != nil {
			b.Logf("heap profile %s: %v", name, err)
		}
	}
	midSaved := false
	t := time.NewTicker(every)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-runCtx.Done():
			done = true
		case <-t.C:
		}
		s, err := srv.sample(ctx, cs)
		if err != nil {
			b.Logf("sample: %v", err)
			continue
		}
		s.at = time.Since(start)
		samples = append(samples, s)
		if !midSaved && s.at >= duration/2 {
			saveHeap("mid")
			midSaved = true
		}
		fmt.Fprintf(out, "%.0f,%d,%d,%d,%d,%d,%d,%d\n", s.at.Seconds(), s.rss, s.heap, s.goroutines, s.fds, s.watches, s.pods, s.objs)
		if f, ok := out.(*os.File); ok {
			_ = f.Sync()
		}
	}
	b.StopTimer()
	saveHeap("end")
	report(b, samples, duration)
	st := sim.Stats()
	b.Logf("churn: %d jobs created, %d churn errors (%s), simulator errors %d", jobs, churnErrs.n, churnErrs.first, st.Errors)
}

// report logs the samples at a few points and the growth from the end of
// the first sixth of the run (after warm-up) to the end.
func report(b *testing.B, samples []sample, duration time.Duration) {
	if len(samples) < 4 {
		b.Fatalf("only %d samples", len(samples))
	}
	// Medians of windows damp the GC's sawtooth.
	window := func(from, to time.Duration) sample {
		var w []sample
		for _, s := range samples {
			if s.at >= from && s.at <= to {
				w = append(w, s)
			}
		}
		if len(w) == 0 {
			return sample{}
		}
		med := func(f func(sample) int64) int64 {
			v := make([]int64, len(w))
			for i, s := range w {
				v[i] = f(s)
			}
			sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
			return v[len(v)/2]
		}
		return sample{at: to, rss: med(func(s sample) int64 { return s.rss }), heap: med(func(s sample) int64 { return s.heap }),
			goroutines: int(med(func(s sample) int64 { return int64(s.goroutines) })), fds: int(med(func(s sample) int64 { return int64(s.fds) })),
			watches: int(med(func(s sample) int64 { return int64(s.watches) })), pods: int(med(func(s sample) int64 { return int64(s.pods) })),
			objs: int(med(func(s sample) int64 { return int64(s.objs) }))}
	}
	seg := duration / 6
	b.Logf("%-10s %10s %10s %10s %8s %8s %8s %10s", "window", "RSS MiB", "heap MiB", "goroutines", "fds", "watches", "pods", "etcd keys")
	var first, last sample
	for i := range 6 {
		w := window(time.Duration(i)*seg, time.Duration(i+1)*seg)
		if i == 1 {
			first = w
		}
		last = w
		b.Logf("%-10s %10.0f %10.0f %10d %8d %8d %8d %10d", fmt.Sprintf("%v-%v", time.Duration(i)*seg, time.Duration(i+1)*seg), mib(w.rss), mib(w.heap), w.goroutines, w.fds, w.watches, w.pods, w.objs)
	}
	max := sample{}
	for _, s := range samples {
		max.rss, max.heap = maxOf(max.rss, s.rss), maxOf(max.heap, s.heap)
		max.goroutines, max.fds, max.watches = maxOf(max.goroutines, s.goroutines), maxOf(max.fds, s.fds), maxOf(max.watches, s.watches)
	}
	b.Logf("peak: RSS %.0f MiB, heap %.0f MiB, %d goroutines, %d fds, %d watches", mib(max.rss), mib(max.heap), max.goroutines, max.fds, max.watches)
	b.ReportMetric(mib(last.rss-first.rss), "rss_growth_MiB")
	b.ReportMetric(mib(last.heap-first.heap), "heap_growth_MiB")
	b.ReportMetric(float64(last.goroutines-first.goroutines), "goroutine_growth")
	b.ReportMetric(float64(last.fds-first.fds), "fd_growth")
	b.ReportMetric(float64(last.watches-first.watches), "watch_growth")
}

func mib(v int64) float64 { return float64(v) / (1 << 20) }

func maxOf[T int | int64](a, b T) T {
	if a > b {
		return a
	}
	return b
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// errCount counts churn errors (those after the run ended aside).
type errCount struct {
	mu    sync.Mutex
	n     int
	first string
}

func (e *errCount) add(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	if ctx.Err() == nil {
		e.mu.Lock()
		e.n++
		if e.first == "" {
			e.first = err.Error()
		}
		e.mu.Unlock()
	}
	return true
}

// watchFor watches pods, ConfigMaps or events of every namespace until ctx
// ends, reading every event.
func watchFor(ctx context.Context, cs kubernetes.Interface, kind int) {
	opts := metav1.ListOptions{AllowWatchBookmarks: true}
	var (
		wi  watch.Interface
		err error
	)
	switch kind {
	case 0:
		wi, err = cs.CoreV1().Pods("").Watch(ctx, opts)
	case 1:
		wi, err = cs.CoreV1().ConfigMaps("").Watch(ctx, opts)
	default:
		wi, err = cs.CoreV1().Events("").Watch(ctx, opts)
	}
	if err != nil {
		sleep(ctx, time.Second)
		return
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-wi.ResultChan():
			if !ok {
				return
			}
		}
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}},
			},
		},
	}
}

func job(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](3),
			TTLSecondsAfterFinished: ptr.To[int32](30),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{simulate.RunSecondsAnnotation: "5"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "work", Image: "busybox"}}},
			},
		},
	}
}

// server is the `skiff server` process.
type server struct{ *serverproc.Server }

func startServer(b *testing.B) *server {
	return &server{serverproc.Start(b, "--node-monitor-grace-period", "20s")}
}

// sample reads the server's RSS and fds from /proc and its goroutines,
// heap, open watches and object counts from /metrics.
func (s *server) sample(ctx context.Context, cs kubernetes.Interface) (sample, error) {
	var out sample
	pid := s.Pid()
	out.rss = serverproc.ProcKiB(pid, "status", "VmRSS:")
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return out, err
	}
	out.fds = len(fds)
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	samples, err := serverproc.Metrics(mctx, cs)
	if err != nil {
		return out, err
	}
	for _, m := range samples {
		switch name, v := m.Name, m.Value; {
		case name == "go_goroutines":
			out.goroutines = int(v)
		case name == "go_memstats_heap_inuse_bytes":
			out.heap = int64(v)
		case strings.HasPrefix(name, "apiserver_longrunning_requests{") && strings.Contains(name, `verb="WATCH"`):
			out.watches += int(v)
		case strings.HasPrefix(name, "apiserver_storage_objects{"):
			out.objs += int(v)
		}
	}
	pods, err := cs.CoreV1().Pods("").List(mctx, metav1.ListOptions{ResourceVersion: "0"})
	if err == nil {
		out.pods = len(pods.Items)
	}
	return out, nil
}
