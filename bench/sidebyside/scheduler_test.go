package sidebyside_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/pki"
)

var (
	rounds    = flag.Int("rounds", 2, "rounds; each runs every scheduler once, in the opposite order of the round before")
	nodes     = flag.Int("nodes", 500, "simulated nodes")
	pods      = flag.Int("pods", 5000, "pods created before the scheduler starts")
	only      = flag.String("schedulers", "skiff,kube-scheduler", "schedulers to run, comma-separated (skiff, kube-scheduler, skiff-base)")
	base      = flag.String("base", "", "a second skiff binary, whose scheduler runs as skiff-base (to compare two trees)")
	profiles  = flag.String("profiles", "", "directory for each scheduler's heap profile after its run (kept only when set)")
	apiServer = flag.String("apiserver", "skiff", "the API server both schedulers run against: skiff (skiff server) or upstream (etcd and kube-apiserver v1.37.2)")
	schedCPU  = flag.Float64("schedcpu", 0, "cores each scheduler may use (a CFS quota of a cgroup v1 cpu controller, /sys/fs/cgroup/cpu); 0 leaves it unlimited")
	logs      = flag.String("logs", "", "directory for the processes' logs (default: kept only on failure, in $TMPDIR/skiff-sidebyside-logs)")
)

const (
	upstreamBinEnv = "SKIFF_UPSTREAM_BIN"
	upstreamCache  = "/var/cache/skiff-upstream/v1.37.2/bin"
	namespace      = "bench"
	// The clock ticks of /proc/<pid>/stat's utime and stime (USER_HZ,
	// 100 on Linux).
	userHZ = 100
)

// run is one scheduler's run.
type run struct {
	scheduler  string
	throughput float64       // pods/s, first binding to last
	window     time.Duration // first binding to last
	startup    time.Duration // process start to first binding
	cpuPerPod  time.Duration // scheduler CPU over the window ÷ pods
	cpuTotal   time.Duration // scheduler CPU from its start to the last binding
	apiCPU     time.Duration // the API server's CPU (and etcd's) over the window ÷ pods
	simCPU     time.Duration // skiff simulate's CPU over the window ÷ pods
	events     int           // Scheduled events in the namespace after the run
	peakRSS    int64         // VmHWM, bytes
	rss        int64         // VmRSS after the last binding, bytes
	rssFile    int64         // of which mapped from files (the binary), bytes
}

// BenchmarkScheduler runs skiff scheduler and kube-scheduler side by side
// (see the package comment). Run it with -benchtime=1x: each iteration is
// every round.
func BenchmarkScheduler(b *testing.B) {
	names := strings.Split(*only, ",")
	binaries := map[string]string{}
	for _, n := range names {
		switch n {
		case "skiff":
			binaries[n] = skiffBinary(b)
		case "kube-scheduler":
			binaries[n] = upstreamScheduler(b)
		case "skiff-base":
			if *base == "" {
				b.Fatal("-schedulers skiff-base needs -base")
			}
			binaries[n] = *base
		default:
			b.Fatalf("-schedulers: unknown scheduler %q", n)
		}
	}
	if binaries["skiff"] == "" {
		binaries["skiff"] = skiffBinary(b) // the server and simulator
	}
	// The skiff scheduler runs from a file of its own, as kube-scheduler
	// does: pages of an executable that skiff simulate maps too cannot be
	// paged out by the scheduler (memtrim), which would count them in its
	// RSS.
	if slices.Contains(names, "skiff") {
		binaries["skiff-scheduler"] = privateCopy(b, binaries["skiff"])
	}
	results := map[string][]run{}
	for i := 0; i < b.N; i++ {
		order := slices.Clone(names)
		for r := 0; r < *rounds; r++ {
			for _, name := range order {
				res := runScheduler(b, binaries, name, fmt.Sprintf("round%d-%s", r+1, name))
				results[name] = append(results[name], res)
				fmt.Printf("round %d %-15s %7.1f pods/s  window %6.2fs  startup %6.2fs  cpu %5.2f ms/pod (from start %5.2f)  peak RSS %4d MiB  RSS %4d MiB (file %3d MiB)  API server cpu %5.2f ms/pod  simulate %5.2f  Scheduled events %d\n",
					r+1, name, res.throughput, res.window.Seconds(), res.startup.Seconds(),
					ms(res.cpuPerPod), ms(res.cpuTotal/time.Duration(*pods)), res.peakRSS>>20, res.rss>>20, res.rssFile>>20,
					ms(res.apiCPU), ms(res.simCPU), res.events)
			}
			slices.Reverse(order)
		}
	}
	b.StopTimer()
	for _, name := range names {
		rs := results[name]
		metric := func(f func(run) float64) float64 { return median(rs, f) }
		prefix := strings.ReplaceAll(name, "-", "_") + "_"
		b.ReportMetric(metric(func(r run) float64 { return r.throughput }), prefix+"pods/s")
		b.ReportMetric(metric(func(r run) float64 { return ms(r.cpuPerPod) }), prefix+"cpu_ms/pod")
		b.ReportMetric(metric(func(r run) float64 { return float64(r.peakRSS) / (1 << 20) }), prefix+"peak_rss_MiB")
		b.ReportMetric(metric(func(r run) float64 { return ms(r.apiCPU) }), prefix+"apiserver_cpu_ms/pod")
	}
	s, u := results["skiff"], results["kube-scheduler"]
	if len(s) == 0 || len(u) == 0 {
		return
	}
	ratio := func(f func(run) float64) float64 { return median(s, f) / median(u, f) }
	tp := ratio(func(r run) float64 { return r.throughput })
	cpu := ratio(func(r run) float64 { return ms(r.cpuPerPod) })
	rss := ratio(func(r run) float64 { return float64(r.peakRSS) })
	fmt.Printf("skiff ÷ kube-scheduler (medians of %d rounds): throughput %.2f×, CPU per pod %.2f×, peak RSS %.2f×\n", *rounds, tp, cpu, rss)
	b.ReportMetric(tp, "throughput_ratio")
	b.ReportMetric(cpu, "cpu_ratio")
	b.ReportMetric(rss, "peak_rss_ratio")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(rs []run, f func(run) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return medianOf(v)
}

// medianOf is the median of v (which it sorts).
func medianOf(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// runScheduler runs one scheduler on a fresh cluster and measures it.
func runScheduler(b *testing.B, binaries map[string]string, name, label string) run {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "skiff-sidebyside-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var procs []*proc
	// Stop the processes, last started first, and keep their logs as asked.
	defer func() {
		for _, p := range slices.Backward(procs) {
			p.stop()
		}
		keepLogs(b, label, &procs)
	}()
	skiff := binaries["skiff"]
	var cp *controlPlane
	switch *apiServer {
	case "skiff":
		cp = startSkiff(b, dir, skiff, "--disable-scheduler", "--disable-controller-manager")
	case "upstream":
		cp = startUpstream(b, dir, apiServerOnly)
	default:
		b.Fatalf("-apiserver: unknown API server %q", *apiServer)
	}
	procs = append(procs, cp.procs...)
	cfg, client := cp.config, cp.client()

	// Quiet nodes, as scheduler_perf's (which have no kubelets): bound pods
	// never start, no status heartbeats, Leases renewed rarely.
	sim := start(b, "simulate", skiff, "simulate", "--kubeconfig", cp.admin, "--nodes", strconv.Itoa(*nodes),
		"--pod-start-latency", "1h", "--status-update-frequency", "1h", "--lease-duration", "1h")
	procs = append(procs, sim)
	sim.waitFor(b, 3*time.Minute, "simulated nodes Ready")

	createPods(b, ctx, client, *pods)
	bound := watchPods(b, ctx, client, *pods, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	if n := bound.count(); n != 0 {
		b.Fatalf("%d pods bound before the scheduler started", n)
	}

	kubeconfig := writeKubeconfig(b, dir, cfg.Host, cp.pki, "kube-scheduler")
	config := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(schedulerConfig, kubeconfig)), 0o644); err != nil {
		b.Fatal(err)
	}
	port := freePort(b)
	var sched *proc
	began := time.Now()
	switch name {
	case "skiff", "skiff-base":
		bin := binaries[name]
		if name == "skiff" {
			bin = binaries["skiff-scheduler"]
		}
		sched = start(b, name, bin, "scheduler", "--config", config,
			"--address", fmt.Sprintf("127.0.0.1:%d", port), "--profiling")
	case "kube-scheduler":
		sched = start(b, name, binaries[name], "--config", config,
			"--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
			"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
			"--authorization-always-allow-paths", "/healthz,/readyz,/livez,/debug/pprof/*")
	}
	procs = append(procs, sched)
	if *schedCPU > 0 {
		defer capCPU(b, label, sched, *schedCPU)()
	}

	var first, last time.Time
	var cpuFirst, apiFirst, simFirst time.Duration
	apiCPU := func() (d time.Duration) {
		for _, p := range cp.procs {
			d += p.cpu(b)
		}
		return d
	}
	select {
	case first = <-bound.first:
		cpuFirst, apiFirst, simFirst = sched.cpu(b), apiCPU(), sim.cpu(b)
	case <-sched.done:
		b.Fatalf("%s exited: %v", name, sched.err)
	case <-time.After(5 * time.Minute):
		b.Fatalf("%s bound no pod in 5m", name)
	}
	select {
	case last = <-bound.last:
	case <-sched.done:
		b.Fatalf("%s exited: %v", name, sched.err)
	case <-time.After(15 * time.Minute):
		b.Fatalf("%s bound %d of %d pods in 15m", name, bound.count(), *pods)
	}
	cpuLast, apiLast, simLast := sched.cpu(b), apiCPU(), sim.cpu(b)
	hwm, rss, rssFile := sched.memory(b)
	events := scheduledEvents(b, ctx, client)
	fmt.Printf("%s: the API server's requests during the run:\n%s", label, requestCounts(b, ctx, client))
	if *profiles != "" {
		heapProfile(b, ctx, client, name, port, "gc=1", filepath.Join(*profiles, label+".heap.pb.gz"))
		// The text form ends with the runtime's MemStats.
		heapProfile(b, ctx, client, name, port, "debug=1", filepath.Join(*profiles, label+".heap.txt"))
	}
	window := last.Sub(first)
	return run{
		scheduler:  name,
		throughput: float64(*pods) / window.Seconds(),
		window:     window,
		startup:    first.Sub(began),
		cpuPerPod:  (cpuLast - cpuFirst) / time.Duration(*pods),
		cpuTotal:   cpuLast,
		peakRSS:    hwm,
		rss:        rss,
		rssFile:    rssFile,
		apiCPU:     (apiLast - apiFirst) / time.Duration(*pods),
		simCPU:     (simLast - simFirst) / time.Duration(*pods),
		events:     events,
	}
}

// requestCounts is the API server's apiserver_request_total over the run
// (each run has a fresh API server), one line per series of pods, bindings,
// events and nodes with a count of at least 100.
func requestCounts(b *testing.B, ctx context.Context, client kubernetes.Interface) string {
	b.Helper()
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatalf("API server metrics: %v", err)
	}
	var out strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		n, _ := strconv.ParseFloat(value, 64)
		if n < 100 || !(strings.Contains(labels, `resource="pods"`) || strings.Contains(labels, `resource="events"`) || strings.Contains(labels, `resource="nodes"`)) {
			continue
		}
		var keep []string
		for _, kv := range strings.Split(strings.TrimPrefix(labels, "apiserver_request_total{"), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "verb", "group", "resource", "subresource", "code":
				if v != `""` {
					keep = append(keep, kv)
				}
			}
		}
		fmt.Fprintf(&out, "  %s %.0f\n", strings.Join(keep, " "), n)
	}
	return out.String()
}

// scheduledEvents counts the Scheduled events the scheduler wrote in the
// benchmark's namespace, a few seconds after the last binding (both
// schedulers write them from a queue, behind the bindings).
func scheduledEvents(b *testing.B, ctx context.Context, client kubernetes.Interface) int {
	b.Helper()
	count := func() int {
		list, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
		if err != nil {
			b.Fatalf("list events: %v", err)
		}
		return len(list.Items)
	}
	n := count()
	for range 10 {
		time.Sleep(time.Second)
		m := count()
		if m == n {
			break
		}
		n = m
	}
	return n
}

// schedulerConfig is read by both schedulers: the default profile, client
// rates that do not pace the run (Skiff's defaults; kube-scheduler's are
// 50/100), no leader election.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 5000
  burst: 10000
leaderElection:
  leaderElect: false
`

// createPods makes the namespace and the pending pods, 32 clients at once.
func createPods(b *testing.B, ctx context.Context, client kubernetes.Interface, n int) {
	b.Helper()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// No controller manager runs to make the ServiceAccount pods name.
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				if err := createRetrying(ctx, func() error {
					_, err := client.CoreV1().Pods(namespace).Create(ctx, pod(i), metav1.CreateOptions{})
					return err
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("create pods: %v", err)
	}
}

// createRetrying runs create until it succeeds, retrying for a minute,
// with back-off, the answers an overloaded API server gives (a 500 for an
// etcd request that timed out, 429, 504), as a controller would retry;
// AlreadyExists on a retry means an earlier attempt was written after all.
func createRetrying(ctx context.Context, create func() error) error {
	delay, deadline := 100*time.Millisecond, time.Now().Add(time.Minute)
	for attempt := 0; ; attempt++ {
		err := create()
		switch {
		case err == nil, attempt > 0 && apierrors.IsAlreadyExists(err):
			return nil
		case !(apierrors.IsInternalError(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)),
			time.Now().After(deadline):
			return err
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// pod is scheduler_perf's pod-default: one container requesting (and
// limited to) 100m CPU and 500Mi memory.
func pod(i int) *corev1.Pod {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Ports:     []corev1.ContainerPort{{ContainerPort: 80}},
				Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl},
			}},
		},
	}
}

// podWatch reports when a watch on the benchmark's namespace first sees
// a pod in a state, and when it has seen want pods in it.
type podWatch struct {
	first, last chan time.Time
	mu          sync.Mutex
	seen        map[string]bool
}

func (w *podWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// watchPods starts a pod informer on the benchmark's namespace, keeping
// only the pods' metadata, spec.nodeName and status.phase, and counts the
// pods in which in is true.
func watchPods(b *testing.B, ctx context.Context, client kubernetes.Interface, want int, in func(*corev1.Pod) bool) *podWatch {
	b.Helper()
	w := &podWatch{first: make(chan time.Time, 1), last: make(chan time.Time, 1), seen: map[string]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTransform(func(obj any) (any, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				meta := p.ObjectMeta
				meta.ManagedFields = nil
				return &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{NodeName: p.Spec.NodeName}, Status: corev1.PodStatus{Phase: p.Status.Phase}}, nil
			}
			return obj, nil
		}))
	see := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || !in(p) {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.seen[p.Name] {
			return
		}
		w.seen[p.Name] = true
		if len(w.seen) == 1 {
			w.first <- now
		}
		if len(w.seen) == want {
			w.last <- now
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: see, UpdateFunc: func(_, o any) { see(o) },
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			b.Fatalf("informer of %v did not sync", typ)
		}
	}
	return w
}

// keepLogs writes the output of the processes to -logs, or on failure to
// $TMPDIR/skiff-sidebyside-logs, each file named label-process.log.
func keepLogs(b *testing.B, label string, procs *[]*proc) {
	keep := *logs
	if keep == "" && b.Failed() {
		keep = filepath.Join(os.TempDir(), "skiff-sidebyside-logs")
	}
	if keep == "" {
		return
	}
	_ = os.MkdirAll(keep, 0o755)
	for _, p := range *procs {
		_ = os.WriteFile(filepath.Join(keep, label+"-"+p.name+".log"), []byte(p.output()), 0o644)
	}
}

// heapProfile saves the scheduler's heap profile (after a GC). Skiff's is
// behind delegated auth: a token of a ServiceAccount bound to
// cluster-admin; kube-scheduler's path is allowed to anyone by its flags.
func heapProfile(b *testing.B, ctx context.Context, client kubernetes.Interface, name string, port int, query, file string) {
	b.Helper()
	scheme, token := "http", ""
	if name == "kube-scheduler" {
		scheme = "https"
	} else {
		token = profilerToken(b, ctx, client)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://127.0.0.1:%d/debug/pprof/heap?%s", scheme, port, query), nil)
	if err != nil {
		b.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatalf("%s heap profile: %v", name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s heap profile: %v %s: %s", name, err, resp.Status, body)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(file, body, 0o644); err != nil {
		b.Fatal(err)
	}
}

func profilerToken(b *testing.B, ctx context.Context, client kubernetes.Interface) string {
	b.Helper()
	const sa = "bench-profiler"
	if _, err := client.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: sa}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	tr, err := client.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("token for %s: %v", sa, err)
	}
	return tr.Status.Token
}

func skiffBinary(b *testing.B) string {
	b.Helper()
	bin, err := buildOnce()
	if err != nil {
		b.Fatalf("skiff binary: %v", err)
	}
	return bin
}

// buildOnce returns $SKIFF_BIN, or a skiff built from this tree once.
var buildOnce = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("SKIFF_BIN"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "skiff-bench-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "skiff")
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/skiff")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/skiff: %w\n%s", err, out)
	}
	return bin, nil
})

// capCPU limits the process to cores of CPU time (CFS quota in a cgroup v1
// cpu controller of its own) and returns a function that removes the cgroup
// after the process stopped. The process runs unlimited for the moment
// between its start and this call, before it has connected to anything.
func capCPU(b *testing.B, label string, p *proc, cores float64) func() {
	b.Helper()
	const root, period = "/sys/fs/cgroup/cpu", 100000
	dir := filepath.Join(root, "skiff-sidebyside-"+label)
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatalf("-schedcpu: %v (needs root and a cgroup v1 cpu controller at %s)", err, root)
	}
	write := func(file, value string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
			b.Fatalf("-schedcpu: %s: %v", file, err)
		}
	}
	write("cpu.cfs_period_us", strconv.Itoa(period))
	write("cpu.cfs_quota_us", strconv.Itoa(int(cores*period)))
	write("cgroup.procs", strconv.Itoa(p.cmd.Process.Pid))
	return func() {
		p.stop()
		_ = os.Remove(dir)
	}
}

// privateCopy copies the executable at path to a file of its own, removed
// when the benchmark ends.
func privateCopy(b *testing.B, path string) string {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	dst := filepath.Join(dir, filepath.Base(path))
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		b.Fatal(err)
	}
	// Synced, so that its pages in the page cache are clean: the kernel
	// pages out only clean pages of a mapped file.
	if _, err := f.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		b.Fatal(err)
	}
	return dst
}

func upstreamScheduler(b *testing.B) string {
	b.Helper()
	dir := os.Getenv(upstreamBinEnv)
	if dir == "" {
		dir = upstreamCache
	}
	bin := filepath.Join(dir, "kube-scheduler")
	if _, err := os.Stat(bin); err != nil {
		b.Skipf("upstream kube-scheduler v1.37.2 not built in %s (run `hack/upstream/build.sh kube-scheduler`, or set %s)", dir, upstreamBinEnv)
	}
	return bin
}

// writeKubeconfig writes a kubeconfig for the client certificate
// pki/<name>.crt that skiff server issued.
func writeKubeconfig(b *testing.B, dir, server, pkiDir, name string) string {
	b.Helper()
	path := filepath.Join(dir, name+".kubeconfig")
	if err := pki.WriteFileKubeconfig(path, server, pkiDir, name); err != nil {
		b.Fatal(err)
	}
	return path
}

func freePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a program the benchmark runs, its output kept in memory.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
	err  error
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

func start(b *testing.B, name, path string, args ...string) *proc {
	b.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitFor waits until the output contains s.
func (p *proc) waitFor(b *testing.B, timeout time.Duration, s string) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.output(), s) {
		select {
		case <-p.done:
			b.Fatalf("%s exited (%v) before %q:\n%s", p.name, p.err, s, tail(p.output()))
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: no %q after %v:\n%s", p.name, s, timeout, tail(p.output()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

// cpu is the process's user and system time so far.
func (p *proc) cpu(b *testing.B) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / userHZ
}

// memory is the process's peak and current RSS, and the part of the
// current one mapped from files (mostly its binary), in bytes.
func (p *proc) memory(b *testing.B) (hwm, rss, file int64) {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmHWM":
			hwm = kb << 10
		case "VmRSS":
			rss = kb << 10
		case "RssFile":
			file = kb << 10
		}
	}
	return hwm, rss, file
}
